#include "alloc/paged_allocator.hpp"

#include <algorithm>
#include <string>

#include "alloc/page_scan.hpp"
#include "util/consecutive.hpp"

namespace kvp::alloc {
namespace {

std::string at(size_t i) { return "request " + std::to_string(i) + ": "; }

}  // namespace

PagedAllocator::PagedAllocator(int64_t num_pages, int64_t page_size, bool need_sort)
    : pages_(num_pages, page_size == 1 ? GiveBackOrder::kAppend : GiveBackOrder::kPrependSorted, need_sort,
             page_size == 1 ? "slot" : "page"),
      page_size_(page_size),
      page_mask_(page_size > 0 && (page_size & (page_size - 1)) == 0 ? page_size - 1 : -1),
      page_shift_(page_mask_ >= 0 ? __builtin_ctzll(static_cast<unsigned long long>(page_size)) : 0) {}

Status PagedAllocator::alloc(size_t num_slots, int64_t* out) {
  const size_t page = static_cast<size_t>(page_size_);
  if (num_slots % page != 0) {
    return Status::invalid("allocation of " + std::to_string(num_slots) + " slots is not a multiple of page_size " +
                           std::to_string(page_size_));
  }
  const size_t n_pages = num_slots / page;
  if (!pages_.can_take(n_pages)) {
    return Status::out_of_memory("need " + std::to_string(num_slots) + " slots, " +
                                 std::to_string(available_tokens()) + " available");
  }
  pages_.prepare(n_pages, false);
  for (size_t p = 0; p < n_pages; ++p) {
    const int64_t base = pages_.peek(p) * page_size_;
    for (size_t j = 0; j < page; ++j) out[p * page + j] = base + static_cast<int64_t>(j);
  }
  pages_.consume(n_pages);
  return Status::ok();
}

Status PagedAllocator::collect_pages(const int64_t* slots, size_t n, std::vector<int64_t>* room, PageList* list) const {
  // Slots of one page usually come together: keep one entry per run, so the
  // ownership check sorts pages, not slots. `room` only grows (its zero fill is paid
  // once), and list->out moves with it.
  auto make_room = [&](size_t more) {
    if (room->size() < list->count + more) room->resize(list->count + more);
    list->out = room->data();
  };
  const int64_t P = page_size_;
  const bool pow2 = (P & (P - 1)) == 0;
  size_t i = 0;
  while (i < n) {
    if (pow2 && P > 1) {
      make_room((n - i) / static_cast<size_t>(P));
      i = scan_whole_pages(slots, i, n, P, slot_limit(), list);  // whole pages, as long as they come
      if (i == n) break;
    }
    const int64_t s = slots[i];
    if (s < 0 || s >= slot_limit()) {
      return Status::invalid("slot " + std::to_string(s) + " is out of range [" + std::to_string(page_size_) + ", " +
                             std::to_string(slot_limit()) + ")");
    }
    if (s < page_size_) return Status::invalid("slot " + std::to_string(s) + " lies in the reserved page 0");
    make_room(1);
    list->note(s / page_size_);
    // The rest of a partial page (a request's last page) in one go, not a scan call per
    // slot: valid slots of the page just noted, which would only be collapsed into it.
    const int64_t first = list->last * P, end = first + P;
    for (++i; i < n && slots[i] >= first && slots[i] < end; ++i) {
    }
  }
  return Status::ok();
}

Status PagedAllocator::slots_to_pages(const int64_t* slots, size_t n, std::vector<int64_t>* pages) const {
  PageList list;
  list.owned = pages_.owned_bits();
  pages->clear();
  const Status st = collect_pages(slots, n, pages, &list);
  pages->resize(st.is_ok() ? list.count : 0);
  return st;
}

Status PagedAllocator::free(const int64_t* slots, size_t n) {
  if (n == 0) return Status::ok();
  if (page_size_ == 1) return pages_.give_back(slots, n, false);
  PageList list;
  list.owned = pages_.owned_bits();
  KVPOOL_RETURN_IF_ERROR(collect_pages(slots, n, &scratch_pages_, &list));
  return give_back_collected(&list);
}

Status PagedAllocator::give_back_collected(PageList* list) {
  // Held pages were checked while they were collected: only their order is left. The
  // free list takes them ascending, repeats collapsed (a page freed once), which is what
  // give_back() would make of them, without its second ownership pass and copy (the
  // duplicates kvseq_extend frees are pages in free-list order, rarely ascending).
  // Anything else goes through give_back's check, which words the error.
  if (!list->all_owned) return pages_.give_back(scratch_pages_.data(), list->count, true);
  size_t count = list->count;
  if (!list->ascending) {
    int64_t* pages = scratch_pages_.data();
    std::sort(pages, pages + count);
    count = static_cast<size_t>(std::unique(pages, pages + count) - pages);
  }
  return pages_.give_back_held(scratch_pages_.data(), count);
}

Status PagedAllocator::free_whole_pages(const int64_t* slots, size_t n) {
  const size_t P = static_cast<size_t>(page_size_);
  if (n == 0 || P == 1 || n % P != 0) return free(slots, n);
  PageList list;
  list.owned = pages_.owned_bits();
  if (scratch_pages_.size() < n / P) scratch_pages_.resize(n / P);  // sized for every page at creation
  list.out = scratch_pages_.data();
  for (size_t i = 0; i < n; i += P) {
    const int64_t s = slots[i];
    // What collect_pages() would reject (or collapse differently): let free() say so.
    if (s < page_size_ || s >= slot_limit() || in_page(s) != 0) return free(slots, n);
    list.note(s / page_size_);
  }
  return give_back_collected(&list);
}

Status PagedAllocator::check_extend(const ExtendRequest& r, size_t out_len, size_t* pages_needed) const {
  const int64_t P = page_size_;
  uint64_t total = 0, needed = 0;
  for (size_t i = 0; i < r.batch; ++i) {
    const int64_t pre = r.prefix_lens[i], seq = r.seq_lens[i], last = r.last_locs[i];
    if (pre < 0) return Status::invalid(at(i) + "prefix length " + std::to_string(pre) + " is negative");
    if (seq < pre) {
      return Status::invalid(at(i) + "sequence length " + std::to_string(seq) + " is below its prefix length " +
                             std::to_string(pre));
    }
    // Lengths beyond the pool are out of memory (below), but rounding one this close to INT64_MAX
    // up to whole pages would overflow: no page count can describe it.
    if (seq > INT64_MAX - (P - 1)) {
      return Status::invalid(at(i) + "sequence length " + std::to_string(seq) +
                             " is too large to round up to whole pages of " + std::to_string(P));
    }
    if (pre == 0 && last != -1) {
      return Status::invalid(at(i) + "last_loc is " + std::to_string(last) + " for an empty prefix, expected -1");
    }
    if (pre > 0 && (last < 0 || last >= slot_limit())) {
      return Status::invalid(at(i) + "last_loc " + std::to_string(last) + " is out of range [0, " +
                             std::to_string(slot_limit()) + ")");
    }
    if (P > 1 && in_page(last + 1) != in_page(pre)) {  // both >= 0 here
      return Status::invalid(at(i) + "last_loc " + std::to_string(last) + " does not end a prefix of " +
                             std::to_string(pre) + " tokens: (last_loc + 1) % page_size must equal prefix % page_size");
    }
    total += static_cast<uint64_t>(seq - pre);
    needed += static_cast<uint64_t>(pages_of(seq) - pages_of(pre));
  }
  if (total != out_len) {
    return Status::invalid("output holds " + std::to_string(out_len) + " slots, the batch extends by " +
                           std::to_string(total));
  }
  *pages_needed = static_cast<size_t>(needed);
  return Status::ok();
}

Status PagedAllocator::extend(const ExtendRequest& r, int64_t* out, size_t out_len) {
  size_t needed = 0;
  KVPOOL_RETURN_IF_ERROR(check_extend(r, out_len, &needed));
  const int64_t P = page_size_;
  if (!pages_.can_take(needed)) {
    return Status::out_of_memory("extend needs " + std::to_string(needed * static_cast<size_t>(P)) + " slots (" +
                                 std::to_string(needed) + " pages), " + std::to_string(available_tokens()) +
                                 " available");
  }
  // SGLang merges deferred frees when this upper bound on the need exceeds the free list.
  pages_.prepare(needed, out_len / static_cast<size_t>(P) + r.batch + 1 > pages_.free_count());
  size_t o = 0, next_page = 0;  // next_page = exclusive prefix sum of new pages
  for (size_t i = 0; i < r.batch; ++i) {
    const int64_t pre = r.prefix_lens[i], seq = r.seq_lens[i];
    const int64_t pre_end = pages_of(pre) * P;  // end of the prefix's last page
    const int64_t full_end = seq / P * P;            // end of the last whole page
    // Part 1: continue the prefix's partial page.
    const int64_t part1_end = seq < pre_end ? seq : pre_end;
    if (part1_end > pre) {
      fill_consecutive(out + o, r.last_locs[i] + 1, part1_end - pre);
      o += static_cast<size_t>(part1_end - pre);
    }
    // Part 2: whole new pages.
    for (int64_t start = pre_end; start < full_end; start += P) {
      fill_consecutive(out + o, pages_.peek(next_page++) * P, P);
      o += static_cast<size_t>(P);
    }
    // Part 3: a new trailing partial page.
    if (seq % P != 0 && full_end >= pre_end) {
      fill_consecutive(out + o, pages_.peek(next_page++) * P, seq - full_end);
      o += static_cast<size_t>(seq - full_end);
    }
  }
  pages_.consume(needed);
  last_taken_ = needed;
  return Status::ok();
}

Status PagedAllocator::decode(const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t* out) {
  const int64_t P = page_size_;
  size_t needed = 0;
  for (size_t i = 0; i < batch; ++i) {
    const int64_t seq = seq_lens[i], last = last_locs[i];
    if (seq < 1) return Status::invalid(at(i) + "sequence length " + std::to_string(seq) + " is below 1");
    if (seq == 1 && last != -1) {
      return Status::invalid(at(i) + "last_loc is " + std::to_string(last) + " for a first token, expected -1");
    }
    if (seq > 1 && (last < 0 || last >= slot_limit())) {
      return Status::invalid(at(i) + "last_loc " + std::to_string(last) + " is out of range [0, " +
                             std::to_string(slot_limit()) + ")");
    }
    // Both positions are >= 1 here (seq >= 1, last >= -1).
    const int64_t seq_in_page = in_page(seq);
    if (P > 1 && in_page(last + 2) != seq_in_page) {
      return Status::invalid(at(i) + "last_loc " + std::to_string(last) + " is not the slot of token " +
                             std::to_string(seq - 2) + ": (last_loc + 2) % page_size must equal seq % page_size");
    }
    if (P == 1 || seq_in_page == 1) ++needed;
  }
  if (!pages_.can_take(needed)) return decode_short(needed);
  pages_.prepare(needed, batch > pages_.free_count());
  size_t next_page = 0;
  for (size_t i = 0; i < batch; ++i) {
    const bool new_page = P == 1 || in_page(seq_lens[i]) == 1;
    out[i] = new_page ? pages_.peek(next_page++) * P : last_locs[i] + 1;
  }
  pages_.consume(needed);
  last_taken_ = needed;
  return Status::ok();
}

Status PagedAllocator::decode_next(const int64_t* next, size_t batch, size_t new_pages, int64_t* out) {
  if (!pages_.can_take(new_pages)) return decode_short(new_pages);
  pages_.prepare(new_pages, batch > pages_.free_count());
  const int64_t P = page_size_;
  size_t next_page = 0;
  for (size_t i = 0; i < batch; ++i) out[i] = next[i] >= 0 ? next[i] : pages_.peek(next_page++) * P;
  // A miscount by the caller would hand out pages it does not take: refuse before taking any.
  if (next_page != new_pages) {
    return Status::internal("decode of " + std::to_string(batch) + " requests starts " + std::to_string(next_page) +
                            " pages, not the " + std::to_string(new_pages) + " counted");
  }
  pages_.consume(new_pages);
  last_taken_ = new_pages;
  return Status::ok();
}

Status PagedAllocator::decode_short(size_t needed) const {
  return Status::out_of_memory("decode needs " + std::to_string(needed) + " new pages, " +
                               std::to_string(pages_.available()) + " available");
}

}  // namespace kvp::alloc
