// The host tier through the C API (host.h, radix.h, seq.h) on CPU pools: node
// states, the three write policies, device and host eviction, load-back with the
// KV bytes intact, kvseq_begin's host hits, events, bad input, and randomized
// request workloads with kvpool_check after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "../support/tier_requests.hpp"
#include "test_util.hpp"

namespace {

using kvtest::expect_consistent;
using kvtest::Pool;

// An mha f32 pool on the CPU with a host tier of `ratio` x its tokens.
std::string tier_config(int page, int64_t tokens, double ratio, const char* policy, bool events = false,
                        const char* layout = "layer_first") {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": 8, "max_context_len": 64}, "prefix_cache": {"kind": "radix", "events": )" +
         (events ? "true" : "false") + R"(}, "host_cache": {"ratio": )" + std::to_string(ratio) +
         R"(, "headroom_bytes": 0, "write_policy": ")" + policy + R"(", "layout": ")" + layout + R"(", "io_backend": ")" +
         (std::string(layout) == "page_first_direct" ? "direct" : "kernel") + R"("}})";
}

using kvtest::kTierLayers;
using kvtest::kTierRow;
using kvtest::node_state;
using kvtest::Tiered;
using kvtest::tokens_from;

kvhost_stats stats(kvpool* pool) { return kvtest::host_stats(pool); }
Tiered match(kvpool* pool, const std::vector<int32_t>& tokens) { return kvtest::host_match(pool, tokens); }

void write_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  kvtest::write_tier_kv(pool, slots, tags);
}

void expect_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  kvtest::expect_tier_kv(pool, slots, tags);
}

// radix_insert of freshly allocated slots holding tags 1000*first + i.
uint64_t insert_fresh(kvpool* pool, const std::vector<int32_t>& tokens, std::vector<int64_t>* slots_out = nullptr) {
  std::vector<int64_t> slots = kvtest::alloc(pool, tokens.size());
  std::vector<uint64_t> tags(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tags[i] = static_cast<uint64_t>(tokens[i]);
  write_kv(pool, slots, tags);
  size_t prefix = 0;
  uint64_t node = 0;
  EXPECT_EQ(radix_insert(pool, tokens.data(), tokens.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node), KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(prefix, 0u);
  if (slots_out != nullptr) *slots_out = slots;
  return node;
}

TEST(HostTier, WriteThroughBacksUpOnInsertAndLoadsBackTheSameBytes) {
  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  const std::vector<int32_t> key = tokens_from(100, 16);
  const uint64_t node = insert_fresh(pool, key);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 1);
  EXPECT_EQ(on_host, 1) << "write_through copies a node when it is created";
  kvhost_stats s = stats(pool);
  EXPECT_EQ(s.backups, 1u);
  EXPECT_EQ(s.backup_tokens, 16u);
  EXPECT_EQ(s.used_tokens, 16u);
  EXPECT_EQ(s.host_only_tokens, 0u);
  EXPECT_EQ(s.bytes_to_host, 16u * kTierLayers * 2 * kTierRow * 4);
  expect_consistent(pool);

  // Device eviction keeps the backed-up node as host-only.
  const size_t free_before = kvtest::available(pool);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 16, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 16u);
  EXPECT_EQ(kvtest::available(pool), free_before + 16);
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0);
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(stats(pool).host_only_tokens, 16u);
  size_t evictable = 0, protected_len = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &protected_len, &total), KVPOOL_OK);
  EXPECT_EQ(total, 0u) << "radix_sizes counts device tokens";
  expect_consistent(pool);

  // A plain match sees nothing on the device; the tiered one the host part.
  std::vector<int64_t> plain(16);
  size_t matched = 99;
  uint64_t last = 0;
  ASSERT_EQ(radix_match(pool, key.data(), key.size(), nullptr, plain.data(), plain.size(), &matched, &last), KVPOOL_OK);
  EXPECT_EQ(matched, 0u);
  Tiered m = match(pool, key);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 16u);
  EXPECT_EQ(m.host_node, node);

  // Load-back: fresh device slots holding the bytes written before the eviction.
  uint64_t back = 0;
  const std::vector<int64_t> slots = kvtest::host_load_back(pool, m.host_node, 16, &back);
  EXPECT_EQ(slots.size(), 16u);
  EXPECT_EQ(back, node);
  std::vector<uint64_t> tags(key.begin(), key.end());
  expect_kv(pool, slots, tags);
  m = match(pool, key);
  EXPECT_EQ(m.device, 16u);
  EXPECT_EQ(m.host, 0u);
  EXPECT_EQ(m.slots, slots);
  s = stats(pool);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_EQ(s.load_tokens, 16u);
  EXPECT_EQ(s.bytes_to_device, s.bytes_to_host);
  EXPECT_EQ(s.host_only_tokens, 0u);
  EXPECT_EQ(s.used_tokens, 16u) << "the host copy stays: the node is device+host again";
  expect_consistent(pool);
}

// Device tokens of the tree (radix_sizes: evictable + protected).
size_t device_tokens(kvpool* pool) {
  size_t evictable = 0, protected_len = 0, total = 0;
  EXPECT_EQ(radix_sizes(pool, &evictable, &protected_len, &total), KVPOOL_OK) << kvpool_last_error();
  return total;
}

TEST(HostTier, LoadBackCountsTheDeviceTokensItEvicts) {
  // 64 device tokens (16 pages of 4). A 16-token key goes to the host, then four others
  // fill the device: loading the key back must evict exactly one 16-token node (lru).
  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  const std::vector<int32_t> key = tokens_from(100, 16);
  const uint64_t node = insert_fresh(pool, key);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 16, &evicted), KVPOOL_OK);
  ASSERT_EQ(evicted, 16u);
  std::vector<std::vector<int32_t>> fill;
  std::vector<uint64_t> fill_nodes;
  for (int32_t k = 0; k < 4; ++k) {
    fill.push_back(tokens_from(1000 * (k + 1), 16));
    fill_nodes.push_back(insert_fresh(pool, fill.back()));
  }
  ASSERT_EQ(kvtest::available(pool), 0u);
  EXPECT_EQ(stats(pool).load_evicted_tokens, 0u) << "radix_evict is not a load-back";

  Tiered m = match(pool, key);
  ASSERT_EQ(m.host, 16u);
  std::vector<int64_t> slots(16);
  size_t loaded = 0;
  uint64_t back = 0;
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &back), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(loaded, 16u);
  EXPECT_EQ(back, node);
  kvhost_stats s = stats(pool);
  EXPECT_EQ(s.load_evicted_tokens, 16u);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_EQ(device_tokens(pool), 64u) << "16 evicted, 16 loaded";
  int32_t on_device = 1, on_host = 0;
  node_state(pool, fill_nodes[0], &on_device, &on_host);
  EXPECT_EQ(on_device, 0) << "the least recently used key made the room";
  EXPECT_EQ(on_host, 1);
  expect_kv(pool, slots, std::vector<uint64_t>(key.begin(), key.end()));
  expect_consistent(pool);

  // kvseq_begin loads a host hit back the same way, and counts what it evicts.
  std::vector<int32_t> prompt = fill[0];
  prompt.push_back(7);
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 16u);
  s = stats(pool);
  EXPECT_EQ(s.load_evicted_tokens, 32u);
  EXPECT_EQ(s.loads, 2u);
  node_state(pool, fill_nodes[1], &on_device, &on_host);
  EXPECT_EQ(on_device, 0) << "the next key in lru order";

  // A load that cannot get room even after evicting everything unlocked is refused; the
  // tokens it evicted trying are counted all the same. Lock all but one 16-token key,
  // send the request's key (and the loaded one) to the host and fill with locked keys.
  ASSERT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK);
  ASSERT_EQ(device_tokens(pool), 0u);
  std::vector<uint64_t> locked;
  for (int32_t k = 0; k < 3; ++k) {
    locked.push_back(insert_fresh(pool, tokens_from(50000 + 1000 * k, 16)));
    ASSERT_EQ(radix_lock(pool, locked.back()), KVPOOL_OK);
  }
  insert_fresh(pool, tokens_from(60000, 8));  // the one unlocked node: 8 tokens, too few for 16
  std::vector<int64_t> spare = kvtest::alloc(pool, 8);  // the rest of the device, held by the caller
  ASSERT_EQ(kvtest::available(pool), 0u);
  const kvhost_stats before = stats(pool);
  m = match(pool, key);
  ASSERT_EQ(m.host, 16u);
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &back), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(loaded, 0u) << "8 evictable tokens are not room for 16";
  s = stats(pool);
  EXPECT_EQ(s.loads_refused, before.loads_refused + 1);
  EXPECT_EQ(s.load_evicted_tokens, before.load_evicted_tokens + 8);
  EXPECT_EQ(s.loads, before.loads);
  EXPECT_EQ(device_tokens(pool), 48u);
  kvtest::free_slots(pool, spare);
  for (uint64_t n : locked) ASSERT_EQ(radix_unlock(pool, n), KVPOOL_OK);

  // A caller built before load_evicted_tokens passes a smaller struct: the fields before
  // it are written, the new one is not; one byte less than that is refused.
  kvhost_stats old = KVHOST_STATS_INIT;
  old.struct_size = static_cast<uint32_t>(offsetof(kvhost_stats, load_evicted_tokens));
  old.load_evicted_tokens = 12345;
  ASSERT_EQ(kvhost_get_stats(pool, &old), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(old.load_evicted_tokens, 12345u);
  EXPECT_EQ(old.loads_refused, s.loads_refused);
  EXPECT_EQ(old.bytes_to_device, s.bytes_to_device);
  EXPECT_EQ(old.struct_size, offsetof(kvhost_stats, load_evicted_tokens)) << "the caller's size is kept";
  old.struct_size -= 1;
  EXPECT_EQ(kvhost_get_stats(pool, &old), KVPOOL_ERR_INVALID_ARGUMENT);
  expect_consistent(pool);
}

TEST(HostTier, MatchOfNothingReturnsTheRootForBothNodes) {
  // Found by the host fuzz target: a key shorter than a page, an empty key or a namespace
  // the tree has never seen returned host_node 0, which kvhost_load_back refused as stale;
  // host.h promises the root, which loads nothing.
  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  insert_fresh(pool, tokens_from(1, 8));
  const std::vector<int32_t> short_key = {1, 2, 3}, key = tokens_from(1, 8), none;
  struct Case {
    const std::vector<int32_t>* tokens;
    const char* extra_key;
  };
  for (const Case& c : {Case{&short_key, nullptr}, Case{&none, nullptr}, Case{&key, "never-inserted"}}) {
    std::vector<int64_t> slots(8);
    size_t matched = 9, host_matched = 9;
    uint64_t node = 0, host_node = 0;
    ASSERT_EQ(kvhost_match(pool, c.tokens->data(), c.tokens->size(), c.extra_key, slots.data(), slots.size(), &matched,
                           &host_matched, &node, &host_node),
              KVPOOL_OK)
        << kvpool_last_error();
    EXPECT_EQ(matched, 0u);
    EXPECT_EQ(host_matched, 0u);
    EXPECT_EQ(host_node, node) << "both are the root";
    size_t plain = 9;
    uint64_t root = 0;
    ASSERT_EQ(radix_match(pool, key.data(), 0, nullptr, slots.data(), slots.size(), &plain, &root), KVPOOL_OK);
    EXPECT_EQ(node, root);
    size_t loaded = 9;
    uint64_t back = 0;
    ASSERT_EQ(kvhost_load_back(pool, host_node, slots.data(), slots.size(), &loaded, &back), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(loaded, 0u);
    EXPECT_EQ(back, root);
  }
  expect_consistent(pool);
}

TEST(HostTier, SelectiveWriteThroughCopiesOnTheSecondHit) {
  Pool pool(tier_config(4, 64, 4.0, "write_through_selective"));
  const std::vector<int32_t> key = tokens_from(1, 8);
  std::vector<int64_t> slots;
  const uint64_t node = insert_fresh(pool, key, &slots);
  EXPECT_EQ(stats(pool).backups, 0u);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_host, 0);
  // Without a copy, device eviction deletes the node as a plain radix cache does.
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 8, &evicted), KVPOOL_OK);
  EXPECT_FALSE(kvhost_node_state(pool, node, &on_device, &on_host, nullptr) == KVPOOL_OK) << "the node is gone";
  // Inserted twice: the second insert's hit triggers the copy.
  const uint64_t again = insert_fresh(pool, key);
  std::vector<int64_t> dup = kvtest::alloc(pool, key.size());
  size_t prefix = 0;
  uint64_t n2 = 0;
  ASSERT_EQ(radix_insert(pool, key.data(), key.size(), dup.data(), dup.size(), nullptr, 0, &prefix, &n2), KVPOOL_OK);
  EXPECT_EQ(prefix, 8u);
  kvtest::free_slots(pool, dup);
  EXPECT_EQ(n2, again);
  EXPECT_EQ(stats(pool).backups, 1u);
  node_state(pool, again, &on_device, &on_host);
  EXPECT_EQ(on_host, 1);
  expect_consistent(pool);
}

TEST(HostTier, ChunkedPrefillCountsNoHits) {
  // write_through_selective copies on the second hit; the inserts of a prompt's earlier
  // chunks count none (as SGLang's chunked inserts), the one that completes it counts one.
  Pool pool(tier_config(4, 64, 4.0, "write_through_selective"));
  const std::vector<int32_t> prompt = tokens_from(900, 17);
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached), KVPOOL_OK);
  for (int64_t chunk : {8, 4, 5}) {
    std::vector<int64_t> out(static_cast<size_t>(chunk));
    ASSERT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, out.data(), out.size()), KVPOOL_OK) << kvpool_last_error();
  }
  ASSERT_EQ(kvhost_poll(pool, 0, nullptr), KVPOOL_OK);
  EXPECT_EQ(stats(pool).backups, 0u) << "the first 8 tokens were walked by three inserts but hit once";
  ASSERT_EQ(kvseq_finish(pool, seq, 17), KVPOOL_OK);  // a second full insert: the second hit
  ASSERT_EQ(kvhost_poll(pool, 0, nullptr), KVPOOL_OK);
  EXPECT_EQ(stats(pool).backup_tokens, 16u);
  expect_consistent(pool);
}

TEST(HostTier, WriteBackCopiesAtEvictionOnly) {
  Pool pool(tier_config(4, 64, 4.0, "write_back"));
  const std::vector<int32_t> parent = tokens_from(10, 8);
  std::vector<int32_t> child = parent;
  child.insert(child.end(), {500, 501, 502, 503});
  insert_fresh(pool, parent);
  std::vector<int64_t> slots = kvtest::alloc(pool, child.size());
  std::vector<uint64_t> tags(child.begin(), child.end());
  write_kv(pool, slots, tags);
  size_t prefix = 0;
  uint64_t leaf = 0;
  ASSERT_EQ(radix_insert(pool, child.data(), child.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &leaf), KVPOOL_OK);
  kvtest::free_slots(pool, std::vector<int64_t>(slots.begin(), slots.begin() + static_cast<long>(prefix)));
  EXPECT_EQ(stats(pool).backups, 0u) << "write_back copies nothing on insert";
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 4, &evicted), KVPOOL_OK);  // the leaf: it and its parent get copies
  EXPECT_EQ(evicted, 4u);
  const kvhost_stats s = stats(pool);
  EXPECT_EQ(s.backups, 1u) << "the leaf and the parent it needs, in one copy";
  EXPECT_EQ(s.backup_tokens, 12u);
  EXPECT_EQ(s.host_only_tokens, 4u);
  Tiered m = match(pool, child);
  EXPECT_EQ(m.device, 8u);
  EXPECT_EQ(m.host, 4u);
  // Four tokens are below the load-back threshold: recomputing is cheaper.
  std::vector<int64_t> out(4);
  size_t loaded = 9;
  uint64_t node = 0;
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, out.data(), out.size(), &loaded, &node), KVPOOL_OK);
  EXPECT_EQ(loaded, 0u);
  EXPECT_EQ(node, m.node);
  EXPECT_EQ(stats(pool).loads_refused, 1u);
  // Evict the rest: both on the host now, loaded back as one 12-token chain.
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK);
  m = match(pool, child);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 12u);
  out.assign(12, 0);
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, out.data(), out.size(), &loaded, &node), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(loaded, 12u);
  EXPECT_EQ(node, leaf);
  expect_kv(pool, out, tags);
  expect_consistent(pool);
}

TEST(HostTier, HostEvictionDeletesHostOnlyLeavesAndMakesRoomForCopies) {
  // 32 device tokens, host 1.5x: 52 host tokens (SGLang's +1 page), 13 pages of 4.
  Pool pool(tier_config(4, 32, 1.5, "write_through"));
  EXPECT_EQ(stats(pool).capacity_tokens, 52u);
  std::vector<uint64_t> nodes;
  for (int32_t k = 0; k < 8; ++k) {
    nodes.push_back(insert_fresh(pool, tokens_from(1000 * (k + 1), 8)));
    size_t evicted = 0;
    ASSERT_EQ(radix_evict(pool, 8, &evicted), KVPOOL_OK);  // device room for the next key
    expect_consistent(pool);
  }
  const kvhost_stats s = stats(pool);
  EXPECT_EQ(s.backups, 8u) << "every key was copied: older host-only keys made room";
  EXPECT_LE(s.used_tokens, 52u);
  EXPECT_GT(s.host_evicted_tokens, 0u);
  int32_t on_device = 0, on_host = 0;
  EXPECT_EQ(kvhost_node_state(pool, nodes.front(), &on_device, &on_host, nullptr), KVPOOL_ERR_INVALID_ARGUMENT)
      << "the oldest host-only key went first (lru)";
  node_state(pool, nodes.back(), &on_device, &on_host);
  EXPECT_EQ(on_host, 1);
  size_t freed = 0;
  ASSERT_EQ(kvhost_evict(pool, 1000, &freed), KVPOOL_OK);
  EXPECT_EQ(freed, stats(pool).used_tokens == 0 ? s.used_tokens : freed);
  EXPECT_EQ(stats(pool).used_tokens, 0u) << "nothing left on the device, so every host copy was host-only";
  expect_consistent(pool);
}

TEST(HostTier, LockedNodesStayAndInsertAdoptsHostOnlyNodes) {
  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  const std::vector<int32_t> key = tokens_from(7, 12);
  const uint64_t node = insert_fresh(pool, key);
  ASSERT_EQ(radix_lock(pool, node), KVPOOL_OK);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 0u) << "locked";
  ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK);
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 12u);
  // An insert of the same key (recomputed) gives the host-only node its device copy back:
  // the tree takes all the caller's slots (prefix 0: nothing of it was on the device).
  std::vector<int64_t> slots = kvtest::alloc(pool, key.size());
  size_t prefix = 99;
  uint64_t again = 0;
  ASSERT_EQ(radix_insert(pool, key.data(), key.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &again), KVPOOL_OK);
  EXPECT_EQ(prefix, 0u);
  EXPECT_EQ(again, node);
  Tiered m = match(pool, key);
  EXPECT_EQ(m.device, 12u);
  EXPECT_EQ(m.slots, slots);
  expect_consistent(pool);
}

// A lock on a host-only node protects no device tokens, yet radix_reset must still refuse
// while it is held (the API fuzzer found a reset that went through).
TEST(HostTier, ResetRefusesWhileAHostOnlyNodeIsLocked) {
  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  const std::vector<int32_t> key = tokens_from(3, 8);
  const uint64_t node = insert_fresh(pool, key);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK);
  ASSERT_EQ(evicted, 8u);
  int32_t on_device = -1, on_host = -1;
  node_state(pool, node, &on_device, &on_host);
  ASSERT_EQ(on_device, 0);
  ASSERT_EQ(on_host, 1);
  ASSERT_EQ(radix_lock(pool, node), KVPOOL_OK) << kvpool_last_error();
  size_t evictable = 0, locked = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &locked, &total), KVPOOL_OK);
  EXPECT_EQ(locked, 0u) << "the sizes count device tokens only";
  EXPECT_EQ(radix_reset(pool), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("locked nodes exist"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(stats(pool).host_only_tokens, 8u) << "the refused reset changed nothing";
  expect_consistent(pool);
  ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(stats(pool).host_only_tokens, 0u);
  EXPECT_EQ(radix_lock(pool, node), KVPOOL_ERR_INVALID_ARGUMENT) << "the handle died with the reset";
  expect_consistent(pool);
}

TEST(HostTier, EventsNameTheTier) {
  Pool pool(tier_config(4, 64, 4.0, "write_through", true));
  insert_fresh(pool, tokens_from(1, 8));
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 8, &evicted), KVPOOL_OK);
  size_t freed = 0;
  ASSERT_EQ(kvhost_evict(pool, 8, &freed), KVPOOL_OK);
  std::vector<radix_event> ev(32);
  std::vector<int32_t> tok(64);
  size_t n_ev = 0, n_tok = 0;
  ASSERT_EQ(radix_take_events(pool, ev.data(), ev.size(), &n_ev, tok.data(), tok.size(), &n_tok), KVPOOL_OK);
  std::vector<int32_t> types;
  for (size_t i = 0; i < n_ev; ++i) types.push_back(ev[i].type);
  const std::vector<int32_t> expected = {RADIX_EVENT_BLOCK_STORED,  RADIX_EVENT_BLOCK_STORED,  RADIX_EVENT_HOST_STORED,
                                         RADIX_EVENT_HOST_STORED,   RADIX_EVENT_BLOCK_REMOVED, RADIX_EVENT_BLOCK_REMOVED,
                                         RADIX_EVENT_HOST_REMOVED,  RADIX_EVENT_HOST_REMOVED};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(ev[0].block_hash, ev[2].block_hash) << "the same page in both tiers";
  EXPECT_EQ(ev[2].block_hash, ev[6].block_hash);
}

TEST(HostTier, RequestsLoadHostHitsBack) {
  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  const std::vector<int32_t> prompt = tokens_from(300, 33);
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached), KVPOOL_OK);
  int64_t chunk = 33;
  std::vector<int64_t> slots(33);
  ASSERT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
  // kvseq_extend cached the pages before the engine writes their KV: no copy yet.
  EXPECT_EQ(stats(pool).backups, 0u);
  write_kv(pool, slots, std::vector<uint64_t>(prompt.begin(), prompt.end()));
  ASSERT_EQ(kvseq_finish(pool, seq, 33), KVPOOL_OK);
  EXPECT_EQ(stats(pool).backup_tokens, 32u) << "the next call started it, after the KV was written";
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 64, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 32u);
  ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached), KVPOOL_OK);
  EXPECT_EQ(cached, 32u);
  kvseq_info info = KVSEQ_INFO_INIT;
  ASSERT_EQ(kvseq_get_info(pool, seq, &info), KVPOOL_OK);
  EXPECT_EQ(info.host_hit, 32u);
  EXPECT_EQ(info.prefix_hit, 32u);
  std::vector<int64_t> held(33);
  size_t n = 0;
  ASSERT_EQ(kvseq_get_slots(pool, seq, held.data(), held.size(), &n), KVPOOL_OK);
  ASSERT_EQ(n, 32u);
  held.resize(32);
  expect_kv(pool, held, std::vector<uint64_t>(prompt.begin(), prompt.begin() + 32));
  // An old caller's smaller struct still works and is not written past its end.
  kvseq_info old = KVSEQ_INFO_INIT;
  old.struct_size = static_cast<uint32_t>(offsetof(kvseq_info, host_hit));
  old.host_hit = 12345;
  ASSERT_EQ(kvseq_get_info(pool, seq, &old), KVPOOL_OK);
  EXPECT_EQ(old.host_hit, 12345u);
  ASSERT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
  expect_consistent(pool);
}

TEST(HostTier, BadInputIsRefusedAndChangesNothing) {
  Pool plain(kvtest::mha_config(4, 64));
  kvhost_stats s = KVHOST_STATS_INIT;
  EXPECT_EQ(kvhost_get_stats(plain, &s), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvhost_poll(plain, 0, nullptr), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kvpool_last_error()).find("host_cache"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(kvhost_get_stats(nullptr, &s), KVPOOL_ERR_INVALID_ARGUMENT);

  Pool pool(tier_config(4, 64, 4.0, "write_through"));
  s.struct_size = 8;
  EXPECT_EQ(kvhost_get_stats(pool, &s), KVPOOL_ERR_INVALID_ARGUMENT);
  int32_t set = -1;
  ASSERT_EQ(kvhost_load_set(pool, &set), KVPOOL_OK);
  EXPECT_EQ(set, 0);
  for (int expect : {1, 2, 0}) {
    ASSERT_EQ(kvhost_next_load_set(pool, &set), KVPOOL_OK);
    EXPECT_EQ(set, expect);
  }
  EXPECT_EQ(kvhost_wait_layer(pool, 0, 1, nullptr), KVPOOL_OK);
  EXPECT_EQ(kvhost_wait_layer(pool, 3, 0, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_wait_layer(pool, 0, 2, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_wait_layer(pool, -1, 0, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_set_stream(pool, nullptr), KVPOOL_OK);
  size_t done = 7;
  EXPECT_EQ(kvhost_poll(pool, 1, &done), KVPOOL_OK);
  EXPECT_EQ(done, 0u) << "CPU copies land inside the call: nothing is ever in flight";

  const std::vector<int32_t> key = tokens_from(40, 16);
  insert_fresh(pool, key);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 16, &evicted), KVPOOL_OK);
  const Tiered m = match(pool, key);
  std::vector<int64_t> small(8);
  size_t loaded = 0;
  uint64_t node = 0;
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, small.data(), small.size(), &loaded, &node), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(loaded, 16u);
  EXPECT_EQ(stats(pool).host_only_tokens, 16u) << "nothing was loaded";
  EXPECT_EQ(kvhost_load_back(pool, m.host_node ^ (uint64_t{1} << 40), small.data(), small.size(), &loaded, &node),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, nullptr, 4, &loaded, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  std::vector<int64_t> slots(16);
  size_t dev = 0, host = 0;
  uint64_t n1 = 0, n2 = 0;
  EXPECT_EQ(kvhost_match(pool, key.data(), key.size(), nullptr, slots.data(), slots.size(), &dev, nullptr, &n1, &n2),
            KVPOOL_ERR_INVALID_ARGUMENT);
  int32_t on_device = 0, on_host = 0;
  EXPECT_EQ(kvhost_node_state(pool, 12345, &on_device, &on_host, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_evict(pool, 4, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  (void)host;
  expect_consistent(pool);
}

TEST(HostTier, PoolsTheTierDoesNotServeAreRefused) {
  kvpool* pool = nullptr;  // swa pools are tiered: host_tier_swa_test.cpp
  const std::string chunk = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "max_total_tokens": 64, "max_context_len": 64}, "prefix_cache": {"kind": "chunk"}, "host_cache": {"ratio": 2, "headroom_bytes": 0}})";
  EXPECT_EQ(kvpool_create(chunk.data(), chunk.size(), &pool), KVPOOL_ERR_CONFIG);
  EXPECT_EQ(pool, nullptr);
}

// Random request workloads (tests/support/tier_requests.hpp) on mha pools: each write
// policy, page sizes 1 and 4, the host layouts.
struct Workload {
  const char* policy;
  int page;
  double ratio;
  const char* layout;
};

class HostTierRandom : public ::testing::TestWithParam<Workload> {};

TEST_P(HostTierRandom, RequestsKeepTheirBytesAndTheAccountingAddsUp) {
  const Workload w = GetParam();
  Pool pool(tier_config(w.page, 96, w.ratio, w.policy, false, w.layout));
  kvtest::TierRequests requests;
  requests.seed = 1234 + static_cast<unsigned>(w.page);
  requests.layers = kvtest::mha_tier_layers();
  uint64_t host_hits = 0;
  kvtest::run_tier_requests(pool, requests, &host_hits);
  if (HasFatalFailure()) return;
  expect_consistent(pool);
  const kvhost_stats s = stats(pool);
  EXPECT_GT(s.backups, 0u);
  if (std::string(w.policy) != "write_through_selective") {
    EXPECT_GT(host_hits, 0u) << "the workload must reach the host tier";
  }
  EXPECT_EQ(s.load_tokens, host_hits) << "every load-back was a request's host hit";
}

// The same workloads with copies in flight between calls (host_cache.defer_completion):
// their nodes stay locked across the next calls, as on a GPU. Every other extend and
// decode is compared with a picture taken once the copies landed.
class HostTierRandomInFlight : public ::testing::TestWithParam<Workload> {};

TEST_P(HostTierRandomInFlight, RequestsKeepTheirBytesAndTheAccountingAddsUp) {
  const Workload w = GetParam();
  Pool pool(kvtest::with_deferred_completion(tier_config(w.page, 96, w.ratio, w.policy, false, w.layout)));
  kvtest::TierRequests requests;
  requests.seed = 4321 + static_cast<unsigned>(w.page);
  requests.layers = kvtest::mha_tier_layers();
  requests.copies_in_flight = true;
  size_t in_flight_steps = 0;
  requests.in_flight_steps = &in_flight_steps;
  uint64_t host_hits = 0;
  kvtest::run_tier_requests(pool, requests, &host_hits);
  if (HasFatalFailure()) return;
  EXPECT_GT(in_flight_steps, 0u) << "no step left a copy in flight";
  ASSERT_EQ(kvhost_poll(pool, 1, nullptr), KVPOOL_OK) << kvpool_last_error();
  expect_consistent(pool);
  const kvhost_stats s = stats(pool);
  EXPECT_EQ(s.copies_in_flight, 0u);
  EXPECT_GT(s.backups, 0u);
  EXPECT_EQ(s.load_tokens, host_hits) << "every load-back was a request's host hit";
}

INSTANTIATE_TEST_SUITE_P(Policies, HostTierRandomInFlight,
                         ::testing::Values(Workload{"write_through", 4, 3.0, "layer_first"},
                                           Workload{"write_through_selective", 4, 3.0, "page_first"},
                                           Workload{"write_back", 4, 3.0, "page_first_direct"},
                                           Workload{"write_through", 1, 1.5, "page_head"}),
                         [](const ::testing::TestParamInfo<Workload>& info) {
                           return std::string(info.param.policy) + "_page" + std::to_string(info.param.page) + "_" +
                                  info.param.layout;
                         });

INSTANTIATE_TEST_SUITE_P(Policies, HostTierRandom,
                         ::testing::Values(Workload{"write_through", 4, 3.0, "layer_first"},
                                           Workload{"write_through_selective", 4, 3.0, "page_first"},
                                           Workload{"write_back", 4, 3.0, "page_first_direct"},
                                           Workload{"write_through", 1, 1.5, "page_head"},
                                           Workload{"write_back", 1, 1.5, "layer_first"}),
                         [](const ::testing::TestParamInfo<Workload>& info) {
                           return std::string(info.param.policy) + "_page" + std::to_string(info.param.page) + "_" +
                                  info.param.layout;
                         });

}  // namespace
