// IdAllocator's batched give-back (give_back_runs, used by radix eviction) and the
// free ring's block copies, against the one-id-at-a-time behaviour they replace.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "alloc/id_allocator.hpp"
#include "alloc/ring.hpp"
#include "id_allocator_picture.hpp"

namespace {

using kvp::alloc::GiveBackOrder;
using kvp::alloc::IdAllocator;
using kvp::alloc::Ring;
using kvp::alloc::UndoLog;
using Ids = std::vector<int64_t>;
using kvtest::picture;


TEST(IdAllocatorRuns, SameStateAsOneGiveBackPerRun) {
  std::mt19937_64 rng(11);
  for (GiveBackOrder order : {GiveBackOrder::kAppend, GiveBackOrder::kPrependSorted}) {
    for (bool need_sort : {false, true}) {
      for (int group = 0; group < 2; ++group) {
        for (int round = 0; round < 20; ++round) {
          IdAllocator a(64, order, need_sort, "page"), b(64, order, need_sort, "page");
          Ids taken(40);
          ASSERT_TRUE(a.take(taken.size(), taken.data()).is_ok());
          ASSERT_TRUE(b.take(taken.size(), taken.data()).is_ok());
          std::shuffle(taken.begin(), taken.end(), rng);
          if (round % 2 == 0) std::sort(taken.begin(), taken.begin() + 20);  // some runs in order
          std::vector<size_t> ends;
          for (size_t at = 0; at < 30;) {  // free 30 of the 40 in runs of 1..7
            at = std::min<size_t>(30, at + 1 + rng() % 7);
            ends.push_back(at);
          }
          if (group) {
            ASSERT_TRUE(a.group_begin().is_ok());
            ASSERT_TRUE(b.group_begin().is_ok());
          }
          for (size_t r = 0, from = 0; r < ends.size(); from = ends[r++]) {
            ASSERT_TRUE(a.give_back(taken.data() + from, ends[r] - from, order == GiveBackOrder::kPrependSorted).is_ok());
          }
          ASSERT_TRUE(b.give_back_runs(taken.data(), ends.data(), ends.size(), order == GiveBackOrder::kPrependSorted).is_ok());
          if (group) {
            ASSERT_TRUE(a.group_end().is_ok());
            ASSERT_TRUE(b.group_end().is_ok());
          }
          EXPECT_EQ(picture(b), picture(a));
          std::string report;
          EXPECT_EQ(b.check(&report, 10), 0u) << report;
        }
      }
    }
  }
}

// Without a backup give_back_runs places all runs as one block; with one it goes run by
// run (every write recorded). Both must leave the same state, repeats collapsed included.
TEST(IdAllocatorRuns, BlockPlacementEqualsRunByRun) {
  std::mt19937_64 rng(23);
  for (GiveBackOrder order : {GiveBackOrder::kAppend, GiveBackOrder::kPrependSorted}) {
    for (bool need_sort : {false, true}) {
      for (int group = 0; group < 2; ++group) {
        for (int round = 0; round < 40; ++round) {
          IdAllocator a(64, order, need_sort, "page"), b(64, order, need_sort, "page");
          Ids taken(40);
          ASSERT_TRUE(a.take(taken.size(), taken.data()).is_ok());
          ASSERT_TRUE(b.take(taken.size(), taken.data()).is_ok());
          std::shuffle(taken.begin(), taken.end(), rng);
          Ids ids(taken.begin(), taken.begin() + 30);
          for (int k = 0; k < 6; ++k) ids.insert(ids.begin() + static_cast<long>(rng() % ids.size()), ids[rng() % ids.size()]);
          if (round % 3 == 0) std::sort(ids.begin(), ids.begin() + 15);
          std::vector<size_t> ends;
          for (size_t at = 0; at < ids.size();) {
            at = std::min(ids.size(), at + 1 + rng() % 7);
            ends.push_back(at);
          }
          if (group) {
            ASSERT_TRUE(a.group_begin().is_ok());
            ASSERT_TRUE(b.group_begin().is_ok());
          }
          a.backup();  // a: run by run, recorded
          ASSERT_TRUE(a.give_back_runs(ids.data(), ends.data(), ends.size(), true).is_ok());
          ASSERT_TRUE(b.give_back_runs(ids.data(), ends.data(), ends.size(), true).is_ok());
          if (group) {
            ASSERT_TRUE(a.group_end().is_ok());
            ASSERT_TRUE(b.group_end().is_ok());
          }
          EXPECT_EQ(picture(b), picture(a));
          std::string report;
          EXPECT_EQ(b.check(&report, 10), 0u) << report;
        }
      }
    }
  }
}

// Runs that are blocks of consecutive ids (a leaf's slots at page 1) take a block path
// (give_back_ranges); it must leave the state of one give_back per run, and bad batches
// (a block overlapping another, an id not held, out of range) must fail as before.
TEST(IdAllocatorRuns, ConsecutiveBlocksSameAsOneGiveBackPerRun) {
  std::mt19937_64 rng(41);
  for (GiveBackOrder order : {GiveBackOrder::kAppend, GiveBackOrder::kPrependSorted}) {
    for (bool need_sort : {false, true}) {
      for (int group = 0; group < 2; ++group) {
        for (int round = 0; round < 60; ++round) {
          const int64_t N = 400;
          IdAllocator a(N, order, need_sort, "slot"), b(N, order, need_sort, "slot");
          Ids taken(300);
          ASSERT_TRUE(a.take(taken.size(), taken.data()).is_ok());
          ASSERT_TRUE(b.take(taken.size(), taken.data()).is_ok());  // 1..300 held
          // Blocks of 8..40 consecutive ids from disjoint places, in random order.
          std::vector<int64_t> starts;
          for (int64_t s = 1; s + 40 <= 300; s += 41) starts.push_back(s);
          std::shuffle(starts.begin(), starts.end(), rng);
          Ids ids;
          std::vector<size_t> ends;
          for (size_t k = 0; k < 1 + rng() % starts.size(); ++k) {
            const int64_t len = 8 + static_cast<int64_t>(rng() % 33);
            for (int64_t j = 0; j < len; ++j) ids.push_back(starts[k] + j);
            ends.push_back(ids.size());
          }
          const int fault = static_cast<int>(rng() % 6);  // 0..2: a bad batch
          if (fault == 0) ids[rng() % ids.size()] = 300 + 1 + static_cast<int64_t>(rng() % 100);  // not held
          if (fault == 1) ids[rng() % ids.size()] = N + 1 + static_cast<int64_t>(rng() % 5);      // out of range
          if (fault == 2 && ends.size() > 1) {  // the last block overlaps the first
            const size_t from = ends[ends.size() - 2];
            const int64_t shift = ids[0] + 3 - ids[from];
            for (size_t i = from; i < ids.size(); ++i) ids[i] += shift;
          }
          if (group) {
            ASSERT_TRUE(a.group_begin().is_ok());
            ASSERT_TRUE(b.group_begin().is_ok());
          }
          const std::string before = picture(b);
          bool ranges = false;
          const kvp::Status got = b.give_back_runs(ids.data(), ends.data(), ends.size(), false, &ranges);
          // The reference: one check of the whole batch (the first offender's message), then a give_back per run.
          kvp::Status want = a.check_give_back(ids.data(), ids.size(), false);
          for (size_t r = 0, from = 0; want.is_ok() && r < ends.size(); from = ends[r++]) {
            want = a.give_back(ids.data() + from, ends[r] - from, false);
          }
          ASSERT_EQ(got.is_ok(), want.is_ok()) << "round " << round << " fault " << fault;
          ASSERT_EQ(got.message(), want.message());
          if (got.is_ok()) {
            EXPECT_TRUE(ranges);
          } else {
            EXPECT_EQ(picture(b), before);
          }
          if (group) {
            ASSERT_TRUE(a.group_end().is_ok());
            ASSERT_TRUE(b.group_end().is_ok());
          }
          EXPECT_EQ(picture(b), picture(a));
          std::string report;
          EXPECT_EQ(b.check(&report, 10), 0u) << report;
        }
      }
    }
  }
}

TEST(IdAllocatorRuns, RestoreUndoesABatch) {
  IdAllocator a(32, GiveBackOrder::kPrependSorted, false, "page");
  Ids taken(20);
  ASSERT_TRUE(a.take(taken.size(), taken.data()).is_ok());
  const std::string before = picture(a);
  a.backup();
  const Ids ids{9, 3, 4, 17, 12, 5};
  const std::vector<size_t> ends{2, 3, 6};
  ASSERT_TRUE(a.give_back_runs(ids.data(), ends.data(), ends.size(), true).is_ok());
  EXPECT_NE(picture(a), before);
  a.restore();
  EXPECT_EQ(picture(a), before);
}

TEST(IdAllocatorRuns, BadBatchesChangeNothing) {
  IdAllocator a(16, GiveBackOrder::kAppend, false, "slot");
  Ids taken(8);
  ASSERT_TRUE(a.take(taken.size(), taken.data()).is_ok());  // 1..8
  const std::string before = picture(a);
  const Ids not_held{1, 2, 12};
  const std::vector<size_t> one{3};
  EXPECT_FALSE(a.give_back_runs(not_held.data(), one.data(), 1, false).is_ok());
  EXPECT_EQ(picture(a), before);
  const Ids repeated{1, 2, 3, 2};
  const std::vector<size_t> two{2, 4};
  const kvp::Status st = a.give_back_runs(repeated.data(), two.data(), 2, false);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("listed twice"), std::string::npos) << st.message();
  EXPECT_EQ(picture(a), before);
  ASSERT_TRUE(a.give_back_runs(repeated.data(), two.data(), 2, true).is_ok());  // collapsed
  EXPECT_EQ(a.held(), 5u);
}

TEST(RingBlocks, RangesEqualSinglePushesAcrossTheWrap) {
  for (size_t head_shift = 0; head_shift < 9; ++head_shift) {
    UndoLog log;
    Ring a(9, &log, UndoLog::Target::kFreeRing), b(9, &log, UndoLog::Target::kFreeRing);
    for (int64_t i = 0; i < 3; ++i) {
      a.push_back(100 + i);
      b.push_back(100 + i);
    }
    a.pop_front(0);
    for (size_t k = 0; k < head_shift; ++k) {  // rotate both rings
      const int64_t v = a.at(0);
      a.pop_front(1);
      a.push_back(v);
      b.pop_front(1);
      b.push_back(v);
    }
    const Ids front{1, 2, 3}, back{7, 8};
    for (auto it = front.rbegin(); it != front.rend(); ++it) a.push_front(*it);
    b.push_front_range(front.data(), front.size());
    for (int64_t v : back) a.push_back(v);
    b.push_back_range(back.data(), back.size());
    EXPECT_EQ(a.to_vector(), b.to_vector()) << "shift " << head_shift;
  }
}

}  // namespace
