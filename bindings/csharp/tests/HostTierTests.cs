// NUnit 2.6 tests of the host-memory tier of the radix cache (host.h).
using System;
using System.Linq;
using KvPool;
using NUnit.Framework;

namespace KvPool.Tests {

  [TestFixture]
  public class HostTierTests {
    // PrefixCacheTests.Cache with a host tier of 4x the device tokens (CPU pool: plain memory).
    static readonly string Host =
        PrefixCacheTests.Cache.Replace("\"prefix_cache\":", "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0},\"prefix_cache\":");
    // 2 layers x (K + V) x 2 heads x 8 f32 values.
    const ulong BytesPerToken = 2 * 2 * 2 * 8 * 4;

    // K (which 0) or V (which 1) rows of n tokens of one layer, distinct per (layer, which).
    static byte[] Pattern(int n, int layer, int which) {
      byte[] b = new byte[n * 2 * 8 * 4];
      for (int i = 0; i < b.Length; i++) b[i] = (byte)(i * 7 + layer * 31 + which * 101 + 1);
      return b;
    }

    static int CountEvents(KvEvent[] events, EventType type) {
      return events.Count(e => e.Type == type);
    }

    // Caches tokens with KV written into fresh slots, then evicts them from the device.
    static ulong InsertHostOnly(Pool pool, int[] tokens) {
      long[] slots = pool.Alloc(tokens.Length);
      for (int layer = 0; layer < 2; layer++) {
        pool.SetKv(layer, slots, Pattern(tokens.Length, layer, 0), Pattern(tokens.Length, layer, 1), DType.F32);
      }
      InsertResult r = pool.Insert(tokens, slots);
      Assert.AreEqual(0UL, r.PrefixLength);
      // write_through (the default) copies a new node; Insert (radix_insert, which an engine calls
      // after its forward pass) starts the copy before it returns, and on a CPU pool it has landed.
      HostNodeState s = pool.HostNodeState(r.Node);
      Assert.IsTrue(s.OnDevice && s.OnHost, s.ToString());
      Assert.AreEqual(0UL, pool.HostPoll());  // CPU copies are never in flight
      s = pool.HostNodeState(r.Node);
      Assert.IsTrue(s.OnDevice && s.OnHost, s.ToString());
      Assert.AreEqual((ulong)tokens.Length, s.Tokens);
      Assert.AreEqual((ulong)tokens.Length, pool.Evict((ulong)tokens.Length));
      s = pool.HostNodeState(r.Node);
      Assert.IsTrue(!s.OnDevice && s.OnHost, s.ToString());
      Assert.AreEqual((ulong)tokens.Length, s.Tokens);
      return r.Node;
    }

    [Test]
    public void EvictMatchLoadBackHostEvict() {
      using (Pool pool = new Pool(Host)) {
        HostStats s = pool.HostStats();
        Assert.Greater(s.CapacityTokens, 128UL);
        Assert.AreEqual(0UL, s.UsedTokens);
        Assert.AreEqual(0UL, s.Backups);
        Assert.AreEqual(0UL, s.Loads);

        int[] tokens = PrefixCacheTests.Tokens(500, 16);
        ulong node = InsertHostOnly(pool, tokens);
        s = pool.HostStats();
        Assert.GreaterOrEqual(s.Backups, 1UL);
        Assert.AreEqual(16UL, s.BackupTokens);
        Assert.AreEqual(16 * BytesPerToken, s.BytesToHost);
        Assert.AreEqual(16UL, s.UsedTokens);
        Assert.AreEqual(16UL, s.HostOnlyTokens);
        Assert.AreEqual(4, CountEvents(pool.TakeEvents(), EventType.HostStored));  // one per page

        Assert.AreEqual(0, pool.Match(tokens).Length);
        HostMatchResult m = pool.HostMatch(PrefixCacheTests.Tokens(500, 18));
        Assert.AreEqual(0, m.Length, m.ToString());
        Assert.AreEqual(16UL, m.HostLength);
        Assert.AreEqual(node, m.HostNode);

        HostLoadResult loaded = pool.HostLoadBack(m.HostNode);
        Assert.AreEqual(16, loaded.Loaded, loaded.ToString());
        pool.HostPoll(true);
        for (int layer = 0; layer < 2; layer++) {
          byte[] k = new byte[16 * 2 * 8 * 4];
          byte[] v = new byte[k.Length];
          pool.GetKv(layer, loaded.Slots, k, v, DType.F32);
          CollectionAssert.AreEqual(Pattern(16, layer, 0), k);
          CollectionAssert.AreEqual(Pattern(16, layer, 1), v);
        }
        HostNodeState st = pool.HostNodeState(loaded.Node);
        Assert.IsTrue(st.OnDevice && st.OnHost, st.ToString());
        CollectionAssert.AreEqual(loaded.Slots, pool.Match(tokens).Slots);
        s = pool.HostStats();
        Assert.AreEqual(1UL, s.Loads);
        Assert.AreEqual(16UL, s.LoadTokens);
        Assert.AreEqual(16 * BytesPerToken, s.BytesToDevice);
        Assert.AreEqual(0UL, s.HostOnlyTokens);
        Assert.AreEqual(0UL, s.CopiesInFlight);
        Assert.AreEqual(0, pool.HostLoadBack(loaded.Node).Loaded);  // a device node: nothing to load

        Assert.AreEqual(0UL, pool.HostEvict(16));  // only host-only leaves go
        Assert.AreEqual(16UL, pool.Evict(16));
        Assert.AreEqual(16UL, pool.HostEvict(16));
        s = pool.HostStats();
        Assert.AreEqual(0UL, s.UsedTokens);
        Assert.AreEqual(16UL, s.HostEvictedTokens);
        Assert.AreEqual(4, CountEvents(pool.TakeEvents(), EventType.HostRemoved));
        Configs.Expect(Status.InvalidArgument, () => pool.HostNodeState(loaded.Node));  // gone
        Configs.Expect(Status.InvalidArgument, () => pool.HostLoadBack(loaded.Node));
        Assert.AreEqual(0UL, pool.HostMatch(tokens).HostLength);
        StringAssert.StartsWith("ok", pool.Check());
      }
    }

    [Test]
    public void LoadBackCountsDeviceEvictions() {
      using (Pool pool = new Pool(Host)) {
        int[] key = PrefixCacheTests.Tokens(500, 16);
        InsertHostOnly(pool, key);
        // Fill the device (128 tokens) with eight 16-token keys: the load-back must evict one.
        for (int k = 0; k < 8; k++) {
          pool.Insert(PrefixCacheTests.Tokens(1000 * (k + 1), 16), pool.Alloc(16));
        }
        Assert.AreEqual(0UL, pool.HostStats().LoadEvictedTokens);
        HostLoadResult loaded = pool.HostLoadBack(pool.HostMatch(key).HostNode);
        Assert.AreEqual(16, loaded.Loaded, loaded.ToString());
        HostStats s = pool.HostStats();
        Assert.AreEqual(16UL, s.LoadEvictedTokens);
        Assert.AreEqual(1UL, s.Loads);
      }
    }

    [Test]
    public void BeginReportsHostHit() {
      int[] prompt = PrefixCacheTests.Tokens(700, 17);
      using (Pool pool = new Pool(Host)) {
        InsertHostOnly(pool, prompt.Take(16).ToArray());
        SeqBegin b = pool.Begin(prompt);
        Assert.AreEqual(16UL, b.Cached);
        SeqInfo info = pool.SeqInfo(b.Seq);
        Assert.AreEqual(16UL, info.PrefixHit);
        Assert.AreEqual(16UL, info.HostHit);
        Assert.AreEqual(1UL, pool.HostStats().Loads);
        pool.SeqExtend(new[] { b.Seq }, new long[] { 1 });
        pool.Finish(b.Seq, 17);
        PrefixCacheTests.CheckAccounting(pool);
      }
      using (Pool pool = new Pool(PrefixCacheTests.Cache)) {
        SeqBegin b = pool.Begin(prompt);
        Assert.AreEqual(0UL, pool.SeqInfo(b.Seq).HostHit);
        pool.Abort(b.Seq);
      }
    }

    [Test]
    public void LoadSetsStreamPoll() {
      using (Pool pool = new Pool(Host)) {
        Assert.AreEqual(0, pool.HostLoadSet());
        foreach (int want in new[] { 1, 2, 0, 1 }) {
          Assert.AreEqual(want, pool.HostNextLoadSet());
          Assert.AreEqual(want, pool.HostLoadSet());
        }
        pool.HostSetStream(IntPtr.Zero);
        for (int set = 0; set < 3; set++) {
          pool.HostWaitLayer(set, 0, IntPtr.Zero);
          pool.HostWaitLayer(set, 1, IntPtr.Zero);
        }
        Configs.Expect(Status.InvalidArgument, () => pool.HostWaitLayer(0, 2, IntPtr.Zero));  // 2 layers
        Configs.Expect(Status.InvalidArgument, () => pool.HostWaitLayer(0, -1, IntPtr.Zero));
        Configs.Expect(Status.InvalidArgument, () => pool.HostWaitLayer(3, 0, IntPtr.Zero));  // sets 0..2
        Configs.Expect(Status.InvalidArgument, () => pool.HostWaitLayer(-1, 0, IntPtr.Zero));
        Assert.AreEqual(0UL, pool.HostPoll());
        Assert.AreEqual(0UL, pool.HostPoll(true));
      }
      Assert.AreEqual(3, BufferInfo.DeviceCudaHost);
      Assert.AreEqual(3, (int)EventType.HostStored);
      Assert.AreEqual(4, (int)EventType.HostRemoved);
    }

    [Test]
    public void UnsupportedWithoutHostCache() {
      using (Pool pool = new Pool(PrefixCacheTests.Cache)) {
        KvPoolException e = Configs.Expect(Status.Unsupported, () => pool.HostStats());
        StringAssert.Contains("host", e.Message);
        Configs.Expect(Status.Unsupported, () => pool.HostPoll());
        Configs.Expect(Status.Unsupported, () => pool.HostSetStream(IntPtr.Zero));
        Configs.Expect(Status.Unsupported, () => pool.HostNextLoadSet());
        Configs.Expect(Status.Unsupported, () => pool.HostLoadSet());
        Configs.Expect(Status.Unsupported, () => pool.HostWaitLayer(0, 0, IntPtr.Zero));
        Configs.Expect(Status.Unsupported, () => pool.HostMatch(PrefixCacheTests.Tokens(1, 4)));
        Configs.Expect(Status.Unsupported, () => pool.HostLoadBack(1));
        Configs.Expect(Status.Unsupported, () => pool.HostEvict(4));
        Configs.Expect(Status.Unsupported, () => pool.HostNodeState(1));
        pool.Dispose();
        Configs.Expect(Status.InvalidArgument, () => pool.HostStats());
      }
    }

    // A swa pool (layers 0 and 2 slide over a 4-token window, 1 and 3 are full attention) with
    // a host tier: a node's host copy holds its full-layer rows and the window rows of its last
    // 4 tokens.
    const string SwaHost = "{\"model\":{\"num_layers\":4,\"attention\":\"swa\",\"kv_heads\":2,\"head_dim\":8," +
        "\"sliding_window\":4,\"swa_layer_pattern\":\"SF\"},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64," +
        "\"max_running_requests\":2,\"max_context_len\":64},\"prefix_cache\":{\"kind\":\"radix\"}," +
        "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0}}";

    [Test]
    public void SwaEvictMatchLoadBackHostEvict() {
      using (Pool pool = new Pool(SwaHost)) {
        int[] prompt = PrefixCacheTests.Tokens(300, 24);
        SeqBegin b = pool.Begin(prompt);
        long[] slots = pool.SeqExtend(new[] { b.Seq }, new long[] { 24 });
        for (int layer = 0; layer < 4; layer++) {
          pool.SetKv(layer, slots, Pattern(24, layer, 0), Pattern(24, layer, 1), DType.F32);
        }
        pool.Finish(b.Seq, 24);
        Assert.AreEqual(24UL, pool.HostStats().UsedTokens);  // write_through copied the request
        Assert.AreEqual(24UL, pool.Evict(64));
        int[] longer = PrefixCacheTests.Tokens(300, 25);
        HostMatchResult m = pool.HostMatch(longer);
        Assert.AreEqual(0, m.Length, m.ToString());
        Assert.AreEqual(24UL, m.HostLength);
        HostNodeState st = pool.HostNodeState(m.HostNode);
        Assert.IsTrue(!st.OnDevice && st.OnHost, st.ToString());
        Assert.AreEqual(24UL, st.Tokens);

        HostLoadResult loaded = pool.HostLoadBack(m.HostNode);
        Assert.AreEqual(24, loaded.Loaded, loaded.ToString());
        Assert.AreEqual(m.HostNode, loaded.Node);
        // The full layers come back for every token, the window layers for the last window.
        const int row = 2 * 8 * 4;
        for (int layer = 0; layer < 4; layer++) {
          int from = layer % 2 == 0 ? 20 : 0;
          byte[] k = new byte[(24 - from) * row], v = new byte[(24 - from) * row];
          pool.GetKv(layer, loaded.Slots.Skip(from).ToArray(), k, v, DType.F32);
          CollectionAssert.AreEqual(Pattern(24, layer, 0).Skip(from * row).ToArray(), k);
          CollectionAssert.AreEqual(Pattern(24, layer, 1).Skip(from * row).ToArray(), v);
        }
        // The node was split where its window rows begin: its handle names the 4-token lower part.
        st = pool.HostNodeState(loaded.Node);
        Assert.IsTrue(st.OnDevice && st.OnHost, st.ToString());
        Assert.AreEqual(4UL, st.Tokens);
        CollectionAssert.AreEqual(loaded.Slots, pool.Match(longer).Slots);

        Assert.AreEqual(24UL, pool.Evict(64));
        Assert.AreEqual(24UL, pool.HostEvict(64));
        HostStats s = pool.HostStats();
        Assert.AreEqual(0UL, s.UsedTokens);
        Assert.AreEqual(1UL, s.Loads);
        Assert.AreEqual(24UL, s.LoadTokens);
        Assert.IsTrue(pool.Check().StartsWith("ok"), pool.Check());
      }
    }
  }
}
