// The radix tree bound to a pool's allocator: inserts take ownership of whole
// allocated pages (checked against a per-page "owned by the tree" bitmap), and
// evictions and resets give them back to the allocator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alloc/paged_allocator.hpp"
#include "cache/radix_tree.hpp"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
#include "storage/page_key.hpp"
#include "storage/storage_tier.hpp"
#include "util/status.hpp"

namespace kvp::cache {

// SGLang's write policies (SGLANG_SEMANTICS §5.2): when device pages get a host copy.
enum class WritePolicy { kWriteThrough, kWriteThroughSelective, kWriteBack };
bool parse_write_policy(const std::string& name, WritePolicy* out);

// The host tier's counters (kvpool_host_stats()).
struct HostTierStats {
  uint64_t backups = 0;          // backup copies started
  uint64_t backup_tokens = 0;    // tokens copied device -> host
  uint64_t backups_skipped = 0;  // nodes not backed up: the host tier was full of locked pages
  uint64_t backup_errors = 0;    // copies that failed to start (the node stays device-only)
  uint64_t loads = 0;            // load-backs started
  uint64_t load_tokens = 0;      // tokens copied host -> device
  uint64_t loads_refused = 0;    // host hits not loaded (below the threshold, or no device room)
  uint64_t host_evicted_tokens = 0;
  uint64_t load_evicted_tokens = 0;  // device tokens load_back() evicted to make room
};

// The storage tier's policy knobs (config::StorageConfig, SGLANG_SEMANTICS §5.5).
struct StorageOptions {
  enum class Policy { kBestEffort, kWaitComplete, kTimeout } policy = Policy::kBestEffort;
  size_t threshold_tokens = 256;     // prefetch only runs of at least this many tokens
  double timeout_base_s = 1.0;       // timeout policy: base
  double timeout_per_ki_token_s = 0.25;
  size_t capacity_tokens = 0;        // prefetches may hold at most this many host tokens at once
};

// The storage tier's counters at the prefix cache (beside StorageTierStats).
struct StorageCacheStats {
  uint64_t backup_jobs = 0;            // backups handed to the storage tier
  uint64_t backup_tokens = 0;          // ... their tokens
  uint64_t prefetches = 0;             // prefetches started
  uint64_t prefetches_skipped = 0;     // prefetch calls that started nothing (below threshold, capacity, no room)
  uint64_t prefetch_tokens = 0;        // tokens asked for by started prefetches
  uint64_t prefetch_inserted_tokens = 0;  // tokens that became host-only nodes
  uint64_t prefetch_dropped_tokens = 0;   // tokens fetched but not kept (the tree had them, or lost the path)
  uint64_t storage_hit_tokens = 0;     // tokens loaded back to the device that came from storage
};

// Why prefetch() started nothing (storage.h's kvstore_skip, same values).
enum class PrefetchSkip : int32_t { kNone = 0, kBelowThreshold = 1, kNotBackedUp = 2, kCapacity = 3, kHostFull = 4 };

// What a prefetch has done so far (prefetch_state()).
struct PrefetchState {
  bool done = false;      // nothing more will land
  bool revoked = false;   // fewer stored tokens than the threshold: nothing read
  bool ready = false;     // the policy lets the request go on now (best_effort: always)
  bool searched = false;  // hit_tokens is known
  size_t asked_tokens = 0;
  size_t hit_tokens = 0;     // stored tokens found, consecutive from the start
  size_t loaded_tokens = 0;  // tokens in the host tier, checked
};

class PrefixCache {
 public:
  PrefixCache(alloc::PagedAllocator* allocator, EvictionPolicy policy, bool events);

  RadixTree& tree() { return tree_; }
  const RadixTree& tree() const { return tree_; }
  int64_t page_size() const { return allocator_->page_size(); }
  bool tree_owns_page(int64_t page) const { return owned_[static_cast<size_t>(page)] != 0; }

  MatchResult match(const int32_t* tokens, size_t n, const std::string& extra_key) { return tree_.match(tokens, n, extra_key); }
  // Checks that slots[prefix, n) may be handed to the tree, then inserts. `in_order_from`:
  // the caller knows that slots[in_order_from, n) fill their pages in order (pages an
  // allocation just handed out, kvseq_extend): their pages are still checked (usable, held,
  // not the tree's, none twice), not each slot of them.
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key, int32_t priority,
                size_t* prefix_len, NodeHandle* node, size_t in_order_from = SIZE_MAX);
  // insert() of a key whose walk the caller made, with nothing changed since: `walked` and
  // `device` are tree().walk_prefix() of it and its *device.
  Status insert_walked(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                       int32_t priority, size_t* prefix_len, NodeHandle* node, size_t in_order_from, size_t walked,
                       size_t device);
  Status evict(size_t tokens, size_t* evicted);
  Status reset();
  // Device tokens evicted from the tree since creation (every cause: radix_evict, kvseq's
  // room-making, load-backs); monotonic (kvpool_metrics_text).
  uint64_t evicted_tokens() const { return evicted_tokens_; }

  size_t check(std::string* report, size_t max_lines) const;

  // ---- host tier (prefix_cache_tier.cpp) ----
  // Turns the tier on (an empty tree): from then on inserts back pages up per `policy`,
  // evictions keep backed-up nodes as host-only, and load_back() brings them back.
  void enable_host_tier(host::HostPool* pool, host::HostTransfer* transfer, WritePolicy policy);
  bool host_tier() const { return host_ != nullptr; }
  host::HostPool* host_pool() const { return host_; }
  host::HostTransfer* host_transfer() const { return transfer_; }
  // Host hits shorter than this are recomputed rather than loaded (SGLang: 10 tokens).
  static constexpr size_t kLoadBackThreshold = 10;
  // Starts every copy that inserts asked for, then releases the nodes of finished copies
  // (non-blocking); `wait`: waits for all of them first (kvhost_poll()).
  Status poll(bool wait, size_t* completed);
  // Releases the nodes of copies that have landed (non-blocking; starts nothing).
  Status release_landed(size_t* completed);
  // Waits for every copy in flight and releases its nodes (starts nothing): radix_reset.
  Status land_copies();
  // After a successful kvseq_* call: starts the copies of the first `noted` pending inserts
  // (those of earlier calls: an engine inserts pages (kvseq_extend) before its forward pass
  // writes their KV, and the next call comes after that pass was issued) and releases
  // landed ones. Best effort and never failing: what cannot start now (no memory, a copy
  // that fails to start) stays pending, or is counted, and the call's result stands.
  void tick(size_t noted) noexcept;
  size_t pending_inserts() const { return pending_.size(); }
  // Pending copies or copies in flight: tick() has work.
  bool tier_busy() const { return !pending_.empty() || !in_flight_.empty(); }
  size_t copies_in_flight() const { return in_flight_.size(); }
  // Deletes host-only leaves until `tokens` host tokens are free again.
  Status evict_host(size_t tokens, size_t* evicted);
  // Loads the host-only chain that ends at `host_node` into fresh device pages (evicting
  // device nodes if needed): its slots are appended to `slots`, *loaded counts them (0:
  // nothing loaded, refused below the threshold or for want of device room) and *node is
  // the chain's last node (locked until the copy lands), or, if nothing was loaded, the
  // device node the chain hangs below.
  Status load_back(NodeHandle host_node, std::vector<int64_t>* slots, size_t* loaded,
                   NodeHandle* node);
  // The load set (0..2) that load-backs go to; advance_load_set() moves to the next one.
  int load_set() const { return load_set_; }
  int advance_load_set() { return load_set_ = (load_set_ + 1) % host::kLoadSets; }
  const HostTierStats& tier_stats() const { return stats_; }

  // ---- storage tier (prefix_cache_storage.cpp) ----
  // Turns the storage tier on (host tier first): host copies are backed up to storage once
  // they land, and prefetch() reads a prompt's continuation past the host tier. `identity`:
  // storage::model_identity() of the pool (namespaces are added per extra key).
  void enable_storage(storage::StorageTier* tier, std::string identity, const StorageOptions& options);
  storage::StorageTier* storage() const { return storage_; }
  // Starts reading the stored pages that continue the cached prefix of tokens[0, n) into
  // the host tier. *id = 0 when nothing starts (*why says why: below the threshold, a cached
  // prefix without a host copy, the capacity limit, no host room).
  Status prefetch(const int32_t* tokens, size_t n, const std::string& extra_key, uint64_t* id, PrefetchSkip* why);
  Status prefetch_state(uint64_t id, PrefetchState* out) const;
  // Ends a prefetch (whatever the policy says: the caller asked prefetch_state() first):
  // the pages that landed become host-only nodes, so the next match finds them as a host
  // hit. *inserted_tokens: tokens added to the tree.
  Status prefetch_end(uint64_t id, size_t* inserted_tokens);
  size_t prefetches_running() const { return prefetches_.size(); }
  const StorageCacheStats& storage_stats() const { return storage_stats_; }
  // Tokens of the last load_back() that came from storage (and had not been loaded before).
  size_t last_load_storage_tokens() const { return last_load_storage_tokens_; }

 private:
  // After an insert: the path's nodes the write policy wants copied are noted, and get
  // their copies at the next poll.
  void back_up_path(NodeHandle node);
  // Starts the copies of pending_[0, count); they leave pending_ once started (or skipped
  // for want of host room). On an error nothing has changed but, maybe, host eviction.
  Status start_pending_backups(size_t count);
  // Host pages for `n` pages, deleting host-only leaves if needed; false if impossible.
  bool take_host_pages(size_t n, int64_t* out);
  size_t check_host(std::string* report, size_t max_lines) const;
  struct InFlight {
    uint64_t ticket;
    std::vector<NodeHandle> locked;
    bool backup = false;  // a device -> host backup (its nodes go on to storage once it lands)
  };
  // Storage: hands the host copies of `nodes` to the storage tier (pins their host pages).
  void store_nodes(const std::vector<NodeHandle>& nodes) noexcept;
  // Storage: unpins pages of finished backups, frees pages prefetches let go of (non-blocking).
  void drain_storage();
  // Frees host pages the tree let go of; a page a storage backup still reads is freed
  // when the backup finishes.
  void release_host(const int64_t* pages, size_t n);
  const storage::Fingerprint& namespace_fingerprint(const std::string& extra_key);
  // reset(): ends every prefetch and waits until the storage threads read or write no host
  // page (their current batch), then forgets pins and flags (the host pool is cleared next).
  void forget_storage_jobs();
  struct PrefetchOp {
    std::vector<int32_t> tokens;  // the key up to the last asked page
    std::string extra_key;
    size_t from = 0;              // tokens cached when it started
    std::vector<int64_t> pages;   // host pages of tokens [from, tokens.size())
    std::vector<Digest> digests;
    double started_s = 0;
    double timeout_s = 0;
  };
  storage::StorageTier* storage_ = nullptr;
  std::string identity_;
  StorageOptions storage_options_;
  StorageCacheStats storage_stats_;
  std::vector<std::pair<std::string, storage::Fingerprint>> fingerprints_;  // by extra key (few)
  std::vector<uint32_t> host_pins_;     // per host page: storage backups reading it
  std::vector<uint8_t> host_freed_;     // per host page: let go of by the tree while pinned
  std::vector<uint8_t> from_storage_;   // per host page: prefetched, not loaded back yet
  std::vector<std::pair<uint64_t, std::vector<int64_t>>> storage_backups_;  // backup id, pinned pages
  std::vector<std::pair<uint64_t, PrefetchOp>> prefetches_;
  size_t storage_held_pages_ = 0;       // host pages held for storage, in no tree node
  size_t prefetch_tokens_held_ = 0;     // tokens of running prefetches (the capacity limit)
  size_t last_load_storage_tokens_ = 0;
  std::vector<uint64_t> finished_scratch_;
  std::vector<int64_t> pages_scratch_;
  host::HostPool* host_ = nullptr;
  host::HostTransfer* transfer_ = nullptr;
  WritePolicy policy_ = WritePolicy::kWriteThrough;
  std::vector<InFlight> in_flight_;
  int load_set_ = 0;
  HostTierStats stats_;
  std::vector<int64_t> tier_pages_;  // scratch: device pages, host pages
  std::vector<NodeHandle> tier_handles_;
  std::vector<NodeHandle> pending_;  // last nodes of inserts whose paths may need copies

  // slots[0, n) may go to the tree: whole usable pages in order, held, not the tree's, none
  // twice. Pages from `in_order_from` on are known to be in order (insert()).
  Status check_handover(const int64_t* slots, size_t n, size_t in_order_from = SIZE_MAX) const;
  // Gives evicted device slots back to the allocator (RadixTree::FreeSlots).
  Status give_back(const int64_t* values, const size_t* ends, size_t runs, bool paged);
  Status evict_tiered(size_t tokens, size_t* evicted);
  // Clears the tree's marks of evicted pages (run r = pages[ends[r-1], ends[r])); with
  // `ranges` (give_back_runs found every run a block of consecutive pages) one block per run.
  void clear_marks(const int64_t* pages, const size_t* ends, size_t runs, bool ranges);
  // The page of a slot (>= 0): a shift for the usual power-of-two page sizes, not a 64-bit division.
  int64_t page_of(int64_t slot) const { return page_shift_ >= 0 ? slot >> page_shift_ : slot / page_size(); }

  alloc::PagedAllocator* allocator_;
  uint64_t evicted_tokens_ = 0;
  int page_shift_;  // log2(page_size) when a power of two, else -1
  RadixTree tree_;
  mutable std::vector<uint8_t> owned_;  // index = page (check_handover marks pages with 2 for a moment)
  mutable std::vector<int64_t> handover_;  // evict()'s pages, sized once for every page: no allocation there
};

}  // namespace kvp::cache
