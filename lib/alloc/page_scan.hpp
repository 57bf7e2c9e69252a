// The fast path of PagedAllocator::slots_to_pages: runs of page_size slots that all
// lie in one page, recognised a page at a time. Split out because freeing a large
// batch is dominated by this scan (every slot must be read: any may be out of range
// or belong to another page), and it has an AVX2 variant chosen at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvp::alloc {

// From slots[i], while the next `page` slots (a power of two >= 2) all lie in one
// page of [page, limit) (limit a multiple of page), appends that page to *pages
// unless it equals the last one, and steps over them. Returns where it stopped:
// the caller takes slots[i] alone and calls again. Pages are push_back'ed: reserve
// (n - i) / page more entries first and nothing here allocates.
size_t scan_whole_pages(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit,
                        std::vector<int64_t>* pages);

}  // namespace kvp::alloc
