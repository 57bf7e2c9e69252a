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
#include "cache/prefix_cache.hpp"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
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
  // With the host tier, `count_hit` counts a write-policy hit on the path (false for
  // the chunks of a prompt not fully computed yet), and the copies the policy asks for
  // are made before it returns.
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, int32_t state, const std::string& extra_key,
                size_t* prefix_len, bool* state_exist, NodeHandle* node, bool count_hit = true);
  Status evict(size_t tokens, size_t* evicted);
  Status evict_mamba(size_t states, size_t* evicted);
  // Frees everything the tree owns and empties it.
  Status reset();
  size_t check(std::string* report, size_t max_lines) const;
  // Monotonic (kvpool_metrics_text): KV tokens evict() freed, states evict_mamba() freed.
  uint64_t evicted_tokens() const { return evicted_tokens_; }
  uint64_t evicted_states() const { return evicted_states_; }

  // ---- host tier (mamba_cache_tier.cpp; docs/host-tier.md) ----
  // The full-attention KV is tiered like an mha pool's; mamba states stay on the device.
  // On CUDA pools a backup or load-back returns with its copy in flight: the last node it
  // copies stays locked (its state and its path's KV) until a poll sees the copy finished
  // (every tier operation polls first, without blocking). Device eviction's write_back
  // copies are waited for: their slots are freed right after. CPU pools' copies land in
  // the call.
  void enable_host_tier(host::HostPool* pool, host::HostTransfer* transfer, WritePolicy policy);
  bool host_tier() const { return host_ != nullptr; }
  host::HostPool* host_pool() const { return host_; }
  host::HostTransfer* host_transfer() const { return transfer_; }
  // Loads the host-only chain that ends at `host_node` into fresh device slots (evicting
  // device nodes if needed): its slots are appended to `slots` and counted in *loaded (0:
  // refused, below PrefixCache::kLoadBackThreshold tokens or for want of device room).
  Status load_back(NodeHandle host_node, std::vector<int64_t>* slots, size_t* loaded);
  // Whether load_back(host_node) would load rather than refuse: its host-only chain has
  // kLoadBackThreshold tokens or more, and the device has room for them once it evicts
  // what it may (every unlocked device node off the pinned path). Changes nothing.
  bool load_would_fit(NodeHandle host_node) const;
  Status evict_host(size_t tokens, size_t* evicted);
  // Retries the backups that could not start for want of host memory (kvhost_poll()).
  void retry_backups() noexcept;
  // Unlocks the nodes of copies that have landed (with `wait`: of every copy, after
  // waiting for it); *completed counts them. kvhost_poll().
  Status poll(bool wait, size_t* completed);
  size_t copies_in_flight() const { return in_flight_.size(); }
  // Unlocks the nodes of copies that have landed (without waiting, unless `wait`).
  Status release_landed(bool wait = false) {
    size_t done = 0;
    return in_flight_.empty() ? Status::ok() : release_landed(wait, &done);
  }
  size_t pending_backups() const { return pending_.size(); }
  int load_set() const { return load_set_; }
  int advance_load_set() { return load_set_ = (load_set_ + 1) % host::kLoadSets; }
  const HostTierStats& tier_stats() const { return stats_; }

 private:
  // The copies the write policy wants after an insert that ended at `node`.
  void back_up_path(NodeHandle node) noexcept;
  // Copies `nodes` (root-to-leaf, device, without host copies) to the host; false when
  // they could not be (no host room even after host eviction, or a failed copy). With
  // `wait` the copy has landed on return and nothing allocates (device eviction's keeper);
  // otherwise it may stay in flight. Throws std::bad_alloc before its first change only.
  bool copy_to_host(const std::vector<NodeHandle>& nodes, bool wait);
  // A backup or load-back in flight and the node whose tree lock keeps the device slots
  // it reads or writes in place (the lock covers the node's path) until it lands.
  struct Flight {
    uint64_t ticket = 0;
    NodeHandle locked = 0;
  };
  // Keeps the copy of `ticket` in flight with `node` locked (in_flight_ reserved), or
  // waits for it when it has not landed and the node cannot be locked (a tombstone).
  void hold_until_landed(uint64_t ticket, NodeHandle node);
  Status release_landed(bool wait, size_t* completed);
  // Device eviction's keeper (write_back): copies of the node's path that lacks them.
  bool keep_on_host(NodeHandle node);
  size_t check_host(std::string* report, size_t max_lines) const;
  host::HostPool* host_ = nullptr;
  host::HostTransfer* transfer_ = nullptr;
  WritePolicy policy_ = WritePolicy::kWriteThrough;
  int load_set_ = 0;
  HostTierStats stats_;
  // Last nodes of inserts whose backups ran out of host memory (capacity kept: noting one
  // never allocates); retried by the next insert and kvhost_poll().
  std::vector<NodeHandle> pending_;
  std::vector<Flight> in_flight_;
  // copy_to_host's scratch, sized once for every slot: a copy allocates nothing but the
  // nodes' host slot lists, reserved before its first change.
  std::vector<int64_t> device_scratch_, host_scratch_;
  std::vector<size_t> length_scratch_;
  std::vector<NodeHandle> node_scratch_;

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
