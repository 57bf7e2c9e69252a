#include "cache/prefix_cache.hpp"

#include <algorithm>
#include <cstring>

#include "util/consecutive.hpp"

namespace kvp::cache {

PrefixCache::PrefixCache(alloc::PagedAllocator* allocator, EvictionPolicy policy, bool events)
    : allocator_(allocator),
      page_shift_((allocator->page_size() & (allocator->page_size() - 1)) == 0
                      ? __builtin_ctzll(static_cast<unsigned long long>(allocator->page_size()))
                      : -1),
      tree_(allocator->page_size(), policy, events),
      owned_(static_cast<size_t>(allocator->num_pages()) + 1, 0) {
  allocator_->reserve_scratch();  // eviction frees leaf after leaf: none of those frees may fail
  handover_.reserve(static_cast<size_t>(allocator->num_pages()));
}

Status PrefixCache::check_handover(const int64_t* slots, size_t n, size_t in_order_from) const {
  const int64_t P = page_size();
  const size_t step = static_cast<size_t>(P);
  const int64_t limit = allocator_->slot_limit();
  const alloc::IdAllocator& held = allocator_->pages();
  // The usual valid handover in one branch-free pass (an unusable slot reads page 0, which
  // neither the allocator nor the tree ever owns); the first offender's message comes
  // from a second pass only if something is wrong.
  const uint8_t* allocated = held.owned_bits();
  const uint8_t* cached = owned_.data();
  bool good = true;
  bool ascending = true;  // strictly, by page: then no page can repeat (the usual case: fresh pages in order)
  int64_t last = 0;
  if (P == 1) {  // slots are pages: the loop without the in-page part
    for (size_t i = 0; i < n; ++i) {
      const int64_t page = slots[i];
      const size_t at = ((page >= 1) & (page < limit)) ? static_cast<size_t>(page) : 0;
      good &= (allocated[at] != 0) & (cached[at] == 0);
      ascending &= page > last;
      last = page;
    }
  } else {
    for (size_t i = 0; i < n; i += step) {
      const int64_t first = slots[i];
      const bool usable = (first >= P) & (first < limit) & (page_shift_ >= 0 ? (first & (P - 1)) == 0 : first % P == 0);
      // Known pages: one slot read per page (a large extend hands over ~25K pages).
      const bool in_order = i >= in_order_from || is_consecutive(slots + i, P);
      const int64_t page = usable ? page_of(first) : 0;
      good &= in_order & (allocated[page] != 0) & (cached[page] == 0);
      ascending &= page > last;
      last = page;
    }
  }
  for (size_t i = 0; !good && i < n; i += step) {
    const int64_t first = slots[i];
    if (first < P || first >= limit || first % P != 0) {
      return Status::invalid("slot " + std::to_string(first) + " at index " + std::to_string(i) +
                             " does not start a usable page");
    }
    for (int64_t j = 1; j < P; ++j) {
      if (slots[i + static_cast<size_t>(j)] != first + j) {
        return Status::invalid("slots at index " + std::to_string(i) + " do not fill page " + std::to_string(first / P) +
                               " in order");
      }
    }
    const int64_t page = first / P;
    if (!held.owned(page)) return Status::invalid("page " + std::to_string(page) + " is not allocated");
    if (owned_[static_cast<size_t>(page)] != 0) return Status::invalid("page " + std::to_string(page) + " already belongs to the prefix tree");
  }
  if (ascending) return Status::ok();
  // Repeats without sorting: mark each page (0 -> 2, none is the tree's) and look for a
  // second mark; the marks are cleared before returning.
  bool twice = false;
  for (size_t i = 0; i < n; i += step) {
    uint8_t& mark = owned_[static_cast<size_t>(page_of(slots[i]))];
    twice = twice || mark == 2;
    mark = 2;
  }
  for (size_t i = 0; i < n; i += step) owned_[static_cast<size_t>(page_of(slots[i]))] = 0;
  if (twice) return Status::invalid("a page is handed over twice");
  return Status::ok();
}

Status PrefixCache::insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                           int32_t priority, size_t* prefix_len, NodeHandle* node, size_t in_order_from) {
  size_t device = 0;
  const size_t walked = tree_.walk_prefix(tokens, n, extra_key, &device);
  return insert_walked(tokens, n, slots, extra_key, priority, prefix_len, node, in_order_from, walked, device);
}

Status PrefixCache::insert_walked(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                                  int32_t priority, size_t* prefix_len, NodeHandle* node, size_t in_order_from,
                                  size_t walked, size_t device) {
  const size_t P = static_cast<size_t>(page_size());
  if (n % P != 0) {
    return Status::invalid("key length " + std::to_string(n) + " is not a multiple of page_size " + std::to_string(P));
  }
  // The tree takes the slots past its device part (host-only nodes on the path adopt theirs).
  const size_t prefix = device;
  if (host_ != nullptr && pending_.size() == pending_.capacity()) pending_.reserve(2 * pending_.capacity());
  KVPOOL_RETURN_IF_ERROR(check_handover(slots + prefix, n - prefix, in_order_from > prefix ? in_order_from - prefix : 0));
  NodeHandle last = 0;
  // A passed check_handover() found slots[prefix, n) (walked >= prefix) whole pages in order.
  KVPOOL_RETURN_IF_ERROR(tree_.insert(tokens, n, slots, extra_key, priority, prefix_len, &last, walked, true));
  if (node != nullptr) *node = last;
  uint8_t* owned = owned_.data();  // a local: byte stores could alias the vector's pointer
  for (size_t i = *prefix_len; i < n; i += P) owned[static_cast<size_t>(page_of(slots[i]))] = 1;
  if (host_ != nullptr) back_up_path(last);  // never fails the insert: a copy not made is counted
  return Status::ok();
}

void PrefixCache::clear_marks(const int64_t* pages, const size_t* ends, size_t runs, bool ranges) {
  uint8_t* owned = owned_.data();  // a local: byte stores could alias the vector's pointer
  if (ranges) {  // every run a block of consecutive pages (a node's pages, allocated together)
    for (size_t r = 0, from = 0; r < runs; from = ends[r++]) std::memset(owned + pages[from], 0, ends[r] - from);
    return;
  }
  const size_t n = runs == 0 ? 0 : ends[runs - 1];
  for (size_t i = 0; i < n; ++i) owned[static_cast<size_t>(pages[i])] = 0;
}

Status PrefixCache::evict(size_t tokens, size_t* evicted) {
  *evicted = 0;
  const Status st =
      host_ != nullptr
          ? evict_tiered(tokens, evicted)
          : tree_.evict(
                tokens,
                [this](const int64_t* values, const size_t* ends, size_t runs, bool paged) { return give_back(values, ends, runs, paged); },
                evicted);
  evicted_tokens_ += *evicted;  // what left the device, also when the eviction then failed
  return st;
}

Status PrefixCache::give_back(const int64_t* values, const size_t* ends, size_t runs, bool paged) {
  const int64_t P = page_size();
  const size_t n = runs == 0 ? 0 : ends[runs - 1];
  if (P == 1) {  // slots are the allocator's ids
    bool ranges = false;
    KVPOOL_RETURN_IF_ERROR(allocator_->pages().give_back_runs(values, ends, runs, false, &ranges));
    clear_marks(values, ends, runs, ranges);
    return Status::ok();
  }
  if (paged) {  // first slots of whole pages (check_handover): the pages, as one batch of runs
    std::vector<int64_t>& pages = handover_;  // sized for every page at creation: no allocation
    pages.resize(n);
    for (size_t i = 0; i < n; ++i) pages[i] = page_of(values[i]);
    bool ranges = false;
    KVPOOL_RETURN_IF_ERROR(allocator_->pages().give_back_runs(pages.data(), ends, runs, true, &ranges));
    clear_marks(pages.data(), ends, runs, ranges);
    return Status::ok();
  }
  for (size_t r = 0, from = 0; r < runs; from = ends[r++]) {  // slot per token (not made by this cache)
    KVPOOL_RETURN_IF_ERROR(allocator_->free(values + from, ends[r] - from));
    for (size_t i = from; i < ends[r]; i += static_cast<size_t>(P)) owned_[static_cast<size_t>(page_of(values[i]))] = 0;
  }
  return Status::ok();
}

Status PrefixCache::reset() {
  if (host_ != nullptr) {  // copies in flight finish first: their pages are about to be reused
    size_t done = 0;
    KVPOOL_RETURN_IF_ERROR(poll(true, &done));
  }
  if (storage_ != nullptr) forget_storage_jobs();  // waits for the storage threads' current batches
  std::vector<int64_t> slots;
  tree_.collect_slots(&slots);
  tree_.reserve_reset();  // what reset() allocates, before the slots are freed
  KVPOOL_RETURN_IF_ERROR(allocator_->free(slots.data(), slots.size()));
  std::fill(owned_.begin(), owned_.end(), 0);
  if (host_ != nullptr) host_->clear();  // every host page belonged to a node or to the storage tier
  tree_.reset();
  return Status::ok();
}

size_t PrefixCache::check(std::string* report, size_t max_lines) const {
  size_t problems = tree_.check(report, max_lines);
  if (host_ != nullptr) problems += check_host(report, max_lines > problems ? max_lines - problems : 0);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  const int64_t P = page_size();
  std::vector<uint8_t> seen(owned_.size(), 0);
  // Node by node (every node holds whole pages), without gathering every slot first.
  tree_.for_each_value([&](const int64_t* slots, size_t n, bool paged) {
    const size_t step = paged ? 1 : static_cast<size_t>(P);  // a value per page, or a slot per token
    for (size_t i = 0; i < n; i += step) {
      const int64_t page = slots[i] / P;
      if (page <= 0 || page >= static_cast<int64_t>(owned_.size())) {
        complain("the prefix tree holds invalid slot " + std::to_string(slots[i]));
        continue;
      }
      if (seen[static_cast<size_t>(page)]++ > 0) complain("page " + std::to_string(page) + " is double-owned: two tree nodes");
      if (!allocator_->pages().owned(page)) complain("page " + std::to_string(page) + " is in the prefix tree but free in the allocator");
    }
  });
  for (size_t page = 1; page < owned_.size(); ++page) {
    if ((owned_[page] != 0) != (seen[page] != 0)) complain("page " + std::to_string(page) + " tree-ownership mark is wrong");
  }
  return problems;
}

}  // namespace kvp::cache
