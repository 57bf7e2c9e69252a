package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.SeqInfo;
import ai.kvpool.Status;
import ai.kvpool.StorageBackend;
import ai.kvpool.StoragePrefetchInfo;
import ai.kvpool.StorageResult;
import ai.kvpool.StorageStats;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.Test;

/** Pool.withStorage (kvpool_create_with_storage): a storage tier written in Java. */
public class StorageBackendTest {
  /** StorageTierTest's pool with the custom backend instead of a directory. */
  static final String CUSTOM = "{\"model\":{\"name\":\"tiny\",\"num_layers\":2,\"kv_heads\":2,\"head_dim\":8},"
      + "\"pool\":{\"kv_dtype\":\"f32\",\"page_size\":4,\"max_total_tokens\":64,\"max_running_requests\":8,"
      + "\"max_context_len\":128},\"prefix_cache\":{\"kind\":\"radix\"},"
      + "\"host_cache\":{\"ratio\":4,\"headroom_bytes\":0},"
      + "\"storage\":{\"backend\":\"custom\",\"prefetch_threshold_tokens\":8}}";

  /** A HashMap under a lock, with switches that make each method throw or damage what it reads. */
  static class MapBackend extends StorageBackend {
    final Map<String, byte[]> values = new HashMap<>();
    final AtomicInteger puts = new AtomicInteger();
    final AtomicInteger gets = new AtomicInteger();
    final AtomicInteger exists = new AtomicInteger();
    final AtomicInteger clears = new AtomicInteger();
    final Set<String> threads = new HashSet<>();
    final List<String> failures = new ArrayList<>();
    volatile boolean throwPut;
    volatile boolean throwGet;
    volatile boolean throwExists;
    volatile boolean throwClear;
    volatile boolean damage;

    synchronized int size() {
      return values.size();
    }

    synchronized Set<String> threadNames() {
      return new HashSet<>(threads);
    }

    synchronized List<String> failureList() {
      return new ArrayList<>(failures);
    }

    private synchronized void enter() {
      threads.add(Thread.currentThread().getName());
    }

    @Override
    public void put(String[] keys, byte[][] batch, StorageResult[] results) {
      enter();
      puts.incrementAndGet();
      if (throwPut) {
        throw new IllegalStateException("server down");
      }
      synchronized (this) {
        for (int i = 0; i < keys.length; i++) {
          values.putIfAbsent(keys[i], batch[i]);  // write-once: a key names the same bytes
          results[i] = StorageResult.OK;
        }
      }
    }

    @Override
    public void get(String[] keys, byte[][] batch, StorageResult[] results) {
      enter();
      gets.incrementAndGet();
      if (throwGet) {
        throw new IllegalStateException("server down");
      }
      synchronized (this) {
        for (int i = 0; i < keys.length; i++) {
          byte[] v = values.get(keys[i]);
          if (v == null) {
            results[i] = StorageResult.MISS;
            continue;
          }
          batch[i] = v;
          if (damage) {
            batch[i] = v.clone();
            batch[i][v.length / 2] ^= 0x5a;  // one payload byte: the checksum must catch it
          }
          results[i] = StorageResult.OK;
        }
      }
    }

    @Override
    public int existsPrefix(String[] keys) {
      enter();
      exists.incrementAndGet();
      if (throwExists) {
        throw new IllegalStateException("server down");
      }
      synchronized (this) {
        int found = 0;
        while (found < keys.length && values.containsKey(keys[found])) {
          found++;
        }
        return found;
      }
    }

    @Override
    public void clear() {
      clears.incrementAndGet();
      if (throwClear) {
        throw new IllegalStateException("server down");
      }
      synchronized (this) {
        values.clear();
      }
    }

    @Override
    protected synchronized void failed(String operation, Throwable error) {
      failures.add(operation + ": " + error.getMessage());
    }
  }

  /** A backend without clear(). */
  static class NoClearBackend extends StorageBackend {
    @Override
    public void put(String[] keys, byte[][] batch, StorageResult[] results) {
      Arrays.fill(results, StorageResult.OK);
    }

    @Override
    public void get(String[] keys, byte[][] batch, StorageResult[] results) {
      Arrays.fill(results, StorageResult.MISS);
    }

    @Override
    public int existsPrefix(String[] keys) {
      return 0;
    }
  }

  /** Computes prompt on pool (KV rows from HostTierTest.pattern), finishes it and flushes the backups. */
  static void store(Pool pool, int[] prompt) {
    SeqBegin s = pool.begin(prompt, null);
    long[] slots = pool.seqExtend(new long[] {s.getSeq()}, new long[] {prompt.length - s.getCached()});
    for (int layer = 0; layer < 2; layer++) {
      pool.setKv(layer, slots, HostTierTest.pattern(prompt.length, layer, 0),
          HostTierTest.pattern(prompt.length, layer, 1));
    }
    pool.finish(s.getSeq(), prompt.length);
    pool.storageFlush();
  }

  @Test
  public void secondPoolLoadsWhatTheFirstStored() throws Exception {
    MapBackend backend = new MapBackend();
    int[] prompt = PrefixCacheTest.tokens(11, 41);  // 10 whole pages and one token
    try (Pool a = Pool.withStorage(CUSTOM, backend); Pool b = Pool.withStorage(CUSTOM, backend)) {
      store(a, prompt);
      StorageStats s = a.storageStats();
      assertEquals(10, s.getBackupPages());
      assertEquals(0, s.getBackupPagesFailed());
      assertEquals(10, s.getStorePuts());
      assertEquals(0, s.getStorePutErrors());
      assertEquals(10, backend.size());
      // The puts ran on the pool's storage thread, attached to the JVM under its own name.
      assertEquals(backend.threadNames().toString(), Set.of("kvpool-storage"), backend.threadNames());
      assertTrue(storageThreads() >= 1);  // attached once, for the thread's life

      // Pool b has never seen the prompt: the Java map holds all 10 pages.
      Object[] done = StorageTierTest.prefetchAll(b, prompt);
      StoragePrefetchInfo info = (StoragePrefetchInfo) done[0];
      assertEquals(40L, done[1]);
      assertFalse(info.toString(), info.isRevoked());
      assertEquals(40, info.getHitTokens());
      assertEquals(40, info.getLoadedTokens());
      s = b.storageStats();
      assertEquals(10, s.getStoreGets());
      assertEquals(10, s.getStoreGetHits());
      assertEquals(0, s.getStoreGetErrors());
      assertEquals(0, s.getPagesCorrupt());
      assertTrue(backend.exists.get() >= 1);

      // begin loads the 40 tokens that came from the Java store, with the KV pool a wrote.
      SeqBegin sb = b.begin(prompt, null);
      assertEquals(40, sb.getCached());
      SeqInfo si = b.seqInfo(sb.getSeq());
      assertEquals(40, si.getStorageHit());
      long[] held = b.seqSlots(sb.getSeq());
      StorageTierTest.expectStoredPattern(b, held);
      b.abort(sb.getSeq());
      assertEquals(40, b.storageStats().getStorageHitTokens());
      b.check();

      // storageClear calls clear() on the calling thread.
      a.storageClear();
      assertEquals(1, backend.clears.get());
      assertEquals(0, backend.size());
      assertTrue(backend.failureList().toString(), backend.failureList().isEmpty());
    }
    // close() joined the storage threads, which detached from the JVM as they exited.
    assertEquals(0, storageThreads());
  }

  /** Live Java threads that are attached storage threads. */
  static long storageThreads() {
    return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("kvpool-storage")).count();
  }

  @Test
  public void throwingBackendCountsErrors() throws Exception {
    int[] prompt = PrefixCacheTest.tokens(11, 41);
    MapBackend backend = new MapBackend();
    backend.throwPut = true;
    try (Pool a = Pool.withStorage(CUSTOM, backend)) {
      store(a, prompt);  // the batch fails: the rest of the backup job is skipped
      StorageStats s = a.storageStats();
      assertEquals(0, s.getStorePuts());
      assertTrue(s.toString(), s.getStorePutErrors() > 0);
      assertTrue(s.toString(), s.getBackupPagesFailed() > 0);
      assertEquals(0, s.getBackupPages());
      assertEquals(0, backend.size());
      assertTrue(backend.failureList().contains("put: server down"));
      a.check();
    }

    backend = new MapBackend();
    try (Pool a = Pool.withStorage(CUSTOM, backend)) {
      store(a, prompt);
      assertEquals(10, backend.size());
    }
    // A get that throws: the prefetch ends at its first page, nothing is loaded.
    backend.throwGet = true;
    try (Pool b = Pool.withStorage(CUSTOM, backend)) {
      Object[] done = StorageTierTest.prefetchAll(b, prompt);
      StoragePrefetchInfo info = (StoragePrefetchInfo) done[0];
      assertEquals(40, info.getHitTokens());  // existsPrefix still answered
      assertEquals(0, info.getLoadedTokens());
      assertEquals(0L, done[1]);
      StorageStats s = b.storageStats();
      assertTrue(s.toString(), s.getStoreGetErrors() > 0);
      assertTrue(s.toString(), s.getReadFailures() > 0);
      assertEquals(0, s.getStoreGetHits());
      assertTrue(backend.failureList().contains("get: server down"));
      b.check();
    }
    // Damaged bytes from get are rejected by kvpool's checksum, not loaded.
    backend.throwGet = false;
    backend.damage = true;
    try (Pool b = Pool.withStorage(CUSTOM, backend)) {
      Object[] done = StorageTierTest.prefetchAll(b, prompt);
      assertEquals(0, ((StoragePrefetchInfo) done[0]).getLoadedTokens());
      assertTrue(b.storageStats().getPagesCorrupt() > 0);
    }
    // existsPrefix that throws finds nothing: the prefetch is revoked.
    backend.damage = false;
    backend.throwExists = true;
    try (Pool b = Pool.withStorage(CUSTOM, backend)) {
      Object[] done = StorageTierTest.prefetchAll(b, prompt);
      assertTrue(((StoragePrefetchInfo) done[0]).isRevoked());
      assertEquals(1, b.storageStats().getPrefetchesRevoked());
      assertTrue(backend.failureList().contains("existsPrefix: server down"));
    }
    // clear that throws: storageClear fails with IO, the values stay.
    backend.throwClear = true;
    try (Pool b = Pool.withStorage(CUSTOM, backend)) {
      KvPoolException e = expect(Status.IO, b::storageClear);
      assertTrue(e.getMessage(), e.getMessage().contains("clear"));
      assertEquals(10, backend.size());
      assertTrue(backend.failureList().contains("clear: server down"));
    }
  }

  @Test
  public void badInput() {
    MapBackend backend = new MapBackend();
    KvPoolException e = expect(Status.INVALID_ARGUMENT, () -> Pool.withStorage(CUSTOM, null));
    assertTrue(e.getMessage(), e.getMessage().contains("backend"));
    // The configuration must name the custom backend, and only withStorage may.
    String file = CUSTOM.replace("\"backend\":\"custom\"", "\"backend\":\"file\",\"path\":\"/nonexistent\"");
    expect(Status.CONFIG, () -> Pool.withStorage(file, backend));
    expect(Status.CONFIG, () -> Pool.withStorage(HostTierTest.HOST, backend));
    e = expect(Status.CONFIG, () -> new Pool(CUSTOM));
    assertTrue(e.getMessage(), e.getMessage().contains("kvpool_create_with_storage"));
    expect(Status.CONFIG, () -> Pool.withStorage("{", backend));
    // A failed creation calls nothing.
    assertEquals(0, backend.puts.get() + backend.gets.get() + backend.exists.get() + backend.clears.get());

    // Without clear(), storageClear is unsupported.
    try (Pool pool = Pool.withStorage(CUSTOM, new NoClearBackend())) {
      expect(Status.UNSUPPORTED, pool::storageClear);
      pool.storageFlush();
    }
  }

  @Test
  public void poolKeepsBackendReachableUntilClosed() throws Exception {
    int[] prompt = PrefixCacheTest.tokens(11, 41);
    MapBackend backend = new MapBackend();
    WeakReference<MapBackend> weak = new WeakReference<>(backend);
    Pool pool = Pool.withStorage(CUSTOM, backend);
    backend = null;
    for (int i = 0; i < 3; i++) {
      System.gc();
    }
    // Only the pool holds it now, and its storage thread still reaches it.
    store(pool, prompt);
    MapBackend held = weak.get();
    assertNotNull(held);
    assertEquals(10, held.size());
    held = null;
    pool.close();
    // close() released the pool's reference: the backend can be collected.
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (weak.get() != null && System.nanoTime() < deadline) {
      System.gc();
      Thread.sleep(10);
    }
    assertNull(weak.get());
  }
}
