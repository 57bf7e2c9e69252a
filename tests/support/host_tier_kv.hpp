// What the host-tier tests share. KV contents they write and check: the tiered layers
// hold f32 rows of 2 heads x 8 values (mha pools: layers 0 and 1; hybrid_linear pools:
// their full-attention layers). A token's row is derived from a tag, so a row read back
// names the token it was written for; prefix_tags() makes a token's tag depend on its
// whole prefix, as a model's KV does, so a matched prefix holds exactly its own rows.
// Also: kvhost_match / stats / node-state / load-back / device-eviction wrappers, and a
// picture of the pool with its host tier for the tests that prove a failed call changed
// nothing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvpool/host.h"
#include "kvpool/kvpool.h"
#include "kvpool/radix.h"
#include "pool_state.hpp"

namespace kvtest {

constexpr int kTierLayers = 2;
// The layers an mha tier test pool holds (model layer ids).
inline const std::vector<int32_t>& mha_tier_layers() {
  static const std::vector<int32_t> layers = {0, 1};
  return layers;
}
constexpr size_t kTierRow = 2 * 8;  // f32 values of one token in one layer (K or V)

// On CUDA pools a backup or load-back may still be in flight when its call returns, its
// nodes locked until a poll sees it land. Tests with exact expectations of what an
// eviction frees, a node's state or the tier's counters turn this on (the swa and
// hybrid_linear tests built for a GPU): the helpers below then wait for the copies first
// (settle()). Randomized workloads run between them with copies in flight.
inline bool& settle_copies() {
  static bool on = false;
  return on;
}

// A test file built with KVPOOL_TIER_DEFERRED (tests/unit/CMakeLists.txt) runs its pools
// with host_cache.defer_completion: kDeferKey goes into their host_cache sections.
#ifdef KVPOOL_TIER_DEFERRED
constexpr const char* kDeferKey = ", \"defer_completion\": true";
constexpr bool kDeferred = true;  // the random workloads must then see copies in flight
#else
constexpr const char* kDeferKey = "";
constexpr bool kDeferred = false;
#endif

inline void settle(kvpool* pool) {
  if (settle_copies()) {
    EXPECT_EQ(kvhost_poll(pool, 1, nullptr), KVPOOL_OK) << kvpool_last_error();
  }
}

// K of the token tagged `tag` in `layer`; its V is the row of tag + 7.
inline std::vector<float> tier_row(int layer, uint64_t tag) {
  std::vector<float> r(kTierRow);
  for (size_t e = 0; e < kTierRow; ++e) r[e] = static_cast<float>((tag * 131 + static_cast<uint64_t>(layer) * 17 + e) % 1000003);
  return r;
}

// Tags of the first n tokens of `t`: an FNV-1a hash of each token's prefix.
inline std::vector<uint64_t> prefix_tags(const std::vector<int32_t>& t, size_t n) {
  std::vector<uint64_t> tags(n);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<uint64_t>(t[i])) * 1099511628211ull;
    tags[i] = h % 100003;
  }
  return tags;
}

// The tags of every token of `t`.
inline std::vector<uint64_t> tags_of(const std::vector<int32_t>& t) { return prefix_tags(t, t.size()); }

// Writes the rows of `tags` into `slots` of every layer in `layers`.
inline void write_tier_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags,
                          const std::vector<int32_t>& layers = mha_tier_layers()) {
  for (int32_t layer : layers) {
    std::vector<float> k, v;
    for (uint64_t t : tags) {
      const std::vector<float> rk = tier_row(layer, t), rv = tier_row(layer, t + 7);
      k.insert(k.end(), rk.begin(), rk.end());
      v.insert(v.end(), rv.begin(), rv.end());
    }
    ASSERT_EQ(kvpool_set_kv(pool, layer, slots.data(), slots.size(), k.data(), k.size() * 4, v.data(), v.size() * 4,
                            KVPOOL_DTYPE_F32, 1.0f, 1.0f),
              KVPOOL_OK)
        << kvpool_last_error();
  }
}

// The rows of `slots` hold what write_tier_kv wrote for `tags`; `who` names the pool in failures.
inline void expect_tier_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags,
                           const std::string& who = "", const std::vector<int32_t>& layers = mha_tier_layers()) {
  for (int32_t layer : layers) {
    // A load-back's rows are read on the compute stream once it waited for them, as an
    // engine's attention would (CPU pools, and pools without a tier: nothing to wait for).
    for (int32_t set = 0; set < 3; ++set) (void)kvhost_wait_layer(pool, set, layer, nullptr);
    std::vector<float> k(slots.size() * kTierRow), v(slots.size() * kTierRow);
    ASSERT_EQ(kvpool_get_kv(pool, layer, slots.data(), slots.size(), k.data(), k.size() * 4, v.data(), v.size() * 4,
                            KVPOOL_DTYPE_F32),
              KVPOOL_OK)
        << kvpool_last_error();
    for (size_t i = 0; i < slots.size(); ++i) {
      const auto row = [&](const std::vector<float>& all) {
        return std::vector<float>(all.begin() + static_cast<long>(i * kTierRow), all.begin() + static_cast<long>((i + 1) * kTierRow));
      };
      ASSERT_EQ(row(k), tier_row(layer, tags[i])) << who << " K of token " << i << " (slot " << slots[i] << ", layer " << layer << ")";
      ASSERT_EQ(row(v), tier_row(layer, tags[i] + 7)) << who << " V of token " << i << " (slot " << slots[i] << ", layer " << layer << ")";
    }
  }
}

// Tokens first, first + 1, ..., n of them.
inline std::vector<int32_t> tokens_from(int32_t first, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = first + static_cast<int32_t>(i);
  return t;
}

// radix_evict of up to `tokens` device tokens (host-only nodes where they have host copies);
// the number it evicted.
inline size_t evict_device(kvpool* pool, size_t tokens) {
  settle(pool);
  size_t evicted = 0;
  EXPECT_EQ(radix_evict(pool, tokens, &evicted), KVPOOL_OK) << kvpool_last_error();
  return evicted;
}

// kvhost_match's answer: the device part (its slots) and the host part after it.
struct Tiered {
  size_t device = 0, host = 0;
  uint64_t node = 0, host_node = 0;
  std::vector<int64_t> slots;
};

inline Tiered host_match(kvpool* pool, const std::vector<int32_t>& tokens) {
  settle(pool);
  Tiered m;
  m.slots.resize(tokens.size());
  EXPECT_EQ(kvhost_match(pool, tokens.data(), tokens.size(), nullptr, m.slots.data(), m.slots.size(), &m.device, &m.host,
                         &m.node, &m.host_node),
            KVPOOL_OK)
      << kvpool_last_error();
  m.slots.resize(m.device);
  return m;
}

// The tier's counters as they are (copies may be in flight).
inline kvhost_stats host_stats_now(const kvpool* pool) {
  kvhost_stats s = KVHOST_STATS_INIT;
  EXPECT_EQ(kvhost_get_stats(pool, &s), KVPOOL_OK) << kvpool_last_error();
  return s;
}

inline kvhost_stats host_stats(kvpool* pool) {
  settle(pool);
  return host_stats_now(pool);
}

// kvhost_load_back of host_node into a buffer of `capacity` slots: the slots it loaded
// (none when the load was refused); *last receives the node a match now ends at.
inline std::vector<int64_t> host_load_back(kvpool* pool, uint64_t host_node, size_t capacity, uint64_t* last) {
  settle(pool);
  std::vector<int64_t> slots(capacity);
  size_t loaded = 0;
  EXPECT_EQ(kvhost_load_back(pool, host_node, slots.data(), slots.size(), &loaded, last), KVPOOL_OK) << kvpool_last_error();
  slots.resize(std::min(loaded, capacity));
  return slots;
}

inline void node_state(kvpool* pool, uint64_t node, int32_t* on_device, int32_t* on_host) {
  settle(pool);
  size_t tokens = 0;
  ASSERT_EQ(kvhost_node_state(pool, node, on_device, on_host, &tokens), KVPOOL_OK) << kvpool_last_error();
}

// A request's kvseq_get_info and the slots it holds (at most `max_tokens`).
struct Held {
  kvseq_info info = KVSEQ_INFO_INIT;
  std::vector<int64_t> slots;
};

inline Held held_by(kvpool* pool, uint64_t id, size_t max_tokens) {
  Held h;
  EXPECT_EQ(kvseq_get_info(pool, id, &h.info), KVPOOL_OK) << kvpool_last_error();
  h.slots.resize(max_tokens);
  size_t n = 0;
  EXPECT_EQ(kvseq_get_slots(pool, id, h.slots.data(), h.slots.size(), &n), KVPOOL_OK) << kvpool_last_error();
  h.slots.resize(std::min(n, max_tokens));
  return h;
}

// The ids of `requests` (anything with an `id` member), for tier_state().
template <class Request>
std::vector<uint64_t> ids_of(const std::vector<Request>& requests) {
  std::vector<uint64_t> ids;
  for (const Request& r : requests) ids.push_back(r.id);
  return ids;
}

// pool_state() (allocator lists, tree sizes, accounting, the requests `seqs`) plus the
// host tier's stats and kvpool_check's verdict: equal before and after a call that
// failed, or the call changed something.
inline std::string tier_state(kvpool* pool, const std::vector<uint64_t>& seqs = {}) {
  std::string text = pool_state(pool, seqs);
  const kvhost_stats s = host_stats_now(pool);
  text += "host: capacity " + std::to_string(s.capacity_tokens) + " used " + std::to_string(s.used_tokens) +
          " host-only " + std::to_string(s.host_only_tokens) + " in flight " + std::to_string(s.copies_in_flight) + "\n";
  text += "host copies: backups " + std::to_string(s.backups) + " (" + std::to_string(s.backup_tokens) + " tokens, " +
          std::to_string(s.backups_skipped) + " skipped, " + std::to_string(s.backup_errors) + " failed) loads " + std::to_string(s.loads) + " (" +
          std::to_string(s.load_tokens) + " tokens, " + std::to_string(s.loads_refused) + " refused, " +
          std::to_string(s.load_evicted_tokens) + " evicted) host evicted " + std::to_string(s.host_evicted_tokens) +
          " bytes " + std::to_string(s.bytes_to_host) + "/" + std::to_string(s.bytes_to_device) + "\n";
  char report[2048] = {0};
  const kvpool_status st = kvpool_check(pool, report, sizeof(report));
  text += "check: " + std::to_string(st) + " " + report + "\n";
  return text;
}

// kvpool_check passes.
inline void expect_checked(kvpool* pool) {
  char report[4096] = {0};
  EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << report;
}

// `json` (a pool config ending in its host_cache section's "}}") with
// host_cache.defer_completion: the CPU pool reports copies landed a few polls late.
inline std::string with_deferred_completion(std::string json) {
  json.insert(json.size() - 2, R"(, "defer_completion": true)");
  return json;
}

// A tiered tree's calls for the in-flight scenarios below (swa and hybrid_linear pools).
struct InFlightCalls {
  // radix_insert of 24 fresh tokens from `first` (their KV written); the node it ends at.
  std::function<uint64_t(const std::vector<int32_t>& tokens)> insert;
  // The tree's other eviction (swa: window slots, hybrid_linear: mamba states): what it freed.
  std::function<size_t()> evict_other;
  // The loaded slots hold the KV of `tags`.
  std::function<void(const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags)> expect_kv;
};

// On a pool with deferred completion and write_through: a backup in flight keeps its node
// (radix_evict and the other eviction free nothing) until kvhost_poll(wait) lands it; the
// node is then kept as host-only; the load-back of it keeps the chain until polls land it.
inline void expect_copies_in_flight_hold_their_nodes(kvpool* pool, const InFlightCalls& c) {
  const std::vector<int32_t> t = tokens_from(100, 24);
  const uint64_t node = c.insert(t);
  EXPECT_EQ(host_stats_now(pool).copies_in_flight, 1u);
  expect_checked(pool);
  size_t freed = 0;
  ASSERT_EQ(radix_evict(pool, 64, &freed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(freed, 0u) << "the backup in flight reads the node's slots";
  EXPECT_EQ(c.evict_other(), 0u) << "nor may the tree's other eviction take them";
  expect_checked(pool);
  size_t landed = 0;
  ASSERT_EQ(kvhost_poll(pool, 1, &landed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(landed, 1u);
  EXPECT_EQ(host_stats_now(pool).copies_in_flight, 0u);
  ASSERT_EQ(radix_evict(pool, 64, &freed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(freed, 24u) << "landed: the node is evictable, and stays as host-only";
  int32_t on_device = 1, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0);
  EXPECT_EQ(on_host, 1);

  std::vector<int32_t> longer = t;
  longer.push_back(7);
  const Tiered m = host_match(pool, longer);
  ASSERT_EQ(m.host, 24u);
  uint64_t last = 0;
  const std::vector<int64_t> slots = host_load_back(pool, m.host_node, 24, &last);
  ASSERT_EQ(slots.size(), 24u);
  EXPECT_EQ(host_stats_now(pool).copies_in_flight, 1u);
  c.expect_kv(slots, tags_of(t));  // in place once the layers were waited for
  ASSERT_EQ(radix_evict(pool, 64, &freed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(freed, 0u) << "the load in flight writes the chain's slots";
  expect_checked(pool);
  int polls = 0;  // polls without waiting land it a few calls later
  while (host_stats_now(pool).copies_in_flight > 0 && polls < 10) {
    ASSERT_EQ(kvhost_poll(pool, 0, &landed), KVPOOL_OK) << kvpool_last_error();
    ++polls;
  }
  EXPECT_GT(polls, 0);
  EXPECT_LT(polls, 10) << "the load never landed";
  ASSERT_EQ(radix_evict(pool, 64, &freed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(freed, 24u);
  expect_checked(pool);
}

// radix_reset with copies in flight lands them first; the pool is then destroyed with one in flight.
inline void expect_reset_lands_copies(kvpool* pool, const InFlightCalls& c) {
  c.insert(tokens_from(100, 12));
  c.insert(tokens_from(200, 12));
  EXPECT_EQ(host_stats_now(pool).copies_in_flight, 2u);
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(host_stats_now(pool).copies_in_flight, 0u);
  expect_checked(pool);
  c.insert(tokens_from(300, 12));
}

// "" when a failed call left the tier_state() picture as it was, else what changed.
inline std::string changed_by_failure(const std::string& before, const std::string& after) {
  return before == after ? std::string() : "a failed call changed the pool:\n" + first_difference(before, after);
}

}  // namespace kvtest
