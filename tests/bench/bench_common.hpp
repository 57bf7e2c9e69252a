// Helpers shared by the kvpool benchmarks (tests/bench). Public C API only.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvpool/kvpool.h"

namespace kvbench {

// Every input is generated from this seed: runs are comparable.
constexpr uint64_t kSeed = 0x6b76706f6f6c;  // "kvpool"

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Checks a status; on failure skips the benchmark with the library's message.
// Call sites must stop (return, or break out of the timing loop) on false.
inline bool ok(benchmark::State& state, kvpool_status st, const char* what) {
  if (st == KVPOOL_OK) return true;
  const std::string msg = std::string(what) + " failed: " + kvpool_status_string(st) + ": " + kvpool_last_error();
  state.SkipWithError(msg.c_str());
  return false;
}

// Pools are created once per configuration and kept for the whole process
// (creating a large pool costs more than many timed calls); benchmarks reset
// them with kvalloc_clear() before use.
class PoolCache {
 public:
  static kvpool* get(benchmark::State& state, const std::string& json) {
    static PoolCache cache;
    auto it = cache.pools_.find(json);
    if (it != cache.pools_.end()) return it->second;
    kvpool* pool = nullptr;
    const kvpool_status st = kvpool_create(json.data(), json.size(), &pool);
    if (!ok(state, st, "kvpool_create")) return nullptr;
    cache.pools_.emplace(json, pool);
    return pool;
  }
  ~PoolCache() {
    for (auto& kv : pools_) kvpool_destroy(kv.second);
  }

 private:
  std::map<std::string, kvpool*> pools_;
};

// Extra aggregates next to Google Benchmark's mean/median/stddev/cv.
inline double stat_min(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }
inline double stat_max(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()); }

// For ->Apply(kvbench::add_stats) on every registration.
inline void add_stats(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", stat_min)->ComputeStatistics("max", stat_max);
}

// main(): Google Benchmark's, plus a default warm-up of 0.05 s per benchmark
// when the command line does not choose one (--benchmark_min_warmup_time=0
// turns it off, as the smoke test does).
inline int run_main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  static char warmup[] = "--benchmark_min_warmup_time=0.05";
  bool has_warmup = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--benchmark_min_warmup_time", 27) == 0) has_warmup = true;
  }
  if (!has_warmup) args.insert(args.begin() + 1, warmup);
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace kvbench

#define KVBENCH_MAIN() \
  int main(int argc, char** argv) { return kvbench::run_main(argc, argv); }
