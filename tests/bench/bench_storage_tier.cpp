// The storage tier as an engine uses it (issue 13, item 6): what the caller's thread pays
// for kvstore_prefetch / poll / end and for a kvseq_finish whose pages go on to storage,
// while the storage threads do the I/O; and how fast a prefetch lands (pages per second,
// MB/s) with the file backend. A pool of 8 layers x 8 KV heads x 128 bf16, page 64
// (a 2 MiB stored page), on the CPU; store under $KVBENCH_STORAGE_DIR (default /tmp).
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"

namespace {

using kvbench::ok;

constexpr size_t kPrompt = 64 * 64 + 1;  // 64 pages and a token

std::string store_dir() {
  const char* base = std::getenv("KVBENCH_STORAGE_DIR");
  return std::string(base != nullptr ? base : "/tmp") + "/kvpool-bench-tier-" + std::to_string(::getpid());
}

std::string config(const std::string& dir) {
  return R"({"model": {"name": "bench-8l", "num_layers": 8, "kv_heads": 8, "head_dim": 128},
      "pool": {"kv_dtype": "bf16", "page_size": 64, "max_total_tokens": 16384, "max_running_requests": 4,
               "max_context_len": 8192},
      "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 4, "headroom_bytes": 0, "layout": "page_first"},
      "storage": {"backend": "file", "path": ")" + dir + R"(", "prefetch_threshold_tokens": 256}})";
}

std::vector<int32_t> prompt(int32_t salt) {
  std::vector<int32_t> t(kPrompt);
  for (size_t i = 0; i < t.size(); ++i) t[i] = salt * 100003 + static_cast<int32_t>(i);
  return t;
}

// A request computes `p` and finishes; the time of kvseq_finish (its pages' host copy and
// storage backup start after it, without waiting) goes to *finish_s.
bool serve(benchmark::State& state, kvpool* pool, const std::vector<int32_t>& p, double* finish_s) {
  uint64_t seq = 0;
  size_t cached = 0;
  if (!ok(state, kvseq_begin(pool, p.data(), p.size(), nullptr, &seq, &cached), "kvseq_begin")) return false;
  const int64_t chunk = static_cast<int64_t>(p.size() - cached);
  std::vector<int64_t> slots(static_cast<size_t>(chunk));
  if (!ok(state, kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()), "kvseq_extend")) return false;
  const auto t0 = kvbench::Clock::now();
  if (!ok(state, kvseq_finish(pool, seq, p.size()), "kvseq_finish")) return false;
  size_t done = 0;
  if (!ok(state, kvhost_poll(pool, 0, &done), "kvhost_poll")) return false;  // starts the finish's backup
  *finish_s = kvbench::seconds_between(t0, kvbench::Clock::now());
  return true;
}

// Pool A stores a fresh prompt per iteration; pool B prefetches it. Timed: B's calls on
// the caller's thread (manual time = their sum); counters: the prefetch's wall time.
void BM_StorageTierPrefetch(benchmark::State& state) {
  const std::string dir = store_dir();
  const std::string json = config(dir);
  kvpool* a = nullptr;
  kvpool* b = nullptr;
  if (!ok(state, kvpool_create(json.data(), json.size(), &a), "kvpool_create")) return;
  if (!ok(state, kvpool_create(json.data(), json.size(), &b), "kvpool_create")) return;
  (void)kvstore_clear(a);
  double prefetch_call = 0, poll_call = 0, end_call = 0, finish_call = 0, land = 0, polls = 0;
  int32_t salt = 1;
  for (auto _ : state) {
    state.PauseTiming();
    const std::vector<int32_t> p = prompt(salt++);
    double finish_s = 0;
    if (!serve(state, a, p, &finish_s) || !ok(state, kvstore_flush(a), "kvstore_flush")) break;
    finish_call += finish_s;
    state.ResumeTiming();
    const auto t0 = kvbench::Clock::now();
    uint64_t id = 0;
    if (!ok(state, kvstore_prefetch(b, p.data(), p.size(), nullptr, &id, nullptr), "kvstore_prefetch")) break;
    const auto t1 = kvbench::Clock::now();
    prefetch_call += kvbench::seconds_between(t0, t1);
    kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
    do {
      const auto p0 = kvbench::Clock::now();
      if (!ok(state, kvstore_prefetch_poll(b, id, &info), "kvstore_prefetch_poll")) break;
      poll_call += kvbench::seconds_between(p0, kvbench::Clock::now());
      ++polls;
      if (!info.done) std::this_thread::sleep_for(std::chrono::microseconds(50));  // the engine computes meanwhile
    } while (!info.done);
    land += kvbench::seconds_between(t1, kvbench::Clock::now());
    const auto e0 = kvbench::Clock::now();
    uint64_t inserted = 0;
    if (!ok(state, kvstore_prefetch_end(b, id, &inserted), "kvstore_prefetch_end")) break;
    end_call += kvbench::seconds_between(e0, kvbench::Clock::now());
    if (inserted != kPrompt - 1) {
      state.SkipWithError("the prefetch did not bring the whole prompt");
      break;
    }
    state.PauseTiming();
    size_t evicted = 0;  // b forgets the prompt again (device and host), for the next round
    (void)radix_evict(b, 1u << 30, &evicted);
    (void)kvhost_evict(b, 1u << 30, &evicted);
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  const double bytes = 64.0 * (2.0 * 8 * 8 * 128 * 2 * 64 + 96);  // stored bytes of 64 pages
  state.counters["prefetch_call_us"] = prefetch_call / n * 1e6;
  state.counters["poll_call_us"] = polls > 0 ? poll_call / polls * 1e6 : 0;
  state.counters["end_call_us"] = end_call / n * 1e6;
  state.counters["finish_call_us"] = finish_call / n * 1e6;
  state.counters["prefetch_ms"] = land / n * 1e3;
  state.counters["prefetch_MBps"] = land > 0 ? bytes * n / land / 1e6 : 0;
  (void)kvstore_clear(a);
  kvpool_destroy(a);
  kvpool_destroy(b);
  rmdir(dir.c_str());
}
BENCHMARK(BM_StorageTierPrefetch)->Unit(benchmark::kMillisecond)->Iterations(8);

}  // namespace

BENCHMARK_MAIN();
