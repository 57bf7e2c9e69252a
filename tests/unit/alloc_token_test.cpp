// Token allocator (page_size 1): SGLANG_SEMANTICS §1.2, §1.3 and the allocator tests of §8.2.
#include <algorithm>
#include <set>

#include "test_util.hpp"

namespace {

using kvtest::alloc;
using kvtest::available;
using kvtest::free_list;
using kvtest::Pool;

TEST(TokenAllocator, KindAndCapacity) {
  Pool pool(kvtest::mha_config(1, 16));
  int32_t kind = -1;
  ASSERT_EQ(kvalloc_get_kind(pool, &kind), KVPOOL_OK);
  EXPECT_EQ(kind, KVALLOC_TOKEN);
  EXPECT_EQ(available(pool), 16u);
  std::vector<int64_t> expected(16);
  for (int i = 0; i < 16; ++i) expected[i] = i + 1;  // slot 0 reserved
  EXPECT_EQ(free_list(pool), expected);
}

TEST(TokenAllocator, AllocReturnsUniqueSlotsAndNeverSlotZero) {
  Pool pool(kvtest::mha_config(1, 16));
  auto a = alloc(pool, 5);
  auto b = alloc(pool, 11);
  EXPECT_EQ(available(pool), 0u);
  std::set<int64_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 16u);  // sequential allocations never overlap
  EXPECT_EQ(all.count(0), 0u);
  EXPECT_EQ(a, (std::vector<int64_t>{1, 2, 3, 4, 5}));  // from the front of the free list
  kvtest::expect_consistent(pool);
}

TEST(TokenAllocator, OverCapacityIsRecoverableAndChangesNothing) {
  Pool pool(kvtest::mha_config(1, 16));
  alloc(pool, 10);
  const auto before = free_list(pool);
  std::vector<int64_t> out(7, -5);
  EXPECT_EQ(kvalloc_alloc(pool, out.data(), out.size()), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(kvpool_last_error()).find("need 7 slots, 6 available"), std::string::npos)
      << kvpool_last_error();
  EXPECT_EQ(free_list(pool), before);
  EXPECT_EQ(available(pool), 6u);
  alloc(pool, 6);  // exact capacity succeeds and leaves 0
  EXPECT_EQ(available(pool), 0u);
  kvtest::expect_consistent(pool);
}

TEST(TokenAllocator, AllocZeroAndEmptyFree) {
  Pool pool(kvtest::mha_config(1, 16));
  EXPECT_EQ(kvalloc_alloc(pool, nullptr, 0), KVPOOL_OK);
  EXPECT_EQ(kvalloc_free(pool, nullptr, 0), KVPOOL_OK);
  EXPECT_EQ(available(pool), 16u);
}

TEST(TokenAllocator, FreeAppendsToTheBackFifo) {
  Pool pool(kvtest::mha_config(1, 8));
  auto a = alloc(pool, 6);  // free list now [7, 8]
  kvtest::free_slots(pool, {4, 2});
  EXPECT_EQ(free_list(pool), (std::vector<int64_t>{7, 8, 4, 2}));
  EXPECT_EQ(alloc(pool, 3), (std::vector<int64_t>{7, 8, 4}));  // freed slots are reused last (FIFO)
}

TEST(TokenAllocator, DoubleAndForeignFreesAreRejectedWithoutChange) {
  Pool pool(kvtest::mha_config(1, 8));
  auto a = alloc(pool, 4);
  kvtest::free_slots(pool, {a[0]});
  const auto before = free_list(pool);
  auto expect_rejected = [&](std::vector<int64_t> slots, const char* fragment) {
    EXPECT_EQ(kvalloc_free(pool, slots.data(), slots.size()), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kvpool_last_error()).find(fragment), std::string::npos) << kvpool_last_error();
    EXPECT_EQ(free_list(pool), before);
    kvtest::expect_consistent(pool);
  };
  expect_rejected({a[1], a[0]}, "slot 1 is not allocated");   // double free, after a valid one in the batch
  expect_rejected({a[2], a[2]}, "slot 3 is listed twice");
  expect_rejected({7}, "slot 7 is not allocated");              // never handed out
  expect_rejected({0}, "slot 0 is reserved");
  expect_rejected({9}, "slot 9 is out of range [1, 8]");
  expect_rejected({-1}, "slot -1 is out of range");
  kvpool_stats stats = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(pool, &stats), KVPOOL_OK);
  EXPECT_EQ(stats.rejected_calls, 6u);
  EXPECT_EQ(stats.token_held, 3u);
}

TEST(TokenAllocator, NeedSortDefersFreesAndMergesSorted) {
  Pool pool(kvtest::mha_config(1, 8, "decode"));
  auto a = alloc(pool, 8);
  kvtest::free_slots(pool, {6, 3});
  kvtest::free_slots(pool, {8});
  EXPECT_EQ(free_list(pool), std::vector<int64_t>{});
  EXPECT_EQ(free_list(pool, KVALLOC_LIST_RELEASE), (std::vector<int64_t>{6, 3, 8}));
  EXPECT_EQ(available(pool), 3u);  // deferred frees count as available
  EXPECT_EQ(alloc(pool, 2), (std::vector<int64_t>{3, 6}));  // merged and sorted first
  EXPECT_EQ(free_list(pool), (std::vector<int64_t>{8}));
  EXPECT_EQ(free_list(pool, KVALLOC_LIST_RELEASE), std::vector<int64_t>{});
  kvtest::expect_consistent(pool);
}

TEST(TokenAllocator, NeedSortFullSizeAllocAfterFreesSucceeds) {
  Pool pool(kvtest::mha_config(1, 8, "prefill"));
  auto a = alloc(pool, 8);
  kvtest::free_slots(pool, a);
  EXPECT_EQ(alloc(pool, 8), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  std::vector<int64_t> out(1);
  EXPECT_EQ(kvalloc_alloc(pool, out.data(), 1), KVPOOL_ERR_OUT_OF_MEMORY);
}

TEST(TokenAllocator, MergeAndSortOnDemand) {
  Pool pool(kvtest::mha_config(1, 8, "decode"));
  auto a = alloc(pool, 6);  // free: [7, 8]
  kvtest::free_slots(pool, {5, 1});
  ASSERT_EQ(kvalloc_merge_and_sort(pool), KVPOOL_OK);
  EXPECT_EQ(free_list(pool), (std::vector<int64_t>{1, 5, 7, 8}));
  ASSERT_EQ(kvalloc_merge_and_sort(pool), KVPOOL_OK);  // empty release list: no change
  EXPECT_EQ(free_list(pool), (std::vector<int64_t>{1, 5, 7, 8}));
}

TEST(TokenAllocator, BackupRestoreRevertsAllocationsAndFrees) {
  Pool pool(kvtest::mha_config(1, 8));
  auto held = alloc(pool, 3);
  const auto before = free_list(pool);
  uint64_t token = 0;
  ASSERT_EQ(kvalloc_backup(pool, &token), KVPOOL_OK);
  alloc(pool, 2);
  alloc(pool, 1);
  kvtest::free_slots(pool, {held[1]});
  ASSERT_EQ(kvalloc_restore(pool, token), KVPOOL_OK);
  EXPECT_EQ(free_list(pool), before);
  EXPECT_EQ(available(pool), 5u);
  kvtest::expect_consistent(pool);
  // The freed slot is held again: freeing it once more is valid, twice is not.
  kvtest::free_slots(pool, {held[1]});
  EXPECT_EQ(kvalloc_free(pool, &held[1], 1), KVPOOL_ERR_INVALID_ARGUMENT);
  // Restoring again returns to the snapshot; unknown tokens are rejected.
  ASSERT_EQ(kvalloc_restore(pool, token), KVPOOL_OK);
  EXPECT_EQ(free_list(pool), before);
  EXPECT_EQ(kvalloc_restore(pool, token + 1), KVPOOL_ERR_INVALID_ARGUMENT);
  uint64_t second = 0;
  ASSERT_EQ(kvalloc_backup(pool, &second), KVPOOL_OK);
  EXPECT_NE(second, token);
  EXPECT_EQ(kvalloc_restore(pool, token), KVPOOL_ERR_INVALID_ARGUMENT);  // replaced
}

TEST(TokenAllocator, FreeGroupsReleaseAtTheEnd) {
  Pool pool(kvtest::mha_config(1, 8));
  auto a = alloc(pool, 8);
  ASSERT_EQ(kvalloc_free_group_begin(pool), KVPOOL_OK);
  EXPECT_EQ(kvalloc_free_group_begin(pool), KVPOOL_ERR_INVALID_ARGUMENT);  // already open
  kvtest::free_slots(pool, {a[2]});
  kvtest::free_slots(pool, {a[0], a[5]});
  EXPECT_EQ(available(pool), 0u);  // nothing available inside the group
  EXPECT_EQ(kvalloc_free(pool, &a[2], 1), KVPOOL_ERR_INVALID_ARGUMENT);  // double free caught inside a group
  kvpool_stats stats = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(pool, &stats), KVPOOL_OK);
  EXPECT_EQ(stats.token_pending, 3u);
  uint64_t token = 0;
  EXPECT_EQ(kvalloc_backup(pool, &token), KVPOOL_ERR_INVALID_ARGUMENT);  // not inside a group
  kvtest::expect_consistent(pool);
  ASSERT_EQ(kvalloc_free_group_end(pool), KVPOOL_OK);
  EXPECT_EQ(available(pool), 3u);
  EXPECT_EQ(free_list(pool), (std::vector<int64_t>{3, 1, 6}));  // one free, in group order
  EXPECT_EQ(kvalloc_free_group_end(pool), KVPOOL_ERR_INVALID_ARGUMENT);  // no group open
  ASSERT_EQ(kvalloc_free_group_begin(pool), KVPOOL_OK);
  ASSERT_EQ(kvalloc_free_group_end(pool), KVPOOL_OK);  // empty group: no-op
  EXPECT_EQ(available(pool), 3u);
}

TEST(TokenAllocator, ClearRestoresCapacity) {
  Pool pool(kvtest::mha_config(1, 8));
  alloc(pool, 5);
  ASSERT_EQ(kvalloc_clear(pool), KVPOOL_OK);
  EXPECT_EQ(available(pool), 8u);
  EXPECT_EQ(free_list(pool), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  kvtest::expect_consistent(pool);
}

TEST(TokenAllocator, BadArguments) {
  Pool pool(kvtest::mha_config(1, 8));
  int64_t out[2];
  EXPECT_EQ(kvalloc_alloc(nullptr, out, 2), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_alloc(pool, nullptr, 2), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_free(pool, nullptr, 2), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_available(pool, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_get_kind(pool, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  size_t full = 0, swa = 0;
  EXPECT_EQ(kvalloc_swa_available(pool, &full, &swa), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvalloc_free_swa(pool, out, 0), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvalloc_translate_swa(pool, out, 0, out, 0), KVPOOL_ERR_UNSUPPORTED);
  size_t len = 0;
  EXPECT_EQ(kvalloc_free_list(pool, 99, out, 2, &len), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_free_list(pool, KVALLOC_LIST_FREE, out, 2, &len), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, 8u);  // the required size is reported
  EXPECT_EQ(kvalloc_free_list(pool, KVALLOC_LIST_SWA_FREE, out, 2, &len), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvalloc_free_list(pool, KVALLOC_LIST_FREE, out, 2, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  uint64_t token = 0;
  EXPECT_EQ(kvalloc_backup(pool, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_restore(pool, 0), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_restore(nullptr, token), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_clear(nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_merge_and_sort(nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_free_group_begin(nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_free_group_end(nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(available(pool), 8u);
  kvtest::expect_consistent(pool);
}

}  // namespace
