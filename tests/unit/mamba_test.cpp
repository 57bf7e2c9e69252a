// Mamba state slots and hybrid request rows: SGLANG_SEMANTICS §1.11 and §8.3.
#include <vector>

#include "test_util.hpp"

namespace {

using kvtest::Pool;
using Ints = std::vector<int32_t>;

// 4 layers, full attention at 3, mamba at 0..2; 10 request rows, 20 state slots.
std::string hybrid_config(bool extra_buffer = false) {
  return std::string(R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
      "conv_dtype": "f32", "ssm_dtype": "f32"}},
      "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 10, "mamba_cache_size": 20,
               "max_context_len": 32, "mamba_extra_buffer": )") +
         (extra_buffer ? "true" : "false") + R"(}, "prefix_cache": {"kind": "none"}})";
}

size_t mamba_available(kvpool* pool) {
  size_t n = 0;
  EXPECT_EQ(kvpool_mamba_available(pool, &n), KVPOOL_OK) << kvpool_last_error();
  return n;
}

size_t rows_available(kvpool* pool) {
  size_t n = 0;
  EXPECT_EQ(kvreq_available(pool, &n), KVPOOL_OK);
  return n;
}

struct State {
  std::vector<float> conv = std::vector<float>(12);
  std::vector<float> ssm = std::vector<float>(32);
};

State read_state(kvpool* pool, int layer, int32_t slot) {
  State s;
  EXPECT_EQ(kvpool_mamba_read(pool, layer, slot, s.conv.data(), 48, s.ssm.data(), 128), KVPOOL_OK) << kvpool_last_error();
  return s;
}

void write_state(kvpool* pool, int layer, int32_t slot, float base) {
  State s;
  for (size_t i = 0; i < s.conv.size(); ++i) s.conv[i] = base + static_cast<float>(i);
  for (size_t i = 0; i < s.ssm.size(); ++i) s.ssm[i] = -base - static_cast<float>(i);
  ASSERT_EQ(kvpool_mamba_write(pool, layer, slot, s.conv.data(), 48, s.ssm.data(), 128), KVPOOL_OK) << kvpool_last_error();
}

TEST(HybridRows, AllocFreeAndKeepState) {
  Pool pool(hybrid_config());
  EXPECT_EQ(rows_available(pool), 10u);
  EXPECT_EQ(mamba_available(pool), 20u);
  Ints reuse{-1}, rows(1), slots(1);
  ASSERT_EQ(kvreq_alloc_hybrid(pool, reuse.data(), 1, rows.data(), 1, slots.data(), 1), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(rows_available(pool), 9u);
  EXPECT_EQ(mamba_available(pool), 19u);
  int32_t slot = -9, pp[2];
  ASSERT_EQ(kvreq_mamba_slots(pool, rows[0], &slot, pp, 2), KVPOOL_OK);
  EXPECT_EQ(slot, slots[0]);
  EXPECT_EQ(pp[0], -1);  // no extra buffers
  kvtest::expect_consistent(pool);

  ASSERT_EQ(kvreq_free_hybrid(pool, rows.data(), 1, 1, -1), KVPOOL_OK);  // row and slot come back
  EXPECT_EQ(rows_available(pool), 10u);
  EXPECT_EQ(mamba_available(pool), 20u);

  ASSERT_EQ(kvreq_alloc_hybrid(pool, reuse.data(), 1, rows.data(), 1, slots.data(), 1), KVPOOL_OK);
  ASSERT_EQ(kvreq_free_hybrid(pool, rows.data(), 1, 0, -1), KVPOOL_OK);  // keep the state (chunked prefill)
  EXPECT_EQ(rows_available(pool), 10u);
  EXPECT_EQ(mamba_available(pool), 19u);
  Ints kept{slots[0]}, again(1), again_slots(1);
  ASSERT_EQ(kvreq_alloc_hybrid(pool, kept.data(), 1, again.data(), 1, again_slots.data(), 1), KVPOOL_OK);
  EXPECT_EQ(again_slots[0], slots[0]);  // reused: a row but no new slot
  EXPECT_EQ(rows_available(pool), 9u);
  EXPECT_EQ(mamba_available(pool), 19u);
  kvtest::expect_consistent(pool);
}

TEST(HybridRows, PingPongBuffers) {
  Pool pool(hybrid_config(true));
  Ints reuse{-1, -1}, rows(2), slots(2);
  ASSERT_EQ(kvreq_alloc_hybrid(pool, reuse.data(), 2, rows.data(), 2, slots.data(), 2), KVPOOL_OK);
  EXPECT_EQ(mamba_available(pool), 20u - 6);  // one working slot and two ping-pong slots each
  int32_t slot = 0, pp[2];
  ASSERT_EQ(kvreq_mamba_slots(pool, rows[1], &slot, pp, 2), KVPOOL_OK);
  EXPECT_NE(pp[0], pp[1]);
  EXPECT_NE(pp[0], slot);
  ASSERT_EQ(kvreq_free_hybrid(pool, &rows[1], 1, 1, 0), KVPOOL_OK);  // keep ping-pong 0 (handed to a tree)
  EXPECT_EQ(mamba_available(pool), 20u - 6 + 2);
  EXPECT_EQ(kvpool_mamba_free(pool, &pp[0], 1), KVPOOL_OK);  // the kept one is the caller's now
  ASSERT_EQ(kvreq_free_hybrid(pool, &rows[0], 1, 0, -1), KVPOOL_OK);  // state and ping-pong kept together
  EXPECT_EQ(mamba_available(pool), 20u - 3);
  Ints kept{slots[0]}, row(1), s(1);
  ASSERT_EQ(kvreq_alloc_hybrid(pool, kept.data(), 1, row.data(), 1, s.data(), 1), KVPOOL_OK);
  EXPECT_EQ(mamba_available(pool), 20u - 3);  // its ping-pong slots came back with it
  kvtest::expect_consistent(pool);
  EXPECT_EQ(kvreq_free_hybrid(pool, row.data(), 1, 1, 2), KVPOOL_ERR_INVALID_ARGUMENT);  // keep must be -1, 0, 1
}

TEST(HybridRows, CapacityIsCheckedFirst) {
  Pool pool(hybrid_config(true));
  Ints reuse(7, -1), rows(7), slots(7);
  EXPECT_EQ(kvreq_alloc_hybrid(pool, reuse.data(), 7, rows.data(), 7, slots.data(), 7), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(mamba_available(pool), 20u);
  EXPECT_EQ(rows_available(pool), 10u);
  Ints bad{5};
  EXPECT_EQ(kvreq_alloc_hybrid(pool, bad.data(), 1, rows.data(), 1, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_alloc_hybrid(pool, reuse.data(), 2, rows.data(), 1, slots.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(MambaPool, AllocZeroesCopyAndFork) {
  Pool pool(hybrid_config());
  Ints all(20);
  ASSERT_EQ(kvpool_mamba_alloc(pool, all.data(), 20), KVPOOL_OK);
  write_state(pool, 1, all[4], 7.0f);
  ASSERT_EQ(kvpool_mamba_free(pool, &all[4], 1), KVPOOL_OK);
  int32_t again = 0;
  ASSERT_EQ(kvpool_mamba_alloc(pool, &again, 1), KVPOOL_OK);
  ASSERT_EQ(again, all[4]);
  const State zero = read_state(pool, 1, again);
  EXPECT_EQ(zero.conv, std::vector<float>(12, 0.0f));  // allocation zeroes the state
  EXPECT_EQ(zero.ssm, std::vector<float>(32, 0.0f));

  write_state(pool, 0, all[0], 1.0f);
  write_state(pool, 2, all[0], 2.0f);
  ASSERT_EQ(kvpool_mamba_copy(pool, all[0], all[1]), KVPOOL_OK);
  for (int layer : {0, 1, 2}) {
    EXPECT_EQ(read_state(pool, layer, all[1]).conv, read_state(pool, layer, all[0]).conv) << layer;
    EXPECT_EQ(read_state(pool, layer, all[1]).ssm, read_state(pool, layer, all[0]).ssm) << layer;
  }
  int32_t forked = 0;
  EXPECT_EQ(kvpool_mamba_fork(pool, all[0], &forked), KVPOOL_ERR_OUT_OF_MEMORY);  // none left
  ASSERT_EQ(kvpool_mamba_free(pool, &all[9], 1), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_fork(pool, all[0], &forked), KVPOOL_OK);
  EXPECT_EQ(read_state(pool, 2, forked).ssm, read_state(pool, 2, all[0]).ssm);
  kvtest::expect_consistent(pool);
}

TEST(MambaPool, BadInputs) {
  Pool pool(hybrid_config());
  int32_t slot = 0;
  ASSERT_EQ(kvpool_mamba_alloc(pool, &slot, 1), KVPOOL_OK);
  std::vector<float> conv(12), ssm(32);
  EXPECT_EQ(kvpool_mamba_write(pool, 3, slot, conv.data(), 48, ssm.data(), 128), KVPOOL_ERR_INVALID_ARGUMENT);  // full layer
  EXPECT_EQ(kvpool_mamba_write(pool, 0, slot, conv.data(), 44, ssm.data(), 128), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_mamba_write(pool, 0, slot + 1, conv.data(), 48, ssm.data(), 128), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_mamba_write(pool, 0, slot, nullptr, 48, ssm.data(), 128), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_mamba_read(pool, 0, 21, conv.data(), 48, ssm.data(), 128), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_mamba_copy(pool, slot, 0), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_mamba_fork(pool, slot, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  int32_t twice[] = {slot, slot};
  EXPECT_EQ(kvpool_mamba_free(pool, twice, 2), KVPOOL_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kvpool_mamba_free(pool, &slot, 1), KVPOOL_OK);
  EXPECT_EQ(kvpool_mamba_free(pool, &slot, 1), KVPOOL_ERR_INVALID_ARGUMENT);  // double free
  // A slot a row holds can only go back through kvreq_free_hybrid, and such a row not through kvreq_free.
  Ints reuse{-1}, rows(1), slots(1);
  ASSERT_EQ(kvreq_alloc_hybrid(pool, reuse.data(), 1, rows.data(), 1, slots.data(), 1), KVPOOL_OK);
  EXPECT_EQ(kvpool_mamba_free(pool, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_free(pool, rows.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(mamba_available(pool), 19u);
  kvtest::expect_consistent(pool);
}

TEST(MambaPool, OtherVariantsHaveNoStates) {
  Pool pool(kvtest::mha_config(1, 16));
  size_t n = 0;
  int32_t slot = 0, pp[2];
  EXPECT_EQ(kvpool_mamba_available(pool, &n), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvpool_mamba_alloc(pool, &slot, 1), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvpool_mamba_free(pool, &slot, 1), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvpool_mamba_copy(pool, 1, 2), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvpool_mamba_fork(pool, 1, &slot), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvpool_mamba_write(pool, 0, 1, nullptr, 0, nullptr, 0), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvpool_mamba_read(pool, 0, 1, nullptr, 0, nullptr, 0), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvreq_alloc_hybrid(pool, &slot, 1, &slot, 1, &slot, 1), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvreq_free_hybrid(pool, &slot, 1, 1, -1), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvreq_mamba_slots(pool, 1, &slot, pp, 2), KVPOOL_ERR_UNSUPPORTED);
}

}  // namespace
