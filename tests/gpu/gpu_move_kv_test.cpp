// kvpool_move_kv_async on a CUDA pool must leave exactly the bytes the CPU pool's
// move leaves, in every buffer that moves (K, V, fp4 scales, double_sparse labels),
// for every kind of pair set the device routes differently: disjoint pairs (moved
// directly), chains and permutation cycles (staged through scratch), duplicate
// destinations (the last pair wins), moves onto themselves, random mixtures, and a bad
// slot (the pool faults and nothing moves). Every buffer starts with the same random
// bytes on both pools and is compared whole after each call (seed printed).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_env.hpp"

namespace {

using Bytes = std::vector<uint8_t>;
using Slots = std::vector<int64_t>;

using kvtest::with_device;

// Every buffer move_kv relocates rows in, for every layer that has KV.
const int32_t kMovedKinds[] = {KVPOOL_BUFFER_K, KVPOOL_BUFFER_V, KVPOOL_BUFFER_K_SCALE, KVPOOL_BUFFER_V_SCALE,
                               KVPOOL_BUFFER_LABEL};

struct Buffer {
  int32_t kind, layer;
  kvpool_buffer cpu, gpu;
};

class DevicePtrs {
 public:
  DevicePtrs(const Slots& dst, const Slots& src) : n_(dst.size()) {
    EXPECT_EQ(cudaMalloc(&dst_, std::max<size_t>(1, n_) * 8), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&src_, std::max<size_t>(1, n_) * 8), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dst_, dst.data(), n_ * 8, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(src_, src.data(), n_ * 8, cudaMemcpyHostToDevice), cudaSuccess);
    // A copy from pageable memory may return before its DMA lands, and the move reads the
    // slots on a non-blocking stream that does not wait for it (seen once in 101 runs of the
    // gpu label: a stale index moved the wrong row).
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DevicePtrs() {
    cudaFree(dst_);
    cudaFree(src_);
  }
  DevicePtrs(const DevicePtrs&) = delete;
  DevicePtrs& operator=(const DevicePtrs&) = delete;
  const int64_t* dst() const { return dst_; }
  const int64_t* src() const { return src_; }

 private:
  size_t n_;
  int64_t* dst_ = nullptr;
  int64_t* src_ = nullptr;
};

struct Pools {
  kvpool* cpu = nullptr;
  kvpool* gpu = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<Buffer> buffers;
  int64_t limit = 0;  // rows every moved buffer has: valid slots are [0, limit)

  Pools(const std::string& json, int layers) {
    const std::string c = with_device(json, "cpu"), g = with_device(json, "cuda");
    EXPECT_EQ(kvpool_create(c.data(), c.size(), &cpu), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(kvpool_create(g.data(), g.size(), &gpu), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    if (cpu == nullptr || gpu == nullptr) return;
    for (int layer = 0; layer < layers; ++layer) {
      for (int32_t kind : kMovedKinds) {
        Buffer b{kind, layer, KVPOOL_BUFFER_INIT, KVPOOL_BUFFER_INIT};
        if (kvpool_get_buffer(cpu, kind, layer, &b.cpu) != KVPOOL_OK) continue;  // absent in this variant / layer
        EXPECT_EQ(kvpool_get_buffer(gpu, kind, layer, &b.gpu), KVPOOL_OK) << kvpool_last_error();
        EXPECT_EQ(b.cpu.bytes, b.gpu.bytes);
        limit = limit == 0 ? b.cpu.shape[0] : std::min(limit, b.cpu.shape[0]);
        buffers.push_back(b);
      }
    }
  }
  ~Pools() {
    kvpool_destroy(cpu);
    kvpool_destroy(gpu);
    cudaStreamDestroy(stream);
  }

  // The same random bytes in every buffer of both pools (mla's V is a view of K: it is
  // written after K on both, identically).
  void randomize(std::mt19937_64& rng) {
    for (const Buffer& b : buffers) {
      Bytes bytes(b.cpu.bytes);
      for (auto& x : bytes) x = static_cast<uint8_t>(rng());
      std::memcpy(b.cpu.data, bytes.data(), bytes.size());
      ASSERT_EQ(cudaMemcpy(b.gpu.data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
    // A copy from pageable memory may return before its last DMA lands, and the moves run on
    // a non-blocking stream that does not wait for it (seen under ctest -j4: stale rows moved).
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

  // Empty when every buffer is equal; otherwise where the first difference is.
  std::string first_difference() const {
    for (const Buffer& b : buffers) {
      Bytes got(b.gpu.bytes);
      EXPECT_EQ(cudaMemcpy(got.data(), b.gpu.data, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      const auto* want = static_cast<const uint8_t*>(b.cpu.data);
      for (size_t i = 0; i < got.size(); ++i) {
        if (got[i] != want[i]) {
          const size_t row = got.size() / static_cast<size_t>(b.cpu.shape[0]);
          return "buffer kind " + std::to_string(b.kind) + " layer " + std::to_string(b.layer) + ": row " +
                 std::to_string(i / row) + " byte " + std::to_string(i % row) + " differs";
        }
      }
    }
    return "";
  }

  // Both pools move; the device pool through its stream.
  void move(const Slots& dst, const Slots& src) {
    ASSERT_EQ(kvpool_move_kv_async(cpu, dst.data(), dst.size(), src.data(), src.size(), nullptr), KVPOOL_OK)
        << kvpool_last_error();
    DevicePtrs d(dst, src);
    ASSERT_EQ(kvpool_move_kv_async(gpu, d.dst(), dst.size(), d.src(), src.size(), stream), KVPOOL_OK)
        << kvpool_last_error();
    ASSERT_EQ(kvpool_synchronize(gpu, stream), KVPOOL_OK) << kvpool_last_error();
  }
};

// `count` distinct slots in [1, limit).
Slots distinct(std::mt19937_64& rng, size_t count, int64_t limit) {
  Slots all(static_cast<size_t>(limit - 1));
  std::iota(all.begin(), all.end(), 1);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::min(count, all.size()));
  return all;
}

struct PairSet {
  std::string name;
  Slots dst, src;
};

// Pair sets that take every route of the device move (and mixtures of them).
std::vector<PairSet> pair_sets(std::mt19937_64& rng, int64_t limit) {
  std::vector<PairSet> sets;
  const size_t n = static_cast<size_t>(std::min<int64_t>(600, (limit - 1) / 2));
  {  // disjoint: every pair moves directly
    const Slots s = distinct(rng, 2 * n, limit);
    sets.push_back({"disjoint", Slots(s.begin() + static_cast<long>(n), s.end()), Slots(s.begin(), s.begin() + static_cast<long>(n))});
  }
  {  // one pair, and one pair onto itself
    const Slots s = distinct(rng, 2, limit);
    sets.push_back({"single", {s[0]}, {s[1]}});
    sets.push_back({"onto itself", {s[0]}, {s[0]}});
  }
  {  // compaction (speculative decoding): each row moves onto the previous slot of a chain
    const Slots s = distinct(rng, n + 1, limit);
    sets.push_back({"chain down", Slots(s.begin(), s.end() - 1), Slots(s.begin() + 1, s.end())});
    sets.push_back({"chain up", Slots(s.begin() + 1, s.end()), Slots(s.begin(), s.end() - 1)});
  }
  {  // a permutation cycle: every destination is also a source
    const Slots s = distinct(rng, n, limit);
    Slots d(s);
    std::rotate(d.begin(), d.begin() + 1, d.end());
    sets.push_back({"cycle", d, s});
  }
  {  // duplicate destinations (the last pair wins), some read by other pairs, and self moves
    const Slots s = distinct(rng, 40, limit);
    PairSet p{"duplicates", {}, {}};
    for (int k = 0; k < 200; ++k) {
      p.dst.push_back(s[rng() % 10]);
      p.src.push_back(s[rng() % 40]);
    }
    sets.push_back(p);
  }
  {  // overlapping halves (the existing parity case): sources 0..2n/3, destinations n/3..n, rotated
    const Slots s = distinct(rng, n, limit);
    Slots src(s.begin(), s.begin() + static_cast<long>(2 * n / 3)), dst(s.begin() + static_cast<long>(n / 3), s.end());
    dst.resize(src.size(), s[0]);
    std::rotate(dst.begin(), dst.begin() + 7, dst.end());
    sets.push_back({"overlapping", dst, src});
  }
  for (size_t count : {size_t(37), size_t(3000)}) {  // uniformly random slots: any mixture of the above
    PairSet p{"random " + std::to_string(count), {}, {}};
    for (size_t k = 0; k < count; ++k) {
      p.dst.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(limit)));
      p.src.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(limit)));
    }
    sets.push_back(p);
  }
  return sets;
}

struct Variant {
  const char* name;
  const char* json;
  int layers;
};

const Variant kVariants[] = {
    {"mha-bf16", R"({"model": {"num_layers": 3, "kv_heads": 4, "head_dim": 64},
      "pool": {"kv_dtype": "bf16", "page_size": 16, "max_total_tokens": 4096, "max_context_len": 256}})", 3},
    {"mha-fp8", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 64},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 1, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"mha-fp4-scales", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 32},
      "pool": {"kv_dtype": "fp4_e2m1", "page_size": 4, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"mha-bf16-6-byte-rows", R"({"model": {"num_layers": 2, "kv_heads": 1, "head_dim": 3},
      "pool": {"kv_dtype": "bf16", "page_size": 1, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"mla-bf16-512-64", R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
      "pool": {"kv_dtype": "bf16", "page_size": 16, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"mla-fp4", R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 64, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "fp4_e2m1", "page_size": 8, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"nsa-fp8", R"({"model": {"num_layers": 2, "attention": "nsa", "kv_lora_rank": 128, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"double-sparse-labels", R"({"model": {"num_layers": 2, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16,
      "heavy_channels": 4}, "pool": {"kv_dtype": "bf16", "page_size": 1, "max_total_tokens": 4096, "max_context_len": 256}})", 2},
    {"hybrid-linear", R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [1, 3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4], "conv_dtype": "f32",
      "ssm_dtype": "f32"}}, "pool": {"kv_dtype": "f32", "max_total_tokens": 4096, "max_running_requests": 4,
      "mamba_cache_size": 8, "max_context_len": 256}, "prefix_cache": {"kind": "none"}})", 4},
};

uint64_t fresh_seed() {
  const uint64_t s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("seed %llu\n", static_cast<unsigned long long>(s));
  return s;
}

TEST(GpuMoveKv, EveryPairSetMatchesTheCpuPoolInEveryBuffer) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = fresh_seed();
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    std::mt19937_64 rng(seed ^ std::hash<std::string>()(v.name));
    Pools p(v.json, v.layers);
    ASSERT_NE(p.gpu, nullptr);
    ASSERT_FALSE(p.buffers.empty());
    p.randomize(rng);
    if (HasFatalFailure()) return;
    // The pair sets run back to back on the same buffers: each call's marks must not
    // leak into the next one's routes.
    for (const PairSet& s : pair_sets(rng, p.limit)) {
      SCOPED_TRACE(s.name);
      p.move(s.dst, s.src);
      if (HasFatalFailure()) return;
      ASSERT_EQ(p.first_difference(), "") << "after move_kv (" << s.name << ", " << s.dst.size() << " pairs)";
    }
  }
}

// Many calls in a row with the same slots in different roles (a slot that was a
// destination in the previous call is only a source now, and so on).
TEST(GpuMoveKv, ConsecutiveCallsDoNotSeeEachOthersMarks) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  Pools p(kVariants[0].json, kVariants[0].layers);
  ASSERT_NE(p.gpu, nullptr);
  p.randomize(rng);
  const Slots s = distinct(rng, 64, p.limit);
  for (int call = 0; call < 200; ++call) {
    Slots dst, src;
    const size_t n = 1 + rng() % 32;
    for (size_t k = 0; k < n; ++k) {
      dst.push_back(s[rng() % s.size()]);
      src.push_back(s[rng() % s.size()]);
    }
    p.move(dst, src);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(p.first_difference(), "");
}

// The three launches hold no host state: a move captured once and replayed gives what
// the same move called again gives (the marks are cleared by each replay itself).
TEST(GpuMoveKv, ACapturedMoveReplaysCorrectly) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(fresh_seed());
  Pools p(kVariants[0].json, kVariants[0].layers);
  ASSERT_NE(p.gpu, nullptr);
  p.randomize(rng);
  // A chain plus a duplicate destination: staged, direct and skipped pairs in one call.
  const Slots s = distinct(rng, 65, p.limit);
  Slots dst(s.begin(), s.end() - 1), src(s.begin() + 1, s.end());
  dst.push_back(s[3]);
  src.push_back(s[40]);
  p.move(dst, src);  // first call: builds the buffer table and the scratch outside the capture
  ASSERT_EQ(p.first_difference(), "");
  DevicePtrs d(dst, src);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(p.stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const kvpool_status st = kvpool_move_kv_async(p.gpu, d.dst(), dst.size(), d.src(), src.size(), p.stream);
  ASSERT_EQ(cudaStreamEndCapture(p.stream, &graph), cudaSuccess);
  ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_EQ(kvpool_move_kv_async(p.cpu, dst.data(), dst.size(), src.data(), src.size(), nullptr), KVPOOL_OK);
    ASSERT_EQ(cudaGraphLaunch(exec, p.stream), cudaSuccess);
    ASSERT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(p.first_difference(), "") << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// A slot out of range is seen on the device: the pool faults and no row moves, not even
// those of the valid pairs before it (the CPU pool rejects the call and moves nothing).
TEST(GpuMoveKv, BadSlotFaultsAndMovesNothing) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  std::mt19937_64 rng(fresh_seed());
  Pools p(kVariants[0].json, kVariants[0].layers);
  ASSERT_NE(p.gpu, nullptr);
  p.randomize(rng);
  for (bool bad_dst : {true, false}) {
    Slots dst = distinct(rng, 20, p.limit), src = distinct(rng, 20, p.limit);
    (bad_dst ? dst : src)[13] = p.limit + 5;
    EXPECT_EQ(kvpool_move_kv_async(p.cpu, dst.data(), dst.size(), src.data(), src.size(), nullptr),
              KVPOOL_ERR_INVALID_ARGUMENT);
    DevicePtrs d(dst, src);
    ASSERT_EQ(kvpool_move_kv_async(p.gpu, d.dst(), dst.size(), d.src(), src.size(), p.stream), KVPOOL_OK);
    EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_ERR_DEVICE_FAULT);
    const std::string msg = kvpool_last_error();
    EXPECT_NE(msg.find("kvpool_move_kv_async"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 13"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(p.limit + 5)), std::string::npos) << msg;
    ASSERT_EQ(kvalloc_clear(p.gpu), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(p.first_difference(), "") << "a faulted move changed KV bytes";
    // The pool works again.
    const Slots ok_dst(dst.begin(), dst.begin() + 5), ok_src(src.begin(), src.begin() + 5);
    p.move(ok_dst, ok_src);
    EXPECT_EQ(p.first_difference(), "");
  }
}

}  // namespace
