package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;

import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.SeqInfo;
import ai.kvpool.Status;
import ai.kvpool.StoragePrefetchInfo;
import ai.kvpool.StoragePrefetchResult;
import ai.kvpool.StorageSkip;
import ai.kvpool.StorageStats;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.stream.Stream;
import org.junit.Test;

/** The storage tier (L3) below the host tier (storage.h). */
public class StorageTierTest {
  /** 64 device tokens (page_size 4), a host tier of 4x that and a file storage tier in dir. */
  static String storageConfig(Path dir) {
    return "{\"model\":{\"name\":\"tiny\",\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8},"
        + "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8,"
        + "\"max_context_len\":128},\"prefix_cache\":{\"kind\":\"radix\"},"
        + "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0},"
        + "\"storage\":{\"backend\":\"file\",\"path\":\"" + dir.toString().replace("\\", "\\\\").replace("\"", "\\\"")
        + "\",\"prefetch_threshold_tokens\":8}}";
  }

  static void removeTree(Path dir) throws IOException {
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path p : (Iterable<Path>) paths.sorted(Comparator.reverseOrder())::iterator) {
        Files.delete(p);
      }
    }
  }

  /** Prefetches prompt, polls until it is done and ends it; returns {last poll, tokens inserted}. */
  static Object[] prefetchAll(Pool pool, int[] prompt) throws InterruptedException {
    StoragePrefetchResult r = pool.storagePrefetch(prompt, null);
    assertNotEquals(r.toString(), 0, r.getId());
    assertTrue(r.isStarted());
    assertEquals(StorageSkip.NONE, r.getSkipped());
    long deadline = System.nanoTime() + 10_000_000_000L;
    StoragePrefetchInfo info = pool.storagePrefetchPoll(r.getId());
    while (!info.isDone() && System.nanoTime() < deadline) {
      Thread.sleep(1);
      info = pool.storagePrefetchPoll(r.getId());
    }
    assertTrue(info.toString(), info.isDone());
    long inserted = pool.storagePrefetchEnd(r.getId());
    // An ended prefetch is unknown.
    expect(Status.INVALID_ARGUMENT, () -> pool.storagePrefetchPoll(r.getId()));
    expect(Status.INVALID_ARGUMENT, () -> pool.storagePrefetchEnd(r.getId()));
    return new Object[] {info, inserted};
  }

  @Test
  public void secondPoolLoadsWhatTheFirstStored() throws Exception {
    Path dir = Files.createTempDirectory("kvpool-java-storage-");
    try {
      int[] prompt = PrefixCacheTest.tokens(11, 41);  // 10 whole pages and one token
      try (Pool a = new Pool(storageConfig(dir)); Pool b = new Pool(storageConfig(dir))) {
        // Pool a computes the whole prompt (with KV rows) and finishes: its pages are cached,
        // copied to the host and backed up to storage.
        SeqBegin sa = a.begin(prompt, null);
        assertEquals(0, sa.getCached());
        long[] slots = a.seqExtend(new long[] {sa.getSeq()}, new long[] {prompt.length});
        for (int layer = 0; layer < 2; layer++) {
          a.setKv(layer, slots, HostTierTest.pattern(prompt.length, layer, 0),
              HostTierTest.pattern(prompt.length, layer, 1));
        }
        a.finish(sa.getSeq(), prompt.length);
        a.storageFlush();
        StorageStats s = a.storageStats();
        assertEquals(1, s.getBackups());
        assertEquals(40, s.getBackupTokens());
        assertEquals(10, s.getBackupPages());
        assertEquals(10, s.getStorePuts());
        assertEquals(0, s.getBackupPagesFailed());
        assertEquals(0, s.getBackupsQueued());

        // Pool b has never seen the prompt: storage holds all 10 pages.
        Object[] done = prefetchAll(b, prompt);
        StoragePrefetchInfo info = (StoragePrefetchInfo) done[0];
        assertEquals(40L, done[1]);
        assertFalse(info.toString(), info.isRevoked());
        assertTrue(info.toString(), info.isReady() && info.isSearched());
        assertEquals(40, info.getAskedTokens());
        assertEquals(40, info.getHitTokens());
        assertEquals(40, info.getLoadedTokens());
        s = b.storageStats();
        assertEquals(1, s.getPrefetches());
        assertEquals(40, s.getPrefetchTokens());
        assertEquals(40, s.getPrefetchLoadedTokens());
        assertEquals(40, s.getPrefetchInsertedTokens());
        assertEquals(0, s.getPrefetchesRunning());
        assertEquals(40, b.hostStats().getHostOnlyTokens());

        // begin matches all but the last token: 40, loaded from the host tier where the
        // prefetch put them, with the KV pool a wrote.
        SeqBegin sb = b.begin(prompt, null);
        assertEquals(40, sb.getCached());
        SeqInfo si = b.seqInfo(sb.getSeq());
        assertEquals(40, si.getPrefixHit());
        assertEquals(40, si.getHostHit());
        assertEquals(40, si.getStorageHit());
        long[] held = b.seqSlots(sb.getSeq());
        assertEquals(40, held.length);
        expectStoredPattern(b, held);
        b.abort(sb.getSeq());
        assertEquals(40, b.storageStats().getStorageHitTokens());

        // A prompt whose part past the cached prefix is under the threshold starts nothing.
        StoragePrefetchResult none = b.storagePrefetch(PrefixCacheTest.tokens(900, 5), null);
        assertEquals(none.toString(), 0, none.getId());
        assertFalse(none.isStarted());
        assertEquals(StorageSkip.BELOW_THRESHOLD, none.getSkipped());
        expect(Status.INVALID_ARGUMENT, () -> b.storagePrefetchPoll(12345));
        expect(Status.INVALID_ARGUMENT, () -> b.storagePrefetchEnd(12345));

        // Clear empties the store: a third pool finds nothing (the prefetch is revoked).
        a.storageClear();
        try (Pool c = new Pool(storageConfig(dir))) {
          done = prefetchAll(c, prompt);
          info = (StoragePrefetchInfo) done[0];
          assertTrue(info.toString(), info.isRevoked());
          assertEquals(0, info.getHitTokens());
          assertEquals(0L, done[1]);
          assertEquals(1, c.storageStats().getPrefetchesRevoked());
        }
      }
    } finally {
      removeTree(dir);
    }
  }

  @Test
  public void unsupportedWithoutStorage() {
    Pool pool = new Pool(HostTierTest.HOST);
    try {
      KvPoolException e = expect(Status.UNSUPPORTED, pool::storageStats);
      assertTrue(e.getMessage(), e.getMessage().contains("storage"));
      expect(Status.UNSUPPORTED, () -> pool.storagePrefetch(PrefixCacheTest.tokens(1, 16), null));
      expect(Status.UNSUPPORTED, () -> pool.storagePrefetchPoll(1));
      expect(Status.UNSUPPORTED, () -> pool.storagePrefetchEnd(1));
      expect(Status.UNSUPPORTED, pool::storageFlush);
      expect(Status.UNSUPPORTED, pool::storageClear);
      // Without a storage tier, getStorageHit() stays 0.
      SeqBegin b = pool.begin(PrefixCacheTest.tokens(1, 9), null);
      assertEquals(0, pool.seqInfo(b.getSeq()).getStorageHit());
      pool.abort(b.getSeq());
    } finally {
      pool.close();
    }
    expect(Status.INVALID_ARGUMENT, pool::storageStats);  // a closed pool
  }

  @Test
  public void skipReasonsMatchHeader() {
    assertEquals(0, StorageSkip.NONE.swigValue());
    assertEquals(1, StorageSkip.BELOW_THRESHOLD.swigValue());
    assertEquals(2, StorageSkip.NOT_BACKED_UP.swigValue());
    assertEquals(3, StorageSkip.CAPACITY.swigValue());
    assertEquals(4, StorageSkip.HOST_FULL.swigValue());
    assertEquals(5, StorageSkip.values().length);
  }

  /** The K and V of `held` (40 slots, 2 layers) in pool b are the pattern pool A wrote for prompt 41. */
  static void expectStoredPattern(Pool b, long[] held) {
    for (int layer = 0; layer < 2; layer++) {
      float[] k = new float[40 * 2 * 8];
      float[] v = new float[k.length];
      b.getKv(layer, held, k, v);
      assertArrayEquals(Arrays.copyOf(HostTierTest.pattern(41, layer, 0), k.length), k, 0f);
      assertArrayEquals(Arrays.copyOf(HostTierTest.pattern(41, layer, 1), v.length), v, 0f);
    }
  }
}
