// The fast path of PagedAllocator::slots_to_pages: runs of page_size slots that all
// lie in one page, recognised a page at a time. Split out because freeing a large
// batch is dominated by this scan (every slot must be read: any may be out of range
// or belong to another page), and it has an AVX2 variant chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvp::alloc {

// The pages of a free, in slot order with consecutive repeats collapsed, and what a
// give-back would check of them, learnt while they are written: the scan is bound by
// reading the slots, so the owned-bit reads and the order test hide behind it and the
// usual free needs no second pass over its pages.
struct PageList {
  int64_t* out = nullptr;          // room for every page noted
  const uint8_t* owned = nullptr;  // the allocator's owned byte per page (index = page)
  size_t count = 0;
  int64_t last = 0;        // the last page noted; 0 (no page) before the first
  bool all_owned = true;   // owned[p] != 0 for every page noted
  bool ascending = true;   // the pages noted are strictly ascending

  // Branch-free: the page is always stored and counted only if it is not a repeat.
  void note(int64_t p) {
    out[count] = p;
    all_owned &= owned[p] != 0;
    ascending &= p >= last;  // p == last is a repeat, collapsed
    count += p != last ? 1 : 0;
    last = p;
  }
};

// From slots[i], while the next `page` slots (a power of two >= 2) all lie in one
// page of [page, limit) (limit a multiple of page), notes that page and steps over
// them. Returns where it stopped: the caller takes slots[i] alone and calls again.
// list->out needs room for (n - i) / page more pages.
size_t scan_whole_pages(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit, PageList* list);
// The same without AVX2 (what scan_whole_pages runs on other CPUs; tests compare the two).
size_t scan_whole_pages_portable(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit,
                                 PageList* list);

}  // namespace kvp::alloc
