package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.Accounting;
import ai.kvpool.EventType;
import ai.kvpool.InsertResult;
import ai.kvpool.KvEvent;
import ai.kvpool.MatchResult;
import ai.kvpool.PageHash;
import ai.kvpool.Pool;
import ai.kvpool.RadixSizes;
import ai.kvpool.SeqBegin;
import ai.kvpool.SeqInfo;
import ai.kvpool.Status;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.Test;

/** The radix prefix cache, KV events and the request API (radix.h, seq.h). */
public class PrefixCacheTest {
  /** page_size 4, 128 tokens, a radix cache with LRU eviction and KV events. */
  static final String CACHE = "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8},"
      + "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":128,\"max_running_requests\":8,"
      + "\"max_context_len\":256},\"prefix_cache\":{\"kind\":\"radix\",\"eviction\":\"lru\",\"events\":true}}";
  /** The same pool with the chunk cache (no radix tree). */
  static final String CHUNK = CACHE.replace("{\"kind\":\"radix\",\"eviction\":\"lru\",\"events\":true}",
      "{\"kind\":\"chunk\"}");

  static int[] tokens(int from, int n) {
    return IntStream.range(from, from + n).toArray();
  }

  static Accounting accounting(Pool pool) {
    Accounting a = pool.accounting();
    assertEquals(128, a.getCapacity());
    assertTrue(a.toString(), a.holds());
    assertEquals(a.toString(), a.getCapacity(),
        a.getAvailable() + a.getEvictable() + a.getProtected() + a.getUncached());
    assertTrue(pool.check(), pool.check().startsWith("ok"));
    return a;
  }

  @Test
  public void prefillDecodeFinishReuse() {
    try (Pool pool = new Pool(CACHE)) {
      int[] prompt = tokens(100, 10);
      SeqBegin a = pool.begin(prompt, null);
      assertNotEquals(0, a.getSeq());
      assertEquals(0, a.getCached());
      long[] slots = pool.seqExtend(new long[] {a.getSeq()}, new long[] {10});
      assertEquals(10, slots.length);
      SeqInfo info = pool.seqInfo(a.getSeq());
      assertEquals(8, info.getCached());  // the two whole pages went to the tree
      assertEquals(10, info.getTokens());
      assertEquals(10, info.getComputed());
      assertEquals(0, info.getPrefixHit());
      assertTrue(info.getRow() >= 1);
      assertArrayEquals(slots, pool.seqSlots(a.getSeq()));
      Accounting acc = accounting(pool);
      assertEquals(8, acc.getProtected());
      assertEquals(128 - 12, acc.getAvailable());

      long[] d = pool.seqDecode(new long[] {a.getSeq()}, new int[] {555});
      assertArrayEquals(new long[] {slots[9] + 1}, d);  // same page
      assertEquals(11, pool.seqInfo(a.getSeq()).getTokens());
      pool.finish(a.getSeq(), 11);
      RadixSizes sizes = pool.radixSizes();
      assertEquals(8, sizes.getTotal());
      assertEquals(8, sizes.getEvictable());
      assertEquals(0, sizes.getProtected());
      expect(Status.INVALID_ARGUMENT, () -> pool.finish(a.getSeq(), 11));  // double finish
      expect(Status.INVALID_ARGUMENT, () -> pool.seqInfo(a.getSeq()));
      accounting(pool);

      // The same prompt again: its two pages come from the cache.
      SeqBegin b = pool.begin(prompt, null);
      assertEquals(8, b.getCached());
      assertNotEquals(a.getSeq(), b.getSeq());
      assertArrayEquals(Arrays.copyOf(slots, 8), pool.seqSlots(b.getSeq()));
      assertEquals(8, pool.seqInfo(b.getSeq()).getPrefixHit());
      assertEquals(-1, pool.seqInfo(b.getSeq()).getRow());
      assertEquals(2, pool.seqExtend(new long[] {b.getSeq()}, new long[] {2}).length);
      assertEquals(10, pool.seqInfo(b.getSeq()).getComputed());

      // Retract keeps the request; extend recomputes only what is not cached.
      assertEquals(8, pool.retract(b.getSeq()));
      assertEquals(-1, pool.seqInfo(b.getSeq()).getRow());
      accounting(pool);
      assertEquals(2, pool.seqExtend(new long[] {b.getSeq()}, new long[] {2}).length);
      pool.abort(b.getSeq());
      expect(Status.INVALID_ARGUMENT, () -> pool.abort(b.getSeq()));

      // Another namespace shares nothing.
      SeqBegin c = pool.begin(prompt, "lora-7");
      assertEquals(0, c.getCached());
      pool.abort(c.getSeq());
      accounting(pool);
    }
  }

  @Test
  public void batchesAndOutOfMemory() {
    try (Pool pool = new Pool(CACHE)) {
      long a = pool.begin(tokens(0, 6), null).getSeq();
      long b = pool.begin(tokens(50, 3), null).getSeq();
      assertEquals(7, pool.seqExtend(new long[] {a, b}, new long[] {4, 3}).length);
      assertEquals(2, pool.seqExtend(new long[] {a}, new long[] {2}).length);
      assertEquals(2, pool.seqDecode(new long[] {a, b}, new int[] {7, 8}).length);
      expect(Status.INVALID_ARGUMENT, () -> pool.seqDecode(new long[] {a, b}, new int[] {7}));

      long c = pool.begin(tokens(1000, 100), null).getSeq();
      pool.seqExtend(new long[] {c}, new long[] {100});
      long d = pool.begin(tokens(5000, 100), null).getSeq();
      String before = accounting(pool).toString();
      expect(Status.OUT_OF_MEMORY, () -> pool.seqExtend(new long[] {d}, new long[] {100}));
      assertEquals(before, accounting(pool).toString());  // nothing changed
      for (long s : new long[] {a, b, c, d}) {
        pool.abort(s);
      }
      Accounting acc = accounting(pool);
      assertEquals(0, acc.getUncached());
      assertEquals(0, acc.getProtected());
    }
  }

  @Test
  public void insertMatchLockEvictReset() {
    try (Pool pool = new Pool(CACHE)) {
      int[] key = tokens(1, 8);
      long[] slots = pool.alloc(8);
      InsertResult ins = pool.insert(key, slots, null, 0);
      assertEquals(0, ins.getPrefixLength());
      assertNotEquals(0, ins.getNode());
      assertEquals(8, pool.radixSizes().getEvictable());

      MatchResult m = pool.match(tokens(1, 10), null);  // the unaligned tail never matches
      assertArrayEquals(slots, m.getSlots());
      assertEquals(ins.getNode(), m.getNode());
      assertArrayEquals(Arrays.copyOf(slots, 4), pool.match(new int[] {1, 2, 3, 4, 99, 98, 97, 96}, null).getSlots());
      assertEquals(0, pool.match(key, "other namespace").getLength());
      assertEquals(0, pool.match(new int[0], null).getLength());

      pool.lock(ins.getNode());
      assertEquals(8, pool.radixSizes().getProtected());
      assertEquals(0, pool.radixSizes().getEvictable());
      assertEquals(0, pool.evict(8));  // locked
      pool.unlock(ins.getNode());
      expect(Status.INVALID_ARGUMENT, () -> pool.unlock(ins.getNode()));

      long[] longer = pool.alloc(12);
      assertEquals(8, pool.insert(tokens(1, 12), longer, "", 5).getPrefixLength());
      pool.free(Arrays.copyOf(longer, 8));  // duplicates stay the caller's
      assertEquals(12, pool.radixSizes().getTotal());
      long[] odd = pool.alloc(8);
      expect(Status.INVALID_ARGUMENT, () -> pool.insert(tokens(50, 6), Arrays.copyOf(odd, 6)));
      pool.free(odd);

      assertEquals(12, pool.evict(100));
      assertEquals(0, pool.radixSizes().getTotal());
      assertEquals(128, pool.available());
      expect(Status.INVALID_ARGUMENT, () -> pool.lock(ins.getNode()));  // stale handle

      pool.insert(key, pool.alloc(8));
      pool.resetCache();
      assertEquals(0, pool.radixSizes().getTotal());
      assertEquals(128, pool.available());
      assertTrue(pool.check().startsWith("ok"));
    }
  }

  /** The documented page hash, with java.security.MessageDigest only. */
  static byte[] sha256Page(byte[] parent, int[] tokens) throws NoSuchAlgorithmException {
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    if (parent != null) {
      md.update(parent);
    }
    ByteBuffer le = ByteBuffer.allocate(4 * tokens.length).order(ByteOrder.LITTLE_ENDIAN);
    for (int t : tokens) {
      le.putInt(t);
    }
    md.update(le.array());
    return md.digest();
  }

  static long idOf(byte[] digest) {
    return ByteBuffer.wrap(digest, 0, 8).order(ByteOrder.BIG_ENDIAN).getLong();
  }

  @Test
  public void eventsAndPageHash() throws NoSuchAlgorithmException {
    try (Pool pool = new Pool(CACHE)) {
      assertTrue(pool.takeEvents().isEmpty());
      int[] prompt = tokens(100, 10);
      long a = pool.begin(prompt, null).getSeq();
      pool.seqExtend(new long[] {a}, new long[] {10});
      pool.finish(a, 10);
      List<KvEvent> events = pool.takeEvents();
      assertEquals(events.toString(), 2, events.size());
      KvEvent first = events.get(0);
      KvEvent second = events.get(1);
      assertEquals(EventType.BLOCK_STORED, first.getType());
      assertEquals(EventType.BLOCK_STORED, second.getType());
      assertFalse(first.hasParent());
      assertTrue(second.hasParent());
      assertEquals(first.getBlockHash(), second.getParentHash());
      assertNotEquals(first.getBlockHash(), second.getBlockHash());
      assertArrayEquals(Arrays.copyOfRange(prompt, 0, 4), first.getTokens());
      assertArrayEquals(Arrays.copyOfRange(prompt, 4, 8), second.getTokens());

      PageHash h1 = Pool.pageHash(Arrays.copyOfRange(prompt, 0, 4), null);
      PageHash h2 = Pool.pageHash(Arrays.copyOfRange(prompt, 4, 8), h1.getDigest());
      assertEquals(first.getBlockHash(), h1.getId());
      assertEquals(second.getBlockHash(), h2.getId());
      byte[] want1 = sha256Page(null, Arrays.copyOfRange(prompt, 0, 4));
      byte[] want2 = sha256Page(want1, Arrays.copyOfRange(prompt, 4, 8));
      assertArrayEquals(want1, h1.getDigest());
      assertArrayEquals(want2, h2.getDigest());
      assertEquals(idOf(want1), h1.getId());
      assertEquals(idOf(want2), h2.getId());
      expect(Status.INVALID_ARGUMENT, () -> Pool.pageHash(prompt, new byte[] {1, 2, 3}));
      assertTrue(pool.takeEvents().isEmpty());

      // 25 events: more than takeEvents first makes room for.
      long b = pool.begin(tokens(1000, 101), null).getSeq();
      pool.seqExtend(new long[] {b}, new long[] {101});
      pool.finish(b, 101);
      events = pool.takeEvents();
      assertEquals(25, events.size());
      for (int i = 0; i < events.size(); i++) {
        KvEvent e = events.get(i);
        assertEquals(EventType.BLOCK_STORED, e.getType());
        assertArrayEquals(tokens(1000 + 4 * i, 4), e.getTokens());
        if (i > 0) {
          assertEquals(events.get(i - 1).getBlockHash(), e.getParentHash());
        }
      }

      assertTrue(pool.evict(4) >= 4);
      events = pool.takeEvents();
      assertFalse(events.isEmpty());
      assertEquals(EventType.BLOCK_REMOVED, events.get(0).getType());
      assertEquals(0, events.get(0).getTokens().length);
      pool.resetCache();
      events = pool.takeEvents();
      assertEquals(EventType.ALL_BLOCKS_CLEARED, events.get(events.size() - 1).getType());
    }
  }

  @Test
  public void radixUnsupportedWithoutTree() {
    try (Pool pool = new Pool(CHUNK)) {
      expect(Status.UNSUPPORTED, () -> pool.match(tokens(1, 4), null));
      long[] slots = pool.alloc(4);
      expect(Status.UNSUPPORTED, () -> pool.insert(tokens(1, 4), slots));
      expect(Status.UNSUPPORTED, () -> pool.radixSizes());
      expect(Status.UNSUPPORTED, () -> pool.evict(4));
      expect(Status.UNSUPPORTED, () -> pool.lock(1));
      expect(Status.UNSUPPORTED, () -> pool.unlock(1));
      expect(Status.UNSUPPORTED, () -> pool.resetCache());
      expect(Status.UNSUPPORTED, () -> pool.takeEvents());
      // Requests work without a tree, sharing nothing.
      long a = pool.begin(tokens(1, 10), null).getSeq();
      pool.seqExtend(new long[] {a}, new long[] {10});
      pool.finish(a, 10);
      assertEquals(0, pool.begin(tokens(1, 10), null).getCached());
    }
  }
}
