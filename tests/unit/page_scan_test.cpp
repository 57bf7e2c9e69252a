// PagedAllocator::slots_to_pages (and its whole-page scan, AVX2 where the CPU has it)
// against a slot-by-slot reference: the same pages and the same first error.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "alloc/paged_allocator.hpp"

namespace kvp::alloc {
namespace {

// The definition: every slot checked alone, consecutive repeats of a page collapsed.
Status reference(const int64_t* slots, size_t n, int64_t P, int64_t limit, std::vector<int64_t>* pages) {
  pages->clear();
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = slots[i];
    if (s < 0 || s >= limit) {
      return Status::invalid("slot " + std::to_string(s) + " is out of range [" + std::to_string(P) + ", " +
                             std::to_string(limit) + ")");
    }
    if (s < P) return Status::invalid("slot " + std::to_string(s) + " lies in the reserved page 0");
    if (pages->empty() || pages->back() != s / P) pages->push_back(s / P);
  }
  return Status::ok();
}

TEST(PageScan, MatchesSlotBySlotReference) {
  std::mt19937_64 rng(7);
  for (int64_t P : {1, 2, 3, 4, 8, 16, 64}) {
    const int64_t num_pages = 200;
    PagedAllocator a(num_pages, P, false);
    const int64_t limit = a.slot_limit();
    for (int round = 0; round < 300; ++round) {
      std::vector<int64_t> slots;
      const int pages = static_cast<int>(rng() % 12);
      for (int p = 0; p < pages; ++p) {
        const int64_t page = 1 + static_cast<int64_t>(rng() % num_pages);
        const int64_t take = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % P) : P;  // sometimes a partial page
        for (int64_t j = 0; j < take; ++j) slots.push_back(page * P + j);
      }
      // Perturb: a slot out of range, negative, in page 0, in another page, or shuffled within a page.
      if (!slots.empty() && rng() % 2 == 0) {
        const size_t at = rng() % slots.size();
        switch (rng() % 5) {
          case 0: slots[at] = limit + static_cast<int64_t>(rng() % 5); break;
          case 1: slots[at] = -1 - static_cast<int64_t>(rng() % 5); break;
          case 2: slots[at] = static_cast<int64_t>(rng() % P); break;
          case 3: slots[at] = P * (1 + static_cast<int64_t>(rng() % num_pages)) + static_cast<int64_t>(rng() % P); break;
          default: std::shuffle(slots.begin() + static_cast<long>(at - at % P),
                                slots.begin() + static_cast<long>(std::min(slots.size(), at - at % P + P)), rng);
        }
      }
      std::vector<int64_t> got, want;
      const Status g = a.slots_to_pages(slots.data(), slots.size(), &got);
      const Status w = reference(slots.data(), slots.size(), P, limit, &want);
      ASSERT_EQ(g.is_ok(), w.is_ok()) << "page_size " << P << " round " << round;
      if (w.is_ok()) {
        ASSERT_EQ(got, want) << "page_size " << P << " round " << round;
      } else {
        ASSERT_EQ(g.message(), w.message()) << "page_size " << P << " round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace kvp::alloc
