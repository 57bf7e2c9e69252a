// The radix tree bound to a pool's allocator: inserts take ownership of whole
// allocated pages (checked against a per-page "owned by the tree" bitmap), and
// evictions and resets give them back to the allocator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alloc/paged_allocator.hpp"
#include "cache/radix_tree.hpp"
#include "util/status.hpp"

namespace kvp::cache {

class PrefixCache {
 public:
  PrefixCache(alloc::PagedAllocator* allocator, EvictionPolicy policy, bool events);

  RadixTree& tree() { return tree_; }
  const RadixTree& tree() const { return tree_; }
  int64_t page_size() const { return allocator_->page_size(); }
  bool tree_owns_page(int64_t page) const { return owned_[static_cast<size_t>(page)] != 0; }

  MatchResult match(const int32_t* tokens, size_t n, const std::string& extra_key) { return tree_.match(tokens, n, extra_key); }
  // Checks that slots[prefix, n) may be handed to the tree, then inserts.
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key, int32_t priority,
                size_t* prefix_len, NodeHandle* node);
  Status evict(size_t tokens, size_t* evicted);
  Status reset();

  size_t check(std::string* report, size_t max_lines) const;

 private:
  Status check_handover(const int64_t* slots, size_t n) const;
  // Clears the tree's marks of evicted pages (run r = pages[ends[r-1], ends[r])); with
  // `ranges` (give_back_runs found every run a block of consecutive pages) one block per run.
  void clear_marks(const int64_t* pages, const size_t* ends, size_t runs, bool ranges);
  // The page of a slot (>= 0): a shift for the usual power-of-two page sizes, not a 64-bit division.
  int64_t page_of(int64_t slot) const { return page_shift_ >= 0 ? slot >> page_shift_ : slot / page_size(); }

  alloc::PagedAllocator* allocator_;
  int page_shift_;  // log2(page_size) when a power of two, else -1
  RadixTree tree_;
  mutable std::vector<uint8_t> owned_;  // index = page (check_handover marks pages with 2 for a moment)
  mutable std::vector<int64_t> handover_;  // evict()'s pages, sized once for every page: no allocation there
};

}  // namespace kvp::cache
