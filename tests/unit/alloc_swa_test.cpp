// swa allocator: SGLANG_SEMANTICS §1.5 and the allocator part of §8.4.
#include "test_util.hpp"

namespace {

using kvtest::free_list;
using kvtest::Pool;
using Slots = std::vector<int64_t>;

std::pair<size_t, size_t> swa_available(kvpool* pool) {
  size_t full = 0, swa = 0;
  EXPECT_EQ(kvalloc_swa_available(pool, &full, &swa), KVPOOL_OK) << kvpool_last_error();
  return {full, swa};
}

Slots translate(kvpool* pool, const Slots& slots) {
  Slots out(slots.size(), -7);
  EXPECT_EQ(kvalloc_translate_swa(pool, slots.data(), slots.size(), out.data(), out.size()), KVPOOL_OK)
      << kvpool_last_error();
  return out;
}

// 4 layers, 2 sliding + 2 full, ratio 1: 16 tokens -> 16 full and 16 window slots.
const std::string k16 = kvtest::swa_config(16, 1.0);

TEST(SwaAllocator, TwoPoolsAndAvailability) {
  Pool pool(k16);
  int32_t kind = -1;
  ASSERT_EQ(kvalloc_get_kind(pool, &kind), KVPOOL_OK);
  EXPECT_EQ(kind, KVALLOC_SWA);
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{16, 16}));
  size_t tokens = 0;
  EXPECT_EQ(kvalloc_available(pool, &tokens), KVPOOL_ERR_UNSUPPORTED);  // use the split call
  auto one = kvtest::alloc(pool, 1);
  auto [full, swa] = swa_available(pool);
  EXPECT_EQ(full + swa, 30u);  // one slot from each pool
  kvtest::expect_consistent(pool);
}

TEST(SwaAllocator, MappingFreeSwaAndTranslate) {
  Pool pool(k16);
  auto a = kvtest::alloc(pool, 3);
  EXPECT_EQ(a, (Slots{1, 2, 3}));
  EXPECT_EQ(translate(pool, a), (Slots{1, 2, 3}));
  ASSERT_EQ(kvalloc_free_swa(pool, &a[0], 1), KVPOOL_OK);  // token 0 slid out of the window
  EXPECT_EQ(translate(pool, a), (Slots{0, 2, 3}));
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{13, 14}));
  ASSERT_EQ(kvalloc_free_swa(pool, &a[0], 1), KVPOOL_OK);  // no window slot left: skipped
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{13, 14}));
  kvtest::free_slots(pool, a);  // frees the full slots and the remaining window slots
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{16, 16}));
  EXPECT_EQ(translate(pool, a), (Slots{0, 0, 0}));
  EXPECT_EQ(free_list(pool, KVALLOC_LIST_SWA_FREE).back(), 3);  // FIFO: freed window slots go last
  kvtest::expect_consistent(pool);
}

TEST(SwaAllocator, OutOfMemoryWhenEitherPoolIsShort) {
  Pool pool(kvtest::swa_config(16, 0.5));  // the ratio rule gives 21 full and 10 window slots
  const auto [full, swa] = swa_available(pool);
  ASSERT_LT(swa, full);
  Slots out(swa + 1);
  EXPECT_EQ(kvalloc_alloc(pool, out.data(), out.size()), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{full, swa}));
}

TEST(SwaAllocator, RestoreRevertsTheMappingToo) {
  Pool pool(k16);
  auto a = kvtest::alloc(pool, 2);
  uint64_t token = 0;
  ASSERT_EQ(kvalloc_backup(pool, &token), KVPOOL_OK);
  auto b = kvtest::alloc(pool, 3);
  ASSERT_EQ(kvalloc_free_swa(pool, &a[1], 1), KVPOOL_OK);
  ASSERT_EQ(kvalloc_restore(pool, token), KVPOOL_OK);
  // The upstream snapshot left stale mappings for b; here they are zero again.
  EXPECT_EQ(translate(pool, b), (Slots{0, 0, 0}));
  EXPECT_EQ(translate(pool, a), (Slots{1, 2}));
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{14, 14}));
  kvtest::expect_consistent(pool);
  // Freeing a reverted allocation is a double free.
  EXPECT_EQ(kvalloc_free(pool, b.data(), b.size()), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(SwaAllocator, GroupsAndBadInputs) {
  Pool pool(k16);
  auto a = kvtest::alloc(pool, 4);
  ASSERT_EQ(kvalloc_free_group_begin(pool), KVPOOL_OK);
  kvtest::free_slots(pool, {a[0], a[1]});
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{12, 12}));
  kvtest::expect_consistent(pool);
  ASSERT_EQ(kvalloc_free_group_end(pool), KVPOOL_OK);
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{14, 14}));
  EXPECT_EQ(kvalloc_free(pool, &a[0], 1), KVPOOL_ERR_INVALID_ARGUMENT);
  int64_t bad[] = {17};
  EXPECT_EQ(kvalloc_free_swa(pool, bad, 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_free_swa(pool, &a[0], 1), KVPOOL_ERR_INVALID_ARGUMENT);  // not held any more
  int64_t twice[] = {a[2], a[2]};
  EXPECT_EQ(kvalloc_free_swa(pool, twice, 2), KVPOOL_ERR_INVALID_ARGUMENT);
  int64_t out[1];
  EXPECT_EQ(kvalloc_translate_swa(pool, bad, 1, out, 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_translate_swa(pool, bad, 1, out, 0), KVPOOL_ERR_INVALID_ARGUMENT);
  Slots prefix{0}, seq{1}, last{-1}, slots(1);
  EXPECT_EQ(kvalloc_extend(pool, prefix.data(), 1, seq.data(), 1, last.data(), 1, slots.data(), 1), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvalloc_decode(pool, seq.data(), 1, last.data(), 1, slots.data(), 1), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{14, 14}));
  kvtest::expect_consistent(pool);
  ASSERT_EQ(kvalloc_clear(pool), KVPOOL_OK);
  EXPECT_EQ(swa_available(pool), (std::pair<size_t, size_t>{16, 16}));
  EXPECT_EQ(translate(pool, {1, 2, 3, 4}), (Slots{0, 0, 0, 0}));
}

TEST(SwaAllocator, NeedSortInBothPools) {
  Pool pool(kvtest::swa_config(16, 1.0, "decode"));
  auto a = kvtest::alloc(pool, 16);
  kvtest::free_slots(pool, {a[9], a[2]});
  EXPECT_EQ(free_list(pool, KVALLOC_LIST_RELEASE), (Slots{10, 3}));
  EXPECT_EQ(free_list(pool, KVALLOC_LIST_SWA_RELEASE), (Slots{10, 3}));
  auto b = kvtest::alloc(pool, 2);
  EXPECT_EQ(b, (Slots{3, 10}));
  EXPECT_EQ(translate(pool, b), (Slots{3, 10}));
}

}  // namespace
