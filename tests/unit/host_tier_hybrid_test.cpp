// The host tier of hybrid_linear pools through the C API (host.h, radix.h, seq.h) on
// CPU pools: the full-attention layers' KV is tiered, mamba states stay on the device;
// a match ends only at a node with a state, device or host-only; the three write
// policies, device and host eviction, load-back with the KV bytes intact, kvseq_begin's
// host hits, bad input, and randomized request workloads with kvpool_check after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "../support/tier_requests.hpp"
#include "kvpool/host.h"
#include "kvpool/mamba.h"
#include "kvpool/radix.h"
#include "kvpool/seq.h"
#include "test_util.hpp"

namespace {

using kvtest::evict_device;
using kvtest::expect_consistent;
using kvtest::node_state;
using kvtest::Pool;
using kvtest::tags_of;
using kvtest::Tiered;
using kvtest::tokens_from;

// The full-attention layers (model layer ids) whose KV the tier copies.
const std::vector<int32_t> kFullLayers = {1, 3};

// tests/gpu builds this file a second time with KVPOOL_HYBRID_TIER_DEVICE="cuda:0": the same
// tests on a CUDA pool (pinned host pages, the CUDA transfers), label gpu.
#ifdef KVPOOL_HYBRID_TIER_DEVICE
constexpr const char* kDeviceKey = "\"device\": \"" KVPOOL_HYBRID_TIER_DEVICE "\", ";
constexpr bool kOnDevice = true;
#else
constexpr const char* kDeviceKey = "";
constexpr bool kOnDevice = false;
#endif

// Copies may still be in flight when a call returns: on a CUDA pool, and on the CPU pool
// of this file's build with KVPOOL_TIER_DEFERRED (host_cache.defer_completion: a copy is
// reported landed a few polls later). The helpers of host_tier_kv.hpp then wait for them
// where a test expects exact results (kvtest::settle), and the random workloads run with
// copies in flight between them.
using kvtest::kDeferKey;
using kvtest::kDeferred;
constexpr bool kCopiesInFlight = kOnDevice || kDeferred;
const bool kSettling = (kvtest::settle_copies() = kCopiesInFlight);

// 4 layers, full attention at 1 and 3, f32 KV of 2 heads x 8 (host_tier_kv.hpp's rows).
// A request needs 5 state slots at most (SGLang's sizing): rows = states / 5.
std::string hybrid_tier_config(int64_t tokens, int states, double ratio, const char* policy, const char* extra = "") {
  const int rows = std::max(1, states / 5);
  return R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [1, 3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
      "conv_dtype": "f32", "ssm_dtype": "f32"}},
      "pool": {)" + std::string(kDeviceKey) + R"("kv_dtype": "f32", "max_total_tokens": )" +
         std::to_string(tokens) + R"(, "max_running_requests": )" + std::to_string(rows) +
         R"(, "mamba_cache_size": )" + std::to_string(states) + R"(, "max_context_len": 128)" + extra +
         R"(}, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": )" + std::to_string(ratio) +
         R"(, "headroom_bytes": 0, "write_policy": ")" + policy + '"' + kDeferKey + "}}";
}

void write_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  kvtest::write_tier_kv(pool, slots, tags, kFullLayers);
}

void expect_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  kvtest::expect_tier_kv(pool, slots, tags, "", kFullLayers);
}

// radix_insert_mamba of fresh slots (KV written) and a fresh state; returns the node.
uint64_t insert_fresh(kvpool* pool, const std::vector<int32_t>& tokens, size_t* prefix_out = nullptr) {
  std::vector<int64_t> slots = kvtest::alloc(pool, tokens.size());
  write_kv(pool, slots, tags_of(tokens));
  int32_t state = -1;
  EXPECT_EQ(kvpool_mamba_alloc(pool, &state, 1), KVPOOL_OK) << kvpool_last_error();
  size_t prefix = 0;
  int32_t exist = 0;
  uint64_t node = 0;
  EXPECT_EQ(radix_insert_mamba(pool, tokens.data(), tokens.size(), slots.data(), slots.size(), nullptr, state, &prefix,
                               &exist, &node),
            KVPOOL_OK)
      << kvpool_last_error();
  // The caller's duplicates of cached tokens, and a state the tree did not take, go back.
  if (prefix > 0) kvtest::free_slots(pool, std::vector<int64_t>(slots.begin(), slots.begin() + static_cast<long>(prefix)));
  if (exist != 0) {
    EXPECT_EQ(kvpool_mamba_free(pool, &state, 1), KVPOOL_OK);
  }
  if (prefix_out != nullptr) *prefix_out = prefix;
  return node;
}

kvhost_stats stats(kvpool* pool) { return kvtest::host_stats(pool); }
Tiered match(kvpool* pool, const std::vector<int32_t>& tokens) { return kvtest::host_match(pool, tokens); }

// host_cache.defer_completion (CPU pools only): copies land a few polls late, as a GPU's
// do. A backup keeps the last node it copies locked (its state and its path's KV) until a
// poll sees it land; a load-back keeps the chain's end; kvhost_poll with wait lands them;
// radix_reset lands them first. (This build's pools defer already, or are CUDA pools: the
// tests run in the plain build.)
#if !defined(KVPOOL_TIER_DEFERRED) && !defined(KVPOOL_HYBRID_TIER_DEVICE)
kvtest::InFlightCalls in_flight_calls(kvpool* pool) {
  return {[pool](const std::vector<int32_t>& t) { return insert_fresh(pool, t); },
          [pool] {  // evicting the leaf's state would delete the leaf
            size_t freed = 0;
            EXPECT_EQ(radix_evict_mamba(pool, 1, &freed), KVPOOL_OK) << kvpool_last_error();
            return freed;
          },
          [pool](const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) { expect_kv(pool, slots, tags); }};
}

TEST(HostTierHybrid, CopiesInFlightKeepTheirNodesUntilAPollSeesThemLand) {
  Pool pool(kvtest::with_deferred_completion(hybrid_tier_config(64, 8, 4, "write_through")));
  kvtest::expect_copies_in_flight_hold_their_nodes(pool, in_flight_calls(pool));
}

TEST(HostTierHybrid, ResetWithCopiesInFlight) {
  Pool pool(kvtest::with_deferred_completion(hybrid_tier_config(64, 8, 4, "write_through")));
  kvtest::expect_reset_lands_copies(pool, in_flight_calls(pool));
}
#endif

TEST(HostTierHybrid, WriteThroughKeepsTheStateAndLoadsTheKvBack) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 24);
  const uint64_t node = insert_fresh(pool, t);
  expect_consistent(pool);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 1);
  EXPECT_EQ(on_host, 1) << "write_through copies a node when it is created";
  EXPECT_EQ(stats(pool).used_tokens, 24u);

  EXPECT_EQ(evict_device(pool, 64), 24u);
  expect_consistent(pool);
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0) << "backed up: the node stays as host-only";
  EXPECT_EQ(on_host, 1);
  size_t evictable = 0, protected_len = 0;
  ASSERT_EQ(radix_state_sizes(pool, &evictable, &protected_len), KVPOOL_OK);
  EXPECT_EQ(evictable, 1u) << "the host-only node keeps its mamba state on the device";
  EXPECT_EQ(stats(pool).host_only_tokens, 24u);

  // radix_match sees nothing usable on the device; kvhost_match reports the host part.
  std::vector<int32_t> longer = t;
  longer.push_back(7);
  Tiered m = match(pool, longer);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 24u);
  EXPECT_EQ(m.host_node, node);

  uint64_t last = 0;
  const std::vector<int64_t> slots = kvtest::host_load_back(pool, m.host_node, 24, &last);
  EXPECT_EQ(slots.size(), 24u);
  EXPECT_EQ(last, node);
  expect_kv(pool, slots, tags_of(t));
  expect_consistent(pool);
  m = match(pool, longer);
  EXPECT_EQ(m.device, 24u);
  EXPECT_EQ(m.host, 0u);
  EXPECT_EQ(m.slots, slots);
  const kvhost_stats s = stats(pool);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_EQ(s.load_tokens, 24u);
  EXPECT_EQ(s.host_only_tokens, 0u);
}

TEST(HostTierHybrid, AMatchEndsOnlyWhereAStateExists) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through"));
  // Two sequences sharing 16 tokens: the split leaves a tombstone (no state) above them.
  std::vector<int32_t> a = tokens_from(100, 16), b = a;
  for (int32_t i = 0; i < 8; ++i) {
    a.push_back(500 + i);
    b.push_back(600 + i);
  }
  insert_fresh(pool, a);
  insert_fresh(pool, b);
  EXPECT_EQ(evict_device(pool, 64), 32u);
  expect_consistent(pool);
  // A third continuation matches the shared 16 tokens, all host-only and without a state:
  // nothing to continue from.
  std::vector<int32_t> c = tokens_from(100, 16);
  c.push_back(700);
  Tiered m = match(pool, c);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 0u) << "a host-only tombstone is not a match end";
  EXPECT_EQ(m.host_node, m.node);
  std::vector<int64_t> slots(32);
  size_t loaded = 9;
  uint64_t last = 0;
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &last), KVPOOL_OK);
  EXPECT_EQ(loaded, 0u);
  // Loading `a` back brings the tombstone's KV too (the chain from the device part).
  std::vector<int32_t> a2 = a;
  a2.push_back(1);
  m = match(pool, a2);
  EXPECT_EQ(m.host, 24u);
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &last), KVPOOL_OK);
  EXPECT_EQ(loaded, 24u);
  slots.resize(24);
  expect_kv(pool, slots, tags_of(a));
  expect_consistent(pool);
  // `b` now hangs below a device tombstone: only its own 8 tokens are host-only, fewer
  // than the 10-token threshold, so they are recomputed rather than loaded.
  std::vector<int32_t> b2 = b;
  b2.push_back(1);
  m = match(pool, b2);
  EXPECT_EQ(m.host, 8u);
  const uint64_t refused_before = stats(pool).loads_refused;
  slots.assign(8, 0);
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &last), KVPOOL_OK);
  EXPECT_EQ(loaded, 0u);
  EXPECT_EQ(stats(pool).loads_refused, refused_before + 1);
  int32_t on_device = 1, on_host = 0;
  node_state(pool, m.host_node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0);
  expect_consistent(pool);
}

TEST(HostTierHybrid, EvictingAHostOnlyLeafsStateDeletesItsHostCopy) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 20);
  const uint64_t node = insert_fresh(pool, t);
  EXPECT_EQ(evict_device(pool, 64), 20u);
  EXPECT_EQ(stats(pool).used_tokens, 20u);
  // The mamba list evicts states on its own: a host-only leaf without its state is useless.
  size_t evicted = 0;
  ASSERT_EQ(radix_evict_mamba(pool, 1, &evicted), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(evicted, 1u);
  int32_t on_device = 0, on_host = 0;
  EXPECT_EQ(kvhost_node_state(pool, node, &on_device, &on_host, nullptr), KVPOOL_ERR_INVALID_ARGUMENT) << "deleted";
  EXPECT_EQ(stats(pool).used_tokens, 0u);
  expect_consistent(pool);
}

TEST(HostTierHybrid, SelectiveWriteThroughCopiesOnTheSecondHit) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through_selective"));
  const std::vector<int32_t> t = tokens_from(100, 16);
  const uint64_t node = insert_fresh(pool, t);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_host, 0) << "one hit";
  size_t prefix = 0;
  insert_fresh(pool, t, &prefix);
  EXPECT_EQ(prefix, 16u);
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_host, 1) << "the second hit copies it";
  expect_consistent(pool);
}

TEST(HostTierHybrid, WriteBackCopiesAtEvictionOnly) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_back"));
  const std::vector<int32_t> t = tokens_from(100, 16);
  const uint64_t node = insert_fresh(pool, t);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_host, 0);
  EXPECT_EQ(stats(pool).backups, 0u);
  EXPECT_EQ(evict_device(pool, 16), 16u);
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0);
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(stats(pool).backups, 1u);
  expect_consistent(pool);
  std::vector<int32_t> longer = t;
  longer.push_back(3);
  const Tiered m = match(pool, longer);
  uint64_t last = 0;
  const std::vector<int64_t> slots = kvtest::host_load_back(pool, m.host_node, 16, &last);
  ASSERT_EQ(slots.size(), 16u);
  expect_kv(pool, slots, tags_of(t));
  expect_consistent(pool);
}

TEST(HostTierHybrid, HostEvictionDeletesHostOnlyLeavesWithTheirStates) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through"));
  insert_fresh(pool, tokens_from(100, 12));
  insert_fresh(pool, tokens_from(200, 12));
  EXPECT_EQ(evict_device(pool, 64), 24u);
  size_t states_before = 0, protected_len = 0;
  ASSERT_EQ(radix_state_sizes(pool, &states_before, &protected_len), KVPOOL_OK);
  EXPECT_EQ(states_before, 2u);
  size_t freed = 0;
  ASSERT_EQ(kvhost_evict(pool, 1, &freed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(freed, 12u) << "the least recently used host-only leaf, whole";
  size_t states_after = 0;
  ASSERT_EQ(radix_state_sizes(pool, &states_after, &protected_len), KVPOOL_OK);
  EXPECT_EQ(states_after, 1u);
  EXPECT_EQ(stats(pool).used_tokens, 12u);
  expect_consistent(pool);
}

TEST(HostTierHybrid, RequestsLoadHostHitsBack) {
  Pool pool(hybrid_tier_config(64, 12, 4, "write_through"));
  std::vector<int32_t> t = tokens_from(100, 30);
  uint64_t id = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, t.data(), t.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 0u);
  int64_t chunk = 30;
  std::vector<int64_t> out(30);
  ASSERT_EQ(kvseq_extend(pool, &id, 1, &chunk, 1, out.data(), out.size()), KVPOOL_OK) << kvpool_last_error();
  write_kv(pool, out, tags_of(t));
  ASSERT_EQ(kvseq_finish(pool, id, 30), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(stats(pool).used_tokens, 30u) << "finish caches the request and write_through copies it";
  EXPECT_EQ(evict_device(pool, 64), 30u);
  t.push_back(9);
  ASSERT_EQ(kvseq_begin(pool, t.data(), t.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 30u);
  const kvtest::Held held = kvtest::held_by(pool, id, t.size());
  EXPECT_EQ(held.info.host_hit, 30u);
  std::vector<int32_t> prompt(t.begin(), t.end() - 1);
  expect_kv(pool, held.slots, tags_of(prompt));
  expect_consistent(pool);
  ASSERT_EQ(kvseq_abort(pool, id), KVPOOL_OK);
  expect_consistent(pool);
}

// insert_fresh, then a device eviction of everything: the node is host-only, with its state.
uint64_t insert_host_only(kvpool* pool, const std::vector<int32_t>& tokens) {
  const uint64_t node = insert_fresh(pool, tokens);
  EXPECT_EQ(evict_device(pool, tokens.size()), tokens.size());
  return node;
}

size_t states_available(kvpool* pool) {
  size_t n = 0;
  EXPECT_EQ(kvpool_mamba_available(pool, &n), KVPOOL_OK) << kvpool_last_error();
  return n;
}

// Requests of `n` tokens each, none shared with another prompt: each takes a state slot.
std::vector<uint64_t> begin_unrelated(kvpool* pool, size_t requests, size_t n) {
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < requests; ++i) {
    const std::vector<int32_t> t = tokens_from(50000 + 1000 * static_cast<int32_t>(i), n);
    uint64_t id = 0;
    size_t cached = 0;
    EXPECT_EQ(kvseq_begin(pool, t.data(), t.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
    ids.push_back(id);
  }
  return ids;
}

// No state slot free, and the only evictable state is the one of the host-only node a
// begin would load: once loaded, that node's state is the request's match, so nothing is
// left for the request's own slot. The begin fails before it loads anything (it used to
// load the KV back, then fail, leaving the loaded chain as device cache).
TEST(HostTierHybrid, ABeginThatFindsNoStateSlotLoadsNothingBack) {
  Pool pool(hybrid_tier_config(64, 5, 4, "write_through"));  // 5 state slots, 1 request row
  const std::vector<int32_t> t = tokens_from(100, 24);
  const uint64_t node = insert_host_only(pool, t);
  std::vector<uint64_t> others = begin_unrelated(pool, 4, 4);
  ASSERT_EQ(states_available(pool), 0u);
  size_t evictable_states = 0, locked_states = 0;
  ASSERT_EQ(radix_state_sizes(pool, &evictable_states, &locked_states), KVPOOL_OK);
  ASSERT_EQ(evictable_states, 1u) << "the host-only node's state only";
  std::vector<int32_t> longer = t;
  longer.push_back(7);
  const Tiered m = match(pool, longer);
  ASSERT_EQ(m.host, 24u);
  ASSERT_EQ(m.host_node, node);

  const std::string before = kvtest::tier_state(pool, others);
  const std::vector<int64_t> free_before = kvtest::free_list(pool);
  uint64_t id = 0;
  size_t cached = 0;
  EXPECT_EQ(kvseq_begin(pool, longer.data(), longer.size(), nullptr, &id, &cached), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(kvpool_last_error()).find("no mamba state slot is free or evictable"), std::string::npos)
      << kvpool_last_error();
  const std::string after = kvtest::tier_state(pool, others);
  EXPECT_EQ(before, after) << kvtest::first_difference(before, after);
  EXPECT_EQ(kvtest::free_list(pool), free_before);
  int32_t on_device = 1, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0) << "the node stays host-only";
  EXPECT_EQ(on_host, 1);
  const kvhost_stats s = stats(pool);
  EXPECT_EQ(s.loads, 0u);
  EXPECT_EQ(s.host_only_tokens, 24u);
  size_t evictable = 0, protected_len = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &protected_len, &total), KVPOOL_OK);
  EXPECT_EQ(total, 0u) << "no device cache";
  expect_consistent(pool);

  // With a state slot free again, the same begin loads the host hit back.
  ASSERT_EQ(kvseq_abort(pool, others.back()), KVPOOL_OK);
  others.pop_back();
  ASSERT_EQ(kvseq_begin(pool, longer.data(), longer.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 24u);
  const kvtest::Held held = kvtest::held_by(pool, id, longer.size());
  EXPECT_EQ(held.info.host_hit, 24u);
  EXPECT_EQ(held.slots.size(), 24u);
  expect_kv(pool, held.slots, tags_of(t));
  expect_consistent(pool);
}

// The same shortage of state slots, but the device has no room for the chain: the load is
// refused (as it always was), and the begin still succeeds by taking the host-only node's
// state for the request, as before (so the check above refuses only loads that would fit).
TEST(HostTierHybrid, ABeginWhoseLoadIsRefusedTakesTheHostNodesState) {
  Pool pool(hybrid_tier_config(64, 5, 4, "write_through"));  // 5 state slots, 1 request row
  const std::vector<int32_t> t = tokens_from(100, 24);
  const uint64_t node = insert_host_only(pool, t);
  // A request holding 50 of the 64 device slots (uncached: nothing to evict).
  std::vector<uint64_t> others = begin_unrelated(pool, 1, 50);
  int64_t chunk = 50;
  std::vector<int64_t> out(50);
  ASSERT_EQ(kvseq_extend(pool, others.data(), 1, &chunk, 1, out.data(), out.size()), KVPOOL_OK) << kvpool_last_error();
  const std::vector<uint64_t> more = begin_unrelated(pool, 3, 4);
  ASSERT_EQ(states_available(pool), 0u);
  ASSERT_EQ(kvtest::available(pool), 14u);
  std::vector<int32_t> longer = t;
  longer.push_back(7);
  uint64_t id = 0;
  size_t cached = 99;
  ASSERT_EQ(kvseq_begin(pool, longer.data(), longer.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 0u);
  const kvhost_stats s = stats(pool);
  EXPECT_EQ(s.loads, 0u);
  EXPECT_EQ(s.loads_refused, 1u);
  EXPECT_EQ(s.used_tokens, 0u) << "the host-only leaf went with its state";
  int32_t on_device = 0, on_host = 0;
  EXPECT_EQ(kvhost_node_state(pool, node, &on_device, &on_host, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  expect_consistent(pool);
}

TEST(HostTierHybrid, BadInputIsRefusedAndChangesNothing) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 20);
  insert_fresh(pool, t);
  evict_device(pool, 64);
  std::vector<int32_t> longer = t;
  longer.push_back(1);
  const Tiered m = match(pool, longer);
  const kvhost_stats before = stats(pool);
  std::vector<int64_t> slots(20);
  size_t loaded = 0;
  uint64_t last = 0;
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), 19, &loaded, &last), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(loaded, 20u) << "the size it needs";
  EXPECT_EQ(kvhost_load_back(pool, m.host_node + (uint64_t{1} << 32), slots.data(), 20, &loaded, &last),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, nullptr, 20, &loaded, &last), KVPOOL_ERR_INVALID_ARGUMENT);
  const kvhost_stats after = stats(pool);
  EXPECT_EQ(after.loads, before.loads);
  EXPECT_EQ(after.host_only_tokens, before.host_only_tokens);
  EXPECT_EQ(after.used_tokens, before.used_tokens);
  // A host-only node cannot be locked before it is loaded back.
  EXPECT_EQ(radix_lock(pool, m.host_node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("host-only"), std::string::npos) << kvpool_last_error();
  expect_consistent(pool);
}

TEST(HostTierHybrid, WaitLayerKnowsWhichLayersAreTiered) {
  Pool pool(hybrid_tier_config(64, 8, 4, "write_through"));
  // Layers 1 and 3 are tiered (indices 0 and 1), 0 and 2 are mamba layers: nothing to wait for.
  for (int32_t layer = 0; layer < 4; ++layer) {
    EXPECT_EQ(kvhost_wait_layer(pool, 0, layer, nullptr), KVPOOL_OK) << "layer " << layer << ": " << kvpool_last_error();
  }
  EXPECT_EQ(kvhost_wait_layer(pool, 0, 4, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_wait_layer(pool, 3, 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  size_t completed = 9;
  EXPECT_EQ(kvhost_poll(pool, 1, &completed), KVPOOL_OK);
  EXPECT_EQ(completed, 0u) << "nothing is ever in flight";
}

TEST(HostTierHybrid, ConfigurationsTheTierDoesNotServeAreRefused) {
  kvpool* pool = nullptr;
  const std::string extra = hybrid_tier_config(64, 8, 4, "write_through", R"(, "mamba_extra_buffer": true)");
  EXPECT_EQ(kvpool_create(extra.data(), extra.size(), &pool), KVPOOL_ERR_UNSUPPORTED) << kvpool_last_error();
  EXPECT_NE(std::string(kvpool_last_error()).find("mamba_extra_buffer"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(pool, nullptr);
}

// The radix_* path at random: inserts of sequences sharing prefixes (each with a state),
// kvhost_match with load-backs, locks held for a while, device, host and state eviction,
// under each write policy; kvpool_check after every step, and every match's slots hold
// the KV of the tokens they stand for.
class HostTierHybridRadixRandom : public ::testing::TestWithParam<const char*> {};

TEST_P(HostTierHybridRadixRandom, MatchesKeepTheirBytesAndTheAccountingAddsUp) {
  Pool pool(hybrid_tier_config(128, 40, 2.5, GetParam()));
  std::mt19937 rng(99);
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 3; ++g) prefixes.push_back(tokens_from(1000 * (g + 1), 10 + static_cast<size_t>(g) * 6));
  std::vector<uint64_t> locked;
  uint64_t loaded_total = 0;
  size_t in_flight_steps = 0;
  for (int step = 0; step < 1500; ++step) {
    std::vector<int32_t> t = prefixes[rng() % prefixes.size()];
    const size_t tail = rng() % 3 == 0 ? 0 : 1 + rng() % 10;
    for (size_t i = 0; i < tail; ++i) t.push_back(static_cast<int32_t>(rng() % 20));
    const int op = static_cast<int>(rng() % 10);
    if (op < 3) {  // insert, when a state and the slots can be had
      size_t states = 0, freed = 0;
      ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
      if (states == 0) {
        ASSERT_EQ(radix_evict_mamba(pool, 1, &freed), KVPOOL_OK) << kvpool_last_error();
        ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
      }
      if (kvtest::available(pool) < t.size()) {
        ASSERT_EQ(radix_evict(pool, t.size(), &freed), KVPOOL_OK) << kvpool_last_error();
      }
      if (states > 0 && kvtest::available(pool) >= t.size()) insert_fresh(pool, t);
    } else if (op < 6) {  // match, load a host hit back, check the bytes, maybe lock
      std::vector<int32_t> probe = t;
      probe.push_back(7);
      Tiered m = match(pool, probe);
      expect_kv(pool, m.slots, kvtest::prefix_tags(probe, m.device));
      if (m.host > 0) {
        std::vector<int64_t> slots(m.host);
        size_t loaded = 0;
        uint64_t last = 0;
        ASSERT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &last), KVPOOL_OK)
            << kvpool_last_error();
        loaded_total += loaded;
        const Tiered after = match(pool, probe);
        expect_kv(pool, after.slots, kvtest::prefix_tags(probe, after.device));
        if (loaded > 0) {
          EXPECT_EQ(after.node, m.host_node);
          EXPECT_EQ(after.device, m.device + m.host) << "step " << step;
        }
        m = after;
      }
      if (m.device > 0 && locked.size() < 3 && rng() % 2 == 0) {
        ASSERT_EQ(radix_lock(pool, m.node), KVPOOL_OK) << kvpool_last_error();
        locked.push_back(m.node);
      }
    } else if (op < 7 && !locked.empty()) {
      ASSERT_EQ(radix_unlock(pool, locked.back()), KVPOOL_OK) << kvpool_last_error();
      locked.pop_back();
    } else if (op < 8) {
      size_t freed = 0;
      ASSERT_EQ(radix_evict(pool, 1 + rng() % 40, &freed), KVPOOL_OK) << kvpool_last_error();
    } else if (op < 9) {
      size_t freed = 0;
      ASSERT_EQ(kvhost_evict(pool, 1 + rng() % 30, &freed), KVPOOL_OK) << kvpool_last_error();
    } else {
      size_t freed = 0;
      ASSERT_EQ(radix_evict_mamba(pool, 1, &freed), KVPOOL_OK) << kvpool_last_error();
    }
    char report[4096];
    ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << "step " << step << ":\n" << report;
    if (kvtest::host_stats_now(pool).copies_in_flight > 0) ++in_flight_steps;
  }
  // write_back copies at eviction and waits for them; its loads land at the next match (settle()).
  const bool copies_stay = std::string(GetParam()) != "write_back";
  EXPECT_TRUE(!kDeferred || !copies_stay || in_flight_steps > 0) << "no step left a copy in flight";
  for (uint64_t node : locked) ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK);
  expect_consistent(pool);
  const kvhost_stats s = stats(pool);
  EXPECT_GT(s.backups, 0u);
  EXPECT_GT(loaded_total, 0u) << "the workload must load host hits back";
  EXPECT_EQ(s.load_tokens, loaded_total);
}

INSTANTIATE_TEST_SUITE_P(Policies, HostTierHybridRadixRandom,
                         ::testing::Values("write_through", "write_through_selective", "write_back"));

// Random request workloads (tests/support/tier_requests.hpp) on a hybrid pool, with the
// mamba list evicting states on its own as more pressure.
struct Workload {
  const char* policy;
  double ratio;
  int states;
  int live = 0;        // requests begun at once at most; 0: one per request row (states / 5)
  int64_t tokens = 96;  // device KV slots
};

class HostTierHybridRandom : public ::testing::TestWithParam<Workload> {};

TEST_P(HostTierHybridRandom, RequestsKeepTheirBytesAndTheAccountingAddsUp) {
  const Workload w = GetParam();
  Pool pool(hybrid_tier_config(w.tokens, w.states, w.ratio, w.policy));
  kvtest::TierRequests requests;
  requests.seed = 4321 + static_cast<unsigned>(w.states);
  requests.copies_in_flight = kCopiesInFlight;
  requests.max_live = static_cast<size_t>(w.live > 0 ? w.live : std::max(1, w.states / 5));
  requests.begin_may_fail = true;
  requests.layers = kFullLayers;
  requests.pressure = [&](std::mt19937& rng, size_t /*live*/) {
    if (rng() % 16 == 0) {  // the mamba list evicts states on its own
      size_t freed = 0;
      ASSERT_EQ(radix_evict_mamba(pool, 1, &freed), KVPOOL_OK) << kvpool_last_error();
    }
  };
  uint64_t host_hits = 0;
  size_t in_flight_steps = 0;
  requests.in_flight_steps = &in_flight_steps;
  kvtest::run_tier_requests(pool, requests, &host_hits);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(!kDeferred || in_flight_steps > 0) << "no step left a copy in flight";
  expect_consistent(pool);
  const kvhost_stats s = stats(pool);
  EXPECT_GT(s.backups, 0u);
  EXPECT_GT(host_hits, 0u) << "the workload must reach the host tier";
  EXPECT_EQ(s.load_tokens, host_hits) << "every load-back was a request's host hit";
}

INSTANTIATE_TEST_SUITE_P(Policies, HostTierHybridRandom,
                         ::testing::Values(Workload{"write_through", 3.0, 20}, Workload{"write_through_selective", 3.0, 20},
                                           Workload{"write_back", 3.0, 20}, Workload{"write_through", 1.5, 25},
                                           Workload{"write_back", 1.5, 25},
                                           // More requests than rows, a small device: begins fail for want of a
                                           // state slot, extends for want of a row (each failure changes nothing).
                                           Workload{"write_through", 4.0, 10, 6, 40}, Workload{"write_back", 4.0, 10, 6, 40}),
                         [](const ::testing::TestParamInfo<Workload>& info) {
                           return std::string(info.param.policy) + "_ratio" +
                                  std::to_string(static_cast<int>(info.param.ratio * 10)) + "_states" +
                                  std::to_string(info.param.states) +
                                  (info.param.live > 0 ? "_live" + std::to_string(info.param.live) : "");
                         });

}  // namespace
