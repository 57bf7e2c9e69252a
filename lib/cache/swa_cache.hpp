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
#include <utility>
#include <vector>

#include "alloc/swa_allocator.hpp"
#include "cache/handover.hpp"
#include "cache/prefix_cache.hpp"
#include "cache/swa_radix_tree.hpp"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
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
  // With the host tier, `count_hit` counts a write-policy hit on the path (false for the
  // chunks of a prompt not fully computed yet), and the copies the policy asks for are
  // made before it returns.
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                size_t prev_prefix_len, size_t swa_evicted_len, size_t* prefix_len, NodeHandle* node,
                bool count_hit = true);
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

  // ---- host tier (swa_cache_tier.cpp; docs/host-tier.md, "swa pools") ----
  // Two host pools: `full` for the full-attention layers' rows of every host token,
  // `window` for the window layers' rows of the window tails (SwaRadixTree::window_tail).
  // On CUDA pools a backup or load-back returns with its copies in flight: the nodes they
  // read or write stay locked until a poll sees both transfers finished (every tier
  // operation polls first, without blocking). Device eviction's write_back copies are
  // waited for: their slots are freed right after. CPU pools' copies land in the call.
  void enable_host_tier(host::HostPool* full, host::HostTransfer* full_transfer, host::HostPool* window,
                        host::HostTransfer* window_transfer, WritePolicy policy);
  bool host_tier() const { return host_ != nullptr; }
  host::HostPool* host_pool() const { return host_; }
  host::HostPool* host_window_pool() const { return host_window_; }
  host::HostTransfer* host_transfer() const { return transfer_; }
  host::HostTransfer* host_window_transfer() const { return window_transfer_; }
  // Loads the host-only chain that ends at `host_node` into fresh device slots (evicting
  // device nodes if needed): its full slots are appended to `slots` and counted in *loaded
  // (0: refused, below PrefixCache::kLoadBackThreshold tokens, for want of device room, or
  // when the chain's end would come back without window rows).
  Status load_back(NodeHandle host_node, std::vector<int64_t>* slots, size_t* loaded);
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
  int load_set() const { return load_set_; }
  int advance_load_set() { return load_set_ = (load_set_ + 1) % host::kLoadSets; }
  const HostTierStats& tier_stats() const { return stats_; }

 private:
  explicit SwaCache(alloc::SwaAllocator* allocator);
  // The copies the write policy wants after an insert that ended at `node`.
  void back_up_path(NodeHandle node) noexcept;
  // Copies `nodes` (root-to-leaf, device, without host copies) to the host; false when
  // they could not be. With `wait` the copy has landed on return and nothing allocates
  // (device eviction's keeper); otherwise it may stay in flight with its nodes locked.
  // Throws std::bad_alloc before its first change only.
  bool copy_to_host(const std::vector<NodeHandle>& nodes, bool wait);
  // A backup or load-back in flight: the tree locks (node, uuid) that keep the device
  // slots its copies read or write in place until both transfers' tickets have finished.
  struct Flight {
    uint64_t full = 0, window = 0;
    std::vector<std::pair<NodeHandle, int64_t>> locks;
  };
  bool landed(const Flight& f) { return transfer_->finished(f.full) && window_transfer_->finished(f.window); }
  // Waits for both tickets (a copy that could not be kept in flight: no lock to hold it).
  void wait_for(const Flight& f) {
    (void)transfer_->wait(f.full);
    (void)window_transfer_->wait(f.window);
  }
  // Ends `flight` if its copies landed, else locks `nodes`' live ones (each locks its
  // window tail too) and keeps it; waits instead when a lock cannot be taken. in_flight_
  // and flight.locks were reserved: nothing allocates.
  void hold_until_landed(Flight& flight, const NodeHandle* nodes, const size_t* tails, size_t count);
  Status release_landed(bool wait, size_t* completed);
  // Host eviction until both host pools have the room asked for; false if they cannot.
  bool make_host_room(size_t full, size_t window);
  bool keep_on_host(NodeHandle node);  // device eviction's keeper (write_back)
  size_t check_host(std::string* report, size_t max_lines) const;
  host::HostPool* host_ = nullptr;
  host::HostTransfer* transfer_ = nullptr;
  host::HostPool* host_window_ = nullptr;
  host::HostTransfer* window_transfer_ = nullptr;
  WritePolicy policy_ = WritePolicy::kWriteThrough;
  int load_set_ = 0;
  HostTierStats stats_;
  std::vector<NodeHandle> pending_;  // backups that ran out of host memory (capacity kept)
  std::vector<Flight> in_flight_;
  std::vector<NodeHandle> node_scratch_;
  // copy_to_host's scratch, sized once for every full / window slot: device eviction's
  // write_back copy runs inside an eviction that cannot be undone, so it must not allocate.
  std::vector<int64_t> device_scratch_, device_window_scratch_, host_scratch_, host_window_scratch_;
  std::vector<size_t> length_scratch_, tail_scratch_;
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
