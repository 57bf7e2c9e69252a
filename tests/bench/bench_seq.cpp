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
// up. Counters (microseconds, medians over the rounds; decode over every step):
// begin_us (per request), extend_us, decode_us, finish_us (per request).
// The iteration time is the round's timed calls together (manual time).
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using kvbench::Clock;
using kvbench::ok;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

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

// One round; adds its timings to the vectors. False (benchmark skipped) on a failed call.
bool run_round(benchmark::State& state, kvpool* pool, std::mt19937* rng, int bs, int prompt, int shared,
               std::vector<double>* begin_us, std::vector<double>* extend_us, std::vector<double>* decode_us,
               std::vector<double>* finish_us, double* round_us) {
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
  for (size_t i = 0; i < n; ++i) {
    size_t cached = 0;
    const auto t0 = Clock::now();
    const kvpool_status st = kvseq_begin(pool, prompts[i].data(), prompts[i].size(), nullptr, &ids[i], &cached);
    t_begin += us_since(t0);
    if (!ok(state, st, "kvseq_begin")) return false;
    chunks[i] = prompt - static_cast<int64_t>(cached);
    total += static_cast<size_t>(chunks[i]);
  }
  auto t0 = Clock::now();
  kvpool_status st = kvseq_extend(pool, ids.data(), n, chunks.data(), n, slots.data(), total);
  const double t_extend = us_since(t0);
  if (!ok(state, st, "kvseq_extend")) return false;
  std::vector<int32_t> next(n);
  double t_decode = 0;
  for (int step = 0; step < 8; ++step) {
    for (auto& x : next) x = tok(*rng);
    t0 = Clock::now();
    st = kvseq_decode(pool, ids.data(), n, next.data(), n, slots.data(), n);
    const double us = us_since(t0);
    if (!ok(state, st, "kvseq_decode")) return false;
    t_decode += us;
    if (decode_us != nullptr) decode_us->push_back(us);
  }
  double t_finish = 0;
  for (size_t i = 0; i < n; ++i) {
    t0 = Clock::now();
    st = kvseq_finish(pool, ids[i], static_cast<size_t>(prompt + 8));
    t_finish += us_since(t0);
    if (!ok(state, st, "kvseq_finish")) return false;
  }
  if (begin_us != nullptr) {
    begin_us->push_back(t_begin / bs);
    extend_us->push_back(t_extend);
    finish_us->push_back(t_finish / bs);
  }
  *round_us = t_begin + t_extend + t_decode + t_finish;
  return true;
}

// Args: batch, prompt, shared.
void BM_SeqRound(benchmark::State& state) {
  const int bs = static_cast<int>(state.range(0));
  const int prompt = static_cast<int>(state.range(1));
  const int shared = static_cast<int>(state.range(2));
  const std::string json = seq_pool_json();
  PoolGuard g;
  if (!ok(state, kvpool_create(json.data(), json.size(), &g.pool), "kvpool_create")) return;
  std::mt19937 rng(static_cast<unsigned>(bs * 7919 + prompt));  // gpu_bench.cu's seeds
  std::vector<double> begin_us, extend_us, decode_us, finish_us;
  double round_us = 0;
  if (!run_round(state, g.pool, &rng, bs, prompt, shared, nullptr, nullptr, nullptr, nullptr, &round_us)) return;
  for (auto _ : state) {
    if (!run_round(state, g.pool, &rng, bs, prompt, shared, &begin_us, &extend_us, &decode_us, &finish_us,
                   &round_us)) {
      break;
    }
    state.SetIterationTime(round_us * 1e-6);
  }
  if (state.error_occurred()) return;
  char report[512];
  if (kvpool_check(g.pool, report, sizeof(report)) != KVPOOL_OK) {
    const std::string msg = std::string("kvpool_check failed: ") + report;
    state.SkipWithError(msg.c_str());
    return;
  }
  state.counters["begin_us"] = median(begin_us);
  state.counters["extend_us"] = median(extend_us);
  state.counters["decode_us"] = median(decode_us);
  state.counters["finish_us"] = median(finish_us);
}

// Rounds per batch size as gpu_bench.cu runs them (batch 1024: decode with shorter prompts, to fit).
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared"})
    ->Args({1, 1536, 1024})
    ->Iterations(100)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared"})
    ->Args({32, 1536, 1024})
    ->Iterations(20)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared"})
    ->Args({256, 1536, 1024})
    ->Iterations(6)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SeqRound)
    ->ArgNames({"batch", "prompt", "shared"})
    ->Args({1024, 384, 256})
    ->Iterations(4)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

KVBENCH_MAIN()
