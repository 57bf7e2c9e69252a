package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.Accounting;
import ai.kvpool.InsertResult;
import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.RadixSizes;
import ai.kvpool.SeqBegin;
import ai.kvpool.Stats;
import ai.kvpool.Status;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;
import org.junit.Test;

/** A pool with "thread_safe": true used from many threads at once (docs/services.md#threading). */
public class ThreadSafeTest {
  /** page_size 4, 1024 tokens, a radix cache, thread_safe. */
  static final String SAFE = "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8},"
      + "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":1024,\"max_running_requests\":64,"
      + "\"max_context_len\":256,\"thread_safe\":true},\"prefix_cache\":{\"kind\":\"radix\"}}";

  static int[] prompt(int worker, int step) {
    int family = (worker + step) % 4;
    int[] shared = IntStream.range(10000 * (family + 1), 10000 * (family + 1) + 16).toArray();
    int own = 1000000 + 100000 * worker + 100 * step;
    int[] mine = IntStream.range(own, own + 2 + step % 9).toArray();
    int[] all = Arrays.copyOf(shared, shared.length + mine.length);
    System.arraycopy(mine, 0, all, shared.length, mine.length);
    return all;
  }

  /** 8 threads mix requests, direct inserts, matches and evictions; 2 more check invariants. */
  @Test
  public void hammeredFromManyThreads() throws InterruptedException {
    try (Pool pool = new Pool(SAFE)) {
      final int workers = 8;
      final int steps = 150;
      ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
      AtomicInteger working = new AtomicInteger(workers);
      AtomicBoolean done = new AtomicBoolean(false);
      AtomicInteger finished = new AtomicInteger();
      AtomicInteger inserted = new AtomicInteger();
      List<Thread> threads = new ArrayList<>();
      for (int w = 0; w < workers; w++) {
        final int worker = w;
        threads.add(new Thread(() -> {
          try {
            for (int i = 0; i < steps; i++) {
              int[] tokens = prompt(worker, i);
              switch (i % 4) {
                case 0:
                case 1: {
                  SeqBegin b;
                  try {
                    b = pool.begin(tokens, null);
                  } catch (KvPoolException e) {
                    if (e.getStatus() == Status.OUT_OF_MEMORY) continue;
                    throw e;
                  }
                  try {
                    pool.seqExtend(new long[] {b.getSeq()}, new long[] {tokens.length - b.getCached()});
                    pool.seqDecode(new long[] {b.getSeq()}, new int[] {7});
                  } catch (KvPoolException e) {
                    if (e.getStatus() != Status.OUT_OF_MEMORY) throw e;
                  }
                  pool.finish(b.getSeq(), pool.seqInfo(b.getSeq()).getComputed());
                  finished.incrementAndGet();
                  break;
                }
                case 2: {
                  int[] key = Arrays.copyOf(tokens, tokens.length / 4 * 4);
                  long[] slots;
                  try {
                    slots = pool.alloc(key.length);
                  } catch (KvPoolException e) {
                    if (e.getStatus() == Status.OUT_OF_MEMORY) continue;
                    throw e;
                  }
                  InsertResult r = pool.insert(key, slots);
                  pool.free(Arrays.copyOf(slots, (int) r.getPrefixLength()));
                  inserted.incrementAndGet();
                  break;
                }
                default:
                  pool.match(tokens, null);
                  pool.evict(8);
              }
            }
          } catch (Throwable t) {
            errors.add(t);
          } finally {
            if (working.decrementAndGet() == 0) done.set(true);
          }
        }));
      }
      for (int r = 0; r < 2; r++) {
        threads.add(new Thread(() -> {
          try {
            for (int round = 0; !done.get(); round++) {
              Stats s = pool.stats();
              assertEquals(s.toString(), s.getTokenCapacity(),
                  s.getTokenHeld() + s.getTokenAvailable() + s.getTokenPending());
              Accounting a = pool.accounting();
              assertTrue(a.toString(),
                  a.getAvailable() + a.getEvictable() + a.getProtected() + a.getUncached() <= a.getCapacity());
              RadixSizes sizes = pool.radixSizes();
              assertEquals(sizes.getTotal(), sizes.getEvictable() + sizes.getProtected());
              if (round % 8 == 0) assertTrue(pool.check().startsWith("ok"));
            }
          } catch (Throwable t) {
            errors.add(t);
          }
        }));
      }
      for (Thread t : threads) t.start();
      for (Thread t : threads) t.join();
      if (!errors.isEmpty()) throw new AssertionError("a thread failed", errors.peek());
      assertTrue("requests finished", finished.get() > 0);
      assertTrue("inserts made", inserted.get() > 0);
      Accounting a = pool.accounting();
      assertTrue(a.toString(), a.holds());
      assertTrue(pool.check(), pool.check().startsWith("ok"));
      pool.evict(a.getCapacity());
      Stats s = pool.stats();
      assertEquals(0, s.getTokenHeld());
      assertEquals(s.getReqCapacity(), s.getReqAvailable());
    }
  }

  @Test
  public void keyMustBeABoolean() {
    KvPoolException e = expect(Status.CONFIG, () -> new Pool(SAFE.replace("\"thread_safe\":true", "\"thread_safe\":1")));
    assertTrue(e.getMessage(), e.getMessage().contains("$.pool.thread_safe: got 1, expected true or false"));
  }
}
