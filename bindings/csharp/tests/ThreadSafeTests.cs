// NUnit 2.6 tests of a pool with "thread_safe": true used from many threads at once
// (docs/services.md#threading).
using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class ThreadSafeTests {
    // page_size 4, 1024 tokens, a radix cache, thread_safe.
    const string Safe =
        "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8}," +
        "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":1024,\"max_running_requests\":64," +
        "\"max_context_len\":256,\"thread_safe\":true},\"prefix_cache\":{\"kind\":\"radix\"}}";

    static int[] Prompt(int worker, int step) {
      int family = (worker + step) % 4;
      return Enumerable.Range(10000 * (family + 1), 16)
          .Concat(Enumerable.Range(1000000 + 100000 * worker + 100 * step, 2 + step % 9)).ToArray();
    }

    static bool OutOfMemory(KvPoolException e) { return e.Status == Status.OutOfMemory; }

    // 8 threads mix requests, direct inserts, matches and evictions; 2 more check invariants.
    [Test]
    public void HammeredFromManyThreads() {
      using (Pool pool = new Pool(Safe)) {
        const int workers = 8, steps = 150;
        var errors = new ConcurrentQueue<Exception>();
        int working = workers, finished = 0, inserted = 0;
        var threads = new List<Thread>();
        for (int w = 0; w < workers; w++) {
          int worker = w;
          threads.Add(new Thread(() => {
            try {
              for (int i = 0; i < steps; i++) {
                int[] tokens = Prompt(worker, i);
                switch (i % 4) {
                  case 0:
                  case 1: {
                    SeqBegin b;
                    try {
                      b = pool.Begin(tokens);
                    } catch (KvPoolException e) when (OutOfMemory(e)) {
                      continue;
                    }
                    try {
                      pool.SeqExtend(new[] { b.Seq }, new[] { (long)((ulong)tokens.Length - b.Cached) });
                      pool.SeqDecode(new[] { b.Seq }, new[] { 7 });
                    } catch (KvPoolException e) when (OutOfMemory(e)) {
                    }
                    pool.Finish(b.Seq, pool.SeqInfo(b.Seq).Computed);
                    Interlocked.Increment(ref finished);
                    break;
                  }
                  case 2: {
                    int[] key = tokens.Take(tokens.Length / 4 * 4).ToArray();
                    long[] slots;
                    try {
                      slots = pool.Alloc(key.Length);
                    } catch (KvPoolException e) when (OutOfMemory(e)) {
                      continue;
                    }
                    InsertResult r = pool.Insert(key, slots);
                    pool.Free(slots.Take((int)r.PrefixLength).ToArray());
                    Interlocked.Increment(ref inserted);
                    break;
                  }
                  default:
                    pool.Match(tokens);
                    pool.Evict(8);
                    break;
                }
              }
            } catch (Exception e) {
              errors.Enqueue(e);
            } finally {
              Interlocked.Decrement(ref working);
            }
          }));
        }
        for (int r = 0; r < 2; r++) {
          threads.Add(new Thread(() => {
            try {
              for (int round = 0; Volatile.Read(ref working) > 0; round++) {
                Stats s = pool.Stats();
                Assert.AreEqual(s.TokenCapacity, s.TokenHeld + s.TokenAvailable + s.TokenPending);
                Accounting a = pool.Accounting();
                Assert.LessOrEqual(a.Available + a.Evictable + a.Protected + a.Uncached, a.Capacity, a.ToString());
                RadixSizes sizes = pool.RadixSizes();
                Assert.AreEqual(sizes.Total, sizes.Evictable + sizes.Protected);
                if (round % 8 == 0) StringAssert.StartsWith("ok", pool.Check());
              }
            } catch (Exception e) {
              errors.Enqueue(e);
            }
          }));
        }
        foreach (Thread t in threads) t.Start();
        foreach (Thread t in threads) t.Join();
        Exception first;
        if (errors.TryPeek(out first)) Assert.Fail("a thread failed: " + first);
        Assert.Greater(finished, 0, "requests finished");
        Assert.Greater(inserted, 0, "inserts made");
        Accounting end = pool.Accounting();
        Assert.IsTrue(end.Holds, end.ToString());
        StringAssert.StartsWith("ok", pool.Check());
        pool.Evict(end.Capacity);
        Stats after = pool.Stats();
        Assert.AreEqual(0UL, after.TokenHeld);
        Assert.AreEqual(after.ReqCapacity, after.ReqAvailable);
      }
    }

    [Test]
    public void KeyMustBeABoolean() {
      KvPoolException e = Assert.Throws<KvPoolException>(
          () => new Pool(Safe.Replace("\"thread_safe\":true", "\"thread_safe\":\"yes\"")).Dispose());
      Assert.AreEqual(Status.Config, e.Status);
      StringAssert.Contains("$.pool.thread_safe: got \"yes\", expected true or false", e.Message);
    }
  }
}
