// The memcached backend's batch get against a bare libmemcached multi-get of
// the same items (issue 13's goal: the backend reaches >= 80 % of the bare loop).
//
// Starts its own memcached (127.0.0.1, free port, -m 1200, -I 1m), stores
// `pages` sealed pages of `page_bytes` through the backend, then each iteration
// times both, back to back (which goes first alternates), so that both see the same machine:
//   bare:  one memcached_mget of the items the pages are stored as (the parts of
//          a split page, the record of an inline one) + memcached_fetch_result
//          of each into preallocated page buffers (memcpy at the part's offset);
//   store: the backend's get() of all the pages into the same buffers (one mget
//          of the records, one of the parts, every checksum checked).
// Counters: bare_GBps, store_GBps (page bytes per second, medians over the
// iterations), ratio = the median over iterations of bare time / store time
// (the goal: >= 0.8), bare_cpu_ms, store_cpu_ms (the calling thread's CPU time
// per batch, medians) and cpu_ratio = bare_cpu_ms / store_cpu_ms. Loopback, one server: this
// measures the client side's overhead, not a network.
#include <benchmark/benchmark.h>
#include <time.h>
#include <libmemcached/memcached.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "server_process.hpp"
#include "storage/blob_store.hpp"
#include "storage/memcached_store.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

namespace {

using kvp::storage::BlobResult;

// This thread's CPU time: the client's own work, which the machine's other load does not stretch.
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void BM_MemcachedBatchGet(benchmark::State& state) {
  const size_t page_bytes = size_t(state.range(0)), pages = size_t(state.range(1));
  std::string error;
  const int port = kvtest::ServerProcess::free_port();
  auto server = kvtest::ServerProcess::start({"memcached", "-l", "127.0.0.1", "-p", std::to_string(port), "-U", "0",
                                              "-m", "1200", "-I", "1m", "-u", "root"},
                                             port, &error);
  if (!server) {
    state.SkipWithError(error.c_str());
    return;
  }
  kvp::config::StorageConfig cfg;
  cfg.backend = "memcached";
  cfg.servers = {server->address()};
  cfg.timeout_ms = 5000;
  std::unique_ptr<kvp::storage::BlobStore> store;
  if (!kvp::storage::open_memcached_store(cfg, &store).is_ok()) {
    state.SkipWithError("open_memcached_store failed");
    return;
  }

  // Sealed pages, stored through the backend.
  const auto fp = kvp::storage::fingerprint_of("bench_storage_memcached");
  std::vector<std::string> keys(pages);
  std::vector<std::vector<uint8_t>> values(pages, std::vector<uint8_t>(page_bytes));
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < pages; ++i) {
    kvp::cache::Digest d{};
    for (size_t b = 0; b < d.size(); ++b) d[b] = uint8_t(rng());
    keys[i] = kvp::storage::page_key(fp, d);
    for (size_t b = kvp::storage::kPageHeaderBytes; b < page_bytes; ++b) values[i][b] = uint8_t(rng());
    kvp::storage::seal_page(values[i].data(), page_bytes - kvp::storage::kPageHeaderBytes, fp, d);
  }
  std::vector<const uint8_t*> value_ptrs;
  std::vector<size_t> sizes(pages, page_bytes);
  for (auto& v : values) value_ptrs.push_back(v.data());
  std::vector<BlobResult> out(pages);
  store->put(keys.data(), value_ptrs.data(), sizes.data(), pages, out.data());
  for (BlobResult r : out) {
    if (r != BlobResult::kOk) {
      state.SkipWithError("put failed (is -m large enough?)");
      return;
    }
  }

  // The items as stored: parts when the page is split, else the record (header + page).
  memcached_st* mc = memcached_create(nullptr);
  memcached_server_add(mc, "127.0.0.1", in_port_t(port));
  memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1);
  memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
  memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, 5000);
  std::vector<std::string> item_keys;
  std::vector<size_t> item_page, item_offset;
  for (size_t i = 0; i < pages; ++i) {
    memcached_return_t rc;
    size_t len = 0;
    uint32_t flags = 0;
    char* rec = memcached_get(mc, keys[i].data(), keys[i].size(), &len, &flags, &rc);
    const bool inline_value = rec != nullptr && len == kvp::storage::kMemcachedRecordHeaderBytes + page_bytes;
    uint32_t parts = 1, part_bytes = 0;
    if (rec != nullptr && !inline_value) {
      std::memcpy(&parts, rec + 16, 4);
      std::memcpy(&part_bytes, rec + 20, 4);
    }
    free(rec);
    for (uint32_t p = 0; p < parts; ++p) {
      item_keys.push_back(inline_value ? keys[i] : kvp::storage::memcached_part_key(keys[i], p));
      item_page.push_back(i);
      item_offset.push_back(size_t(p) * part_bytes);
    }
  }
  std::vector<const char*> key_ptrs;
  std::vector<size_t> key_lens;
  for (const auto& k : item_keys) {
    key_ptrs.push_back(k.data());
    key_lens.push_back(k.size());
  }
  const size_t header = kvp::storage::kMemcachedRecordHeaderBytes;

  std::vector<std::vector<uint8_t>> buffers(pages, std::vector<uint8_t>(page_bytes));
  std::vector<uint8_t*> dst;
  for (auto& b : buffers) dst.push_back(b.data());
  std::vector<size_t> got(pages);
  memcached_result_st result;
  memcached_result_create(mc, &result);

  auto bare = [&]() -> bool {
    if (memcached_mget(mc, key_ptrs.data(), key_lens.data(), key_ptrs.size()) != MEMCACHED_SUCCESS) return false;
    size_t i = 0;
    memcached_return_t rc;
    while (memcached_fetch_result(mc, &result, &rc) != nullptr) {
      if (i >= item_keys.size()) return false;
      const char* v = memcached_result_value(&result);
      size_t len = memcached_result_length(&result);
      const bool whole = len == header + page_bytes && item_keys[i] == keys[item_page[i]];
      if (whole) {  // an inline record: the page follows the header
        v += header;
        len -= header;
      }
      std::memcpy(buffers[item_page[i]].data() + item_offset[i], v, std::min(len, page_bytes - item_offset[i]));
      ++i;
    }
    return i == item_keys.size();
  };
  auto backend = [&]() -> bool {
    store->get(keys.data(), dst.data(), sizes.data(), pages, got.data(), out.data());
    for (BlobResult r : out) {
      if (r != BlobResult::kOk) return false;
    }
    return true;
  };
  // Warm up, and check both read the pages whole.
  if (!bare() || buffers != values || !backend() || buffers != values) {
    state.SkipWithError("a read did not return the stored pages");
    return;
  }

  std::vector<double> bare_s, store_s, bare_cpu, store_cpu;
  // Times one read: wall seconds and this thread's CPU seconds.
  auto timed = [](auto&& read, bool* ok, double* cpu) {
    const double c0 = thread_cpu_s();
    const auto t0 = std::chrono::steady_clock::now();
    *ok = read();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *cpu = thread_cpu_s() - c0;
    return wall;
  };
  size_t iteration = 0;
  for (auto _ : state) {
    bool a = false, b = false;
    double a_cpu = 0, b_cpu = 0, a_s = 0, b_s = 0;
    if (iteration++ % 2 == 0) {  // alternate which goes first
      a_s = timed(bare, &a, &a_cpu);
      b_s = timed(backend, &b, &b_cpu);
    } else {
      b_s = timed(backend, &b, &b_cpu);
      a_s = timed(bare, &a, &a_cpu);
    }
    if (!a || !b) {
      state.SkipWithError("a read failed");
      break;
    }
    bare_s.push_back(a_s);
    store_s.push_back(b_s);
    bare_cpu.push_back(a_cpu);
    store_cpu.push_back(b_cpu);
    state.SetIterationTime(a_s + b_s);
  }
  const double bytes = double(page_bytes) * double(pages);
  const double bare_gbps = bytes / median(bare_s) / 1e9, store_gbps = bytes / median(store_s) / 1e9;
  state.counters["items"] = double(item_keys.size());
  state.counters["bare_GBps"] = bare_gbps;
  state.counters["store_GBps"] = store_gbps;
  // Each iteration times both back to back: the median of the pairs' ratios
  // resists the drift of a shared machine better than a ratio of medians.
  std::vector<double> pair_ratio;
  for (size_t i = 0; i < bare_s.size(); ++i) pair_ratio.push_back(bare_s[i] / store_s[i]);
  state.counters["ratio"] = median(pair_ratio);
  state.counters["cpu_ratio"] = median(bare_cpu) / median(store_cpu);
  state.counters["bare_cpu_ms"] = median(bare_cpu) * 1e3;
  state.counters["store_cpu_ms"] = median(store_cpu) * 1e3;
  memcached_result_free(&result);
  memcached_free(mc);
}

// 8 MiB + 96: a Llama-3.1-8B KV page of 64 tokens (9 parts of 1 MiB - 1 KiB); 64 KiB: inline.
BENCHMARK(BM_MemcachedBatchGet)
    ->ArgNames({"page_bytes", "pages"})
    ->Args({(8 << 20) + 96, 64})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);  // fixed: each run starts a server and stores the pages first
BENCHMARK(BM_MemcachedBatchGet)
    ->ArgNames({"page_bytes", "pages"})
    ->Args({64 << 10, 64})
    ->Args({64 << 10, 1024})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(50);

}  // namespace

BENCHMARK_MAIN();
