// The mamba radix tree (SGLANG_SEMANTICS §4.1) bound to a hybrid_linear
// pool's KV allocator (page_size 1) and its mamba state slots: inserts take
// ownership of allocated KV slots and of a state slot (checked against
// "owned by the tree" bitmaps), and evictions give them back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc/paged_allocator.hpp"
#include "cache/handover.hpp"
#include "cache/mamba_radix_tree.hpp"
#include "mamba/mamba_pool.hpp"
#include "util/status.hpp"

namespace kvp::cache {

class MambaCache {
 public:
  static Status make(alloc::PagedAllocator* kv, mamba::MambaPool* states, std::unique_ptr<MambaCache>* out);

  MambaRadixTree& tree() { return *tree_; }
  const MambaRadixTree& tree() const { return *tree_; }
  bool owns_slot(int64_t slot) const { return slot > 0 && static_cast<size_t>(slot) < owned_.size() && owned_[static_cast<size_t>(slot)] != 0; }
  bool owns_state(int32_t slot) const {
    return slot > 0 && static_cast<size_t>(slot) < owned_state_.size() && owned_state_[static_cast<size_t>(slot)] != 0;
  }

  // Match; with cow_slot >= 0 (an allocated state slot the tree does not own)
  // the best node's state is also copied into it.
  Status match(const int32_t* tokens, size_t n, const std::string& extra_key, int32_t cow_slot, MambaMatch* out);
  // Checks that slots[prefix, n) and `state` may be handed to the tree, then inserts.
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, int32_t state, const std::string& extra_key,
                size_t* prefix_len, bool* state_exist, NodeHandle* node);
  Status evict(size_t tokens, size_t* evicted);
  Status evict_mamba(size_t states, size_t* evicted);
  // Frees everything the tree owns and empties it.
  Status reset();
  size_t check(std::string* report, size_t max_lines) const;
  // Monotonic (kvpool_metrics_text): KV tokens evict() freed, states evict_mamba() freed.
  uint64_t evicted_tokens() const { return evicted_tokens_; }
  uint64_t evicted_states() const { return evicted_states_; }

 private:
  MambaCache(alloc::PagedAllocator* kv, mamba::MambaPool* states);
  Status check_state(int32_t state, const char* what) const;

  alloc::PagedAllocator* kv_;
  mamba::MambaPool* states_;
  std::unique_ptr<MambaRadixTree> tree_;
  std::vector<uint8_t> owned_;        // index = KV slot
  std::vector<uint8_t> owned_state_;  // index = state slot
  uint64_t evicted_tokens_ = 0;
  uint64_t evicted_states_ = 0;
  std::vector<int64_t> handed_;       // insert's copy of the handed slots, sized once: inserts allocate nothing here
};

}  // namespace kvp::cache
