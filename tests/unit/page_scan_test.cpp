// PagedAllocator::slots_to_pages (and its whole-page scan, AVX2 where the CPU has it)
// against a slot-by-slot reference: the same pages and the same first error; the
// AVX2 scan against the portable one; and PagedAllocator::free, which checks the
// pages while it collects them, against slots_to_pages + IdAllocator::give_back.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "alloc/page_scan.hpp"
#include "alloc/paged_allocator.hpp"
#include "id_allocator_picture.hpp"

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

// Slots of random pages of [1, num_pages]: whole pages mostly, sometimes a partial one,
// sometimes perturbed (out of range, negative, page 0, another page's slot, shuffled).
std::vector<int64_t> random_slots(std::mt19937_64& rng, int64_t P, int64_t num_pages, int max_pages) {
  const int64_t limit = (num_pages + 1) * P;
  std::vector<int64_t> slots;
  const int pages = static_cast<int>(rng() % static_cast<uint64_t>(max_pages + 1));
  for (int p = 0; p < pages; ++p) {
    const int64_t page = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(num_pages));
    const int64_t take = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(P)) : P;
    for (int64_t j = 0; j < take; ++j) slots.push_back(page * P + j);
  }
  if (!slots.empty() && rng() % 2 == 0) {
    const size_t at = rng() % slots.size();
    switch (rng() % 5) {
      case 0: slots[at] = limit + static_cast<int64_t>(rng() % 5); break;
      case 1: slots[at] = -1 - static_cast<int64_t>(rng() % 5); break;
      case 2: slots[at] = static_cast<int64_t>(rng() % static_cast<uint64_t>(P)); break;
      case 3: slots[at] = P * (1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(num_pages))) + static_cast<int64_t>(rng() % static_cast<uint64_t>(P)); break;
      default: std::shuffle(slots.begin() + static_cast<long>(at - at % static_cast<size_t>(P)),
                            slots.begin() + static_cast<long>(std::min(slots.size(), at - at % static_cast<size_t>(P) + static_cast<size_t>(P))), rng);
    }
  }
  return slots;
}

TEST(PageScan, Avx2AndPortableAgree) {
  std::mt19937_64 rng(19);
  for (int64_t P : {4, 8, 16, 32, 64}) {
    const int64_t num_pages = 300;
    std::vector<uint8_t> owned(static_cast<size_t>(num_pages) + 1, 0);
    for (size_t p = 1; p < owned.size(); ++p) owned[p] = rng() % 8 != 0 ? 1 : 0;
    for (int round = 0; round < 300; ++round) {
      const std::vector<int64_t> slots = random_slots(rng, P, num_pages, 12);
      const size_t start = slots.empty() ? 0 : rng() % slots.size();
      std::vector<int64_t> out_a(slots.size() + 1), out_b(slots.size() + 1);
      PageList a, b;
      a.owned = b.owned = owned.data();
      a.out = out_a.data();
      b.out = out_b.data();
      a.last = b.last = rng() % 2 == 0 ? 0 : 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(num_pages));
      const int64_t limit = (num_pages + 1) * P;
      const size_t ia = scan_whole_pages(slots.data(), start, slots.size(), P, limit, &a);
      const size_t ib = scan_whole_pages_portable(slots.data(), start, slots.size(), P, limit, &b);
      ASSERT_EQ(ia, ib) << "page_size " << P << " round " << round;
      ASSERT_EQ(a.count, b.count);
      ASSERT_EQ(a.last, b.last);
      ASSERT_EQ(a.all_owned, b.all_owned);
      ASSERT_EQ(a.ascending, b.ascending);
      ASSERT_TRUE(std::equal(out_a.begin(), out_a.begin() + static_cast<long>(a.count), out_b.begin()));
    }
  }
}

using kvtest::picture;

// PagedAllocator::free gives back strictly ascending held pages without a second check;
// everything else (repeats, pages out of order, pages not held, bad slots) must end as
// the general path does: the same status, message and state.
TEST(PagedFree, FusedCheckMatchesGiveBack) {
  std::mt19937_64 rng(31);
  for (int64_t P : {2, 3, 4, 16, 64}) {
    for (bool need_sort : {false, true}) {
      for (int mode = 0; mode < 3; ++mode) {  // 0: plain, 1: inside a free group, 2: with a backup running
        for (int round = 0; round < 150; ++round) {
          const int64_t num_pages = 64;
          PagedAllocator a(num_pages, P, need_sort), b(num_pages, P, need_sort);
          std::vector<int64_t> held(static_cast<size_t>(40 * P));
          ASSERT_TRUE(a.alloc(held.size(), held.data()).is_ok());
          ASSERT_TRUE(b.alloc(held.size(), held.data()).is_ok());
          std::vector<int64_t> slots;
          if (rng() % 2 == 0) {  // whole held pages in ascending order (the fused path), maybe a partial last one
            std::vector<int64_t> pages;
            for (size_t i = 0; i < held.size(); i += static_cast<size_t>(P)) pages.push_back(held[i] / P);
            std::sort(pages.begin(), pages.end());
            for (int64_t page : pages) {
              if (rng() % 3 != 0) continue;
              const int64_t take = rng() % 5 == 0 ? 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(P)) : P;
              for (int64_t j = 0; j < take; ++j) slots.push_back(page * P + j);
            }
            if (!slots.empty() && rng() % 3 == 0) {  // a repeat, a page out of order or a page not held
              const size_t at = rng() % slots.size();
              switch (rng() % 3) {
                case 0: slots.push_back(slots[at]); break;
                case 1: std::swap(slots[at], slots[rng() % slots.size()]); break;
                default: slots[at] = (41 + static_cast<int64_t>(rng() % 20)) * P + slots[at] % P;
              }
            }
          } else {
            slots = random_slots(rng, P, num_pages, 10);
          }
          if (mode == 1) {
            ASSERT_TRUE(a.pages().group_begin().is_ok());
            ASSERT_TRUE(b.pages().group_begin().is_ok());
          }
          if (mode == 2) {
            a.pages().backup();
            b.pages().backup();
          }
          const Status got = a.free(slots.data(), slots.size());
          std::vector<int64_t> pages;
          Status want = b.slots_to_pages(slots.data(), slots.size(), &pages);
          if (want.is_ok()) want = b.pages().give_back(pages.data(), pages.size(), true);
          ASSERT_EQ(got.is_ok(), want.is_ok()) << "page_size " << P << " round " << round;
          ASSERT_EQ(got.message(), want.message());
          if (mode == 1) {
            ASSERT_TRUE(a.pages().group_end().is_ok());
            ASSERT_TRUE(b.pages().group_end().is_ok());
          }
          if (mode == 2) {
            EXPECT_EQ(picture(a.pages()), picture(b.pages()));
            a.pages().restore();
            b.pages().restore();
          }
          ASSERT_EQ(picture(a.pages()), picture(b.pages())) << "page_size " << P << " round " << round;
          std::string report;
          EXPECT_EQ(a.pages().check(&report, 10), 0u) << report;
        }
      }
    }
  }
}

// free_whole_pages() reads one slot per page of slots its caller knows to be whole pages
// in order: on such slots (held or not, ascending or not, repeated pages, a free group
// open) it must end exactly as free() does: the same status, message and free list.
TEST(PagedFree, WholePagesMatchFree) {
  std::mt19937_64 rng(43);
  for (int64_t P : {1, 2, 4, 16, 64}) {
    for (bool need_sort : {false, true}) {
      for (int round = 0; round < 200; ++round) {
        const int64_t num_pages = 64;
        PagedAllocator a(num_pages, P, need_sort), b(num_pages, P, need_sort);
        std::vector<int64_t> held(static_cast<size_t>(40 * P));
        ASSERT_TRUE(a.alloc(held.size(), held.data()).is_ok());
        ASSERT_TRUE(b.alloc(held.size(), held.data()).is_ok());
        std::vector<int64_t> pages;
        for (size_t i = 0; i < held.size(); i += static_cast<size_t>(P)) pages.push_back(held[i] / P);
        if (rng() % 2 == 0) std::sort(pages.begin(), pages.end());
        std::vector<int64_t> chosen;
        for (int64_t page : pages) {
          if (rng() % 3 == 0) chosen.push_back(page);
        }
        if (!chosen.empty() && rng() % 4 == 0) {  // a repeat, or a page not held
          const size_t at = rng() % chosen.size();
          if (rng() % 2 == 0) {
            chosen.insert(chosen.begin() + static_cast<long>(at), chosen[at]);
          } else {
            chosen[at] = 41 + static_cast<int64_t>(rng() % 20);
          }
        }
        std::vector<int64_t> slots;
        for (int64_t page : chosen) {
          for (int64_t j = 0; j < P; ++j) slots.push_back(page * P + j);
        }
        const bool group = rng() % 4 == 0;
        if (group) {
          ASSERT_TRUE(a.pages().group_begin().is_ok());
          ASSERT_TRUE(b.pages().group_begin().is_ok());
        }
        const Status got = a.free_whole_pages(slots.data(), slots.size());
        const Status want = b.free(slots.data(), slots.size());
        ASSERT_EQ(got.is_ok(), want.is_ok()) << "page_size " << P << " round " << round;
        ASSERT_EQ(got.message(), want.message());
        if (group) {
          ASSERT_TRUE(a.pages().group_end().is_ok());
          ASSERT_TRUE(b.pages().group_end().is_ok());
        }
        ASSERT_EQ(picture(a.pages()), picture(b.pages())) << "page_size " << P << " round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace kvp::alloc
