// The request API (kvseq_*) as an engine drives it, on a CPU pool: the host
// logic of the workload tests/bench/gpu_bench.cu times on a CUDA pool (issue 10
// item 5). Public C API only; every status is checked and a failing call skips
// the benchmark.
//
// Pool: 1 layer, 8 KV heads x 128, bf16, 450K tokens, page 16, max_context_len
// 4096, 1100 rows, radix cache (the KV buffers are never touched: only the
// host bookkeeping runs). Prompts of `prompt` tokens whose first `shared` tokens
// are shared in groups of 8, fresh tokens every round (each round does the same
// work; the tree keeps the earlier rounds' pages, so once it is full the extend
// also evicts). Per round: kvseq_begin per request, one kvseq_extend of every
// whole prompt, 8 kvseq_decode steps, kvseq_finish per request (prompt + 8
// committed). One benchmark iteration = one round; a first, untimed round warms
// up, after an untimed rehearsal of all the rounds on a pool of its own (warms the heap). Counters (microseconds, medians over the rounds; decode over every step):
// begin_us (per request), extend_us, decode_us, finish_us (per request), wall
// time as gpu_bench.cu reports it; *_cpu_us the same calls' thread CPU time (begin
// and finish: the round's loop of calls; steadier than wall time on a shared
// machine, where a preempted call's wall time counts the other processes).
// The iteration time is the round's timed calls together (manual time).
//
// cold:1 rows evict the caches before each batch-level call (the begin loop, the
// extend, each decode, the finish loop), where gpu_bench.cu waits for the device:
// on the GPU machine a call right after such a wait costs what it costs here with
// cold caches (batch 1: begin 6.5-8.4 us against 0.54 us warm, on a CPU pool in
// gpu_bench's harness; docs/performance.md), so these rows show the library's
// cache-cold cost on any machine.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using kvbench::Clock;
using kvbench::ok;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// This thread's CPU time in microseconds: on a loaded machine a preempted call
// inflates its wall time, not its CPU time.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

struct Samples {
  std::vector<double> begin, extend, decode, finish;  // wall, as gpu_bench.cu
  std::vector<double> begin_cpu, extend_cpu, decode_cpu, finish_cpu;
};

// Evicts this core's caches (and most of a shared last-level cache's share) by
// writing every line of a buffer larger than them; untimed.
void evict_caches() {
  constexpr size_t kBytes = size_t{64} << 20;
  static std::vector<uint8_t> buffer(kBytes, 1);
  for (size_t i = 0; i < kBytes; i += 64) buffer[i] = static_cast<uint8_t>(buffer[i] + 1);
  benchmark::ClobberMemory();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string seq_pool_json() {
  return R"({"model": {"num_layers": 1, "kv_heads": 8, "head_dim": 128}, "pool": {"kv_dtype": "bf16", )"
         R"("page_size": 16, "max_total_tokens": 450000, "max_context_len": 4096, "max_running_requests": 1100}, )"
         R"("prefix_cache": {"kind": "radix"}})";
}

struct PoolGuard {
  kvpool* pool = nullptr;
  ~PoolGuard() {
    if (pool != nullptr) kvpool_destroy(pool);
  }
};

// Writes every request-table row once: a CPU pool's table is fresh memory from the
// kernel, and a CUDA pool's (device memory) has no first-touch cost to time.
bool warm_table(benchmark::State& state, kvpool* pool) {
  size_t n = 0;
  if (!ok(state, kvreq_available(pool, &n), "kvreq_available")) return false;
  std::vector<int32_t> rows(n);
  if (!ok(state, kvreq_alloc(pool, rows.data(), n), "kvreq_alloc")) return false;
  const std::vector<int64_t> zeros(4096, 0);  // max_context_len
  for (int32_t row : rows) {
    if (!ok(state, kvreq_write(pool, row, 0, zeros.data(), zeros.size()), "kvreq_write")) return false;
  }
  return ok(state, kvreq_clear(pool), "kvreq_clear");
}

// One round; adds its timings to the vectors. False (benchmark skipped) on a failed call.
bool run_round(benchmark::State& state, kvpool* pool, std::mt19937* rng, int bs, int prompt, int shared,
               bool cold, Samples* out, double* round_us) {
  const auto before_call = [cold] {
    if (cold) evict_caches();
  };
  std::uniform_int_distribution<int32_t> tok(0, 120000);
  const size_t n = static_cast<size_t>(bs);
  std::vector<std::vector<int32_t>> prompts(n);
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) {
      prompts[i].resize(static_cast<size_t>(shared));
      for (auto& x : prompts[i]) x = tok(*rng);
    } else {
      prompts[i].assign(prompts[i / 8 * 8].begin(), prompts[i / 8 * 8].begin() + shared);
    }
    while (prompts[i].size() < static_cast<size_t>(prompt)) prompts[i].push_back(tok(*rng));
  }
  std::vector<uint64_t> ids(n);
  std::vector<int64_t> chunks(n);
  std::vector<int64_t> slots(n * static_cast<size_t>(prompt));
  double t_begin = 0;
  size_t total = 0;
  before_call();
  double c0 = thread_cpu_us();
  for (size_t i = 0; i < n; ++i) {
    size_t cached = 0;
    const auto t0 = Clock::now();
    const kvpool_status st = kvseq_begin(pool, prompts[i].data(), prompts[i].size(), nullptr, &ids[i], &cached);
    t_begin += us_since(t0);
    if (!ok(state, st, "kvseq_begin")) return false;
    chunks[i] = prompt - static_cast<int64_t>(cached);
    total += static_cast<size_t>(chunks[i]);
  }
  const double c_begin = thread_cpu_us() - c0;
  before_call();
  c0 = thread_cpu_us();
  auto t0 = Clock::now();
  kvpool_status st = kvseq_extend(pool, ids.data(), n, chunks.data(), n, slots.data(), total);
  const double t_extend = us_since(t0);
  const double c_extend = thread_cpu_us() - c0;
  if (!ok(state, st, "kvseq_extend")) return false;
  std::vector<int32_t> next(n);
  double t_decode = 0;
  for (int step = 0; step < 8; ++step) {
    for (auto& x : next) x = tok(*rng);
    before_call();
    c0 = thread_cpu_us();
    t0 = Clock::now();
    st = kvseq_decode(pool, ids.data(), n, next.data(), n, slots.data(), n);
    const double us = us_since(t0);
    const double cpu = thread_cpu_us() - c0;
    if (!ok(state, st, "kvseq_decode")) return false;
    t_decode += us;
    if (out != nullptr) {
      out->decode.push_back(us);
      out->decode_cpu.push_back(cpu);
    }
  }
  double t_finish = 0;
  before_call();
  c0 = thread_cpu_us();
  for (size_t i = 0; i < n; ++i) {
    t0 = Clock::now();
    st = kvseq_finish(pool, ids[i], static_cast<size_t>(prompt + 8));
    t_finish += us_since(t0);
    if (!ok(state, st, "kvseq_finish")) return false;
  }
  const double c_finish = thread_cpu_us() - c0;
  if (out != nullptr) {
    out->begin.push_back(t_begin / bs);
    out->extend.push_back(t_extend);
    out->finish.push_back(t_finish / bs);
    out->begin_cpu.push_back(c_begin / bs);
    out->extend_cpu.push_back(c_extend);
    out->finish_cpu.push_back(c_finish / bs);
  }
  *round_us = t_begin + t_extend + t_decode + t_finish;
  return true;
}

// Args: batch, prompt, shared, cold.
void BM_SeqRound(benchmark::State& state) {
  const int bs = static_cast<int>(state.range(0));
  const int prompt = static_cast<int>(state.range(1));
  const int shared = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  const std::string json = seq_pool_json();
  double round_us = 0;
  {
    // A rehearsal: the same rounds on a pool of their own, untimed, so that the timed run
    // finds the process heap grown as in a long-running engine (otherwise every round's
    // new tree nodes and buffers fault in fresh pages).
    PoolGuard rehearsal;
    if (!ok(state, kvpool_create(json.data(), json.size(), &rehearsal.pool), "kvpool_create")) return;
    std::mt19937 rng(static_cast<unsigned>(bs * 7919 + prompt));
    for (int64_t r = 0; r <= static_cast<int64_t>(state.max_iterations); ++r) {
      if (!run_round(state, rehearsal.pool, &rng, bs, prompt, shared, false, nullptr, &round_us)) return;
    }
  }
  PoolGuard g;
  if (!ok(state, kvpool_create(json.data(), json.size(), &g.pool), "kvpool_create")) return;
  if (!warm_table(state, g.pool)) return;
  std::mt19937 rng(static_cast<unsigned>(bs * 7919 + prompt));  // gpu_bench.cu's seeds
  Samples v;
  if (!run_round(state, g.pool, &rng, bs, prompt, shared, cold, nullptr, &round_us)) return;
  for (auto _ : state) {
    if (!run_round(state, g.pool, &rng, bs, prompt, shared, cold, &v, &round_us)) break;
    state.SetIterationTime(round_us * 1e-6);
  }
  if (state.error_occurred()) return;
  char report[512];
  if (kvpool_check(g.pool, report, sizeof(report)) != KVPOOL_OK) {
    const std::string msg = std::string("kvpool_check failed: ") + report;
    state.SkipWithError(msg.c_str());
    return;
  }
  state.counters["begin_us"] = median(v.begin);
  state.counters["extend_us"] = median(v.extend);
  state.counters["decode_us"] = median(v.decode);
  state.counters["finish_us"] = median(v.finish);
  state.counters["begin_cpu_us"] = median(v.begin_cpu);
  state.counters["extend_cpu_us"] = median(v.extend_cpu);
  state.counters["decode_cpu_us"] = median(v.decode_cpu);
  state.counters["finish_cpu_us"] = median(v.finish_cpu);
}

// Rounds per batch size as gpu_bench.cu runs them (batch 1024: decode with shorter prompts,
// to fit), warm and cold (cold: caches evicted before each batch-level call).
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared", "cold"})
    ->Args({1, 1536, 1024, 0})
    ->Args({1, 1536, 1024, 1})
    ->Iterations(100)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared", "cold"})
    ->Args({32, 1536, 1024, 0})
    ->Args({32, 1536, 1024, 1})
    ->Iterations(20)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared", "cold"})
    ->Args({256, 1536, 1024, 0})
    ->Args({256, 1536, 1024, 1})
    ->Iterations(6)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared", "cold"})
    ->Args({1024, 384, 256, 0})
    ->Args({1024, 384, 256, 1})
    ->Iterations(4)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

// No timed warm-up by default (run_main's 0.05 s): with fixed iterations Google Benchmark
// would warm up by running the workload for growing iteration counts on pools of their
// own (a thousand rounds, filling and evicting the tree), which only costs time and
// leaves the heap in a state that depends on the machine's speed. Each benchmark's
// first round is its warm-up.
int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  static char no_warmup[] = "--benchmark_min_warmup_time=0";
  bool has_warmup = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--benchmark_min_warmup_time", 27) == 0) has_warmup = true;
  }
  if (!has_warmup) args.insert(args.begin() + 1, no_warmup);
  return kvbench::run_main(static_cast<int>(args.size()), args.data());
}
