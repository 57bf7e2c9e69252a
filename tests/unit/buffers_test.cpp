// Physical KV buffers through the public API (buffers.h): sizes, descriptors,
// set/get round trips for every variant and dtype, the variant-specific rows
// (mla value view, nsa packed rows and indexer, double_sparse labels, swa
// translation, hybrid layers), move_kv and host copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "buffers_test_util.hpp"

namespace {

using kvbt::as_bytes;
using kvbt::config;
using kvbt::create;
using kvbt::describe;
using kvbt::exact_values;
using kvbt::Pool;

const char* const kAllDtypes[] = {"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"};

const std::string kPool256 =
    R"("kv_dtype": "f32", "page_size": 4, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)";

std::string swa_config(const std::string& dtype = "f32") {
  return config(R"("num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 16, "sliding_window": 8,
                   "swa_layer_pattern": "SF")",
                R"("kv_dtype": ")" + dtype +
                    R"(", "page_size": 1, "max_total_tokens": 64, "max_running_requests": 4, "max_context_len": 64)");
}

std::string hybrid_config(const std::string& extra_pool = "") {
  return config(R"("num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 16,
                   "full_attention_layers": [1, 3],
                   "mamba": {"conv_shape": [8, 3], "ssm_shape": [2, 4, 4], "conv_dtype": "bf16", "ssm_dtype": "f32"})",
                R"("kv_dtype": "f32", "page_size": 1, "max_total_tokens": 256, "max_running_requests": 4,
                   "max_context_len": 64, "mamba_cache_size": 24)" +
                    extra_pool);
}

std::string double_sparse_config(const std::string& dtype = "f16") {
  return config(R"("num_layers": 2, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16, "heavy_channels": 4)",
                R"("kv_dtype": ")" + dtype +
                    R"(", "page_size": 1, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)");
}

size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "f32") return 4;
  if (dtype == "f16" || dtype == "bf16") return 2;
  return 1;
}

int32_t public_dtype(const std::string& dtype) {
  if (dtype == "f32") return KVPOOL_DTYPE_F32;
  if (dtype == "f16") return KVPOOL_DTYPE_F16;
  if (dtype == "bf16") return KVPOOL_DTYPE_BF16;
  if (dtype == "fp8_e4m3") return KVPOOL_DTYPE_FP8_E4M3;
  if (dtype == "fp8_e5m2") return KVPOOL_DTYPE_FP8_E5M2;
  return KVPOOL_DTYPE_FP4_E2M1;
}

std::vector<float> get_f32(const kvpool* p, int layer, const std::vector<int64_t>& slots, size_t row, bool with_v,
                           std::vector<float>* v_out = nullptr) {
  std::vector<float> k(slots.size() * row), v(with_v ? slots.size() * row : 0);
  EXPECT_EQ(kvpool_get_kv(p, layer, slots.data(), slots.size(), k.data(), k.size() * 4, with_v ? v.data() : nullptr,
                          v.size() * 4, KVPOOL_DTYPE_F32),
            KVPOOL_OK)
      << kvpool_last_error();
  if (v_out != nullptr) *v_out = v;
  return k;
}

// ---- sizes ----

TEST(Buffers, BytesEqualThePlanForEveryVariant) {
  std::vector<std::string> configs;
  for (const char* d : kAllDtypes) {
    configs.push_back(kvbt::mha(d));
    configs.push_back(kvbt::mla(d));
  }
  for (const char* d : {"f32", "bf16", "fp8_e4m3"}) configs.push_back(kvbt::nsa(d));
  for (const char* d : {"f32", "f16", "bf16"}) configs.push_back(double_sparse_config(d));
  configs.push_back(config(R"("num_layers": 3, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16,
                              "heavy_channels": 4)", kPool256));  // page_size 4: labels stay size + 1
  configs.push_back(swa_config());
  configs.push_back(swa_config("fp8_e5m2"));
  configs.push_back(hybrid_config());
  configs.push_back(config(R"("num_layers": 6, "kv_heads": 4, "head_dim": 8)",
                           kPool256 + R"(})" + R"(, "parallel": {"tp_size": 2, "tp_rank": 1, "start_layer": 2,
                              "end_layer": 4)"));
  for (const std::string& json : configs) {
    SCOPED_TRACE(json);
    Pool pool = create(json);
    ASSERT_NE(pool, nullptr);
    const kvpool_plan_info plan = kvbt::plan_of(pool.get());
    kvpool_stats stats = KVPOOL_STATS_INIT;
    ASSERT_EQ(kvpool_get_stats(pool.get(), &stats), KVPOOL_OK);
    EXPECT_EQ(stats.kv_bytes, plan.kv_memory_bytes);
    uint64_t described = 0;
    for (const kvpool_buffer& b : kvbt::all_buffers(pool.get(), 8)) described += b.bytes;
    EXPECT_EQ(described, plan.kv_memory_bytes) << "the descriptors cover exactly the KV memory";
  }
}

TEST(Buffers, NewBuffersAreZero) {
  Pool pool = create(kvbt::mha("bf16"));
  for (uint8_t b : kvbt::snapshot(pool.get(), 4)) ASSERT_EQ(b, 0);
}

// ---- descriptors ----

void expect_desc(const kvpool_buffer& b, int32_t dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                 uint64_t bytes) {
  EXPECT_EQ(b.struct_size, sizeof(kvpool_buffer));
  EXPECT_EQ(b.dtype, dtype);
  EXPECT_NE(b.data, nullptr);
  EXPECT_EQ(b.device_type, KVPOOL_DEVICE_CPU);
  EXPECT_EQ(b.device_id, 0);
  EXPECT_EQ(b.reserved, 0);
  ASSERT_EQ(b.ndim, static_cast<int32_t>(shape.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    EXPECT_EQ(b.shape[d], shape[d]) << "dim " << d;
    EXPECT_EQ(b.strides[d], strides[d]) << "dim " << d;
  }
  EXPECT_EQ(b.bytes, bytes);
}

TEST(Buffers, MhaDescriptors) {
  Pool bf16 = create(kvbt::mha("bf16"));
  expect_desc(describe(bf16.get(), KVPOOL_BUFFER_K, 0), KVPOOL_DTYPE_BF16, {260, 2, 16}, {32, 16, 1}, 260 * 64);
  expect_desc(describe(bf16.get(), KVPOOL_BUFFER_V, 3), KVPOOL_DTYPE_BF16, {260, 2, 16}, {32, 16, 1}, 260 * 64);
  EXPECT_NE(describe(bf16.get(), KVPOOL_BUFFER_K, 0).data, describe(bf16.get(), KVPOOL_BUFFER_V, 0).data);
  EXPECT_NE(describe(bf16.get(), KVPOOL_BUFFER_K, 0).data, describe(bf16.get(), KVPOOL_BUFFER_K, 1).data);

  Pool e5m2 = create(kvbt::mha("fp8_e5m2"));
  expect_desc(describe(e5m2.get(), KVPOOL_BUFFER_K, 1), KVPOOL_DTYPE_FP8_E5M2, {260, 2, 16}, {32, 16, 1}, 260 * 32);

  Pool fp4 = create(kvbt::mha("fp4_e2m1"));
  expect_desc(describe(fp4.get(), KVPOOL_BUFFER_K, 0), KVPOOL_DTYPE_U8, {260, 2, 8}, {16, 8, 1}, 260 * 16);
  expect_desc(describe(fp4.get(), KVPOOL_BUFFER_V, 0), KVPOOL_DTYPE_U8, {260, 2, 8}, {16, 8, 1}, 260 * 16);
  expect_desc(describe(fp4.get(), KVPOOL_BUFFER_K_SCALE, 0), KVPOOL_DTYPE_FP8_E4M3, {260, 2}, {2, 1}, 260 * 2);
  expect_desc(describe(fp4.get(), KVPOOL_BUFFER_V_SCALE, 2), KVPOOL_DTYPE_FP8_E4M3, {260, 2}, {2, 1}, 260 * 2);

  // struct_size is the caller's; a larger struct is fine and keeps its value.
  kvpool_buffer big[2];
  std::memset(big, 0, sizeof big);
  big[0].struct_size = sizeof(kvpool_buffer) + 16;
  ASSERT_EQ(kvpool_get_buffer(bf16.get(), KVPOOL_BUFFER_K, 0, big), KVPOOL_OK);
  EXPECT_EQ(big[0].struct_size, sizeof(kvpool_buffer) + 16);
  EXPECT_EQ(big[0].shape[0], 260);
}

TEST(Buffers, InapplicableKindsAreUnsupported) {
  Pool mha = create(kvbt::mha("f16"));
  kvpool_buffer b = KVPOOL_BUFFER_INIT;
  for (int32_t kind : std::vector<int32_t>{KVPOOL_BUFFER_K_SCALE, KVPOOL_BUFFER_V_SCALE, KVPOOL_BUFFER_INDEXER, KVPOOL_BUFFER_LABEL,
                       KVPOOL_BUFFER_MAMBA_CONV, KVPOOL_BUFFER_MAMBA_SSM, KVPOOL_BUFFER_SWA_MAPPING,
                       KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM, KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV, 12, 99, -1}) {
    EXPECT_EQ(kvpool_get_buffer(mha.get(), kind, 0, &b), KVPOOL_ERR_UNSUPPORTED) << kind;
  }
  EXPECT_EQ(kvpool_get_buffer(mha.get(), KVPOOL_BUFFER_K, 4, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_buffer(mha.get(), KVPOOL_BUFFER_V, -1, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  // The request table ignores the layer.
  const kvpool_plan_info plan = kvbt::plan_of(mha.get());
  b = describe(mha.get(), KVPOOL_BUFFER_REQ_TABLE, -7);
  expect_desc(b, KVPOOL_DTYPE_I32, {plan.req_rows, 64}, {64, 1}, uint64_t(plan.req_rows) * 64 * 4);
  EXPECT_EQ(b.bytes, plan.req_table_bytes);
}

TEST(Buffers, PipelineStageAndTensorParallelShapes) {
  Pool pool = create(config(R"("num_layers": 6, "kv_heads": 4, "head_dim": 8)",
                            kPool256 + R"(}, "parallel": {"tp_size": 2, "tp_rank": 1, "start_layer": 2,
                                          "end_layer": 4)"));
  kvpool_buffer b = KVPOOL_BUFFER_INIT;
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_K, 1, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("not held"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_K, 5, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  for (int layer = 2; layer <= 4; ++layer) {
    expect_desc(describe(pool.get(), KVPOOL_BUFFER_K, layer), KVPOOL_DTYPE_F32, {260, 2, 8}, {16, 8, 1}, 260 * 64);
  }
  // Global layer ids address the rows.
  const std::vector<int64_t> slots = {1, 2};
  const std::vector<float> k = exact_values(32, 1), v = exact_values(32, 2);
  ASSERT_EQ(kvpool_set_kv(pool.get(), 4, slots.data(), 2, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_OK);
  const kvpool_buffer k4 = describe(pool.get(), KVPOOL_BUFFER_K, 4);
  EXPECT_EQ(kvbt::row_bytes(k4, 1, 128), as_bytes(k));
  std::vector<float> zero(32, 0.0f);
  EXPECT_EQ(get_f32(pool.get(), 2, slots, 16, true), zero);
  EXPECT_EQ(kvpool_set_kv(pool.get(), 1, slots.data(), 2, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_ERR_INVALID_ARGUMENT);
}

// ---- round trips ----

TEST(Buffers, MhaRoundTripEveryDtype) {
  for (const char* dtype : kAllDtypes) {
    SCOPED_TRACE(dtype);
    Pool pool = create(kvbt::mha(dtype));
    const size_t row = 32;
    const std::vector<int64_t> slots = {4, 9, 100, 259};  // 259: the last row (size + page_size - 1)
    const size_t n = slots.size();
    for (int layer = 0; layer < 4; ++layer) {
      const std::vector<float> k = exact_values(n * row, 10 + layer), v = exact_values(n * row, 20 + layer);
      ASSERT_EQ(kvpool_set_kv(pool.get(), layer, slots.data(), n, k.data(), k.size() * 4, v.data(), v.size() * 4,
                              KVPOOL_DTYPE_F32, 1.0f, 1.0f),
                KVPOOL_OK)
          << kvpool_last_error();
    }
    for (int layer = 0; layer < 4; ++layer) {
      std::vector<float> v;
      const std::vector<float> k = get_f32(pool.get(), layer, slots, row, true, &v);
      EXPECT_EQ(k, exact_values(n * row, 10 + layer));
      EXPECT_EQ(v, exact_values(n * row, 20 + layer));
      // bf16 out: the exact values' upper halves.
      std::vector<uint16_t> kb(n * row), vb(n * row);
      ASSERT_EQ(kvpool_get_kv(pool.get(), layer, slots.data(), n, kb.data(), kb.size() * 2, vb.data(), vb.size() * 2,
                              KVPOOL_DTYPE_BF16),
                KVPOOL_OK);
      EXPECT_EQ(kb, kvbt::to_bf16(exact_values(n * row, 10 + layer)));
    }
    // bf16 input at other slots.
    const std::vector<int64_t> other = {5, 6};
    const std::vector<float> k2 = exact_values(2 * row, 77), v2 = exact_values(2 * row, 78);
    const std::vector<uint16_t> k2b = kvbt::to_bf16(k2), v2b = kvbt::to_bf16(v2);
    ASSERT_EQ(kvpool_set_kv(pool.get(), 2, other.data(), 2, k2b.data(), k2b.size() * 2, v2b.data(), v2b.size() * 2,
                            KVPOOL_DTYPE_BF16, 1.0f, 1.0f),
              KVPOOL_OK);
    std::vector<float> got_v;
    EXPECT_EQ(get_f32(pool.get(), 2, other, row, true, &got_v), k2);
    EXPECT_EQ(got_v, v2);
    // Stored bytes copied out and back in unchanged (fp4 only reads: its scales live apart).
    const std::string d = dtype;
    const size_t stored = d == "fp4_e2m1" ? row / 2 : row * dtype_bytes(d);
    std::vector<uint8_t> kraw(n * stored), vraw(n * stored);
    ASSERT_EQ(kvpool_get_kv(pool.get(), 1, slots.data(), n, kraw.data(), kraw.size(), vraw.data(), vraw.size(),
                            public_dtype(d)),
              KVPOOL_OK)
        << kvpool_last_error();
    const kvpool_buffer kd = describe(pool.get(), KVPOOL_BUFFER_K, 1);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(kvbt::row_bytes(kd, slots[i], stored),
                std::vector<uint8_t>(kraw.begin() + i * stored, kraw.begin() + (i + 1) * stored));
    }
    if (d != "fp4_e2m1") {
      const std::vector<int64_t> copy_to = {200, 201, 202, 203};
      ASSERT_EQ(kvpool_set_kv(pool.get(), 3, copy_to.data(), n, kraw.data(), kraw.size(), vraw.data(), vraw.size(),
                              public_dtype(d), 1.0f, 1.0f),
                KVPOOL_OK);
      std::vector<float> v3;
      EXPECT_EQ(get_f32(pool.get(), 3, copy_to, row, true, &v3), exact_values(n * row, 11));
      EXPECT_EQ(v3, exact_values(n * row, 21));
    }
  }
}

TEST(Buffers, F16InputAndOutput) {
  Pool pool = create(kvbt::mha("fp8_e4m3"));
  const std::vector<int64_t> slots = {8};
  // 1.5, -2, 0.25 ... as f16 bits.
  std::vector<uint16_t> k(32, 0x3e00), v(32, 0xc000);  // 1.5, -2.0
  k[1] = 0x3400;                                        // 0.25
  ASSERT_EQ(kvpool_set_kv(pool.get(), 0, slots.data(), 1, k.data(), 64, v.data(), 64, KVPOOL_DTYPE_F16, 1, 1),
            KVPOOL_OK);
  std::vector<uint16_t> k16(32), v16(32);
  ASSERT_EQ(kvpool_get_kv(pool.get(), 0, slots.data(), 1, k16.data(), 64, v16.data(), 64, KVPOOL_DTYPE_F16),
            KVPOOL_OK);
  EXPECT_EQ(k16, k);
  EXPECT_EQ(v16, v);
  std::vector<uint8_t> kraw(32), vraw(32);
  ASSERT_EQ(kvpool_get_kv(pool.get(), 0, slots.data(), 1, kraw.data(), 32, vraw.data(), 32, KVPOOL_DTYPE_FP8_E4M3),
            KVPOOL_OK);
  EXPECT_EQ(kraw[0], 0x3c);  // 1.5
  EXPECT_EQ(kraw[1], 0x28);  // 0.25
  EXPECT_EQ(vraw[0], 0xc0);  // -2.0
}

TEST(Buffers, ScalesDivideOnlyWhenTheDtypeChanges) {
  const std::vector<int64_t> slot = {3};
  std::vector<float> k(32, 2.0f), v(32, 2.0f);
  {
    Pool pool = create(kvbt::mha("fp8_e4m3"));
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, slot.data(), 1, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, 2.0f, 4.0f),
              KVPOOL_OK);
    std::vector<uint8_t> kr(32), vr(32);
    ASSERT_EQ(kvpool_get_kv(pool.get(), 0, slot.data(), 1, kr.data(), 32, vr.data(), 32, KVPOOL_DTYPE_FP8_E4M3),
              KVPOOL_OK);
    EXPECT_EQ(kr, std::vector<uint8_t>(32, 0x38));  // 2 / 2 = 1.0
    EXPECT_EQ(vr, std::vector<uint8_t>(32, 0x30));  // 2 / 4 = 0.5
    // get_kv does not multiply back.
    std::vector<float> back_v;
    EXPECT_EQ(get_f32(pool.get(), 0, slot, 32, true, &back_v), std::vector<float>(32, 1.0f));
    EXPECT_EQ(back_v, std::vector<float>(32, 0.5f));
  }
  {
    Pool pool = create(kvbt::mha("f32"));
    // Same dtype: bytes copied, the scale is not applied.
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, slot.data(), 1, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, 2.0f, 4.0f),
              KVPOOL_OK);
    std::vector<float> back_v;
    EXPECT_EQ(get_f32(pool.get(), 0, slot, 32, true, &back_v), k);
    EXPECT_EQ(back_v, v);
    // Another source dtype: divided, then cast.
    const std::vector<uint16_t> kb(32, 0x4000), vb(32, 0x4000);  // bf16 2.0
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, slot.data(), 1, kb.data(), 64, vb.data(), 64, KVPOOL_DTYPE_BF16, 2.0f, 4.0f),
              KVPOOL_OK);
    EXPECT_EQ(get_f32(pool.get(), 0, slot, 32, true, &back_v), std::vector<float>(32, 1.0f));
    EXPECT_EQ(back_v, std::vector<float>(32, 0.5f));
  }
  {
    Pool pool = create(kvbt::mha("fp4_e2m1"));
    // fp4 divides before the block quantisation: 12 / 2 = 6 -> scale 1, code 7.
    std::vector<float> k4(32, 12.0f), v4(32, 3.0f);
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, slot.data(), 1, k4.data(), 128, v4.data(), 128, KVPOOL_DTYPE_F32, 2.0f, 1.0f),
              KVPOOL_OK);
    EXPECT_EQ(kvbt::row_bytes(describe(pool.get(), KVPOOL_BUFFER_K_SCALE, 0), 3, 2), std::vector<uint8_t>(2, 0x38));
    EXPECT_EQ(kvbt::row_bytes(describe(pool.get(), KVPOOL_BUFFER_K, 0), 3, 16), std::vector<uint8_t>(16, 0x77));
    std::vector<float> back_v;
    EXPECT_EQ(get_f32(pool.get(), 0, slot, 32, true, &back_v), std::vector<float>(32, 6.0f));
    EXPECT_EQ(back_v, v4);
  }
}

TEST(Buffers, RepeatedSlotsKeepTheLastWrite) {
  for (const char* dtype : {"f32", "fp8_e5m2"}) {  // a copy and a conversion
    Pool pool = create(kvbt::mha(dtype));
    const std::vector<int64_t> slots = {5, 6, 5};
    const std::vector<float> k = exact_values(3 * 32, 1);
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, slots.data(), 3, k.data(), k.size() * 4, k.data(), k.size() * 4,
                            KVPOOL_DTYPE_F32, 1, 1),
              KVPOOL_OK);
    const std::vector<float> got = get_f32(pool.get(), 0, {5}, 32, true);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), k.begin() + 64)) << dtype;
  }
}

// ---- mla ----

TEST(Buffers, MlaRoundTripEveryDtypeAndValueView) {
  for (const char* dtype : kAllDtypes) {
    SCOPED_TRACE(dtype);
    const std::string d = dtype;
    Pool pool = create(kvbt::mla(dtype));
    const size_t lora = 32, rope = 16, row = lora + rope;
    // Whole rows through set_kv.
    const std::vector<int64_t> a = {1, 2, 259};
    const std::vector<float> rows = exact_values(a.size() * row, 5);
    ASSERT_EQ(kvpool_set_kv(pool.get(), 1, a.data(), a.size(), rows.data(), rows.size() * 4, nullptr, 0,
                            KVPOOL_DTYPE_F32, 1.0f, 1.0f),
              KVPOOL_OK)
        << kvpool_last_error();
    EXPECT_EQ(get_f32(pool.get(), 1, a, row, false), rows);
    // nope + rope through set_mla_kv (f32 and bf16 inputs).
    const std::vector<int64_t> b = {10, 11};
    const std::vector<float> whole = exact_values(b.size() * row, 6);
    std::vector<float> nope, rp;
    for (size_t i = 0; i < b.size(); ++i) {
      nope.insert(nope.end(), whole.begin() + i * row, whole.begin() + i * row + lora);
      rp.insert(rp.end(), whole.begin() + i * row + lora, whole.begin() + (i + 1) * row);
    }
    ASSERT_EQ(kvpool_set_mla_kv(pool.get(), 0, b.data(), 2, nope.data(), nope.size() * 4, rp.data(), rp.size() * 4,
                                KVPOOL_DTYPE_F32),
              KVPOOL_OK)
        << kvpool_last_error();
    EXPECT_EQ(get_f32(pool.get(), 0, b, row, false), whole);
    const std::vector<uint16_t> nope_b = kvbt::to_bf16(nope), rope_b = kvbt::to_bf16(rp);
    ASSERT_EQ(kvpool_set_mla_kv(pool.get(), 1, b.data(), 2, nope_b.data(), nope_b.size() * 2, rope_b.data(),
                                rope_b.size() * 2, KVPOOL_DTYPE_BF16),
              KVPOOL_OK);
    EXPECT_EQ(get_f32(pool.get(), 1, b, row, false), whole);
    // Stored-dtype parts (whole-byte types) are copied as they are.
    if (d != "fp4_e2m1") {
      const size_t eb = dtype_bytes(d);
      std::vector<uint8_t> raw(b.size() * row * eb);
      ASSERT_EQ(kvpool_get_kv(pool.get(), 0, b.data(), 2, raw.data(), raw.size(), nullptr, 0, public_dtype(d)),
                KVPOOL_OK);
      std::vector<uint8_t> rn, rr;
      for (size_t i = 0; i < b.size(); ++i) {
        rn.insert(rn.end(), raw.begin() + i * row * eb, raw.begin() + (i * row + lora) * eb);
        rr.insert(rr.end(), raw.begin() + (i * row + lora) * eb, raw.begin() + (i + 1) * row * eb);
      }
      const std::vector<int64_t> c = {100, 101};
      ASSERT_EQ(kvpool_set_mla_kv(pool.get(), 1, c.data(), 2, rn.data(), rn.size(), rr.data(), rr.size(),
                                  public_dtype(d)),
                KVPOOL_OK)
          << kvpool_last_error();
      EXPECT_EQ(get_f32(pool.get(), 1, c, row, false), whole);
    }
    // The value view: the first kv_lora_rank columns of the same rows.
    const kvpool_buffer k = describe(pool.get(), KVPOOL_BUFFER_K, 0), v = describe(pool.get(), KVPOOL_BUFFER_V, 0);
    EXPECT_EQ(v.data, k.data);
    EXPECT_EQ(v.bytes, k.bytes);
    EXPECT_EQ(v.dtype, k.dtype);
    const int64_t w = d == "fp4_e2m1" ? int64_t(row / 2) : int64_t(row);
    expect_desc(k, d == "fp4_e2m1" ? KVPOOL_DTYPE_U8 : public_dtype(d), {260, 1, w}, {w, w, 1},
                260 * uint64_t(w) * (d == "fp4_e2m1" ? 1 : dtype_bytes(d)));
    expect_desc(v, k.dtype, {260, 1, d == "fp4_e2m1" ? int64_t(lora / 2) : int64_t(lora)}, {w, w, 1}, k.bytes);
    kvpool_buffer none = KVPOOL_BUFFER_INIT;
    EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_V_SCALE, 0, &none), KVPOOL_ERR_UNSUPPORTED);
    if (d == "fp4_e2m1") {
      expect_desc(describe(pool.get(), KVPOOL_BUFFER_K_SCALE, 0), KVPOOL_DTYPE_FP8_E4M3, {260, 3}, {3, 1}, 260 * 3);
    } else if (d == "f32") {
      const float* base = static_cast<const float*>(v.data);
      for (size_t j = 0; j < lora; ++j) EXPECT_EQ(base[10 * v.strides[0] + j], nope[j]);
    }
  }
}

// ---- nsa ----

TEST(Buffers, NsaPackedRowLayout) {
  Pool pool = create(kvbt::nsa("fp8_e4m3"));
  const size_t lora = 256, rope = 16, packed = lora + lora / 128 * 4 + rope * 2;  // 296
  const kvpool_buffer kd = describe(pool.get(), KVPOOL_BUFFER_K, 0);
  expect_desc(kd, KVPOOL_DTYPE_U8, {320, 1, int64_t(packed)}, {int64_t(packed), int64_t(packed), 1}, 320 * packed);
  expect_desc(describe(pool.get(), KVPOOL_BUFFER_V, 0), KVPOOL_DTYPE_U8, {320, 1, int64_t(lora)},
              {int64_t(packed), int64_t(packed), 1}, 320 * packed);
  // Block 0: amax 224 -> scale 0.5, values 2x; block 1: all zero -> scale 1.
  std::vector<float> nope(lora, 0.0f), rp(rope);
  for (size_t j = 0; j < 128; ++j) nope[j] = 2.0f * (static_cast<float>(j % 16) - 8.0f);
  nope[0] = 224.0f;
  for (size_t j = 0; j < rope; ++j) rp[j] = 0.75f * static_cast<float>(j) - 3.0f;
  const std::vector<int64_t> slot = {70};
  ASSERT_EQ(kvpool_set_mla_kv(pool.get(), 0, slot.data(), 1, nope.data(), lora * 4, rp.data(), rope * 4,
                              KVPOOL_DTYPE_F32),
            KVPOOL_OK)
      << kvpool_last_error();
  const std::vector<uint8_t> row = kvbt::row_bytes(kd, 70, packed);
  EXPECT_EQ(row[0], 0x7e);  // 224 / 0.5 = 448
  EXPECT_EQ(row[1], 0xde);  // -14 / 0.5 = -28 = -1.75 x 2^4
  EXPECT_EQ(row[8], 0x00);  // 0
  EXPECT_EQ(row[9], 0x48);  // 2 / 0.5 = 4
  float s0, s1;
  std::memcpy(&s0, &row[lora], 4);
  std::memcpy(&s1, &row[lora + 4], 4);
  EXPECT_EQ(s0, 0.5f);
  EXPECT_EQ(s1, 1.0f);
  for (size_t j = 128; j < lora; ++j) EXPECT_EQ(row[j], 0) << j;
  for (size_t j = 0; j < rope; ++j) {
    uint16_t bf;
    std::memcpy(&bf, &row[lora + 8 + 2 * j], 2);
    EXPECT_EQ(bf, kvbt::exact_bf16(rp[j])) << j;
  }
  // Dequantised: nope values (exact here) followed by the rope values.
  std::vector<float> expected = nope;
  expected.insert(expected.end(), rp.begin(), rp.end());
  EXPECT_EQ(get_f32(pool.get(), 0, slot, lora + rope, false), expected);
  // As stored: u8 or fp8_e4m3 both give the packed row.
  std::vector<uint8_t> raw(packed), raw8(packed);
  ASSERT_EQ(kvpool_get_kv(pool.get(), 0, slot.data(), 1, raw.data(), packed, nullptr, 0, KVPOOL_DTYPE_U8), KVPOOL_OK);
  ASSERT_EQ(kvpool_get_kv(pool.get(), 0, slot.data(), 1, raw8.data(), packed, nullptr, 0, KVPOOL_DTYPE_FP8_E4M3),
            KVPOOL_OK);
  EXPECT_EQ(raw, row);
  EXPECT_EQ(raw8, row);
  // set_kv cannot write packed rows.
  std::vector<float> whole(lora + rope, 1.0f);
  EXPECT_EQ(kvpool_set_kv(pool.get(), 0, slot.data(), 1, whole.data(), whole.size() * 4, nullptr, 0, KVPOOL_DTYPE_F32,
                          1, 1),
            KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvbt::row_bytes(kd, 70, packed), row);
}

TEST(Buffers, NsaUnpackedDtypesBehaveLikeMla) {
  for (const char* dtype : {"f32", "bf16"}) {
    Pool pool = create(kvbt::nsa(dtype));
    const size_t row = 256 + 16;
    const std::vector<int64_t> slots = {64, 319};
    const std::vector<float> values = exact_values(2 * row, 3);
    ASSERT_EQ(kvpool_set_kv(pool.get(), 1, slots.data(), 2, values.data(), values.size() * 4, nullptr, 0,
                            KVPOOL_DTYPE_F32, 1, 1),
              KVPOOL_OK);
    EXPECT_EQ(get_f32(pool.get(), 1, slots, row, false), values);
  }
}

TEST(Buffers, NsaIndexerIsPlacedByPage) {
  Pool pool = create(kvbt::nsa("bf16"));
  const kvpool_buffer idx = describe(pool.get(), KVPOOL_BUFFER_INDEXER, 1);
  const int64_t page = 64 * 132;
  expect_desc(idx, KVPOOL_DTYPE_U8, {5, page}, {page, 1}, 5 * uint64_t(page));  // (256 + 64 + 1) / 64 pages
  const std::vector<int64_t> slots = {5, 64, 130, 319};
  std::vector<uint8_t> keys(slots.size() * 128);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = static_cast<uint8_t>(1 + i % 251);
  const std::vector<float> scales = {0.5f, 1.5f, 2.5f, 3.5f};
  ASSERT_EQ(kvpool_set_indexer(pool.get(), 1, slots.data(), slots.size(), keys.data(), keys.size(), scales.data(),
                               scales.size()),
            KVPOOL_OK)
      << kvpool_last_error();
  const uint8_t* base = kvbt::bytes_of(idx);
  std::vector<bool> written(5 * page, false);
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t pg = slots[i] / 64, pos = slots[i] % 64;
    const int64_t key_at = pg * page + pos * 128, scale_at = pg * page + 64 * 128 + pos * 4;
    EXPECT_EQ(std::memcmp(base + key_at, keys.data() + i * 128, 128), 0) << slots[i];
    float s;
    std::memcpy(&s, base + scale_at, 4);
    EXPECT_EQ(s, scales[i]) << slots[i];
    std::fill(written.begin() + key_at, written.begin() + key_at + 128, true);
    std::fill(written.begin() + scale_at, written.begin() + scale_at + 4, true);
  }
  for (int64_t i = 0; i < 5 * page; ++i) {
    if (!written[i]) {
      ASSERT_EQ(base[i], 0) << "byte " << i << " was written";
    }
  }
  // The other layer's indexer is untouched.
  const kvpool_buffer other = describe(pool.get(), KVPOOL_BUFFER_INDEXER, 0);
  for (int64_t i = 0; i < 5 * page; ++i) ASSERT_EQ(kvbt::bytes_of(other)[i], 0);
  // Indexers are for nsa only.
  Pool mha = create(kvbt::mha("bf16"));
  EXPECT_EQ(kvpool_set_indexer(mha.get(), 0, slots.data(), slots.size(), keys.data(), keys.size(), scales.data(),
                               scales.size()),
            KVPOOL_ERR_UNSUPPORTED);
}

// ---- double_sparse ----

TEST(Buffers, DoubleSparseLabels) {
  Pool pool = create(double_sparse_config("f16"));
  const kvpool_plan_info plan = kvbt::plan_of(pool.get());
  ASSERT_EQ(plan.max_total_tokens, 256u);
  const kvpool_buffer lab = describe(pool.get(), KVPOOL_BUFFER_LABEL, 1);
  expect_desc(lab, KVPOOL_DTYPE_F16, {257, 2, 4}, {8, 4, 1}, 257 * 16);
  const std::vector<int64_t> slots = {0, 7, 256};
  std::vector<uint16_t> labels(slots.size() * 8);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<uint16_t>(0x3c00 + i);
  ASSERT_EQ(kvpool_set_label(pool.get(), 1, slots.data(), 3, labels.data(), labels.size() * 2), KVPOOL_OK)
      << kvpool_last_error();
  const std::vector<uint8_t> label_bytes = as_bytes(labels);
  for (size_t i = 0; i < slots.size(); ++i) {
    EXPECT_EQ(kvbt::row_bytes(lab, slots[i], 16),
              std::vector<uint8_t>(label_bytes.begin() + i * 16, label_bytes.begin() + (i + 1) * 16));
  }
  const std::vector<int64_t> past = {257};
  EXPECT_EQ(kvpool_set_label(pool.get(), 1, past.data(), 1, labels.data(), 16), KVPOOL_ERR_INVALID_ARGUMENT);
  // K and V as for mha; labels move with move_kv.
  const std::vector<int64_t> kv_slots = {7};
  const std::vector<float> k = exact_values(32, 1), v = exact_values(32, 2);
  ASSERT_EQ(kvpool_set_kv(pool.get(), 1, kv_slots.data(), 1, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_OK);
  const std::vector<int64_t> dst = {9};
  ASSERT_EQ(kvpool_move_kv(pool.get(), dst.data(), 1, kv_slots.data(), 1), KVPOOL_OK);
  EXPECT_EQ(kvbt::row_bytes(lab, 9, 16), kvbt::row_bytes(lab, 7, 16));
  std::vector<float> got_v;
  EXPECT_EQ(get_f32(pool.get(), 1, dst, 32, true, &got_v), k);
  EXPECT_EQ(got_v, v);
  // Labels are for double_sparse only.
  Pool mha = create(kvbt::mha("f16"));
  EXPECT_EQ(kvpool_set_label(mha.get(), 1, kv_slots.data(), 1, labels.data(), 16), KVPOOL_ERR_UNSUPPORTED);
}

// ---- swa ----

TEST(Buffers, SwaWindowLayersTranslateSlots) {
  Pool pool = create(swa_config());
  const kvpool_plan_info plan = kvbt::plan_of(pool.get());
  const int64_t full_rows = int64_t(plan.max_total_tokens) + 1, window_rows = int64_t(plan.swa_tokens) + 1;
  ASSERT_LT(window_rows, full_rows);
  // Layers 0 and 2 slide (pattern "SF"), 1 and 3 are full.
  EXPECT_EQ(describe(pool.get(), KVPOOL_BUFFER_K, 0).shape[0], window_rows);
  EXPECT_EQ(describe(pool.get(), KVPOOL_BUFFER_V, 2).shape[0], window_rows);
  EXPECT_EQ(describe(pool.get(), KVPOOL_BUFFER_K, 1).shape[0], full_rows);

  std::vector<int64_t> full(3), window(3);
  ASSERT_EQ(kvalloc_alloc(pool.get(), full.data(), 3), KVPOOL_OK);
  ASSERT_EQ(kvalloc_translate_swa(pool.get(), full.data(), 3, window.data(), 3), KVPOOL_OK);
  const std::vector<float> k = exact_values(3 * 32, 1), v = exact_values(3 * 32, 2);
  for (int layer : {0, 1}) {
    ASSERT_EQ(kvpool_set_kv(pool.get(), layer, full.data(), 3, k.data(), k.size() * 4, v.data(), v.size() * 4,
                            KVPOOL_DTYPE_F32, 1, 1),
              KVPOOL_OK)
        << kvpool_last_error();
  }
  const kvpool_buffer wk = describe(pool.get(), KVPOOL_BUFFER_K, 0), wv = describe(pool.get(), KVPOOL_BUFFER_V, 0);
  const kvpool_buffer fk = describe(pool.get(), KVPOOL_BUFFER_K, 1);
  const std::vector<uint8_t> kb = as_bytes(k), vb = as_bytes(v);
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<uint8_t> ki(kb.begin() + i * 128, kb.begin() + (i + 1) * 128);
    EXPECT_EQ(kvbt::row_bytes(wk, window[i], 128), ki) << "window row " << window[i];
    EXPECT_EQ(kvbt::row_bytes(wv, window[i], 128), std::vector<uint8_t>(vb.begin() + i * 128, vb.begin() + (i + 1) * 128));
    EXPECT_EQ(kvbt::row_bytes(fk, full[i], 128), ki) << "full row " << full[i];
  }
  std::vector<float> got_v;
  EXPECT_EQ(get_f32(pool.get(), 0, full, 32, true, &got_v), k);
  EXPECT_EQ(got_v, v);

  // The mapping descriptor: host int64 [max_total_tokens + 1].
  const kvpool_buffer map = describe(pool.get(), KVPOOL_BUFFER_SWA_MAPPING, 123);
  expect_desc(map, KVPOOL_DTYPE_I64, {full_rows}, {1}, uint64_t(full_rows) * 8);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(static_cast<const int64_t*>(map.data)[full[i]], window[i]);

  // An unmapped full slot (mapping 0) writes the window pool's padding row 0.
  int64_t unmapped = 1;
  while (std::find(full.begin(), full.end(), unmapped) != full.end()) ++unmapped;
  const std::vector<float> k2 = exact_values(32, 9);
  ASSERT_EQ(kvpool_set_kv(pool.get(), 2, &unmapped, 1, k2.data(), 128, k2.data(), 128, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_OK);
  EXPECT_EQ(kvbt::row_bytes(describe(pool.get(), KVPOOL_BUFFER_K, 2), 0, 128), as_bytes(k2));

  // Full-pool ids are the slot range; move and host copies are not available.
  const int64_t past = full_rows;
  EXPECT_EQ(kvpool_set_kv(pool.get(), 0, &past, 1, k2.data(), 128, k2.data(), 128, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_move_kv(pool.get(), full.data(), 1, window.data(), 1), KVPOOL_ERR_UNSUPPORTED);
  size_t bytes = 0;
  EXPECT_EQ(kvpool_host_copy_bytes(pool.get(), 1, &bytes), KVPOOL_ERR_UNSUPPORTED);
}

// ---- hybrid_linear ----

TEST(Buffers, HybridLinearKeepsKvForFullLayersOnly) {
  Pool pool = create(hybrid_config());
  const std::vector<int64_t> slots = {1, 2};
  const std::vector<float> k = exact_values(64, 1), v = exact_values(64, 2);
  for (int layer : {0, 2}) {
    EXPECT_EQ(kvpool_set_kv(pool.get(), layer, slots.data(), 2, k.data(), 256, v.data(), 256, KVPOOL_DTYPE_F32, 1, 1),
              KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvpool_last_error()).find("not in full attention layers"), std::string::npos)
        << kvpool_last_error();
    kvpool_buffer b = KVPOOL_BUFFER_INIT;
    EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_K, layer, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  }
  ASSERT_EQ(kvpool_set_kv(pool.get(), 3, slots.data(), 2, k.data(), 256, v.data(), 256, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_OK);
  std::vector<float> got_v;
  EXPECT_EQ(get_f32(pool.get(), 3, slots, 32, true, &got_v), k);
  EXPECT_EQ(got_v, v);
  EXPECT_EQ(get_f32(pool.get(), 1, slots, 32, true), std::vector<float>(64, 0.0f));
  // Host copies cover the two full layers.
  size_t bytes = 0;
  ASSERT_EQ(kvpool_host_copy_bytes(pool.get(), 1, &bytes), KVPOOL_OK);
  EXPECT_EQ(bytes, 2u * 2u * 32u * 4u);
}

TEST(Buffers, HybridLinearDescribesMambaStates) {
  Pool pool = create(hybrid_config(R"(, "mamba_spec_draft_tokens": 2)"));
  const kvpool_plan_info plan = kvbt::plan_of(pool.get());
  const int64_t slots = int64_t(plan.mamba_slots) + 1;
  const uint64_t conv_bytes = 8 * 3 * 2, ssm_bytes = 2 * 4 * 4 * 4;
  const kvpool_buffer c0 = describe(pool.get(), KVPOOL_BUFFER_MAMBA_CONV, 0);
  expect_desc(c0, KVPOOL_DTYPE_BF16, {slots, 8, 3}, {24, 3, 1}, uint64_t(slots) * conv_bytes);
  const kvpool_buffer c2 = describe(pool.get(), KVPOOL_BUFFER_MAMBA_CONV, 2);
  EXPECT_EQ(kvbt::bytes_of(c2) - kvbt::bytes_of(c0), static_cast<ptrdiff_t>(slots * conv_bytes));
  const kvpool_buffer s0 = describe(pool.get(), KVPOOL_BUFFER_MAMBA_SSM, 0);
  expect_desc(s0, KVPOOL_DTYPE_F32, {slots, 2, 4, 4}, {32, 16, 4, 1}, uint64_t(slots) * ssm_bytes);
  const kvpool_buffer s2 = describe(pool.get(), KVPOOL_BUFFER_MAMBA_SSM, 2);
  EXPECT_EQ(kvbt::bytes_of(s2) - kvbt::bytes_of(s0), static_cast<ptrdiff_t>(slots * ssm_bytes));
  // A state written through the mamba API shows up in the view.
  int32_t slot = 0;
  ASSERT_EQ(kvpool_mamba_alloc(pool.get(), &slot, 1), KVPOOL_OK);
  std::vector<uint8_t> conv(conv_bytes, 0x5a), ssm(ssm_bytes, 0xa5);
  ASSERT_EQ(kvpool_mamba_write(pool.get(), 2, slot, conv.data(), conv.size(), ssm.data(), ssm.size()), KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(kvbt::row_bytes(c2, slot, conv_bytes), conv);
  EXPECT_EQ(kvbt::row_bytes(s2, slot, ssm_bytes), ssm);
  // Speculative intermediate states: [running requests + 1, draft tokens, *shape].
  const int64_t spec = int64_t(plan.max_running_requests) + 1;
  expect_desc(describe(pool.get(), KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM, 2), KVPOOL_DTYPE_F32, {spec, 2, 2, 4, 4},
              {64, 32, 16, 4, 1}, uint64_t(spec) * 2 * ssm_bytes);
  expect_desc(describe(pool.get(), KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV, 0), KVPOOL_DTYPE_BF16, {spec, 2, 8, 3},
              {48, 24, 3, 1}, uint64_t(spec) * 2 * conv_bytes);
  kvpool_buffer b = KVPOOL_BUFFER_INIT;
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_MAMBA_CONV, 1, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_MAMBA_SSM, 4, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_SWA_MAPPING, 0, &b), KVPOOL_ERR_UNSUPPORTED);

  Pool plain = create(hybrid_config());
  EXPECT_EQ(kvpool_get_buffer(plain.get(), KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM, 0, &b), KVPOOL_ERR_UNSUPPORTED);
}

// ---- move_kv ----

TEST(Buffers, MoveKvPermutationCycle) {
  for (const char* dtype : {"f16", "fp4_e2m1"}) {
    SCOPED_TRACE(dtype);
    Pool pool = create(kvbt::mha(dtype));
    const std::vector<int64_t> slots = {10, 11, 12, 13, 14};
    for (int layer = 0; layer < 4; ++layer) {
      const std::vector<float> k = exact_values(5 * 32, 30 + layer), v = exact_values(5 * 32, 40 + layer);
      ASSERT_EQ(kvpool_set_kv(pool.get(), layer, slots.data(), 5, k.data(), k.size() * 4, v.data(), v.size() * 4,
                              KVPOOL_DTYPE_F32, 1, 1),
                KVPOOL_OK);
    }
    const std::vector<uint8_t> before = kvbt::snapshot(pool.get(), 4);
    ASSERT_EQ(kvpool_move_kv(pool.get(), nullptr, 0, nullptr, 0), KVPOOL_OK);
    EXPECT_EQ(kvbt::snapshot(pool.get(), 4), before) << "an empty move is a no-op";
    const std::vector<int64_t> dst = {11, 12, 13, 10}, src = {10, 11, 12, 13};
    ASSERT_EQ(kvpool_move_kv(pool.get(), dst.data(), 4, src.data(), 4), KVPOOL_OK) << kvpool_last_error();
    for (int layer = 0; layer < 4; ++layer) {
      const std::vector<float> k = exact_values(5 * 32, 30 + layer), v = exact_values(5 * 32, 40 + layer);
      std::vector<float> got_v;
      const std::vector<float> got_k = get_f32(pool.get(), layer, {10, 11, 12, 13, 14}, 32, true, &got_v);
      // slot 10 <- 13, 11 <- 10, 12 <- 11, 13 <- 12, 14 unchanged
      const size_t from[5] = {3, 0, 1, 2, 4};
      for (size_t i = 0; i < 5; ++i) {
        EXPECT_TRUE(std::equal(got_k.begin() + i * 32, got_k.begin() + (i + 1) * 32, k.begin() + from[i] * 32))
            << "layer " << layer << " slot " << slots[i];
        EXPECT_TRUE(std::equal(got_v.begin() + i * 32, got_v.begin() + (i + 1) * 32, v.begin() + from[i] * 32));
      }
    }
  }
}

TEST(Buffers, MoveKvMla) {
  Pool pool = create(kvbt::mla("bf16"));
  const std::vector<int64_t> a = {20, 21};
  const std::vector<float> rows = exact_values(2 * 48, 3);
  ASSERT_EQ(kvpool_set_kv(pool.get(), 0, a.data(), 2, rows.data(), rows.size() * 4, nullptr, 0, KVPOOL_DTYPE_F32, 1, 1),
            KVPOOL_OK);
  const std::vector<int64_t> dst = {21, 22}, src = {20, 21};  // overlapping: 21 is read before it is written
  ASSERT_EQ(kvpool_move_kv(pool.get(), dst.data(), 2, src.data(), 2), KVPOOL_OK);
  EXPECT_EQ(get_f32(pool.get(), 0, dst, 48, false), rows);
}

// ---- host copies ----

void host_copy_round_trip(const std::string& json, int layers, bool two_parts, size_t value_bytes,
                          size_t scale_bytes, size_t n) {
  Pool pool = create(json);
  const kvpool_plan_info plan = kvbt::plan_of(pool.get());
  kvbt::poison(pool.get(), layers);
  const int64_t rows = int64_t(plan.max_total_tokens) + plan.page_size;
  std::vector<int64_t> slots(n), dst(n);
  for (size_t i = 0; i < n; ++i) {
    slots[i] = 1 + int64_t(i);
    dst[i] = (int64_t(i) * 7919 + 13) % rows;  // a permutation of other slots
  }
  size_t bytes = 0;
  ASSERT_EQ(kvpool_host_copy_bytes(pool.get(), n, &bytes), KVPOOL_OK);
  const size_t row = value_bytes + scale_bytes;
  ASSERT_EQ(bytes, n * row * size_t(layers) * (two_parts ? 2 : 1));
  std::vector<uint8_t> host(bytes);
  ASSERT_EQ(kvpool_copy_to_host(pool.get(), slots.data(), n, host.data(), host.size()), KVPOOL_OK)
      << kvpool_last_error();
  // Layout: per layer, K rows of every slot then V rows; each row its values then its fp4 scales.
  size_t at = 0;
  std::vector<std::vector<uint8_t>> expected_rows;
  for (int layer = 0; layer < layers; ++layer) {
    for (int part = 0; part < (two_parts ? 2 : 1); ++part) {
      const kvpool_buffer vb = describe(pool.get(), part == 0 ? KVPOOL_BUFFER_K : KVPOOL_BUFFER_V, layer);
      kvpool_buffer sb = KVPOOL_BUFFER_INIT;
      if (scale_bytes > 0) sb = describe(pool.get(), part == 0 ? KVPOOL_BUFFER_K_SCALE : KVPOOL_BUFFER_V_SCALE, layer);
      for (size_t i = 0; i < n; ++i, at += row) {
        std::vector<uint8_t> r = kvbt::row_bytes(vb, slots[i], value_bytes);
        if (scale_bytes > 0) {
          const std::vector<uint8_t> s = kvbt::row_bytes(sb, slots[i], scale_bytes);
          r.insert(r.end(), s.begin(), s.end());
        }
        ASSERT_TRUE(std::equal(r.begin(), r.end(), host.begin() + at)) << "layer " << layer << " part " << part
                                                                       << " slot " << slots[i];
        expected_rows.push_back(std::move(r));
      }
    }
  }
  ASSERT_EQ(at, bytes);
  // Load back at other slots.
  ASSERT_EQ(kvpool_load_from_host(pool.get(), dst.data(), n, host.data(), host.size()), KVPOOL_OK)
      << kvpool_last_error();
  size_t k = 0;
  for (int layer = 0; layer < layers; ++layer) {
    for (int part = 0; part < (two_parts ? 2 : 1); ++part) {
      const kvpool_buffer vb = describe(pool.get(), part == 0 ? KVPOOL_BUFFER_K : KVPOOL_BUFFER_V, layer);
      kvpool_buffer sb = KVPOOL_BUFFER_INIT;
      if (scale_bytes > 0) sb = describe(pool.get(), part == 0 ? KVPOOL_BUFFER_K_SCALE : KVPOOL_BUFFER_V_SCALE, layer);
      for (size_t i = 0; i < n; ++i, ++k) {
        std::vector<uint8_t> r = kvbt::row_bytes(vb, dst[i], value_bytes);
        if (scale_bytes > 0) {
          const std::vector<uint8_t> s = kvbt::row_bytes(sb, dst[i], scale_bytes);
          r.insert(r.end(), s.begin(), s.end());
        }
        ASSERT_EQ(r, expected_rows[k]) << "layer " << layer << " part " << part << " slot " << dst[i];
      }
    }
  }
}

TEST(Buffers, HostCopyRoundTripMoreThanOneChunk) {
  // 20000 slots: three chunks of at most 8192.
  host_copy_round_trip(config(R"("num_layers": 2, "kv_heads": 1, "head_dim": 16)",
                              R"("kv_dtype": "f16", "page_size": 4, "max_total_tokens": 20000,
                                 "max_running_requests": 4, "max_context_len": 64)"),
                       2, true, 32, 0, 20000);
}

TEST(Buffers, HostCopyFp4RowsCarryTheirScales) {
  host_copy_round_trip(config(R"("num_layers": 2, "kv_heads": 2, "head_dim": 16)",
                              R"("kv_dtype": "fp4_e2m1", "page_size": 4, "max_total_tokens": 9000,
                                 "max_running_requests": 4, "max_context_len": 64)"),
                       2, true, 16, 2, 8500);
}

TEST(Buffers, HostCopyMla) {
  host_copy_round_trip(kvbt::mla("bf16"), 2, false, 96, 0, 200);
  host_copy_round_trip(kvbt::mla("fp4_e2m1"), 2, false, 24, 3, 200);
}

TEST(Buffers, HostCopyUnsupportedVariants) {
  size_t bytes = 0;
  for (const std::string& json : {kvbt::nsa("bf16"), double_sparse_config(), swa_config()}) {
    Pool pool = create(json);
    EXPECT_EQ(kvpool_host_copy_bytes(pool.get(), 4, &bytes), KVPOOL_ERR_UNSUPPORTED);
    std::vector<uint8_t> host(64);
    const int64_t slot = 1;
    EXPECT_EQ(kvpool_copy_to_host(pool.get(), &slot, 1, host.data(), host.size()), KVPOOL_ERR_UNSUPPORTED);
    EXPECT_EQ(kvpool_load_from_host(pool.get(), &slot, 1, host.data(), host.size()), KVPOOL_ERR_UNSUPPORTED);
  }
  Pool mha = create(kvbt::mha("f32"));
  ASSERT_EQ(kvpool_host_copy_bytes(mha.get(), 0, &bytes), KVPOOL_OK);
  EXPECT_EQ(bytes, 0u);
  ASSERT_EQ(kvpool_host_copy_bytes(mha.get(), 3, &bytes), KVPOOL_OK);
  EXPECT_EQ(bytes, 3u * 4 * 2 * 128);
}

}  // namespace
