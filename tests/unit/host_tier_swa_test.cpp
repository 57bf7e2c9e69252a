// The host tier of swa pools through the C API (host.h, radix.h, seq.h) on CPU pools:
// a node's host copy keeps its full-layer rows and the window-layer rows of its last
// `sliding_window` tokens; device eviction keeps backed-up nodes as host-only (window
// tombstones); a load-back brings the full rows of the chain and the window rows of its
// last window back, so the match is usable with the same KV bytes as before; the three
// write policies, host eviction, kvseq_begin's host hits, bad input, and randomized radix_*
// and kvseq_* workloads with kvpool_check after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "../support/tier_requests.hpp"
#include "kvpool/alloc.h"
#include "kvpool/host.h"
#include "kvpool/radix.h"
#include "kvpool/seq.h"
#include "test_util.hpp"

namespace {

using kvtest::evict_device;
using kvtest::expect_consistent;
using kvtest::host_match;
using kvtest::host_stats;
using kvtest::node_state;
using kvtest::Pool;
using kvtest::tags_of;
using kvtest::Tiered;
using kvtest::tokens_from;

// Layers 0 and 2 are sliding-window layers, 1 and 3 full attention ("SF").
constexpr int32_t kFullLayers[] = {1, 3};
constexpr int32_t kWindowLayers[] = {0, 2};
constexpr size_t kWindow = 4;  // the fixed cases' sliding window (the random ones try 16 too)

// tests/gpu builds this file a second time with KVPOOL_SWA_TIER_DEVICE="cuda:0": the same
// tests on a CUDA pool (pinned host pages, the CUDA transfers), label gpu.
#ifdef KVPOOL_SWA_TIER_DEVICE
constexpr const char* kDeviceKey = "\"device\": \"" KVPOOL_SWA_TIER_DEVICE "\", ";
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

// f32 KV of 2 heads x 8 (host_tier_kv.hpp's rows); window slots: 80 % of the full pool's.
std::string swa_tier_config(int64_t tokens, int rows, double ratio, const char* policy, size_t window = kWindow) {
  return R"({"model": {"num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 8, "sliding_window": )" +
         std::to_string(window) + R"(, "swa_layer_pattern": "SF"},
      "pool": {)" + std::string(kDeviceKey) + R"("kv_dtype": "f32", "max_total_tokens": )" +
         std::to_string(tokens) + R"(, "max_running_requests": )" + std::to_string(rows) +
         R"(, "max_context_len": 128}, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": )" +
         std::to_string(ratio) + R"(, "headroom_bytes": 0, "write_policy": ")" + policy + '"' + kDeferKey + "}}";
}

std::vector<int64_t> window_slots(kvpool* pool, const std::vector<int64_t>& slots) {
  std::vector<int64_t> w(slots.size());
  if (!slots.empty()) {
    EXPECT_EQ(kvalloc_translate_swa(pool, slots.data(), slots.size(), w.data(), w.size()), KVPOOL_OK) << kvpool_last_error();
  }
  return w;
}

// Every layer of fresh slots (they all have window slots).
void write_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  if (slots.empty()) return;
  for (int32_t layer : kFullLayers) kvtest::write_tier_kv(pool, slots, tags, {layer});
  for (int32_t layer : kWindowLayers) kvtest::write_tier_kv(pool, slots, tags, {layer});
}

// host_tier_kv.hpp's check of one layer; a window layer may have no rows to check.
void expect_layer(kvpool* pool, int32_t layer, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  if (slots.empty()) return;
  kvtest::expect_tier_kv(pool, slots, tags, "", {layer});
}

// The slots of a usable prefix hold their tokens' KV: full layers for every token, window
// layers for every token that has a window slot, and the last min(window, n) tokens have one.
void expect_usable(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags,
                   size_t window = kWindow) {
  for (int32_t layer : kFullLayers) expect_layer(pool, layer, slots, tags);
  const std::vector<int64_t> w = window_slots(pool, slots);
  std::vector<int64_t> windowed;
  std::vector<uint64_t> windowed_tags;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i + window >= slots.size()) {
      ASSERT_NE(w[i], 0) << "token " << i << " of " << slots.size() << " lies in the last window";
    }
    if (w[i] != 0) {
      windowed.push_back(slots[i]);
      windowed_tags.push_back(tags[i]);
    }
  }
  for (int32_t layer : kWindowLayers) expect_layer(pool, layer, windowed, windowed_tags);
}

size_t full_available(kvpool* pool, size_t* window = nullptr) {
  size_t full = 0, swa = 0;
  EXPECT_EQ(kvalloc_swa_available(pool, &full, &swa), KVPOOL_OK) << kvpool_last_error();
  if (window != nullptr) *window = swa;
  return std::min(full, swa);
}

// radix_insert of fresh slots (KV written); returns the node.
uint64_t insert_fresh(kvpool* pool, const std::vector<int32_t>& tokens, size_t* prefix_out = nullptr) {
  std::vector<int64_t> slots = kvtest::alloc(pool, tokens.size());
  write_kv(pool, slots, tags_of(tokens));
  size_t prefix = 0;
  uint64_t node = 0;
  EXPECT_EQ(radix_insert(pool, tokens.data(), tokens.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node),
            KVPOOL_OK)
      << kvpool_last_error();
  // The caller's duplicates of cached tokens go back.
  if (prefix > 0) kvtest::free_slots(pool, std::vector<int64_t>(slots.begin(), slots.begin() + static_cast<long>(prefix)));
  if (prefix_out != nullptr) *prefix_out = prefix;
  return node;
}

// host_cache.defer_completion (CPU pools only): copies land a few polls late, as a GPU's
// do. A backup keeps the node it copies, and the window tail it reads, locked until a poll
// sees it land; a load-back keeps the chain it writes; kvhost_poll with wait lands them;
// radix_reset lands them first. (This build's pools defer already, or are CUDA pools: the
// tests run in the plain build.)
#if !defined(KVPOOL_TIER_DEFERRED) && !defined(KVPOOL_SWA_TIER_DEVICE)
kvtest::InFlightCalls in_flight_calls(kvpool* pool) {
  return {[pool](const std::vector<int32_t>& t) { return insert_fresh(pool, t); },
          [pool] {
            size_t freed = 0, window_freed = 0;
            EXPECT_EQ(radix_evict_swa(pool, 64, 64, &freed, &window_freed), KVPOOL_OK) << kvpool_last_error();
            return freed + window_freed;
          },
          [pool](const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) { expect_usable(pool, slots, tags); }};
}

TEST(HostTierSwa, CopiesInFlightKeepTheirNodesUntilAPollSeesThemLand) {
  Pool pool(kvtest::with_deferred_completion(swa_tier_config(64, 2, 4, "write_through")));
  kvtest::expect_copies_in_flight_hold_their_nodes(pool, in_flight_calls(pool));
}

TEST(HostTierSwa, ResetWithCopiesInFlight) {
  Pool pool(kvtest::with_deferred_completion(swa_tier_config(64, 2, 4, "write_through")));
  kvtest::expect_reset_lands_copies(pool, in_flight_calls(pool));
}
#endif

TEST(HostTierSwa, WriteThroughKeepsTheWindowTailAndLoadsAUsableMatchBack) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 24);
  const uint64_t node = insert_fresh(pool, t);
  expect_consistent(pool);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 1);
  EXPECT_EQ(on_host, 1) << "write_through copies a node when it is created";
  EXPECT_EQ(host_stats(pool).used_tokens, 24u);
  std::vector<int32_t> longer = t;
  longer.push_back(7);
  const Tiered before = host_match(pool, longer);
  ASSERT_EQ(before.device, 24u);
  size_t full = 0, window = 0;
  ASSERT_EQ(kvalloc_swa_available(pool, &full, &window), KVPOOL_OK);
  const size_t full_with_node = full;

  EXPECT_EQ(evict_device(pool, 64), 24u);
  expect_consistent(pool);
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0) << "backed up: the node stays as host-only";
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(host_stats(pool).host_only_tokens, 24u);
  ASSERT_EQ(kvalloc_swa_available(pool, &full, &window), KVPOOL_OK);
  EXPECT_EQ(full, full_with_node + 24) << "the device holds nothing";

  Tiered m = host_match(pool, longer);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 24u);
  EXPECT_EQ(m.host_node, node);

  uint64_t last = 0;
  const std::vector<int64_t> slots = kvtest::host_load_back(pool, m.host_node, 24, &last);
  ASSERT_EQ(slots.size(), 24u);
  expect_consistent(pool);
  m = host_match(pool, longer);
  EXPECT_EQ(m.device, 24u) << "usable: the last window of tokens came back with window slots";
  EXPECT_EQ(m.host, 0u);
  EXPECT_EQ(m.slots, slots);
  expect_usable(pool, m.slots, tags_of(t));
  // Only the last window came back with window slots: the rest is a window tombstone.
  const std::vector<int64_t> w = window_slots(pool, m.slots);
  EXPECT_EQ(static_cast<size_t>(std::count(w.begin(), w.end(), 0)), 24 - kWindow);
  ASSERT_EQ(kvalloc_swa_available(pool, &full, &window), KVPOOL_OK);
  EXPECT_EQ(full, full_with_node);
  const kvhost_stats s = host_stats(pool);
  EXPECT_EQ(s.loads, 1u);
  EXPECT_EQ(s.load_tokens, 24u);
  EXPECT_EQ(s.host_only_tokens, 0u);
  EXPECT_GT(s.bytes_to_device, 0u);
  // The loaded node can be locked like any device node.
  ASSERT_EQ(radix_lock(pool, m.node), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(radix_unlock(pool, m.node), KVPOOL_OK) << kvpool_last_error();
  expect_consistent(pool);
}

TEST(HostTierSwa, AChainComesBackWithWindowSlotsOnlyForItsLastWindow) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  // a (16 tokens), then b = a + 12: two nodes, each with its own window tail on the host.
  const std::vector<int32_t> a = tokens_from(100, 16);
  std::vector<int32_t> b = a;
  for (int32_t i = 0; i < 12; ++i) b.push_back(500 + i);
  insert_fresh(pool, a);
  size_t prefix = 0;
  insert_fresh(pool, b, &prefix);
  EXPECT_EQ(prefix, 16u);
  EXPECT_EQ(evict_device(pool, 64), 28u);
  expect_consistent(pool);
  std::vector<int32_t> b2 = b;
  b2.push_back(1);
  Tiered m = host_match(pool, b2);
  EXPECT_EQ(m.host, 28u);
  uint64_t last = 0;
  ASSERT_EQ(kvtest::host_load_back(pool, m.host_node, 28, &last).size(), 28u);
  expect_consistent(pool);
  m = host_match(pool, b2);
  EXPECT_EQ(m.device, 28u);
  expect_usable(pool, m.slots, tags_of(b));
  const std::vector<int64_t> w = window_slots(pool, m.slots);
  EXPECT_EQ(static_cast<size_t>(std::count_if(w.begin(), w.end(), [](int64_t x) { return x != 0; })), kWindow)
      << "window slots only for the last window of the chain";
  // `a` alone ends in a window tombstone now: not usable on the device, and not on the host
  // (its rows are on the device, whose window slots are gone).
  std::vector<int32_t> a2 = a;
  a2.push_back(1);
  m = host_match(pool, a2);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 0u);
  expect_consistent(pool);
}

TEST(HostTierSwa, AHostOnlyMatchCutInsideANodeHasNoWindowRowsAndIsNotLoaded) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 24);
  insert_fresh(pool, t);
  EXPECT_EQ(evict_device(pool, 64), 24u);
  // The first 14 tokens: the node is split there, and its upper part holds no window rows.
  std::vector<int32_t> probe = tokens_from(100, 14);
  probe.push_back(9999);
  const Tiered m = host_match(pool, probe);
  EXPECT_EQ(m.device, 0u);
  EXPECT_EQ(m.host, 0u) << "no usable end: the first 14 tokens' window rows were not kept";
  EXPECT_EQ(m.host_node, m.node);
  expect_consistent(pool);
  // The whole sequence is still loadable.
  std::vector<int32_t> longer = t;
  longer.push_back(7);
  const Tiered whole = host_match(pool, longer);
  EXPECT_EQ(whole.host, 24u);
  uint64_t last = 0;
  ASSERT_EQ(kvtest::host_load_back(pool, whole.host_node, 24, &last).size(), 24u);
  expect_usable(pool, host_match(pool, longer).slots, tags_of(t));
  expect_consistent(pool);
}

TEST(HostTierSwa, FewerThanTenHostTokensAreRecomputed) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> a = tokens_from(100, 16);
  std::vector<int32_t> b = a;
  for (int32_t i = 0; i < 8; ++i) b.push_back(500 + i);
  insert_fresh(pool, a);
  insert_fresh(pool, b);  // two nodes: a's 16 tokens, b's last 8
  ASSERT_EQ(evict_device(pool, 64), 24u);
  // a comes back; then b's 8 host-only tokens are below the threshold.
  std::vector<int32_t> a2 = a;
  a2.push_back(1);
  Tiered m = host_match(pool, a2);
  ASSERT_EQ(m.host, 16u);
  uint64_t last = 0;
  ASSERT_EQ(kvtest::host_load_back(pool, m.host_node, 24, &last).size(), 16u);
  std::vector<int32_t> b2 = b;
  b2.push_back(1);
  m = host_match(pool, b2);
  EXPECT_EQ(m.device, 16u);
  EXPECT_EQ(m.host, 8u);
  const uint64_t refused_before = host_stats(pool).loads_refused;
  ASSERT_TRUE(kvtest::host_load_back(pool, m.host_node, 24, &last).empty());
  EXPECT_EQ(host_stats(pool).loads_refused, refused_before + 1);
  int32_t on_device = 1, on_host = 0;
  node_state(pool, m.host_node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0);
  expect_consistent(pool);
}

// A chain shorter than the window ends a usable match only with the live device tokens
// above it: a load-back short of window slots must not tombstone them to make room.
TEST(HostTierSwa, ALoadBackKeepsTheDeviceWindowItsEndNeeds) {
  constexpr size_t kWide = 16;
  Pool pool(swa_tier_config(64, 2, 4, "write_through", kWide));
  const std::vector<int32_t> a = tokens_from(100, 16);
  std::vector<int32_t> b = a;
  for (int32_t i = 0; i < 10; ++i) b.push_back(500 + i);
  insert_fresh(pool, a);
  insert_fresh(pool, b);
  ASSERT_EQ(evict_device(pool, 10), 10u) << "b's own 10 tokens, the only device leaf";
  std::vector<int32_t> b2 = b;
  b2.push_back(1);
  Tiered m = host_match(pool, b2);
  ASSERT_EQ(m.device, 16u);
  ASSERT_EQ(m.host, 10u) << "usable once loaded: 10 window rows after a's 16 live tokens";
  // Hold all but 5 free window slots outside the tree: the load needs 10, and only a's could be taken.
  size_t full = 0, window = 0;
  ASSERT_EQ(kvalloc_swa_available(pool, &full, &window), KVPOOL_OK);
  ASSERT_GT(window, 5u);
  const std::vector<int64_t> held = kvtest::alloc(pool, window - 5);
  ASSERT_EQ(kvalloc_swa_available(pool, &full, &window), KVPOOL_OK);
  ASSERT_GE(full, 10u);
  std::vector<int64_t> slots(10);
  size_t loaded = 9;
  uint64_t last = 0;
  ASSERT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), slots.size(), &loaded, &last), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(loaded, 0u) << "refused rather than loading an end that could not be used";
  m = host_match(pool, b2);
  EXPECT_EQ(m.device, 16u) << "a kept its window";
  expect_usable(pool, m.slots, tags_of(a), kWide);
  expect_consistent(pool);
  kvtest::free_slots(pool, held);
  ASSERT_EQ(kvtest::host_load_back(pool, m.host_node, 10, &last).size(), 10u);
  m = host_match(pool, b2);
  EXPECT_EQ(m.device, 26u);
  expect_usable(pool, m.slots, tags_of(b), kWide);
  expect_consistent(pool);
}

// What the public API shows of the tree: each node's state and length, the device and
// window sizes, the host tier's sizes and kvpool_check's verdict.
std::string tree_picture(kvpool* pool, const std::vector<uint64_t>& nodes) {
  std::string text;
  for (uint64_t n : nodes) {
    int32_t on_device = -1, on_host = -1;
    size_t tokens = 0;
    const kvpool_status st = kvhost_node_state(pool, n, &on_device, &on_host, &tokens);
    text += "node " + std::to_string(n) + ": " + std::to_string(st) + " device " + std::to_string(on_device) + " host " +
            std::to_string(on_host) + " tokens " + std::to_string(tokens) + "\n";
  }
  size_t evictable = 0, locked = 0, total = 0, window_evictable = 0, window_locked = 0;
  EXPECT_EQ(radix_sizes(pool, &evictable, &locked, &total), KVPOOL_OK);
  EXPECT_EQ(radix_state_sizes(pool, &window_evictable, &window_locked), KVPOOL_OK);
  const kvhost_stats s = host_stats(pool);
  text += "sizes " + std::to_string(evictable) + " " + std::to_string(locked) + " " + std::to_string(total) + " window " +
          std::to_string(window_evictable) + " " + std::to_string(window_locked) + " host " + std::to_string(s.used_tokens) +
          " host-only " + std::to_string(s.host_only_tokens) + "\n";
  char report[2048] = {0};
  text += "check " + std::to_string(kvpool_check(pool, report, sizeof(report))) + " " + report;
  return text;
}

// A load-back refused for want of device room leaves every node as it was: the split it
// plans (where the top live node's window rows begin) is made only once the load is sure.
TEST(HostTierSwa, ARefusedLoadBackLeavesTheTreeAsItWas) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 24);
  const uint64_t node = insert_fresh(pool, t);
  ASSERT_EQ(evict_device(pool, 64), 24u);
  // A locked device node, and every other slot held outside the tree: no room to make.
  const std::vector<int32_t> other = tokens_from(5000, 16);
  const uint64_t kept = insert_fresh(pool, other);
  ASSERT_EQ(radix_lock(pool, kept), KVPOOL_OK) << kvpool_last_error();
  const std::vector<int64_t> held = kvtest::alloc(pool, full_available(pool));
  std::vector<int32_t> longer = t;
  longer.push_back(7);
  const Tiered m = host_match(pool, longer);
  ASSERT_EQ(m.host, 24u);
  ASSERT_EQ(m.host_node, node);
  const std::vector<uint64_t> nodes = {node, kept};
  const std::string before = tree_picture(pool, nodes);
  ASSERT_NE(before.find("tokens 24"), std::string::npos) << before;
  const uint64_t refused = host_stats(pool).loads_refused;

  std::vector<int64_t> slots(24);
  size_t loaded = 9;
  uint64_t last = 0;
  ASSERT_EQ(kvhost_load_back(pool, node, slots.data(), slots.size(), &loaded, &last), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(loaded, 0u);
  EXPECT_EQ(host_stats(pool).loads_refused, refused + 1);
  EXPECT_EQ(kvtest::changed_by_failure(before, tree_picture(pool, nodes)), "");
  // kvseq_begin's load is refused alike, and the request starts from nothing cached.
  uint64_t id = 0;
  size_t cached = 9;
  ASSERT_EQ(kvseq_begin(pool, longer.data(), longer.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 0u);
  ASSERT_EQ(kvseq_abort(pool, id), KVPOOL_OK);
  EXPECT_EQ(kvtest::changed_by_failure(before, tree_picture(pool, nodes)), "");

  // With room, the same load splits the node where its 4 window rows begin.
  kvtest::free_slots(pool, held);
  ASSERT_EQ(radix_unlock(pool, kept), KVPOOL_OK);
  ASSERT_EQ(kvtest::host_load_back(pool, node, 24, &last).size(), 24u);
  int32_t on_device = 0, on_host = 0;
  size_t tokens = 0;
  ASSERT_EQ(kvhost_node_state(pool, node, &on_device, &on_host, &tokens), KVPOOL_OK);
  EXPECT_EQ(tokens, kWindow) << "the lower part, live again, keeps the handle";
  EXPECT_EQ(on_device, 1);
  expect_usable(pool, host_match(pool, longer).slots, tags_of(t));
  expect_consistent(pool);
}

TEST(HostTierSwa, SelectiveWriteThroughCopiesOnTheSecondHit) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through_selective"));
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

TEST(HostTierSwa, WriteBackCopiesAtEvictionOnly) {
  Pool pool(swa_tier_config(64, 2, 4, "write_back"));
  const std::vector<int32_t> t = tokens_from(100, 16);
  const uint64_t node = insert_fresh(pool, t);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_host, 0);
  EXPECT_EQ(host_stats(pool).backups, 0u);
  EXPECT_EQ(evict_device(pool, 16), 16u);
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0);
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(host_stats(pool).backups, 1u);
  expect_consistent(pool);
  std::vector<int32_t> longer = t;
  longer.push_back(3);
  const Tiered m = host_match(pool, longer);
  uint64_t last = 0;
  ASSERT_EQ(kvtest::host_load_back(pool, m.host_node, 16, &last).size(), 16u);
  expect_usable(pool, host_match(pool, longer).slots, tags_of(t));
  expect_consistent(pool);
}

TEST(HostTierSwa, AWindowTombstoneIsBackedUpWithoutWindowRows) {
  // Under write_back a node tombstoned by window eviction is copied when the device evicts
  // it: full rows only, so it is no match end on the host.
  Pool pool(swa_tier_config(64, 2, 4, "write_back"));
  const std::vector<int32_t> a = tokens_from(100, 16);
  std::vector<int32_t> b = a;
  for (int32_t i = 0; i < 12; ++i) b.push_back(500 + i);
  insert_fresh(pool, b);
  insert_fresh(pool, a);  // splits b's node at 16
  size_t evicted = 0, window_evicted = 0;
  // Window eviction only: the least recently used live node is tombstoned (internal) or evicted.
  ASSERT_EQ(radix_evict_swa(pool, 0, 28, &evicted, &window_evicted), KVPOOL_OK) << kvpool_last_error();
  expect_consistent(pool);
  evict_device(pool, 64);
  expect_consistent(pool);
  std::vector<int32_t> a2 = a;
  a2.push_back(1);
  const Tiered m = host_match(pool, a2);
  EXPECT_EQ(m.device, 0u);
  expect_consistent(pool);
}

TEST(HostTierSwa, HostEvictionDeletesHostOnlyLeaves) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const uint64_t first = insert_fresh(pool, tokens_from(100, 12));
  const uint64_t second = insert_fresh(pool, tokens_from(200, 12));
  EXPECT_EQ(evict_device(pool, 64), 24u);
  size_t freed = 0;
  ASSERT_EQ(kvhost_evict(pool, 1, &freed), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(freed, 12u) << "the least recently used host-only leaf, whole";
  int32_t on_device = 0, on_host = 0;
  EXPECT_EQ(kvhost_node_state(pool, first, &on_device, &on_host, nullptr), KVPOOL_ERR_INVALID_ARGUMENT) << "deleted";
  node_state(pool, second, &on_device, &on_host);
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(host_stats(pool).used_tokens, 12u);
  expect_consistent(pool);
}

TEST(HostTierSwa, InsertingOverHostOnlyNodesTakesTheCallersSlots) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 20);
  const uint64_t node = insert_fresh(pool, t);
  EXPECT_EQ(evict_device(pool, 64), 20u);
  // The engine recomputed the same tokens: the host-only node gets them as its device copy.
  size_t prefix = 9;
  const uint64_t again = insert_fresh(pool, t, &prefix);
  EXPECT_EQ(prefix, 0u) << "nothing was on the device: the caller keeps nothing";
  EXPECT_EQ(again, node);
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 1);
  EXPECT_EQ(on_host, 1);
  std::vector<int32_t> longer = t;
  longer.push_back(1);
  const Tiered m = host_match(pool, longer);
  EXPECT_EQ(m.device, 20u);
  expect_usable(pool, m.slots, tags_of(t));
  EXPECT_EQ(host_stats(pool).host_only_tokens, 0u);
  expect_consistent(pool);
}

// radix_insert_swa over a host-only node: the caller's windowless tokens come back as a
// tombstone, its windowed ones live; with no windowed token at all the node stays
// host-only and the caller's slots are freed.
TEST(HostTierSwa, InsertSwaOverHostOnlyNodesAdoptsOrFreesTheCallersSlots) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 20);
  const uint64_t node = insert_fresh(pool, t);
  EXPECT_EQ(evict_device(pool, 64), 20u);
  size_t full_before = 0, window_before = 0;
  ASSERT_EQ(kvalloc_swa_available(pool, &full_before, &window_before), KVPOOL_OK);

  // Every token windowless: nothing windowed would end the path.
  std::vector<int64_t> slots = kvtest::alloc(pool, 20);
  write_kv(pool, slots, tags_of(t));
  ASSERT_EQ(kvalloc_free_swa(pool, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
  size_t prefix = 9;
  uint64_t last = 0;
  ASSERT_EQ(radix_insert_swa(pool, t.data(), t.size(), slots.data(), slots.size(), nullptr, 0, 20, &prefix, &last), KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(prefix, 0u);
  int32_t on_device = 1, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 0) << "still host-only";
  size_t full = 0, window = 0;
  ASSERT_EQ(kvalloc_swa_available(pool, &full, &window), KVPOOL_OK);
  EXPECT_EQ(full, full_before) << "the caller's slots were freed";
  expect_consistent(pool);

  // The first 12 windowless, the last 8 windowed: a tombstone of 12 above a live 8.
  slots = kvtest::alloc(pool, 20);
  write_kv(pool, slots, tags_of(t));
  ASSERT_EQ(kvalloc_free_swa(pool, slots.data(), 12), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(radix_insert_swa(pool, t.data(), t.size(), slots.data(), slots.size(), nullptr, 0, 12, &prefix, &last), KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(prefix, 0u);
  EXPECT_EQ(last, node);
  size_t tokens = 0;
  ASSERT_EQ(kvhost_node_state(pool, node, &on_device, &on_host, &tokens), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(on_device, 1);
  EXPECT_EQ(on_host, 1);
  EXPECT_EQ(tokens, 8u) << "split where the caller's window slots begin";
  std::vector<int32_t> longer = t;
  longer.push_back(1);
  const Tiered m = host_match(pool, longer);
  EXPECT_EQ(m.device, 20u);
  EXPECT_EQ(m.slots, slots);
  expect_usable(pool, m.slots, tags_of(t));
  const std::vector<int64_t> w = window_slots(pool, m.slots);
  EXPECT_EQ(static_cast<size_t>(std::count(w.begin(), w.end(), 0)), 12u);
  EXPECT_EQ(host_stats(pool).host_only_tokens, 0u);
  expect_consistent(pool);
}

TEST(HostTierSwa, RequestsLoadHostHitsBack) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
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
  EXPECT_EQ(host_stats(pool).used_tokens, 30u) << "finish caches the request and write_through copies it";
  EXPECT_EQ(evict_device(pool, 64), 30u);
  t.push_back(9);
  ASSERT_EQ(kvseq_begin(pool, t.data(), t.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 30u);
  const kvtest::Held held = kvtest::held_by(pool, id, 31);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(held.info.host_hit, 30u);
  std::vector<int32_t> prompt(t.begin(), t.end() - 1);
  expect_usable(pool, held.slots, tags_of(prompt));
  expect_consistent(pool);
  // The request goes on from there: its last token, then a decode step.
  chunk = 1;
  out.assign(1, 0);
  ASSERT_EQ(kvseq_extend(pool, &id, 1, &chunk, 1, out.data(), out.size()), KVPOOL_OK) << kvpool_last_error();
  expect_consistent(pool);
  ASSERT_EQ(kvseq_abort(pool, id), KVPOOL_OK);
  expect_consistent(pool);
}

// A chunk of a prompt whose path runs through host-only nodes (here: too short to load
// back) is cached at kvseq_extend like any other: the host-only node takes the request's
// slots as its device copy, and the request holds the tree's slots from then on.
TEST(HostTierSwa, ExtendCachesAChunkThroughHostOnlyNodes) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> head = tokens_from(100, 8);
  const uint64_t node = insert_fresh(pool, head);
  ASSERT_EQ(evict_device(pool, 64), 8u);
  std::vector<int32_t> prompt = head;
  for (int32_t i = 0; i < 24; ++i) prompt.push_back(700 + i);
  uint64_t id = 0;
  size_t cached = 9;
  ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(cached, 0u) << "8 host tokens are recomputed, not loaded";
  int64_t chunk = 20;
  std::vector<int64_t> out(20);
  ASSERT_EQ(kvseq_extend(pool, &id, 1, &chunk, 1, out.data(), out.size()), KVPOOL_OK) << kvpool_last_error();
  const std::vector<int32_t> computed(prompt.begin(), prompt.begin() + 20);
  write_kv(pool, out, tags_of(computed));
  // Caching happens at the next extend (the chunk's KV is written by then), as for any chunk.
  chunk = 4;
  std::vector<int64_t> more(4);
  ASSERT_EQ(kvseq_extend(pool, &id, 1, &chunk, 1, more.data(), more.size()), KVPOOL_OK) << kvpool_last_error();
  const kvtest::Held held = kvtest::held_by(pool, id, 24);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(held.info.cached, 20u) << "the chunk went into the tree through the host-only node";
  int32_t on_device = 0, on_host = 0;
  node_state(pool, node, &on_device, &on_host);
  EXPECT_EQ(on_device, 1) << "the host-only node took the request's slots";
  EXPECT_EQ(on_host, 1) << "and kept its host copy";
  EXPECT_EQ(std::vector<int64_t>(held.slots.begin(), held.slots.begin() + 20), out) << "the request's own slots, now the tree's";
  std::vector<int32_t> probe = computed;
  probe.push_back(-1);
  const Tiered m = host_match(pool, probe);
  EXPECT_EQ(m.device, 20u);
  EXPECT_EQ(m.slots, out);
  expect_usable(pool, m.slots, tags_of(computed));
  expect_consistent(pool);
  ASSERT_EQ(kvseq_finish(pool, id, 24), KVPOOL_OK) << kvpool_last_error();
  expect_consistent(pool);
}

TEST(HostTierSwa, BadInputIsRefusedAndChangesNothing) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  const std::vector<int32_t> t = tokens_from(100, 20);
  insert_fresh(pool, t);
  evict_device(pool, 64);
  std::vector<int32_t> longer = t;
  longer.push_back(1);
  const Tiered m = host_match(pool, longer);
  ASSERT_EQ(m.host, 20u);
  const kvhost_stats before = host_stats(pool);
  const std::string picture = kvtest::tier_state(pool);
  std::vector<int64_t> slots(20);
  size_t loaded = 0;
  uint64_t last = 0;
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, slots.data(), 19, &loaded, &last), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(loaded, 20u) << "the size it needs";
  EXPECT_EQ(kvhost_load_back(pool, m.host_node + (uint64_t{1} << 32), slots.data(), 20, &loaded, &last),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvhost_load_back(pool, m.host_node, nullptr, 20, &loaded, &last), KVPOOL_ERR_INVALID_ARGUMENT);
  const kvhost_stats after = host_stats(pool);
  EXPECT_EQ(after.loads, before.loads);
  EXPECT_EQ(after.host_only_tokens, before.host_only_tokens);
  EXPECT_EQ(after.used_tokens, before.used_tokens);
  // A host-only node cannot be locked before it is loaded back.
  EXPECT_EQ(radix_lock(pool, m.host_node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("host-only"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(kvtest::changed_by_failure(picture, kvtest::tier_state(pool)), "");
  // An insert over the host-only node with a prev_prefix_len reaching into it, or a
  // swa_evicted_len past the key: refused, nothing changed.
  std::vector<int64_t> fresh = kvtest::alloc(pool, 20);
  const std::string with_fresh = kvtest::tier_state(pool);
  size_t prefix = 0;
  uint64_t node = 0;
  EXPECT_EQ(radix_insert_swa(pool, t.data(), t.size(), fresh.data(), fresh.size(), nullptr, 5, 0, &prefix, &node),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_swa(pool, t.data(), t.size(), fresh.data(), fresh.size(), nullptr, 0, 21, &prefix, &node),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvtest::changed_by_failure(with_fresh, kvtest::tier_state(pool)), "");
  kvtest::free_slots(pool, fresh);
  expect_consistent(pool);
}

TEST(HostTierSwa, WaitLayerTakesFullAndWindowLayers) {
  Pool pool(swa_tier_config(64, 2, 4, "write_through"));
  for (int32_t layer = 0; layer < 4; ++layer) {
    EXPECT_EQ(kvhost_wait_layer(pool, 0, layer, nullptr), KVPOOL_OK) << "layer " << layer << ": " << kvpool_last_error();
  }
  EXPECT_EQ(kvhost_wait_layer(pool, 0, 4, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  size_t completed = 9;
  EXPECT_EQ(kvhost_poll(pool, 1, &completed), KVPOOL_OK);
  EXPECT_EQ(completed, 0u) << "nothing is ever in flight";
}

TEST(HostTierSwa, ConfigurationsTheTierDoesNotServeAreRefused) {
  kvpool* pool = nullptr;
  std::string storage = swa_tier_config(64, 2, 4, "write_through");
  storage.pop_back();  // the closing brace
  storage += R"(, "storage": {"backend": "file", "path": "/tmp/kvpool-swa-tier-never-created"}})";
  EXPECT_EQ(kvpool_create(storage.data(), storage.size(), &pool), KVPOOL_ERR_UNSUPPORTED) << kvpool_last_error();
  EXPECT_NE(std::string(kvpool_last_error()).find("storage"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(pool, nullptr);
}

// The radix_* path at random: inserts of sequences sharing prefixes, kvhost_match with
// load-backs, locks held for a while, device, window and host eviction, under each write
// policy; kvpool_check after every step, and every usable match holds its tokens' KV.
struct RadixWorkload {
  const char* policy;
  size_t window;
};

class HostTierSwaRadixRandom : public ::testing::TestWithParam<RadixWorkload> {};

TEST_P(HostTierSwaRadixRandom, MatchesKeepTheirBytesAndTheAccountingAddsUp) {
  const size_t window = GetParam().window;
  Pool pool(swa_tier_config(128, 4, 2.5, GetParam().policy, window));
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
    if (op < 3) {  // insert, when the slots can be had
      size_t freed = 0;
      if (full_available(pool) < t.size()) {
        size_t window_freed = 0;
        ASSERT_EQ(radix_evict_swa(pool, t.size(), t.size(), &freed, &window_freed), KVPOOL_OK) << kvpool_last_error();
      }
      if (full_available(pool) >= t.size()) insert_fresh(pool, t);
    } else if (op < 6) {  // match, load a host hit back, check the bytes, maybe lock
      std::vector<int32_t> probe = t;
      probe.push_back(7);
      Tiered m = host_match(pool, probe);
      expect_usable(pool, m.slots, kvtest::prefix_tags(probe, m.device), window);
      if (m.host > 0) {
        uint64_t last = 0;
        const size_t loaded = kvtest::host_load_back(pool, m.host_node, m.host, &last).size();
        ASSERT_FALSE(HasFailure()) << "step " << step;
        loaded_total += loaded;
        const Tiered after = host_match(pool, probe);
        expect_usable(pool, after.slots, kvtest::prefix_tags(probe, after.device), window);
        if (loaded > 0) {
          EXPECT_EQ(after.node, m.host_node) << "step " << step;
          // host_matched counts from the end of the device nodes, which may lie past the
          // usable device prefix (window tombstones): the loaded end is usable, and all of it.
          EXPECT_GE(after.device, m.device + m.host) << "step " << step;
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
      size_t freed = 0, window_freed = 0;
      ASSERT_EQ(radix_evict_swa(pool, 0, 1 + rng() % 20, &freed, &window_freed), KVPOOL_OK) << kvpool_last_error();
    }
    char report[4096];
    ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << "step " << step << ":\n" << report;
    if (kvtest::host_stats_now(pool).copies_in_flight > 0) ++in_flight_steps;
  }
  // write_back copies at eviction and waits for them; its loads land at the next match (settle()).
  const bool copies_stay = std::string(GetParam().policy) != "write_back";
  EXPECT_TRUE(!kDeferred || !copies_stay || in_flight_steps > 0) << "no step left a copy in flight";
  for (uint64_t node : locked) ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK);
  expect_consistent(pool);
  const kvhost_stats s = host_stats(pool);
  EXPECT_GT(s.backups, 0u);
  EXPECT_GT(loaded_total, 0u) << "the workload must load host hits back";
  EXPECT_EQ(s.load_tokens, loaded_total);
}

INSTANTIATE_TEST_SUITE_P(Policies, HostTierSwaRadixRandom,
                         ::testing::Values(RadixWorkload{"write_through", 4}, RadixWorkload{"write_through_selective", 4},
                                           RadixWorkload{"write_back", 4}, RadixWorkload{"write_through", 16},
                                           RadixWorkload{"write_back", 16}),
                         [](const ::testing::TestParamInfo<RadixWorkload>& info) {
                           return std::string(info.param.policy) + "_window" + std::to_string(info.param.window);
                         });

// Runs the kvseq_* workload (tests/support/tier_requests.hpp) on `pool`; then the pool is
// consistent, the tier made backups and the requests got host hits, and every load-back
// was a request's host hit.
void run_requests_reaching_the_host(kvpool* pool, kvtest::TierRequests requests) {
  uint64_t host_hits = 0;
  size_t in_flight_steps = 0;
  requests.in_flight_steps = &in_flight_steps;
  kvtest::run_tier_requests(pool, requests, &host_hits);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_TRUE(!kDeferred || in_flight_steps > 0) << "no step left a copy in flight";
  expect_consistent(pool);
  const kvhost_stats s = host_stats(pool);
  EXPECT_GT(s.backups, 0u);
  EXPECT_GT(host_hits, 0u) << "the workload must reach the host tier";
  EXPECT_EQ(s.load_tokens, host_hits) << "every load-back was a request's host hit";
}

// Random request workloads on a swa pool (tests/support/tier_requests.hpp's kvseq_*
// workload): prompts sharing prefixes, chunked prefill, decode, finish, abort and retract,
// under device pressure (eviction to the host, while fewer than 2 requests are live) and
// host pressure (host eviction); kvpool_check after every step, every request's cached
// prefix after kvseq_begin is usable with its tokens' KV in every layer, and a call that
// fails for want of memory changes nothing.
struct Workload {
  const char* policy;
  double ratio;
  int64_t tokens;
  size_t window;
};

class HostTierSwaRandom : public ::testing::TestWithParam<Workload> {};

TEST_P(HostTierSwaRandom, RequestsKeepTheirBytesAndTheAccountingAddsUp) {
  const Workload w = GetParam();
  constexpr int kRows = 4;
  Pool pool(swa_tier_config(w.tokens, kRows, w.ratio, w.policy, w.window));
  kvtest::TierRequests requests;
  requests.seed = 4321 + static_cast<unsigned>(w.tokens);
  requests.copies_in_flight = kCopiesInFlight;
  requests.max_live = kRows;
  requests.begin_may_fail = true;  // a begin may find no room for its window rows
  requests.write_kv = [&](const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
    write_kv(pool, slots, tags);
  };
  requests.expect_kv = [&](const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
    expect_usable(pool, slots, tags, w.window);
  };
  requests.pressure = [&](std::mt19937& rng, size_t live) {
    if (rng() % 6 == 0 && live < 2) {  // device pressure: push the cache to the host
      size_t freed = 0;
      ASSERT_EQ(radix_evict(pool, 1 + rng() % 40, &freed), KVPOOL_OK) << kvpool_last_error();
    }
  };
  run_requests_reaching_the_host(pool, requests);
}

INSTANTIATE_TEST_SUITE_P(Policies, HostTierSwaRandom,
                         ::testing::Values(Workload{"write_through", 3.0, 96, 4}, Workload{"write_through_selective", 3.0, 96, 4},
                                           Workload{"write_back", 3.0, 96, 4}, Workload{"write_through", 1.5, 128, 4},
                                           Workload{"write_back", 1.5, 128, 4}, Workload{"write_through", 3.0, 128, 16},
                                           Workload{"write_back", 2.0, 128, 16}),
                         [](const ::testing::TestParamInfo<Workload>& info) {
                           return std::string(info.param.policy) + "_ratio" +
                                  std::to_string(static_cast<int>(info.param.ratio * 10)) + "_tokens" +
                                  std::to_string(info.param.tokens) + "_window" + std::to_string(info.param.window);
                         });

// The randomized kvseq_* workload the mha and hybrid_linear tier tests share
// (tests/support/tier_requests.hpp: full-layer bytes, and failed calls compared against a
// full picture of the pool), on a swa pool with its device pushed to the host now and then.
class HostTierSwaSharedRequests : public ::testing::TestWithParam<const char*> {};

TEST_P(HostTierSwaSharedRequests, RequestsKeepTheirBytesAndFailuresChangeNothing) {
  Pool pool(swa_tier_config(96, 4, 3.0, GetParam()));
  kvtest::TierRequests requests;
  requests.seed = 777;
  requests.copies_in_flight = kCopiesInFlight;
  requests.max_live = 4;
  requests.layers = std::vector<int32_t>(std::begin(kFullLayers), std::end(kFullLayers));
  requests.pressure = [&](std::mt19937& rng, size_t /*live*/) {
    if (rng() % 6 == 0) {
      size_t freed = 0;
      ASSERT_EQ(radix_evict(pool, 1 + rng() % 40, &freed), KVPOOL_OK) << kvpool_last_error();
    }
  };
  run_requests_reaching_the_host(pool, requests);
}

INSTANTIATE_TEST_SUITE_P(Policies, HostTierSwaSharedRequests,
                         ::testing::Values("write_through", "write_through_selective", "write_back"));

}  // namespace
