// `gpu_bench --host-tier`: the host tier's CUDA transfers (cuda/host_transfer.cu) on
// Llama-3.1-8B's KV (32 layers, 8 KV heads x 128, bf16: 4 KiB per token and layer,
// K and V), page 64, batches of 4,096 tokens (64 random device pages <-> 64 random
// host pages; 512 MiB a batch), for every host layout and both paths.
//
//   bandwidth  - batch bytes / CUDA-event time. A load is timed from an event on the
//                compute stream before the call to an event after wait_layer(last
//                layer) on it; the first layer's event gives the overlap. A backup
//                has no stream-side completion to wait on, so its end event is
//                recorded after wait(ticket) returns (the host's wake-up, some µs,
//                is inside the ~10 ms interval).
//   host call  - steady_clock around backup()/load(); a call that found its copy
//                already finished on return counts as synchronized (none should:
//                the copy takes milliseconds).
//   PCIe limit - one cudaMemcpyAsync of the same bytes, pinned <-> device, each way,
//                in the same run.
// GPU_BENCH_LOAD_SWEEP="blocks:unroll,..." (e.g. "132:4,8:8") times the copy kernel at
// other CudaTransferOptions::load_blocks / copy_unroll settings instead of the table;
// GPU_BENCH_HOST_TIER_LAYOUTS="layer_first,page_first_direct" picks the layouts and their order.
// SGLang's figures (issue 12, H100, same shape): backup / load GB/s layer_first
// 49.6 / 41.0, page_first 50.7 / 33.4, page_first_direct 43.5 / 37.5.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "gpu_bench_check.cuh"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
#include "host_tier_backend.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using kvp::host::CopyPath;
using kvp::host::HostLayout;

#define HT_CHECK(x)                                                                             \
  do {                                                                                          \
    const kvp::Status s_ = (x);                                                                 \
    if (!s_.is_ok()) {                                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_.message().c_str());    \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

constexpr uint32_t kLayers = 32;
constexpr uint64_t kItem = 8 * 128 * 2;  // one token's K (or V) of one layer
constexpr uint64_t kPage = 64;
constexpr uint64_t kBatchTokens = 4096;
constexpr uint64_t kDeviceTokens = 16384;  // host tier: 2x, as SGLang's default ratio

struct Sglang {
  HostLayout layout;
  double backup, load;
};
const Sglang kSglang[] = {{HostLayout::kLayerFirst, 49.6, 41.0},
                          {HostLayout::kPageFirst, 50.7, 33.4},
                          {HostLayout::kPageFirstDirect, 43.5, 37.5}};
constexpr double kGoalGbps = 52.0;
constexpr double kGoalHostUs = 10.0;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

double sglang_of(HostLayout layout, bool backup) {
  for (const Sglang& s : kSglang) {
    if (s.layout == layout) return backup ? s.backup : s.load;
  }
  return 0.0;
}

struct Variant {
  CopyPath path;
  uint32_t layer_group;  // 0: the default
  bool layer_events;     // kernel loads through the event path (the fallback without stream memory operations)
  // CudaTransferOptions' kernel tuning (0: the defaults), set by GPU_BENCH_LOAD_SWEEP only.
  uint32_t load_blocks = 0;
  uint32_t unroll = 0;
};

// How a load marks its layers done: flags in device memory (the kernel's blocks, or the
// copy engines' enqueue thread), or events (layer_events: the fallback without stream
// memory operations; copy-engine operations then enqueued by the call itself).
const char* marks_of(const Variant& var) { return var.layer_events ? "events" : "flags"; }

void line(const char* metric, HostLayout layout, const Variant& var, const std::vector<double>& v, const char* unit,
          double sglang, double pcie, double goal, bool lower_is_better, int synced) {
  const CopyPath path = var.path;
  const double m = median(v);
  const bool met = goal <= 0 || (lower_is_better ? m <= goal : m >= goal);
  std::printf("{\"metric\": \"%s\", \"layout\": \"%s\", \"path\": \"%s\", \"layer_marks\": \"%s\", "
              "\"layer_group\": %u, \"load_blocks\": %u, \"unroll\": %u, "
              "\"page_size\": %d, \"batch_tokens\": %d, "
              "\"median\": %.3f, \"p10\": %.3f, \"p90\": %.3f, \"unit\": \"%s\", \"n\": %zu, \"sglang\": %.1f, "
              "\"x_vs_sglang\": %.3f, \"pcie_gbps\": %.2f, \"of_pcie\": %.3f, \"synced_calls\": %d, \"goal\": %.1f, "
              "\"goal_met\": %s}\n",
              metric, kvp::host::host_layout_name(layout), path == CopyPath::kKernel ? "kernel" : "copy_engine",
              marks_of(var), var.layer_group, var.load_blocks, var.unroll,
              static_cast<int>(kPage), static_cast<int>(kBatchTokens), m, quantile(v, 0.1), quantile(v, 0.9), unit,
              v.size(), sglang, sglang > 0 ? m / sglang : 0.0, pcie, pcie > 0 && !lower_is_better ? m / pcie : 0.0,
              synced, goal, met ? "true" : "false");
  std::fflush(stdout);
}

__global__ void ht_empty_kernel() {}

// What one enqueue costs the host on this machine, for the host-call rows: an empty
// kernel launch and an event record (a backup or a kernel load is 4 enqueues).
void enqueue_floor(cudaStream_t s) {
  cudaEvent_t e;
  CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::vector<double> launch, record;
  for (int r = 0; r < 220; ++r) {
    CHECK_CUDA(cudaStreamSynchronize(s));
    auto t0 = Clock::now();
    ht_empty_kernel<<<1, 32, 0, s>>>();
    auto t1 = Clock::now();
    CHECK_CUDA(cudaEventRecord(e, s));
    auto t2 = Clock::now();
    if (r >= 20) {
      launch.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      record.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
  }
  CHECK_CUDA(cudaGetLastError());
  for (int k = 0; k < 2; ++k) {
    const std::vector<double>& v = k == 0 ? launch : record;
    std::printf("{\"metric\": \"%s\", \"median\": %.3f, \"p10\": %.3f, \"p90\": %.3f, \"unit\": \"us\", \"n\": %zu}\n",
                k == 0 ? "empty_launch_host_us" : "event_record_host_us", median(v), quantile(v, 0.1), quantile(v, 0.9),
                v.size());
  }
  cudaEventDestroy(e);
}

// The same-run PCIe limit: one copy of `bytes`, pinned <-> device.
void pcie_limit(size_t bytes, int reps, cudaStream_t s, double* h2d, double* d2h) {
  void *host = nullptr, *dev = nullptr;
  CHECK_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocPortable));
  CHECK_CUDA(cudaMalloc(&dev, bytes));
  std::memset(host, 0x5a, bytes);
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int dir = 0; dir < 2; ++dir) {
    std::vector<double> gbps;
    for (int r = 0; r < reps + 2; ++r) {
      CHECK_CUDA(cudaEventRecord(a, s));
      if (dir == 0) {
        CHECK_CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
      } else {
        CHECK_CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
      }
      CHECK_CUDA(cudaEventRecord(b, s));
      CHECK_CUDA(cudaEventSynchronize(b));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      if (r >= 2) gbps.push_back(static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
    }
    (dir == 0 ? *h2d : *d2h) = median(gbps);
    std::printf("{\"metric\": \"host_tier_pcie_copy_gbps\", \"direction\": \"%s\", \"bytes\": %zu, \"median\": %.3f, "
                "\"p10\": %.3f, \"p90\": %.3f, \"unit\": \"GB/s\", \"n\": %zu}\n",
                dir == 0 ? "host_to_device" : "device_to_host", bytes, median(gbps), quantile(gbps, 0.1),
                quantile(gbps, 0.9), gbps.size());
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFreeHost(host);
  cudaFree(dev);
}

struct DeviceKv {
  std::vector<uint8_t*> k, v;
  uint64_t rows = kDeviceTokens + kPage;  // SGLang's padding page
  DeviceKv() {
    for (uint32_t l = 0; l < kLayers; ++l) {
      for (auto* side : {&k, &v}) {
        uint8_t* p = nullptr;
        CHECK_CUDA(cudaMalloc(&p, rows * kItem));
        CHECK_CUDA(cudaMemset(p, static_cast<int>(0x11 + l), rows * kItem));  // not zeros: see METHOD.md
        side->push_back(p);
      }
    }
  }
  ~DeviceKv() {
    for (auto* p : k) cudaFree(p);
    for (auto* p : v) cudaFree(p);
  }
};

// The host tier of one layout over `kv`, its memory touched once.
std::unique_ptr<kvp::host::HostPool> host_pool(const DeviceKv& kv, HostLayout layout) {
  kvp::host::HostGeometry g;
  g.layout = layout;
  g.page_size = kPage;
  g.layers = kLayers;
  for (const auto* side : {&kv.k, &kv.v}) {
    kvp::host::TierPart t;
    t.device_base = *side;
    t.device_stride = kItem;
    t.item_bytes = kItem;
    t.heads = 8;
    t.device_rows = kv.rows;
    g.parts.push_back(t);
  }
  static kvp::test::TierBackend pinned(true);  // the pool keeps a pointer to it
  kvp::config::HostCacheConfig cfg;
  cfg.enabled = true;
  std::unique_ptr<kvp::host::HostPool> pool;
  HT_CHECK(kvp::host::HostPool::make(&pinned, cfg, kDeviceTokens, g, uint64_t{1} << 42, &pool));
  std::memset(pool->data(), 0x33, pool->geometry().bytes);  // touch every page once, outside the timings
  return pool;
}

void bench_variant(kvp::host::HostPool* pool, const Variant& var, int reps, double pcie_h2d, double pcie_d2h,
                   cudaStream_t compute) {
  const CopyPath path = var.path;
  const HostLayout layout = pool->geometry().layout;
  kvp::host::CudaTransferOptions o;
  o.direct = path == CopyPath::kCopyEngine;
  o.path = path;
  o.layer_group = var.layer_group;
  o.layer_events = var.layer_events;
  o.load_blocks = var.load_blocks;
  o.copy_unroll = var.unroll;
  std::unique_ptr<kvp::host::HostTransfer> t;
  HT_CHECK(kvp::host::make_cuda_transfer(pool, 0, o, &t));
  HT_CHECK(t->set_compute_stream(compute));

  // 8 batches of random distinct pages each side, rotated.
  std::mt19937_64 rng(12);
  const size_t n = kBatchTokens / kPage;
  std::vector<std::vector<int64_t>> dev_sets, host_sets;
  for (int s = 0; s < 8; ++s) {
    std::vector<int64_t> d(pool->geometry().device_pages()), h(pool->pages());
    std::iota(d.begin(), d.end(), 0);
    std::iota(h.begin(), h.end(), 0);
    std::shuffle(d.begin(), d.end(), rng);
    std::shuffle(h.begin(), h.end(), rng);
    d.resize(n);
    h.resize(n);
    dev_sets.push_back(d);
    host_sets.push_back(h);
  }
  const double bytes = static_cast<double>(kBatchTokens) * kLayers * 2 * kItem;
  cudaEvent_t start, first, last;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&first));
  CHECK_CUDA(cudaEventCreate(&last));
  std::vector<double> backup_gbps, backup_us, load_gbps, load_us, first_ms, last_ms;
  int backup_synced = 0, load_synced = 0;
  for (int r = 0; r < reps + 2; ++r) {  // the first 2 are warm-up
    const auto& d = dev_sets[static_cast<size_t>(r) % 8];
    const auto& h = host_sets[static_cast<size_t>(r) % 8];
    CHECK_CUDA(cudaStreamSynchronize(compute));
    uint64_t ticket = 0;
    CHECK_CUDA(cudaEventRecord(start, compute));
    auto t0 = Clock::now();
    HT_CHECK(t->backup(d.data(), h.data(), n, &ticket));
    auto t1 = Clock::now();
    const bool backup_done = t->finished(ticket);
    HT_CHECK(t->wait(ticket));
    CHECK_CUDA(cudaEventRecord(last, compute));
    CHECK_CUDA(cudaEventSynchronize(last));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, last));
    if (r >= 2) {
      backup_gbps.push_back(bytes / (ms * 1e-3) / 1e9);
      backup_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      backup_synced += backup_done ? 1 : 0;
    }

    const int set = r % kvp::host::kLoadSets;
    CHECK_CUDA(cudaEventRecord(start, compute));
    t0 = Clock::now();
    HT_CHECK(t->load(h.data(), d.data(), n, set, &ticket));
    t1 = Clock::now();
    const bool load_done = t->finished(ticket);
    HT_CHECK(t->wait_layer(set, 0, compute));
    CHECK_CUDA(cudaEventRecord(first, compute));
    HT_CHECK(t->wait_layer(set, kLayers - 1, compute));  // the last layer: the whole load
    CHECK_CUDA(cudaEventRecord(last, compute));
    CHECK_CUDA(cudaEventSynchronize(last));
    float ms_first = 0, ms_last = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms_first, start, first));
    CHECK_CUDA(cudaEventElapsedTime(&ms_last, start, last));
    if (r >= 2) {
      load_gbps.push_back(bytes / (ms_last * 1e-3) / 1e9);
      load_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      first_ms.push_back(ms_first);
      last_ms.push_back(ms_last);
      load_synced += load_done ? 1 : 0;
    }
  }
  line("host_tier_backup_gbps", layout, var, backup_gbps, "GB/s", sglang_of(layout, true), pcie_d2h, kGoalGbps, false,
       backup_synced);
  line("host_tier_load_gbps", layout, var, load_gbps, "GB/s", sglang_of(layout, false), pcie_h2d, kGoalGbps, false,
       load_synced);
  line("host_tier_backup_host_us", layout, var, backup_us, "us", 0, 0, kGoalHostUs, true, backup_synced);
  line("host_tier_load_host_us", layout, var, load_us, "us", 0, 0, kGoalHostUs, true, load_synced);
  line("host_tier_load_first_layer_ms", layout, var, first_ms, "ms", 0, 0, 0, true, load_synced);
  line("host_tier_load_last_layer_ms", layout, var, last_ms, "ms", 0, 0, 0, true, load_synced);
  cudaEventDestroy(start);
  cudaEventDestroy(first);
  cudaEventDestroy(last);
}

// GPU_BENCH_LOAD_SWEEP="blocks:unroll,...": instead of the table, kernel transfers
// (flags) of every layout at each of these CudaTransferOptions settings
// (0: the default; blocks beyond those that fit at once give the most that fit).
std::vector<Variant> sweep_variants() {
  std::vector<Variant> out;
  const char* env = std::getenv("GPU_BENCH_LOAD_SWEEP");
  if (env == nullptr) return out;
  for (const char* p = env; *p != '\0';) {
    unsigned blocks = 0, unroll = 0;
    int used = 0;
    if (std::sscanf(p, "%u:%u%n", &blocks, &unroll, &used) != 2) {
      std::fprintf(stderr, "GPU_BENCH_LOAD_SWEEP: expected blocks:unroll,... at \"%s\"\n", p);
      std::exit(2);
    }
    out.push_back(Variant{CopyPath::kKernel, 0, false, blocks, unroll});
    p += used;
    if (*p == ',') ++p;
  }
  return out;
}

// GPU_BENCH_HOST_TIER_LAYOUTS="page_first_direct,layer_first,...": these layouts in this
// order (a layout may repeat: a check for effects of the order); default all four.
std::vector<HostLayout> layouts_to_run() {
  const char* env = std::getenv("GPU_BENCH_HOST_TIER_LAYOUTS");
  if (env == nullptr) {
    return {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect, HostLayout::kPageHead};
  }
  std::vector<HostLayout> out;
  std::string list(env);
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    HostLayout layout;
    if (!kvp::host::parse_host_layout(list.substr(at, end - at), &layout)) {
      std::fprintf(stderr, "GPU_BENCH_HOST_TIER_LAYOUTS: unknown layout \"%s\"\n", list.substr(at, end - at).c_str());
      std::exit(2);
    }
    out.push_back(layout);
    at = end + 1;
  }
  return out;
}

}  // namespace

// Called by gpu_bench's main for `--host-tier`.
void bench_host_tier(bool quick) {
  const int reps = quick ? 5 : 20;
  cudaStream_t compute;
  CHECK_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  double h2d = 0, d2h = 0;
  enqueue_floor(compute);
  pcie_limit(static_cast<size_t>(kBatchTokens) * kLayers * 2 * kItem, reps, compute, &h2d, &d2h);
  const std::vector<Variant> sweep = sweep_variants();
  {
    DeviceKv kv;
    for (HostLayout layout : layouts_to_run()) {
      const auto pool = host_pool(kv, layout);
      if (!sweep.empty()) {
        for (const Variant& var : sweep) bench_variant(pool.get(), var, reps, h2d, d2h, compute);
        continue;
      }
      bench_variant(pool.get(), {CopyPath::kKernel, 0, false}, reps, h2d, d2h, compute);
      // The copy engines get one operation per run contiguous on both sides: a (page, layer)
      // block for layer_first and page_first_direct (4,096 a batch), a token row for page_first
      // (262K a batch) and a head's row for page_head (2M), which are not timed. With flags
      // the transfer's thread enqueues them; with events (the fallback) the call itself.
      if (layout == HostLayout::kPageHead || layout == HostLayout::kPageFirst) continue;
      bench_variant(pool.get(), {CopyPath::kCopyEngine, 0, false}, reps, h2d, d2h, compute);
      bench_variant(pool.get(), {CopyPath::kCopyEngine, 0, true}, quick ? 3 : 5, h2d, d2h, compute);
      // Kernel loads through the event fallback (a graph of a kernel and an event per layer
      // group; 1 and 4 layers), against the flags above, in the same run.
      for (const Variant& var : {Variant{CopyPath::kKernel, 1, true}, Variant{CopyPath::kKernel, 4, true}}) {
        bench_variant(pool.get(), var, reps, h2d, d2h, compute);
      }
    }
  }
  pcie_limit(static_cast<size_t>(kBatchTokens) * kLayers * 2 * kItem, reps, compute, &h2d, &d2h);  // drift check
  CHECK_CUDA(cudaStreamDestroy(compute));
}
