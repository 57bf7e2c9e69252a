package ai.kvpool.tests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import ai.kvpool.Kvpool;
import ai.kvpool.KvPoolException;
import ai.kvpool.PlanInfo;
import ai.kvpool.Pool;
import ai.kvpool.Status;
import java.lang.ref.WeakReference;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.Test;

/** Tests of the Java binding, run by JUnit 4 under java -Xcheck:jni. */
public class KvpoolTest {
  /** A valid MHA configuration; its plan numbers are checked in planNumbers(). */
  static final String VALID =
      "{\"model\":{\"num_layers\":32,\"attention\":\"mha\",\"kv_heads\":8,\"head_dim\":128},"
      + "\"pool\":{\"kv_dtype\":\"bf16\",\"page_size\":16,\"max_total_tokens\":100000,"
      + "\"max_running_requests\":8,\"max_context_len\":4096}}";

  /** VALID with one "key":value pair replaced. */
  static String with(String from, String to) {
    assertTrue("test bug: " + from, VALID.contains(from));
    return VALID.replace(from, to);
  }

  /** Runs body, which must throw KvPoolException with the given status. */
  static KvPoolException expect(Status status, org.junit.function.ThrowingRunnable body) {
    KvPoolException e = assertThrows(KvPoolException.class, body);
    assertEquals(e.toString(), status, e.getStatus());
    assertEquals(status.swigValue(), e.getCode());
    return e;
  }

  @Test
  public void version() {
    assertEquals(100, Kvpool.version());
    assertEquals("0.1.0", Kvpool.versionString());
    // The loaded library matches the headers the binding was generated from.
    assertEquals(Kvpool.KVPOOL_VERSION_STRING, Kvpool.versionString());
    assertEquals(Kvpool.KVPOOL_VERSION_NUMBER, Kvpool.version());
  }

  @Test
  public void statusCodesAndStrings() {
    assertEquals(0, Status.OK.swigValue());
    assertEquals(1, Status.INVALID_ARGUMENT.swigValue());
    assertEquals(2, Status.CONFIG.swigValue());
    assertEquals(8, Status.IO.swigValue());
    assertEquals(9, Status.HOST_MEMORY.swigValue());
    assertEquals(10, Status.CHECK_FAILED.swigValue());
    assertEquals(11, Status.DEVICE_FAULT.swigValue());
    assertEquals("configuration error", Kvpool.statusString(Status.CONFIG));
    assertNotEquals(Kvpool.statusString(Status.IO), Kvpool.statusString(Status.CONFIG));
    // A code newer than the binding keeps its number and gets a readable message.
    KvPoolException future = new KvPoolException(999, "");
    assertNull(future.getStatus());
    assertEquals(999, future.getCode());
    assertTrue(future.getMessage(), future.getMessage().contains("999"));
  }

  @Test
  public void createAndCloseTwice() {
    Pool pool = new Pool(VALID);
    assertEquals("cpu", pool.backend());
    pool.close();
    pool.close();
    try (Pool scoped = new Pool(VALID)) {
      assertEquals("cpu", scoped.backend());
    }
  }

  /** The Cleaner must not keep an unclosed Pool alive (it then frees the handle). */
  @Test
  public void unclosedPoolIsCollectable() throws Exception {
    WeakReference<Pool> pool = new WeakReference<>(new Pool(VALID));
    WeakReference<PlanInfo> plan = new WeakReference<>(Pool.plan(VALID));
    for (int i = 0; i < 100 && (pool.get() != null || plan.get() != null); i++) {
      System.gc();
      Thread.sleep(10);
    }
    assertNull("unreferenced Pool still reachable", pool.get());
    assertNull("unreferenced PlanInfo still reachable", plan.get());
  }

  @Test
  public void closedPoolThrowsInvalidArgument() {
    Pool pool = new Pool(VALID);
    pool.close();
    expect(Status.INVALID_ARGUMENT, pool::backend);
    expect(Status.INVALID_ARGUMENT, pool::plan);
  }

  @Test
  public void configErrorNamesTheJsonPath() {
    KvPoolException e = expect(Status.CONFIG, () -> new Pool(with("\"page_size\":16", "\"page_size\":12")).close());
    assertTrue(e.getMessage(), e.getMessage().contains("$.pool.page_size"));
    e = expect(Status.CONFIG, () -> Pool.plan(with("\"page_size\":16", "\"page_size\":12")));
    assertTrue(e.getMessage(), e.getMessage().contains("$.pool.page_size"));
  }

  @Test
  public void malformedJsonIsAConfigError() {
    for (String text : new String[] {"{\"model\": ", "{x", "", "[]"}) {
      expect(Status.CONFIG, () -> new Pool(text).close());
    }
    assertThrows(NullPointerException.class, () -> new Pool(null).close());
  }

  @Test
  public void fromFile() throws Exception {
    Path dir = Files.createTempDirectory("kvpool-java");
    Path file = dir.resolve("pool.json");
    Files.write(file, VALID.getBytes(StandardCharsets.UTF_8));
    try (Pool pool = Pool.fromFile(file.toString())) {
      assertEquals("cpu", pool.backend());
    } finally {
      Files.delete(file);
    }
    String missing = dir.resolve("does-not-exist-\u00e9.json").toString();
    KvPoolException e = expect(Status.IO, () -> Pool.fromFile(missing).close());
    assertTrue(e.getMessage(), e.getMessage().contains(missing));
    Files.delete(dir);
  }

  @Test
  public void planNumbers() {
    checkPlan(Pool.plan(VALID), 100000, 6250);  // a multiple of the page size
    // 99999 is rounded down to whole pages of 16.
    checkPlan(Pool.plan(with("\"max_total_tokens\":100000", "\"max_total_tokens\":99999")), 99984, 6249);
  }

  static void checkPlan(PlanInfo info, long maxTokens, long pages) {
    assertEquals(16, info.getPageSize());
    assertEquals(131072L, info.getKvBytesPerToken());  // 32 layers * 2 (K,V) * 8 heads * 128 * 2 bytes
    assertEquals(maxTokens, info.getMaxTotalTokens());
    assertEquals(pages, info.getNumPages());
    assertEquals(9, info.getReqRows());  // 8 + reserved row 0
    assertEquals((maxTokens + 16) * 131072L, info.getKvMemoryBytes());
    assertEquals(32, info.getNumLayers());
    assertEquals(8, info.getKvHeadsPerRank());
    assertEquals(info.getKvMemoryBytes() + info.getReqTableBytes() + info.getMambaMemoryBytes(),
        info.getTotalMemoryBytes());
  }

  @Test
  public void poolPlanEqualsStaticPlan() throws Exception {
    PlanInfo expected = Pool.plan(VALID);
    try (Pool pool = new Pool(VALID)) {
      PlanInfo actual = pool.plan();
      // Every getter, so fields added later are compared too.
      int compared = 0;
      for (Method getter : PlanInfo.class.getMethods()) {
        if (getter.getName().startsWith("get") && getter.getParameterCount() == 0
            && getter.getDeclaringClass() == PlanInfo.class) {
          assertEquals(getter.getName(), getter.invoke(expected), getter.invoke(actual));
          compared++;
        }
      }
      assertTrue("compared " + compared + " getters", compared >= 19);
    }
  }

  /** Each failure carries its own message, also under concurrency. */
  @Test
  public void messagesStayWithTheirCall() throws Exception {
    ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
    List<Thread> threads = new ArrayList<>();
    for (int size : new int[] {3, 5, 6, 7, 9, 10, 11, 12}) {
      String config = with("\"page_size\":16", "\"page_size\":" + size);
      Thread t = new Thread(() -> {
        for (int i = 0; i < 200; i++) {
          try {
            Pool.plan(config);
            failures.add("page_size " + size + " accepted");
            return;
          } catch (KvPoolException e) {
            if (!e.getMessage().contains("got " + size + ",")) {
              failures.add("page_size " + size + ": " + e.getMessage());
              return;
            }
          }
        }
      });
      threads.add(t);
      t.start();
    }
    for (Thread t : threads) {
      t.join();
    }
    assertTrue(failures.toString(), failures.isEmpty());
  }

  @Test
  public void cudaDeviceCount() {
    int n = Kvpool.cudaDeviceCount();
    if ("1".equals(System.getenv("KVPOOL_REQUIRE_GPU"))) {
      assertTrue("KVPOOL_REQUIRE_GPU=1 but " + n + " devices", n >= 1);
    } else if (!Files.exists(Path.of("/dev/nvidiactl"))) {
      assertEquals("no NVIDIA driver here", 0, n);  // no driver node: no usable GPU
    } else {
      assertTrue(n >= 0);
    }
  }
}
