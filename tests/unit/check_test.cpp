// kvpool_check() and kvpool_get_stats() through the public API.
#include <cstring>

#include "test_util.hpp"

namespace {

using kvtest::Pool;

TEST(Check, ReportsASummaryWhenHealthy) {
  Pool pool(kvtest::mha_config(4, 64));
  kvtest::alloc(pool, 8);
  char report[256];
  ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK);
  EXPECT_NE(std::string(report).find("ok: 2 pages held, 14 free"), std::string::npos) << report;
  char tiny[8];
  ASSERT_EQ(kvpool_check(pool, tiny, sizeof(tiny)), KVPOOL_OK);
  EXPECT_EQ(std::strlen(tiny), 7u);  // truncated, always NUL-terminated
  EXPECT_EQ(kvpool_check(pool, nullptr, 0), KVPOOL_OK);
  EXPECT_EQ(kvpool_check(pool, nullptr, 10), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_check(nullptr, report, sizeof(report)), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(Stats, SizesMatchThePlanAndCountersCount) {
  const std::string json = kvtest::mha_config(4, 64, "none", 6);
  Pool pool(json);
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  ASSERT_EQ(kvpool_get_plan(pool, &plan), KVPOOL_OK);
  auto slots = kvtest::alloc(pool, 8);
  std::vector<int64_t> too_many(100);
  EXPECT_EQ(kvalloc_alloc(pool, too_many.data(), 100), KVPOOL_ERR_OUT_OF_MEMORY);
  kvtest::free_slots(pool, {slots[0]});
  EXPECT_EQ(kvalloc_free(pool, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);
  int32_t rows[2];
  ASSERT_EQ(kvreq_alloc(pool, rows, 2), KVPOOL_OK);

  kvpool_stats s = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(pool, &s), KVPOOL_OK);
  EXPECT_EQ(s.struct_size, sizeof(kvpool_stats));
  EXPECT_EQ(s.alloc_kind, KVALLOC_PAGED);
  EXPECT_EQ(s.token_capacity, 64u);
  EXPECT_EQ(s.token_held, 4u);
  EXPECT_EQ(s.token_available, 60u);
  EXPECT_EQ(s.token_pending, 0u);
  EXPECT_EQ(s.req_capacity, 6u);
  EXPECT_EQ(s.req_available, 4u);
  EXPECT_EQ(s.mamba_capacity, 0u);
  EXPECT_EQ(s.alloc_calls, 1u);
  EXPECT_EQ(s.free_calls, 1u);
  EXPECT_EQ(s.alloc_failures, 1u);
  EXPECT_EQ(s.rejected_calls, 1u);
  EXPECT_EQ(s.req_table_bytes, plan.req_table_bytes);
  EXPECT_EQ(s.kv_bytes, plan.kv_memory_bytes);

  kvpool_stats small = KVPOOL_STATS_INIT;
  small.struct_size = 16;
  EXPECT_EQ(kvpool_get_stats(pool, &small), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_stats(pool, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_stats(nullptr, &s), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(Stats, SwaAndMambaPools) {
  Pool swa(kvtest::swa_config(16, 1.0));
  kvtest::alloc(swa, 3);
  kvpool_stats s = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(swa, &s), KVPOOL_OK);
  EXPECT_EQ(s.alloc_kind, KVALLOC_SWA);
  EXPECT_EQ(s.token_capacity, 16u);
  EXPECT_EQ(s.swa_capacity, 16u);
  EXPECT_EQ(s.swa_held, 3u);
  EXPECT_EQ(s.swa_available, 13u);

  const std::string hybrid = R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4]}},
      "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 4, "mamba_cache_size": 20,
               "mamba_spec_draft_tokens": 2, "max_context_len": 32}, "prefix_cache": {"kind": "none"}})";
  Pool mamba(hybrid);
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  ASSERT_EQ(kvpool_get_plan(mamba, &plan), KVPOOL_OK);
  ASSERT_EQ(kvpool_get_stats(mamba, &s), KVPOOL_OK);
  EXPECT_EQ(s.mamba_capacity, 20u);
  EXPECT_EQ(s.mamba_available, 20u);
  // conv bf16 [4,3] + ssm f32 [2,4,4] per layer, 3 mamba layers, 21 slots + 2 x 5 speculative rows.
  const uint64_t state = 3 * (12 * 2 + 32 * 4);
  EXPECT_EQ(plan.mamba_state_bytes, state);
  EXPECT_EQ(s.mamba_bytes, 21 * state + 2 * 5 * state);
  EXPECT_EQ(s.mamba_bytes, plan.mamba_memory_bytes);
  kvtest::expect_consistent(mamba);
}

}  // namespace
