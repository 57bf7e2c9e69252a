import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.Status;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.regex.Pattern;

/**
 * A small HTTP service that owns one kvpool pool and serves the request lifecycle of an inference
 * engine to many clients, on the JDK's own HTTP server (com.sun.net.httpserver):
 *
 * <pre>
 *   POST /begin?extra_key=K          body: the prompt as a JSON array of token ids
 *                                    -&gt; {"seq":7,"cached":32}
 *   POST /extend?seq=7&amp;chunk=16       the next prompt chunk -&gt; {"slots":[...]}
 *   POST /decode?seq=7&amp;token=42       one decode step       -&gt; {"slot":1234}
 *   POST /finish?seq=7&amp;committed=N    end; the first N tokens go to the prefix cache -&gt; {}
 *   GET  /metrics                    Prometheus text: the pool's families (metricsText()), the service's own
 *   GET  /healthz                    "ok"
 * </pre>
 *
 * <p>Requests run on a pool of worker threads that call the pool directly: it is opened with
 * {@code "pool": {"thread_safe": true}} (required of a configuration file too), so the library
 * serializes the calls itself; the service's read-write lock only keeps calls off a closed pool.
 * Errors are JSON
 * {"error":..., "code":N}: an out-of-memory pool is 503 (retry later: nothing changed), a bad
 * request 400.
 *
 * <pre>
 *   java -cp kvpool.jar:. KvPoolService [port [pool.json]]
 * </pre>
 *
 * (the kvpool jar from bindings/java/pom.xml carries its native libraries; the CMake build's jar
 * needs -Djava.library.path=&lt;build&gt;/bindings/java). Ctrl-C stops it: in-flight requests finish,
 * then the pool closes.
 */
public final class KvPoolService implements AutoCloseable {
  /** A CPU pool of a tiny model with a radix prefix cache: enough to run the service anywhere. */
  static final String DEFAULT_CONFIG = "{\"model\":{\"num_layers\":2,\"kv_heads\":2,\"head_dim\":16},"
      + "\"pool\":{\"device\":\"cpu\",\"kv_dtype\":\"f16\",\"page_size\":16,\"max_total_tokens\":16384,"
      + "\"max_running_requests\":64,\"max_context_len\":2048,\"thread_safe\":true},"
      + "\"prefix_cache\":{\"kind\":\"radix\",\"eviction\":\"lru\"}}";

  static final String[] OPS = {"begin", "extend", "decode", "finish"};
  private static final int BEGIN = 0;
  private static final int EXTEND = 1;
  private static final int DECODE = 2;
  private static final int FINISH = 3;

  private final HttpServer server;
  private final ExecutorService workers;
  /** Calls hold the read lock (many at once), close() the write lock. */
  private final ReentrantReadWriteLock lifetime = new ReentrantReadWriteLock();
  private Pool pool;  // null once closed
  // The service's own metrics.
  private final AtomicLongArray requests = new AtomicLongArray(OPS.length);
  private final AtomicLongArray failures = new AtomicLongArray(OPS.length);
  private final AtomicLong outOfMemory = new AtomicLong();

  /** Opens the pool and starts serving on address (port 0: a free port). */
  public KvPoolService(InetSocketAddress address, String config, int threads) throws IOException {
    if (!Pattern.compile("\"thread_safe\"\\s*:\\s*true").matcher(config).find()) {
      throw new IllegalArgumentException("the pool is called from many threads: its configuration must set "
          + "\"pool\": {\"thread_safe\": true}");
    }
    pool = new Pool(config);
    try {
      server = HttpServer.create(address, 0);
    } catch (IOException e) {
      pool.close();
      throw e;
    }
    workers = Executors.newFixedThreadPool(threads);
    server.setExecutor(workers);
    server.createContext("/begin", ex -> post(ex, this::begin));
    server.createContext("/extend", ex -> post(ex, this::extend));
    server.createContext("/decode", ex -> post(ex, this::decode));
    server.createContext("/finish", ex -> post(ex, this::finish));
    server.createContext("/metrics", this::metrics);
    server.createContext("/healthz", ex -> reply(ex, 200, "text/plain", "ok\n"));
    server.start();
  }

  /** The address it listens on (with the port chosen when 0 was asked for). */
  public InetSocketAddress address() {
    return server.getAddress();
  }

  /** Stops accepting, lets in-flight requests finish (at most 10 s), then closes the pool. */
  @Override
  public void close() {
    server.stop(1);
    workers.shutdown();
    try {
      workers.awaitTermination(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    lifetime.writeLock().lock();
    try {
      if (pool != null) {
        pool.close();
        pool = null;
      }
    } finally {
      lifetime.writeLock().unlock();
    }
  }

  public static void main(String[] args) throws Exception {
    int port = args.length > 0 ? Integer.parseInt(args[0]) : 8080;
    String config = args.length > 1 ? Files.readString(Path.of(args[1])) : DEFAULT_CONFIG;
    KvPoolService service = new KvPoolService(new InetSocketAddress("127.0.0.1", port), config, 16);
    System.out.println("kvpool service on http://127.0.0.1:" + service.address().getPort());
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      service.close();
      stopped.countDown();
    }));
    stopped.await();
  }

  // --- Handlers: each returns the JSON body of a 200 answer ---------------------------------

  /** A handler of a POST endpoint. */
  private interface Handler {
    String handle(Map<String, String> query, String body);
  }

  private String begin(Map<String, String> query, String body) {
    int[] tokens = parseTokens(body);
    String extraKey = query.getOrDefault("extra_key", "");
    SeqBegin begun = (SeqBegin) call(BEGIN, p -> p.begin(tokens, extraKey));
    return "{\"seq\":" + Long.toUnsignedString(begun.getSeq()) + ",\"cached\":" + begun.getCached() + "}";
  }

  private String extend(Map<String, String> query, String body) {
    long seq = number(query, "seq");
    long chunk = number(query, "chunk");
    long[] slots = (long[]) call(EXTEND, p -> p.seqExtend(new long[] {seq}, new long[] {chunk}));
    StringBuilder json = new StringBuilder("{\"slots\":[");
    for (int i = 0; i < slots.length; i++) {
      json.append(i == 0 ? "" : ",").append(slots[i]);
    }
    return json.append("]}").toString();
  }

  private String decode(Map<String, String> query, String body) {
    long seq = number(query, "seq");
    long token = number(query, "token");
    if (token > Integer.MAX_VALUE) {
      throw new BadRequest("query parameter token: want a 32-bit token id");
    }
    long[] slots = (long[]) call(DECODE, p -> p.seqDecode(new long[] {seq}, new int[] {(int) token}));
    return "{\"slot\":" + slots[0] + "}";
  }

  private String finish(Map<String, String> query, String body) {
    long seq = number(query, "seq");
    long committed = number(query, "committed");
    call(FINISH, p -> {
      p.finish(seq, committed);
      return null;
    });
    return "{}";
  }

  /** A call into the pool. */
  private interface PoolCall {
    Object apply(Pool pool);
  }

  /** Runs one call into the pool, concurrently with others, and counts it. */
  private Object call(int op, PoolCall f) {
    lifetime.readLock().lock();
    try {
      if (pool == null) {
        throw new ShuttingDown();
      }
      requests.incrementAndGet(op);
      return f.apply(pool);
    } catch (KvPoolException e) {
      failures.incrementAndGet(op);
      if (e.getStatus() == Status.OUT_OF_MEMORY) {
        outOfMemory.incrementAndGet();
      }
      throw e;
    } finally {
      lifetime.readLock().unlock();
    }
  }

  // --- /metrics: the Prometheus text exposition format (version 0.0.4) --------------------

  /** The pool's own families (metricsText(): capacity, use, prefix hits, ...) and the service's. */
  private void metrics(HttpExchange ex) throws IOException {
    StringBuilder out = new StringBuilder();
    lifetime.readLock().lock();
    try {
      if (pool == null) {
        reply(ex, 503, "text/plain", "the service is shutting down\n");
        return;
      }
      out.append(pool.metricsText());
      perOp(out, "kvpool_service_requests_total", "Calls into the pool, per operation.", requests);
      perOp(out, "kvpool_service_failures_total", "Failed calls into the pool, per operation.", failures);
      out.append("# HELP kvpool_service_out_of_memory_total Calls answered 503 because the pool was full.\n")
          .append("# TYPE kvpool_service_out_of_memory_total counter\n")
          .append("kvpool_service_out_of_memory_total ").append(outOfMemory.get()).append('\n');
    } finally {
      lifetime.readLock().unlock();
    }
    reply(ex, 200, "text/plain; version=0.0.4; charset=utf-8", out.toString());
  }

  private static void perOp(StringBuilder out, String name, String help, AtomicLongArray values) {
    out.append("# HELP ").append(name).append(' ').append(help).append('\n');
    out.append("# TYPE ").append(name).append(" counter\n");
    for (int i = 0; i < OPS.length; i++) {
      out.append(name).append("{op=\"").append(OPS[i]).append("\"} ").append(values.get(i)).append('\n');
    }
  }

  // --- HTTP plumbing -------------------------------------------------------------------------

  /** A request the service cannot parse: 400. */
  private static final class BadRequest extends RuntimeException {
    private static final long serialVersionUID = 1L;

    BadRequest(String message) {
      super(message);
    }
  }

  /** A call after close(): 503. */
  private static final class ShuttingDown extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ShuttingDown() {
      super("the service is shutting down");
    }
  }

  /** POST only; the handler's JSON, or the error as JSON with its HTTP status. */
  private static void post(HttpExchange ex, Handler handler) throws IOException {
    try {
      if (!ex.getRequestMethod().equals("POST")) {
        ex.getResponseHeaders().set("Allow", "POST");
        reply(ex, 405, "application/json", error("POST only", -1));
        return;
      }
      String body;
      try (InputStream in = ex.getRequestBody()) {
        body = new String(in.readNBytes(1 << 20), StandardCharsets.UTF_8);
      }
      String answer;
      int status = 200;
      try {
        answer = handler.handle(query(ex.getRequestURI()), body);
      } catch (BadRequest e) {
        status = 400;
        answer = error(e.getMessage(), -1);
      } catch (ShuttingDown e) {
        status = 503;
        answer = error(e.getMessage(), -1);
      } catch (KvPoolException e) {
        Status s = e.getStatus();
        status = s == Status.OUT_OF_MEMORY ? 503 : s == Status.INVALID_ARGUMENT ? 400 : 500;
        answer = error(e.getMessage(), e.getCode());
      }
      reply(ex, status, "application/json", answer + "\n");
    } finally {
      ex.close();
    }
  }

  private static void reply(HttpExchange ex, int status, String contentType, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    ex.getResponseHeaders().set("Content-Type", contentType);
    ex.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = ex.getResponseBody()) {
      out.write(bytes);
    }
  }

  private static String error(String message, int code) {
    StringBuilder json = new StringBuilder("{\"error\":\"");
    for (char c : message.toCharArray()) {
      if (c == '"' || c == '\\') {
        json.append('\\').append(c);
      } else if (c < 0x20) {
        json.append(String.format("\\u%04x", (int) c));
      } else {
        json.append(c);
      }
    }
    json.append('"');
    if (code >= 0) {
      json.append(",\"code\":").append(code);
    }
    return json.append('}').toString();
  }

  private static Map<String, String> query(URI uri) {
    Map<String, String> params = new HashMap<>();
    String raw = uri.getRawQuery();
    if (raw == null) {
      return params;
    }
    for (String pair : raw.split("&")) {
      int eq = pair.indexOf('=');
      String key = eq < 0 ? pair : pair.substring(0, eq);
      String value = eq < 0 ? "" : pair.substring(eq + 1);
      params.put(URLDecoder.decode(key, StandardCharsets.UTF_8), URLDecoder.decode(value, StandardCharsets.UTF_8));
    }
    return params;
  }

  private static long number(Map<String, String> query, String name) {
    String value = query.get(name);
    try {
      long n = Long.parseLong(value == null ? "" : value);
      if (n >= 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // answered below
    }
    throw new BadRequest("query parameter " + name + ": want a non-negative integer, got \"" + value + "\"");
  }

  /** The body of /begin: a JSON array of integers, e.g. [1, 2, 3]. */
  static int[] parseTokens(String body) {
    String s = body.strip();
    if (!s.startsWith("[") || !s.endsWith("]")) {
      throw new BadRequest("the body must be a JSON array of token ids");
    }
    s = s.substring(1, s.length() - 1).strip();
    List<Integer> tokens = new ArrayList<>();
    if (!s.isEmpty()) {
      for (String item : s.split(",")) {
        try {
          tokens.add(Integer.parseInt(item.strip()));
        } catch (NumberFormatException e) {
          throw new BadRequest("the body must be a JSON array of token ids; \"" + item.strip() + "\" is not one");
        }
      }
    }
    int[] out = new int[tokens.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = tokens.get(i);
    }
    return out;
  }
}
