// radix_* entry points on hybrid_linear and swa pools: handles, lengths and pools of the wrong kind.
#include "seq_test_util.hpp"

namespace {

using kvtest::Pool;
using kvtest::Slots;
using kvtest::Tokens;

TEST(RadixHybridApi, NullAndForeignHandles) {
  int not_a_pool = 0;
  kvpool* foreign = reinterpret_cast<kvpool*>(&not_a_pool);
  Tokens t{1, 2, 3};
  Slots s(3);
  size_t a = 0, b = 0;
  uint64_t node = 0;
  int32_t st = 0;
  for (kvpool* p : {static_cast<kvpool*>(nullptr), foreign}) {
    EXPECT_EQ(radix_match_mamba(p, t.data(), 3, nullptr, -1, s.data(), 3, &a, &node, &st), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(radix_insert_mamba(p, t.data(), 3, s.data(), 3, nullptr, 1, &a, &st, &node), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(radix_evict_mamba(p, 1, &a), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(radix_insert_swa(p, t.data(), 3, s.data(), 3, nullptr, 0, 0, &a, &node), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(radix_evict_swa(p, 1, 1, &a, &b), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(radix_state_sizes(p, &a, &b), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(kvseq_mamba_slot(p, 1, &st), KVPOOL_ERR_INVALID_ARGUMENT);
  }
}

TEST(RadixHybridApi, PoolsOfOtherKinds) {
  Pool mha(kvtest::mha_config(1, 64));
  Pool swa(kvtest::swa_radix_config(64, 32));
  Pool hybrid(kvtest::hybrid_radix_config(64, 8));
  Tokens t{1, 2, 3};
  Slots s(3);
  size_t a = 0, b = 0;
  uint64_t node = 0;
  int32_t st = 0;
  for (kvpool* p : {mha.get(), swa.get()}) {
    EXPECT_EQ(radix_match_mamba(p, t.data(), 3, nullptr, -1, s.data(), 3, &a, &node, &st), KVPOOL_ERR_UNSUPPORTED);
    EXPECT_EQ(radix_insert_mamba(p, t.data(), 3, s.data(), 3, nullptr, 1, &a, &st, &node), KVPOOL_ERR_UNSUPPORTED);
  }
  for (kvpool* p : {mha.get(), hybrid.get()}) {
    EXPECT_EQ(radix_insert_swa(p, t.data(), 3, s.data(), 3, nullptr, 0, 0, &a, &node), KVPOOL_ERR_UNSUPPORTED);
  }
  EXPECT_EQ(radix_state_sizes(mha, &a, &b), KVPOOL_ERR_UNSUPPORTED);
  // hybrid_linear with extra buffers: no mamba tree and no kvseq.
  const std::string extra = R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
      "conv_dtype": "f32", "ssm_dtype": "f32"}},
      "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 4, "mamba_cache_size": 20,
               "max_context_len": 32, "mamba_extra_buffer": true}})";
  Pool ping_pong(extra);
  EXPECT_EQ(radix_state_sizes(ping_pong, &a, &b), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_match(ping_pong, t.data(), 3, nullptr, s.data(), 3, &a, &node), KVPOOL_ERR_UNSUPPORTED);
  uint64_t seq = 0;
  EXPECT_EQ(kvseq_begin(ping_pong, t.data(), 3, nullptr, &seq, &a), KVPOOL_ERR_UNSUPPORTED);
  // Events: the mamba and swa trees emit none.
  radix_event ev[2];
  int32_t toks[4];
  ASSERT_EQ(radix_take_events(swa, ev, 2, &a, toks, 4, &b), KVPOOL_OK);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, 0u);
}

TEST(RadixHybridApi, SwaSmallBufferAndStaleHandles) {
  Pool pool(kvtest::swa_radix_config(64, 32));
  const Tokens t = kvtest::range(1, 6);
  Slots mine = kvtest::alloc(pool, 6);
  size_t prefix = 0, matched = 0;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert(pool, t.data(), 6, mine.data(), 6, nullptr, 0, &prefix, &node), KVPOOL_OK);
  EXPECT_EQ(radix_insert(pool, t.data(), 6, mine.data(), 6, nullptr, 0, &prefix, &node), KVPOOL_OK);  // all cached
  EXPECT_EQ(prefix, 6u);
  const Tokens u = kvtest::range(40, 6);
  EXPECT_EQ(radix_insert(pool, u.data(), 6, mine.data(), 6, nullptr, 0, &prefix, &node), KVPOOL_ERR_INVALID_ARGUMENT);  // the tree's
  Slots small(2);
  EXPECT_EQ(radix_match(pool, t.data(), 6, nullptr, small.data(), 2, &matched, &node), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(matched, 6u);
  size_t f = 0, w = 0;
  ASSERT_EQ(radix_evict_swa(pool, 6, 0, &f, &w), KVPOOL_OK);
  EXPECT_EQ(f, 6u);
  EXPECT_EQ(w, 6u);
  EXPECT_EQ(radix_lock(pool, node), KVPOOL_ERR_INVALID_ARGUMENT);  // evicted
  kvtest::expect_consistent(pool);
}

}  // namespace
