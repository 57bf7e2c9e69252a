// hybrid_linear pools: the mamba radix cache through radix_* (SGLANG_SEMANTICS §4.1, §8.3)
// and kvseq_* with a mamba state per request (§1.11, §1.19).
#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "kvpool/device.h"
#include "seq_test_util.hpp"

namespace {

using kvtest::Pool;
using kvtest::Slots;
using kvtest::Tokens;

constexpr int kMambaLayer = 0;

std::vector<float> state_conv(float base) {
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  return v;
}

void write_state(kvpool* pool, int32_t slot, float base) {
  std::vector<float> conv = state_conv(base), ssm(32, -base);
  ASSERT_EQ(kvpool_mamba_write(pool, kMambaLayer, slot, conv.data(), 48, ssm.data(), 128), KVPOOL_OK) << kvpool_last_error();
}

std::vector<float> read_conv(kvpool* pool, int32_t slot) {
  std::vector<float> conv(12), ssm(32);
  EXPECT_EQ(kvpool_mamba_read(pool, kMambaLayer, slot, conv.data(), 48, ssm.data(), 128), KVPOOL_OK) << kvpool_last_error();
  return conv;
}

int32_t alloc_state(kvpool* pool) {
  int32_t s = -1;
  EXPECT_EQ(kvpool_mamba_alloc(pool, &s, 1), KVPOOL_OK) << kvpool_last_error();
  return s;
}

// Inserts `tokens` with fresh slots and a fresh state; frees the duplicates. Returns the state slot.
int32_t insert_with_state(kvpool* pool, const Tokens& tokens, float base) {
  Slots slots = kvtest::alloc(pool, tokens.size());
  const int32_t state = alloc_state(pool);
  write_state(pool, state, base);
  size_t prefix = 99;
  int32_t exist = -1;
  uint64_t node = 0;
  EXPECT_EQ(radix_insert_mamba(pool, tokens.data(), tokens.size(), slots.data(), slots.size(), nullptr, state, &prefix,
                               &exist, &node),
            KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(exist, 0);
  if (prefix > 0) kvtest::free_slots(pool, Slots(slots.begin(), slots.begin() + static_cast<long>(prefix)));
  return state;
}

struct MambaHit {
  size_t matched = 0;
  uint64_t node = 0;
  int32_t state = -2;
};

MambaHit match(kvpool* pool, const Tokens& tokens, int32_t cow = -1) {
  MambaHit h;
  Slots slots(tokens.size());
  EXPECT_EQ(radix_match_mamba(pool, tokens.data(), tokens.size(), nullptr, cow, slots.data(), slots.size(), &h.matched,
                              &h.node, &h.state),
            KVPOOL_OK)
      << kvpool_last_error();
  return h;
}

// §8.3's MambaRadixCache scenario, page_size 1, through the public API.
TEST(MambaRadixApi, SglangScenario) {
  Pool pool(kvtest::hybrid_radix_config(128, 20));
  const Tokens a{1, 2, 3}, b{1, 2, 3, 4, 5, 6, 7}, c{10, 11, 12}, d{1, 2, 3, 4, 5, 60, 70};
  insert_with_state(pool, a, 100);
  const int32_t sb = insert_with_state(pool, b, 200);
  insert_with_state(pool, c, 300);
  const int32_t sd = insert_with_state(pool, d, 400);
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 12u);  // [1,2,3] [4,5] [6,7] [60,70] [10,11,12]
  EXPECT_EQ(s.state_evictable, 4u);

  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 1, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 3u);  // the least recently used leaf [10,11,12], with its state
  EXPECT_EQ(kvtest::tree_sizes(pool).state_evictable, 3u);
  ASSERT_EQ(radix_evict_mamba(pool, 1, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 1u);  // internal [1,2,3] becomes a tombstone; its KV stays
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 9u);
  EXPECT_EQ(s.state_evictable, 2u);

  EXPECT_EQ(match(pool, {1, 2, 3, 4, 5}).matched, 0u);  // no state on the path
  MambaHit h = match(pool, d);
  EXPECT_EQ(h.matched, 7u);
  EXPECT_EQ(h.state, sd);
  h = match(pool, b);
  EXPECT_EQ(h.matched, 7u);
  EXPECT_EQ(h.state, sb);

  ASSERT_EQ(radix_evict_mamba(pool, 1, &evicted), KVPOOL_OK);  // now the leaf [60,70] goes entirely
  EXPECT_EQ(evicted, 1u);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 7u);
  h = match(pool, d);
  EXPECT_EQ(h.matched, 0u);
  EXPECT_EQ(h.state, -1);
  uint64_t root = h.node;

  // Copy-on-write: the request's own slot receives the node's state; the tree's slot is untouched.
  const int32_t mine = alloc_state(pool);
  h = match(pool, b, mine);
  EXPECT_EQ(h.matched, 7u);
  EXPECT_NE(h.node, root);
  EXPECT_EQ(h.state, sb);
  EXPECT_EQ(read_conv(pool, mine), state_conv(200));
  write_state(pool, mine, 7);
  EXPECT_EQ(read_conv(pool, sb), state_conv(200));
  kvtest::expect_consistent(pool);
}

TEST(MambaRadixApi, LocksReviveAndReset) {
  Pool pool(kvtest::hybrid_radix_config(64, 8));
  const Tokens a = kvtest::range(1, 6);
  const int32_t s1 = insert_with_state(pool, a, 1);
  // Inserting the same sequence again: the state exists, the caller keeps its slot.
  Slots dup = kvtest::alloc(pool, 6);
  const int32_t s2 = alloc_state(pool);
  size_t prefix = 0;
  int32_t exist = 0;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert_mamba(pool, a.data(), 6, dup.data(), 6, nullptr, s2, &prefix, &exist, &node), KVPOOL_OK);
  EXPECT_EQ(prefix, 6u);
  EXPECT_EQ(exist, 1);
  kvtest::free_slots(pool, dup);
  ASSERT_EQ(kvpool_mamba_free(pool, &s1, 1), KVPOOL_ERR_INVALID_ARGUMENT);  // the tree's state
  ASSERT_EQ(radix_lock(pool, node), KVPOOL_OK);
  size_t evicted = 9;
  ASSERT_EQ(radix_evict_mamba(pool, 1, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 0u);  // locked
  ASSERT_EQ(radix_evict(pool, 100, &evicted), KVPOOL_OK);
  EXPECT_EQ(evicted, 0u);
  EXPECT_EQ(radix_reset(pool), KVPOOL_ERR_INVALID_ARGUMENT);  // a node is locked
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.protected_len, 6u);
  EXPECT_EQ(s.state_protected, 1u);
  ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK);
  EXPECT_EQ(radix_unlock(pool, node), KVPOOL_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(radix_reset(pool), KVPOOL_OK);
  EXPECT_EQ(kvtest::tree_sizes(pool).total, 0u);
  EXPECT_EQ(kvtest::available(pool), 64u);
  size_t states = 0;
  ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
  EXPECT_EQ(states, 7u);  // s2 is still the caller's
  ASSERT_EQ(kvpool_mamba_free(pool, &s2, 1), KVPOOL_OK);
  EXPECT_EQ(radix_lock(pool, node), KVPOOL_ERR_INVALID_ARGUMENT);  // stale after reset
  kvtest::expect_consistent(pool);
}

TEST(MambaRadixApi, BadInputsChangeNothing) {
  Pool pool(kvtest::hybrid_radix_config(64, 8));
  const Tokens a = kvtest::range(1, 4);
  insert_with_state(pool, a, 1);
  const kvtest::TreeSizes before = kvtest::tree_sizes(pool);
  const size_t free_before = kvtest::available(pool);
  Slots slots = kvtest::alloc(pool, 4);
  const int32_t st = alloc_state(pool);
  size_t prefix = 0, matched = 0;
  int32_t exist = 0, state = 0;
  uint64_t node = 0;
  const Tokens b = kvtest::range(50, 4);
  EXPECT_EQ(radix_insert_mamba(nullptr, b.data(), 4, slots.data(), 4, nullptr, st, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  int foreign = 0;
  EXPECT_EQ(radix_insert_mamba(reinterpret_cast<kvpool*>(&foreign), b.data(), 4, slots.data(), 4, nullptr, st, &prefix, &exist, &node),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_mamba(pool, b.data(), 4, slots.data(), 3, nullptr, st, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_mamba(pool, b.data(), 0, slots.data(), 0, nullptr, st, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_mamba(pool, b.data(), 4, slots.data(), 4, nullptr, 999, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_mamba(pool, b.data(), 4, slots.data(), 4, nullptr, st, nullptr, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  Slots repeated{slots[0], slots[0], slots[1], slots[2]};
  EXPECT_EQ(radix_insert_mamba(pool, b.data(), 4, repeated.data(), 4, nullptr, st, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  Slots unallocated{slots[0], slots[1], slots[2], 63};
  EXPECT_EQ(radix_insert_mamba(pool, b.data(), 4, unallocated.data(), 4, nullptr, st, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert(pool, b.data(), 4, slots.data(), 4, nullptr, 0, &prefix, &node), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_match_mamba(pool, a.data(), 4, nullptr, 999, slots.data(), 4, &matched, &node, &state), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_match_mamba(pool, a.data(), 4, nullptr, -1, slots.data(), 4, &matched, &node, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  Slots small(1);
  EXPECT_EQ(radix_match_mamba(pool, a.data(), 4, nullptr, -1, small.data(), 1, &matched, &node, &state), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(matched, 4u);
  EXPECT_EQ(radix_evict_mamba(pool, 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_evict_swa(pool, 1, 1, &prefix, &matched), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_insert_swa(pool, b.data(), 4, slots.data(), 4, nullptr, 0, 0, &prefix, &node), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_lock(pool, 12345), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvtest::tree_sizes(pool), before);
  EXPECT_EQ(kvtest::available(pool), free_before - 4);
  // A good insert after all that works, and a second insert of the same slots is refused.
  ASSERT_EQ(radix_insert_mamba(pool, b.data(), 4, slots.data(), 4, nullptr, st, &prefix, &exist, &node), KVPOOL_OK);
  const Tokens c = kvtest::range(80, 4);
  const int32_t st2 = alloc_state(pool);
  EXPECT_EQ(radix_insert_mamba(pool, c.data(), 4, slots.data(), 4, nullptr, st2, &prefix, &exist, &node), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(radix_insert_mamba(pool, c.data(), 4, kvtest::alloc(pool, 4).data(), 4, nullptr, st, &prefix, &exist, &node),
            KVPOOL_ERR_INVALID_ARGUMENT);  // st is the tree's now
  kvtest::expect_consistent(pool);
  // Other pools have no mamba tree.
  Pool mha(kvtest::mha_config(1, 64));
  EXPECT_EQ(radix_evict_mamba(mha, 1, &prefix), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(radix_state_sizes(mha, &prefix, &matched), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvseq_mamba_slot(mha, 1, &state), KVPOOL_ERR_UNSUPPORTED);
}

// Found by the API fuzzer (corpus api_hybrid/rowless-request-state): a kvseq request owns its
// state slot from kvseq_begin on, before its first extend gives it a row. radix_insert_mamba
// took that slot into the tree; it and kvpool_mamba_free must refuse it, changing nothing.
TEST(KvseqHybrid, RadixAndMambaCallsRefuseARowlessRequestState) {
  Pool pool(kvtest::hybrid_radix_config(64, 8));
  const Tokens prompt = kvtest::range(1, 6);
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached), KVPOOL_OK);
  kvseq_info info = KVSEQ_INFO_INIT;
  ASSERT_EQ(kvseq_get_info(pool, seq, &info), KVPOOL_OK);
  ASSERT_LT(info.row, 0);  // no row yet: its state is attached to nothing
  int32_t state = 0;
  ASSERT_EQ(kvseq_mamba_slot(pool, seq, &state), KVPOOL_OK);
  const kvtest::TreeSizes before = kvtest::tree_sizes(pool);
  size_t states_before = 0;
  ASSERT_EQ(kvpool_mamba_available(pool, &states_before), KVPOOL_OK);
  Slots slots = kvtest::alloc(pool, 4);
  const Tokens key = kvtest::range(50, 4);
  size_t prefix = 0;
  int32_t exist = 0;
  uint64_t node = 0;
  EXPECT_EQ(radix_insert_mamba(pool, key.data(), 4, slots.data(), 4, nullptr, state, &prefix, &exist, &node),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("mamba_slot " + std::to_string(state) + " belongs to a kvseq request"),
            std::string::npos)
      << kvpool_last_error();
  EXPECT_EQ(kvpool_mamba_free(pool, &state, 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("mamba slot " + std::to_string(state) + " belongs to a kvseq request"),
            std::string::npos)
      << kvpool_last_error();
  EXPECT_EQ(kvtest::tree_sizes(pool), before);
  size_t states_after = 0;
  ASSERT_EQ(kvpool_mamba_available(pool, &states_after), KVPOOL_OK);
  EXPECT_EQ(states_after, states_before);
  ASSERT_EQ(kvalloc_free(pool, slots.data(), slots.size()), KVPOOL_OK);
  ASSERT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);  // the request still owns its state and gives it back
  size_t states_end = 0;
  ASSERT_EQ(kvpool_mamba_available(pool, &states_end), KVPOOL_OK);
  EXPECT_EQ(states_end, states_before + 1);
}

// The copy targets of radix_match_mamba (cow_slot), kvpool_mamba_copy and kvpool_mamba_copy_async
// (dst) overwrote a kvseq request's state slot, with or without a row. They now refuse it as
// radix_insert_mamba and kvpool_mamba_free do, changing nothing; a fork only reads its source
// (its target is a free slot), so forking a request's state still works.
TEST(KvseqHybrid, CopyTargetsRefuseARequestState) {
  Pool pool(kvtest::hybrid_radix_config(64, 10));
  // A cached sequence with a state the tree owns, whose copy a match would hand out.
  Slots cached = kvtest::alloc(pool, 4);
  int32_t tree_state = 0;
  ASSERT_EQ(kvpool_mamba_alloc(pool, &tree_state, 1), KVPOOL_OK);
  const Tokens key = kvtest::range(50, 4);
  size_t prefix = 0;
  int32_t exist = 0;
  uint64_t node = 0;
  ASSERT_EQ(radix_insert_mamba(pool, key.data(), 4, cached.data(), 4, nullptr, tree_state, &prefix, &exist, &node),
            KVPOOL_OK)
      << kvpool_last_error();
  int32_t other = 0;
  ASSERT_EQ(kvpool_mamba_alloc(pool, &other, 1), KVPOOL_OK);

  // One request without a row yet, one with a row (after its first extend).
  const uint64_t rowless = kvtest::seq_begin(pool, kvtest::range(1, 6));
  const uint64_t with_row = kvtest::seq_begin(pool, kvtest::range(100, 6));
  ASSERT_EQ(kvtest::seq_extend(pool, {with_row}, {6}), KVPOOL_OK) << kvpool_last_error();
  for (const uint64_t seq : {rowless, with_row}) {
    int32_t state = 0;
    ASSERT_EQ(kvseq_mamba_slot(pool, seq, &state), KVPOOL_OK);
    const std::vector<float> conv(12, 3.5f), ssm(32, -1.25f);
    ASSERT_EQ(kvpool_mamba_write(pool, 0, state, conv.data(), 48, ssm.data(), 128), KVPOOL_OK) << kvpool_last_error();
    const std::string before = kvtest::pool_state(pool);
    const std::string mine = std::to_string(state) + " belongs to a kvseq request";

    std::vector<int64_t> slots(4, -7);
    size_t matched = 0;
    int32_t matched_state = -1;
    EXPECT_EQ(radix_match_mamba(pool, key.data(), 4, nullptr, state, slots.data(), 4, &matched, &node, &matched_state),
              KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvpool_last_error()).find("cow_slot " + mine), std::string::npos) << kvpool_last_error();
    EXPECT_EQ(kvpool_mamba_copy(pool, other, state), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvpool_last_error()).find("kvpool_mamba_copy: dst " + mine), std::string::npos)
        << kvpool_last_error();
    EXPECT_EQ(kvpool_mamba_copy_async(pool, &other, 1, &state, 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvpool_last_error()).find("dst[0] " + mine), std::string::npos) << kvpool_last_error();
    EXPECT_EQ(kvtest::pool_state(pool), before);
    std::vector<float> conv_now(12), ssm_now(32);
    ASSERT_EQ(kvpool_mamba_read(pool, 0, state, conv_now.data(), 48, ssm_now.data(), 128), KVPOOL_OK);
    EXPECT_EQ(conv_now, conv);  // untouched
    EXPECT_EQ(ssm_now, ssm);

    // The request's state as the source is fine: it is only read.
    EXPECT_EQ(kvpool_mamba_copy(pool, state, other), KVPOOL_OK) << kvpool_last_error();
    int32_t forked = 0;
    ASSERT_EQ(kvpool_mamba_fork(pool, state, &forked), KVPOOL_OK) << kvpool_last_error();
    EXPECT_NE(forked, state);
    ASSERT_EQ(kvpool_mamba_read(pool, 0, forked, conv_now.data(), 48, ssm_now.data(), 128), KVPOOL_OK);
    EXPECT_EQ(conv_now, conv);
    ASSERT_EQ(kvpool_mamba_free(pool, &forked, 1), KVPOOL_OK);
  }
  // A slot of the caller's own is still a valid copy target.
  std::vector<int64_t> slots(4, -7);
  size_t matched = 0;
  int32_t matched_state = -1;
  EXPECT_EQ(radix_match_mamba(pool, key.data(), 4, nullptr, other, slots.data(), 4, &matched, &node, &matched_state),
            KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(matched, 4u);
  EXPECT_EQ(matched_state, tree_state);
  ASSERT_EQ(kvseq_abort(pool, rowless), KVPOOL_OK);
  ASSERT_EQ(kvseq_abort(pool, with_row), KVPOOL_OK);
  ASSERT_EQ(kvpool_mamba_free(pool, &other, 1), KVPOOL_OK);
}

// Found by the API fuzzer: inside an open free group evicting cannot make room (the slots become
// free only at the group's end); extend evicted anyway and then failed.
TEST(KvseqHybrid, OutOfMemoryInsideAFreeGroupEvictsNothing) {
  Pool pool(kvtest::hybrid_radix_config(32, 10));
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

TEST(KvseqHybrid, BeginCopiesTheCachedStateAndFinishHandsItToTheTree) {
  Pool pool(kvtest::hybrid_radix_config(128, 6));
  const Tokens prompt = kvtest::range(100, 10);
  size_t cached = 9;
  const uint64_t a = kvtest::seq_begin(pool, prompt, &cached);
  EXPECT_EQ(cached, 0u);
  int32_t sa = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, a, &sa), KVPOOL_OK);
  EXPECT_GE(sa, 1);
  EXPECT_EQ(read_conv(pool, sa), std::vector<float>(12, 0.0f));  // no hit: a zeroed state
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {10}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 0u);  // a chunk's state exists only after the engine computed it
  int32_t row_slot = -1, pp[2];
  ASSERT_EQ(kvreq_mamba_slots(pool, kvtest::seq_info(pool, a).row, &row_slot, pp, 2), KVPOOL_OK);
  EXPECT_EQ(row_slot, sa);
  EXPECT_EQ(kvpool_mamba_free(pool, &sa, 1), KVPOOL_ERR_INVALID_ARGUMENT);  // the request's
  ASSERT_TRUE(kvtest::accounting_holds(pool, "after prefill"));
  ASSERT_EQ(kvtest::seq_decode(pool, {a}, {555}), KVPOOL_OK);
  write_state(pool, sa, 42);  // the engine's state after the 11 tokens
  ASSERT_EQ(kvseq_finish(pool, a, 11), KVPOOL_OK) << kvpool_last_error();
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 11u);
  EXPECT_EQ(s.state_evictable, 1u);
  size_t states = 0;
  ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
  EXPECT_EQ(states, 5u);  // a's slot now belongs to the tree
  ASSERT_TRUE(kvtest::accounting_holds(pool, "after finish"));

  Tokens longer = prompt;
  longer.push_back(555);
  longer.push_back(7);
  const uint64_t b = kvtest::seq_begin(pool, longer, &cached);
  EXPECT_EQ(cached, 11u);
  int32_t sb = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, b, &sb), KVPOOL_OK);
  EXPECT_NE(sb, sa);
  EXPECT_EQ(read_conv(pool, sb), state_conv(42));  // copy-on-write
  EXPECT_EQ(kvtest::tree_sizes(pool).state_protected, 1u);
  ASSERT_EQ(kvtest::seq_extend(pool, {b}, {1}), KVPOOL_OK);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b prefilled"));
  // Committing fewer tokens than computed: the state does not describe them, nothing is cached.
  ASSERT_EQ(kvseq_finish(pool, b, 11), KVPOOL_OK);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 11u);
  EXPECT_EQ(s.state_evictable, 1u);
  ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
  EXPECT_EQ(states, 5u);
  EXPECT_EQ(kvtest::available(pool), 128u - 11u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b finished"));
}

template <typename T>
std::vector<T> head(const std::vector<T>& v, size_t n) {
  return std::vector<T>(v.begin(), v.begin() + static_cast<long>(n));
}

size_t states_free(kvpool* pool) {
  size_t n = 0;
  EXPECT_EQ(kvpool_mamba_available(pool, &n), KVPOOL_OK) << kvpool_last_error();
  return n;
}

// SGLang's MambaRadixCache.cache_unfinished_req: at its next extend a request's computed
// chunks go into the tree with a fork of its state, so others reuse them before it finishes.
TEST(KvseqHybrid, NextExtendCachesComputedChunksWithAForkOfTheState) {
  Pool pool(kvtest::hybrid_radix_config(128, 10));
  const Tokens prompt = kvtest::range(1, 40);
  const uint64_t a = kvtest::seq_begin(pool, prompt);
  int32_t sa = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, a, &sa), KVPOOL_OK);
  Slots first;
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {16}, &first), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 0u);
  EXPECT_EQ(states_free(pool), 9u);
  write_state(pool, sa, 16);  // the engine's state after the first chunk
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {16}), KVPOOL_OK) << kvpool_last_error();
  kvseq_info ia = kvtest::seq_info(pool, a);
  EXPECT_EQ(ia.cached, 16u);
  EXPECT_EQ(ia.computed, 32u);
  EXPECT_EQ(head(kvtest::seq_slots(pool, a), 16), first);  // the tree took a's own slots
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 16u);
  EXPECT_EQ(s.protected_len, 16u);
  EXPECT_EQ(s.evictable, 0u);
  EXPECT_EQ(s.state_protected, 1u);
  EXPECT_EQ(s.state_evictable, 0u);
  EXPECT_EQ(states_free(pool), 8u);  // the fork
  int32_t still = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, a, &still), KVPOOL_OK);
  EXPECT_EQ(still, sa);  // a keeps computing in its own slot
  EXPECT_EQ(kvtest::available(pool), 128u - 32u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "a cached 16"));

  // b shares the prompt and reuses a's first chunk while a is still prefilling.
  Tokens pb = head(prompt, 20);
  pb.push_back(900);
  pb.push_back(901);
  size_t cached = 0;
  const uint64_t b = kvtest::seq_begin(pool, pb, &cached);
  EXPECT_EQ(cached, 16u);
  EXPECT_EQ(head(kvtest::seq_slots(pool, b), 16), first);
  int32_t sb = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, b, &sb), KVPOOL_OK);
  EXPECT_EQ(read_conv(pool, sb), state_conv(16));  // a copy of the fork
  write_state(pool, sa, 32);  // a's own state moved on; the tree's fork did not
  const MambaHit h = match(pool, head(prompt, 16));
  EXPECT_EQ(h.matched, 16u);
  EXPECT_EQ(read_conv(pool, h.state), state_conv(16));
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b begun"));

  ASSERT_EQ(kvtest::seq_extend(pool, {a, b}, {8, 6}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 32u);
  EXPECT_EQ(kvtest::seq_info(pool, b).cached, 16u);  // b's first extend: nothing computed beyond its hit
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 32u);
  EXPECT_EQ(s.state_protected, 2u);  // a at 32, b at 16
  EXPECT_EQ(states_free(pool), 6u);  // a, b, two forks
  EXPECT_EQ(kvtest::available(pool), 128u - 40u - 6u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "a cached 32"));

  // finish hands a's own slot over for the whole prompt; the fork at 32 stays a separate node's.
  write_state(pool, sa, 40);
  ASSERT_EQ(kvseq_finish(pool, a, 40), KVPOOL_OK) << kvpool_last_error();
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 40u);
  EXPECT_EQ(s.state_evictable, 2u);
  EXPECT_EQ(s.state_protected, 1u);  // b's
  EXPECT_EQ(states_free(pool), 6u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "a finished"));
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.state_evictable, 3u);
  EXPECT_EQ(s.evictable, 40u);
  EXPECT_EQ(kvtest::available(pool), 128u - 40u);
  EXPECT_EQ(states_free(pool), 7u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b aborted"));
}

// Two requests prefill the same prompt side by side: the second to cache finds the first's
// tokens and state, frees its duplicate slots and its fork, and switches to the tree's slots.
TEST(KvseqHybrid, ConcurrentPrefillsDeduplicateAtTheNextExtend) {
  Pool pool(kvtest::hybrid_radix_config(128, 10));
  const Tokens prompt = kvtest::range(1, 24);
  const uint64_t a = kvtest::seq_begin(pool, prompt), b = kvtest::seq_begin(pool, prompt);
  ASSERT_EQ(kvtest::seq_extend(pool, {a, b}, {12, 12}), KVPOOL_OK) << kvpool_last_error();
  const Slots a_first = kvtest::seq_slots(pool, a);
  EXPECT_EQ(kvtest::available(pool), 128u - 24u);
  ASSERT_EQ(kvtest::seq_extend(pool, {a, b}, {4, 4}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 12u);
  EXPECT_EQ(kvtest::seq_info(pool, b).cached, 12u);
  EXPECT_EQ(head(kvtest::seq_slots(pool, b), 12), a_first);
  EXPECT_EQ(kvtest::available(pool), 128u - 12u - 4u - 4u);
  EXPECT_EQ(states_free(pool), 7u);  // a, b and one fork: b's was freed
  const kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 12u);
  EXPECT_EQ(s.protected_len, 12u);
  EXPECT_EQ(s.state_protected, 1u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "deduplicated"));
  ASSERT_EQ(kvseq_abort(pool, a), KVPOOL_OK);
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  EXPECT_EQ(kvtest::available(pool), 128u - 12u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "aborted"));
}

// Without a free state slot the tree's copy evicts an unlocked cached state; with none
// evictable either the step caches nothing (no error) and a later extend catches up.
TEST(KvseqHybrid, ChunkCachingNeedsAStateSlot) {
  Pool pool(kvtest::hybrid_radix_config(128, 10));
  const uint64_t z = kvtest::seq_begin(pool, kvtest::range(500, 5));
  ASSERT_EQ(kvtest::seq_extend(pool, {z}, {5}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, z, 5), KVPOOL_OK);  // one unlocked state in the tree
  const Tokens prompt = kvtest::range(1, 30);
  const uint64_t a = kvtest::seq_begin(pool, prompt);
  std::vector<uint64_t> idle;
  for (int i = 0; i < 8; ++i) idle.push_back(kvtest::seq_begin(pool, kvtest::range(1000 + 100 * i, 4)));
  EXPECT_EQ(states_free(pool), 0u);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {10}), KVPOOL_OK);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {10}), KVPOOL_OK) << kvpool_last_error();  // evicts z's leaf for the fork
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 10u);
  kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 10u);
  EXPECT_EQ(s.state_protected, 1u);
  EXPECT_EQ(s.state_evictable, 0u);
  EXPECT_EQ(kvtest::available(pool), 128u - 20u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "z evicted"));

  const kvtest::TreeSizes before = kvtest::tree_sizes(pool);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {5}), KVPOOL_OK) << kvpool_last_error();  // no slot at all: skipped
  kvseq_info ia = kvtest::seq_info(pool, a);
  EXPECT_EQ(ia.cached, 10u);
  EXPECT_EQ(ia.computed, 25u);
  EXPECT_EQ(kvtest::tree_sizes(pool), before);
  EXPECT_EQ(states_free(pool), 0u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "skipped"));

  ASSERT_EQ(kvseq_abort(pool, idle.back()), KVPOOL_OK);
  idle.pop_back();
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {5}), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 25u);
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 25u);
  EXPECT_EQ(s.state_protected, 1u);
  EXPECT_EQ(s.state_evictable, 1u);  // the fork at 10, no longer locked
  EXPECT_EQ(states_free(pool), 0u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "caught up"));

  // Committing less than computed caches nothing new; what was cached while running stays.
  ASSERT_EQ(kvseq_finish(pool, a, 29), KVPOOL_OK) << kvpool_last_error();
  s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 25u);
  EXPECT_EQ(s.evictable, 25u);
  EXPECT_EQ(s.state_evictable, 2u);
  EXPECT_EQ(states_free(pool), 1u);
  EXPECT_EQ(kvtest::available(pool), 128u - 25u);
  for (uint64_t i : idle) ASSERT_EQ(kvseq_abort(pool, i), KVPOOL_OK);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "done"));
}

// A retracted request matches what it cached while running and restarts from the fork.
TEST(KvseqHybrid, RetractKeepsWhatChunkCachingCached) {
  Pool pool(kvtest::hybrid_radix_config(128, 10));
  const Tokens prompt = kvtest::range(1, 20);
  const uint64_t a = kvtest::seq_begin(pool, prompt);
  int32_t sa = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, a, &sa), KVPOOL_OK);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {8}), KVPOOL_OK);
  write_state(pool, sa, 8);
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {8}), KVPOOL_OK);
  size_t cached = 0;
  ASSERT_EQ(kvseq_retract(pool, a, &cached), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(cached, 8u);
  kvseq_info ia = kvtest::seq_info(pool, a);
  EXPECT_EQ(ia.computed, 8u);
  EXPECT_EQ(ia.row, -1);
  ASSERT_EQ(kvseq_mamba_slot(pool, a, &sa), KVPOOL_OK);
  EXPECT_EQ(read_conv(pool, sa), state_conv(8));
  EXPECT_EQ(kvtest::available(pool), 128u - 8u);
  EXPECT_EQ(states_free(pool), 8u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "retracted"));
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {12}), KVPOOL_OK);
  EXPECT_EQ(kvtest::seq_info(pool, a).cached, 8u);  // nothing computed beyond the match yet
  ASSERT_EQ(kvseq_finish(pool, a, 20), KVPOOL_OK);
  const kvtest::TreeSizes s = kvtest::tree_sizes(pool);
  EXPECT_EQ(s.total, 20u);
  EXPECT_EQ(s.state_evictable, 2u);
  EXPECT_EQ(states_free(pool), 8u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "finished"));
}

TEST(KvseqHybrid, AbortRetractAndStateShortage) {
  Pool pool(kvtest::hybrid_radix_config(64, 5));
  const uint64_t a = kvtest::seq_begin(pool, kvtest::range(1, 8));
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {8}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 8), KVPOOL_OK);  // 1 state cached, 4 free
  const uint64_t b = kvtest::seq_begin(pool, kvtest::range(100, 8));
  std::vector<uint64_t> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(kvtest::seq_begin(pool, kvtest::range(1000 + 100 * i, 8)));
  size_t states = 9;
  ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
  EXPECT_EQ(states, 0u);
  const uint64_t c = kvtest::seq_begin(pool, kvtest::range(200, 8));  // evicts a's cached state
  EXPECT_EQ(kvtest::tree_sizes(pool).total, 0u);  // a leaf: evicted entirely
  ASSERT_TRUE(kvtest::accounting_holds(pool, "c begun"));
  uint64_t d = 0;
  size_t cached = 0;
  const Tokens t = kvtest::range(300, 8);
  const size_t free_before = kvtest::available(pool);
  EXPECT_EQ(kvseq_begin(pool, t.data(), t.size(), nullptr, &d, &cached), KVPOOL_ERR_OUT_OF_MEMORY);  // none left
  EXPECT_EQ(kvtest::available(pool), free_before);
  ASSERT_EQ(kvtest::seq_extend(pool, {c}, {4}), KVPOOL_OK);
  EXPECT_EQ(kvtest::seq_extend(pool, {b}, {8}), KVPOOL_ERR_OUT_OF_MEMORY);  // one request row only
  for (uint64_t s : idle) ASSERT_EQ(kvseq_abort(pool, s), KVPOOL_OK);
  ASSERT_EQ(kvseq_retract(pool, c, &cached), KVPOOL_OK);
  EXPECT_EQ(cached, 0u);
  int32_t sc = -1;
  ASSERT_EQ(kvseq_mamba_slot(pool, c, &sc), KVPOOL_OK);
  EXPECT_GE(sc, 1);  // a retracted request gets a fresh state slot
  EXPECT_EQ(kvtest::seq_info(pool, c).row, -1);
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  EXPECT_EQ(kvseq_abort(pool, b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_mamba_slot(pool, b, &sc), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_mamba_slot(pool, c, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "b aborted"));
  ASSERT_EQ(kvseq_abort(pool, c), KVPOOL_OK);
  EXPECT_EQ(kvtest::available(pool), 64u);
  ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
  EXPECT_EQ(states, 5u);
  ASSERT_TRUE(kvtest::accounting_holds(pool, "all done"));
}

TEST(KvseqHybrid, WorksWithoutATree) {
  Pool pool(kvtest::hybrid_radix_config(64, 4, 4, 64, "none"));
  const uint64_t a = kvtest::seq_begin(pool, kvtest::range(1, 8));
  ASSERT_EQ(kvtest::seq_extend(pool, {a}, {8}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 8), KVPOOL_OK);
  EXPECT_EQ(kvtest::available(pool), 64u);
  size_t states = 0, e = 0, p = 0, total = 0;
  ASSERT_EQ(kvpool_mamba_available(pool, &states), KVPOOL_OK);
  EXPECT_EQ(states, 4u);
  EXPECT_EQ(radix_sizes(pool, &e, &p, &total), KVPOOL_ERR_UNSUPPORTED);
  ASSERT_TRUE(kvtest::accounting_holds(pool));
}

// Thousands of random steps with many requests under memory pressure (KV and states).
TEST(KvseqHybrid, RandomWorkloadKeepsOwnershipAndAccounting) {
  Pool pool(kvtest::hybrid_radix_config(96, 20, 4, 512));
  std::map<std::string, int> seen = kvtest::random_workload(pool, 7, 3000, 24, 12, 6, "hybrid");
  for (const char* op : {"begin", "begin-oom", "extend", "extend-oom", "decode", "finish", "abort", "end"}) {
    EXPECT_GT(seen[op], 0) << op;
  }
}

// Long shared prompts prefilled in chunks of at most 5 tokens: requests cache their
// earlier chunks while prefilling (taking state slots for the forks) and others reuse them.
TEST(KvseqHybrid, RandomChunkedPrefillsShareWhileRunning) {
  for (unsigned seed : {11u, 12u}) {
    Pool pool(kvtest::hybrid_radix_config(128, 20, 4, 512));
    std::map<std::string, int> seen =
        kvtest::random_workload(pool, seed, 3000, 8, 40, 6, "hybrid chunked " + std::to_string(seed), 5);
    for (const char* op : {"begin", "extend", "extend-oom", "decode", "finish", "abort", "extend-cached",
                           "hit-from-running", "end"}) {
      EXPECT_GT(seen[op], 0) << op << " seed " << seed;
    }
    std::string counts;
    for (const auto& [op, n] : seen) counts += op + "=" + std::to_string(n) + " ";
    std::printf("seed %u: %s\n", seed, counts.c_str());
  }
}

}  // namespace
