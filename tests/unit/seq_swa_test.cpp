// swa pools: the SWA radix cache through radix_* (SGLANG_SEMANTICS §4.2, §8.4) and kvseq_*
// with sliding-window freeing (§1.5, §1.19).
#include <cstdio>
#include <map>
#include <random>

#include "seq_test_util.hpp"

namespace {

using kvtest::Pool;
using kvtest::Slots;
using kvtest::Tokens;

struct Avail {
  size_t full = 0, window = 0;
};

Avail avail(kvpool* pool) {
  Avail a;
  EXPECT_EQ(kvalloc_swa_available(pool, &a.full, &a.window), KVPOOL_OK) << kvpool_last_error();
  return a;
}

// radix_insert semantics: the caller frees its duplicates [0, prefix).
void insert(kvpool* pool, const Tokens& tokens) {
  Slots slots = kvtest::alloc(pool, tokens.size());
  size_t prefix = 99;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert(pool, tokens.data(), tokens.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node), KVPOOL_OK)
      << kvpool_last_error();
  if (prefix > 0) kvtest::free_slots(pool, Slots(slots.begin(), slots.begin() + static_cast<long>(prefix)));
}

size_t match_len(kvpool* pool, const Tokens& tokens, uint64_t* node = nullptr) {
  Slots slots(tokens.size());
  size_t matched = 0;
  uint64_t n = 0;
  EXPECT_EQ(radix_match(pool, tokens.data(), tokens.size(), nullptr, slots.data(), slots.size(), &matched, &n), KVPOOL_OK);
  if (node != nullptr) *node = n;
  return matched;
}

void evict(kvpool* pool, size_t full, size_t window, size_t expect_full, size_t expect_window) {
  size_t f = 0, w = 0;
  ASSERT_EQ(radix_evict_swa(pool, full, window, &f, &w), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(f, expect_full) << "evict(" << full << ", " << window << ")";
  EXPECT_EQ(w, expect_window) << "evict(" << full << ", " << window << ")";
}

// §8.4's SWARadixCache scenario: window 4, full 128 / window 64.
TEST(SwaRadixApi, SglangScenario) {
  Pool pool(kvtest::swa_radix_config(128, 64));
  EXPECT_EQ(avail(pool).full, 128u);
  EXPECT_EQ(avail(pool).window, 64u);
  insert(pool, {1, 2, 3});
  insert(pool, {1, 2, 3, 4, 5, 6, 7});
  insert(pool, {10, 11, 12});
  insert(pool, {1, 2, 3, 4, 5, 60, 70});
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 12u);
  EXPECT_EQ(s.state_evictable, 12u);  // every token has its window slot
  evict(pool, 1, 0, 3, 3);            // leaf [10,11,12]
  evict(pool, 0, 1, 0, 3);            // [1,2,3] becomes a tombstone: window slots only
  EXPECT_EQ(avail(pool).window, 64u - 6u);
  evict(pool, 1, 2, 2, 2);            // leaf [6,7] (least recent)
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 7u);             // [1,2,3] (tombstone) [4,5] [60,70]
  EXPECT_EQ(s.state_evictable, 4u);
  EXPECT_EQ(match_len(pool, {1, 2, 3, 4, 5}), 0u);  // only 2 live tokens after the tombstone
  uint64_t node = 0;
  EXPECT_EQ(match_len(pool, {1, 2, 3, 4, 5, 60, 70}, &node), 7u);  // 4 live tokens: a whole window
  EXPECT_EQ(match_len(pool, {1, 2, 3, 4, 5, 60, 70, 80}), 7u);
  ASSERT_EQ(radix_lock(pool, node), KVPOOL_OK);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.protected_len, 7u);    // full lock to the root
  EXPECT_EQ(s.state_protected, 4u);  // window lock over the last 4 tokens only
  ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK);
  EXPECT_EQ(radix_unlock(pool, node), KVPOOL_ERR_INVALID_ARGUMENT);
  kvtest::expect_consistent(pool);
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK);
  EXPECT_EQ(avail(pool).full, 128u);
  EXPECT_EQ(avail(pool).window, 64u);
  kvtest::expect_consistent(pool);
}

TEST(SwaRadixApi, InsertSwaFreesDuplicatesAndRevivesTombstones) {
  Pool pool(kvtest::swa_radix_config(64, 32));
  insert(pool, {1, 2, 3, 4, 5, 6});
  insert(pool, {1, 2, 3, 4, 5, 6, 7, 8});
  evict(pool, 0, 1, 0, 6);  // [1..6] becomes a tombstone
  const Avail before = avail(pool);
  Slots mine = kvtest::alloc(pool, 8);
  size_t prefix = 0;
  uint64_t node = 0;
  const Tokens t{1, 2, 3, 4, 5, 6, 7, 8};
  // SGLang's insert: tombstone [1..6] is revived with our slots, our duplicates of [7,8] are freed.
  ASSERT_EQ(radix_insert_swa(pool, t.data(), 8, mine.data(), 8, nullptr, 0, 0, &prefix, &node), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(prefix, 8u);
  EXPECT_EQ(avail(pool).full, before.full);          // 6 of ours went in; the node's 6 old ones and our 2 duplicates came back
  EXPECT_EQ(avail(pool).window, before.window - 6);  // the revived node has window slots again
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 8u);
  EXPECT_EQ(s.state_evictable, 8u);
  EXPECT_EQ(match_len(pool, t), 8u);
  // Windowless tokens: the first 6 of a new sequence lost their window slots.
  const Tokens u{50, 51, 52, 53, 54, 55, 56, 57};
  Slots ours = kvtest::alloc(pool, 8);
  ASSERT_EQ(kvalloc_free_swa(pool, ours.data(), 6), KVPOOL_OK);
  EXPECT_EQ(radix_insert_swa(pool, u.data(), 8, ours.data(), 8, nullptr, 0, 5, &prefix, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_swa(pool, u.data(), 8, ours.data(), 8, nullptr, 0, 7, &prefix, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_swa(pool, u.data(), 8, ours.data(), 8, nullptr, 1, 6, &prefix, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_swa(pool, u.data(), 8, ours.data(), 7, nullptr, 0, 6, &prefix, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvtest::tree_sizes(pool), s);
  ASSERT_EQ(radix_insert_swa(pool, u.data(), 8, ours.data(), 8, nullptr, 0, 6, &prefix, &node), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(prefix, 0u);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 16u);
  EXPECT_EQ(s.state_evictable, 10u);  // the 6 windowless tokens are a tombstone
  EXPECT_EQ(match_len(pool, u), 0u);  // 2 live tokens < window 4
  kvtest::expect_consistent(pool);
  // Evicting the new leaf cascades into the tombstone above it.
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK);
  EXPECT_EQ(avail(pool).full, 64u);
  EXPECT_EQ(avail(pool).window, 32u);
  kvtest::expect_consistent(pool);
}

TEST(KvseqSwa, WindowSlotsOutsideTheWindowAreFreed) {
  Pool pool(kvtest::swa_radix_config(128, 64, 4));
  const Tokens prompt = kvtest::range(1, 12);
  const uint64_t a = kvtest::seq_begin(pool, prompt);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {12}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(avail(pool).full, 116u);
  EXPECT_EQ(avail(pool).window, 52u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "prefilled"));
  ASSERT_EQ(kvtest::seq_decode(pool, {a}, {99}), KVPOOL_OK) << kvpool_last_error();
  // Positions 0..7 are out of the window of token 12: their window slots went back.
  EXPECT_EQ(avail(pool).full, 115u);
  EXPECT_EQ(avail(pool).window, 52u + 8u - 1u);
  const Slots slots = kvtest::seq_slots(pool, a);
  Slots window(slots.size());
  ASSERT_EQ(kvalloc_translate_swa(pool, slots.data(), slots.size(), window.data(), window.size()), KVPOOL_OK);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(window[i], 0) << i;
  for (size_t i = 8; i < 13; ++i) EXPECT_GT(window[i], 0) << i;
  ASSERT_TRUE(kvtest::accounting_holds(pool, "decoded"));
  ASSERT_EQ(kvseq_finish(pool, a, 13), KVPOOL_OK) << kvpool_last_error();
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 13u);
  EXPECT_EQ(s.state_evictable, 5u);  // the 8 windowless tokens are a tombstone
  EXPECT_EQ(avail(pool).full, 115u);
  EXPECT_EQ(avail(pool).window, 59u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "finished"));
  // The 5 live tokens ending the cached sequence cover the window: all 13 are usable.
  Tokens next = prompt;
  next.push_back(99);
  next.push_back(5);
  size_t cached = 0;
  const uint64_t b = kvtest::seq_begin(pool, next, &cached);
  EXPECT_EQ(cached, 13u);
  EXPECT_EQ(kvtest::tree_sizes(pool).state_protected, 5u);
  ASSERT_EQ(kvtest::seq_extend(pool, {b}, {1}), KVPOOL_OK);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b"));
  ASSERT_EQ(kvseq_finish(pool, b, 14), KVPOOL_OK);
  EXPECT_EQ(kvtest::tree_sizes(pool).total, 14u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b finished"));
}

template <typename T>
std::vector<T> head(const std::vector<T>& v, size_t n) {
  return std::vector<T>(v.begin(), v.begin() + static_cast<long>(n));
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// SGLang's SWARadixCache.cache_unfinished_req: at its next extend, right after its
// out-of-window window slots were freed, a request's computed tokens go into the tree
// (windowless ones as a tombstone), so others reuse them before it finishes.
TEST(KvseqSwa, NextExtendCachesComputedChunks) {
  Pool pool(kvtest::swa_radix_config(128, 64, 4));
  const Tokens prompt = kvtest::range(1, 30);
  const uint64_t a = kvtest::seq_begin(pool, prompt);
  Slots first;
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {12}, &first), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 0u);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {6}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 12u);
  EXPECT_EQ(head(kvtest::seq_slots(pool, a), 12), first);  // the tree took a's own slots
  EXPECT_EQ(avail(pool).full, 128u - 18u);
  EXPECT_EQ(avail(pool).window, 64u - 18u + 8u);  // positions 0..7 left the window before caching
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 12u);
  EXPECT_EQ(s.protected_len, 12u);
  EXPECT_EQ(s.state_protected, 4u);  // [0, 8) is a tombstone, [8, 12) a window-locked node
  EXPECT_EQ(s.state_evictable, 0u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "a cached 12"));

  // b shares 12 tokens while a is still prefilling: the 4 live tokens ending them cover the window.
  size_t cached = 0;
  const uint64_t b = kvtest::seq_begin(pool, concat(head(prompt, 12), {500, 501, 502}), &cached);
  EXPECT_EQ(cached, 12u);
  EXPECT_EQ(kvtest::seq_slots(pool, b), first);
  // c diverges inside the tombstone: no usable prefix.
  const uint64_t c = kvtest::seq_begin(pool, concat(head(prompt, 10), {600, 601}), &cached);
  EXPECT_EQ(cached, 0u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b, c begun"));

  ASSERT_EQ(kvtest::seq_extend(pool, {a, b}, {6, 3}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 18u);
  EXPECT_EQ(kvtest::seq_info(pool, b).cached, 12u);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 18u);  // [12, 14) left a's window: a tombstone; [14, 18) live
  EXPECT_EQ(s.state_protected, 8u);  // b's [8, 12) and a's [14, 18)
  EXPECT_EQ(avail(pool).full, 128u - 18u - 6u - 3u);
  EXPECT_EQ(avail(pool).window, 64u - 18u + 8u + 2u - 6u - 3u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "a cached 18"));

  ASSERT_EQ(kvseq_finish(pool, a, 24), KVPOOL_OK) << kvpool_last_error();
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 24u);
  EXPECT_EQ(s.state_protected, 4u);   // b's
  EXPECT_EQ(s.state_evictable, 10u);  // a's [14, 18) and [18, 24)
  ASSERT_TRUE(kvtest::accounting_holds(pool, "a finished"));
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  ASSERT_EQ(kvseq_abort(pool, c), KVPOOL_OK);
  EXPECT_EQ(avail(pool).full, 128u - 24u);
  EXPECT_EQ(avail(pool).window, 64u - 14u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "done"));
}

// Two requests prefill the same prompt side by side: the second to cache frees its
// duplicates (windowless and windowed) and switches to the tree's slots.
TEST(KvseqSwa, ConcurrentPrefillsDeduplicateAtTheNextExtend) {
  Pool pool(kvtest::swa_radix_config(128, 64, 4));
  const Tokens prompt = kvtest::range(1, 20);
  const uint64_t a = kvtest::seq_begin(pool, prompt), b = kvtest::seq_begin(pool, prompt);
  ASSERT_EQ(kvtest::seq_extend(pool, {a, b}, {12, 12}), KVPOOL_OK) << kvpool_last_error();
  const Slots a_first = kvtest::seq_slots(pool, a);
  ASSERT_EQ(kvtest::seq_extend(pool, {a, b}, {2, 2}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 12u);
  EXPECT_EQ(kvtest::seq_info(pool, b).cached, 12u);
  EXPECT_EQ(head(kvtest::seq_slots(pool, b), 12), a_first);
  EXPECT_EQ(avail(pool).full, 128u - 12u - 2u - 2u);
  EXPECT_EQ(avail(pool).window, 64u - 4u - 2u - 2u);
  const kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 12u);
  EXPECT_EQ(s.state_protected, 4u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "deduplicated"));
  ASSERT_EQ(kvseq_abort(pool, a), KVPOOL_OK);
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "aborted"));
}

// A tombstone another request full-locks keeps its old slots on insert, so caching over it
// would free window slots the running request still attends to: that step is skipped.
TEST(KvseqSwa, ChunkCachingSkipsTombstonesLockedByOthers) {
  Pool pool(kvtest::swa_radix_config(128, 64, 4));
  const Tokens p = kvtest::range(1, 20);
  insert(pool, head(p, 16));
  insert(pool, p);  // nodes [0, 16) and [16, 20)
  size_t cached = 0;
  const uint64_t x = kvtest::seq_begin(pool, concat(p, {700}), &cached);
  EXPECT_EQ(cached, 20u);
  evict(pool, 0, 16, 0, 16);  // [0, 16): full-locked by x, window-unlocked, now a tombstone
  const uint64_t a = kvtest::seq_begin(pool, concat(head(p, 12), kvtest::range(800, 10)), &cached);
  EXPECT_EQ(cached, 0u);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {12}), KVPOOL_OK);
  const kvtest::TreeSizes before = kvtest::tree_sizes(pool);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {2}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 0u);
  EXPECT_EQ(kvtest::tree_sizes(pool), before);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "skipped"));
  ASSERT_EQ(kvseq_finish(pool, x, 20), KVPOOL_OK);
  // Unlocked now: a's windowed [10, 12) revive that part, its windowless duplicates are freed.
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {2}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 14u);
  EXPECT_EQ(kvtest::tree_sizes(pool).total, 22u);  // [0, 20) and a's new [12, 14)
  EXPECT_EQ(avail(pool).full, 128u - 22u - 2u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "cached"));
  ASSERT_EQ(kvseq_abort(pool, a), KVPOOL_OK);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "done"));
}

// Locking a cached node over tokens that left the request's window protects window KV that
// was evictable: caching is skipped for the step if the batch would no longer fit.
TEST(KvseqSwa, ChunkCachingSkippedWhenItsWindowLockWouldNotFit) {
  for (int64_t chunk : {24, 25}) {
    Pool pool(kvtest::swa_radix_config(128, 40, 4));
    const Tokens p = kvtest::range(1, 60);
    const uint64_t a = kvtest::seq_begin(pool, p);
    ASSERT_EQ(kvtest::seq_extend(pool, {a}, {16}), KVPOOL_OK);
    const uint64_t c = kvtest::seq_begin(pool, concat(head(p, 16), {900}));
    ASSERT_EQ(kvtest::seq_extend(pool, {c}, {17}), KVPOOL_OK);
    ASSERT_EQ(kvseq_finish(pool, c, 17), KVPOOL_OK);  // [0, 17) live and unlocked
    EXPECT_EQ(avail(pool).window, 7u);
    // Window: 7 free + 12 leaving a's window + 17 evictable = 36; locking [0, 16) would take 12.
    ASSERT_EQ(kvtest::seq_extend(pool, {a}, {chunk}), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(kvtest::seq_info(pool, a).cached, chunk == 24 ? 16u : 0u) << chunk;
    EXPECT_EQ(kvtest::tree_sizes(pool).total, chunk == 24 ? 16u : 0u) << chunk;
    ASSERT_TRUE(kvtest::accounting_holds(pool, "chunk " + std::to_string(chunk)));
    ASSERT_EQ(kvtest::seq_extend(pool, {a}, {5}), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(kvtest::seq_info(pool, a).cached, 16u + static_cast<size_t>(chunk)) << chunk;
    ASSERT_TRUE(kvtest::accounting_holds(pool, "caught up"));
    ASSERT_EQ(kvseq_abort(pool, a), KVPOOL_OK);
    ASSERT_TRUE(kvtest::accounting_holds(pool, "done"));
  }
}

// Found by the API fuzzer: inside an open free group evicting cannot make room (the slots become
// free only at the group's end); extend evicted anyway and then failed.
TEST(KvseqSwa, OutOfMemoryInsideAFreeGroupEvictsNothing) {
  Pool pool(kvtest::swa_radix_config(32, 32));
  const uint64_t a = kvtest::seq_begin(pool, kvtest::range(1, 32));
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {32}), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(kvseq_finish(pool, a, 32), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(kvalloc_free_group_begin(pool), KVPOOL_OK);
  const uint64_t b = kvtest::seq_begin(pool, kvtest::range(100, 8));
  const kvtest::TreeSizes before = kvtest::tree_sizes(pool);
  ASSERT_GE(before.evictable, 8u);
  EXPECT_EQ(kvtest::seq_extend(pool, {b}, {8}), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_TRUE(kvtest::tree_sizes(pool) == before) << "a failed extend evicted";
  ASSERT_EQ(kvalloc_free_group_end(pool), KVPOOL_OK);
  EXPECT_EQ(kvtest::seq_extend(pool, {b}, {8}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_TRUE(kvtest::accounting_holds(pool));
}

TEST(KvseqSwa, OutOfMemoryEvictsOrChangesNothing) {
  Pool pool(kvtest::swa_radix_config(32, 16, 4));
  const uint64_t a = kvtest::seq_begin(pool, kvtest::range(1, 12));
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {12}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 12), KVPOOL_OK);  // 12 cached, evictable
  const uint64_t b = kvtest::seq_begin(pool, kvtest::range(100, 10));
  ASSERT_EQ(kvtest::seq_extend(pool, {b}, {10}), KVPOOL_OK) << kvpool_last_error();  // evicts window KV of a
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b"));
  const uint64_t c = kvtest::seq_begin(pool, kvtest::range(200, 20));
  const Avail before = avail(pool);
  const kvtest::TreeSizes tree_before = kvtest::tree_sizes(pool);
  EXPECT_EQ(kvtest::seq_extend(pool, {c}, {20}), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(avail(pool).full, before.full);
  EXPECT_EQ(avail(pool).window, before.window);
  EXPECT_EQ(kvtest::tree_sizes(pool), tree_before);
  EXPECT_EQ(kvtest::seq_info(pool, c).row, -1);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "oom"));
  size_t cached = 0;
  ASSERT_EQ(kvseq_retract(pool, b, &cached), KVPOOL_OK);
  EXPECT_EQ(cached, 0u);
  ASSERT_EQ(kvtest::seq_extend(pool, {c}, {12}), KVPOOL_OK) << kvpool_last_error();
  ASSERT_TRUE(kvtest::accounting_holds(pool, "c"));
  ASSERT_EQ(kvseq_abort(pool, c), KVPOOL_OK);
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "end"));
}

TEST(KvseqSwa, BadInputs) {
  Pool pool(kvtest::swa_radix_config(32, 16, 4));
  const uint64_t a = kvtest::seq_begin(pool, kvtest::range(1, 6));
  EXPECT_EQ(kvtest::seq_extend(pool, {a}, {7}), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvtest::seq_extend(pool, {a, a}, {1, 1}), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvtest::seq_decode(pool, {a}, {1}), KVPOOL_ERR_INVALID_ARGUMENT);  // not prefilled
  int64_t chunk = 6;
  Slots out(5);
  EXPECT_EQ(kvseq_extend(pool, &a, 1, &chunk, 1, out.data(), out.size()), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(avail(pool).full, 32u);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {6}), KVPOOL_OK);
  EXPECT_EQ(kvseq_finish(pool, a, 7), KVPOOL_ERR_INVALID_ARGUMENT);
  int32_t slot = 0;
  EXPECT_EQ(kvseq_mamba_slot(pool, a, &slot), KVPOOL_ERR_UNSUPPORTED);
  size_t e = 0, p = 0;
  EXPECT_EQ(radix_evict_mamba(pool, 1, &e), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_evict_swa(pool, 1, 1, nullptr, &p), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_evict_swa(nullptr, 1, 1, &e, &p), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_reset(pool), KVPOOL_ERR_INVALID_ARGUMENT);  // a request is active
  ASSERT_TRUE(kvtest::accounting_holds(pool));
  ASSERT_EQ(kvseq_finish(pool, a, 6), KVPOOL_OK);
  EXPECT_EQ(kvseq_finish(pool, a, 6), KVPOOL_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(kvtest::accounting_holds(pool));
}

// Thousands of random steps with many requests under memory pressure in both pools.
TEST(KvseqSwa, RandomWorkloadKeepsOwnershipAndAccounting) {
  for (int window : {1, 4, 16}) {
    Pool pool(kvtest::swa_radix_config(96, 48, window, 8, 512));
    std::map<std::string, int> seen =
        kvtest::random_workload(pool, static_cast<unsigned>(window), 2500, 9, 16, 8, "window " + std::to_string(window));
    for (const char* op : {"begin", "extend", "extend-oom", "decode", "finish", "abort", "end"}) {
      EXPECT_GT(seen[op], 0) << op << " window " << window;
    }
  }
}

// Long shared prompts prefilled in chunks of at most 5 tokens: requests cache their
// earlier chunks while prefilling (windowless ones as tombstones) and others reuse them.
TEST(KvseqSwa, RandomChunkedPrefillsShareWhileRunning) {
  for (int window : {1, 4, 8}) {
    Pool pool(kvtest::swa_radix_config(160, 64, window, 8, 512));
    std::map<std::string, int> seen = kvtest::random_workload(pool, 100u + static_cast<unsigned>(window), 3000, 9, 40, 6,
                                                              "chunked window " + std::to_string(window), 5);
    for (const char* op : {"begin", "extend", "extend-oom", "decode", "finish", "abort", "extend-cached",
                           "hit-from-running", "end"}) {
      EXPECT_GT(seen[op], 0) << op << " window " << window;
    }
    std::string counts;
    for (const auto& [op, n] : seen) counts += op + "=" + std::to_string(n) + " ";
    std::printf("window %d: %s\n", window, counts.c_str());
  }
}

}  // namespace
