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
// BM_MetricsText times kvpool_metrics_text (the Prometheus text a service serves on every
// scrape) on a plain pool with a radix cache and on one with a host tier and a file storage
// tier (more families), thread_safe on; bytes_per_second counts the text.
// Run with --benchmark_repetitions=N --benchmark_report_aggregates_only=true for medians.
#include <stdlib.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

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

// A directory under /tmp for the storage tier, removed at exit (rmdir: only if the tier wrote
// nothing into it, which these rows never make it do).
struct StorageDir {
  StorageDir() {
    char tmpl[] = "/tmp/kvpool-bench-metrics-XXXXXX";
    if (const char* made = mkdtemp(tmpl)) path = made;
  }
  ~StorageDir() {
    if (!path.empty()) rmdir(path.c_str());
  }
  std::string path;
};

// A pool for the metrics rows: radix cache, thread-safe; with `tiers` also a host tier and
// a file storage tier.
kvpool* metrics_pool(benchmark::State& state, bool tiers) {
  static StorageDir storage_dir;
  std::string json = R"({"model": {"num_layers": 2, "kv_heads": 1, "head_dim": 8}, "pool": {"kv_dtype": "bf16",
      "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256, "thread_safe": true},
      "prefix_cache": {"kind": "radix"})";
  if (tiers) {
    const std::string& dir = storage_dir.path;
    if (dir.empty()) {
      state.SkipWithError("mkdtemp failed");
      return nullptr;
    }
    json += R"(, "host_cache": {"ratio": 4, "headroom_bytes": 0}, "storage": {"backend": "file", "path": ")" + dir +
            R"("})";
  }
  return kvbench::PoolCache::get(state, json + "}");
}

void BM_MetricsText(benchmark::State& state, bool tiers) {
  kvpool* pool = metrics_pool(state, tiers);
  if (pool == nullptr) return;
  std::vector<char> text(64 << 10);
  size_t len = 0;
  for (auto _ : state) {
    if (!ok(state, kvpool_metrics_text(pool, text.data(), text.size(), &len), "kvpool_metrics_text")) break;
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * len));
  state.counters["text_bytes"] = double(len);
}

BENCHMARK_CAPTURE(BM_AllocFree, off, Mode::kOff)->UseRealTime();
BENCHMARK_CAPTURE(BM_AllocFree, on, Mode::kOn)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_AllocFree, caller_mutex, Mode::kCallerMutex)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_Stats, off, Mode::kOff)->UseRealTime();
BENCHMARK_CAPTURE(BM_Stats, on, Mode::kOn)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_Stats, caller_mutex, Mode::kCallerMutex)->UseRealTime()->Threads(1)->Threads(2)->Threads(4);
BENCHMARK_CAPTURE(BM_MetricsText, plain, false)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_MetricsText, host_and_storage, true)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
