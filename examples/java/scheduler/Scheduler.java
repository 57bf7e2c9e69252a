import ai.kvpool.Accounting;
import ai.kvpool.KvPoolException;
import ai.kvpool.Pool;
import ai.kvpool.SeqBegin;
import ai.kvpool.SeqInfo;
import ai.kvpool.Status;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Random;

/**
 * A continuous-batching scheduler loop driving kvpool's request API (kvseq) the way an inference
 * engine does: a queue of synthetic requests sharing a few system prompts, at most MAX_RUNNING
 * admitted at a time, chunked prefill with seqExtend, batched decode steps with seqDecode, finish
 * on reaching the output length, and retract + re-queue when the pool runs out of memory.
 *
 * <p>It checks itself and exits 1 unless every request finished, SGLang's accounting identity
 * (available + evictable + protected + uncached == capacity) held after every step, and
 * Pool.check() passes at the end.
 */
public final class Scheduler {
  private static final int REQUESTS = 40;
  private static final int MAX_RUNNING = 6;
  private static final int CHUNK = 32;
  private static final int PAGE = 4;
  /** 256 tokens of pages of 4: small enough that six running requests do not fit. */
  private static final String CONFIG = "{\"model\":{\"num_layers\":1,\"kv_heads\":1,\"head_dim\":8},"
      + "\"pool\":{\"device\":\"cpu\",\"kv_dtype\":\"f16\",\"page_size\":4,\"max_total_tokens\":256,"
      + "\"max_running_requests\":8,\"max_context_len\":256},\"prefix_cache\":{\"kind\":\"radix\",\"eviction\":\"lru\"}}";

  /** One synthetic request. */
  private static final class Request {
    final int id;
    final int[] prompt;
    final int maxNew;
    long seq;        // 0 until begun (kept across retractions)
    int generated;

    Request(int id, int[] prompt, int maxNew) {
      this.id = id;
      this.prompt = prompt;
      this.maxNew = maxNew;
    }
  }

  private final Pool pool;
  private final Deque<Request> queue = new ArrayDeque<>();
  private final List<Request> running = new ArrayList<>();
  private long promptTokens;
  private long cachedTokens;
  private int steps;
  private int finished;
  private int retractions;
  private int failures;

  private Scheduler(Pool pool) {
    this.pool = pool;
  }

  private static int[] tokens(Random rng, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = rng.nextInt(32000);
    }
    return t;
  }

  private void makeRequests() {
    Random rng = new Random(7);
    int[][] systems = {tokens(rng, 48), tokens(rng, 40), tokens(rng, 56), tokens(rng, 32)};
    for (int i = 0; i < REQUESTS; i++) {
      int[] system = systems[rng.nextInt(systems.length)];
      int[] user = tokens(rng, 8 + rng.nextInt(33));
      int[] prompt = new int[system.length + user.length];
      System.arraycopy(system, 0, prompt, 0, system.length);
      System.arraycopy(user, 0, prompt, system.length, user.length);
      queue.add(new Request(i, prompt, 4 + rng.nextInt(21)));
    }
  }

  /**
   * Admits queued requests while their prefill fits what is free or evictable, after what the
   * running requests still have to prefill. Decode growth is not reserved: when it runs out,
   * retraction makes room.
   */
  private void admit() {
    Accounting a = pool.accounting();
    long budget = a.getAvailable() + a.getEvictable();
    for (Request r : running) {
      SeqInfo info = pool.seqInfo(r.seq);
      budget -= info.getTokens() - info.getComputed() + PAGE;
    }
    while (running.size() < MAX_RUNNING && !queue.isEmpty()) {
      Request r = queue.peek();
      long need = PAGE + (r.seq == 0 ? r.prompt.length
          : pool.seqInfo(r.seq).getTokens() - pool.seqInfo(r.seq).getComputed());
      if (need > budget && !running.isEmpty()) {
        return;
      }
      queue.poll();
      if (r.seq == 0) {
        SeqBegin begun = pool.begin(r.prompt, null);
        r.seq = begun.getSeq();
        promptTokens += r.prompt.length;
        cachedTokens += begun.getCached();
      }
      running.add(r);
      budget -= need;
    }
  }

  /** Memory pressure: retract the most recently admitted request and put it back in front. */
  private void retractNewest() {
    if (running.size() < 2) {
      throw new IllegalStateException("out of memory with a single running request");
    }
    Request victim = running.remove(running.size() - 1);
    pool.retract(victim.seq);
    queue.addFirst(victim);
    retractions++;
  }

  private static boolean outOfMemory(KvPoolException e) {
    return e.getStatus() == Status.OUT_OF_MEMORY;
  }

  /** One scheduler step: a prefill batch if any request needs one, else a decode batch. */
  private void step() {
    steps++;
    admit();
    List<Request> prefill = new ArrayList<>();
    List<Long> chunks = new ArrayList<>();
    for (Request r : running) {
      SeqInfo info = pool.seqInfo(r.seq);
      long left = info.getTokens() - info.getComputed();
      if (left > 0) {
        prefill.add(r);
        chunks.add(Math.min(CHUNK, left));
      }
    }
    if (!prefill.isEmpty()) {
      long[] seqs = prefill.stream().mapToLong(r -> r.seq).toArray();
      long[] lens = chunks.stream().mapToLong(Long::longValue).toArray();
      try {
        pool.seqExtend(seqs, lens);
      } catch (KvPoolException e) {
        if (!outOfMemory(e)) {
          throw e;
        }
        retractNewest();
      }
      return;
    }
    long[] seqs = running.stream().mapToLong(r -> r.seq).toArray();
    int[] next = running.stream().mapToInt(r -> 1000 + r.generated).toArray();
    try {
      pool.seqDecode(seqs, next);
    } catch (KvPoolException e) {
      if (!outOfMemory(e)) {
        throw e;
      }
      retractNewest();
      return;
    }
    for (Request r : new ArrayList<>(running)) {
      r.generated++;
      if (r.generated == r.maxNew) {
        pool.finish(r.seq, pool.seqInfo(r.seq).getComputed());
        running.remove(r);
        finished++;
      }
    }
  }

  private void expect(boolean condition, String what) {
    if (!condition) {
      System.out.println("FAILED: " + what);
      failures++;
    }
  }

  private int run() {
    makeRequests();
    while (!queue.isEmpty() || !running.isEmpty()) {
      step();
      Accounting a = pool.accounting();
      if (!a.holds()) {
        expect(false, "accounting after step " + steps + ": " + a);
        break;
      }
      if (steps > 10000) {
        expect(false, "no progress after " + steps + " steps");
        break;
      }
    }
    Accounting a = pool.accounting();
    System.out.printf("%d requests finished in %d steps, %d retractions%n", finished, steps, retractions);
    System.out.printf("prefix cache: %d of %d prompt tokens cached at admission (hit ratio %.1f%%)%n",
        cachedTokens, promptTokens, 100.0 * cachedTokens / promptTokens);
    System.out.println("final " + a + "; radix " + pool.radixSizes());
    expect(finished == REQUESTS, "every request finished (" + finished + " of " + REQUESTS + ")");
    expect(a.holds(), "available + evictable + protected + uncached == capacity");
    expect(a.getUncached() == 0 && a.getProtected() == 0, "nothing held after the last request");
    expect(cachedTokens > 0, "shared system prompts were reused");
    String check;
    try {
      check = pool.check();
    } catch (KvPoolException e) {
      check = e.getMessage();
    }
    System.out.println("check: " + check);
    expect(check.startsWith("ok"), "Pool.check() passes");
    return failures;
  }

  public static void main(String[] args) {
    int failures;
    try (Pool pool = new Pool(CONFIG)) {
      failures = new Scheduler(pool).run();
    }
    if (failures > 0) {
      System.exit(1);
    }
    System.out.println("scheduler: all checks passed");
  }
}
