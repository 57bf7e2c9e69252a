// RadixCache internals (SGLANG_SEMANTICS §3, test scenarios of §8.1), linked directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cache/page_hash.hpp"
#include "cache/radix_tree.hpp"
#include "cache/sha256.hpp"

namespace {

using kvp::Status;
using kvp::cache::EventType;
using kvp::cache::EvictionPolicy;
using kvp::cache::RadixTree;
using Tokens = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

size_t insert(RadixTree& t, const Tokens& key, const Slots& value, const std::string& extra = "", int32_t priority = 0) {
  size_t prefix = 99;
  EXPECT_TRUE(t.insert(key.data(), key.size(), value.data(), extra, priority, &prefix).is_ok());
  return prefix;
}

Slots match(RadixTree& t, const Tokens& key, const std::string& extra = "") {
  return t.match(key.data(), key.size(), extra).slots;
}

// Frees nothing, but records what the tree hands back: every slot (paged values
// expanded to their page's slots), and the runs, one per evicted node.
struct Recorder {
  int64_t page = 1;
  Slots freed;
  std::vector<Slots> runs;
  explicit Recorder(int64_t page_size = 1) : page(page_size) {}
  RadixTree::FreeSlots fn() {
    return [this](const int64_t* values, const size_t* ends, size_t n_runs, bool paged) {
      for (size_t r = 0, from = 0; r < n_runs; from = ends[r++]) {
        Slots run;
        for (size_t i = from; i < ends[r]; ++i) {
          for (int64_t j = 0; j < (paged ? page : 1); ++j) run.push_back(values[i] + j);
        }
        freed.insert(freed.end(), run.begin(), run.end());
        runs.push_back(run);
      }
      return Status::ok();
    };
  }
};

void expect_consistent(const RadixTree& t) {
  std::string report;
  EXPECT_EQ(t.check(&report, 50), 0u) << report;
}

TEST(RadixTree, InsertMatchAndSizes) {
  RadixTree t(1, EvictionPolicy::kLru, false);
  EXPECT_EQ(insert(t, {1, 2, 3}, {10, 20, 30}), 0u);
  EXPECT_EQ(t.total_size(), 3u);
  EXPECT_EQ(t.evictable_size(), 3u);
  EXPECT_EQ(match(t, {1, 2, 3}), (Slots{10, 20, 30}));
  EXPECT_EQ(match(t, {1, 2}), (Slots{10, 20}));
  EXPECT_EQ(match(t, {7}), Slots{});
  EXPECT_EQ(insert(t, {4, 5, 6, 7, 8}, {1, 2, 3, 4, 5}), 0u);
  EXPECT_EQ(t.total_size(), 8u);
  EXPECT_EQ(insert(t, {1, 2, 3, 9}, {11, 21, 31, 91}), 3u);  // three tokens were cached already
  EXPECT_EQ(t.total_size(), 9u);
  EXPECT_EQ(match(t, {1, 2, 3, 9}), (Slots{10, 20, 30, 91}));  // the tree keeps its own slots
  expect_consistent(t);
}

TEST(RadixTree, ExtraKeysAreSeparateNamespaces) {
  RadixTree t(1, EvictionPolicy::kLru, false);
  insert(t, {1, 2, 3}, {10, 20, 30}, "key1");
  insert(t, {1, 2, 3}, {40, 50, 60}, "key2");
  insert(t, {1, 2, 3}, {70, 80, 90});
  EXPECT_EQ(match(t, {1, 2, 3}, "key1"), (Slots{10, 20, 30}));
  EXPECT_EQ(match(t, {1, 2, 3}, "key2"), (Slots{40, 50, 60}));
  EXPECT_EQ(match(t, {1, 2, 3}), (Slots{70, 80, 90}));
  EXPECT_EQ(match(t, {1, 2, 3}, "unknown"), Slots{});
  EXPECT_EQ(t.total_size(), 9u);
  expect_consistent(t);
}

TEST(RadixTree, LocksMoveTokensBetweenEvictableAndProtected) {
  RadixTree t(1, EvictionPolicy::kLru, false);
  insert(t, {1, 2, 3}, {10, 20, 30});
  auto m = t.match(Tokens{1, 2, 3}.data(), 3, "");
  ASSERT_TRUE(t.lock(m.last_node).is_ok());
  EXPECT_EQ(t.evictable_size(), 0u);
  EXPECT_EQ(t.protected_size(), 3u);
  Recorder r;
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(3, r.fn(), &evicted).is_ok());
  EXPECT_EQ(evicted, 0u);  // locked nodes are never evicted
  ASSERT_TRUE(t.unlock(m.last_node).is_ok());
  EXPECT_EQ(t.evictable_size(), 3u);
  EXPECT_EQ(t.protected_size(), 0u);
  EXPECT_FALSE(t.unlock(m.last_node).is_ok());  // not locked any more
  expect_consistent(t);
}

TEST(RadixTree, EvictTakesWholeLeavesAndThenParents) {
  RadixTree t(1, EvictionPolicy::kLru, false);
  insert(t, {1, 2}, {10, 20});
  insert(t, {1, 2, 3, 4}, {10, 20, 30, 40});
  insert(t, {5, 6}, {50, 60});
  match(t, {5, 6});  // [5, 6] is now the most recent
  Recorder r;
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(2, r.fn(), &evicted).is_ok());
  EXPECT_EQ(r.freed, (Slots{30, 40}));  // the least recent leaf, whole
  EXPECT_EQ(t.total_size(), 4u);
  ASSERT_TRUE(t.evict(1, r.fn(), &evicted).is_ok());
  EXPECT_EQ(r.freed, (Slots{30, 40, 10, 20}));  // its parent became a leaf
  ASSERT_TRUE(t.evict(100, r.fn(), &evicted).is_ok());
  EXPECT_EQ(evicted, 2u);  // only what exists
  EXPECT_EQ(t.total_size(), 0u);
  expect_consistent(t);
}

TEST(RadixTree, PageAlignedMatching) {
  for (int page : {1, 2, 4}) {
    RadixTree t(page, EvictionPolicy::kLru, false);
    Tokens key{1, 2, 3, 4, 5, 6, 7, 8};
    Slots value{10, 11, 12, 13, 14, 15, 16, 17};
    insert(t, key, value);
    for (size_t len : {5u, 6u, 7u}) {
      const Slots m = match(t, Tokens(key.begin(), key.begin() + static_cast<long>(len)));
      EXPECT_EQ(m.size(), len / static_cast<size_t>(page) * static_cast<size_t>(page)) << "page " << page << " len " << len;
      EXPECT_GT(m.size(), 0u);
    }
    size_t prefix = 0;
    EXPECT_FALSE(t.insert(key.data(), 3, value.data(), "", 0, &prefix).is_ok() && page > 1);  // unaligned insert rejected
  }
}

TEST(RadixTree, SplitsKeepTotalsAndValues) {
  for (int page : {1, 2}) {
    RadixTree t(page, EvictionPolicy::kLru, false);
    insert(t, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8});
    insert(t, {1, 2, 9, 10}, {1, 2, 90, 100});
    EXPECT_EQ(t.total_size(), 10u);
    EXPECT_EQ(match(t, {1, 2, 3, 4, 999, 1000}), (Slots{1, 2, 3, 4}));
    EXPECT_EQ(t.total_size(), 10u);
    EXPECT_EQ(match(t, {1, 2, 3, 4, 5, 6, 7, 8}), (Slots{1, 2, 3, 4, 5, 6, 7, 8}));
    EXPECT_EQ(match(t, {1, 2, 3, 4, 5, 6, 77, 88}), (Slots{1, 2, 3, 4, 5, 6}));
    EXPECT_EQ(match(t, {1, 2, 9, 10}), (Slots{1, 2, 90, 100}));
    expect_consistent(t);
  }
}

TEST(RadixTree, SplitCopiesLocks) {
  RadixTree t(1, EvictionPolicy::kLru, false);
  insert(t, {1, 2, 3, 4}, {1, 2, 3, 4});
  auto m = t.match(Tokens{1, 2, 3, 4}.data(), 4, "");
  ASSERT_TRUE(t.lock(m.last_node).is_ok());
  match(t, {1, 2, 7});  // splits the locked node into [1, 2] + [3, 4]
  EXPECT_EQ(t.protected_size(), 4u);
  Recorder r;
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(4, r.fn(), &evicted).is_ok());
  EXPECT_EQ(evicted, 0u);
  ASSERT_TRUE(t.unlock(m.last_node).is_ok());  // the old handle still names the lower part
  EXPECT_EQ(t.evictable_size(), 4u);
  expect_consistent(t);
}

TEST(RadixTree, StaleHandlesAreRejected) {
  RadixTree t(1, EvictionPolicy::kLru, false);
  insert(t, {1, 2}, {1, 2});
  auto m = t.match(Tokens{1, 2}.data(), 2, "");
  Recorder r;
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(2, r.fn(), &evicted).is_ok());
  EXPECT_FALSE(t.lock(m.last_node).is_ok());
  insert(t, {3, 4}, {3, 4});  // reuses the arena slot with a new generation
  EXPECT_FALSE(t.lock(m.last_node).is_ok());
  auto n = t.match(Tokens{3, 4}.data(), 2, "");
  t.reset();
  EXPECT_FALSE(t.lock(n.last_node).is_ok());
  EXPECT_TRUE(t.lock(t.root()).is_ok());  // the root is always live (and never counted)
}

TEST(RadixTree, EvictionPolicies) {
  struct Case {
    EvictionPolicy policy;
    Slots first_out;
  };
  // Leaves: A=[1] inserted first, B=[2] second with priority 5, C=[3] third; A then B are
  // matched again (A twice), so by access time C < A < B, by frequency C < B < A.
  const Case cases[] = {{EvictionPolicy::kLru, {30}},  {EvictionPolicy::kLfu, {30}},
                        {EvictionPolicy::kFifo, {10}}, {EvictionPolicy::kMru, {20}},
                        {EvictionPolicy::kFilo, {30}}, {EvictionPolicy::kPriority, {30}}};
  for (const Case& c : cases) {
    RadixTree t(1, c.policy, false);
    insert(t, {1}, {10});
    insert(t, {2}, {20}, "", 5);
    insert(t, {3}, {30});
    match(t, {1});
    match(t, {1});
    match(t, {2});
    Recorder r;
    size_t evicted = 0;
    ASSERT_TRUE(t.evict(1, r.fn(), &evicted).is_ok());
    EXPECT_EQ(r.freed, c.first_out) << static_cast<int>(c.policy);
    ASSERT_TRUE(t.evict(2, r.fn(), &evicted).is_ok());
    EXPECT_EQ(r.freed.size(), 3u);
  }
  // lfu: the twice-matched A outlives B once C is gone; priority: B (priority 5) goes last.
  RadixTree lfu(1, EvictionPolicy::kLfu, false), prio(1, EvictionPolicy::kPriority, false);
  for (RadixTree* t : {&lfu, &prio}) {
    insert(*t, {1}, {10});
    insert(*t, {2}, {20}, "", 5);
    insert(*t, {3}, {30});
    match(*t, {1});
    match(*t, {1});
    match(*t, {2});
  }
  Recorder a, b;
  size_t evicted = 0;
  ASSERT_TRUE(lfu.evict(3, a.fn(), &evicted).is_ok());
  EXPECT_EQ(a.freed, (Slots{30, 20, 10}));
  ASSERT_TRUE(prio.evict(3, b.fn(), &evicted).is_ok());
  EXPECT_EQ(b.freed, (Slots{30, 10, 20}));
}

std::string sha256sum_of(const std::vector<uint8_t>& bytes) {
  char path[] = "/tmp/kvpool_hash_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  FILE* f = fdopen(fd, "wb");
  fwrite(bytes.data(), 1, bytes.size(), f);
  fclose(f);
  FILE* p = popen((std::string("sha256sum ") + path).c_str(), "r");
  char hex[65] = {0};
  EXPECT_EQ(fread(hex, 1, 64, p), 64u);
  pclose(p);
  std::remove(path);
  return hex;
}

std::string hex(const kvp::cache::Digest& d) {
  std::string s;
  char buf[3];
  for (uint8_t b : d) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    s += buf;
  }
  return s;
}

std::vector<uint8_t> le_bytes(const Tokens& tokens) {
  std::vector<uint8_t> out;
  for (int32_t t : tokens) {
    const uint32_t u = static_cast<uint32_t>(t);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  return out;
}

TEST(PageHash, MatchesSha256sumOnTheSameBytes) {
  kvp::cache::Sha256 empty;
  EXPECT_EQ(hex(empty.finish()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const Tokens first{1, 2, 3, 4}, second{70000, -1, 0, 255};
  const auto d1 = kvp::cache::page_digest(nullptr, first.data(), first.size());
  EXPECT_EQ(hex(d1), sha256sum_of(le_bytes(first)));
  std::vector<uint8_t> chained(d1.begin(), d1.end());
  const auto tail = le_bytes(second);
  chained.insert(chained.end(), tail.begin(), tail.end());
  const auto d2 = kvp::cache::page_digest(&d1, second.data(), second.size());
  EXPECT_EQ(hex(d2), sha256sum_of(chained));
  // Event id: the first 8 digest bytes, big-endian, as a signed int64.
  const std::string h = hex(d2).substr(0, 16);
  EXPECT_EQ(kvp::cache::event_id(d2), static_cast<int64_t>(std::stoull(h, nullptr, 16)));
  // A long input crosses SHA-256 block boundaries.
  Tokens many(1000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int32_t>(i * 7919);
  EXPECT_EQ(hex(kvp::cache::page_digest(nullptr, many.data(), many.size())), sha256sum_of(le_bytes(many)));
}

TEST(PageHash, HardwareAndPortableSha256Agree) {
  // Both compress paths (the CPU's SHA extensions where present) on every length
  // around the one- and two-block padding boundaries, and on page digests.
  std::mt19937 rng(5);
  for (size_t len = 0; len < 300; ++len) {
    std::vector<uint8_t> bytes(len);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    kvp::cache::Sha256 hw, sw;
    hw.update(bytes.data(), bytes.size());
    const auto a = hw.finish();
    ASSERT_EQ(kvp::cache::Sha256::of(bytes.data(), bytes.size()), a) << "one-shot, length " << len;
    kvp::cache::Sha256::allow_hardware(false);
    sw.update(bytes.data(), bytes.size());
    const auto b = sw.finish();
    kvp::cache::Sha256::allow_hardware(true);
    ASSERT_EQ(a, b) << "length " << len;
  }
  for (size_t n : {1u, 16u, 40u, 41u, 64u}) {  // short (one-shot) and long pages agree with the incremental hash
    Tokens toks(n);
    for (auto& t : toks) t = static_cast<int32_t>(rng());
    kvp::cache::Sha256 inc;
    std::vector<uint8_t> le;
    for (int32_t t : toks) {
      for (int k = 0; k < 4; ++k) le.push_back(static_cast<uint8_t>(static_cast<uint32_t>(t) >> (8 * k)));
    }
    inc.update(le.data(), le.size());
    EXPECT_EQ(kvp::cache::page_digest(nullptr, toks.data(), n), inc.finish()) << n << " tokens";
  }
  Tokens page(16);
  for (auto& t : page) t = static_cast<int32_t>(rng());
  const auto first = kvp::cache::page_digest(nullptr, page.data(), page.size());
  const auto hw = kvp::cache::page_digest(&first, page.data(), page.size());
  kvp::cache::Sha256::allow_hardware(false);
  const auto sw = kvp::cache::page_digest(&first, page.data(), page.size());
  kvp::cache::Sha256::allow_hardware(true);
  EXPECT_EQ(hw, sw);
  std::printf("SHA-256 hardware path: %s\n", kvp::cache::Sha256::hardware() ? "yes" : "no (portable only)");
}

TEST(PageHash, ChainEqualsPageByPageDigests) {
  // page_digest_chain keeps the previous digest in registers on the hardware path and
  // reuses one padded buffer: it must give page_digest's chain exactly, on both paths,
  // for pages whose message (32 + 4 * page bytes) pads to one, two, three and four
  // blocks and beyond the hardware path's 256-byte buffer, with and without a parent.
  std::mt19937 rng(11);
  for (bool hardware : {true, false}) {
    kvp::cache::Sha256::allow_hardware(hardware);
    for (size_t page : {1u, 2u, 5u, 6u, 8u, 13u, 14u, 16u, 29u, 30u, 32u, 45u, 46u, 54u, 55u, 64u}) {
      for (bool with_parent : {false, true}) {
        const size_t pages = 9;
        Tokens toks(page * pages);
        for (auto& t : toks) t = static_cast<int32_t>(rng());
        kvp::cache::Digest parent{};
        for (auto& b : parent) b = static_cast<uint8_t>(rng());
        std::vector<kvp::cache::Digest> expected(pages), chained(pages);
        const kvp::cache::Digest* prev = with_parent ? &parent : nullptr;
        for (size_t p = 0; p < pages; ++p) {
          expected[p] = kvp::cache::page_digest(prev, toks.data() + p * page, page);
          prev = &expected[p];
        }
        kvp::cache::page_digest_chain(with_parent ? &parent : nullptr, toks.data(), page, pages, chained.data());
        EXPECT_EQ(chained, expected) << "page " << page << (with_parent ? ", under a parent" : ", under the root")
                                     << (hardware ? ", hardware path" : ", portable path");
      }
    }
  }
  kvp::cache::Sha256::allow_hardware(true);
  kvp::cache::page_digest_chain(nullptr, nullptr, 16, 0, nullptr);  // no pages: writes nothing
}

TEST(RadixEvents, StoredPerPageWithChainedParents) {
  RadixTree t(4, EvictionPolicy::kLru, true);
  EXPECT_TRUE(t.take_events().empty());
  insert(t, {1, 2, 3, 4, 1, 2, 3, 4}, {4, 5, 6, 7, 8, 9, 10, 11});
  auto events = t.take_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kBlockStored);
  EXPECT_FALSE(events[0].has_parent);
  EXPECT_TRUE(events[1].has_parent);
  EXPECT_EQ(events[1].parent_hash, events[0].block_hash);
  EXPECT_NE(events[0].block_hash, events[1].block_hash);  // same tokens, different position
  EXPECT_EQ(events[0].tokens, (Tokens{1, 2, 3, 4}));
  const Tokens page{1, 2, 3, 4};
  EXPECT_EQ(events[0].block_hash, kvp::cache::event_id(kvp::cache::page_digest(nullptr, page.data(), 4)));
  EXPECT_TRUE(t.take_events().empty());  // drained

  Recorder r(4);
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(8, r.fn(), &evicted).is_ok());
  EXPECT_EQ(r.freed, (Slots{4, 5, 6, 7, 8, 9, 10, 11}));  // stored per page, handed back whole
  events = t.take_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, EventType::kBlockRemoved);
  t.reset();
  events = t.take_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, EventType::kAllBlocksCleared);
}

TEST(RadixEvents, NoEventsOnSplitAndHashesFollowTheSplit) {
  RadixTree t(2, EvictionPolicy::kLru, true);
  insert(t, {1, 2, 3, 4}, {2, 3, 4, 5});
  t.take_events();
  EXPECT_EQ(insert(t, {1, 2, 5, 6}, {2, 3, 8, 9}), 2u);
  auto events = t.take_events();
  ASSERT_EQ(events.size(), 1u);  // only the new page [5, 6]; the split itself emits nothing
  EXPECT_EQ(events[0].tokens, (Tokens{5, 6}));
  const Tokens first{1, 2};
  EXPECT_EQ(events[0].parent_hash, kvp::cache::event_id(kvp::cache::page_digest(nullptr, first.data(), 2)));
  Recorder r(2);
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(100, r.fn(), &evicted).is_ok());
  EXPECT_EQ(r.runs, (std::vector<Slots>{{4, 5}, {8, 9}, {2, 3}}));  // one run per node, in eviction order
  EXPECT_EQ(t.take_events().size(), 3u);  // [3, 4], [5, 6], then [1, 2]: one hash each
  expect_consistent(t);
}

TEST(RadixTree, ManyChildrenSurviveRemovalsFromTheChildTable) {
  // Thousands of children under the root and under one inner node, removed in a
  // shuffled (touched) order: every remaining node must stay reachable (check()) and
  // matchable, across the child table's growth and its backward-shift deletions.
  for (int page : {1, 4}) {
    RadixTree t(page, EvictionPolicy::kLru, false);
    const size_t P = static_cast<size_t>(page);
    std::vector<Tokens> keys;
    int64_t slot = 1;
    for (int32_t i = 0; i < 3000; ++i) {
      Tokens k;
      if (i < 1500) {
        k.assign(P, 100000 + i);  // one-page keys under the root
      } else {
        k.assign(2 * P, 7);  // a shared first page (one inner node) ...
        k[P] = i;            // ... with 1500 children
      }
      Slots v(k.size());
      for (auto& x : v) x = slot++;
      insert(t, k, v);
      keys.push_back(k);
    }
    expect_consistent(t);
    std::mt19937 rng(3);
    for (int step = 0; step < 40; ++step) {
      for (int j = 0; j < 50; ++j) match(t, keys[rng() % keys.size()]);  // reorder the LRU
      Recorder r(page);
      size_t evicted = 0;
      ASSERT_TRUE(t.evict(60 * P, r.fn(), &evicted).is_ok());
      std::string report;
      ASSERT_EQ(t.check(&report, 20), 0u) << "page " << page << " step " << step << "\n" << report;
    }
    for (const Tokens& k : keys) {  // whatever is left still matches with its own slots' count
      const Slots m = match(t, k);
      EXPECT_EQ(m.size() % P, 0u);
    }
    Recorder r(page);
    size_t evicted = 0;
    ASSERT_TRUE(t.evict(SIZE_MAX, r.fn(), &evicted).is_ok());
    EXPECT_EQ(t.total_size(), 0u);
    EXPECT_EQ(t.node_count(), 1u);
  }
}

TEST(RadixTree, ReservedSparesServePagedAndUnpagedNodes) {
  // Spare leaf buffers hold a value per page while every node is paged; after an insert
  // of non-consecutive slots (a node with a value per token) they hold a value per token.
  // Inserts and splits after reserve_inserts() / reserve_match() must store the same
  // slots either way.
  RadixTree t(4, EvictionPolicy::kLru, false);
  const Tokens a{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
  const Slots paged{8, 9, 10, 11, 20, 21, 22, 23, 40, 41, 42, 43};
  size_t bound = a.size();
  t.reserve_inserts(&bound, 1);
  EXPECT_EQ(insert(t, a, paged), 0u);
  t.reserve_match(a.size());
  EXPECT_EQ(match(t, Tokens(a.begin(), a.begin() + 4)), Slots(paged.begin(), paged.begin() + 4));  // a split
  expect_consistent(t);
  const Tokens b{1, 1, 1, 1, 5, 5, 5, 5, 6, 6, 6, 6};
  const Slots unpaged{8, 9, 10, 11, 60, 62, 61, 63, 70, 71, 72, 74};  // pages not in order
  bound = 8;
  t.reserve_inserts(&bound, 1);
  EXPECT_EQ(insert(t, b, unpaged), 4u);
  EXPECT_EQ(match(t, b), unpaged);
  t.reserve_match(b.size());
  EXPECT_EQ(match(t, Tokens(b.begin(), b.begin() + 8)), Slots(unpaged.begin(), unpaged.begin() + 8));  // splits it
  EXPECT_EQ(match(t, b), unpaged);
  EXPECT_EQ(match(t, a), paged);
  expect_consistent(t);
  Recorder r(4);
  size_t evicted = 0;
  ASSERT_TRUE(t.evict(SIZE_MAX, r.fn(), &evicted).is_ok());
  Slots freed = r.freed;
  std::sort(freed.begin(), freed.end());
  Slots all{8, 9, 10, 11, 20, 21, 22, 23, 40, 41, 42, 43, 60, 61, 62, 63, 70, 71, 72, 74};
  EXPECT_EQ(freed, all);
}

TEST(RadixTree, RandomOperationsStayConsistent) {
  std::mt19937 rng(7);
  for (int page : {1, 4}) {
    RadixTree t(page, EvictionPolicy::kLru, true);
    std::vector<kvp::cache::NodeHandle> locked;
    int64_t next_slot = 1;
    for (int step = 0; step < 3000; ++step) {
      Tokens key(static_cast<size_t>(page) * (1 + rng() % 6));
      for (auto& tok : key) tok = static_cast<int32_t>(rng() % 3);
      const int op = static_cast<int>(rng() % 10);
      if (op < 4) {
        Slots value(key.size());
        for (auto& v : value) v = next_slot++;
        size_t prefix = 0;
        ASSERT_TRUE(t.insert(key.data(), key.size(), value.data(), "", 0, &prefix).is_ok());
      } else if (op < 6) {
        auto m = t.match(key.data(), key.size(), "");
        if (rng() % 2 == 0 && t.lock(m.last_node).is_ok()) locked.push_back(m.last_node);
      } else if (op < 8 && !locked.empty()) {
        ASSERT_TRUE(t.unlock(locked.back()).is_ok());
        locked.pop_back();
      } else {
        Recorder r(page);
        size_t evicted = 0;
        ASSERT_TRUE(t.evict(rng() % 8, r.fn(), &evicted).is_ok());
        ASSERT_EQ(r.freed.size(), evicted);
      }
      std::string report;
      ASSERT_EQ(t.check(&report, 20), 0u) << "page " << page << " step " << step << "\n" << report;
    }
  }
}

// kvseq caches a request's pages with insert() and then matches the key again; it takes the
// second walk from the path the insert recorded (match_inserted). Two trees under the same
// random operations, one matching with match_into() and one with match_inserted(), must agree
// on every result and end in the same state: the same eviction order under each policy that
// reads access times or hit counts.
TEST(RadixTree, MatchInsertedIsMatchIntoOfTheInsertedKey) {
  std::mt19937 rng(11);
  for (EvictionPolicy policy : {EvictionPolicy::kLru, EvictionPolicy::kLfu, EvictionPolicy::kMru}) {
    for (int page : {1, 4}) {
      RadixTree a(page, policy, false), b(page, policy, false);
      std::vector<kvp::cache::NodeHandle> locked;
      int64_t next_slot = 1;
      for (int step = 0; step < 1500; ++step) {
        Tokens key(static_cast<size_t>(page) * (1 + rng() % 6));
        for (auto& tok : key) tok = static_cast<int32_t>(rng() % 3);
        const int op = static_cast<int>(rng() % 10);
        if (op < 5) {
          Slots value(key.size());
          for (auto& v : value) v = next_slot++;
          size_t pa = 0, pb = 0;
          ASSERT_TRUE(a.insert(key.data(), key.size(), value.data(), "", 0, &pa).is_ok());
          ASSERT_TRUE(b.insert(key.data(), key.size(), value.data(), "", 0, &pb).is_ok());
          ASSERT_EQ(pa, pb);
          // The window kvseq copies: the tokens that were cached before (its duplicates).
          const size_t from = rng() % 2 == 0 ? 0 : std::min(pa, static_cast<size_t>(page));
          Slots sa(key.size(), -7), sb(key.size(), -7);
          kvp::cache::NodeHandle la = 0, lb = 0;
          const size_t ma = a.match_into(key.data(), key.size(), "", sa.data(), &la, from, pa);
          const size_t mb = b.match_inserted(sb.data(), &lb, from, pa);
          ASSERT_EQ(ma, key.size());
          ASSERT_EQ(mb, ma);
          ASSERT_EQ(lb, la);
          ASSERT_EQ(sb, sa);
          for (size_t i = 0; i < key.size(); ++i) {
            if (i < from || i >= pa) {
              ASSERT_EQ(sa[i], -7) << "slot " << i << " outside the window was written";
            }
          }
          if (rng() % 3 == 0 && a.lock(la).is_ok()) {
            ASSERT_TRUE(b.lock(lb).is_ok());
            locked.push_back(la);
          }
        } else if (op < 7) {
          const auto ma = a.match(key.data(), key.size(), "");
          const auto mb = b.match(key.data(), key.size(), "");
          ASSERT_EQ(mb.slots, ma.slots);
        } else if (op < 8 && !locked.empty()) {
          ASSERT_TRUE(a.unlock(locked.back()).is_ok());
          ASSERT_TRUE(b.unlock(locked.back()).is_ok());
          locked.pop_back();
        } else {
          Recorder ra(page), rb(page);
          size_t ea = 0, eb = 0;
          const size_t want = rng() % 8;
          ASSERT_TRUE(a.evict(want, ra.fn(), &ea).is_ok());
          ASSERT_TRUE(b.evict(want, rb.fn(), &eb).is_ok());
          ASSERT_EQ(rb.runs, ra.runs) << "eviction order differs at step " << step;
        }
      }
      while (!locked.empty()) {
        ASSERT_TRUE(a.unlock(locked.back()).is_ok());
        ASSERT_TRUE(b.unlock(locked.back()).is_ok());
        locked.pop_back();
      }
      Recorder ra(page), rb(page);
      size_t ea = 0, eb = 0;
      ASSERT_TRUE(a.evict(SIZE_MAX, ra.fn(), &ea).is_ok());
      ASSERT_TRUE(b.evict(SIZE_MAX, rb.fn(), &eb).is_ok());
      EXPECT_EQ(rb.runs, ra.runs);
      expect_consistent(b);
    }
  }
}

}  // namespace
