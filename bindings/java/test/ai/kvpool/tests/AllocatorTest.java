package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static ai.kvpool.tests.Configs.range;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.AllocKind;
import ai.kvpool.AllocList;
import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.Stats;
import ai.kvpool.Status;
import ai.kvpool.SwaAvailability;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import org.junit.Test;

/** Slot and page allocators, request rows, check and stats (alloc.h, req.h, check.h). */
public class AllocatorTest {
  /** The worked example of SGLANG_SEMANTICS.md section 2.4 (page_size 4). */
  @Test
  public void workedExample() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      assertEquals(AllocKind.PAGED, pool.allocKind());
      assertEquals(64, pool.available());
      assertArrayEquals(range(4, 67), pool.alloc(64));  // pages 1..16 in order
      assertEquals(0, pool.available());
      // Free one slot of each page, one call each: freed pages go, sorted, to the front.
      for (long page : new long[] {11, 3, 7, 2, 9, 5}) {
        pool.free(new long[] {page * 4 + 1});
      }
      assertArrayEquals(new long[] {5, 9, 2, 7, 3, 11}, pool.freeList(AllocList.FREE));
      assertEquals(24, pool.available());

      long[] extended = pool.extend(new long[] {6, 0, 8}, new long[] {13, 5, 10}, new long[] {45, -1, 55});
      assertArrayEquals(new long[] {46, 47, 20, 21, 22, 23, 36, 8, 9, 10, 11, 28, 12, 13}, extended);
      assertArrayEquals(new long[] {11}, pool.freeList(AllocList.FREE));

      assertArrayEquals(new long[] {26, 44, 63}, pool.decode(new long[] {7, 9, 12}, new long[] {25, 39, 62}));
      assertArrayEquals(new long[0], pool.freeList(AllocList.FREE));

      // A request needing a page now fails and changes nothing.
      expect(Status.OUT_OF_MEMORY, () -> pool.decode(new long[] {5}, new long[] {7}));
      assertEquals(0, pool.available());
      assertTrue(pool.check(), pool.check().startsWith("ok: 16 pages held, 0 free"));
    }
  }

  @Test
  public void doubleFreeIsRejectedWithAMessage() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      long[] slots = pool.alloc(4);
      pool.free(slots);
      KvPoolException e = expect(Status.INVALID_ARGUMENT, () -> pool.free(slots));
      assertTrue(e.getMessage(), e.getMessage().contains("kvalloc_free"));
      assertEquals(64, pool.available());
      expect(Status.INVALID_ARGUMENT, () -> pool.free(new long[] {0}));
    }
  }

  @Test
  public void outOfMemoryChangesNothing() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      pool.alloc(8);
      long[] before = pool.freeList(AllocList.FREE);
      expect(Status.OUT_OF_MEMORY, () -> pool.alloc(60));
      expect(Status.OUT_OF_MEMORY, () -> pool.extend(new long[] {0}, new long[] {30000}, new long[] {-1}));
      expect(Status.OUT_OF_MEMORY, () -> pool.extend(new long[] {0}, new long[] {1L << 40}, new long[] {-1}));
      assertEquals(56, pool.available());
      assertArrayEquals(before, pool.freeList(AllocList.FREE));
      // The third failed in Java, before C: no pool holds 2^40 slots.
      assertEquals(2, pool.stats().getAllocFailures());
    }
  }

  @Test
  public void backupRestore() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      long[] first = pool.alloc(8);
      long[] before = pool.freeList(AllocList.FREE);
      long token = pool.backup();
      pool.alloc(12);
      pool.free(first);
      assertEquals(52, pool.available());
      pool.restore(token);
      assertEquals(56, pool.available());
      assertArrayEquals(before, pool.freeList(AllocList.FREE));
      expect(Status.INVALID_ARGUMENT, () -> pool.restore(token + 1));
      pool.free(first);  // still held: allocated before the backup
    }
  }

  @Test
  public void freeGroup() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      long[] slots = pool.alloc(8);
      pool.freeGroupBegin();
      expect(Status.INVALID_ARGUMENT, pool::freeGroupBegin);
      pool.free(new long[] {slots[0]});
      pool.free(new long[] {slots[4]});
      assertEquals(56, pool.available());
      assertEquals(8, pool.stats().getTokenPending());
      pool.freeGroupEnd();
      assertEquals(64, pool.available());
      expect(Status.INVALID_ARGUMENT, pool::freeGroupEnd);
    }
  }

  @Test
  public void deferredFreesMergeAndSort() {
    try (Pool pool = new Pool(Configs.PREFILL)) {
      long[] slots = pool.alloc(12);  // pages 1, 2, 3
      pool.free(Arrays.copyOfRange(slots, 8, 12));
      pool.free(Arrays.copyOfRange(slots, 0, 4));
      long[] released = pool.freeList(AllocList.RELEASE);
      Arrays.sort(released);
      assertArrayEquals(new long[] {1, 3}, released);
      assertArrayEquals(range(4, 16), pool.freeList(AllocList.FREE));
      assertEquals(60, pool.available());
      pool.mergeAndSort();
      assertArrayEquals(new long[0], pool.freeList(AllocList.RELEASE));
      long[] merged = pool.freeList(AllocList.FREE);
      assertArrayEquals(new long[] {1, 3, 4}, Arrays.copyOf(merged, 3));
      assertEquals(15, merged.length);
    }
  }

  @Test
  public void tokenAllocatorAndClear() {
    try (Pool pool = new Pool(Configs.TOKEN)) {
      assertEquals(AllocKind.TOKEN, pool.allocKind());
      long[] slots = pool.alloc(3);
      assertArrayEquals(new long[] {1, 2, 3}, slots);
      pool.free(new long[] {1});
      long[] fifo = Arrays.copyOf(range(4, 17), 14);
      fifo[13] = 1;  // freed slots go to the back
      assertArrayEquals(fifo, pool.freeList(AllocList.FREE));
      assertArrayEquals(new long[] {4, 5, 6}, pool.extend(new long[] {0, 2}, new long[] {2, 3}, new long[] {-1, 3}));
      pool.clearAllocator();
      assertEquals(16, pool.available());
      assertArrayEquals(range(1, 16), pool.freeList(AllocList.FREE));
    }
    // A free list longer than FreeList's first buffer.
    try (Pool pool = new Pool(Configs.TOKEN.replace("\"max_total_tokens\":16", "\"max_total_tokens\":200"))) {
      assertArrayEquals(range(1, 200), pool.freeList(AllocList.FREE));
    }
  }

  @Test
  public void swa() {
    try (Pool pool = new Pool(Configs.SWA)) {
      assertEquals(AllocKind.SWA, pool.allocKind());
      checkSwa(pool.swaAvailable(), 16, 16);
      long[] slots = pool.alloc(3);
      assertArrayEquals(new long[] {1, 2, 3}, slots);
      checkSwa(pool.swaAvailable(), 13, 13);
      Set<Long> window = new HashSet<>();
      for (long w : pool.translateSwa(slots)) {
        assertTrue("window slot " + w, w >= 1 && w <= 16 && window.add(w));
      }
      pool.freeSwa(new long[] {1});
      checkSwa(pool.swaAvailable(), 13, 14);
      assertArrayEquals(new long[] {0}, pool.translateSwa(new long[] {1}));
      assertEquals(14, pool.freeList(AllocList.SWA_FREE).length);
      assertArrayEquals(new long[0], pool.freeList(AllocList.SWA_RELEASE));
      pool.free(slots);
      checkSwa(pool.swaAvailable(), 16, 16);
      expect(Status.UNSUPPORTED, pool::available);
      expect(Status.UNSUPPORTED, () -> pool.extend(new long[] {0}, new long[] {1}, new long[] {-1}));
      Stats stats = pool.stats();
      assertEquals(AllocKind.SWA, stats.getKind());
      assertEquals(16, stats.getSwaCapacity());
    }
    try (Pool paged = new Pool(Configs.PAGED)) {
      expect(Status.UNSUPPORTED, paged::swaAvailable);
      expect(Status.UNSUPPORTED, () -> paged.translateSwa(new long[] {4}));
      expect(Status.UNSUPPORTED, () -> paged.freeSwa(new long[] {4}));
      expect(Status.UNSUPPORTED, () -> paged.freeList(AllocList.SWA_FREE));
    }
  }

  private static void checkSwa(SwaAvailability a, long full, long swa) {
    assertEquals(a.toString(), full, a.getFull());
    assertEquals(a.toString(), swa, a.getSwa());
  }

  @Test
  public void requestRows() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      assertEquals(8, pool.reqAvailable());
      int[] rows = pool.reqAlloc(2);
      assertArrayEquals(new int[] {1, 2}, rows);  // row 0 is reserved
      pool.reqWrite(rows[0], 1, new long[] {4, 5, 6});
      assertArrayEquals(new long[] {4, 5, 6}, pool.reqRead(rows[0], 1, 3));
      pool.reqWriteBatch(rows, new long[] {2, 0}, new long[] {3, 2}, new long[] {4, 5}, new long[] {6, 8, 9});
      assertArrayEquals(new long[] {4, 5, 6}, pool.reqRead(rows[0], 0, 3));
      assertArrayEquals(new long[] {8, 9}, pool.reqRead(rows[1], 0, 2));
      expect(Status.INVALID_ARGUMENT,
          () -> pool.reqWriteBatch(rows, new long[] {2, 0}, new long[] {3, 2}, new long[] {4, 5}, new long[] {7}));
      assertArrayEquals(new long[] {6, 9}, pool.lastLoc(rows, new long[] {3, 2}));
      assertArrayEquals(new long[] {-1, 8}, pool.lastLoc(rows, new long[] {0, 1}));
      expect(Status.INVALID_ARGUMENT, () -> pool.reqRead(rows[0], 62, 3));
      expect(Status.OUT_OF_MEMORY, () -> pool.reqAlloc(7));
      assertEquals(6, pool.reqAvailable());
      pool.reqFree(new int[] {rows[0]});
      expect(Status.INVALID_ARGUMENT, () -> pool.reqFree(new int[] {rows[0]}));
      assertArrayEquals(new int[] {3, 4, 5, 6, 7, 8}, pool.reqAlloc(6));  // FIFO reuse
      pool.reqClear();
      assertEquals(8, pool.reqAvailable());
    }
  }

  /** The engine loop: rows, extend from the last locations, write the batch, decode. */
  @Test
  public void prefillThenDecode() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      int[] rows = pool.reqAlloc(2);
      long[] prefix = {0, 0};
      long[] seqLens = {5, 3};
      long[] slots = pool.extend(prefix, seqLens, pool.lastLoc(rows, prefix));
      assertArrayEquals(new long[] {4, 5, 6, 7, 8, 12, 13, 14}, slots);
      pool.reqWriteBatch(rows, prefix, seqLens, new long[0], slots);
      long[] last = pool.lastLoc(rows, seqLens);
      assertArrayEquals(new long[] {8, 14}, last);
      long[] next = pool.decode(new long[] {6, 4}, last);
      assertArrayEquals(new long[] {9, 15}, next);
      pool.reqWrite(rows[0], 5, new long[] {next[0]});
      pool.reqWrite(rows[1], 3, new long[] {next[1]});
      String report = pool.check();
      assertTrue(report, report.startsWith("ok: 3 pages held, 13 free, 2 rows held"));
    }
  }

  @Test
  public void checkAndStats() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      String report = pool.check();
      assertTrue(report, report.startsWith("ok: 0 pages held, 16 free, 0 rows held"));
      long[] slots = pool.alloc(8);
      expect(Status.OUT_OF_MEMORY, () -> pool.alloc(100));
      pool.free(new long[] {slots[0]});
      expect(Status.INVALID_ARGUMENT, () -> pool.free(new long[] {slots[0]}));
      pool.reqAlloc(2);
      report = pool.check();
      assertTrue(report, report.startsWith("ok: 1 pages held, 15 free, 2 rows held"));

      Stats s = pool.stats();
      assertEquals(AllocKind.PAGED, s.getKind());
      assertEquals(64, s.getTokenCapacity());
      assertEquals(60, s.getTokenAvailable());
      assertEquals(4, s.getTokenHeld());
      assertEquals(0, s.getTokenPending());
      assertEquals(0, s.getSwaCapacity());
      assertEquals(8, s.getReqCapacity());
      assertEquals(6, s.getReqAvailable());
      assertEquals(0, s.getMambaCapacity());
      assertEquals(pool.plan().getKvMemoryBytes(), s.getKvBytes());
      assertEquals(pool.plan().getReqTableBytes(), s.getReqTableBytes());
      assertEquals(1, s.getAllocCalls());
      assertEquals(1, s.getFreeCalls());
      assertEquals(1, s.getAllocFailures());
      assertEquals(1, s.getRejectedCalls());
    }
  }

  @Test
  public void closedPoolThrows() {
    Pool pool = new Pool(Configs.PAGED);
    pool.close();
    expect(Status.INVALID_ARGUMENT, () -> pool.alloc(4));
    expect(Status.INVALID_ARGUMENT, pool::check);
    expect(Status.INVALID_ARGUMENT, pool::stats);
    expect(Status.INVALID_ARGUMENT, () -> pool.reqAlloc(1));
  }

  @Test
  public void argumentsCheckedInJava() {
    try (Pool pool = new Pool(Configs.PAGED)) {
      org.junit.Assert.assertThrows(IllegalArgumentException.class, () -> pool.alloc(-1));
      org.junit.Assert.assertThrows(NullPointerException.class, () -> pool.free(null));
      org.junit.Assert.assertThrows(NullPointerException.class, () -> pool.extend(null, new long[0], new long[0]));
      assertEquals(0, pool.alloc(0).length);
    }
  }
}
