package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.BufferInfo;
import ai.kvpool.EventType;
import ai.kvpool.HostLoadResult;
import ai.kvpool.HostMatchResult;
import ai.kvpool.HostNodeState;
import ai.kvpool.HostStats;
import ai.kvpool.InsertResult;
import ai.kvpool.Kvpool;
import ai.kvpool.KvEvent;
import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.SeqInfo;
import ai.kvpool.Status;
import java.util.Arrays;
import java.util.List;
import org.junit.Test;

/** The host-memory tier of the radix cache (host.h). */
public class HostTierTest {
  /** PrefixCacheTest.CACHE with a host tier of 4x the device tokens (CPU pool: plain memory). */
  static final String HOST = PrefixCacheTest.CACHE.replace("\"prefix_cache\":",
      "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0},\"prefix_cache\":");
  /** 2 layers x (K + V) x 2 heads x 8 f32 values. */
  static final long BYTES_PER_TOKEN = 2 * 2 * 2 * 8 * 4;

  /** K (which 0) or V (which 1) rows of n tokens of one layer, distinct per (layer, which). */
  static float[] pattern(int n, int layer, int which) {
    float[] f = new float[n * 2 * 8];
    for (int i = 0; i < f.length; i++) {
      f[i] = i * 0.25f + layer * 100 + which * 1000;
    }
    return f;
  }

  static int countEvents(List<KvEvent> events, EventType type) {
    int n = 0;
    for (KvEvent e : events) {
      if (e.getType() == type) {
        n++;
      }
    }
    return n;
  }

  /** Caches tokens with KV written into fresh slots, then evicts them from the device. */
  static long insertHostOnly(Pool pool, int[] tokens) {
    long[] slots = pool.alloc(tokens.length);
    for (int layer = 0; layer < 2; layer++) {
      pool.setKv(layer, slots, pattern(tokens.length, layer, 0), pattern(tokens.length, layer, 1));
    }
    InsertResult r = pool.insert(tokens, slots);
    assertEquals(0, r.getPrefixLength());
    // write_through (the default) copies a new node; insert (radix_insert, which an engine calls
    // after its forward pass) starts the copy before it returns, and on a CPU pool it has landed.
    HostNodeState s = pool.hostNodeState(r.getNode());
    assertTrue(s.toString(), s.isOnDevice() && s.isOnHost());
    assertEquals(0, pool.hostPoll(false));  // CPU copies are never in flight
    s = pool.hostNodeState(r.getNode());
    assertTrue(s.toString(), s.isOnDevice() && s.isOnHost());
    assertEquals(tokens.length, s.getTokens());
    assertEquals(tokens.length, pool.evict(tokens.length));
    s = pool.hostNodeState(r.getNode());
    assertTrue(s.toString(), !s.isOnDevice() && s.isOnHost());
    assertEquals(tokens.length, s.getTokens());
    return r.getNode();
  }

  @Test
  public void evictMatchLoadBackHostEvict() {
    try (Pool pool = new Pool(HOST)) {
      HostStats s = pool.hostStats();
      assertTrue(s.getCapacityTokens() > 128);
      assertEquals(0, s.getUsedTokens());
      assertEquals(0, s.getBackups());
      assertEquals(0, s.getLoads());

      int[] tokens = PrefixCacheTest.tokens(500, 16);
      long node = insertHostOnly(pool, tokens);
      s = pool.hostStats();
      assertTrue(s.getBackups() >= 1);
      assertEquals(16, s.getBackupTokens());
      assertEquals(16 * BYTES_PER_TOKEN, s.getBytesToHost());
      assertEquals(16, s.getUsedTokens());
      assertEquals(16, s.getHostOnlyTokens());
      assertEquals(4, countEvents(pool.takeEvents(), EventType.HOST_STORED));  // one per page

      assertEquals(0, pool.match(tokens, null).getLength());
      HostMatchResult m = pool.hostMatch(PrefixCacheTest.tokens(500, 18), null);
      assertEquals(m.toString(), 0, m.getLength());
      assertEquals(16, m.getHostLength());
      assertEquals(node, m.getHostNode());

      HostLoadResult loaded = pool.hostLoadBack(m.getHostNode());
      assertEquals(loaded.toString(), 16, loaded.getLoaded());
      pool.hostPoll(true);
      for (int layer = 0; layer < 2; layer++) {
        float[] k = new float[16 * 2 * 8];
        float[] v = new float[k.length];
        pool.getKv(layer, loaded.getSlots(), k, v);
        assertArrayEquals(pattern(16, layer, 0), k, 0f);
        assertArrayEquals(pattern(16, layer, 1), v, 0f);
      }
      HostNodeState st = pool.hostNodeState(loaded.getNode());
      assertTrue(st.toString(), st.isOnDevice() && st.isOnHost());
      assertArrayEquals(loaded.getSlots(), pool.match(tokens, null).getSlots());
      s = pool.hostStats();
      assertEquals(1, s.getLoads());
      assertEquals(16, s.getLoadTokens());
      assertEquals(16 * BYTES_PER_TOKEN, s.getBytesToDevice());
      assertEquals(0, s.getHostOnlyTokens());
      assertEquals(0, s.getCopiesInFlight());
      assertEquals(0, pool.hostLoadBack(loaded.getNode()).getLoaded());  // a device node: nothing to load

      assertEquals(0, pool.hostEvict(16));  // only host-only leaves go
      assertEquals(16, pool.evict(16));
      assertEquals(16, pool.hostEvict(16));
      s = pool.hostStats();
      assertEquals(0, s.getUsedTokens());
      assertEquals(16, s.getHostEvictedTokens());
      assertEquals(4, countEvents(pool.takeEvents(), EventType.HOST_REMOVED));
      expect(Status.INVALID_ARGUMENT, () -> pool.hostNodeState(loaded.getNode()));  // gone
      expect(Status.INVALID_ARGUMENT, () -> pool.hostLoadBack(loaded.getNode()));
      assertEquals(0, pool.hostMatch(tokens, null).getHostLength());
      assertTrue(pool.check(), pool.check().startsWith("ok"));
    }
  }

  @Test
  public void loadBackCountsDeviceEvictions() {
    try (Pool pool = new Pool(HOST)) {
      int[] key = PrefixCacheTest.tokens(500, 16);
      insertHostOnly(pool, key);
      // Fill the device (128 tokens) with eight 16-token keys: the load-back must evict one.
      for (int k = 0; k < 8; k++) {
        pool.insert(PrefixCacheTest.tokens(1000 * (k + 1), 16), pool.alloc(16));
      }
      assertEquals(0, pool.hostStats().getLoadEvictedTokens());
      HostLoadResult loaded = pool.hostLoadBack(pool.hostMatch(key, null).getHostNode());
      assertEquals(loaded.toString(), 16, loaded.getLoaded());
      HostStats s = pool.hostStats();
      assertEquals(16, s.getLoadEvictedTokens());
      assertEquals(1, s.getLoads());
    }
  }

  @Test
  public void beginReportsHostHit() {
    int[] prompt = PrefixCacheTest.tokens(700, 17);
    try (Pool pool = new Pool(HOST)) {
      insertHostOnly(pool, Arrays.copyOf(prompt, 16));
      SeqBegin b = pool.begin(prompt, null);
      assertEquals(16, b.getCached());
      SeqInfo info = pool.seqInfo(b.getSeq());
      assertEquals(16, info.getPrefixHit());
      assertEquals(16, info.getHostHit());
      assertEquals(1, pool.hostStats().getLoads());
      pool.seqExtend(new long[] {b.getSeq()}, new long[] {1});
      pool.finish(b.getSeq(), 17);
      PrefixCacheTest.accounting(pool);
    }
    try (Pool pool = new Pool(PrefixCacheTest.CACHE)) {
      SeqBegin b = pool.begin(prompt, null);
      assertEquals(0, pool.seqInfo(b.getSeq()).getHostHit());
      pool.abort(b.getSeq());
    }
  }

  @Test
  public void loadSetsStreamPoll() {
    try (Pool pool = new Pool(HOST)) {
      assertEquals(0, pool.hostLoadSet());
      for (int want : new int[] {1, 2, 0, 1}) {
        assertEquals(want, pool.hostNextLoadSet());
        assertEquals(want, pool.hostLoadSet());
      }
      pool.hostSetStream(0);
      for (int set = 0; set < 3; set++) {
        pool.hostWaitLayer(set, 0, 0);
        pool.hostWaitLayer(set, 1, 0);
      }
      expect(Status.INVALID_ARGUMENT, () -> pool.hostWaitLayer(0, 2, 0));  // 2 layers
      expect(Status.INVALID_ARGUMENT, () -> pool.hostWaitLayer(0, -1, 0));
      expect(Status.INVALID_ARGUMENT, () -> pool.hostWaitLayer(3, 0, 0));  // sets 0..2
      expect(Status.INVALID_ARGUMENT, () -> pool.hostWaitLayer(-1, 0, 0));
      assertEquals(0, pool.hostPoll(false));
      assertEquals(0, pool.hostPoll(true));
      org.junit.Assert.assertThrows(IllegalArgumentException.class, () -> pool.hostEvict(-1));
    }
    assertEquals(3, BufferInfo.DEVICE_CUDA_HOST);
    assertEquals(Kvpool.KVPOOL_DEVICE_CUDA_HOST, BufferInfo.DEVICE_CUDA_HOST);
    assertEquals(3, EventType.HOST_STORED.swigValue());
    assertEquals(4, EventType.HOST_REMOVED.swigValue());
  }

  @Test
  public void unsupportedWithoutHostCache() {
    Pool pool = new Pool(PrefixCacheTest.CACHE);
    try {
      KvPoolException e = expect(Status.UNSUPPORTED, pool::hostStats);
      assertTrue(e.getMessage(), e.getMessage().contains("host"));
      expect(Status.UNSUPPORTED, () -> pool.hostPoll(false));
      expect(Status.UNSUPPORTED, () -> pool.hostSetStream(0));
      expect(Status.UNSUPPORTED, pool::hostNextLoadSet);
      expect(Status.UNSUPPORTED, pool::hostLoadSet);
      expect(Status.UNSUPPORTED, () -> pool.hostWaitLayer(0, 0, 0));
      expect(Status.UNSUPPORTED, () -> pool.hostMatch(PrefixCacheTest.tokens(1, 4), null));
      expect(Status.UNSUPPORTED, () -> pool.hostLoadBack(1));
      expect(Status.UNSUPPORTED, () -> pool.hostEvict(4));
      expect(Status.UNSUPPORTED, () -> pool.hostNodeState(1));
    } finally {
      pool.close();
    }
    expect(Status.INVALID_ARGUMENT, pool::hostStats);  // a closed pool
  }

  /**
   * A swa pool (layers 0 and 2 slide over a 4-token window, 1 and 3 are full attention) with a
   * host tier: a node's host copy holds its full-layer rows and the window rows of its last 4
   * tokens.
   */
  static final String SWA_HOST = "{\"model\":{\"num_layers\":4,\"attention\":\"swa\",\"kv_heads\":2,\"head_dim\":8,"
      + "\"sliding_window\":4,\"swa_layer_pattern\":\"SF\"},\"pool\":{\"kv_dtype\":\"f32\",\"max_total_tokens\":64,"
      + "\"max_running_requests\":2,\"max_context_len\":64},\"prefix_cache\":{\"kind\":\"radix\"},"
      + "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0}}";

  @Test
  public void swaEvictMatchLoadBackHostEvict() {
    try (Pool pool = new Pool(SWA_HOST)) {
      int[] prompt = PrefixCacheTest.tokens(300, 24);
      SeqBegin b = pool.begin(prompt, null);
      long[] slots = pool.seqExtend(new long[] {b.getSeq()}, new long[] {24});
      for (int layer = 0; layer < 4; layer++) {
        pool.setKv(layer, slots, pattern(24, layer, 0), pattern(24, layer, 1));
      }
      pool.finish(b.getSeq(), 24);
      assertEquals(24, pool.hostStats().getUsedTokens());  // write_through copied the request
      assertEquals(24, pool.evict(64));
      int[] longer = PrefixCacheTest.tokens(300, 25);
      HostMatchResult m = pool.hostMatch(longer, null);
      assertEquals(m.toString(), 0, m.getLength());
      assertEquals(24, m.getHostLength());
      HostNodeState st = pool.hostNodeState(m.getHostNode());
      assertTrue(st.toString(), !st.isOnDevice() && st.isOnHost());
      assertEquals(24, st.getTokens());

      HostLoadResult loaded = pool.hostLoadBack(m.getHostNode());
      assertEquals(loaded.toString(), 24, loaded.getLoaded());
      assertEquals(m.getHostNode(), loaded.getNode());
      // The full layers come back for every token, the window layers for the last window.
      for (int layer = 0; layer < 4; layer++) {
        int from = layer % 2 == 0 ? 20 : 0;
        float[] k = new float[(24 - from) * 2 * 8];
        float[] v = new float[k.length];
        pool.getKv(layer, Arrays.copyOfRange(loaded.getSlots(), from, 24), k, v);
        assertArrayEquals(Arrays.copyOfRange(pattern(24, layer, 0), from * 16, 24 * 16), k, 0f);
        assertArrayEquals(Arrays.copyOfRange(pattern(24, layer, 1), from * 16, 24 * 16), v, 0f);
      }
      // The node was split where its window rows begin: its handle names the 4-token lower part.
      st = pool.hostNodeState(loaded.getNode());
      assertTrue(st.toString(), st.isOnDevice() && st.isOnHost());
      assertEquals(4, st.getTokens());
      assertArrayEquals(loaded.getSlots(), pool.match(longer, null).getSlots());

      assertEquals(24, pool.evict(64));
      assertEquals(24, pool.hostEvict(64));
      HostStats s = pool.hostStats();
      assertEquals(0, s.getUsedTokens());
      assertEquals(1, s.getLoads());
      assertEquals(24, s.getLoadTokens());
      assertTrue(pool.check(), pool.check().startsWith("ok"));
    }
  }
}
