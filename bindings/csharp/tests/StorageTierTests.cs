// NUnit 2.6 tests of the storage tier below the host tier (storage.h).
using System;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Threading;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class StorageTierTests {
    // PrefixCacheTests.Cache with a host tier and no storage tier.
    internal static readonly string HostOnly =
        PrefixCacheTests.Cache.Replace("\"prefix_cache\":", "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0},\"prefix_cache\":");

    // 64 device tokens (page_size 4), a host tier of 4x that and a file storage tier in dir.
    static string StorageConfig(string dir) {
      return "{\"model\":{\"name\":\"tiny\",\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8}," +
             "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8," +
             "\"max_context_len\":128},\"prefix_cache\":{\"kind\":\"radix\"}," +
             "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0}," +
             "\"storage\":{\"backend\":\"file\",\"path\":\"" + dir.Replace("\\", "\\\\").Replace("\"", "\\\"") +
             "\",\"prefetch_threshold_tokens\":8}}";
    }

    // K (which 0) or V (which 1) rows of n tokens of one layer, distinct per (layer, which).
    internal static byte[] Pattern(int n, int layer, int which) {
      byte[] b = new byte[n * 2 * 8 * 4];
      for (int i = 0; i < b.Length; i++) b[i] = (byte)(i * 7 + layer * 31 + which * 101 + 1);
      return b;
    }

    // Prefetches prompt, polls until it is done and ends it; returns the last poll.
    internal static StoragePrefetchInfo PrefetchAll(Pool pool, int[] prompt, out ulong inserted) {
      StoragePrefetchResult r = pool.StoragePrefetch(prompt);
      Assert.AreNotEqual(0UL, r.Id, r.ToString());
      Assert.IsTrue(r.Started);
      Assert.AreEqual(StorageSkip.None, r.Skipped);
      Stopwatch clock = Stopwatch.StartNew();
      StoragePrefetchInfo info = pool.StoragePrefetchPoll(r.Id);
      while (!info.IsDone && clock.Elapsed < TimeSpan.FromSeconds(10)) {
        Thread.Sleep(1);
        info = pool.StoragePrefetchPoll(r.Id);
      }
      Assert.IsTrue(info.IsDone, info.ToString());
      inserted = pool.StoragePrefetchEnd(r.Id);
      // An ended prefetch is unknown.
      Configs.Expect(Status.InvalidArgument, () => pool.StoragePrefetchPoll(r.Id));
      Configs.Expect(Status.InvalidArgument, () => pool.StoragePrefetchEnd(r.Id));
      return info;
    }

    [Test]
    public void SecondPoolLoadsWhatTheFirstStored() {
      string dir = Path.Combine(Path.GetTempPath(), "kvpool-cs-storage-" + Guid.NewGuid().ToString("N"));
      Directory.CreateDirectory(dir);
      try {
        int[] prompt = PrefixCacheTests.Tokens(11, 41);  // 10 whole pages and one token
        using (Pool a = new Pool(StorageConfig(dir)))
        using (Pool b = new Pool(StorageConfig(dir))) {
          // Pool a computes the whole prompt (with KV rows) and finishes: its pages are cached,
          // copied to the host and backed up to storage.
          SeqBegin sa = a.Begin(prompt);
          Assert.AreEqual(0UL, sa.Cached);
          long[] slots = a.SeqExtend(new[] { sa.Seq }, new long[] { prompt.Length });
          for (int layer = 0; layer < 2; layer++) {
            a.SetKv(layer, slots, Pattern(prompt.Length, layer, 0), Pattern(prompt.Length, layer, 1), DType.F32);
          }
          a.Finish(sa.Seq, (ulong)prompt.Length);
          a.StorageFlush();
          StorageStats s = a.StorageStats();
          Assert.AreEqual(1UL, s.Backups);
          Assert.AreEqual(40UL, s.BackupTokens);
          Assert.AreEqual(10UL, s.BackupPages);
          Assert.AreEqual(10UL, s.StorePuts);
          Assert.AreEqual(0UL, s.BackupPagesFailed);
          Assert.AreEqual(0UL, s.BackupsQueued);

          // Pool b has never seen the prompt: storage holds all 10 pages.
          ulong inserted;
          StoragePrefetchInfo info = PrefetchAll(b, prompt, out inserted);
          Assert.AreEqual(40UL, inserted);
          Assert.IsFalse(info.IsRevoked, info.ToString());
          Assert.IsTrue(info.IsReady && info.IsSearched, info.ToString());
          Assert.AreEqual(40UL, info.AskedTokens);
          Assert.AreEqual(40UL, info.HitTokens);
          Assert.AreEqual(40UL, info.LoadedTokens);
          s = b.StorageStats();
          Assert.AreEqual(1UL, s.Prefetches);
          Assert.AreEqual(40UL, s.PrefetchTokens);
          Assert.AreEqual(40UL, s.PrefetchLoadedTokens);
          Assert.AreEqual(40UL, s.PrefetchInsertedTokens);
          Assert.AreEqual(0UL, s.PrefetchesRunning);
          Assert.AreEqual(40UL, b.HostStats().HostOnlyTokens);

          // Begin matches all but the last token: 40, loaded from the host tier where the
          // prefetch put them, with the KV pool a wrote.
          SeqBegin sb = b.Begin(prompt);
          Assert.AreEqual(40UL, sb.Cached);
          SeqInfo si = b.SeqInfo(sb.Seq);
          Assert.AreEqual(40UL, si.PrefixHit);
          Assert.AreEqual(40UL, si.HostHit);
          Assert.AreEqual(40UL, si.StorageHit);
          long[] held = b.SeqSlots(sb.Seq);
          Assert.AreEqual(40, held.Length);
          for (int layer = 0; layer < 2; layer++) {
            byte[] k = new byte[40 * 2 * 8 * 4];
            byte[] v = new byte[k.Length];
            b.GetKv(layer, held, k, v, DType.F32);
            CollectionAssert.AreEqual(Pattern(41, layer, 0).Take(k.Length).ToArray(), k);
            CollectionAssert.AreEqual(Pattern(41, layer, 1).Take(v.Length).ToArray(), v);
          }
          b.Abort(sb.Seq);
          Assert.AreEqual(40UL, b.StorageStats().StorageHitTokens);

          // A prompt whose part past the cached prefix is under the threshold starts nothing.
          StoragePrefetchResult none = b.StoragePrefetch(PrefixCacheTests.Tokens(900, 5));
          Assert.AreEqual(0UL, none.Id, none.ToString());
          Assert.IsFalse(none.Started);
          Assert.AreEqual(StorageSkip.BelowThreshold, none.Skipped);
          Configs.Expect(Status.InvalidArgument, () => b.StoragePrefetchPoll(12345));
          Configs.Expect(Status.InvalidArgument, () => b.StoragePrefetchEnd(12345));

          // Clear empties the store: a third pool finds nothing (the prefetch is revoked).
          a.StorageClear();
          using (Pool c = new Pool(StorageConfig(dir))) {
            info = PrefetchAll(c, prompt, out inserted);
            Assert.IsTrue(info.IsRevoked, info.ToString());
            Assert.AreEqual(0UL, info.HitTokens);
            Assert.AreEqual(0UL, inserted);
            Assert.AreEqual(1UL, c.StorageStats().PrefetchesRevoked);
          }
        }
      } finally {
        Directory.Delete(dir, true);
      }
    }

    [Test]
    public void UnsupportedWithoutStorage() {
      using (Pool pool = new Pool(HostOnly)) {
        KvPoolException e = Configs.Expect(Status.Unsupported, () => pool.StorageStats());
        StringAssert.Contains("storage", e.Message);
        Configs.Expect(Status.Unsupported, () => pool.StoragePrefetch(PrefixCacheTests.Tokens(1, 16)));
        Configs.Expect(Status.Unsupported, () => pool.StoragePrefetchPoll(1));
        Configs.Expect(Status.Unsupported, () => pool.StoragePrefetchEnd(1));
        Configs.Expect(Status.Unsupported, () => pool.StorageFlush());
        Configs.Expect(Status.Unsupported, () => pool.StorageClear());
        // Without a storage tier, StorageHit stays 0.
        SeqBegin b = pool.Begin(PrefixCacheTests.Tokens(1, 9));
        Assert.AreEqual(0UL, pool.SeqInfo(b.Seq).StorageHit);
        pool.Abort(b.Seq);
        pool.Dispose();
        Configs.Expect(Status.InvalidArgument, () => pool.StorageStats());
      }
    }

    [Test]
    public void SkipReasonsMatchHeader() {
      foreach (string name in Enum.GetNames(typeof(StorageSkip))) {
        Assert.IsFalse(name.StartsWith("KV") || name.Contains("_"), "StorageSkip." + name + " needs a %rename in kvpool.i");
      }
      Assert.AreEqual(5, Enum.GetNames(typeof(StorageSkip)).Length);
      Assert.AreEqual(0, (int)StorageSkip.None);
      Assert.AreEqual(1, (int)StorageSkip.BelowThreshold);
      Assert.AreEqual(2, (int)StorageSkip.NotBackedUp);
      Assert.AreEqual(3, (int)StorageSkip.Capacity);
      Assert.AreEqual(4, (int)StorageSkip.HostFull);
    }
  }
}
