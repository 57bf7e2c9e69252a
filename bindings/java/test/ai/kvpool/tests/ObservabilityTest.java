package ai.kvpool.tests;

import static ai.kvpool.tests.Configs.expect;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import ai.kvpool.HostStats;
import ai.kvpool.KvPoolException;
import ai.kvpool.Kvpool;
import ai.kvpool.LogLevel;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.Stats;
import ai.kvpool.Status;
import ai.kvpool.StorageStats;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.After;
import org.junit.Test;

/** Pool.metricsText (metrics.h) and Kvpool.setLogListener (log.h). */
public class ObservabilityTest {
  private static final Pattern SAMPLE =
      Pattern.compile("^(kvpool_[a-zA-Z0-9_]*)(\\{[a-z_]+=\"[^\"\\\\]*\"(,[a-z_]+=\"[^\"\\\\]*\")*\\})? ([0-9]+)$");
  private static final Pattern TYPE = Pattern.compile("^# TYPE (kvpool_[a-zA-Z0-9_]*) (counter|gauge)$");
  private static final Pattern HELP = Pattern.compile("^# HELP (kvpool_[a-zA-Z0-9_]*) .+$");

  /** Checks the exposition format and returns the samples by series. */
  static Map<String, Long> parse(String text) {
    assertTrue("ends with a newline", text.endsWith("\n"));
    Map<String, Long> samples = new HashMap<>();
    Set<String> families = new HashSet<>();
    String family = "";
    String helped = "";
    for (String line : text.substring(0, text.length() - 1).split("\n", -1)) {
      Matcher m = HELP.matcher(line);
      if (m.matches()) {
        helped = m.group(1);
        continue;
      }
      m = TYPE.matcher(line);
      if (m.matches()) {
        assertEquals("HELP before TYPE: " + line, helped, m.group(1));
        assertTrue("each family once: " + line, families.add(m.group(1)));
        assertEquals("counters and only counters end in _total: " + line, m.group(2).equals("counter"),
            m.group(1).endsWith("_total"));
        family = m.group(1);
        continue;
      }
      m = SAMPLE.matcher(line);
      assertTrue("a sample: " + line, m.matches());
      assertEquals("inside its family: " + line, family, m.group(1));
      String series = m.group(1) + (m.group(2) == null ? "" : m.group(2));
      assertEquals("each series once: " + line, null, samples.put(series, Long.parseLong(m.group(4))));
    }
    return samples;
  }

  static long at(Map<String, Long> m, String series) {
    Long v = m.get(series);
    if (v == null) {
      fail("no sample " + series + " in " + m.keySet());
    }
    return v;
  }

  @After
  public void clearListener() {
    Kvpool.setLogListener(null, LogLevel.ERROR);
  }

  @Test
  public void metricsEqualTheStats() {
    int[] prompt = PrefixCacheTest.tokens(11, 41);
    StorageBackendTest.MapBackend backend = new StorageBackendTest.MapBackend();
    try (Pool a = Pool.withStorage(StorageBackendTest.CUSTOM, backend);
        Pool b = Pool.withStorage(StorageBackendTest.CUSTOM, backend)) {
      StorageBackendTest.store(a, prompt);
      long id = b.storagePrefetch(prompt, null).getId();
      assertNotEquals(0, id);
      while (!b.storagePrefetchPoll(id).isDone()) {
        Thread.onSpinWait();
      }
      b.storagePrefetchEnd(id);
      SeqBegin s = b.begin(prompt, null);
      long storageHit = b.seqInfo(s.getSeq()).getStorageHit();
      assertTrue(storageHit > 0);
      b.abort(s.getSeq());
      for (Pool p : new Pool[] {a, b}) {
        Map<String, Long> m = parse(p.metricsText());
        Stats st = p.stats();
        HostStats h = p.hostStats();
        StorageStats ss = p.storageStats();
        assertEquals(st.getTokenCapacity(), at(m, "kvpool_capacity_tokens{tier=\"device\"}"));
        assertEquals(st.getTokenHeld(), at(m, "kvpool_used_tokens{tier=\"device\"}"));
        assertEquals(st.getAllocCalls(), at(m, "kvpool_alloc_calls_total"));
        assertEquals(h.getCapacityTokens(), at(m, "kvpool_capacity_tokens{tier=\"host\"}"));
        assertEquals(h.getBackups(), at(m, "kvpool_transfers_total{direction=\"device_to_host\"}"));
        assertEquals(h.getBytesToDevice(), at(m, "kvpool_transfer_bytes_total{direction=\"host_to_device\"}"));
        assertEquals(ss.getBackupBytes(), at(m, "kvpool_transfer_bytes_total{direction=\"host_to_storage\"}"));
        assertEquals(ss.getPrefetchBytes(), at(m, "kvpool_transfer_bytes_total{direction=\"storage_to_host\"}"));
        assertEquals(ss.getStorageHitTokens(), at(m, "kvpool_prefix_hit_tokens_total{tier=\"storage\"}"));
        assertEquals(ss.getStorePutErrors(), at(m, "kvpool_storage_operation_errors_total{operation=\"put\"}"));
      }
      assertEquals(storageHit, at(parse(b.metricsText()), "kvpool_prefix_hit_tokens_total{tier=\"storage\"}"));
    }
  }

  @Test
  public void metricsOfAClosedPoolThrow() {
    Pool p = new Pool(Configs.PAGED);
    assertFalse(parse(p.metricsText()).containsKey("kvpool_capacity_tokens{tier=\"host\"}"));
    p.close();
    expect(Status.INVALID_ARGUMENT, p::metricsText);
  }

  /** Collects messages. */
  static final class Recorder implements ai.kvpool.LogListener {
    final List<String> messages = new ArrayList<>();
    final Set<String> threads = new HashSet<>();

    @Override
    public synchronized void log(LogLevel level, String message) {
      messages.add(level + ": " + message);
      threads.add(Thread.currentThread().getName());
    }

    synchronized long count(String part) {
      return messages.stream().filter(m -> m.contains(part)).count();
    }
  }

  @Test
  public void logLevelsAreTheHeaders() {
    assertEquals(0, LogLevel.ERROR.swigValue());
    assertEquals(1, LogLevel.WARN.swigValue());
    assertEquals(2, LogLevel.INFO.swigValue());
    assertEquals(3, LogLevel.DEBUG.swigValue());
  }

  @Test
  public void listenerGetsMessagesByLevel() {
    Recorder info = new Recorder();
    Kvpool.setLogListener(info, LogLevel.INFO);
    try (Pool p = new Pool(Configs.PAGED)) {
      assertEquals(1, info.count("INFO: pool created: model \"\""));
      expect(Status.INVALID_ARGUMENT, () -> p.free(new long[] {5}));
      assertEquals(0, info.count("DEBUG"));
      Recorder debug = new Recorder();
      Kvpool.setLogListener(debug, LogLevel.DEBUG);
      KvPoolException e = expect(Status.INVALID_ARGUMENT, () -> p.free(new long[] {5}));
      assertEquals(debug.messages.toString(), 1, debug.count("DEBUG: failed call (invalid argument): " + e.getMessage()));
      Kvpool.setLogListener(null, LogLevel.DEBUG);
      expect(Status.INVALID_ARGUMENT, () -> p.free(new long[] {5}));
      assertEquals(1, debug.count("DEBUG"));
    }
    assertEquals(0, info.count("destroying pool"));
    Recorder closing = new Recorder();
    Pool q = new Pool(Configs.PAGED);
    Kvpool.setLogListener(closing, LogLevel.INFO);
    q.close();  // returns no status: its message is delivered all the same
    assertEquals(closing.messages.toString(), 1, closing.count("INFO: destroying pool"));
  }

  @Test
  public void listenerCannotSetTheListener() {
    AtomicReference<Throwable> inner = new AtomicReference<>();
    AtomicInteger calls = new AtomicInteger();
    Kvpool.setLogListener((level, message) -> {
      if (calls.incrementAndGet() == 1) {
        try {
          Kvpool.setLogListener(null, LogLevel.ERROR);
        } catch (Throwable t) {
          inner.set(t);
        }
      }
    }, LogLevel.DEBUG);
    try (Pool p = new Pool(Configs.PAGED)) {
      assertTrue(String.valueOf(inner.get()), inner.get() instanceof KvPoolException);
      assertEquals(Status.INVALID_ARGUMENT, ((KvPoolException) inner.get()).getStatus());
      expect(Status.INVALID_ARGUMENT, () -> p.free(new long[] {5}));
      assertTrue("still set", calls.get() >= 2);
    }
  }

  @Test
  public void throwingListenerDoesNotBreakTheCall() {
    Kvpool.setLogListener((level, message) -> {
      throw new IllegalStateException("listener failed");
    }, LogLevel.DEBUG);
    try (Pool p = new Pool(Configs.PAGED)) {
      expect(Status.INVALID_ARGUMENT, () -> p.free(new long[] {5}));  // the call's own exception, not the listener's
    }
  }

  @Test
  public void storageThreadsLogThroughTheListener() throws Exception {
    Recorder r = new Recorder();
    Kvpool.setLogListener(r, LogLevel.WARN);
    StorageBackendTest.MapBackend backend = new StorageBackendTest.MapBackend();
    backend.throwPut = true;
    try (Pool p = Pool.withStorage(StorageBackendTest.CUSTOM, backend)) {
      StorageBackendTest.store(p, PrefixCacheTest.tokens(11, 41));
    }
    assertTrue(r.messages.toString(), r.count("WARN: storage backend, storing pages: since the last report") >= 1);
    assertTrue(r.threads.toString(), r.threads.contains("kvpool-storage"));

    // Replacing the listener while threads log: a replaced listener never runs again.
    AtomicBoolean stop = new AtomicBoolean();
    List<Thread> threads = new ArrayList<>();
    AtomicInteger late = new AtomicInteger();
    try (Pool p = new Pool(Configs.PAGED)) {
      for (int i = 0; i < 3; i++) {
        Thread t = new Thread(() -> {
          while (!stop.get()) {
            try {
              p.free(new long[] {7});
            } catch (KvPoolException expected) {
              // the failure is the message
            }
          }
        });
        t.start();
        threads.add(t);
      }
      for (int i = 0; i < 50; i++) {
        AtomicBoolean retired = new AtomicBoolean();
        Kvpool.setLogListener((level, message) -> {
          if (retired.get()) {
            late.incrementAndGet();
          }
        }, LogLevel.DEBUG);
        Thread.sleep(0, 200_000);
        Kvpool.setLogListener(null, LogLevel.DEBUG);
        retired.set(true);
      }
      stop.set(true);
      for (Thread t : threads) {
        t.join();
      }
    }
    assertEquals(0, late.get());
  }
}
