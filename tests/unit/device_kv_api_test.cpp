// device.h KV calls on a CPU pool: arrays are host memory, the stream is
// ignored and the result is exactly the host call's (the reference the CUDA
// pool is compared with in tests/gpu/gpu_device_kv_test.cpp).
#include <cstring>
#include <numeric>
#include <vector>

#include "test_util.hpp"

namespace {

using kvtest::Pool;

std::vector<float> ramp(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + 0.25f * static_cast<float>(i % 29) - 3.0f;
  return v;
}

const char* kFp8 = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16},
  "pool": {"kv_dtype": "fp8_e4m3", "page_size": 4, "max_total_tokens": 256, "max_context_len": 64}})";

TEST(DeviceKvApiCpu, SetGetAndMoveGiveTheHostCallsResults) {
  Pool a(kFp8), b(kFp8);
  const std::vector<int64_t> slots = {9, 3, 40, 41};
  const std::vector<float> k = ramp(4 * 32, 0.5f), v = ramp(4 * 32, -1.0f);
  ASSERT_EQ(kvpool_set_kv_async(a, 1, slots.data(), 4, k.data(), k.size() * 4, v.data(), v.size() * 4,
                                KVPOOL_DTYPE_F32, 0.5f, 2.0f, nullptr),
            KVPOOL_OK)
      << kvpool_last_error();
  ASSERT_EQ(kvpool_set_kv(b, 1, slots.data(), 4, k.data(), k.size() * 4, v.data(), v.size() * 4, KVPOOL_DTYPE_F32,
                          0.5f, 2.0f),
            KVPOOL_OK);
  std::vector<uint8_t> ka(4 * 32, 1), va(4 * 32, 1), kb(4 * 32, 2), vb(4 * 32, 2);
  ASSERT_EQ(kvpool_get_kv_async(a, 1, slots.data(), 4, ka.data(), ka.size(), va.data(), va.size(),
                                KVPOOL_DTYPE_FP8_E4M3, nullptr),
            KVPOOL_OK);
  ASSERT_EQ(kvpool_get_kv(b, 1, slots.data(), 4, kb.data(), kb.size(), vb.data(), vb.size(), KVPOOL_DTYPE_FP8_E4M3),
            KVPOOL_OK);
  EXPECT_EQ(ka, kb);
  EXPECT_EQ(va, vb);
  // fp8 of k / 0.5: the stored bytes are not the bytes of k itself.
  EXPECT_NE(ka, std::vector<uint8_t>(4 * 32, 0));

  const std::vector<int64_t> src = {9, 3}, dst = {3, 100};  // overlapping: 3 is read before it is written
  ASSERT_EQ(kvpool_move_kv_async(a, dst.data(), 2, src.data(), 2, nullptr), KVPOOL_OK) << kvpool_last_error();
  std::vector<uint8_t> moved(2 * 32);
  ASSERT_EQ(kvpool_get_kv(a, 1, dst.data(), 2, moved.data(), moved.size(), va.data(), 2 * 32, KVPOOL_DTYPE_FP8_E4M3),
            KVPOOL_OK);
  EXPECT_TRUE(std::equal(moved.begin(), moved.end(), kb.begin()));  // rows of slots 9 and 3 before the move
  EXPECT_EQ(kvpool_synchronize(a, nullptr), KVPOOL_OK);
}

TEST(DeviceKvApiCpu, MlaRowsThroughTheAsyncCall) {
  const char* mla = R"({"model": {"num_layers": 1, "attention": "mla", "kv_lora_rank": 32, "qk_rope_head_dim": 16},
    "pool": {"kv_dtype": "bf16", "max_total_tokens": 64, "max_context_len": 16}})";
  Pool a(mla);
  const std::vector<int64_t> slots = {2, 5};
  const std::vector<float> nope = ramp(2 * 32, 1.0f), rope = ramp(2 * 16, 2.0f);
  ASSERT_EQ(kvpool_set_mla_kv_async(a, 0, slots.data(), 2, nope.data(), nope.size() * 4, rope.data(),
                                    rope.size() * 4, KVPOOL_DTYPE_F32, nullptr),
            KVPOOL_OK)
      << kvpool_last_error();
  std::vector<float> row(2 * 48, -9.0f);
  ASSERT_EQ(kvpool_get_kv_async(a, 0, slots.data(), 2, row.data(), row.size() * 4, nullptr, 0, KVPOOL_DTYPE_F32, nullptr),
            KVPOOL_OK);
  // ramp values are multiples of 0.25 in [-3, 4]: exact in bf16.
  EXPECT_EQ(row[0], nope[0]);
  EXPECT_EQ(row[31], nope[31]);
  EXPECT_EQ(row[32], rope[0]);
  EXPECT_EQ(row[48 + 47], rope[31]);
}

TEST(DeviceKvApiCpu, BadInputIsRejectedAndWritesNothing) {
  Pool a(kFp8);
  const std::vector<int64_t> slots = {1, 500};
  const std::vector<float> k(2 * 32, 1.0f), v(2 * 32, 1.0f);
  EXPECT_EQ(kvpool_set_kv_async(a, 1, slots.data(), 2, k.data(), k.size() * 4, v.data(), v.size() * 4,
                                KVPOOL_DTYPE_F32, 1.0f, 1.0f, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);  // slot 500 is out of range
  std::vector<uint8_t> row(32, 7);
  ASSERT_EQ(kvpool_get_kv(a, 1, slots.data(), 1, row.data(), 32, row.data(), 32, KVPOOL_DTYPE_FP8_E4M3), KVPOOL_OK);
  EXPECT_EQ(row, std::vector<uint8_t>(32, 0));  // slot 1 untouched by the failed call
  EXPECT_EQ(kvpool_set_kv_async(nullptr, 1, slots.data(), 1, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, 1.0f,
                                1.0f, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_set_mla_kv_async(a, 1, slots.data(), 1, k.data(), 128, v.data(), 128, KVPOOL_DTYPE_F32, nullptr),
            KVPOOL_ERR_UNSUPPORTED);  // not an mla pool
  EXPECT_EQ(kvpool_get_kv_async(a, 1, nullptr, 1, row.data(), 32, row.data(), 32, KVPOOL_DTYPE_FP8_E4M3, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_move_kv_async(a, slots.data(), 2, slots.data(), 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_synchronize(nullptr, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
}

}  // namespace
