// The parts of kvseq_decode's one-pass path that trust kvseq's own state, each against
// the checked operation it stands in for: the table cells' bound test (req/table_cell.hpp)
// against the exact range rules, IdIndex::Reader against IdIndex::find, and
// PagedAllocator::decode_next and decode_pages / take_decode_pages against
// PagedAllocator::decode (same slots, same free list).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "alloc/paged_allocator.hpp"
#include "req/table_cell.hpp"
#include "seq/id_index.hpp"

namespace {

using kvp::alloc::PagedAllocator;
using kvp::req::CellBounds;
using kvp::req::TableCell;
using kvp::seq::IdIndex;
using kvp::seq::Request;

// A table of 5 rows (row 0 reserved), 16 columns, slots below 100.
TEST(TableCellBounds, HoldsExactlyTheCellsInsideTheTable) {
  const CellBounds bounds(5, 16, 100);
  EXPECT_TRUE(bounds.holds(TableCell{1, 0}, 0));
  EXPECT_TRUE(bounds.holds(TableCell{4, 15}, 99));
  EXPECT_FALSE(bounds.holds(TableCell{0, 3}, 7)) << "row 0 is reserved";
  EXPECT_FALSE(bounds.holds(TableCell{5, 3}, 7)) << "one row past the table";
  EXPECT_FALSE(bounds.holds(TableCell{-1, 3}, 7));
  EXPECT_FALSE(bounds.holds(TableCell{std::numeric_limits<int32_t>::min(), 3}, 7));
  EXPECT_FALSE(bounds.holds(TableCell{std::numeric_limits<int32_t>::max(), 3}, 7));
  EXPECT_FALSE(bounds.holds(TableCell{2, 16}, 7)) << "one column past max_context_len";
  EXPECT_FALSE(bounds.holds(TableCell{2, -1}, 7));
  EXPECT_FALSE(bounds.holds(TableCell{2, std::numeric_limits<int32_t>::min()}, 7));
  EXPECT_FALSE(bounds.holds(TableCell{2, 3}, 100)) << "slot at the limit";
  EXPECT_FALSE(bounds.holds(TableCell{2, 3}, -1));
  EXPECT_FALSE(bounds.holds(TableCell{2, 3}, std::numeric_limits<int64_t>::min()));
  EXPECT_FALSE(bounds.holds(TableCell{2, 3}, int64_t{1} << 32)) << "a slot whose int32 cast would be in range";
}

TEST(TableCellBounds, AgreesWithTheRangeRulesOnEveryNearbyValue) {
  for (int64_t rows : {1, 2, 3, 9}) {
    for (int64_t context : {1, 4}) {
      const CellBounds bounds(rows, context, 10);
      for (int32_t row = -2; row <= rows + 1; ++row) {
        for (int32_t column = -2; column <= context + 1; ++column) {
          for (int64_t slot : {-1, 0, 9, 10}) {
            const bool inside = row >= 1 && row < rows && column >= 0 && column < context && slot >= 0 && slot < 10;
            EXPECT_EQ(bounds.holds(TableCell{row, column}, slot), inside)
                << "rows " << rows << " context " << context << " cell (" << row << ", " << column << ") slot " << slot;
          }
        }
      }
    }
  }
}

TEST(IdIndexReader, FindsWhatFindFinds) {
  IdIndex index;
  {
    const IdIndex::Reader empty(index);  // never reserved: every id is absent
    EXPECT_EQ(empty.find(0), nullptr);
    EXPECT_EQ(empty.find(1), nullptr);
    EXPECT_EQ(empty.find(~uint64_t{0}), nullptr);
  }
  // Distinct addresses stand for the requests (the index never dereferences them).
  std::vector<int64_t> storage(300);
  std::vector<Request*> requests(storage.size());
  for (size_t i = 0; i < storage.size(); ++i) requests[i] = reinterpret_cast<Request*>(&storage[i]);
  std::vector<bool> present(requests.size() + 1, false);
  std::mt19937 rng(7);
  index.reserve(requests.size());
  for (uint64_t id = 1; id <= requests.size(); ++id) {
    index.insert(id, requests[id - 1]);
    present[id] = true;
  }
  for (int round = 0; round < 4; ++round) {
    for (uint64_t id = 1; id <= requests.size(); ++id) {  // erase about half (backward shifts move entries)
      if (present[id] && rng() % 2 == 0) {
        index.erase(id);
        present[id] = false;
      }
    }
    const IdIndex::Reader reader(index);
    for (uint64_t id = 0; id <= requests.size() + 5; ++id) {
      ASSERT_EQ(reader.find(id), index.find(id)) << "round " << round << " id " << id;
      if (id >= 1 && id <= requests.size()) {
        EXPECT_EQ(reader.find(id) != nullptr, present[id]) << id;
      }
    }
    for (uint64_t id = 1; id <= requests.size(); ++id) {  // and put some back
      if (!present[id] && rng() % 3 == 0) {
        index.insert(id, requests[id - 1]);
        present[id] = true;
      }
    }
  }
}

// Random batches of decoding requests (each with a length and the slot of its last
// token, held), decoded by both paths on twin allocators: the same slots, and the same
// free list afterwards, also after an undo and when pages run short.
TEST(PagedAllocatorDecodeNext, SameSlotsAndFreeListAsDecode) {
  for (int64_t page : {1, 2, 16}) {
    std::mt19937 rng(static_cast<unsigned>(page));
    PagedAllocator checked(64, page, true), trusted(64, page, true);
    for (int step = 0; step < 200; ++step) {
      // Requests: a length and, for a length not starting a page, a held slot to continue.
      const size_t batch = rng() % 12;
      std::vector<int64_t> seq(batch), last(batch), next(batch);
      size_t new_pages = 0;
      for (size_t i = 0; i < batch; ++i) {
        const int64_t len = 1 + static_cast<int64_t>(rng() % 40);
        seq[i] = len + 1;
        const bool starts = len % page == 0;
        // Any slot whose offset in its page is (len - 1) % page: its page need not be held
        // for this comparison, as neither path checks ownership.
        last[i] = (1 + static_cast<int64_t>(rng() % 64)) * page + (len - 1) % page;
        next[i] = starts ? -1 : last[i] + 1;
        new_pages += starts ? 1 : 0;
      }
      std::vector<int64_t> out_checked(batch, -9), out_trusted(batch, -9);
      const kvp::Status a = checked.decode(seq.data(), last.data(), batch, out_checked.data());
      const kvp::Status b = trusted.decode_next(next.data(), batch, new_pages, out_trusted.data());
      ASSERT_EQ(a.code(), b.code()) << a.message() << " / " << b.message();
      EXPECT_EQ(a.message(), b.message());
      if (!a.is_ok()) {
        // Out of pages: give some back to both, in the same order.
        std::vector<int64_t> held;
        for (int64_t p = 1; p <= 64 && held.size() < 8; ++p) {
          if (checked.pages().owned(p)) held.push_back(p * page);
        }
        ASSERT_TRUE(checked.free(held.data(), held.size()).is_ok());
        ASSERT_TRUE(trusted.free(held.data(), held.size()).is_ok());
        continue;
      }
      EXPECT_EQ(out_checked, out_trusted) << "page " << page << " step " << step;
      if (step % 5 == 0) {  // undo: both give the pages back as they were
        checked.undo_last_allocation();
        trusted.undo_last_allocation();
      }
      ASSERT_EQ(checked.pages().free_list(), trusted.pages().free_list()) << "page " << page << " step " << step;
      ASSERT_EQ(checked.pages().release_list(), trusted.pages().release_list());
    }
  }
}

// decode_pages / take_decode_pages (kvseq_decode's one pass) against decode_next on twin
// allocators whose free lists are shuffled by frees and wrap around the ring's end: the
// pages offered only when the free list proper holds one per request, and then the same
// slots and free list, also after an undo (otherwise both take decode_next, as kvseq
// does). Between steps both free random pages (with need_sort, into the deferred release
// list, which only decode_next merges).
TEST(PagedAllocatorDecodePages, SameSlotsAndFreeListAsDecodeNext) {
  for (int64_t page : {1, 4, 16}) {
    for (bool need_sort : {false, true}) {
      std::mt19937 rng(static_cast<unsigned>(page * 2 + (need_sort ? 1 : 0)));
      PagedAllocator reference(24, page, need_sort), one_pass(24, page, need_sort);
      size_t offered = 0, declined = 0;
      for (int step = 0; step < 400; ++step) {
        const size_t batch = rng() % 24;
        std::vector<int64_t> next(batch);
        size_t new_pages = 0;
        for (size_t i = 0; i < batch; ++i) {
          const bool starts = rng() % 3 == 0;
          next[i] = starts ? -1 : (1 + static_cast<int64_t>(rng() % 24)) * page + static_cast<int64_t>(rng() % page);
          new_pages += starts ? 1 : 0;
        }
        const int64_t* pages = one_pass.decode_pages(batch);
        if (pages == nullptr) {  // kvseq then takes decode_next on both (merging deferred frees, or short)
          ++declined;
          EXPECT_LT(one_pass.pages().free_count(), batch);
          std::vector<int64_t> expected(batch, -9), got(batch, -9);
          const kvp::Status a = reference.decode_next(next.data(), batch, new_pages, expected.data());
          const kvp::Status b = one_pass.decode_next(next.data(), batch, new_pages, got.data());
          ASSERT_EQ(a.code(), b.code());
          EXPECT_EQ(got, expected);
        } else {
          ++offered;
          std::vector<int64_t> expected(batch, -9), got(batch, -9);
          ASSERT_TRUE(reference.decode_next(next.data(), batch, new_pages, expected.data()).is_ok());
          size_t taken = 0;
          for (size_t i = 0; i < batch; ++i) got[i] = next[i] >= 0 ? next[i] : pages[taken++] * page;
          one_pass.take_decode_pages(taken);
          EXPECT_EQ(got, expected) << "page " << page << " step " << step;
          if (step % 7 == 0) {
            reference.undo_last_allocation();
            one_pass.undo_last_allocation();
          }
        }
        ASSERT_EQ(reference.pages().free_list(), one_pass.pages().free_list()) << "page " << page << " step " << step;
        ASSERT_EQ(reference.pages().release_list(), one_pass.pages().release_list());
        // Free a random few held pages from both, in the same order.
        std::vector<int64_t> held;
        for (int64_t p = 1; p <= 24; ++p) {
          if (reference.pages().owned(p) && rng() % 6 == 0) held.push_back(p * page);
        }
        ASSERT_TRUE(reference.free(held.data(), held.size()).is_ok());
        ASSERT_TRUE(one_pass.free(held.data(), held.size()).is_ok());
      }
      EXPECT_GT(offered, 50u) << "page " << page << " need_sort " << need_sort;
      EXPECT_GT(declined, 50u) << "page " << page << " need_sort " << need_sort;
    }
  }
}

TEST(PagedAllocatorDecodeNext, RefusesAMiscountBeforeTakingAnyPage) {
  PagedAllocator alloc(8, 4, true);
  const std::vector<int64_t> free_before = alloc.pages().free_list();
  const std::vector<int64_t> next = {-1, 13, -1};  // two requests start a page
  std::vector<int64_t> out(next.size());
  const kvp::Status st = alloc.decode_next(next.data(), next.size(), 1, out.data());
  EXPECT_EQ(st.code(), KVPOOL_ERR_INTERNAL);
  EXPECT_EQ(alloc.pages().free_list(), free_before);
  EXPECT_EQ(alloc.pages().held(), 0u);
}

}  // namespace
