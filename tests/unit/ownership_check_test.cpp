// Internal test of the self-check on hand-made broken states: the public API
// cannot produce them, so this links the checking code directly.
#include <gtest/gtest.h>

#include "alloc/ownership_check.hpp"
#include "alloc/swa_allocator.hpp"

namespace {

using kvp::alloc::check_ownership;
using kvp::alloc::OwnershipView;

OwnershipView healthy(std::vector<uint8_t>* owned) {
  // ids 1..6: 1 and 2 held, 3 and 4 free, 5 deferred, 6 pending in a group.
  *owned = {0, 1, 1, 0, 0, 0, 0};
  OwnershipView v;
  v.what = "page";
  v.num_ids = 6;
  v.free = {4, 3};
  v.release = {5};
  v.group = {6};
  v.owned = owned;
  v.held_counter = 2;
  return v;
}

std::string check(const OwnershipView& v, size_t* problems) {
  std::string report;
  *problems = check_ownership(v, &report, 100);
  return report;
}

TEST(OwnershipCheck, HealthyStatePasses) {
  std::vector<uint8_t> owned;
  size_t problems = 0;
  EXPECT_EQ(check(healthy(&owned), &problems), "");
  EXPECT_EQ(problems, 0u);
}

TEST(OwnershipCheck, ReportsLeakedIds) {
  std::vector<uint8_t> owned;
  OwnershipView v = healthy(&owned);
  v.free = {4};  // page 3 vanished
  size_t problems = 0;
  const std::string report = check(v, &problems);
  EXPECT_NE(report.find("page 3 leaked: neither held nor free"), std::string::npos) << report;
  EXPECT_NE(report.find("accounting"), std::string::npos) << report;
}

TEST(OwnershipCheck, ReportsDoubleOwnedIds) {
  std::vector<uint8_t> owned;
  OwnershipView v = healthy(&owned);
  v.free = {4, 3, 1};     // page 1 held and free
  v.release = {5, 4};     // page 4 listed twice
  size_t problems = 0;
  const std::string report = check(v, &problems);
  EXPECT_NE(report.find("page 1 is double-owned: held and in the free list"), std::string::npos) << report;
  EXPECT_NE(report.find("page 4 is double-owned: listed again in the release list"), std::string::npos) << report;
}

TEST(OwnershipCheck, ListsGivenInPlaceCountLikeVectors) {
  // The ring form (two contiguous parts, no copy) gives the same verdicts as the vectors.
  std::vector<uint8_t> owned;
  OwnershipView v = healthy(&owned);
  const int64_t part_a[] = {4}, part_b[] = {3}, deferred[] = {5};
  v.free.clear();
  v.release.clear();
  v.free_parts[0] = {part_a, 1};
  v.free_parts[1] = {part_b, 1};
  v.release_parts[0] = {deferred, 1};
  size_t problems = 0;
  EXPECT_EQ(check(v, &problems), "");
  v.free_parts[1] = {};  // page 3 vanished
  const std::string report = check(v, &problems);
  EXPECT_NE(report.find("page 3 leaked: neither held nor free"), std::string::npos) << report;
  EXPECT_NE(report.find("accounting: free 1 + deferred 1"), std::string::npos) << report;
  v.free_parts[1] = {deferred, 1};  // page 5 free and deferred
  EXPECT_NE(check(v, &problems).find("page 5 is double-owned: listed again in the release list"), std::string::npos);
}

TEST(OwnershipCheck, ReportsBadIdsAndCounters) {
  std::vector<uint8_t> owned;
  OwnershipView v = healthy(&owned);
  v.group = {6, 9};
  v.held_counter = 3;
  owned[0] = 1;
  size_t problems = 0;
  const std::string report = check(v, &problems);
  EXPECT_NE(report.find("free-group' holds invalid id 9"), std::string::npos) << report;
  EXPECT_NE(report.find("count mismatch: 2 held by the bitmap, 3 by the counter"), std::string::npos) << report;
  EXPECT_NE(report.find("reserved page 0"), std::string::npos) << report;
  EXPECT_GE(problems, 3u);
}

TEST(OwnershipCheck, SwaMappingProblems) {
  kvp::alloc::SwaAllocator swa(8, 8, false);
  int64_t slots[2];
  ASSERT_TRUE(swa.alloc(2, slots).is_ok());
  std::string report;
  EXPECT_EQ(swa.check(&report, 100), 0u) << report;
  int64_t* mapping = swa.mapping_data();
  mapping[slots[1]] = mapping[slots[0]];  // two slots share one window slot; the other window slot leaks
  mapping[5] = 3;                          // a free slot still mapped
  report.clear();
  EXPECT_GE(swa.check(&report, 100), 3u);
  EXPECT_NE(report.find("is double-owned by slots 1 and 2"), std::string::npos) << report;
  EXPECT_NE(report.find("window slot 2 leaked"), std::string::npos) << report;
  EXPECT_NE(report.find("slot 5 is free but still maps to window slot 3"), std::string::npos) << report;
}

}  // namespace
