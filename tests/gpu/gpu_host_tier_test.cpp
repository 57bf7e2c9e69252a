// The CUDA host-tier transfer (cuda/host_transfer.cu) against the CPU one
// (host_transfer_cpu.cpp): the same random device rows are backed up and loaded
// through both, for every layout, both CUDA paths (copy kernel, copy engines) and
// the row shapes of the pool kinds (mha bf16, mha fp4 with its scale parts, mla,
// nsa with its per-page indexer part, and an odd-sized part that forces narrow
// accesses); the whole host buffer and every whole device buffer must then be equal
// byte for byte, so a stray write anywhere is caught too. Plus: a kernel on a user
// stream that waits with wait_layer sees the loaded layer (and not what an older load
// of the same set left there), and bad ids are refused with nothing enqueued. Kernel
// loads run both ways of marking layers done: flags in device memory (stream memory
// operations) and the event fallback (CudaTransferOptions::layer_events); so do
// copy-engine loads (flags: the transfer's enqueue thread makes their CUDA calls).
//
// The device buffers are the test's own (one cudaMalloc per part and layer, rows
// shaped like the pool kind's), described by hand as TierParts.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "gpu_test_env.hpp"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
#include "host_tier_backend.hpp"

void host_tier_test_spin(cudaStream_t stream, long long cycles);
void host_tier_test_count_mismatches(cudaStream_t stream, const uint8_t* base, uint64_t stride, const int64_t* rows,
                                     int64_t n, uint64_t row_bytes, const uint8_t* expect, unsigned long long* out);

namespace {

// More hardware queues than streams in this test, so that the control check of
// WaitLayerOrdersUserStream is not serialized behind the load by a shared queue. Set
// before the first CUDA call (static initialization).
[[maybe_unused]] const int kConnections = setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);

using kvp::Status;
using kvp::host::CopyPath;
using kvp::host::CudaTransferOptions;
using kvp::host::HostGeometry;
using kvp::host::HostLayout;
using kvp::host::HostPool;
using kvp::host::HostTransfer;
using kvp::host::TierPart;

#define ASSERT_CUDA(x) ASSERT_EQ((x), cudaSuccess) << #x
#define ASSERT_OK(x)                                 \
  do {                                               \
    const Status s_ = (x);                           \
    ASSERT_TRUE(s_.is_ok()) << #x << ": " << s_.message(); \
  } while (0)

using kvp::test::TierBackend;

struct PartSpec {
  uint64_t item, stride;
  bool per_page;
  uint32_t heads;
};

struct Kind {
  const char* name;
  uint32_t layers;
  uint64_t page_size;
  uint64_t device_tokens;
  std::vector<PartSpec> parts;
};

// Row shapes of the pool kinds (bytes per row and layer).
std::vector<Kind> kinds() {
  return {
      {"mha_bf16", 3, 16, 256, {{2048, 2048, false, 8}, {2048, 2048, false, 8}}},  // 8 heads x 128, K and V
      {"mha_bf16_page1_padded", 2, 1, 64, {{2048, 2560, false, 8}, {2048, 2560, false, 8}}},
      // 1 KiB rows at page 1 (gpt-oss's 8 x 64 bf16): 16 pages to a work piece, 50 pages per copy
      {"page1_1k_rows", 2, 1, 100, {{1024, 1024, false, 8}, {1024, 1024, false, 8}}},
      // fp4: 8 x 128 values in 512 bytes, one e4m3 scale per 16 values; scales are not whole heads
      {"mha_fp4", 2, 16, 128, {{512, 512, false, 8}, {512, 512, false, 8}, {64, 64, false, 0}, {64, 64, false, 0}}},
      {"mla", 3, 64, 512, {{1152, 1152, false, 0}}},  // (512 + 64) bf16
      // nsa: packed fp8 latent row (512 + 16 scale bytes + 64 bf16 rope) and the indexer's page row (64 x (128 + 4))
      {"nsa", 2, 64, 512, {{656, 656, false, 0}, {8448, 8448, true, 0}}},
      {"odd_widths", 2, 8, 64, {{6, 10, false, 3}, {12, 12, false, 2}}},
  };
}

void fill_random(std::mt19937_64& rng, uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(p + i, &v, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

uint64_t seed_of_run() {
  const char* s = std::getenv("KVPOOL_TEST_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : std::random_device{}();
}

// One pool kind's device buffers (and their host mirror), host pools and transfers.
struct Rig {
  Kind kind;
  HostLayout layout;
  uint64_t device_pages = 0;
  std::vector<std::vector<uint8_t*>> dev;              // [part][layer]
  std::vector<std::vector<std::vector<uint8_t>>> mirror;  // [part][layer]
  std::vector<uint64_t> rows;                          // per part
  TierBackend pinned{true}, plain{false};
  std::unique_ptr<HostPool> gpu_pool, cpu_pool;
  std::unique_ptr<HostTransfer> gpu, cpu;
  std::string geometry_error;

  ~Rig() {
    gpu.reset();
    for (auto& part : dev) {
      for (uint8_t* p : part) cudaFree(p);
    }
  }

  HostGeometry geometry(bool on_device) const {
    HostGeometry g;
    g.layout = layout;
    g.page_size = kind.page_size;
    g.layers = kind.layers;
    for (size_t p = 0; p < kind.parts.size(); ++p) {
      TierPart t;
      t.device_stride = kind.parts[p].stride;
      t.item_bytes = kind.parts[p].item;
      t.per_page = kind.parts[p].per_page;
      t.heads = kind.parts[p].heads;
      t.device_rows = rows[p];
      for (uint32_t l = 0; l < kind.layers; ++l) {
        t.device_base.push_back(on_device ? dev[p][l] : const_cast<uint8_t*>(mirror[p][l].data()));
      }
      g.parts.push_back(std::move(t));
    }
    return g;
  }

  // false (with geometry_error set) when the layout cannot hold the kind (page_head of non-head rows).
  bool build(const Kind& k, HostLayout l, CopyPath path, std::mt19937_64& rng, uint32_t layer_group = 0,
             bool layer_events = false, uint32_t copy_unroll = 0, uint32_t load_blocks = 0) {
    kind = k;
    layout = l;
    const uint64_t P = k.page_size;
    const uint64_t token_rows = k.device_tokens + P;  // SGLang's padding page
    device_pages = token_rows / P;
    dev.assign(k.parts.size(), {});
    mirror.assign(k.parts.size(), {});
    for (size_t p = 0; p < k.parts.size(); ++p) {
      rows.push_back(k.parts[p].per_page ? device_pages : token_rows);
      for (uint32_t layer = 0; layer < k.layers; ++layer) {
        uint8_t* d = nullptr;
        const size_t bytes = rows[p] * k.parts[p].stride;
        EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
        dev[p].push_back(d);
        mirror[p].emplace_back(bytes);
      }
    }
    randomize_device(rng);
    kvp::config::HostCacheConfig cfg;
    cfg.enabled = true;
    cfg.ratio = 2.0;
    const Status gs = HostPool::make(&pinned, cfg, k.device_tokens, geometry(true), uint64_t{1} << 40, &gpu_pool);
    if (!gs.is_ok()) {
      geometry_error = gs.message();
      return false;
    }
    const Status cs = HostPool::make(&plain, cfg, k.device_tokens, geometry(false), uint64_t{1} << 40, &cpu_pool);
    EXPECT_TRUE(cs.is_ok()) << cs.message();
    EXPECT_EQ(gpu_pool->geometry().bytes, cpu_pool->geometry().bytes);
    // Same bytes everywhere in both host buffers, so that unwritten bytes compare equal and stray writes do not.
    fill_random(rng, gpu_pool->data(), gpu_pool->geometry().bytes);
    std::memcpy(cpu_pool->data(), gpu_pool->data(), gpu_pool->geometry().bytes);
    CudaTransferOptions o;
    o.direct = path == CopyPath::kCopyEngine;
    o.path = path;
    o.layer_group = layer_group;
    o.layer_events = layer_events;
    o.copy_unroll = copy_unroll;
    o.load_blocks = load_blocks;
    const Status ts = kvp::host::make_cuda_transfer(gpu_pool.get(), 0, o, &gpu);
    EXPECT_TRUE(ts.is_ok()) << ts.message();
    cpu = kvp::host::make_cpu_transfer(cpu_pool.get());
    return gpu != nullptr && cpu != nullptr;
  }

  void randomize_device(std::mt19937_64& rng) {
    for (size_t p = 0; p < dev.size(); ++p) {
      for (size_t l = 0; l < dev[p].size(); ++l) {
        fill_random(rng, mirror[p][l].data(), mirror[p][l].size());
        EXPECT_EQ(cudaMemcpy(dev[p][l], mirror[p][l].data(), mirror[p][l].size(), cudaMemcpyHostToDevice), cudaSuccess);
      }
    }
    // A pageable upload may return before its DMA lands: the transfers' streams do not follow it.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  // Number of bytes that differ between the device buffers and their mirror.
  size_t device_mismatches() const {
    size_t bad = 0;
    std::vector<uint8_t> back;
    for (size_t p = 0; p < dev.size(); ++p) {
      for (size_t l = 0; l < dev[p].size(); ++l) {
        back.resize(mirror[p][l].size());
        EXPECT_EQ(cudaMemcpy(back.data(), dev[p][l], back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        for (size_t i = 0; i < back.size(); ++i) bad += back[i] != mirror[p][l][i];
      }
    }
    return bad;
  }

  size_t host_mismatches() const {
    size_t bad = 0;
    const uint64_t bytes = gpu_pool->geometry().bytes;
    for (uint64_t i = 0; i < bytes; ++i) bad += gpu_pool->data()[i] != cpu_pool->data()[i];
    return bad;
  }
};

// n distinct ids in [0, limit), shuffled (so runs are rare but do occur).
std::vector<int64_t> distinct(std::mt19937_64& rng, uint64_t limit, size_t n) {
  std::vector<int64_t> all(limit);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  // Keep a sorted stretch: the copy engines merge consecutive pages.
  std::sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n / 3));
  return all;
}

const char* path_name(CopyPath p) { return p == CopyPath::kKernel ? "kernel" : "copy_engine"; }

const CopyPath kPaths[] = {CopyPath::kKernel, CopyPath::kCopyEngine};

TEST(GpuHostTier, ParityWithCpuTransfer) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = seed_of_run();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + " (KVPOOL_TEST_SEED)");
  const HostLayout layouts[] = {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                                HostLayout::kPageHead};
  int checked = 0;
  for (const Kind& kind : kinds()) {
    for (HostLayout layout : layouts) {
      for (CopyPath path : kPaths) {
        SCOPED_TRACE(std::string(kind.name) + " / " + kvp::host::host_layout_name(layout) + " / " + path_name(path));
        Rig rig;
        // Every other combination loads through the event path (kernel loads: the fallback
        // without stream memory operations), two layers per launch and event; the others
        // take turns at the copy kernel's unrolls and load grids (the default, 1 block and
        // 3 blocks per part).
        const bool events = checked % 2 == 1;
        const uint32_t unroll = events ? 0 : std::array<uint32_t, 3>{0, 8, 16}[checked / 2 % 3];
        const uint32_t blocks = events ? 0 : std::array<uint32_t, 3>{0, 1, 3}[checked / 6 % 3];
        if (!rig.build(kind, layout, path, rng, events ? 2 : 1, events, unroll, blocks)) {
          // Only page_head may refuse, and only rows that are not whole heads.
          ASSERT_EQ(layout, HostLayout::kPageHead) << rig.geometry_error;
          ASSERT_FALSE(rig.geometry_error.empty());
          continue;
        }
        const uint64_t host_pages = rig.gpu_pool->pages();
        for (int round = 0; round < 2; ++round) {
          // Backup about half the device pages to random host pages.
          const size_t n = std::max<size_t>(1, rig.device_pages / 2);
          const std::vector<int64_t> d = distinct(rng, rig.device_pages, n);
          const std::vector<int64_t> h = distinct(rng, host_pages, n);
          uint64_t t_gpu = 0, t_cpu = 0;
          ASSERT_OK(rig.gpu->backup(d.data(), h.data(), n, &t_gpu));
          ASSERT_OK(rig.cpu->backup(d.data(), h.data(), n, &t_cpu));
          ASSERT_OK(rig.gpu->wait(t_gpu));
          EXPECT_TRUE(rig.gpu->finished(t_gpu));
          ASSERT_EQ(rig.host_mismatches(), 0u) << "backup, round " << round;
          EXPECT_EQ(rig.gpu->bytes_to_host(), rig.cpu->bytes_to_host());

          // New device contents, then load host pages (some just written) into other device pages.
          rig.randomize_device(rng);
          const std::vector<int64_t> h2 = distinct(rng, host_pages, n);
          const std::vector<int64_t> d2 = distinct(rng, rig.device_pages, n);
          const int set = round % kvp::host::kLoadSets;
          ASSERT_OK(rig.gpu->load(h2.data(), d2.data(), n, set, &t_gpu));
          ASSERT_OK(rig.cpu->load(h2.data(), d2.data(), n, set, &t_cpu));
          ASSERT_OK(rig.gpu->wait_layer(set, kind.layers - 1, nullptr));
          ASSERT_OK(rig.gpu->wait(t_gpu));
          ASSERT_EQ(rig.device_mismatches(), 0u) << "load, round " << round;
          EXPECT_EQ(rig.gpu->bytes_to_device(), rig.cpu->bytes_to_device());
        }
        ++checked;
      }
    }
  }
  // 7 kinds x 4 layouts x 2 paths, less page_head for the 3 kinds whose rows are not whole heads.
  EXPECT_EQ(checked, 7 * 4 * 2 - 3 * 2);
}

struct LoadMode {
  const char* name;
  CopyPath path;
  bool layer_events;
};
const LoadMode kLoadModes[] = {
    {"kernel, layer flags", CopyPath::kKernel, false},
    {"kernel, layer events", CopyPath::kKernel, true},
    {"copy engines, layer flags", CopyPath::kCopyEngine, false},   // enqueued by the transfer's thread
    {"copy engines, layer events", CopyPath::kCopyEngine, true},   // enqueued by the call
};

// A kernel on a user stream, after wait_layer(set, 0, stream), sees layer 0 of the load,
// although the load itself waits behind a long kernel on the compute stream. With
// older_load_first, an earlier load of the same set wrote other host pages into the same
// device rows and has finished: its marks of layer 0 must not satisfy the wait.
void check_wait_layer(const LoadMode& mode, bool older_load_first, std::mt19937_64& rng) {
  SCOPED_TRACE(mode.name);
  Rig rig;
  ASSERT_TRUE(rig.build(kinds()[0], HostLayout::kLayerFirst, mode.path, rng, 0, mode.layer_events));
  cudaStream_t compute = nullptr, user = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  ASSERT_CUDA(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking));
  ASSERT_OK(rig.gpu->set_compute_stream(compute));
  const Kind& k = rig.kind;
  const uint64_t P = k.page_size, item = k.parts[0].item, stride = k.parts[0].stride;
  const size_t n = rig.device_pages - 1;
  const std::vector<int64_t> d = distinct(rng, rig.device_pages, n);
  const std::vector<int64_t> h = distinct(rng, rig.gpu_pool->pages(), n);
  // What layer 0 of part 0 must hold afterwards, row by row, straight from the host buffer.
  const HostGeometry& g = rig.gpu_pool->geometry();
  std::vector<int64_t> rows;
  std::vector<uint8_t> expect;
  for (size_t i = 0; i < n; ++i) {
    for (uint64_t r = 0; r < P; ++r) {
      rows.push_back(d[i] * static_cast<int64_t>(P) + static_cast<int64_t>(r));
      const uint8_t* src = rig.gpu_pool->data() + g.offset(0, static_cast<uint64_t>(h[i]) * P + r, 0);
      expect.insert(expect.end(), src, src + item);
    }
  }
  int64_t* d_rows = nullptr;
  uint8_t* d_expect = nullptr;
  unsigned long long* d_bad = nullptr;
  ASSERT_CUDA(cudaMalloc(&d_rows, rows.size() * sizeof(int64_t)));
  ASSERT_CUDA(cudaMalloc(&d_expect, expect.size()));
  ASSERT_CUDA(cudaMalloc(&d_bad, 2 * sizeof(unsigned long long)));
  ASSERT_CUDA(cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(d_expect, expect.data(), expect.size(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(d_bad, 0, 2 * sizeof(unsigned long long)));
  // Both kernels once before the timed part: lazy loading of a kernel while the spin runs
  // could wait for the device and let the load finish before the control check.
  host_tier_test_spin(compute, 1);
  host_tier_test_count_mismatches(user, rig.dev[0][0], stride, d_rows, 0, item, d_expect, d_bad);
  ASSERT_CUDA(cudaDeviceSynchronize());
  uint64_t t = 0;
  if (older_load_first) {
    // Other host pages (random bytes, unlike h's) into the same device rows, all layers done.
    std::vector<int64_t> older(h);
    std::rotate(older.begin(), older.begin() + 1, older.end());
    ASSERT_OK(rig.gpu->load(older.data(), d.data(), n, 1, &t));
    ASSERT_OK(rig.gpu->wait_layer(1, k.layers - 1, user));
    ASSERT_OK(rig.gpu->wait(t));
    ASSERT_CUDA(cudaStreamSynchronize(user));
  }

  host_tier_test_spin(compute, 200LL * 1000 * 1000);  // ~0.1 s: the load cannot start before it ends
  ASSERT_OK(rig.gpu->load(h.data(), d.data(), n, 1, &t));
  EXPECT_FALSE(rig.gpu->finished(t));  // still behind the spin: nothing on the host waited
  // Control: the same check without waiting normally runs at once and sees the old rows (not
  // asserted: a stream may share a hardware queue with the load's and run after it anyway).
  host_tier_test_count_mismatches(user, rig.dev[0][0], stride, d_rows, static_cast<int64_t>(rows.size()), item,
                                  d_expect, d_bad + 1);
  ASSERT_OK(rig.gpu->wait_layer(1, 0, user));
  host_tier_test_count_mismatches(user, rig.dev[0][0], stride, d_rows, static_cast<int64_t>(rows.size()), item,
                                  d_expect, d_bad);
  ASSERT_CUDA(cudaGetLastError());
  ASSERT_CUDA(cudaStreamSynchronize(user));
  unsigned long long bad[2] = {0, 0};
  ASSERT_CUDA(cudaMemcpy(bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad[0], 0u) << "the kernel after wait_layer read rows the load had not written";
  std::printf("%s%s: control check without wait_layer: %llu stale bytes\n", mode.name,
              older_load_first ? ", after an older load" : "", bad[1]);
  ASSERT_OK(rig.gpu->wait(t));
  EXPECT_TRUE(rig.gpu->finished(t));
  cudaFree(d_rows);
  cudaFree(d_expect);
  cudaFree(d_bad);
  cudaStreamDestroy(compute);
  cudaStreamDestroy(user);
}

TEST(GpuHostTier, WaitLayerOrdersUserStream) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(seed_of_run());
  for (const LoadMode& mode : kLoadModes) check_wait_layer(mode, false, rng);
}

TEST(GpuHostTier, WaitLayerIgnoresAnOlderLoadOfTheSet) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(seed_of_run());
  for (const LoadMode& mode : kLoadModes) check_wait_layer(mode, true, rng);
}

TEST(GpuHostTier, BadIdsAreRefusedAndNothingIsEnqueued) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(seed_of_run());
  Rig rig;
  ASSERT_TRUE(rig.build(kinds()[0], HostLayout::kPageFirst, CopyPath::kKernel, rng));
  const std::vector<uint8_t> before(rig.gpu_pool->data(), rig.gpu_pool->data() + rig.gpu_pool->geometry().bytes);
  const int64_t dev_limit = static_cast<int64_t>(rig.device_pages);
  const int64_t host_limit = static_cast<int64_t>(rig.gpu_pool->pages());
  const struct {
    int64_t device, host;
  } bad[] = {{dev_limit, 0}, {-1, 0}, {0, host_limit}, {0, -1}, {INT64_MIN, INT64_MAX}};
  uint64_t t = 0;
  for (const auto& b : bad) {
    const int64_t d[] = {0, b.device}, h[] = {1, b.host};
    Status s = rig.gpu->backup(d, h, 2, &t);
    EXPECT_EQ(s.code(), KVPOOL_ERR_INVALID_ARGUMENT) << s.message();
    s = rig.gpu->load(h, d, 2, 0, &t);
    EXPECT_EQ(s.code(), KVPOOL_ERR_INVALID_ARGUMENT) << s.message();
  }
  const int64_t ok[] = {0};
  EXPECT_EQ(rig.gpu->load(ok, ok, 1, kvp::host::kLoadSets, &t).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rig.gpu->load(ok, ok, 1, -1, &t).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rig.gpu->wait_layer(0, rig.kind.layers, nullptr).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rig.gpu->wait_layer(kvp::host::kLoadSets, 0, nullptr).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rig.gpu->backup(nullptr, nullptr, 1, &t).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rig.gpu->bytes_to_host(), 0u);
  EXPECT_EQ(rig.gpu->bytes_to_device(), 0u);
  ASSERT_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(rig.device_mismatches(), 0u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), rig.gpu_pool->data()));
  // The first accepted call gets ticket 1: the refused calls took none.
  ASSERT_OK(rig.gpu->backup(ok, ok, 1, &t));
  EXPECT_EQ(t, 1u);
  ASSERT_OK(rig.gpu->wait(t));
}

// Calls queue up behind a long kernel on the compute stream: the staging ring grows
// instead of waiting, a batch larger than the first staging slots and id buffers (4,096
// pages) grows them (the event path re-captures its load graphs), and the results still
// equal the CPU transfer's. Then 300 small backups wrap the ticket ring.
void check_many_calls(const LoadMode& mode, std::mt19937_64& rng) {
  SCOPED_TRACE(mode.name);
  const Kind kind{"small_rows_page1", 2, 1, 12000, {{32, 32, false, 2}, {16, 48, false, 0}}};
  Rig rig;
  ASSERT_TRUE(rig.build(kind, HostLayout::kPageFirst, mode.path, rng, 0, mode.layer_events));
  cudaStream_t compute = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  ASSERT_OK(rig.gpu->set_compute_stream(compute));
  host_tier_test_spin(compute, 1);  // loaded before the timed part (lazy loading)
  ASSERT_CUDA(cudaStreamSynchronize(compute));

  // Backups: one of 5,000 pages, then five of 100, all behind the spin; disjoint host pages.
  const std::vector<int64_t> d = distinct(rng, rig.device_pages, 5500);
  const std::vector<int64_t> h = distinct(rng, rig.gpu_pool->pages(), 5500);
  host_tier_test_spin(compute, 50LL * 1000 * 1000);
  uint64_t first = 0, t = 0, t_cpu = 0;
  for (size_t at = 0, k = 0; at < d.size(); at += k == 0 ? 5000 : 100, ++k) {
    const size_t n = k == 0 ? 5000 : 100;
    ASSERT_OK(rig.gpu->backup(d.data() + at, h.data() + at, n, &t));
    ASSERT_OK(rig.cpu->backup(d.data() + at, h.data() + at, n, &t_cpu));
    if (k == 0) first = t;
  }
  EXPECT_FALSE(rig.gpu->finished(first));  // all still behind the spin
  ASSERT_OK(rig.gpu->wait(t));             // the write stream runs them in order
  EXPECT_TRUE(rig.gpu->finished(first));
  ASSERT_EQ(rig.host_mismatches(), 0u);

  // Loads: 5,000 pages as set 0, then 10 as set 1, behind another spin; distinct device pages.
  rig.randomize_device(rng);
  const std::vector<int64_t> d2 = distinct(rng, rig.device_pages, 5010);
  host_tier_test_spin(compute, 50LL * 1000 * 1000);
  ASSERT_OK(rig.gpu->load(h.data(), d2.data(), 5000, 0, &t));
  ASSERT_OK(rig.cpu->load(h.data(), d2.data(), 5000, 0, &t_cpu));
  ASSERT_OK(rig.gpu->load(h.data() + 5000, d2.data() + 5000, 10, 1, &t));
  ASSERT_OK(rig.cpu->load(h.data() + 5000, d2.data() + 5000, 10, 1, &t_cpu));
  ASSERT_OK(rig.gpu->wait_layer(0, kind.layers - 1, nullptr));
  ASSERT_OK(rig.gpu->wait(t));
  ASSERT_CUDA(cudaStreamSynchronize(compute));
  ASSERT_EQ(rig.device_mismatches(), 0u);
  // An empty load still marks every layer of its set done: a wait on it passes.
  ASSERT_OK(rig.gpu->load(nullptr, nullptr, 0, 2, &t));
  ASSERT_OK(rig.gpu->wait_layer(2, kind.layers - 1, nullptr));
  ASSERT_OK(rig.gpu->wait(t));
  ASSERT_CUDA(cudaStreamSynchronize(compute));

  // 300 one-page backups: tickets older than the ring are reported finished.
  uint64_t oldest = 0;
  for (int k = 0; k < 300; ++k) {
    const int64_t dp = d[static_cast<size_t>(k)], hp = h[static_cast<size_t>(k)];
    ASSERT_OK(rig.gpu->backup(&dp, &hp, 1, &t));
    ASSERT_OK(rig.cpu->backup(&dp, &hp, 1, &t_cpu));
    if (k == 0) oldest = t;
  }
  ASSERT_OK(rig.gpu->wait(t));
  EXPECT_TRUE(rig.gpu->finished(oldest));
  ASSERT_OK(rig.gpu->wait(oldest));
  EXPECT_EQ(rig.host_mismatches(), 0u);
  EXPECT_EQ(rig.gpu->bytes_to_host(), rig.cpu->bytes_to_host());
  EXPECT_EQ(rig.gpu->bytes_to_device(), rig.cpu->bytes_to_device());

  // Destroying the transfer with copies still queued behind a spin (the copy engines: still
  // with the enqueue thread) makes them first: the device ends as the CPU transfer's.
  rig.randomize_device(rng);
  host_tier_test_spin(compute, 20LL * 1000 * 1000);
  for (int k = 0; k < 20; ++k) {
    const size_t at = static_cast<size_t>(k) * 50;
    ASSERT_OK(rig.gpu->load(h.data() + at, d2.data() + at, 50, k % kvp::host::kLoadSets, &t));
    ASSERT_OK(rig.cpu->load(h.data() + at, d2.data() + at, 50, k % kvp::host::kLoadSets, &t_cpu));
  }
  rig.gpu.reset();
  EXPECT_EQ(rig.device_mismatches(), 0u);
  cudaStreamDestroy(compute);
}

TEST(GpuHostTier, ManyCallsInFlightAndLargeBatches) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = seed_of_run();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + " (KVPOOL_TEST_SEED)");
  check_many_calls(kLoadModes[0], rng);  // kernel loads marking layer flags
  check_many_calls(kLoadModes[1], rng);  // kernel loads through the event fallback
  check_many_calls(kLoadModes[2], rng);  // copy engines through the enqueue thread
  check_many_calls(kLoadModes[3], rng);  // copy engines enqueued by the calls
}

}  // namespace
