// The cost of pool.thread_safe per call (docs/services.md#threading): a cheap call that
// changes the pool (kvalloc_alloc + kvalloc_free of one slot: two calls per iteration)
// and a read-only query (kvpool_get_stats: one call), on one pool
//   - off:          "thread_safe" absent (one thread: the pool has no lock),
//   - on:           "thread_safe": true, 1, 2 and 4 threads on the same pool,
//   - caller_mutex: "thread_safe" absent, every call under the caller's std::mutex (what a
//                   service does without the key), 1, 2 and 4 threads.
// Times are real time per iteration over all threads (Google Benchmark divides the wall time
// by every thread's iterations together): with N threads, the inverse of the aggregate
// throughput; items_per_second counts calls of all threads together.
// Run with --benchmark_repetitions=N --benchmark_report_aggregates_only=true for medians.
#include <mutex>
#include <string>

#include "bench_common.hpp"

namespace {

using kvbench::ok;

std::string lock_pool_json(bool thread_safe) {
  return std::string(R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 1}, "pool": {"kv_dtype": "bf16",
      "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 64)") +
         (thread_safe ? R"(, "thread_safe": true)" : "") + "}}";
}

enum class Mode { kOff, kOn, kCallerMutex };

kvpool* pool_for(benchmark::State& state, Mode mode) {
  return kvbench::PoolCache::get(state, lock_pool_json(mode == Mode::kOn));
}

std::mutex g_caller_mutex;

template <class Call>
kvpool_status call(Mode mode, Call&& f) {
  if (mode != Mode::kCallerMutex) return f();
  std::lock_guard<std::mutex> lock(g_caller_mutex);
  return f();
}

// PoolCache is not thread-safe: thread 0 makes the pool and the others wait for it.
kvpool* shared_pool(benchmark::State& state, Mode mode) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return pool_for(state, mode);
}

void BM_AllocFree(benchmark::State& state, Mode mode) {
  kvpool* pool = shared_pool(state, mode);
  if (pool == nullptr) return;
  int64_t slot = 0;
  for (auto _ : state) {
    if (!ok(state, call(mode, [&] { return kvalloc_alloc(pool, &slot, 1); }), "kvalloc_alloc")) break;
    if (!ok(state, call(mode, [&] { return kvalloc_free(pool, &slot, 1); }), "kvalloc_free")) break;
  }
  state.SetItemsProcessed(state.iterations() * 2);  // calls
}

void BM_Stats(benchmark::State& state, Mode mode) {
  kvpool* pool = shared_pool(state, mode);
  if (pool == nullptr) return;
  kvpool_stats s = KVPOOL_STATS_INIT;
  for (auto _ : state) {
    if (!ok(state, call(mode, [&] { return kvpool_get_stats(pool, &s); }), "kvpool_get_stats")) break;
    benchmark::DoNotOptimize(s.token_available);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(BM_AllocFree, off, Mode::kOff)->UseRealTime();
BENCHMARK_CAPTURE(BM_AllocFree, on, Mode::kOn)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_AllocFree, caller_mutex, Mode::kCallerMutex)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_Stats, off, Mode::kOff)->UseRealTime();
BENCHMARK_CAPTURE(BM_Stats, on, Mode::kOn)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_Stats, caller_mutex, Mode::kCallerMutex)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);

}  // namespace

BENCHMARK_MAIN();
