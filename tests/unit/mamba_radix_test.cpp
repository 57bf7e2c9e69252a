// MambaRadixTree internals (SGLANG_SEMANTICS §4.1, scenario of §8.3), linked directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/mamba_radix_tree.hpp"

namespace {

using kvp::Status;
using kvp::cache::MambaMatch;
using kvp::cache::MambaRadixTree;
using kvp::cache::NodeHandle;
using Tokens = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

// Stand-in pools: hands out ids last-freed-first (so reuse bugs show up) and
// rejects frees of ids it does not hold.
struct Pools {
  std::set<int64_t> full_held;
  std::set<int32_t> mamba_held;
  std::vector<int64_t> full_free;
  std::vector<int32_t> mamba_free;
  std::vector<std::string> violations;
  std::function<void(int64_t)> on_free_full;
  std::function<void(int32_t)> on_free_mamba;

  Pools(int64_t full, int32_t mamba) {
    for (int64_t s = full; s >= 1; --s) full_free.push_back(s);
    for (int32_t s = mamba - 1; s >= 0; --s) mamba_free.push_back(s);
  }
  Slots alloc(size_t n) {
    Slots out;
    for (size_t i = 0; i < n && !full_free.empty(); ++i) {
      out.push_back(full_free.back());
      full_free.pop_back();
      full_held.insert(out.back());
    }
    return out;
  }
  int32_t alloc_mamba() {
    if (mamba_free.empty()) return -1;
    const int32_t s = mamba_free.back();
    mamba_free.pop_back();
    mamba_held.insert(s);
    return s;
  }
  Status give_back(const int64_t* s, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (full_held.erase(s[i]) == 0) {
        violations.push_back("full slot " + std::to_string(s[i]) + " freed but not held");
        return Status::invalid(violations.back());
      }
      full_free.push_back(s[i]);
      if (on_free_full) on_free_full(s[i]);
    }
    return Status::ok();
  }
  Status give_back_mamba(int32_t s) {
    if (mamba_held.erase(s) == 0) {
      violations.push_back("mamba slot " + std::to_string(s) + " freed but not held");
      return Status::invalid(violations.back());
    }
    mamba_free.push_back(s);
    if (on_free_mamba) on_free_mamba(s);
    return Status::ok();
  }
  MambaRadixTree::Callbacks callbacks() {
    return {[this](const int64_t* s, size_t n) { return give_back(s, n); },
            [this](int32_t s) { return give_back_mamba(s); }};
  }
};

std::unique_ptr<MambaRadixTree> make_tree(Pools& pools) {
  std::unique_ptr<MambaRadixTree> t;
  EXPECT_TRUE(MambaRadixTree::create(1, pools.callbacks(), &t).is_ok());
  return t;
}

void expect_consistent(const MambaRadixTree& t) {
  std::string report;
  EXPECT_EQ(t.check(&report, 50), 0u) << report;
}

struct Inserted {
  size_t prefix = 0;
  bool exist = false;
  NodeHandle node = 0;
};

// Inserts like cache_finished_req: fresh slots and a fresh state, then frees
// what the tree did not take (duplicate slots; the state if one existed).
Inserted insert(MambaRadixTree& t, Pools& pools, const Tokens& key, const std::string& extra = "") {
  Inserted r;
  const Slots slots = pools.alloc(key.size());
  const int32_t state = pools.alloc_mamba();
  EXPECT_EQ(slots.size(), key.size());
  EXPECT_GE(state, 0);
  EXPECT_TRUE(t.insert(key.data(), key.size(), slots.data(), state, extra, &r.prefix, &r.exist, &r.node).is_ok());
  EXPECT_TRUE(pools.give_back(slots.data(), r.prefix).is_ok());
  if (r.exist) {
    EXPECT_TRUE(pools.give_back_mamba(state).is_ok());
  }
  return r;
}

MambaMatch match(MambaRadixTree& t, const Tokens& key, const std::string& extra = "") {
  return t.match(key.data(), key.size(), extra);
}

TEST(MambaRadixTree, RequiresPageSizeOneAndCallbacks) {
  Pools pools(8, 4);
  std::unique_ptr<MambaRadixTree> t;
  EXPECT_EQ(MambaRadixTree::create(4, pools.callbacks(), &t).code(), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(MambaRadixTree::create(1, {}, &t).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(MambaRadixTree::create(1, pools.callbacks(), &t).is_ok());
}

// SGLANG_SEMANTICS §8.3, step by step.
TEST(MambaRadixTree, SglangScenario) {
  Pools pools(128, 20);
  auto t = make_tree(pools);
  EXPECT_EQ(insert(*t, pools, {1, 2, 3}).prefix, 0u);
  EXPECT_EQ(insert(*t, pools, {1, 2, 3, 4, 5, 6, 7}).prefix, 3u);
  EXPECT_EQ(insert(*t, pools, {10, 11, 12}).prefix, 0u);
  EXPECT_EQ(insert(*t, pools, {1, 2, 3, 4, 5, 60, 70}).prefix, 5u);
  EXPECT_EQ(t->full_evictable_size(), 12u);  // [1,2,3] [4,5] [6,7] [60,70] [10,11,12]
  EXPECT_EQ(t->mamba_evictable_size(), 4u);   // the split node [4,5] has none
  expect_consistent(*t);

  size_t full = 0, states = 0;
  ASSERT_TRUE(t->evict(1, &full, &states).is_ok());
  EXPECT_EQ(full, 3u);  // the least recent leaf, [10,11,12], whole
  EXPECT_EQ(states, 1u);
  EXPECT_EQ(match(*t, {10, 11, 12}).matched, 0u);
  expect_consistent(*t);

  ASSERT_TRUE(t->evict_mamba(1, &states, &full).is_ok());
  EXPECT_EQ(states, 1u);
  EXPECT_EQ(full, 0u);  // the internal node [1,2,3] becomes a tombstone; its KV stays
  EXPECT_EQ(t->full_evictable_size(), 9u);
  EXPECT_EQ(t->mamba_evictable_size(), 2u);
  expect_consistent(*t);

  MambaMatch m = match(*t, {1, 2, 3, 4, 5});
  EXPECT_EQ(m.slots.size(), 0u);  // no state anywhere on the path
  EXPECT_EQ(m.matched, 5u);
  EXPECT_EQ(m.node, t->root());

  m = match(*t, {1, 2, 3, 4, 5, 60, 70});
  EXPECT_EQ(m.slots.size(), 7u);
  EXPECT_EQ(t->key_length(m.node), 2u);
  EXPECT_GE(m.mamba_slot, 0);

  m = match(*t, {1, 2, 3, 4, 5, 6, 7});
  EXPECT_EQ(m.slots.size(), 7u);
  EXPECT_EQ(t->key_length(m.node), 2u);

  // [60,70] is now the least recent state, and a leaf: evicted entirely.
  ASSERT_TRUE(t->evict_mamba(1, &states, &full).is_ok());
  EXPECT_EQ(states, 1u);
  EXPECT_EQ(full, 2u);
  m = match(*t, {1, 2, 3, 4, 5, 60, 70});
  EXPECT_EQ(m.slots.size(), 0u);
  EXPECT_EQ(m.node, t->root());
  EXPECT_EQ(match(*t, {1, 2, 3, 4, 5, 6, 7}).slots.size(), 7u);
  expect_consistent(*t);
  EXPECT_TRUE(pools.violations.empty());
}

TEST(MambaRadixTree, InsertReportsExistingStateAndRevivesTombstones) {
  Pools pools(64, 8);
  auto t = make_tree(pools);
  insert(*t, pools, {1, 2, 3, 4});
  Inserted r = insert(*t, pools, {1, 2, 3, 4});
  EXPECT_EQ(r.prefix, 4u);
  EXPECT_TRUE(r.exist);  // the caller keeps (and here frees) its state

  // Splitting at 2 leaves [1,2] without a state: matching it gives nothing.
  insert(*t, pools, {1, 2, 9});
  MambaMatch m = match(*t, {1, 2});
  EXPECT_EQ(m.matched, 2u);
  EXPECT_EQ(m.slots.size(), 0u);
  // Inserting exactly [1,2] attaches the state to the tombstone.
  r = insert(*t, pools, {1, 2});
  EXPECT_EQ(r.prefix, 2u);
  EXPECT_FALSE(r.exist);
  m = match(*t, {1, 2});
  EXPECT_EQ(m.slots.size(), 2u);
  EXPECT_EQ(m.node, r.node);
  EXPECT_EQ(t->mamba_evictable_size(), 3u);
  expect_consistent(*t);

  std::vector<int64_t> full;
  std::vector<int32_t> states;
  t->collect_slots(&full, &states);
  EXPECT_EQ(std::set<int64_t>(full.begin(), full.end()), pools.full_held);
  EXPECT_EQ(std::set<int32_t>(states.begin(), states.end()), pools.mamba_held);
  size_t prefix = 0;
  bool exist = false;
  EXPECT_FALSE(t->insert(nullptr, 0, nullptr, 0, "", &prefix, &exist).is_ok());
}

TEST(MambaRadixTree, MatchReturnsSlotsUpToTheDeepestState) {
  Pools pools(64, 8);
  auto t = make_tree(pools);
  insert(*t, pools, {1, 2, 3});
  insert(*t, pools, {1, 2, 3, 4, 5, 6});
  const Slots all = match(*t, {1, 2, 3, 4, 5, 6}).slots;
  ASSERT_EQ(all.size(), 6u);
  // A query ending inside [4,5,6] splits it; the usable prefix stops at [1,2,3].
  MambaMatch m = match(*t, {1, 2, 3, 4, 5, 99});
  EXPECT_EQ(m.matched, 5u);
  EXPECT_EQ(m.slots, Slots(all.begin(), all.begin() + 3));
  EXPECT_EQ(t->key_length(m.node), 3u);
  EXPECT_EQ(t->node_count(), 4u);  // root, [1,2,3], [4,5], [6]
  EXPECT_EQ(match(*t, {1, 2, 3, 4, 5, 6}).slots, all);
  expect_consistent(*t);
}

TEST(MambaRadixTree, ExtraKeysAreSeparateNamespaces) {
  Pools pools(64, 8);
  auto t = make_tree(pools);
  insert(*t, pools, {1, 2, 3}, "a");
  EXPECT_EQ(insert(*t, pools, {1, 2, 3}, "b").prefix, 0u);
  EXPECT_EQ(match(*t, {1, 2, 3}).matched, 0u);
  EXPECT_EQ(match(*t, {1, 2, 3}, "a").slots.size(), 3u);
  EXPECT_NE(match(*t, {1, 2, 3}, "a").slots, match(*t, {1, 2, 3}, "b").slots);
  expect_consistent(*t);
}

TEST(MambaRadixTree, LocksProtectKvAndState) {
  Pools pools(64, 8);
  auto t = make_tree(pools);
  insert(*t, pools, {1, 2, 3});
  const NodeHandle leaf = insert(*t, pools, {1, 2, 3, 4, 5}).node;
  insert(*t, pools, {7, 8});
  ASSERT_TRUE(t->lock(leaf).is_ok());
  EXPECT_EQ(t->full_protected_size(), 5u);
  EXPECT_EQ(t->full_evictable_size(), 2u);
  EXPECT_EQ(t->mamba_protected_size(), 1u);  // only the locked node's state
  EXPECT_EQ(t->mamba_evictable_size(), 2u);
  ASSERT_TRUE(t->lock(leaf).is_ok());  // locks nest
  expect_consistent(*t);

  size_t full = 0, states = 0;
  ASSERT_TRUE(t->evict(100, &full, &states).is_ok());
  EXPECT_EQ(full, 2u);  // only [7,8]
  ASSERT_TRUE(t->evict_mamba(100, &states, &full).is_ok());
  EXPECT_EQ(states, 1u);  // [1,2,3] becomes a tombstone; the locked leaf's state stays
  EXPECT_EQ(full, 0u);
  EXPECT_EQ(t->mamba_evictable_size(), 0u);
  EXPECT_EQ(match(*t, {1, 2, 3, 4, 5}).slots.size(), 5u);
  expect_consistent(*t);

  // The tombstone [1,2,3] is no longer a match result on its own.
  EXPECT_EQ(match(*t, {1, 2, 3}).node, t->root());
  ASSERT_TRUE(t->unlock(leaf).is_ok());
  ASSERT_TRUE(t->unlock(leaf).is_ok());
  EXPECT_FALSE(t->unlock(leaf).is_ok());
  EXPECT_EQ(t->full_protected_size(), 0u);
  EXPECT_EQ(t->mamba_protected_size(), 0u);
  expect_consistent(*t);

  // Evicting the leaf takes its tombstone parent along (cascade).
  ASSERT_TRUE(t->evict(1, &full, &states).is_ok());
  EXPECT_EQ(full, 5u);
  EXPECT_EQ(states, 1u);
  EXPECT_EQ(t->node_count(), 1u);
  EXPECT_FALSE(t->is_live(leaf));
  EXPECT_FALSE(t->lock(leaf).is_ok());  // stale handle
  EXPECT_TRUE(pools.full_held.empty());
  EXPECT_TRUE(pools.mamba_held.empty());
  expect_consistent(*t);
}

TEST(MambaRadixTree, LockingATombstoneIsRefused) {
  Pools pools(64, 8);
  auto t = make_tree(pools);
  insert(*t, pools, {1, 2, 3, 4});
  insert(*t, pools, {1, 2, 5});  // splits: [1,2] is a tombstone
  // Reach the tombstone's handle through an insert that ends there, then
  // drop its state again.
  Inserted r = insert(*t, pools, {1, 2});
  size_t states = 0;
  ASSERT_TRUE(t->lock(match(*t, {1, 2, 3, 4}).node).is_ok());  // keep [3,4]
  ASSERT_TRUE(t->lock(match(*t, {1, 2, 5}).node).is_ok());     // and [5]
  ASSERT_TRUE(t->evict_mamba(1, &states).is_ok());
  EXPECT_EQ(states, 1u);
  EXPECT_EQ(t->lock(r.node).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(t->lock(t->root()).is_ok());  // the root: a no-op
  EXPECT_TRUE(t->unlock(t->root()).is_ok());
  expect_consistent(*t);
}

TEST(MambaRadixTree, SplitKeepsLocksAndSizes) {
  Pools pools(64, 8);
  auto t = make_tree(pools);
  const NodeHandle leaf = insert(*t, pools, {1, 2, 3, 4}).node;
  ASSERT_TRUE(t->lock(leaf).is_ok());
  insert(*t, pools, {1, 2, 9});  // splits the locked node
  EXPECT_EQ(t->full_protected_size(), 4u);
  EXPECT_EQ(t->full_evictable_size(), 1u);
  EXPECT_EQ(t->mamba_protected_size(), 1u);
  expect_consistent(*t);
  ASSERT_TRUE(t->unlock(leaf).is_ok());  // the handle still names the lower part
  EXPECT_EQ(t->full_protected_size(), 0u);
  EXPECT_EQ(t->mamba_protected_size(), 0u);
  expect_consistent(*t);
}

// Reference model: every cached prefix (namespace first) maps to the slot of
// its last token and, if present, a state. The tree's frees update it.
struct Model {
  std::map<Tokens, std::pair<int64_t, int32_t>> entries;
  std::unordered_map<int64_t, Tokens> by_slot;
  std::unordered_map<int32_t, Tokens> by_state;

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
};

TEST(MambaRadixTree, RandomOperationsMatchAReferenceModel) {
  std::mt19937 rng(11);
  Pools pools(48, 10);
  auto t = make_tree(pools);
  Model model;
  // What a locked match handed out must stay until the unlock.
  std::multiset<int64_t> pinned_full;
  std::multiset<int32_t> pinned_state;
  pools.on_free_full = [&](int64_t s) {
    if (pinned_full.count(s) != 0) pools.violations.push_back("slot " + std::to_string(s) + " freed under a lock");
    auto it = model.by_slot.find(s);
    if (it == model.by_slot.end()) return;  // a caller's duplicate
    model.entries.erase(it->second);
    model.by_slot.erase(it);
  };
  pools.on_free_mamba = [&](int32_t s) {
    if (pinned_state.count(s) != 0) pools.violations.push_back("state " + std::to_string(s) + " freed under a lock");
    auto it = model.by_state.find(s);
    if (it == model.by_state.end()) return;
    auto entry = model.entries.find(it->second);  // gone already when its leaf was evicted
    if (entry != model.entries.end()) entry->second.second = -1;
    model.by_state.erase(it);
  };
  struct HeldLock {
    NodeHandle node;
    Slots full;
    int32_t state;
  };
  std::vector<HeldLock> locked;
  for (int step = 0; step < 6000; ++step) {
    const int32_t ns = static_cast<int32_t>(rng() % 2);
    const std::string extra = ns == 0 ? "" : "lora";
    Tokens key(1 + rng() % 7);
    for (auto& tok : key) tok = static_cast<int32_t>(rng() % 3);
    const int op = static_cast<int>(rng() % 12);
    if (op < 4) {
      const size_t cached = model.cached(ns, key);
      size_t freed = 0;
      if (pools.full_free.size() < key.size()) {
        ASSERT_TRUE(t->evict(key.size() - pools.full_free.size(), &freed).is_ok());
      }
      if (pools.mamba_free.empty()) {
        ASSERT_TRUE(t->evict_mamba(1, &freed).is_ok());
      }
      if (pools.full_free.size() < key.size() || pools.mamba_free.empty()) continue;
      const size_t cached_now = model.cached(ns, key);  // eviction may have shortened it
      EXPECT_LE(cached_now, cached);
      const Tokens full_key = Model::prefix(ns, key, key.size());
      const bool had_state = cached_now == key.size() && model.entries[full_key].second >= 0;
      const Slots slots = pools.alloc(key.size());
      const int32_t state = pools.alloc_mamba();
      size_t prefix = 0;
      bool exist = false;
      ASSERT_TRUE(t->insert(key.data(), key.size(), slots.data(), state, extra, &prefix, &exist).is_ok());
      ASSERT_EQ(prefix, cached_now);
      ASSERT_EQ(exist, had_state);
      ASSERT_TRUE(pools.give_back(slots.data(), prefix).is_ok());
      for (size_t i = prefix; i < key.size(); ++i) {
        const Tokens p = Model::prefix(ns, key, i + 1);
        model.entries[p] = {slots[i], -1};
        model.by_slot[slots[i]] = p;
      }
      if (exist) {
        ASSERT_TRUE(pools.give_back_mamba(state).is_ok());
      } else {
        model.entries[full_key].second = state;
        model.by_state[state] = full_key;
      }
    } else if (op < 7) {
      const size_t raw = model.cached(ns, key);
      size_t best = 0;
      for (size_t len = raw; len > 0 && best == 0; --len) {
        if (model.entries[Model::prefix(ns, key, len)].second >= 0) best = len;
      }
      const MambaMatch m = t->match(key.data(), key.size(), extra);
      ASSERT_EQ(m.matched, raw);
      ASSERT_EQ(m.slots.size(), best);
      for (size_t i = 0; i < best; ++i) ASSERT_EQ(m.slots[i], model.entries[Model::prefix(ns, key, i + 1)].first);
      if (best > 0) {
        ASSERT_EQ(m.mamba_slot, model.entries[Model::prefix(ns, key, best)].second);
        if (rng() % 2 == 0 && locked.size() < 6) {
          ASSERT_TRUE(t->lock(m.node).is_ok());
          locked.push_back({m.node, m.slots, m.mamba_slot});
          pinned_full.insert(m.slots.begin(), m.slots.end());
          pinned_state.insert(m.mamba_slot);
        }
      } else {
        ASSERT_EQ(m.node, t->root());
      }
    } else if (op < 9) {
      if (!locked.empty()) {
        const size_t i = rng() % locked.size();
        ASSERT_TRUE(t->unlock(locked[i].node).is_ok());
        for (int64_t s : locked[i].full) pinned_full.erase(pinned_full.find(s));
        pinned_state.erase(pinned_state.find(locked[i].state));
        locked.erase(locked.begin() + static_cast<long>(i));
      }
    } else if (op < 11) {
      const size_t want = 1 + rng() % 8;
      size_t full = 0;
      ASSERT_TRUE(t->evict(want, &full).is_ok());
      if (full < want) {
        ASSERT_EQ(t->full_evictable_size(), 0u);
      }
    } else {
      const size_t want = 1 + rng() % 3;
      size_t states = 0;
      ASSERT_TRUE(t->evict_mamba(want, &states).is_ok());
      if (states < want) {
        ASSERT_EQ(t->mamba_evictable_size(), 0u);
      }
    }
    std::string report;
    ASSERT_EQ(t->check(&report, 20), 0u) << "step " << step << "\n" << report;
    // The tree owns exactly what the pools have handed out (callers keep nothing).
    ASSERT_EQ(pools.full_held.size(), model.by_slot.size());
    ASSERT_EQ(pools.mamba_held.size(), model.by_state.size());
    ASSERT_EQ(t->full_evictable_size() + t->full_protected_size(), model.entries.size()) << "step " << step << " op " << op;
    ASSERT_EQ(t->mamba_evictable_size() + t->mamba_protected_size(), model.by_state.size());
    ASSERT_TRUE(pools.violations.empty()) << pools.violations.front();
  }
  for (const HeldLock& held : locked) ASSERT_TRUE(t->unlock(held.node).is_ok());
  size_t full = 0;
  ASSERT_TRUE(t->evict(SIZE_MAX, &full).is_ok());
  EXPECT_EQ(t->node_count(), 1u);
  EXPECT_TRUE(pools.full_held.empty());
  EXPECT_TRUE(pools.mamba_held.empty());
}

}  // namespace
