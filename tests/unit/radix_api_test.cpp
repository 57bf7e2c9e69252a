// radix_* through the public C API: ownership hand-over, locks, eviction,
// events, page hash and bad inputs.
#include <cstring>

#include "test_util.hpp"

namespace {

using kvtest::Pool;
using Tokens = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

std::string config(int page, bool events = true, const char* kind = "radix") {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": 64, "max_running_requests": 4, "max_context_len": 64},
         "prefix_cache": {"kind": ")" + kind + (std::string(kind) == "radix" ? std::string(R"(", "events": )") + (events ? "true" : "false") : "\"") + "}}";
}

struct Sizes {
  size_t evictable = 0, protected_len = 0, total = 0;
};

Sizes sizes(kvpool* pool) {
  Sizes s;
  EXPECT_EQ(radix_sizes(pool, &s.evictable, &s.protected_len, &s.total), KVPOOL_OK) << kvpool_last_error();
  return s;
}

TEST(RadixApi, InsertMatchLockEvictReset) {
  Pool pool(config(4));
  Slots slots = kvtest::alloc(pool, 8);
  const Tokens key{1, 2, 3, 4, 5, 6, 7, 8};
  size_t prefix = 99;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert(pool, key.data(), 8, slots.data(), 8, nullptr, 0, &prefix, &node), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(prefix, 0u);
  EXPECT_EQ(sizes(pool).total, 8u);
  kvtest::expect_consistent(pool);

  Slots out(10, -1);
  size_t matched = 0;
  uint64_t last = 0;
  const Tokens query{1, 2, 3, 4, 5, 6, 9, 9, 9, 9};
  ASSERT_EQ(radix_match(pool, query.data(), query.size(), nullptr, out.data(), out.size(), &matched, &last), KVPOOL_OK);
  EXPECT_EQ(matched, 4u);  // whole pages only: the second page differs
  EXPECT_EQ(Slots(out.begin(), out.begin() + 4), Slots(slots.begin(), slots.begin() + 4));
  ASSERT_EQ(radix_lock(pool, last), KVPOOL_OK);
  EXPECT_EQ(sizes(pool).protected_len, 4u);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 100, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 4u);  // only the unlocked leaf [5..8]
  EXPECT_EQ(kvtest::available(pool), 64u - 4u);
  EXPECT_EQ(radix_reset(pool), KVPOOL_ERR_INVALID_ARGUMENT);  // a node is locked
  ASSERT_EQ(radix_unlock(pool, last), KVPOOL_OK);
  EXPECT_EQ(radix_unlock(pool, last), KVPOOL_ERR_INVALID_ARGUMENT);  // not locked any more
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK);
  EXPECT_EQ(sizes(pool).total, 0u);
  EXPECT_EQ(kvtest::available(pool), 64u);  // the tree's slots went back to the allocator
  EXPECT_EQ(radix_lock(pool, last), KVPOOL_ERR_INVALID_ARGUMENT);  // stale handle
  kvtest::expect_consistent(pool);
}

TEST(RadixApi, DuplicatesStayWithTheCallerAndBadHandoversChangeNothing) {
  Pool pool(config(4));
  Slots a = kvtest::alloc(pool, 8), b = kvtest::alloc(pool, 8);
  const Tokens key{1, 2, 3, 4, 5, 6, 7, 8};
  size_t prefix = 0;
  ASSERT_EQ(radix_insert(pool, key.data(), 4, a.data(), 4, "lora-1", 0, &prefix, nullptr), KVPOOL_OK);
  // The first page is cached already: b's first page stays b's, its second page goes to the tree.
  ASSERT_EQ(radix_insert(pool, key.data(), 8, b.data(), 8, "lora-1", 0, &prefix, nullptr), KVPOOL_OK);
  EXPECT_EQ(prefix, 4u);
  kvtest::free_slots(pool, Slots(b.begin(), b.begin() + 4));
  kvtest::free_slots(pool, Slots(a.begin() + 4, a.end()));
  kvtest::expect_consistent(pool);

  Slots c = kvtest::alloc(pool, 8);
  const Tokens other{9, 9, 9, 9, 8, 8, 8, 8};
  const Sizes before = sizes(pool);
  Slots shuffled{c[1], c[0], c[2], c[3]};
  EXPECT_EQ(radix_insert(pool, other.data(), 4, shuffled.data(), 4, nullptr, 0, &prefix, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  Slots treeowned(b.begin() + 4, b.end());
  EXPECT_EQ(radix_insert(pool, other.data(), 4, treeowned.data(), 4, nullptr, 0, &prefix, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("already belongs to the prefix tree"), std::string::npos);
  const int64_t free_page = kvtest::free_list(pool).front();
  Slots freed{free_page * 4, free_page * 4 + 1, free_page * 4 + 2, free_page * 4 + 3};  // never handed out
  EXPECT_EQ(radix_insert(pool, other.data(), 4, freed.data(), 4, nullptr, 0, &prefix, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert(pool, other.data(), 3, c.data(), 3, nullptr, 0, &prefix, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert(pool, other.data(), 4, c.data(), 3, nullptr, 0, &prefix, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sizes(pool).total, before.total);
  kvtest::expect_consistent(pool);
  // Namespaces: the default namespace does not see lora-1's pages.
  Slots out(8);
  size_t matched = 9;
  uint64_t node = 0;
  ASSERT_EQ(radix_match(pool, key.data(), 8, nullptr, out.data(), 8, &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 0u);
  ASSERT_EQ(radix_match(pool, key.data(), 8, "lora-1", out.data(), 8, &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 8u);
  EXPECT_EQ(radix_match(pool, key.data(), 8, "lora-1", out.data(), 2, &matched, &node), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(matched, 8u);
}

// A handover's pages must hold their slots in order; pages of 16 and 64 slots are checked
// with vector code (util/consecutive.hpp): a wrong slot at any position of the page, the
// last included, is found, and a page near INT64_MAX does not wrap into "in order".
TEST(RadixApi, HandoverFindsAnySlotOutOfOrderInLargePages) {
  for (int page : {16, 64}) {
    Pool pool(config(page, false));
    const Slots slots = kvtest::alloc(pool, static_cast<size_t>(page));
    Tokens key(static_cast<size_t>(page));
    for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<int32_t>(i);
    size_t prefix = 0;
    for (size_t at = 1; at < slots.size(); ++at) {
      Slots bad = slots;
      bad[at] += at + 1 < slots.size() ? 1 : -1;  // a neighbour's slot, or one past/before the page
      EXPECT_EQ(radix_insert(pool, key.data(), key.size(), bad.data(), bad.size(), nullptr, 0, &prefix, nullptr),
                KVPOOL_ERR_INVALID_ARGUMENT) << "page " << page << " index " << at;
      EXPECT_NE(std::string(kvpool_last_error()).find("do not fill page"), std::string::npos) << kvpool_last_error();
    }
    Slots wrapping(slots.size());
    for (size_t i = 0; i < wrapping.size(); ++i) wrapping[i] = INT64_MAX - static_cast<int64_t>(page) + 1 + static_cast<int64_t>(i);
    EXPECT_EQ(radix_insert(pool, key.data(), key.size(), wrapping.data(), wrapping.size(), nullptr, 0, &prefix, nullptr),
              KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(sizes(pool).total, 0u);  // nothing was taken
    ASSERT_EQ(radix_insert(pool, key.data(), key.size(), slots.data(), slots.size(), nullptr, 0, &prefix, nullptr), KVPOOL_OK)
        << kvpool_last_error();
    EXPECT_EQ(sizes(pool).total, static_cast<size_t>(page));
    kvtest::expect_consistent(pool);
  }
}

TEST(RadixApi, EventsAndPageHash) {
  Pool pool(config(2));
  Slots s = kvtest::alloc(pool, 4);
  const Tokens key{10, 11, 12, 13};
  size_t prefix = 0;
  ASSERT_EQ(radix_insert(pool, key.data(), 4, s.data(), 4, nullptr, 0, &prefix, nullptr), KVPOOL_OK);
  radix_event events[4];
  int32_t tokens[8];
  size_t n_events = 0, n_tokens = 0;
  EXPECT_EQ(radix_take_events(pool, events, 1, &n_events, tokens, 8, &n_tokens), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n_events, 2u);  // nothing lost: take them again with room
  ASSERT_EQ(radix_take_events(pool, events, 4, &n_events, tokens, 8, &n_tokens), KVPOOL_OK);
  ASSERT_EQ(n_events, 2u);
  ASSERT_EQ(n_tokens, 4u);
  EXPECT_EQ(events[0].type, RADIX_EVENT_BLOCK_STORED);
  EXPECT_EQ(events[0].has_parent, 0);
  EXPECT_EQ(events[1].parent_hash, events[0].block_hash);
  EXPECT_EQ(Tokens(tokens + events[1].token_offset, tokens + events[1].token_offset + events[1].token_count), (Tokens{12, 13}));
  uint8_t d0[32], d1[32];
  int64_t id0 = 0, id1 = 0;
  ASSERT_EQ(radix_page_hash(key.data(), 2, nullptr, 0, d0, 32, &id0), KVPOOL_OK);
  ASSERT_EQ(radix_page_hash(key.data() + 2, 2, d0, 32, d1, 32, &id1), KVPOOL_OK);
  EXPECT_EQ(id0, events[0].block_hash);
  EXPECT_EQ(id1, events[1].block_hash);
  EXPECT_EQ(radix_page_hash(key.data(), 2, d0, 16, d1, 32, &id1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_page_hash(key.data(), 2, nullptr, 0, d1, 31, &id1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_page_hash(nullptr, 2, nullptr, 0, d1, 32, &id1), KVPOOL_ERR_INVALID_ARGUMENT);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 4, &evicted), KVPOOL_OK);
  ASSERT_EQ(radix_take_events(pool, events, 4, &n_events, tokens, 8, &n_tokens), KVPOOL_OK);
  EXPECT_EQ(n_events, 2u);
  EXPECT_EQ(events[0].type, RADIX_EVENT_BLOCK_REMOVED);
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK);
  ASSERT_EQ(radix_take_events(pool, events, 4, &n_events, tokens, 8, &n_tokens), KVPOOL_OK);
  ASSERT_EQ(n_events, 1u);
  EXPECT_EQ(events[0].type, RADIX_EVENT_ALL_BLOCKS_CLEARED);
}

TEST(RadixApi, BadInputsAndUnsupportedPools) {
  Pool pool(config(4, false));
  const Tokens key{1, 2, 3, 4};
  Slots out(4);
  size_t n = 0, e = 0, p = 0;
  uint64_t node = 0;
  EXPECT_EQ(radix_match(nullptr, key.data(), 4, nullptr, out.data(), 4, &n, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_match(pool, nullptr, 4, nullptr, out.data(), 4, &n, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_match(pool, key.data(), 4, nullptr, out.data(), 4, nullptr, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert(pool, key.data(), 4, out.data(), 4, nullptr, 0, nullptr, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_lock(pool, 12345), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_unlock(pool, 12345), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_evict(pool, 4, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_sizes(pool, nullptr, &p, &n), KVPOOL_ERR_INVALID_ARGUMENT);
  radix_event ev[1];
  int32_t toks[1];
  ASSERT_EQ(radix_take_events(pool, ev, 1, &e, toks, 1, &n), KVPOOL_OK);  // events off: always empty
  EXPECT_EQ(e, 0u);
  EXPECT_EQ(radix_take_events(pool, ev, 1, nullptr, toks, 1, &n), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_reset(nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvtest::expect_consistent(pool);

  Pool chunk(config(4, false, "chunk"));
  EXPECT_EQ(radix_match(chunk, key.data(), 4, nullptr, out.data(), 4, &n, &node), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_insert(chunk, key.data(), 4, out.data(), 4, nullptr, 0, &n, nullptr), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_evict(chunk, 4, &n), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_reset(chunk), KVPOOL_ERR_UNSUPPORTED);
  Pool swa(kvtest::swa_config(16, 1.0));
  EXPECT_EQ(radix_lock(swa, 1), KVPOOL_ERR_INVALID_ARGUMENT);  // swa pools have a tree: a stale handle
}

// SGLang stamps the child a match walks into before it splits it (spec §3.4 step 3): the
// split-off lower part is as recent as the match, so an LRU eviction takes an older leaf
// first. Before this was kept, the lower part kept its old time and went first, and the
// replay under eviction drifted from SGLang's (issue 11; replay.sglang_per_request).
TEST(RadixApi, PartialMatchRefreshesTheSplitOffPart) {
  Pool pool(config(4, false));
  const Tokens a{1, 2, 3, 4, 5, 6, 7, 8}, b{50, 51, 52, 53};
  Slots sa = kvtest::alloc(pool, 8), sb = kvtest::alloc(pool, 4);
  size_t prefix = 0;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert(pool, a.data(), a.size(), sa.data(), sa.size(), nullptr, 0, &prefix, &node), KVPOOL_OK);
  ASSERT_EQ(radix_insert(pool, b.data(), b.size(), sb.data(), sb.size(), nullptr, 0, &prefix, &node), KVPOOL_OK);
  // Matches a's first page only: a splits into [1..4] and [5..8], both touched now.
  const Tokens query{1, 2, 3, 4, 9, 9, 9, 9};
  Slots out(query.size(), -1);
  size_t matched = 0;
  ASSERT_EQ(radix_match(pool, query.data(), query.size(), nullptr, out.data(), out.size(), &matched, &node), KVPOOL_OK);
  ASSERT_EQ(matched, 4u);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 4, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 4u);
  // b, untouched since its insert, went; a's lower part [5..8] is still cached.
  ASSERT_EQ(radix_match(pool, a.data(), a.size(), nullptr, out.data(), out.size(), &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 8u);
  ASSERT_EQ(radix_match(pool, b.data(), b.size(), nullptr, out.data(), out.size(), &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 0u);
  kvtest::expect_consistent(pool);
}

// An insert that splits a node stamps the lower part too, and its new leaf is newer than both.
TEST(RadixApi, InsertSplitStampsTheLowerPartAndTheNewLeafIsNewest) {
  Pool pool(config(4, false));
  const Tokens a{1, 2, 3, 4, 5, 6, 7, 8}, b{50, 51, 52, 53}, c{1, 2, 3, 4, 60, 61, 62, 63};
  Slots sa = kvtest::alloc(pool, 8), sb = kvtest::alloc(pool, 4), sc = kvtest::alloc(pool, 8);
  size_t prefix = 0;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert(pool, a.data(), a.size(), sa.data(), sa.size(), nullptr, 0, &prefix, &node), KVPOOL_OK);
  ASSERT_EQ(radix_insert(pool, b.data(), b.size(), sb.data(), sb.size(), nullptr, 0, &prefix, &node), KVPOOL_OK);
  ASSERT_EQ(radix_insert(pool, c.data(), c.size(), sc.data(), sc.size(), nullptr, 0, &prefix, &node), KVPOOL_OK);
  ASSERT_EQ(prefix, 4u);
  ASSERT_EQ(kvalloc_free(pool, sc.data(), 4), KVPOOL_OK);  // the duplicate page stays with the caller
  Slots out(8, -1);
  size_t matched = 0, evicted = 0;
  // Oldest first: b, then a's lower part [5..8] (stamped by the insert's walk), then c's leaf.
  ASSERT_EQ(radix_evict(pool, 4, &evicted), KVPOOL_OK);
  ASSERT_EQ(radix_match(pool, b.data(), b.size(), nullptr, out.data(), out.size(), &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 0u);
  ASSERT_EQ(radix_evict(pool, 4, &evicted), KVPOOL_OK);
  ASSERT_EQ(radix_match(pool, a.data(), a.size(), nullptr, out.data(), out.size(), &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 4u);  // [5..8] went
  ASSERT_EQ(radix_match(pool, c.data(), c.size(), nullptr, out.data(), out.size(), &matched, &node), KVPOOL_OK);
  EXPECT_EQ(matched, 8u);  // c's leaf stays
  kvtest::expect_consistent(pool);
}

}  // namespace
