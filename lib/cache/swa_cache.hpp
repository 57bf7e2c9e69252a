// The swa radix tree (SGLANG_SEMANTICS §4.2) bound to a swa pool's allocator
// (full pool + window pool + full→window mapping): the tree owns full slots
// (and the window slots they map to, except on tombstones); tombstoning frees
// only window slots (free_swa), and a tombstone's full slots are freed without
// touching any window slot. Checked against a "owned by the tree" bitmap.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "alloc/swa_allocator.hpp"
#include "cache/handover.hpp"
#include "cache/swa_radix_tree.hpp"
#include "util/status.hpp"

namespace kvp::cache {

class SwaCache {
 public:
  static Status make(alloc::SwaAllocator* allocator, size_t window, std::unique_ptr<SwaCache>* out);

  SwaRadixTree& tree() { return *tree_; }
  const SwaRadixTree& tree() const { return *tree_; }
  bool owns_slot(int64_t slot) const { return slot > 0 && static_cast<size_t>(slot) < owned_.size() && owned_[static_cast<size_t>(slot)] != 0; }

  SwaMatch match(const int32_t* tokens, size_t n, const std::string& extra_key) { return tree_->match(tokens, n, extra_key); }
  // SGLang's insert (the tree frees the caller's duplicates): slots[0,
  // prev_prefix_len) must be the tree's own slots of a cached prefix,
  // slots[prev_prefix_len, n) allocated slots of the caller, windowless
  // before swa_evicted_len and with window slots from there on.
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                size_t prev_prefix_len, size_t swa_evicted_len, size_t* prefix_len, NodeHandle* node);
  // radix_insert's contract: the caller keeps slots[0, *prefix_len), the tree takes the rest.
  Status insert_keep_prefix(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                            size_t* prefix_len, NodeHandle* node);
  // radix_lock / radix_unlock: the lock's uuid is remembered per node.
  Status lock(NodeHandle node);
  Status unlock(NodeHandle node);
  Status evict(size_t full_tokens, size_t swa_tokens, size_t* full_evicted, size_t* swa_evicted);
  // Frees everything the tree owns and empties it.
  Status reset();
  size_t check(std::string* report, size_t max_lines) const;
  // Monotonic (kvpool_metrics_text): full slots and window slots evict() freed.
  uint64_t evicted_tokens() const { return evicted_tokens_; }
  uint64_t evicted_window_tokens() const { return evicted_window_tokens_; }

 private:
  explicit SwaCache(alloc::SwaAllocator* allocator);
  Status check_own(const int64_t* slots, size_t from, size_t to, size_t windowless_to) const;
  void mark(const int64_t* slots, size_t from, size_t to);

  alloc::SwaAllocator* allocator_;
  std::unique_ptr<SwaRadixTree> tree_;
  std::vector<uint8_t> owned_;  // index = full slot
  std::map<NodeHandle, std::vector<int64_t>> lock_uuids_;
  uint64_t evicted_tokens_ = 0;
  uint64_t evicted_window_tokens_ = 0;
  mutable std::vector<int64_t> handed_;  // check_own's copy, sized once: inserts allocate nothing here
};

}  // namespace kvp::cache
