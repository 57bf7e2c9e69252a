// The CUDA backend must give the CPU backend's results exactly: the same
// workload runs on a cpu pool and a cuda pool built from the same config
// (fresh random data each run, outputs poisoned before each call) and every
// output byte is compared.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_env.hpp"

namespace {

using Bytes = std::vector<uint8_t>;
using Slots = std::vector<int64_t>;

using kvtest::with_device;

// Everything the workload observed, in order.
struct Trace {
  std::vector<Bytes> outputs;
  void add(const void* p, size_t n) { outputs.emplace_back(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); }
  void add(const Slots& s) { add(s.data(), s.size() * sizeof(int64_t)); }
};

Bytes random_bytes(std::mt19937_64& rng, size_t n, bool floats) {
  Bytes b(n);
  if (floats) {  // finite values in a range every dtype represents
    std::uniform_real_distribution<float> d(-3.0f, 3.0f);
    for (size_t i = 0; i + 4 <= n; i += 4) {
      const float f = d(rng);
      std::memcpy(&b[i], &f, 4);
    }
  } else {
    for (auto& x : b) x = static_cast<uint8_t>(rng());
  }
  return b;
}

struct Variant {
  const char* name;
  std::string json;
  int layer;       // an attention layer of the pool
  bool mla;        // rows written with kvpool_set_mla_kv
  size_t k_elems;  // per token (mha: heads * head_dim, mla: lora, nsa: lora)
  size_t rope;     // mla/nsa rope width
  bool host_copy;  // kvpool_copy_to_host supported
  bool move;       // kvpool_move_kv supported
};

void run_workload(kvpool* pool, const Variant& v, uint64_t seed, Trace* t) {
  std::mt19937_64 rng(seed);
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  ASSERT_EQ(kvpool_get_plan(pool, &plan), KVPOOL_OK);
  // Allocator and request table.
  int32_t rows[3];
  ASSERT_EQ(kvreq_alloc(pool, rows, 3), KVPOOL_OK) << kvpool_last_error();
  t->add(rows, sizeof(rows));
  const size_t n = 3 * plan.page_size;
  Slots slots(n, -1);
  int32_t kind = 0;
  ASSERT_EQ(kvalloc_get_kind(pool, &kind), KVPOOL_OK);
  ASSERT_EQ(kvalloc_alloc(pool, slots.data(), n), KVPOOL_OK) << kvpool_last_error();
  t->add(slots);
  ASSERT_EQ(kvreq_write(pool, rows[1], 2, slots.data(), n), KVPOOL_OK) << kvpool_last_error();
  Slots back(n, -7);
  ASSERT_EQ(kvreq_read(pool, rows[1], 2, back.data(), n), KVPOOL_OK) << kvpool_last_error();
  t->add(back);
  int64_t pre = 2 + static_cast<int64_t>(n), last = -7;
  ASSERT_EQ(kvreq_last_loc(pool, &rows[1], 1, &pre, 1, &last, 1), KVPOOL_OK);
  t->add(&last, sizeof(last));

  // KV data: write random rows, read them back in every output dtype.
  const size_t row_values = v.mla ? v.k_elems + v.rope : v.k_elems;
  if (v.mla) {
    const Bytes nope = random_bytes(rng, n * v.k_elems * 4, true), rope = random_bytes(rng, n * v.rope * 4, true);
    ASSERT_EQ(kvpool_set_mla_kv(pool, v.layer, slots.data(), n, nope.data(), nope.size(), rope.data(), rope.size(),
                                KVPOOL_DTYPE_F32), KVPOOL_OK) << kvpool_last_error();
  } else {
    const Bytes k = random_bytes(rng, n * v.k_elems * 4, true), val = random_bytes(rng, n * v.k_elems * 4, true);
    ASSERT_EQ(kvpool_set_kv(pool, v.layer, slots.data(), n, k.data(), k.size(), val.data(), val.size(),
                            KVPOOL_DTYPE_F32, 1.5f, 0.75f), KVPOOL_OK) << kvpool_last_error();
  }
  for (int32_t dtype : {KVPOOL_DTYPE_F32, KVPOOL_DTYPE_BF16}) {
    const size_t elem = dtype == KVPOOL_DTYPE_F32 ? 4 : 2;
    Bytes k(n * row_values * elem, 0xAB), val(v.mla ? 0 : n * row_values * elem, 0xAB);
    ASSERT_EQ(kvpool_get_kv(pool, v.layer, slots.data(), n, k.data(), k.size(), v.mla ? nullptr : val.data(),
                            val.size(), dtype), KVPOOL_OK) << kvpool_last_error();
    t->add(k.data(), k.size());
    t->add(val.data(), val.size());
  }
  if (v.move) {  // a cycle: every slot moves onto the next one
    Slots dst(slots.begin() + 1, slots.end());
    dst.push_back(slots.front());
    ASSERT_EQ(kvpool_move_kv(pool, dst.data(), dst.size(), slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
    Bytes k(n * row_values * 4, 0xAB), val(v.mla ? 0 : n * row_values * 4, 0xAB);
    ASSERT_EQ(kvpool_get_kv(pool, v.layer, slots.data(), n, k.data(), k.size(), v.mla ? nullptr : val.data(),
                            val.size(), KVPOOL_DTYPE_F32), KVPOOL_OK);
    t->add(k.data(), k.size());
    t->add(val.data(), val.size());
  }
  if (v.host_copy) {
    size_t bytes = 0;
    ASSERT_EQ(kvpool_host_copy_bytes(pool, n, &bytes), KVPOOL_OK);
    Bytes host(bytes, 0xAB);
    ASSERT_EQ(kvpool_copy_to_host(pool, slots.data(), n, host.data(), host.size()), KVPOOL_OK) << kvpool_last_error();
    t->add(host.data(), host.size());
    Slots other(n);
    ASSERT_EQ(kvalloc_alloc(pool, other.data(), n), KVPOOL_OK);
    ASSERT_EQ(kvpool_load_from_host(pool, other.data(), n, host.data(), host.size()), KVPOOL_OK) << kvpool_last_error();
    Bytes again(bytes, 0xCD);
    ASSERT_EQ(kvpool_copy_to_host(pool, other.data(), n, again.data(), again.size()), KVPOOL_OK);
    EXPECT_EQ(again, host);
  }
  // The padding page is never written by any of the above.
  char report[1024];
  EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << report;
}

const Variant kVariants[] = {
    {"mha-bf16-page16", R"({"model": {"num_layers": 2, "kv_heads": 4, "head_dim": 32},
      "pool": {"kv_dtype": "bf16", "page_size": 16, "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256}})",
     0, false, 128, 0, true, true},
    {"mha-fp8-page1", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 64},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 1, "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256}})",
     1, false, 128, 0, true, true},
    {"mha-fp4-page4", R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 32},
      "pool": {"kv_dtype": "fp4_e2m1", "page_size": 4, "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256}})",
     0, false, 64, 0, true, true},
    {"mla-f16", R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 64, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "f16", "page_size": 8, "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256}})",
     1, true, 64, 16, true, true},
    {"nsa-fp8", R"({"model": {"num_layers": 2, "attention": "nsa", "kv_lora_rank": 128, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256}})",
     0, true, 128, 16, false, true},
    {"swa-f32", R"({"model": {"num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 16, "sliding_window": 8,
      "swa_layer_pattern": "SF"}, "pool": {"kv_dtype": "f32", "max_total_tokens": 4096, "max_running_requests": 8, "max_context_len": 256}})",
     0, false, 32, 0, false, false},
};

class GpuParity : public ::testing::TestWithParam<Variant> {};

// KVPOOL_PARITY_DEVICE=cpu runs the workload twice on the CPU (a check of the test itself).
std::string second_device() {
  const char* d = std::getenv("KVPOOL_PARITY_DEVICE");
  return d != nullptr ? d : "cuda:0";
}

TEST_P(GpuParity, CudaMatchesCpuByteForByte) {
  if (second_device() != "cpu") KVPOOL_REQUIRE_CUDA_DEVICE();
  const Variant& v = GetParam();
  const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE(std::string(v.name) + " seed " + std::to_string(seed));
  Trace cpu_trace, gpu_trace;
  const std::string other = second_device();
  for (auto [device, trace] : {std::pair<std::string, Trace*>{"cpu", &cpu_trace}, {other, &gpu_trace}}) {
    const std::string json = with_device(v.json, device);
    kvpool* pool = nullptr;
    ASSERT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_OK) << kvpool_last_error();
    EXPECT_STREQ(kvpool_backend(pool), device == "cpu" ? "cpu" : "cuda");
    run_workload(pool, v, seed, trace);
    kvpool_destroy(pool);
  }
  ASSERT_EQ(cpu_trace.outputs.size(), gpu_trace.outputs.size());
  for (size_t i = 0; i < cpu_trace.outputs.size(); ++i) EXPECT_EQ(cpu_trace.outputs[i], gpu_trace.outputs[i]) << "output " << i;
}

INSTANTIATE_TEST_SUITE_P(Variants, GpuParity, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           std::string name = info.param.name;
                           for (char& c : name) c = (c == '-') ? '_' : c;
                           return name;
                         });

// kvpool_mamba_write / copy / alloc (zeroed) / read on a CPU pool and a device pool: the
// same bytes in every mamba layer, and the slots beside the copied and zeroed ones untouched.
// `conv` and `ssm` are the model's mamba shapes, `conv_bytes` / `ssm_bytes` a slot's row.
void expect_mamba_states_match(const std::string& conv, const std::string& ssm, const char* conv_dtype,
                               size_t conv_bytes, size_t ssm_bytes) {
  const std::string base = R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": )" + conv + R"(, "ssm_shape": )" + ssm +
                           R"(, "conv_dtype": ")" + conv_dtype + R"(", "ssm_dtype": "f32"}},
      "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 4, "mamba_cache_size": 8,
               "max_context_len": 32}, "prefix_cache": {"kind": "none"}})";
  constexpr int32_t kMambaLayers[] = {0, 1, 2};
  std::vector<Bytes> results[2];
  std::mt19937_64 seed_rng(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const uint64_t seed = seed_rng();
  for (int d = 0; d < 2; ++d) {
    std::mt19937_64 rng(seed);
    const std::string json = with_device(base, d == 0 ? "cpu" : second_device());
    kvpool* pool = nullptr;
    ASSERT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_OK) << kvpool_last_error();
    int32_t s[8];
    ASSERT_EQ(kvpool_mamba_alloc(pool, s, 8), KVPOOL_OK);
    std::vector<Bytes> written;
    for (int32_t slot : {s[2], s[4], s[6]}) {
      for (int32_t layer : kMambaLayers) {
        const Bytes c = random_bytes(rng, conv_bytes, true), m = random_bytes(rng, ssm_bytes, true);
        ASSERT_EQ(kvpool_mamba_write(pool, layer, slot, c.data(), c.size(), m.data(), m.size()), KVPOOL_OK)
            << kvpool_last_error();
        if (slot == s[2]) written.insert(written.end(), {c, m});
      }
    }
    ASSERT_EQ(kvpool_mamba_copy(pool, s[2], s[5]), KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(kvpool_mamba_free(pool, &s[2], 1), KVPOOL_OK);
    int32_t again = 0;
    ASSERT_EQ(kvpool_mamba_alloc(pool, &again, 1), KVPOOL_OK);  // zeroed on the device
    ASSERT_EQ(again, s[2]) << "the freed slot is reused";
    for (int32_t slot : {s[5], again, s[4], s[6]}) {
      for (int32_t layer : kMambaLayers) {
        Bytes c(conv_bytes, 0xAB), m(ssm_bytes, 0xAB);
        ASSERT_EQ(kvpool_mamba_read(pool, layer, slot, c.data(), c.size(), m.data(), m.size()), KVPOOL_OK);
        results[d].push_back(c);
        results[d].push_back(m);
      }
    }
    for (size_t i = 0; i < written.size(); ++i) EXPECT_EQ(results[d][i], written[i]) << "copied row " << i;
    for (size_t i = 0; i < written.size(); ++i) {
      EXPECT_EQ(results[d][written.size() + i], Bytes(results[d][written.size() + i].size(), 0)) << "zeroed row " << i;
    }
    kvpool_destroy(pool);
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(GpuParityMamba, StatesOnTheDeviceMatch) {
  if (second_device() != "cpu") KVPOOL_REQUIRE_CUDA_DEVICE();
  expect_mamba_states_match("[4, 3]", "[2, 4, 4]", "f32", 48, 128);
}

// Rows longer than one block's piece of a row copy (32 KiB on CUDA), and rows that are
// not a multiple of 16 bytes (copied byte by byte).
TEST(GpuParityMamba, LargeAndOddStatesOnTheDeviceMatch) {
  if (second_device() != "cpu") KVPOOL_REQUIRE_CUDA_DEVICE();
  expect_mamba_states_match("[7, 3]", "[3, 100, 100]", "bf16", 42, 120000);
}

}  // namespace
