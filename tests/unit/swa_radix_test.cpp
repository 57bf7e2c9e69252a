// SwaRadixTree internals (SGLANG_SEMANTICS §4.2, scenario of §8.4, fixes of §7 item 10), linked directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cache/swa_radix_tree.hpp"

namespace {

using kvp::Status;
using kvp::cache::NodeHandle;
using kvp::cache::SwaMatch;
using kvp::cache::SwaRadixTree;
using Tokens = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

enum class FreeKind { kFull, kSwa, kTombstone };

// Stand-in for the SWA allocator: a full pool, a window pool and the
// full→window mapping, ids handed out last-freed-first (so a freed window slot
// is reused at once). `stale` keeps the mapping entry when free_swa drops a
// window slot, as SGLang's unified cache could (#27586): a later free through
// that entry would hit a window slot now owned by someone else, which this
// stand-in reports as a violation.
struct SwaSim {
  bool stale;
  std::vector<int64_t> full_free, swa_free;
  std::vector<uint8_t> full_held;
  std::vector<int64_t> mapping;  // full slot -> window slot (0: none)
  std::vector<int64_t> owner;    // window slot -> full slot (0: free)
  std::vector<std::string> violations;
  std::vector<std::pair<FreeKind, int64_t>> log;
  std::function<void(FreeKind, int64_t)> on_free;

  SwaSim(int64_t full, int64_t swa, bool stale_mapping = false)
      : stale(stale_mapping), full_held(static_cast<size_t>(full) + 1, 0), mapping(static_cast<size_t>(full) + 1, 0),
        owner(static_cast<size_t>(swa) + 1, 0) {
    for (int64_t s = full; s >= 1; --s) full_free.push_back(s);
    for (int64_t s = swa; s >= 1; --s) swa_free.push_back(s);
  }
  size_t available() const { return std::min(full_free.size(), swa_free.size()); }
  size_t full_held_count() const { return static_cast<size_t>(std::count(full_held.begin(), full_held.end(), 1)); }
  size_t window_held_count() const {
    return static_cast<size_t>(std::count_if(owner.begin(), owner.end(), [](int64_t o) { return o != 0; }));
  }
  Slots alloc(size_t n) {
    Slots out;
    for (size_t i = 0; i < n && available() > 0; ++i) {
      const int64_t f = full_free.back(), w = swa_free.back();
      full_free.pop_back();
      swa_free.pop_back();
      full_held[static_cast<size_t>(f)] = 1;
      mapping[static_cast<size_t>(f)] = w;
      owner[static_cast<size_t>(w)] = f;
      out.push_back(f);
    }
    return out;
  }
  Status fail(const std::string& what) {
    violations.push_back(what);
    return Status::invalid(what);
  }
  Status release_full(int64_t f) {
    if (f < 1 || static_cast<size_t>(f) >= full_held.size() || !full_held[static_cast<size_t>(f)]) {
      return fail("full slot " + std::to_string(f) + " freed but not held");
    }
    full_held[static_cast<size_t>(f)] = 0;
    mapping[static_cast<size_t>(f)] = 0;
    full_free.push_back(f);
    return Status::ok();
  }
  Status release_window(int64_t f) {
    const int64_t w = mapping[static_cast<size_t>(f)];
    if (w == 0) return Status::ok();
    if (owner[static_cast<size_t>(w)] != f) {
      return fail("slot " + std::to_string(f) + " frees window slot " + std::to_string(w) + " owned by " +
                  std::to_string(owner[static_cast<size_t>(w)]));
    }
    owner[static_cast<size_t>(w)] = 0;
    swa_free.push_back(w);
    return Status::ok();
  }
  Status free_full(const int64_t* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      KVPOOL_RETURN_IF_ERROR(release_window(s[i]));
      KVPOOL_RETURN_IF_ERROR(release_full(s[i]));
      note(FreeKind::kFull, s[i]);
    }
    return Status::ok();
  }
  Status free_swa(const int64_t* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (mapping[static_cast<size_t>(s[i])] == 0) return fail("slot " + std::to_string(s[i]) + " has no window slot");
      KVPOOL_RETURN_IF_ERROR(release_window(s[i]));
      if (!stale) mapping[static_cast<size_t>(s[i])] = 0;
      note(FreeKind::kSwa, s[i]);
    }
    return Status::ok();
  }
  // A tombstone's full slots: clear the (possibly stale) mapping, free no window slot.
  Status free_tombstone(const int64_t* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const int64_t w = mapping[static_cast<size_t>(s[i])];
      if (w != 0 && owner[static_cast<size_t>(w)] == s[i]) {
        return fail("tombstone slot " + std::to_string(s[i]) + " still owns a window slot");
      }
      KVPOOL_RETURN_IF_ERROR(release_full(s[i]));
      note(FreeKind::kTombstone, s[i]);
    }
    return Status::ok();
  }
  void note(FreeKind kind, int64_t slot) {
    log.emplace_back(kind, slot);
    if (on_free) on_free(kind, slot);
  }
  SwaRadixTree::Callbacks callbacks(bool with_tombstone_callback = true) {
    SwaRadixTree::Callbacks cb{[this](const int64_t* s, size_t n) { return free_full(s, n); },
                               [this](const int64_t* s, size_t n) { return free_swa(s, n); }, nullptr};
    if (with_tombstone_callback) cb.free_tombstone = [this](const int64_t* s, size_t n) { return free_tombstone(s, n); };
    return cb;
  }
};

std::unique_ptr<SwaRadixTree> make_tree(SwaSim& sim, size_t window, bool with_tombstone_callback = true) {
  std::unique_ptr<SwaRadixTree> t;
  EXPECT_TRUE(SwaRadixTree::create(1, window, sim.callbacks(with_tombstone_callback), &t).is_ok());
  return t;
}

void expect_consistent(const SwaRadixTree& t, const SwaSim& sim) {
  std::string report;
  EXPECT_EQ(t.check(&report, 50), 0u) << report;
  EXPECT_TRUE(sim.violations.empty()) << sim.violations.front();
  Slots full, live;
  t.collect_slots(&full, &live);
  EXPECT_EQ(full.size(), sim.full_held_count());  // callers hold nothing between steps here
  EXPECT_EQ(live.size(), sim.window_held_count());
  EXPECT_EQ(t.full_evictable_size() + t.full_protected_size(), full.size());
  EXPECT_EQ(t.swa_evictable_size() + t.swa_protected_size(), live.size());
}

// Inserts fresh slots for the whole key with prev_prefix_len 0 (as SGLang's
// unit test does): the tree frees the duplicates itself.
size_t insert(SwaRadixTree& t, SwaSim& sim, const Tokens& key, NodeHandle* node = nullptr) {
  const Slots slots = sim.alloc(key.size());
  EXPECT_EQ(slots.size(), key.size());
  size_t prefix = 0;
  EXPECT_TRUE(t.insert(key.data(), key.size(), slots.data(), "", 0, &prefix, node).is_ok());
  return prefix;
}

SwaMatch match(SwaRadixTree& t, const Tokens& key) { return t.match(key.data(), key.size(), ""); }

struct Evicted {
  size_t full = 0, swa = 0;
};
Evicted evict(SwaRadixTree& t, size_t full, size_t swa) {
  Evicted e;
  EXPECT_TRUE(t.evict(full, swa, &e.full, &e.swa).is_ok());
  return e;
}

TEST(SwaRadixTree, RequiresPageSizeOneAWindowAndCallbacks) {
  SwaSim sim(8, 8);
  std::unique_ptr<SwaRadixTree> t;
  EXPECT_EQ(SwaRadixTree::create(2, 4, sim.callbacks(), &t).code(), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(SwaRadixTree::create(1, 0, sim.callbacks(), &t).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(SwaRadixTree::create(1, 4, {}, &t).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(SwaRadixTree::create(1, 4, sim.callbacks(false), &t).is_ok());  // free_tombstone is optional
}

// SGLANG_SEMANTICS §8.4: window 4, 128 full / 64 window slots.
TEST(SwaRadixTree, SglangScenario) {
  SwaSim sim(128, 64);
  auto t = make_tree(sim, 4);
  EXPECT_EQ(insert(*t, sim, {1, 2, 3}), 0u);
  EXPECT_EQ(insert(*t, sim, {1, 2, 3, 4, 5, 6, 7}), 3u);
  EXPECT_EQ(insert(*t, sim, {10, 11, 12}), 0u);
  EXPECT_EQ(insert(*t, sim, {1, 2, 3, 4, 5, 60, 70}), 5u);
  EXPECT_EQ(t->full_evictable_size(), 12u);
  EXPECT_EQ(t->swa_evictable_size(), 12u);
  EXPECT_EQ(sim.full_free.size(), 128u - 12u);  // the 8 duplicates went back
  expect_consistent(*t, sim);

  Evicted e = evict(*t, 1, 0);  // the least recent leaf [10,11,12]
  EXPECT_EQ(e.full, 3u);
  EXPECT_EQ(e.swa, 3u);
  e = evict(*t, 0, 1);  // tombstones the least recent window node, [1,2,3]
  EXPECT_EQ(e.full, 0u);
  EXPECT_EQ(e.swa, 3u);
  e = evict(*t, 1, 2);  // leaf [6,7]: 2 window tokens, so no second phase
  EXPECT_EQ(e.full, 2u);
  EXPECT_EQ(e.swa, 2u);
  EXPECT_EQ(t->full_evictable_size(), 7u);
  EXPECT_EQ(t->swa_evictable_size(), 4u);
  expect_consistent(*t, sim);

  SwaMatch m = match(*t, {1, 2, 3, 4, 5});
  EXPECT_EQ(m.slots.size(), 0u);  // only [4,5] is live after the tombstone: under the window
  EXPECT_EQ(m.matched, 5u);
  EXPECT_EQ(m.node, t->root());
  m = match(*t, {1, 2, 3, 4, 5, 60, 70});
  EXPECT_EQ(m.slots.size(), 7u);  // [4,5,60,70] fill the window
  EXPECT_EQ(t->key_length(m.node), 2u);
  expect_consistent(*t, sim);
}

// The usable prefix along a path of (tokens, tombstone) nodes, by SGLang's
// walk; `snapshot_bug` keeps the live run across a tombstone met after a run
// shorter than the window, as the snapshot did before PR #17061.
size_t usable_len(const std::vector<std::pair<size_t, bool>>& path, size_t window, bool snapshot_bug) {
  size_t run = SIZE_MAX, len = 0, best = 0;
  for (const auto& [tokens, tombstone] : path) {
    if (tombstone) {
      if (run >= window) best = len;
      if (run >= window || !snapshot_bug) run = 0;
    }
    len += tokens;
    if (!tombstone && run != SIZE_MAX) run += tokens;
  }
  return run >= window ? len : best;
}

TEST(SwaRadixTree, UsablePrefixRestartsTheRunOnEveryTombstone) {
  // Path: [1,2] tombstone, [3,4] live, [5] tombstone, [6,7,8] live; window 4.
  // Only 3 live tokens end the match, so nothing is usable; the snapshot's
  // rule would count 2 + 3 across the second tombstone and report all 8.
  const std::vector<std::pair<size_t, bool>> path{{2, true}, {2, false}, {1, true}, {3, false}};
  EXPECT_EQ(usable_len(path, 4, true), 8u);
  EXPECT_EQ(usable_len(path, 4, false), 0u);

  SwaSim sim(64, 64);
  auto t = make_tree(sim, 4);
  insert(*t, sim, {1, 2, 3, 4, 5, 6, 7, 8});
  insert(*t, sim, {1, 2, 9});
  insert(*t, sim, {1, 2, 3, 4, 9});
  insert(*t, sim, {1, 2, 3, 4, 5, 9});
  ASSERT_EQ(match(*t, {1, 2, 3, 4, 5, 6, 7, 8}).slots.size(), 8u);  // [1,2] [3,4] [5] [6,7,8] now newest
  // The three [9] leaves go first (whole), then [1,2] becomes a tombstone.
  Evicted e = evict(*t, 0, 5);
  EXPECT_EQ(e.full, 3u);
  EXPECT_EQ(e.swa, 5u);
  e = evict(*t, 0, 3);  // tombstones [3,4] and [5]
  EXPECT_EQ(e.swa, 3u);
  // Revive [3,4] as a request that got [1,2] from the tree would.
  const Slots fresh = sim.alloc(2);
  const Slots slots{0, 0, fresh[0], fresh[1]};  // slots[0, prev) are not read
  size_t prefix = 0;
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 4}.data(), 4, slots.data(), "", 2, &prefix).is_ok());
  EXPECT_EQ(prefix, 4u);
  EXPECT_EQ(t->swa_evictable_size(), 5u);  // [3,4] and [6,7,8]
  expect_consistent(*t, sim);

  SwaMatch m = match(*t, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(m.matched, 8u);
  EXPECT_EQ(m.slots.size(), 0u);
  EXPECT_EQ(m.node, t->root());
  EXPECT_EQ(match(*t, {1, 2, 3, 4}).slots.size(), 0u);

  // One more live token after the last tombstone fills the window.
  const Slots extra = sim.alloc(1);
  Slots longer(8, 0);
  longer.push_back(extra[0]);
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 4, 5, 6, 7, 8, 10}.data(), 9, longer.data(), "", 8, &prefix).is_ok());
  m = match(*t, {1, 2, 3, 4, 5, 6, 7, 8, 10});
  EXPECT_EQ(m.slots.size(), 9u);
  EXPECT_EQ(m.slots[2], fresh[0]);
  EXPECT_EQ(m.slots[8], extra[0]);
  expect_consistent(*t, sim);
}

TEST(SwaRadixTree, InsertFreesDuplicatesPastPrevPrefixOnly) {
  SwaSim sim(64, 64);
  auto t = make_tree(sim, 2);
  insert(*t, sim, {1, 2, 3, 4});
  const Slots tree_slots = match(*t, {1, 2, 3, 4}).slots;
  sim.log.clear();
  // A request that got all four from the tree hands them back unchanged.
  Slots slots = tree_slots;
  const Slots fresh = sim.alloc(2);
  slots.insert(slots.end(), fresh.begin(), fresh.end());
  size_t prefix = 0;
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 4, 5, 6}.data(), 6, slots.data(), "", 4, &prefix).is_ok());
  EXPECT_EQ(prefix, 4u);
  EXPECT_TRUE(sim.log.empty());
  // One that got only two computed the other four itself: all are duplicates now.
  const Slots mine = sim.alloc(4);
  slots = {tree_slots[0], tree_slots[1], mine[0], mine[1], mine[2], mine[3]};
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 4, 5, 6}.data(), 6, slots.data(), "", 2, &prefix).is_ok());
  EXPECT_EQ(prefix, 6u);
  ASSERT_EQ(sim.log.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(sim.log[i], std::make_pair(FreeKind::kFull, mine[i]));
  // A slot the caller passes that is the node's own is never freed.
  sim.log.clear();
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 4}.data(), 4, tree_slots.data(), "", 0, &prefix).is_ok());
  EXPECT_TRUE(sim.log.empty());
  expect_consistent(*t, sim);
}

// SGLang #27586: a revived tombstone's old full slots may still map to a
// window slot that was freed and handed to the very slots being adopted.
TEST(SwaRadixTree, ReviveNeverFreesWindowSlotsThroughAStaleMapping) {
  for (bool with_callback : {true, false}) {
    SCOPED_TRACE(with_callback ? "free_tombstone set" : "free_full for tombstones");
    SwaSim sim(16, 16, /*stale_mapping=*/true);
    auto t = make_tree(sim, 2, with_callback);
    insert(*t, sim, {1, 2, 3, 4});
    insert(*t, sim, {1, 2, 5, 6});  // [1,2] [3,4] [5,6]
    const Slots old = match(*t, {1, 2}).slots;
    ASSERT_EQ(old.size(), 2u);
    // With both leaves locked (each fills the window alone), [1,2] is the
    // only SWA candidate: it becomes a tombstone.
    int64_t u1 = 0, u2 = 0;
    const NodeHandle b = match(*t, {1, 2, 3, 4}).node, c = match(*t, {1, 2, 5, 6}).node;
    ASSERT_TRUE(t->lock(b, &u1).is_ok());
    ASSERT_TRUE(t->lock(c, &u2).is_ok());
    ASSERT_EQ(evict(*t, 0, 2).swa, 2u);
    ASSERT_TRUE(t->unlock(b, u1).is_ok());
    ASSERT_TRUE(t->unlock(c, u2).is_ok());
    ASSERT_TRUE(match(*t, {1, 2}).slots.empty());
    // A new request's slots get [1,2]'s old window slots back, which the stale
    // entries still name.
    const Slots fresh = sim.alloc(2);
    std::set<int64_t> old_windows{sim.mapping[static_cast<size_t>(old[0])], sim.mapping[static_cast<size_t>(old[1])]};
    std::set<int64_t> new_windows{sim.mapping[static_cast<size_t>(fresh[0])], sim.mapping[static_cast<size_t>(fresh[1])]};
    ASSERT_EQ(old_windows, new_windows);
    sim.log.clear();
    size_t prefix = 0;
    const Status st = t->insert(Tokens{1, 2}.data(), 2, fresh.data(), "", 0, &prefix);
    if (!with_callback) {
      // Freeing the old slots as ordinary full slots would free live window slots.
      EXPECT_FALSE(st.is_ok());
      EXPECT_FALSE(sim.violations.empty());
      continue;
    }
    ASSERT_TRUE(st.is_ok());
    EXPECT_EQ(prefix, 2u);
    ASSERT_EQ(sim.log.size(), 2u);
    EXPECT_EQ(sim.log[0], std::make_pair(FreeKind::kTombstone, old[0]));
    EXPECT_EQ(sim.log[1], std::make_pair(FreeKind::kTombstone, old[1]));
    EXPECT_EQ(match(*t, {1, 2}).slots, fresh);
    EXPECT_EQ(sim.window_held_count(), 6u);
    expect_consistent(*t, sim);
  }
}

// Later SGLang (#29352): lock holders use a full-locked tombstone's old slots,
// so an insert over it must not revive it (which would free them).
TEST(SwaRadixTree, FullLockedTombstoneIsNotRevived) {
  SwaSim sim(32, 32);
  auto t = make_tree(sim, 2);
  NodeHandle leaf = 0;
  insert(*t, sim, {1, 2, 3, 4, 5}, &leaf);
  insert(*t, sim, {1, 2, 3, 9});  // [1,2,3] [4,5] [9]
  const Slots old = match(*t, {1, 2, 3}).slots;
  int64_t uuid = 0;
  ASSERT_TRUE(t->lock(match(*t, {1, 2, 3, 4, 5}).node, &uuid).is_ok());  // SWA-locks [4,5] only
  ASSERT_NE(uuid, 0);
  // The matches made [9] the least recent: it goes whole, then [1,2,3],
  // full-locked but outside the window, becomes a tombstone.
  Evicted e = evict(*t, 0, 4);
  EXPECT_EQ(e.swa, 4u);
  const NodeHandle top = match(*t, {1, 2, 3}).node;
  EXPECT_EQ(top, t->root());

  const Slots fresh = sim.alloc(4);
  sim.log.clear();
  size_t prefix = 0;
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 7}.data(), 4, fresh.data(), "", 0, &prefix).is_ok());
  EXPECT_EQ(prefix, 3u);
  ASSERT_EQ(sim.log.size(), 3u);  // the caller's duplicates, the node keeps its slots
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sim.log[i], std::make_pair(FreeKind::kFull, fresh[i]));
  for (int64_t s : old) EXPECT_TRUE(sim.full_held[static_cast<size_t>(s)]);
  expect_consistent(*t, sim);

  // Once unlocked, the same insert revives it.
  ASSERT_TRUE(t->unlock(leaf, uuid).is_ok());
  const Slots again = sim.alloc(3);
  sim.log.clear();
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3}.data(), 3, again.data(), "", 0, &prefix).is_ok());
  ASSERT_EQ(sim.log.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sim.log[i], std::make_pair(FreeKind::kTombstone, old[i]));
  EXPECT_EQ(match(*t, {1, 2, 3}).slots, again);
  expect_consistent(*t, sim);
}

// prev_prefix_len inside a tombstone (e.g. EAGLE's one-token adjustment): only
// the caller's part is revived; the part before stays a tombstone with its slots.
TEST(SwaRadixTree, ReviveStartsAtPrevPrefixLenInsideANode) {
  SwaSim sim(32, 32);
  auto t = make_tree(sim, 2);
  insert(*t, sim, {1, 2, 3, 4, 5, 6});
  insert(*t, sim, {1, 2, 3, 4, 9});  // [1,2,3,4] [5,6] [9]
  const Slots old = match(*t, {1, 2, 3, 4}).slots;
  int64_t u1 = 0, u2 = 0;
  const NodeHandle a = match(*t, {1, 2, 3, 4, 5, 6}).node, b = match(*t, {1, 2, 3, 4, 9}).node;
  ASSERT_TRUE(t->lock(a, &u1).is_ok());
  ASSERT_TRUE(t->lock(b, &u2).is_ok());  // [9] alone is under the window: [1,2,3,4] locked too
  ASSERT_TRUE(t->unlock(b, u2).is_ok());
  insert(*t, sim, {1, 2, 3, 4, 9, 10});  // keeps [9] an internal node
  ASSERT_EQ(evict(*t, 0, 5).swa, 5u);    // [1,2,3,4] and [9] become tombstones
  ASSERT_TRUE(t->unlock(a, u1).is_ok());
  ASSERT_EQ(match(*t, {1, 2, 3, 4}).slots.size(), 0u);

  const Slots fresh = sim.alloc(2);
  const Slots slots{old[0], old[1], fresh[0], fresh[1]};
  sim.log.clear();
  size_t prefix = 0;
  ASSERT_TRUE(t->insert(Tokens{1, 2, 3, 4}.data(), 4, slots.data(), "", 2, &prefix).is_ok());
  EXPECT_EQ(prefix, 4u);
  ASSERT_EQ(sim.log.size(), 2u);  // only [3,4]'s old slots
  EXPECT_EQ(sim.log[0], std::make_pair(FreeKind::kTombstone, old[2]));
  EXPECT_EQ(sim.log[1], std::make_pair(FreeKind::kTombstone, old[3]));
  EXPECT_TRUE(sim.full_held[static_cast<size_t>(old[0])]);
  // [1,2] is still a tombstone, so with window 2 the usable prefix ends at [3,4].
  const SwaMatch m = match(*t, {1, 2, 3, 4});
  EXPECT_EQ(m.slots, slots);
  EXPECT_EQ(t->key_length(m.node), 2u);
  expect_consistent(*t, sim);
}

// Nodes [1,2,3] [4,5,6] [7,8,9,10] plus side leaves, window 4.
struct LockFixture {
  SwaSim sim{64, 64};
  std::unique_ptr<SwaRadixTree> t = make_tree(sim, 4);
  NodeHandle top = 0, mid = 0, low = 0;
  LockFixture() {
    insert(*t, sim, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, &low);
    insert(*t, sim, {1, 2, 3, 99});
    insert(*t, sim, {1, 2, 3, 4, 5, 6, 99});
    top = match(*t, {1, 2, 3}).node;
    mid = match(*t, {1, 2, 3, 4, 5, 6}).node;
  }
};

TEST(SwaRadixTree, LocksCoverTheWindowAndTheUuidBoundsTheUnlock) {
  LockFixture f;
  SwaRadixTree& t = *f.t;
  int64_t uuid = 0;
  ASSERT_TRUE(t.lock(f.low, &uuid).is_ok());
  EXPECT_NE(uuid, 0);
  EXPECT_EQ(t.full_protected_size(), 10u);
  EXPECT_EQ(t.swa_protected_size(), 4u);  // [7,8,9,10] alone fills the window
  EXPECT_EQ(t.full_evictable_size(), 2u);
  expect_consistent(t, f.sim);
  EXPECT_FALSE(t.unlock(f.low, uuid + 100).is_ok());  // not on the path: nothing changes
  EXPECT_EQ(t.swa_protected_size(), 4u);
  ASSERT_TRUE(t.unlock(f.low, uuid).is_ok());
  EXPECT_EQ(t.full_protected_size(), 0u);
  EXPECT_EQ(t.swa_protected_size(), 0u);

  int64_t mid_uuid = 0;
  ASSERT_TRUE(t.lock(f.mid, &mid_uuid).is_ok());  // [4,5,6] then [1,2,3]: 6 >= 4
  EXPECT_NE(mid_uuid, uuid);
  EXPECT_EQ(t.swa_protected_size(), 6u);
  // Splitting [1,2,3] moves the uuid up to [1], where the lock now stops.
  EXPECT_EQ(insert(*f.t, f.sim, {1, 50}), 1u);
  EXPECT_EQ(t.swa_protected_size(), 6u);
  expect_consistent(t, f.sim);
  ASSERT_TRUE(t.unlock(f.mid, mid_uuid).is_ok());
  EXPECT_EQ(t.full_protected_size(), 0u);
  EXPECT_EQ(t.swa_protected_size(), 0u);
  EXPECT_FALSE(t.unlock(f.mid, mid_uuid).is_ok());
  expect_consistent(t, f.sim);

  // A path shorter than the window locks up to the root: uuid 0.
  NodeHandle short_leaf = 0;
  insert(*f.t, f.sim, {70, 71}, &short_leaf);
  int64_t short_uuid = -1;
  ASSERT_TRUE(t.lock(short_leaf, &short_uuid).is_ok());
  EXPECT_EQ(short_uuid, 0);
  EXPECT_EQ(t.swa_protected_size(), 2u);
  ASSERT_TRUE(t.unlock(short_leaf, 0).is_ok());
  EXPECT_EQ(t.swa_protected_size(), 0u);
  expect_consistent(t, f.sim);
}

TEST(SwaRadixTree, EvictionKeepsLockedWindowsAndCascadesTombstones) {
  LockFixture f;
  SwaRadixTree& t = *f.t;
  int64_t uuid = 0;
  ASSERT_TRUE(t.lock(f.low, &uuid).is_ok());
  Evicted e = evict(t, 100, 100);
  EXPECT_EQ(e.full, 2u);  // the two [99] leaves
  EXPECT_EQ(e.swa, 8u);   // and the window KV of [1,2,3] and [4,5,6], now tombstones
  EXPECT_EQ(t.full_protected_size(), 10u);
  EXPECT_EQ(t.swa_protected_size(), 4u);
  EXPECT_EQ(t.swa_evictable_size(), 0u);
  EXPECT_TRUE(t.is_tombstone(f.top));
  EXPECT_TRUE(t.is_tombstone(f.mid));
  expect_consistent(t, f.sim);
  // Still usable: the locked window ends the match.
  EXPECT_EQ(match(t, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).slots.size(), 10u);
  // Locking [4,5,6] would need [1,2,3]'s window KV.
  int64_t other = 0;
  EXPECT_EQ(t.lock(f.mid, &other).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(t.full_protected_size(), 10u);

  ASSERT_TRUE(t.unlock(f.low, uuid).is_ok());
  e = evict(t, 1, 0);  // the leaf, then both tombstones above it
  EXPECT_EQ(e.full, 10u);
  EXPECT_EQ(e.swa, 4u);
  EXPECT_EQ(t.node_count(), 1u);
  EXPECT_EQ(f.sim.full_held_count(), 0u);
  EXPECT_EQ(f.sim.window_held_count(), 0u);
  EXPECT_FALSE(t.is_live(f.low));
  EXPECT_FALSE(t.lock(f.low, &other).is_ok());
  expect_consistent(t, f.sim);
}

// Reference model: every cached prefix (namespace first) maps to the slot of
// its last token and whether its window KV is still there; the tree's frees
// update it, so it predicts matches (the usable-prefix rule per token) and
// checks that every free is of the right kind.
struct Model {
  std::map<Tokens, std::pair<int64_t, bool>> entries;
  std::unordered_map<int64_t, Tokens> by_slot;
  std::set<int64_t> caller;  // slots a caller handed to insert and still owns
  // Slots a locked match handed out: the full ones, and the window ones of its
  // last `window` tokens, must stay until the unlock.
  std::multiset<int64_t> pinned_full, pinned_window;
  std::vector<std::string> violations;

  static Tokens prefix(int32_t ns, const Tokens& key, size_t len) {
    Tokens p{-1 - ns};
    p.insert(p.end(), key.begin(), key.begin() + static_cast<long>(len));
    return p;
  }
  size_t cached(int32_t ns, const Tokens& key) const {
    size_t len = 0;
    while (len < key.size() && entries.count(prefix(ns, key, len + 1))) ++len;
    return len;
  }
  size_t usable(int32_t ns, const Tokens& key, size_t window) const {
    const size_t raw = cached(ns, key);
    size_t best = 0, run = 0;
    bool dead_seen = false;
    for (size_t x = 1; x <= raw; ++x) {
      const bool alive = entries.at(prefix(ns, key, x)).second;
      dead_seen = dead_seen || !alive;
      run = alive ? run + 1 : 0;
      if (!dead_seen || run >= window) best = x;
    }
    return best;
  }
  void on_free(FreeKind kind, int64_t slot) {
    // Tombstoning a pinned slot outside the holder's window is fine.
    const bool full_freed = kind != FreeKind::kSwa, window_freed = kind != FreeKind::kTombstone;
    if ((full_freed && pinned_full.count(slot) != 0) || (window_freed && pinned_window.count(slot) != 0)) {
      violations.push_back("slot " + std::to_string(slot) + " freed under a lock");
    }
    auto it = by_slot.find(slot);
    if (it == by_slot.end()) {
      if (kind != FreeKind::kFull || caller.erase(slot) == 0) violations.push_back("unexpected free of " + std::to_string(slot));
      return;
    }
    auto& entry = entries.at(it->second);
    if (entry.second != (kind != FreeKind::kTombstone)) violations.push_back("free of the wrong kind for " + std::to_string(slot));
    if (kind == FreeKind::kSwa) {
      entry.second = false;
      return;
    }
    entries.erase(it->second);
    by_slot.erase(it);
  }
};

struct HeldLock {
  NodeHandle node;
  int64_t uuid;
  Slots full, window;
};

void run_random(bool stale, size_t kWindow, uint32_t seed) {
  std::mt19937 rng(seed);
  SwaSim sim(48, 32, stale);
  auto t = make_tree(sim, kWindow);
  Model model;
  sim.on_free = [&](FreeKind kind, int64_t slot) { model.on_free(kind, slot); };
  std::vector<HeldLock> locked;
  for (int step = 0; step < 5000; ++step) {
    const int32_t ns = static_cast<int32_t>(rng() % 2);
    const std::string extra = ns == 0 ? "" : "salt";
    Tokens key(1 + rng() % 9);
    for (auto& tok : key) tok = static_cast<int32_t>(rng() % 3);
    const int op = static_cast<int>(rng() % 12);
    if (op < 5) {
      if (sim.available() < key.size()) {
        const size_t need = key.size() - sim.available();
        size_t full = 0, swa = 0;
        ASSERT_TRUE(t->evict(need, need, &full, &swa).is_ok());
      }
      if (sim.available() < key.size()) continue;
      // Most inserts come from a request that matched first and passes the
      // tree's slots back for its prefix.
      size_t prev = 0;
      Slots slots;
      if (rng() % 4 != 0) {
        slots = t->match(key.data(), key.size(), extra).slots;
        prev = slots.size();
      }
      const size_t cached = model.cached(ns, key);
      const Slots fresh = sim.alloc(key.size() - prev);
      slots.insert(slots.end(), fresh.begin(), fresh.end());
      model.caller.insert(fresh.begin(), fresh.end());
      size_t prefix = 0;
      ASSERT_TRUE(t->insert(key.data(), key.size(), slots.data(), extra, prev, &prefix).is_ok());
      ASSERT_EQ(prefix, cached);
      for (size_t i = prev; i < key.size(); ++i) {
        if (model.caller.erase(slots[i]) == 0) continue;  // freed as a duplicate
        const Tokens p = Model::prefix(ns, key, i + 1);
        ASSERT_TRUE(i >= prefix || model.entries.count(p) == 0) << "adopted over a live entry";
        model.entries[p] = {slots[i], true};
        model.by_slot[slots[i]] = p;
      }
      ASSERT_TRUE(model.caller.empty());
    } else if (op < 8) {
      const size_t raw = model.cached(ns, key), usable = model.usable(ns, key, kWindow);
      const SwaMatch m = t->match(key.data(), key.size(), extra);
      ASSERT_EQ(m.matched, raw);
      ASSERT_EQ(m.slots.size(), usable);
      for (size_t i = 0; i < usable; ++i) ASSERT_EQ(m.slots[i], model.entries.at(Model::prefix(ns, key, i + 1)).first);
      if (usable == 0) {
        ASSERT_EQ(m.node, t->root());
      }
      if (usable > 0 && rng() % 2 == 0 && locked.size() < 5) {
        HeldLock held{m.node, 0, m.slots, {}};
        ASSERT_TRUE(t->lock(m.node, &held.uuid).is_ok());
        held.window.assign(m.slots.end() - static_cast<long>(std::min(kWindow, m.slots.size())), m.slots.end());
        model.pinned_full.insert(held.full.begin(), held.full.end());
        model.pinned_window.insert(held.window.begin(), held.window.end());
        locked.push_back(std::move(held));
      }
    } else if (op < 10) {
      if (!locked.empty()) {
        const size_t i = rng() % locked.size();
        ASSERT_TRUE(t->unlock(locked[i].node, locked[i].uuid).is_ok());
        for (int64_t s : locked[i].full) model.pinned_full.erase(model.pinned_full.find(s));
        for (int64_t s : locked[i].window) model.pinned_window.erase(model.pinned_window.find(s));
        locked.erase(locked.begin() + static_cast<long>(i));
      }
    } else {
      const size_t want_full = rng() % 4, want_swa = rng() % 8;
      size_t full = 0, swa = 0;
      ASSERT_TRUE(t->evict(want_full, want_swa, &full, &swa).is_ok());
      if (full < want_full) {
        ASSERT_EQ(t->full_evictable_size(), 0u);
      }
      if (swa < want_swa) {
        ASSERT_EQ(t->swa_evictable_size(), 0u);
      }
    }
    std::string report;
    ASSERT_EQ(t->check(&report, 20), 0u) << "step " << step << "\n" << report;
    ASSERT_TRUE(sim.violations.empty()) << "step " << step << ": " << sim.violations.front();
    ASSERT_TRUE(model.violations.empty()) << "step " << step << ": " << model.violations.front();
    size_t alive = 0;
    for (const auto& [p, e] : model.entries) alive += e.second ? 1 : 0;
    ASSERT_EQ(sim.full_held_count(), model.entries.size());
    ASSERT_EQ(sim.window_held_count(), alive);
    ASSERT_EQ(t->full_evictable_size() + t->full_protected_size(), model.entries.size());
    ASSERT_EQ(t->swa_evictable_size() + t->swa_protected_size(), alive);
  }
  for (const HeldLock& held : locked) ASSERT_TRUE(t->unlock(held.node, held.uuid).is_ok());
  size_t full = 0, swa = 0;
  ASSERT_TRUE(t->evict(SIZE_MAX, 0, &full, &swa).is_ok());
  EXPECT_EQ(t->node_count(), 1u);
  EXPECT_EQ(sim.full_held_count(), 0u);
  EXPECT_EQ(sim.window_held_count(), 0u);
}

TEST(SwaRadixTree, RandomOperationsMatchAReferenceModel) {
  for (size_t window : {2, 3}) run_random(false, window, static_cast<uint32_t>(window));
}

TEST(SwaRadixTree, RandomOperationsWithStaleWindowMappings) {
  for (size_t window : {2, 3}) run_random(true, window, static_cast<uint32_t>(10 + window));
}

}  // namespace
