// device.h mamba calls on a CPU pool: the stream is ignored and the results
// are the host calls' (the reference of tests/gpu/gpu_device_kv_test.cpp).
#include <vector>

#include "test_util.hpp"

namespace {

using kvtest::Pool;
using Floats = std::vector<float>;

// 4 layers, mamba at 0..2 (conv 4 x 3, ssm 2 x 4 x 4, f32); 20 state slots.
const char* kHybrid = R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
    "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
    "conv_dtype": "f32", "ssm_dtype": "f32"}},
    "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 10, "mamba_cache_size": 20,
             "max_context_len": 32}, "prefix_cache": {"kind": "none"}})";

constexpr size_t kConv = 12, kSsm = 32;

void write_state(kvpool* pool, int32_t slot, float base) {
  for (int layer = 0; layer < 3; ++layer) {
    Floats conv(kConv), ssm(kSsm);
    for (size_t i = 0; i < kConv; ++i) conv[i] = base + static_cast<float>(layer * 100 + static_cast<int>(i));
    for (size_t i = 0; i < kSsm; ++i) ssm[i] = -base - static_cast<float>(layer * 100 + static_cast<int>(i));
    ASSERT_EQ(kvpool_mamba_write(pool, layer, slot, conv.data(), kConv * 4, ssm.data(), kSsm * 4), KVPOOL_OK)
        << kvpool_last_error();
  }
}

Floats read_state(kvpool* pool, int32_t slot) {
  Floats all;
  for (int layer = 0; layer < 3; ++layer) {
    Floats conv(kConv), ssm(kSsm);
    EXPECT_EQ(kvpool_mamba_read(pool, layer, slot, conv.data(), kConv * 4, ssm.data(), kSsm * 4), KVPOOL_OK);
    all.insert(all.end(), conv.begin(), conv.end());
    all.insert(all.end(), ssm.begin(), ssm.end());
  }
  return all;
}

TEST(DeviceMambaApiCpu, AllocForkAndCopyMatchTheHostCalls) {
  Pool a(kHybrid), b(kHybrid);
  std::vector<int32_t> sa(3), sb(3);
  ASSERT_EQ(kvpool_mamba_alloc_async(a, sa.data(), 3, nullptr), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(kvpool_mamba_alloc(b, sb.data(), 3), KVPOOL_OK);
  EXPECT_EQ(sa, sb);  // same ids as the host call
  EXPECT_EQ(read_state(a, sa[0]), Floats(3 * (kConv + kSsm), 0.0f));
  write_state(a, sa[0], 1.5f);
  write_state(a, sa[1], 7.0f);
  int32_t forked = -1;
  ASSERT_EQ(kvpool_mamba_fork_async(a, sa[0], &forked, nullptr), KVPOOL_OK) << kvpool_last_error();
  EXPECT_GT(forked, 0);
  EXPECT_EQ(read_state(a, forked), read_state(a, sa[0]));
  // Batched copy: sa[2] <- sa[1], forked <- sa[1].
  const std::vector<int32_t> src = {sa[1], sa[1]}, dst = {sa[2], forked};
  ASSERT_EQ(kvpool_mamba_copy_async(a, src.data(), 2, dst.data(), 2, nullptr), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(read_state(a, sa[2]), read_state(a, sa[1]));
  EXPECT_EQ(read_state(a, forked), read_state(a, sa[1]));
  EXPECT_NE(read_state(a, sa[0]), read_state(a, sa[1]));
  EXPECT_EQ(kvpool_check(a, nullptr, 0), KVPOOL_OK) << kvpool_last_error();
}

TEST(DeviceMambaApiCpu, BadInputChangesNothing) {
  Pool a(kHybrid);
  std::vector<int32_t> s(2);
  ASSERT_EQ(kvpool_mamba_alloc_async(a, s.data(), 2, nullptr), KVPOOL_OK);
  write_state(a, s[0], 3.0f);
  const Floats before = read_state(a, s[1]);
  size_t free_before = 0;
  ASSERT_EQ(kvpool_mamba_available(a, &free_before), KVPOOL_OK);
  // A free slot anywhere in the batch: nothing is copied, not even the valid first pair.
  const std::vector<int32_t> src = {s[0], s[0]}, dst = {s[1], 19};
  EXPECT_EQ(kvpool_mamba_copy_async(a, src.data(), 2, dst.data(), 2, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(read_state(a, s[1]), before);
  EXPECT_EQ(kvpool_mamba_copy_async(a, src.data(), 2, dst.data(), 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  int32_t out = 0;
  EXPECT_EQ(kvpool_mamba_fork_async(a, 19, &out, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);  // not allocated
  EXPECT_EQ(kvpool_mamba_fork_async(a, s[0], nullptr, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  std::vector<int32_t> many(100);
  EXPECT_EQ(kvpool_mamba_alloc_async(a, many.data(), 100, nullptr), KVPOOL_ERR_OUT_OF_MEMORY);
  size_t free_after = 0;
  ASSERT_EQ(kvpool_mamba_available(a, &free_after), KVPOOL_OK);
  EXPECT_EQ(free_after, free_before);
  EXPECT_EQ(kvpool_mamba_alloc_async(nullptr, many.data(), 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  Pool plain(kvtest::mha_config(1, 64));
  EXPECT_EQ(kvpool_mamba_copy_async(plain, src.data(), 1, dst.data(), 1, nullptr), KVPOOL_ERR_UNSUPPORTED);
}

}  // namespace
