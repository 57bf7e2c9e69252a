import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Starts KvPoolService on a free loopback port, drives it with many concurrent clients through
 * begin/extend/decode/finish, checks every answer and the final /metrics, and stops it. Exits 1 on
 * the first failed check.
 */
public final class KvPoolServiceTest {
  private static final int CLIENTS = 16;
  private static final int PER_CLIENT = 8;
  private static final int DECODE_STEPS = 4;
  private static final int CHUNK = 16;

  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private static String base;

  public static void main(String[] args) throws Exception {
    // The pool is called from many threads: a configuration without thread_safe is refused.
    boolean refused = false;
    try (KvPoolService unsafe = new KvPoolService(new InetSocketAddress("127.0.0.1", 0),
        KvPoolService.DEFAULT_CONFIG.replace("\"thread_safe\":true", "\"thread_safe\":false"), 1)) {
      unsafe.address();
    } catch (IllegalArgumentException e) {
      refused = true;
    }
    check(refused, "a configuration without \"thread_safe\": true was accepted");

    KvPoolService service = new KvPoolService(new InetSocketAddress("127.0.0.1", 0),
        KvPoolService.DEFAULT_CONFIG, 8);
    base = "http://127.0.0.1:" + service.address().getPort();
    try {
      drive(service);
    } catch (Throwable t) {
      service.close();
      System.err.println("KvPoolServiceTest: FAIL: " + t);
      t.printStackTrace();
      System.exit(1);
    }
  }

  private static void drive(KvPoolService service) throws Exception {
    int[] shared = new int[64];  // a "system prompt" every request starts with
    for (int i = 0; i < shared.length; i++) {
      shared[i] = 1000 + i;
    }
    ExecutorService clients = Executors.newFixedThreadPool(CLIENTS);
    List<Future<long[]>> results = new ArrayList<>();
    for (int c = 0; c < CLIENTS; c++) {
      final int client = c;
      results.add(clients.submit(() -> {
        long[] totals = new long[3];  // extend calls, prompt tokens, cached tokens
        for (int i = 0; i < PER_CLIENT; i++) {
          int[] suffix = suffix(client, i);
          int[] prompt = Arrays.copyOf(shared, shared.length + suffix.length);
          System.arraycopy(suffix, 0, prompt, shared.length, suffix.length);
          long[] one = serve(prompt);
          totals[0] += one[0];
          totals[1] += prompt.length;
          totals[2] += one[1];
        }
        return totals;
      }));
    }
    long chunks = 0;
    long prompt = 0;
    long cached = 0;
    for (Future<long[]> f : results) {
      long[] t = f.get();
      chunks += t[0];
      prompt += t[1];
      cached += t[2];
    }
    clients.shutdown();
    long n = CLIENTS * PER_CLIENT;
    check(cached >= (n - CLIENTS) * 48, "only " + cached + " prompt tokens were found in the prefix cache");

    // Bad requests are answered, not crashed on, and change nothing.
    expectError("GET", "/begin", "", 405);
    expectError("POST", "/begin", "not json", 400);
    expectError("POST", "/decode?seq=999999&token=1", "", 400);
    expectError("POST", "/extend?seq=1&chunk=x", "", 400);

    HttpResponse<String> scraped = send("GET", "/metrics", "");
    check(scraped.statusCode() == 200, "/metrics answered " + scraped.statusCode());
    check(scraped.headers().firstValue("Content-Type").orElse("").startsWith("text/plain; version=0.0.4"),
        "/metrics Content-Type " + scraped.headers().firstValue("Content-Type"));
    Map<String, Long> metrics = parseMetrics(scraped.body());
    Map<String, Long> want = new HashMap<>();
    want.put("kvpool_service_requests_total{op=\"begin\"}", n);
    want.put("kvpool_service_requests_total{op=\"extend\"}", chunks);
    want.put("kvpool_service_requests_total{op=\"decode\"}", n * DECODE_STEPS + 1);  // + the bad decode
    want.put("kvpool_service_requests_total{op=\"finish\"}", n);
    want.put("kvpool_service_failures_total{op=\"begin\"}", 0L);
    want.put("kvpool_service_failures_total{op=\"extend\"}", 0L);
    want.put("kvpool_service_failures_total{op=\"decode\"}", 1L);
    want.put("kvpool_service_failures_total{op=\"finish\"}", 0L);
    want.put("kvpool_service_out_of_memory_total", 0L);
    // The pool's own families (metricsText()) agree with what the clients saw.
    want.put("kvpool_prefix_lookups_total", n);
    want.put("kvpool_prefix_lookup_tokens_total", prompt);
    want.put("kvpool_prefix_hit_tokens_total{tier=\"device\"}", cached);
    want.put("kvpool_capacity_tokens{tier=\"device\"}", 16384L);
    want.put("kvpool_alloc_failures_total", 0L);
    // Every request finished: none runs, nothing in the prefix cache is locked.
    want.put("kvpool_running_requests", 0L);
    want.put("kvpool_protected_tokens{tier=\"device\"}", 0L);
    for (Map.Entry<String, Long> e : want.entrySet()) {
      check(e.getValue().equals(metrics.get(e.getKey())),
          "/metrics " + e.getKey() + " = " + metrics.get(e.getKey()) + ", want " + e.getValue());
    }
    // What is still held is the prefix cache's, and evictable.
    Long used = metrics.get("kvpool_used_tokens{tier=\"device\"}");
    check(used != null && used > 0 && used.equals(metrics.get("kvpool_evictable_tokens{tier=\"device\"}")),
        "/metrics: device tokens used and evictable differ: " + metrics);

    service.close();
    boolean refused = false;
    try {
      send("GET", "/healthz", "");
    } catch (IOException e) {
      refused = true;
    }
    check(refused, "the service still answers after close()");
    System.out.println("KvPoolServiceTest: OK: " + n + " requests from " + CLIENTS + " clients, "
        + cached + " of " + prompt + " prompt tokens cached");
  }

  /**
   * One request: begin, the prompt in chunks, decode steps, finish. Returns {extend calls, cached}.
   * (Slots are not compared across requests: extend hands the computed pages to the prefix cache,
   * which keeps one copy of a page that concurrent requests computed twice and frees the other.)
   */
  private static long[] serve(int[] prompt) throws Exception {
    StringBuilder body = new StringBuilder("[");
    for (int i = 0; i < prompt.length; i++) {
      body.append(i == 0 ? "" : ",").append(prompt[i]);
    }
    String begun = ok(send("POST", "/begin", body.append(']').toString()));
    long seq = field(begun, "seq");
    long cached = field(begun, "cached");
    check(seq > 0 && cached >= 0 && cached < prompt.length, "begin answered " + begun);
    long chunks = 0;
    for (long done = cached; done < prompt.length; done += CHUNK) {
      long n = Math.min(CHUNK, prompt.length - done);
      String extended = ok(send("POST", "/extend?seq=" + seq + "&chunk=" + n, ""));
      long[] slots = numbers(extended);
      check(slots.length == n, "extend by " + n + " answered " + extended);
      check(Arrays.stream(slots).allMatch(slot -> slot > 0) && Arrays.stream(slots).distinct().count() == n,
          "extend returned slot 0 or a slot twice: " + extended);
      chunks++;
    }
    for (int s = 0; s < DECODE_STEPS; s++) {
      String decoded = ok(send("POST", "/decode?seq=" + seq + "&token=" + (7 + s), ""));
      check(field(decoded, "slot") > 0, "decode answered " + decoded);
    }
    ok(send("POST", "/finish?seq=" + seq + "&committed=" + (prompt.length + DECODE_STEPS), ""));
    return new long[] {chunks, cached};
  }

  /** The part of a prompt unique to one request: 8 to 47 tokens. */
  private static int[] suffix(int client, int request) {
    int[] out = new int[8 + (client * 7 + request * 13) % 40];
    for (int i = 0; i < out.length; i++) {
      out[i] = 100000 + client * 10000 + request * 100 + i;
    }
    return out;
  }

  private static HttpResponse<String> send(String method, String path, String body)
      throws IOException, InterruptedException {
    HttpRequest request = HttpRequest.newBuilder(URI.create(base + path))
        .timeout(Duration.ofSeconds(30))
        .method(method, body.isEmpty() ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body))
        .build();
    return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
  }

  private static String ok(HttpResponse<String> response) {
    check(response.statusCode() == 200, response.request().uri() + " answered " + response.statusCode() + ": "
        + response.body());
    return response.body();
  }

  private static void expectError(String method, String path, String body, int status) throws Exception {
    HttpResponse<String> response = send(method, path, body);
    check(response.statusCode() == status, method + " " + path + " answered " + response.statusCode()
        + ", want " + status);
    check(response.body().startsWith("{\"error\":"), method + " " + path + ": not a JSON error: " + response.body());
  }

  private static long field(String json, String name) {
    Matcher m = Pattern.compile("\"" + name + "\":(\\d+)").matcher(json);
    check(m.find(), "no \"" + name + "\" in " + json);
    return Long.parseLong(m.group(1));
  }

  private static long[] numbers(String json) {
    Matcher m = Pattern.compile("\\d+").matcher(json);
    List<Long> out = new ArrayList<>();
    while (m.find()) {
      out.add(Long.parseLong(m.group()));
    }
    return out.stream().mapToLong(Long::longValue).toArray();
  }

  /** Every sample line of the Prometheus text: name{labels} -> value. */
  private static Map<String, Long> parseMetrics(String text) {
    Map<String, Long> samples = new HashMap<>();
    for (String line : text.split("\n")) {
      if (line.isEmpty() || line.startsWith("#")) {
        continue;
      }
      int cut = line.lastIndexOf(' ');
      check(cut > 0, "/metrics: malformed line " + line);
      samples.put(line.substring(0, cut), Long.parseLong(line.substring(cut + 1)));
    }
    return samples;
  }

  private static void check(boolean ok, String message) {
    if (!ok) {
      throw new AssertionError(message);
    }
  }
}
