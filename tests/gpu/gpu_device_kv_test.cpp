// device.h KV calls on a CUDA pool must store exactly the bytes the CPU pool
// stores for the same call: kvpool_set_kv_async / kvpool_set_mla_kv_async /
// kvpool_get_kv_async / kvpool_move_kv_async, fresh random data and slots
// each run (seed printed), device outputs poisoned before each call.
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

// A device copy of a host array (freed on scope exit).
class DeviceArray {
 public:
  explicit DeviceArray(size_t bytes) : bytes_(bytes) { EXPECT_EQ(cudaMalloc(&p_, bytes == 0 ? 1 : bytes), cudaSuccess); }
  DeviceArray(const void* host, size_t bytes) : DeviceArray(bytes) {
    EXPECT_EQ(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void* get() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }
  void poison() { EXPECT_EQ(cudaMemset(p_, 0x5a, bytes_), cudaSuccess); }
  Bytes download() const {
    Bytes b(bytes_);
    EXPECT_EQ(cudaMemcpy(b.data(), p_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    return b;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

using kvtest::with_device;

uint64_t fresh_seed() {
  const uint64_t s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("seed %llu\n", static_cast<unsigned long long>(s));
  return s;
}

// The bits of one value outside the usual range, in the caller's format: NaN with a
// payload, infinities, the largest and subnormal magnitudes, negative zero, values past
// e4m3's range.
uint32_t special_bits(std::mt19937_64& rng, int32_t dtype) {
  static const uint32_t f32[] = {0x7fc12345u, 0xff800001u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                                 0x00000003u, 0x80400000u, 0x80000000u, 0x4f000000u, 0x3a000000u};
  static const uint32_t f16[] = {0x7e01u, 0xfd55u, 0x7c00u, 0xfc00u, 0x7bffu, 0x0001u, 0x8000u, 0x5f00u};
  if (dtype == KVPOOL_DTYPE_F16) return f16[rng() % (sizeof f16 / sizeof f16[0])];
  const uint32_t u = f32[rng() % (sizeof f32 / sizeof f32[0])];
  return dtype == KVPOOL_DTYPE_BF16 ? u >> 16 : u;
}

// Values every stored dtype represents, plus exact zeros (fp4 all-zero blocks); with
// `specials`, also about one value in 40 from special_bits() and runs of 128 zeros
// (whole nsa blocks).
Bytes random_values(std::mt19937_64& rng, size_t count, int32_t dtype, bool specials = false) {
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  const size_t width = dtype == KVPOOL_DTYPE_F32 ? 4 : 2;
  Bytes b(count * width);
  for (size_t i = 0; i < count; ++i) {
    const float f = rng() % 17 == 0 || (specials && (i / 128) % 11 == 3) ? 0.0f : d(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (width == 4) {
      if (specials && rng() % 40 == 0) u = special_bits(rng, dtype);
      std::memcpy(&b[4 * i], &u, 4);
    } else {  // f16 / bf16 bit patterns from the float (truncation is fine: any pattern is valid input)
      uint16_t h = dtype == KVPOOL_DTYPE_BF16 ? static_cast<uint16_t>(u >> 16)
                                               : static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x3c00u | ((u >> 13) & 0x3ffu));
      if (specials && rng() % 40 == 0) h = static_cast<uint16_t>(special_bits(rng, dtype));
      std::memcpy(&b[2 * i], &h, 2);
    }
  }
  return b;
}

Slots distinct_slots(std::mt19937_64& rng, size_t n, int64_t limit) {
  Slots all(static_cast<size_t>(limit - 1));
  std::iota(all.begin(), all.end(), 1);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(n);
  return all;
}

struct Pools {
  kvpool* cpu = nullptr;
  kvpool* gpu = nullptr;
  cudaStream_t stream = nullptr;
  explicit Pools(const std::string& json) {
    const std::string c = with_device(json, "cpu"), g = with_device(json, "cuda");
    EXPECT_EQ(kvpool_create(c.data(), c.size(), &cpu), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(kvpool_create(g.data(), g.size(), &gpu), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  }
  ~Pools() {
    kvpool_destroy(cpu);
    kvpool_destroy(gpu);
    cudaStreamDestroy(stream);
  }
  void sync() { ASSERT_EQ(kvpool_synchronize(gpu, stream), KVPOOL_OK) << kvpool_last_error(); }
};

struct Case {
  const char* name;
  const char* json;
  int layer;
  bool mla;              // written with set_mla_kv
  size_t k_elems;        // mha: heads * head_dim; mla/nsa: kv_lora_rank
  size_t rope;           // mla/nsa: qk_rope_head_dim
  int32_t src_dtype;     // the caller format written
  float k_scale, v_scale;
  int32_t raw_dtype;     // the stored format as get_kv returns it unconverted
  size_t raw_row_bytes;  // bytes of one stored row (K or the whole mla row)
  bool specials = false;  // inputs include NaN, infinities, extremes and zero blocks
};

const Case kCases[] = {
    {"mha-bf16-raw", R"({"model": {"num_layers": 2, "kv_heads": 8, "head_dim": 128},
      "pool": {"kv_dtype": "bf16", "page_size": 16, "max_total_tokens": 8192, "max_context_len": 256}})",
     1, false, 1024, 0, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, KVPOOL_DTYPE_BF16, 2048},
    {"mha-bf16-from-f32", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 64},
      "pool": {"kv_dtype": "bf16", "page_size": 1, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, false, 128, 0, KVPOOL_DTYPE_F32, 1.0f, 1.0f, KVPOOL_DTYPE_BF16, 256},
    {"mha-fp8-scaled", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 64},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 1, "max_total_tokens": 8192, "max_context_len": 256}})",
     1, false, 128, 0, KVPOOL_DTYPE_F32, 0.37f, 2.5f, KVPOOL_DTYPE_FP8_E4M3, 128},
    {"mha-e5m2-from-f16", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 32},
      "pool": {"kv_dtype": "fp8_e5m2", "page_size": 4, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, false, 64, 0, KVPOOL_DTYPE_F16, 1.0f, 1.0f, KVPOOL_DTYPE_FP8_E5M2, 64},
    // 60-value rows (7 chunks of 8 and 4 single values), stored 60 bytes apart: half the
    // rows off the 8-byte boundary of the vector stores; scaled, with special values.
    {"mha-fp8-odd-rows-scaled", R"({"model": {"num_layers": 2, "kv_heads": 3, "head_dim": 20},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 1, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, false, 60, 0, KVPOOL_DTYPE_F32, 1.5f, 0.5f, KVPOOL_DTYPE_FP8_E4M3, 60, true},
    {"mha-bf16-odd-rows-from-f16", R"({"model": {"num_layers": 2, "kv_heads": 3, "head_dim": 20},
      "pool": {"kv_dtype": "bf16", "page_size": 1, "max_total_tokens": 8192, "max_context_len": 256}})",
     1, false, 60, 0, KVPOOL_DTYPE_F16, 1.0f, 1.0f, KVPOOL_DTYPE_BF16, 120, true},
    // 36 + 6 values: a part shorter than a chunk, stored rows 42 bytes apart.
    {"mla-e5m2-odd-from-bf16", R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 36, "qk_rope_head_dim": 6},
      "pool": {"kv_dtype": "fp8_e5m2", "page_size": 1, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, true, 36, 6, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, KVPOOL_DTYPE_FP8_E5M2, 42, true},
    {"mha-fp4-from-bf16", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 32},
      "pool": {"kv_dtype": "fp4_e2m1", "page_size": 4, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, false, 64, 0, KVPOOL_DTYPE_BF16, 1.5f, 0.75f, KVPOOL_DTYPE_U8, 32},
    {"mla-f16-from-f32", R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 64, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "f16", "page_size": 8, "max_total_tokens": 8192, "max_context_len": 256}})",
     1, true, 64, 16, KVPOOL_DTYPE_F32, 1.0f, 1.0f, KVPOOL_DTYPE_F16, 160},
    {"mla-fp4-from-bf16", R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
      "pool": {"kv_dtype": "fp4_e2m1", "page_size": 16, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, true, 512, 64, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, KVPOOL_DTYPE_U8, 288},
    {"nsa-fp8-packed", R"({"model": {"num_layers": 2, "attention": "nsa", "kv_lora_rank": 128, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, true, 128, 16, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, KVPOOL_DTYPE_U8, 164},
    // DeepSeek-V3.2's row (16-byte aligned rows: the vector stores), from f32 with special values.
    {"nsa-fp8-deepseek-from-f32", R"({"model": {"num_layers": 2, "attention": "nsa", "kv_lora_rank": 512, "qk_rope_head_dim": 64},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": 8192, "max_context_len": 256}})",
     1, true, 512, 64, KVPOOL_DTYPE_F32, 1.0f, 1.0f, KVPOOL_DTYPE_U8, 656, true},
    // 284-byte rows and 266-value caller rows: stored and caller rows off 16-byte boundaries.
    {"nsa-fp8-odd-rope-from-f16", R"({"model": {"num_layers": 2, "attention": "nsa", "kv_lora_rank": 256, "qk_rope_head_dim": 10},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": 8192, "max_context_len": 256}})",
     0, true, 256, 10, KVPOOL_DTYPE_F16, 1.0f, 1.0f, KVPOOL_DTYPE_U8, 284, true},
};

size_t dtype_width(int32_t d) { return d == KVPOOL_DTYPE_F32 ? 4 : 2; }

// Stored rows of `slots` read back unconverted through the host call.
Bytes stored_rows(kvpool* pool, const Case& c, const Slots& slots) {
  const size_t n = slots.size();
  Bytes k(n * c.raw_row_bytes), v(c.mla ? 0 : n * c.raw_row_bytes);
  EXPECT_EQ(kvpool_get_kv(pool, c.layer, slots.data(), n, k.data(), k.size(), c.mla ? nullptr : v.data(), v.size(),
                          c.raw_dtype),
            KVPOOL_OK)
      << c.name << ": " << kvpool_last_error();
  k.insert(k.end(), v.begin(), v.end());
  return k;
}

void write_both(Pools& p, const Case& c, const Slots& slots, std::mt19937_64& rng) {
  const size_t n = slots.size();
  DeviceArray d_slots(slots.data(), n * sizeof(int64_t));
  if (c.mla) {
    const Bytes nope = random_values(rng, n * c.k_elems, c.src_dtype, c.specials),
                rope = random_values(rng, n * c.rope, c.src_dtype, c.specials);
    DeviceArray d_nope(nope.data(), nope.size()), d_rope(rope.data(), rope.size());
    ASSERT_EQ(kvpool_set_mla_kv_async(p.cpu, c.layer, slots.data(), n, nope.data(), nope.size(), rope.data(),
                                      rope.size(), c.src_dtype, nullptr),
              KVPOOL_OK)
        << kvpool_last_error();
    ASSERT_EQ(kvpool_set_mla_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), n, d_nope.get(), nope.size(),
                                      d_rope.get(), rope.size(), c.src_dtype, p.stream),
              KVPOOL_OK)
        << kvpool_last_error();
    p.sync();
    return;
  }
  const Bytes k = random_values(rng, n * c.k_elems, c.src_dtype, c.specials),
              v = random_values(rng, n * c.k_elems, c.src_dtype, c.specials);
  DeviceArray d_k(k.data(), k.size()), d_v(v.data(), v.size());
  ASSERT_EQ(kvpool_set_kv_async(p.cpu, c.layer, slots.data(), n, k.data(), k.size(), v.data(), v.size(), c.src_dtype,
                                c.k_scale, c.v_scale, nullptr),
            KVPOOL_OK)
      << kvpool_last_error();
  ASSERT_EQ(kvpool_set_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), n, d_k.get(), k.size(), d_v.get(), v.size(),
                                c.src_dtype, c.k_scale, c.v_scale, p.stream),
            KVPOOL_OK)
      << kvpool_last_error();
  p.sync();
}

TEST(GpuDeviceKv, WritesReadsAndMovesMatchTheCpuPool) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const uint64_t seed = fresh_seed();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    std::mt19937_64 rng(seed ^ std::hash<std::string>()(c.name));
    Pools p(c.json);
    ASSERT_NE(p.gpu, nullptr);
    for (size_t n : {size_t(1), size_t(37), size_t(3000)}) {
      const Slots slots = distinct_slots(rng, n, 8192);
      write_both(p, c, slots, rng);
      if (HasFatalFailure()) return;
      ASSERT_EQ(stored_rows(p.gpu, c, slots), stored_rows(p.cpu, c, slots)) << "stored bytes differ, n=" << n;

      // Device reads, as stored and converted to every wide format.
      DeviceArray d_slots(slots.data(), n * sizeof(int64_t));
      for (int32_t out : {c.raw_dtype, int32_t(KVPOOL_DTYPE_F32), int32_t(KVPOOL_DTYPE_BF16), int32_t(KVPOOL_DTYPE_F16)}) {
        const bool raw = out == c.raw_dtype;
        const size_t row = raw ? c.raw_row_bytes : (c.k_elems + c.rope) * dtype_width(out);
        const size_t bytes = n * row;
        Bytes hk(bytes), hv(c.mla ? 0 : bytes);
        ASSERT_EQ(kvpool_get_kv_async(p.cpu, c.layer, slots.data(), n, hk.data(), hk.size(),
                                      c.mla ? nullptr : hv.data(), hv.size(), out, nullptr),
                  KVPOOL_OK)
            << kvpool_last_error();
        DeviceArray dk(bytes), dv(c.mla ? 0 : bytes);
        dk.poison();
        dv.poison();
        ASSERT_EQ(kvpool_get_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), n, dk.get(), bytes,
                                      c.mla ? nullptr : dv.get(), c.mla ? 0 : bytes, out, p.stream),
                  KVPOOL_OK)
            << kvpool_last_error();
        p.sync();
        EXPECT_EQ(dk.download(), hk) << "get_kv k, dtype " << out;
        if (!c.mla) {
          EXPECT_EQ(dv.download(), hv) << "get_kv v, dtype " << out;
        }
      }
    }

    // move_kv: a cycle (src and dst overlap) plus fresh destinations.
    const Slots base = distinct_slots(rng, 600, 8192);
    write_both(p, c, base, rng);
    Slots src(base.begin(), base.begin() + 400), dst(base.begin() + 200, base.begin() + 600);
    std::rotate(dst.begin(), dst.begin() + 7, dst.end());
    DeviceArray d_src(src.data(), src.size() * 8), d_dst(dst.data(), dst.size() * 8);
    ASSERT_EQ(kvpool_move_kv_async(p.cpu, dst.data(), dst.size(), src.data(), src.size(), nullptr), KVPOOL_OK)
        << kvpool_last_error();
    ASSERT_EQ(kvpool_move_kv_async(p.gpu, d_dst.as<int64_t>(), dst.size(), d_src.as<int64_t>(), src.size(), p.stream),
              KVPOOL_OK)
        << kvpool_last_error();
    p.sync();
    EXPECT_EQ(stored_rows(p.gpu, c, base), stored_rows(p.cpu, c, base)) << "after move_kv";
  }
}

TEST(GpuDeviceKv, BadSlotFaultsThePoolUntilCleared) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const Case& c = kCases[0];
  Pools p(c.json);
  ASSERT_NE(p.gpu, nullptr);
  const Slots slots = {5, 1ll << 40, 7};
  std::vector<uint16_t> k(3 * c.k_elems, 0x3f80), v(3 * c.k_elems, 0x4000);
  DeviceArray d_slots(slots.data(), 24), d_k(k.data(), k.size() * 2), d_v(v.data(), v.size() * 2);
  // Enqueued fine: only the device can see the slot.
  ASSERT_EQ(kvpool_set_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), 3, d_k.get(), k.size() * 2, d_v.get(),
                                v.size() * 2, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, p.stream),
            KVPOOL_OK);
  EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_ERR_DEVICE_FAULT);
  const std::string msg = kvpool_last_error();
  EXPECT_NE(msg.find("kvpool_set_kv_async"), std::string::npos) << msg;
  EXPECT_NE(msg.find("element 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(1ll << 40)), std::string::npos) << msg;
  // Sticky: the next device call refuses to run.
  EXPECT_EQ(kvpool_get_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), 1, d_k.get(), 2 * c.k_elems, d_v.get(),
                                2 * c.k_elems, KVPOOL_DTYPE_BF16, p.stream),
            KVPOOL_ERR_DEVICE_FAULT);
  ASSERT_EQ(kvalloc_clear(p.gpu), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_OK) << kvpool_last_error();
  const Slots good = {5};
  DeviceArray d_good(good.data(), 8);
  EXPECT_EQ(kvpool_set_kv_async(p.gpu, c.layer, d_good.as<int64_t>(), 1, d_k.get(), 2 * c.k_elems, d_v.get(),
                                2 * c.k_elems, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, p.stream),
            KVPOOL_OK);
  EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_OK) << kvpool_last_error();
}

TEST(GpuDeviceKv, HostVisibleErrorsAreReturnedAndEnqueueNothing) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const Case& c = kCases[0];
  Pools p(c.json);
  ASSERT_NE(p.gpu, nullptr);
  DeviceArray d_slots(8), d_k(2 * c.k_elems), d_v(2 * c.k_elems);
  // Wrong byte count, unknown layer, bad scale, misaligned f32 input, NULL handle.
  EXPECT_EQ(kvpool_set_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), 1, d_k.get(), 2 * c.k_elems - 2, d_v.get(),
                                2 * c.k_elems, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, p.stream),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_set_kv_async(p.gpu, 7, d_slots.as<int64_t>(), 1, d_k.get(), 2 * c.k_elems, d_v.get(),
                                2 * c.k_elems, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, p.stream),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_set_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), 1, d_k.get(), 2 * c.k_elems, d_v.get(),
                                2 * c.k_elems, KVPOOL_DTYPE_BF16, 0.0f, 1.0f, p.stream),
            KVPOOL_ERR_INVALID_ARGUMENT);
  DeviceArray d_f32(4 * c.k_elems + 4);
  EXPECT_EQ(kvpool_set_kv_async(p.gpu, c.layer, d_slots.as<int64_t>(), 1, d_f32.as<uint8_t>() + 2, 4 * c.k_elems,
                                d_f32.get(), 4 * c.k_elems, KVPOOL_DTYPE_F32, 1.0f, 1.0f, p.stream),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_move_kv_async(nullptr, d_slots.as<int64_t>(), 1, d_slots.as<int64_t>(), 1, p.stream),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_OK) << kvpool_last_error();
}

// Mamba states: alloc (zeroing enqueued), fork and batched copies on the device
// must leave exactly the CPU pool's states (conv f32, ssm bf16: 2-byte words).
TEST(GpuDeviceMamba, AllocForkAndCopyMatchTheCpuPool) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const std::string json = R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [6, 3], "ssm_shape": [1, 5, 3], "conv_dtype": "f32",
      "ssm_dtype": "bf16"}}, "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 8,
      "mamba_cache_size": 300, "max_context_len": 32}, "prefix_cache": {"kind": "none"}})";
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  Pools p(json);
  ASSERT_NE(p.gpu, nullptr);
  const size_t conv = 18 * 4, ssm = 15 * 2;  // 30-byte ssm states: the copies move 2-byte words
  auto write_random = [&](int32_t slot, bool both) {
    for (int layer = 0; layer < 3; ++layer) {
      Bytes c(conv), m(ssm);
      for (auto& x : c) x = static_cast<uint8_t>(rng());
      for (auto& x : m) x = static_cast<uint8_t>(rng());
      if (both) {
        ASSERT_EQ(kvpool_mamba_write(p.cpu, layer, slot, c.data(), conv, m.data(), ssm), KVPOOL_OK);
      }
      ASSERT_EQ(kvpool_mamba_write(p.gpu, layer, slot, c.data(), conv, m.data(), ssm), KVPOOL_OK);
    }
  };
  auto states = [&](kvpool* pool, int32_t slot) {
    Bytes all;
    for (int layer = 0; layer < 3; ++layer) {
      Bytes c(conv), m(ssm);
      EXPECT_EQ(kvpool_mamba_read(pool, layer, slot, c.data(), conv, m.data(), ssm), KVPOOL_OK);
      all.insert(all.end(), c.begin(), c.end());
      all.insert(all.end(), m.begin(), m.end());
    }
    return all;
  };
  // 200 slots: more than one launch of inline ids (128 per launch). Dirty them first, free, reallocate.
  std::vector<int32_t> first(200), cpu(200), gpu(200);
  ASSERT_EQ(kvpool_mamba_alloc(p.gpu, first.data(), 200), KVPOOL_OK);
  for (int32_t s : first) write_random(s, false);  // dirty device states only
  ASSERT_EQ(kvpool_mamba_free(p.gpu, first.data(), 200), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_alloc(p.cpu, first.data(), 200), KVPOOL_OK);  // keep the CPU pool's list in step
  ASSERT_EQ(kvpool_mamba_free(p.cpu, first.data(), 200), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_alloc_async(p.cpu, cpu.data(), 200, nullptr), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_alloc_async(p.gpu, gpu.data(), 200, p.stream), KVPOOL_OK) << kvpool_last_error();
  p.sync();
  ASSERT_EQ(gpu, cpu);
  for (int32_t s : {gpu[0], gpu[127], gpu[128], gpu[199]}) EXPECT_EQ(states(p.gpu, s), states(p.cpu, s)) << s;
  for (int i = 0; i < 40; ++i) write_random(gpu[static_cast<size_t>(i)], true);
  int32_t fc = -1, fg = -1;
  ASSERT_EQ(kvpool_mamba_fork_async(p.cpu, gpu[3], &fc, nullptr), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_fork_async(p.gpu, gpu[3], &fg, p.stream), KVPOOL_OK) << kvpool_last_error();
  p.sync();
  ASSERT_EQ(fg, fc);
  EXPECT_EQ(states(p.gpu, fg), states(p.cpu, fc));
  // Batched copy: slots 0..19 -> 20..39 (distinct destinations, no destination is a source).
  std::vector<int32_t> src(gpu.begin(), gpu.begin() + 20), dst(gpu.begin() + 20, gpu.begin() + 40);
  DeviceArray d_src(src.data(), src.size() * 4), d_dst(dst.data(), dst.size() * 4);
  ASSERT_EQ(kvpool_mamba_copy_async(p.cpu, src.data(), 20, dst.data(), 20, nullptr), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_copy_async(p.gpu, d_src.as<int32_t>(), 20, d_dst.as<int32_t>(), 20, p.stream), KVPOOL_OK)
      << kvpool_last_error();
  p.sync();
  for (int32_t s : dst) EXPECT_EQ(states(p.gpu, s), states(p.cpu, s)) << s;
  // A slot out of range is found on the device: the pool faults until cleared.
  const std::vector<int32_t> bad = {gpu[0], 301};
  DeviceArray d_bad(bad.data(), 8);
  ASSERT_EQ(kvpool_mamba_copy_async(p.gpu, d_src.as<int32_t>(), 2, d_bad.as<int32_t>(), 2, p.stream), KVPOOL_OK);
  EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_ERR_DEVICE_FAULT);
  EXPECT_NE(std::string(kvpool_last_error()).find("kvpool_mamba_copy_async"), std::string::npos) << kvpool_last_error();
  ASSERT_EQ(kvalloc_clear(p.gpu), KVPOOL_OK);
  EXPECT_EQ(kvpool_synchronize(p.gpu, p.stream), KVPOOL_OK) << kvpool_last_error();
}

}  // namespace
