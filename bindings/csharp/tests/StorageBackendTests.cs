// NUnit 2.6 tests of Pool.WithStorage (kvpool_create_with_storage): a storage tier written in C#.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class StorageBackendTests {
    // StorageTierTests' pool with the custom backend instead of a directory.
    internal const string Custom =
        "{\"model\":{\"name\":\"tiny\",\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8}," +
        "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8," +
        "\"max_context_len\":128},\"prefix_cache\":{\"kind\":\"radix\"}," +
        "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0}," +
        "\"storage\":{\"backend\":\"custom\",\"prefetch_threshold_tokens\":8}}";

    // A Dictionary under a lock, with switches that make each method throw or damage what it reads.
    class MapBackend : StorageBackend {
      readonly Dictionary<string, byte[]> values = new Dictionary<string, byte[]>();
      readonly List<string> failures = new List<string>();
      readonly HashSet<int> threads = new HashSet<int>();
      internal int Puts, Gets, Exists, Clears;
      internal volatile bool ThrowPut, ThrowGet, ThrowExists, ThrowClear, Damage;

      internal int Count {
        get { lock (values) return values.Count; }
      }

      internal List<string> Failures {
        get { lock (values) return new List<string>(failures); }
      }

      internal HashSet<int> Threads {
        get { lock (values) return new HashSet<int>(threads); }
      }

      void Enter() {
        lock (values) threads.Add(Thread.CurrentThread.ManagedThreadId);
      }

      public override void Put(string[] keys, byte[][] batch, StorageResult[] results) {
        Enter();
        Interlocked.Increment(ref Puts);
        if (ThrowPut) throw new InvalidOperationException("server down");
        lock (values) {
          for (int i = 0; i < keys.Length; i++) {
            if (!values.ContainsKey(keys[i])) values[keys[i]] = batch[i];  // write-once
            results[i] = StorageResult.Ok;
          }
        }
      }

      public override void Get(string[] keys, byte[][] batch, StorageResult[] results) {
        Enter();
        Interlocked.Increment(ref Gets);
        if (ThrowGet) throw new InvalidOperationException("server down");
        lock (values) {
          for (int i = 0; i < keys.Length; i++) {
            byte[] v;
            if (!values.TryGetValue(keys[i], out v)) {
              results[i] = StorageResult.Miss;
              continue;
            }
            batch[i] = v;
            if (Damage) {
              batch[i] = (byte[])v.Clone();
              batch[i][v.Length / 2] ^= 0x5a;  // one payload byte: the checksum must catch it
            }
            results[i] = StorageResult.Ok;
          }
        }
      }

      public override int ExistsPrefix(string[] keys) {
        Enter();
        Interlocked.Increment(ref Exists);
        if (ThrowExists) throw new InvalidOperationException("server down");
        lock (values) {
          int found = 0;
          while (found < keys.Length && values.ContainsKey(keys[found])) found++;
          return found;
        }
      }

      public override void Clear() {
        Interlocked.Increment(ref Clears);
        if (ThrowClear) throw new InvalidOperationException("server down");
        lock (values) values.Clear();
      }

      protected override void Failed(string operation, Exception error) {
        lock (values) failures.Add(operation + ": " + error.Message);
      }
    }

    // A backend without Clear().
    class NoClearBackend : StorageBackend {
      public override void Put(string[] keys, byte[][] batch, StorageResult[] results) {
        for (int i = 0; i < keys.Length; i++) results[i] = StorageResult.Ok;
      }

      public override void Get(string[] keys, byte[][] batch, StorageResult[] results) {
        for (int i = 0; i < keys.Length; i++) results[i] = StorageResult.Miss;
      }

      public override int ExistsPrefix(string[] keys) {
        return 0;
      }
    }

    // Computes prompt on pool (KV rows from StorageTierTests.Pattern), finishes it and flushes the backups.
    static void Store(Pool pool, int[] prompt) {
      SeqBegin s = pool.Begin(prompt);
      long[] slots = pool.SeqExtend(new[] { s.Seq }, new long[] { prompt.Length - (long)s.Cached });
      for (int layer = 0; layer < 2; layer++) {
        pool.SetKv(layer, slots, StorageTierTests.Pattern(prompt.Length, layer, 0),
                   StorageTierTests.Pattern(prompt.Length, layer, 1), DType.F32);
      }
      pool.Finish(s.Seq, (ulong)prompt.Length);
      pool.StorageFlush();
    }

    [Test]
    public void SecondPoolLoadsWhatTheFirstStored() {
      MapBackend backend = new MapBackend();
      int[] prompt = PrefixCacheTests.Tokens(11, 41);  // 10 whole pages and one token
      using (Pool a = Pool.WithStorage(Custom, backend))
      using (Pool b = Pool.WithStorage(Custom, backend)) {
        Store(a, prompt);
        StorageStats s = a.StorageStats();
        Assert.AreEqual(10UL, s.BackupPages);
        Assert.AreEqual(0UL, s.BackupPagesFailed);
        Assert.AreEqual(10UL, s.StorePuts);
        Assert.AreEqual(0UL, s.StorePutErrors);
        Assert.AreEqual(10, backend.Count);
        // The puts ran on the pool's storage thread, not on this one.
        Assert.IsFalse(backend.Threads.Contains(Thread.CurrentThread.ManagedThreadId));

        // Pool b has never seen the prompt: the C# dictionary holds all 10 pages.
        ulong inserted;
        StoragePrefetchInfo info = StorageTierTests.PrefetchAll(b, prompt, out inserted);
        Assert.AreEqual(40UL, inserted);
        Assert.IsFalse(info.IsRevoked, info.ToString());
        Assert.AreEqual(40UL, info.HitTokens);
        Assert.AreEqual(40UL, info.LoadedTokens);
        s = b.StorageStats();
        Assert.AreEqual(10UL, s.StoreGets);
        Assert.AreEqual(10UL, s.StoreGetHits);
        Assert.AreEqual(0UL, s.StoreGetErrors);
        Assert.AreEqual(0UL, s.PagesCorrupt);
        Assert.GreaterOrEqual(backend.Exists, 1);

        // Begin loads the 40 tokens that came from the C# store, with the KV pool a wrote.
        SeqBegin sb = b.Begin(prompt);
        Assert.AreEqual(40UL, sb.Cached);
        Assert.AreEqual(40UL, b.SeqInfo(sb.Seq).StorageHit);
        long[] held = b.SeqSlots(sb.Seq);
        for (int layer = 0; layer < 2; layer++) {
          byte[] k = new byte[40 * 2 * 8 * 4];
          byte[] v = new byte[k.Length];
          b.GetKv(layer, held, k, v, DType.F32);
          CollectionAssert.AreEqual(StorageTierTests.Pattern(41, layer, 0).Take(k.Length).ToArray(), k);
          CollectionAssert.AreEqual(StorageTierTests.Pattern(41, layer, 1).Take(v.Length).ToArray(), v);
        }
        b.Abort(sb.Seq);
        Assert.AreEqual(40UL, b.StorageStats().StorageHitTokens);
        b.Check();

        // StorageClear calls Clear() on the calling thread.
        a.StorageClear();
        Assert.AreEqual(1, backend.Clears);
        Assert.AreEqual(0, backend.Count);
        Assert.IsEmpty(backend.Failures);
      }
    }

    [Test]
    public void ThrowingBackendCountsErrors() {
      int[] prompt = PrefixCacheTests.Tokens(11, 41);
      MapBackend backend = new MapBackend();
      backend.ThrowPut = true;
      using (Pool a = Pool.WithStorage(Custom, backend)) {
        Store(a, prompt);  // the batch fails: the rest of the backup job is skipped
        StorageStats s = a.StorageStats();
        Assert.AreEqual(0UL, s.StorePuts);
        Assert.Greater(s.StorePutErrors, 0UL);
        Assert.Greater(s.BackupPagesFailed, 0UL);
        Assert.AreEqual(0UL, s.BackupPages);
        Assert.AreEqual(0, backend.Count);
        CollectionAssert.Contains(backend.Failures, "Put: server down");
        a.Check();
      }

      backend = new MapBackend();
      using (Pool a = Pool.WithStorage(Custom, backend)) {
        Store(a, prompt);
        Assert.AreEqual(10, backend.Count);
      }
      ulong inserted;
      // A Get that throws: the prefetch ends at its first page, nothing is loaded.
      backend.ThrowGet = true;
      using (Pool b = Pool.WithStorage(Custom, backend)) {
        StoragePrefetchInfo info = StorageTierTests.PrefetchAll(b, prompt, out inserted);
        Assert.AreEqual(40UL, info.HitTokens);  // ExistsPrefix still answered
        Assert.AreEqual(0UL, info.LoadedTokens);
        Assert.AreEqual(0UL, inserted);
        StorageStats s = b.StorageStats();
        Assert.Greater(s.StoreGetErrors, 0UL);
        Assert.Greater(s.ReadFailures, 0UL);
        Assert.AreEqual(0UL, s.StoreGetHits);
        CollectionAssert.Contains(backend.Failures, "Get: server down");
        b.Check();
      }
      // Damaged bytes from Get are rejected by kvpool's checksum, not loaded.
      backend.ThrowGet = false;
      backend.Damage = true;
      using (Pool b = Pool.WithStorage(Custom, backend)) {
        StoragePrefetchInfo info = StorageTierTests.PrefetchAll(b, prompt, out inserted);
        Assert.AreEqual(0UL, info.LoadedTokens);
        Assert.Greater(b.StorageStats().PagesCorrupt, 0UL);
      }
      // ExistsPrefix that throws finds nothing: the prefetch is revoked.
      backend.Damage = false;
      backend.ThrowExists = true;
      using (Pool b = Pool.WithStorage(Custom, backend)) {
        StoragePrefetchInfo info = StorageTierTests.PrefetchAll(b, prompt, out inserted);
        Assert.IsTrue(info.IsRevoked, info.ToString());
        Assert.AreEqual(1UL, b.StorageStats().PrefetchesRevoked);
        CollectionAssert.Contains(backend.Failures, "ExistsPrefix: server down");
      }
      // Clear that throws: StorageClear fails with Io, the values stay.
      backend.ThrowClear = true;
      using (Pool b = Pool.WithStorage(Custom, backend)) {
        KvPoolException e = Configs.Expect(Status.Io, () => b.StorageClear());
        StringAssert.Contains("clear", e.Message);
        Assert.AreEqual(10, backend.Count);
        CollectionAssert.Contains(backend.Failures, "Clear: server down");
      }
    }

    [Test]
    public void BadInput() {
      MapBackend backend = new MapBackend();
      KvPoolException e = Configs.Expect(Status.InvalidArgument, () => Pool.WithStorage(Custom, null));
      StringAssert.Contains("backend", e.Message);
      // The configuration must name the custom backend, and only WithStorage may.
      string file = Custom.Replace("\"backend\":\"custom\"", "\"backend\":\"file\",\"path\":\"/nonexistent\"");
      Configs.Expect(Status.Config, () => Pool.WithStorage(file, backend));
      Configs.Expect(Status.Config, () => Pool.WithStorage(StorageTierTests.HostOnly, backend));
      e = Configs.Expect(Status.Config, () => new Pool(Custom));
      StringAssert.Contains("kvpool_create_with_storage", e.Message);
      Configs.Expect(Status.Config, () => Pool.WithStorage("{", backend));
      // A failed creation calls nothing.
      Assert.AreEqual(0, backend.Puts + backend.Gets + backend.Exists + backend.Clears);

      // Without Clear(), StorageClear is unsupported.
      using (Pool pool = Pool.WithStorage(Custom, new NoClearBackend())) {
        Configs.Expect(Status.Unsupported, () => pool.StorageClear());
        pool.StorageFlush();
      }
    }

    [Test]
    public void PoolKeepsBackendAlive() {
      int[] prompt = PrefixCacheTests.Tokens(11, 41);
      WeakReference weak;
      using (Pool pool = OpenWithFreshBackend(out weak)) {
        GC.Collect();
        GC.WaitForPendingFinalizers();
        // Only the pool's handle holds it now, and its storage thread still reaches it.
        Store(pool, prompt);
        Assert.AreEqual(10, CountOf(weak));
      }
      // That Dispose frees the handle is not asserted: mono scans stacks conservatively, and
      // even an object no pool ever saw can stay alive through a collection here.
    }

    static Pool OpenWithFreshBackend(out WeakReference weak) {
      MapBackend backend = new MapBackend();
      weak = new WeakReference(backend);
      return Pool.WithStorage(Custom, backend);
    }

    // The backend's value count, or -1 when it was collected.
    static int CountOf(WeakReference weak) {
      MapBackend backend = (MapBackend)weak.Target;
      return backend == null ? -1 : backend.Count;
    }

    [Test]
    public void ResultNumbersMatchHeader() {
      Assert.AreEqual(0, (int)StorageResult.Ok);
      Assert.AreEqual(1, (int)StorageResult.Miss);
      Assert.AreEqual(2, (int)StorageResult.Error);
    }
  }
}
