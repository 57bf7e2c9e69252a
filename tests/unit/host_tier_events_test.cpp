// KV events of the swa and hybrid_linear trees through the public API (radix_take_events),
// host tier on: one event per token (page size 1) when a node's device KV is stored
// (finish, load-back) or removed (device eviction), when its host copy is made (backup) or
// dropped (host eviction), and AllBlocksCleared at reset; each carries the page hash that
// radix_page_hash computes for the token's prefix.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "kvpool/host.h"
#include "kvpool/radix.h"
#include "kvpool/seq.h"
#include "test_util.hpp"

namespace {

using kvtest::Pool;
using kvtest::tokens_from;

// A tiered pool of 64 device tokens, write_through, with KV events.
std::string events_config(const char* attention) {
  const std::string model = std::string(attention) == "swa"
                                ? R"("attention": "swa", "sliding_window": 4, "swa_layer_pattern": "SF")"
                                : R"("attention": "hybrid_linear", "full_attention_layers": [1, 3], "mamba": {"conv_shape": [4, 3],
                                     "ssm_shape": [2, 4, 4], "conv_dtype": "f32", "ssm_dtype": "f32"})";
  const std::string states = std::string(attention) == "swa" ? "" : R"(, "mamba_cache_size": 10)";
  return R"({"model": {"num_layers": 4, "kv_heads": 2, "head_dim": 8, )" + model +
         R"(}, "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 2, "max_context_len": 64)" +
         states + R"(}, "prefix_cache": {"kind": "radix", "events": true},
         "host_cache": {"ratio": 4, "headroom_bytes": 0, "write_policy": "write_through"}})";
}

struct Drained {
  std::vector<radix_event> events;
  std::vector<int32_t> tokens;
};

Drained take_events(kvpool* pool) {
  Drained d;
  size_t n = 0, t = 0;
  radix_event none{};
  int32_t no_token = 0;
  kvpool_status st = radix_take_events(pool, &none, 0, &n, &no_token, 0, &t);
  if (st == KVPOOL_OK) return d;
  EXPECT_EQ(st, KVPOOL_ERR_BUFFER_TOO_SMALL) << kvpool_last_error();
  d.events.resize(n);
  d.tokens.resize(t + 1);
  EXPECT_EQ(radix_take_events(pool, d.events.data(), n, &n, d.tokens.data(), d.tokens.size(), &t), KVPOOL_OK)
      << kvpool_last_error();
  d.tokens.resize(t);
  return d;
}

// The event ids of each token's page (page size 1: a token) of `tokens`, chained from the root.
std::vector<int64_t> token_hashes(const std::vector<int32_t>& tokens) {
  std::vector<int64_t> ids;
  uint8_t prev[32], digest[32];
  for (size_t i = 0; i < tokens.size(); ++i) {
    int64_t id = 0;
    EXPECT_EQ(radix_page_hash(&tokens[i], 1, i == 0 ? nullptr : prev, i == 0 ? 0 : 32, digest, 32, &id), KVPOOL_OK);
    std::copy(digest, digest + 32, prev);
    ids.push_back(id);
  }
  return ids;
}

// The drained events are one of `type` per token of `tokens` (in any order across nodes:
// an eviction goes leaf first), with the right hashes and parents; BlockStored ones carry
// their token.
void expect_events(const Drained& d, radix_event_type type, const std::vector<int32_t>& tokens, const char* what) {
  const std::vector<int64_t> ids = token_hashes(tokens);
  ASSERT_EQ(d.events.size(), tokens.size()) << what;
  std::vector<bool> seen(tokens.size(), false);
  for (const radix_event& e : d.events) {
    const auto at = std::find(ids.begin(), ids.end(), e.block_hash);
    ASSERT_NE(at, ids.end()) << what << ": an event for a hash no token has";
    const size_t i = static_cast<size_t>(at - ids.begin());
    EXPECT_FALSE(seen[i]) << what << ", token " << i << " twice";
    seen[i] = true;
    EXPECT_EQ(e.type, type) << what << ", token " << i;
    EXPECT_EQ(e.has_parent, i > 0 ? 1 : 0) << what << ", token " << i;
    if (i > 0) {
      EXPECT_EQ(e.parent_hash, ids[i - 1]) << what << ", token " << i;
    }
    if (type == RADIX_EVENT_BLOCK_STORED) {
      ASSERT_EQ(e.token_count, 1u) << what;
      EXPECT_EQ(d.tokens[e.token_offset], tokens[i]) << what << ", token " << i;
    } else {
      EXPECT_EQ(e.token_count, 0u) << what;
    }
  }
}

// A request computes `prompt` (and would go on with one more token); finish caches it.
void compute_and_finish(kvpool* pool, const std::vector<int32_t>& prompt) {
  std::vector<int32_t> longer = prompt;
  longer.push_back(9);
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, longer.data(), longer.size(), nullptr, &seq, &cached), KVPOOL_OK) << kvpool_last_error();
  int64_t chunk = static_cast<int64_t>(prompt.size());
  std::vector<int64_t> slots(prompt.size());
  ASSERT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(kvseq_finish(pool, seq, prompt.size()), KVPOOL_OK) << kvpool_last_error();
}

void expect_clean(kvpool* pool) {
  char report[2048] = {0};
  EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << report;
}

class HostTierEvents : public ::testing::TestWithParam<const char*> {};

TEST_P(HostTierEvents, BackupEvictionLoadBackAndHostEvictionAreReported) {
  Pool pool(events_config(GetParam()));
  const std::vector<int32_t> prompt = tokens_from(300, 24);
  std::vector<int32_t> longer = prompt;
  longer.push_back(9);
  // Finish caches the prompt (BlockStored) and write_through copies it (HostStored).
  compute_and_finish(pool, prompt);
  ASSERT_FALSE(HasFailure());
  Drained d = take_events(pool);
  ASSERT_EQ(d.events.size(), 48u);
  expect_events(Drained{{d.events.begin(), d.events.begin() + 24}, d.tokens}, RADIX_EVENT_BLOCK_STORED, prompt, "finish");
  expect_events(Drained{{d.events.begin() + 24, d.events.end()}, {}}, RADIX_EVENT_HOST_STORED, prompt, "backup");

  // Device eviction keeps the host copy: only the device copy is removed.
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(evicted, 24u);
  expect_events(take_events(pool), RADIX_EVENT_BLOCK_REMOVED, prompt, "device eviction");

  // Load-back: the device copy is stored again (swa: also where the node is split).
  const kvtest::Tiered m = kvtest::host_match(pool, longer);
  ASSERT_EQ(m.host, 24u);
  uint64_t last = 0;
  ASSERT_EQ(kvtest::host_load_back(pool, m.host_node, 24, &last).size(), 24u);
  expect_events(take_events(pool), RADIX_EVENT_BLOCK_STORED, prompt, "load-back");
  expect_clean(pool);

  // Out of the device, then out of the host.
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK) << kvpool_last_error();
  expect_events(take_events(pool), RADIX_EVENT_BLOCK_REMOVED, prompt, "second device eviction");
  ASSERT_EQ(kvhost_evict(pool, 64, &evicted), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(evicted, 24u);
  expect_events(take_events(pool), RADIX_EVENT_HOST_REMOVED, prompt, "host eviction");
  expect_clean(pool);

  ASSERT_EQ(radix_reset(pool), KVPOOL_OK) << kvpool_last_error();
  d = take_events(pool);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].type, RADIX_EVENT_ALL_BLOCKS_CLEARED);
}

// Without `events` nothing is queued, whatever the tier does.
TEST_P(HostTierEvents, NoEventsUnlessAskedFor) {
  std::string json = events_config(GetParam());
  json.replace(json.find(R"("events": true)"), 14, R"("events": false)");
  Pool pool(json);
  compute_and_finish(pool, tokens_from(300, 16));
  ASSERT_FALSE(HasFailure());
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK) << kvpool_last_error();
  EXPECT_TRUE(take_events(pool).events.empty());
}

INSTANTIATE_TEST_SUITE_P(Trees, HostTierEvents, ::testing::Values("swa", "hybrid_linear"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "swa" ? std::string("swa") : std::string("hybrid_linear");
                         });

}  // namespace
