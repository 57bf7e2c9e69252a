// The KV slot allocator for page_size >= 1 (SGLang's TokenToKVPoolAllocator
// when page_size is 1, PagedTokenToKVPoolAllocator otherwise). Pages 1..N are
// managed by an IdAllocator; slots are `page * page_size + offset`.
//
// alloc_extend / alloc_decode follow SGLANG_SEMANTICS §2 exactly; the page
// need is computed on the host and checked before anything changes.
#pragma once

#include <cstdint>
#include <vector>

#include "alloc/id_allocator.hpp"
#include "alloc/page_scan.hpp"
#include "util/status.hpp"

namespace kvp::alloc {

struct ExtendRequest {
  const int64_t* prefix_lens;
  const int64_t* seq_lens;
  const int64_t* last_locs;
  size_t batch;
};

class PagedAllocator {
 public:
  PagedAllocator(int64_t num_pages, int64_t page_size, bool need_sort);

  int64_t page_size() const { return page_size_; }
  // A nonnegative position's offset in its page: a mask when the page size is a power of
  // two, not a 64-bit division (a decode step takes a few per request, which were a
  // quarter of a large step).
  int64_t in_page(int64_t position) const {
    return page_mask_ >= 0 ? (position & page_mask_) : position % page_size_;
  }
  // Whole pages holding `tokens` (>= 0): a shift when the page size is a power of two (a
  // 64-bit division per request and length was most of a large extend's host checks); no
  // overflow of (tokens + page - 1) near INT64_MAX.
  int64_t pages_of(int64_t tokens) const {
    if (page_mask_ >= 0) return (tokens >> page_shift_) + ((tokens & page_mask_) != 0 ? 1 : 0);
    return tokens / page_size_ + (tokens % page_size_ != 0 ? 1 : 0);
  }
  int64_t num_pages() const { return pages_.num_ids(); }
  // Slots 0 .. slot_limit()-1 exist in the buffers (page 0 included).
  int64_t slot_limit() const { return (num_pages() + 1) * page_size_; }
  size_t available_tokens() const { return pages_.available() * static_cast<size_t>(page_size_); }
  IdAllocator& pages() { return pages_; }
  const IdAllocator& pages() const { return pages_; }

  Status alloc(size_t num_slots, int64_t* out);
  Status free(const int64_t* slots, size_t n);
  // free() of slots the caller knows to be whole pages, each page's slots consecutive from
  // its first (n a multiple of the page size): the same checks, result and free-list order,
  // reading one slot per page (kvseq_extend frees the duplicates of pages it just allocated).
  Status free_whole_pages(const int64_t* slots, size_t n);
  // Sizes the scratch of free() for every page at once, so that freeing never
  // allocates (the prefix tree frees leaf after leaf while it evicts).
  void reserve_scratch() {
    pages_.reserve_scratch();
    scratch_pages_.reserve(static_cast<size_t>(num_pages()));
  }
  // Number of new slots an extend batch needs (validated inputs).
  Status check_extend(const ExtendRequest& r, size_t out_len, size_t* pages_needed) const;
  Status extend(const ExtendRequest& r, int64_t* out, size_t out_len);
  Status decode(const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t* out);
  // decode() for kvseq, whose inputs come from its own requests and need none of decode()'s
  // checks: next[i] is the slot after request i's last one, or -1 where its new token starts
  // a page, which `new_pages` of them do. The same slots, free-list use, undo and
  // OUT_OF_MEMORY as decode() of those requests' lengths and last slots.
  Status decode_next(const int64_t* next, size_t batch, size_t new_pages, int64_t* out);
  // decode_next() in two halves, for kvseq_decode's one pass over its batch, when the free
  // list proper holds a page for every request: then decode_next() of any page count would
  // neither run short nor merge deferred frees. The pages a decode of `batch` requests
  // takes, in order (valid until the free list changes), or NULL when the list holds fewer
  // than `batch` (the caller takes decode_next()).
  const int64_t* decode_pages(size_t batch) {
    if (pages_.free_count() < batch) return nullptr;
    pages_.prepare(batch, false);  // reserves the undo log for any count up to batch: take_decode_pages cannot throw
    return pages_.front(batch, &decode_scratch_);
  }
  // Takes the first `new_pages` of decode_pages()'s pages, as decode_next() would have
  // (undo_last_allocation() gives them back).
  void take_decode_pages(size_t new_pages) {
    pages_.consume(new_pages);
    last_taken_ = new_pages;
  }
  // Undoes the last successful extend or decode, which nothing may have followed: its
  // pages return to the free list exactly as they were (kvseq, when writing the request
  // table fails on the device afterwards).
  void undo_last_allocation() {
    pages_.untake(last_taken_);
    last_taken_ = 0;
  }

  // Converts slots to pages after checking slot ranges (paged frees).
  Status slots_to_pages(const int64_t* slots, size_t n, std::vector<int64_t>* pages) const;

 private:
  // decode()'s OUT_OF_MEMORY when `needed` new pages are more than the free ones.
  Status decode_short(size_t needed) const;
  // Gives back the pages free() collected into scratch_pages_ (page_size > 1: the free
  // list keeps them sorted), as give_back() with repeats collapsed would.
  Status give_back_collected(PageList* list);
  // slots_to_pages into list->out, which lives in *room (grown as needed, never shrunk).
  Status collect_pages(const int64_t* slots, size_t n, std::vector<int64_t>* room, PageList* list) const;

  IdAllocator pages_;
  int64_t page_size_;
  // page_size - 1 when the page size is a power of two, else -1 (see in_page()).
  int64_t page_mask_;
  int page_shift_;  // log2(page_size) when page_mask_ >= 0
  std::vector<int64_t> scratch_pages_;
  std::vector<int64_t> decode_scratch_;  // decode_pages() when the free pages wrap around the ring's end
  size_t last_taken_ = 0;  // pages the last extend/decode took (undo_last_allocation)
};

}  // namespace kvp::alloc
