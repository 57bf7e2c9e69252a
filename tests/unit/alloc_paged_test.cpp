// Paged allocator: SGLANG_SEMANTICS §1.4, §2 (alloc_extend / alloc_decode, the §2.4 worked example)
// and the paged cases of §8.2.
#include <set>

#include "test_util.hpp"

namespace {

using kvtest::alloc;
using kvtest::available;
using kvtest::free_list;
using kvtest::Pool;
using Slots = std::vector<int64_t>;

kvpool_status extend(kvpool* pool, const Slots& pre, const Slots& seq, const Slots& last, Slots* out) {
  size_t total = 0;
  for (size_t i = 0; i < pre.size(); ++i) total += static_cast<size_t>(seq[i] - pre[i]);
  out->assign(total, -7);
  return kvalloc_extend(pool, pre.data(), pre.size(), seq.data(), seq.size(), last.data(), last.size(), out->data(),
                        out->size());
}

kvpool_status decode(kvpool* pool, const Slots& seq, const Slots& last, Slots* out) {
  out->assign(seq.size(), -7);
  return kvalloc_decode(pool, seq.data(), seq.size(), last.data(), last.size(), out->data(), out->size());
}

// Frees pages one call at a time, so the free list front is `pages` in this order.
void free_pages_one_by_one(kvpool* pool, const Slots& pages_last_first, int page_size) {
  for (int64_t page : pages_last_first) kvtest::free_slots(pool, {page * page_size + 1});
}

TEST(PagedAllocator, WorkedExampleOfSection2_4) {
  Pool pool(kvtest::mha_config(4, 64));  // pages 1..16; the prefixes live in pages 10, 11, 13 and 15
  int32_t kind = -1;
  ASSERT_EQ(kvalloc_get_kind(pool, &kind), KVPOOL_OK);
  EXPECT_EQ(kind, KVALLOC_PAGED);
  alloc(pool, 64);
  free_pages_one_by_one(pool, {11, 3, 7, 2, 9, 5}, 4);  // freed pages go to the front
  ASSERT_EQ(free_list(pool), (Slots{5, 9, 2, 7, 3, 11}));

  Slots out;
  ASSERT_EQ(extend(pool, {6, 0, 8}, {13, 5, 10}, {45, -1, 55}, &out), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(out, (Slots{46, 47, 20, 21, 22, 23, 36, 8, 9, 10, 11, 28, 12, 13}));
  EXPECT_EQ(free_list(pool), (Slots{11}));

  ASSERT_EQ(decode(pool, {7, 9, 12}, {25, 39, 62}, &out), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(out, (Slots{26, 44, 63}));
  EXPECT_EQ(free_list(pool), Slots{});

  // A further request needing a page: out of memory, nothing changes.
  EXPECT_EQ(decode(pool, {13}, {63}, &out), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(out, Slots{-7});
  EXPECT_EQ(available(pool), 0u);
  kvtest::expect_consistent(pool);
}

TEST(PagedAllocator, ExtendThreePartsOnAFreshPool) {
  struct Case {
    int64_t pre, seq, last;
    Slots expected;
  };
  const Case cases[] = {
      {2, 4, 1, {2, 3}},                                   // part 1 only
      {0, 8, -1, {4, 5, 6, 7, 8, 9, 10, 11}},              // part 2 only
      {4, 7, 3, {4, 5, 6}},                                // part 3 only
      {2, 8, 1, {2, 3, 4, 5, 6, 7}},                       // parts 1 + 2
      {2, 6, 1, {2, 3, 4, 5}},                             // parts 1 + 3
      {0, 6, -1, {4, 5, 6, 7, 8, 9}},                      // parts 2 + 3
      {2, 11, 1, {2, 3, 4, 5, 6, 7, 8, 9, 10}},            // all three
      {5, 5, 4, {}},                                       // zero extend
  };
  for (const Case& c : cases) {
    Pool pool(kvtest::mha_config(4, 64));
    Slots out;
    ASSERT_EQ(extend(pool, {c.pre}, {c.seq}, {c.last}, &out), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(out, c.expected) << "pre " << c.pre << " seq " << c.seq;
    kvtest::expect_consistent(pool);
  }
}

TEST(PagedAllocator, ExtendBatchNeverOverlapsAndConsumesInRequestOrder) {
  Pool pool(kvtest::mha_config(4, 64));
  Slots out;
  ASSERT_EQ(extend(pool, {0, 0, 0}, {5, 3, 9}, {-1, -1, -1}, &out), KVPOOL_OK);
  EXPECT_EQ(out.size(), 17u);
  EXPECT_EQ(std::set<int64_t>(out.begin(), out.end()).size(), 17u);
  EXPECT_EQ(out, (Slots{4, 5, 6, 7, 8, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24}));
  EXPECT_EQ(available(pool), 64u - 6 * 4);
}

TEST(PagedAllocator, DecodeInsideAndAcrossPages) {
  Pool pool(kvtest::mha_config(4, 64));
  Slots out;
  ASSERT_EQ(decode(pool, {4}, {2}, &out), KVPOOL_OK);  // inside a page: no new page
  EXPECT_EQ(out, Slots{3});
  EXPECT_EQ(available(pool), 64u);
  ASSERT_EQ(decode(pool, {5}, {3}, &out), KVPOOL_OK);  // crosses a page boundary: consumes one
  EXPECT_EQ(out, Slots{4});
  EXPECT_EQ(available(pool), 60u);
  ASSERT_EQ(decode(pool, {1}, {-1}, &out), KVPOOL_OK);  // a first token starts a page
  EXPECT_EQ(out, Slots{8});
}

TEST(PagedAllocator, OutOfMemoryLeavesTheFreeListUntouched) {
  Pool pool(kvtest::mha_config(4, 48));
  alloc(pool, 40);  // 2 pages left
  const Slots before = free_list(pool);
  Slots out;
  EXPECT_EQ(extend(pool, {0}, {30}, {-1}, &out), KVPOOL_ERR_OUT_OF_MEMORY);  // needs 8 pages
  EXPECT_NE(std::string(kvpool_last_error()).find("8 pages"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(free_list(pool), before);
  EXPECT_EQ(out, Slots(30, -7));  // the output is not touched either
  kvpool_stats stats = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(pool, &stats), KVPOOL_OK);
  EXPECT_EQ(stats.alloc_failures, 1u);
}

TEST(PagedAllocator, NeedSortOutOfMemory) {
  Pool pool(kvtest::mha_config(4, 16, "decode"));
  Slots out;
  EXPECT_EQ(extend(pool, {0}, {32}, {-1}, &out), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(decode(pool, {1, 1, 1, 1, 1}, {-1, -1, -1, -1, -1}, &out), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(available(pool), 16u);
}

TEST(PagedAllocator, NeedSortExtendMergesDeferredFrees) {
  Pool pool(kvtest::mha_config(4, 32, "prefill"));
  auto held = alloc(pool, 32);  // pages 1..8
  kvtest::free_slots(pool, {29, 5, 13});  // pages 7, 1, 3 -> release list
  EXPECT_EQ(free_list(pool, KVALLOC_LIST_RELEASE), (Slots{1, 3, 7}));
  Slots out;
  ASSERT_EQ(extend(pool, {0}, {8}, {-1}, &out), KVPOOL_OK);
  EXPECT_EQ(out, (Slots{4, 5, 6, 7, 12, 13, 14, 15}));  // pages 1, 3 after merge-and-sort
  EXPECT_EQ(free_list(pool), (Slots{7}));
}

TEST(PagedAllocator, FreeIsPageGranularAndRecentlyFreedFirst) {
  Pool pool(kvtest::mha_config(4, 32));
  auto held = alloc(pool, 16);  // pages 1..4; free list [5..8]
  kvtest::free_slots(pool, {9, 10, 6});  // slots of pages 2 and 1: each page freed once
  EXPECT_EQ(free_list(pool), (Slots{1, 2, 5, 6, 7, 8}));
  EXPECT_EQ(alloc(pool, 4), (Slots{4, 5, 6, 7}));  // page 1 again first
  const Slots before = free_list(pool);
  EXPECT_EQ(kvalloc_free(pool, &held[4], 1), KVPOOL_ERR_INVALID_ARGUMENT);  // page 2 freed twice
  EXPECT_NE(std::string(kvpool_last_error()).find("page 2 is not allocated"), std::string::npos);
  int64_t reserved = 3;
  EXPECT_EQ(kvalloc_free(pool, &reserved, 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("reserved page 0"), std::string::npos);
  int64_t beyond = 36;
  EXPECT_EQ(kvalloc_free(pool, &beyond, 1), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(free_list(pool), before);
  kvtest::expect_consistent(pool);
}

TEST(PagedAllocator, AllocMustBeWholePages) {
  Pool pool(kvtest::mha_config(4, 32));
  Slots out(6);
  EXPECT_EQ(kvalloc_alloc(pool, out.data(), 6), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("not a multiple of page_size 4"), std::string::npos);
  EXPECT_EQ(alloc(pool, 8), (Slots{4, 5, 6, 7, 8, 9, 10, 11}));  // page order, page-aligned starts
}

TEST(PagedAllocator, BackupRestoreAfterExtend) {
  Pool pool(kvtest::mha_config(4, 32));
  Slots out;
  ASSERT_EQ(extend(pool, {0}, {6}, {-1}, &out), KVPOOL_OK);
  const Slots before = free_list(pool);
  uint64_t token = 0;
  ASSERT_EQ(kvalloc_backup(pool, &token), KVPOOL_OK);
  ASSERT_EQ(extend(pool, {6, 0}, {10, 9}, {9, -1}, &out), KVPOOL_OK);
  kvtest::free_slots(pool, {4});
  ASSERT_EQ(kvalloc_restore(pool, token), KVPOOL_OK);
  EXPECT_EQ(free_list(pool), before);
  kvtest::expect_consistent(pool);
}

TEST(PagedAllocator, ExtendAndDecodeRejectBadInputs) {
  Pool pool(kvtest::mha_config(4, 32));
  const Slots before = free_list(pool);
  Slots out(4);
  const Slots pre{0}, seq{4}, last{-1};
  auto call = [&](const Slots& p, const Slots& s, const Slots& l, size_t out_len) {
    return kvalloc_extend(pool, p.data(), p.size(), s.data(), s.size(), l.data(), l.size(), out.data(), out_len);
  };
  EXPECT_EQ(call(pre, seq, last, 3), KVPOOL_ERR_INVALID_ARGUMENT);  // output length != sum of extends
  EXPECT_EQ(call(pre, {4, 4}, last, 4), KVPOOL_ERR_INVALID_ARGUMENT);  // length mismatch
  EXPECT_EQ(call({-1}, seq, last, 5), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call({5}, seq, {4}, 0), KVPOOL_ERR_INVALID_ARGUMENT);  // seq < prefix
  EXPECT_EQ(call({0}, seq, {7}, 4), KVPOOL_ERR_INVALID_ARGUMENT);  // last_loc for an empty prefix
  EXPECT_EQ(call({2}, seq, {6}, 2), KVPOOL_ERR_INVALID_ARGUMENT);  // (6 + 1) % 4 != 2 % 4
  EXPECT_NE(std::string(kvpool_last_error()).find("(last_loc + 1) % page_size"), std::string::npos);
  EXPECT_EQ(call({2}, seq, {1000}, 2), KVPOOL_ERR_INVALID_ARGUMENT);  // out of range
  EXPECT_EQ(kvalloc_extend(pool, nullptr, 1, seq.data(), 1, last.data(), 1, out.data(), 4), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(decode(pool, {0}, {-1}, &out), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(decode(pool, {6}, {7}, &out), KVPOOL_ERR_INVALID_ARGUMENT);  // (7 + 2) % 4 != 6 % 4
  EXPECT_EQ(decode(pool, {1}, {3}, &out), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_decode(pool, seq.data(), 1, last.data(), 1, out.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(free_list(pool), before);
  kvtest::expect_consistent(pool);
}

TEST(PagedAllocator, DecodeNamesTheFirstBadRequest) {
  // A batch with several bad requests names the first one and its reason, extreme last_locs
  // (INT64_MAX, INT64_MIN: no overflow in the page test) are rejected as out of range, and
  // nothing changes.
  for (int64_t page : {4, 16}) {
    Pool pool(kvtest::mha_config(page, 32));
    Slots base(static_cast<size_t>(2 * page));
    ASSERT_EQ(kvalloc_alloc(pool, base.data(), base.size()), KVPOOL_OK);
    const Slots before = free_list(pool);
    Slots out(3);
    const int64_t p0 = base[0];  // first slot of a held page: token 0 of a request
    struct Case {
      Slots seq, last;
      const char* message;
    };
    const Case cases[] = {
        {{2, 2, 0}, {p0, p0 + 1, -1}, "request 1: last_loc"},                    // misaligned, then seq 0
        {{2, 0, 1}, {p0, -1, 5}, "request 1: sequence length 0 is below 1"},    // the earlier violation wins
        {{2, 1, 2}, {p0, 7, p0}, "request 1: last_loc is 7 for a first token"},
        {{2, 2, 2}, {p0, INT64_MAX, p0}, "request 1: last_loc 9223372036854775807 is out of range"},
        {{2, 2, 2}, {p0, p0, INT64_MIN}, "request 2: last_loc -9223372036854775808 is out of range"},
    };
    for (const Case& c : cases) {
      EXPECT_EQ(decode(pool, c.seq, c.last, &out), KVPOOL_ERR_INVALID_ARGUMENT) << c.message;
      EXPECT_NE(std::string(kvpool_last_error()).find(c.message), std::string::npos)
          << "page " << page << ": " << kvpool_last_error();
      EXPECT_EQ(free_list(pool), before);
    }
    Slots one(1);
    ASSERT_EQ(decode(pool, {2}, {p0}, &one), KVPOOL_OK);  // request 0's inputs alone are valid
    EXPECT_EQ(one[0], p0 + 1);
    kvtest::expect_consistent(pool);
  }
}

// Found by the API fuzzer: lengths near INT64_MAX overflowed the rounding to whole pages, and a
// huge prefix with nothing to extend passed the checks and then wrote pages past the output.
TEST(PagedAllocator, ExtendRejectsLengthsThatOverflowPageRounding) {
  Pool pool(kvtest::mha_config(4, 32));
  const Slots before = free_list(pool);
  Slots none;
  const int64_t huge = INT64_MAX - 1;  // huge % 4 == 2, so last_loc 5 passes the page rule
  const int64_t last = 5;
  EXPECT_EQ(kvalloc_extend(pool, &huge, 1, &huge, 1, &last, 1, none.data(), 0), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("too large"), std::string::npos) << kvpool_last_error();
  const int64_t zero = 0, minus_one = -1, max = INT64_MAX;
  Slots out(8);
  EXPECT_EQ(kvalloc_extend(pool, &zero, 1, &max, 1, &minus_one, 1, out.data(), out.size()), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(free_list(pool), before);
  EXPECT_EQ(extend(pool, {0}, {33}, {-1}, &out), KVPOOL_ERR_OUT_OF_MEMORY);  // merely too long: out of memory, as before
  kvtest::expect_consistent(pool);
  Pool tokens(kvtest::mha_config(1, 32));  // page 1: INT64_MAX itself is representable, and out of memory
  EXPECT_EQ(kvalloc_extend(tokens, &zero, 1, &max, 1, &minus_one, 1, out.data(), out.size()), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_extend(tokens, &zero, 1, &max, 1, &minus_one, 1, nullptr, static_cast<size_t>(INT64_MAX)),
            KVPOOL_ERR_INVALID_ARGUMENT);  // NULL output
  kvtest::expect_consistent(tokens);
}

TEST(PagedAllocator, TokenPoolExtendIsAPlainAllocation) {
  Pool pool(kvtest::mha_config(1, 16));
  Slots out;
  ASSERT_EQ(extend(pool, {3, 0}, {5, 2}, {9, -1}, &out), KVPOOL_OK);
  EXPECT_EQ(out, (Slots{1, 2, 3, 4}));
  ASSERT_EQ(decode(pool, {6, 3}, {2, 4}, &out), KVPOOL_OK);
  EXPECT_EQ(out, (Slots{5, 6}));  // page size 1: every decode token takes a new slot
}

}  // namespace
