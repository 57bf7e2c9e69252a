// MambaRadixCache (SGLANG_SEMANTICS §4.1), SGLang's v1 "no_buffer" mode: a
// prefix tree for hybrid linear-attention models whose nodes own the
// full-attention KV slots of their tokens and, optionally, one Mamba state
// slot holding the recurrent state after the node's last token. A node without
// a state is a tombstone: its KV is reusable only up to a deeper node that has
// a state, because a request cannot continue from a position without one.
//
// - page_size 1 only (SGLang's v1 mode requires it).
// - Two intrusive LRU lists (full KV: every node; mamba: nodes with a state),
//   each with an ordered index of eviction candidates, so no eviction walks the
//   tree or skips over locked nodes.
// - Slots go back through callbacks; the tree knows no allocator.
// - Copy-on-write of the state is the caller's job: match returns the best
//   node's state slot, which stays owned by the tree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/dual_lru_tree.hpp"
#include "util/status.hpp"

namespace kvp::cache {

struct MambaNode : DualNodeBase {
  int32_t mamba = -1;  // state slot; -1 = tombstone (aux_lock is the mamba lock)
};

struct MambaMatch {
  std::vector<int64_t> slots;  // KV slots of the usable prefix (up to the best node)
  NodeHandle node = 0;         // best node: the deepest matched device node with a state, else the root
  int32_t mamba_slot = -1;     // the best node's state slot (-1 at the root)
  size_t matched = 0;          // raw match length (host-only nodes included); tokens past slots.size() are not usable now
  // Host tier: the deepest matched host-only node with a state (0: none) and the tokens
  // from the end of the device nodes down to it, which load_back would bring back.
  NodeHandle host_node = 0;
  size_t host_tokens = 0;
  size_t device_tokens = 0;    // matched tokens in device nodes (tombstones included)
};

// What the host tier knows of one node (tier_node()).
struct MambaTierNode {
  size_t tokens = 0;
  bool on_device = true;  // false: host-only
  bool on_host = false;   // has a host copy (the root: true)
  bool has_state = false;
};

class MambaRadixTree : public DualLruTree<MambaRadixTree, MambaNode> {
 public:
  struct Callbacks {
    std::function<Status(const int64_t* slots, size_t n)> free_full;
    std::function<Status(int32_t slot)> free_mamba;
  };

  static Status create(int64_t page_size, Callbacks callbacks, std::unique_ptr<MambaRadixTree>* out);

  static bool has_aux(const MambaNode& n) { return n.mamba >= 0; }
  static constexpr bool kHostTombstoneLeaves = false;  // a host-only leaf keeps its state
  static constexpr size_t kNodesPerInsert = 2;  // a split's upper part and a leaf
  static void prepare_split(const MambaNode&, size_t, MambaNode*, std::vector<int64_t>&&) {}  // nothing more to take
  static void on_split(MambaNode& upper, MambaNode& lower, MambaNode& parts);
  static void keep_tail_room(MambaNode&, std::vector<int64_t>&&) {}  // no host rows beyond the KV's

  size_t mamba_evictable_size() const { return mamba_evictable_; }
  size_t mamba_protected_size() const { return mamba_protected_; }

  // Longest prefix of `tokens` that can be continued from: its KV and the state
  // of its last node. Splits a node matched part-way; the best node and its
  // ancestors become most recently used.
  MambaMatch match(const int32_t* tokens, size_t n, const std::string& extra_key);
  // As match, into *out, whose slots keep their capacity: allocates nothing when
  // that holds n slots and the match ends on a node boundary (as right after an
  // insert of the same key).
  void match_into(const int32_t* tokens, size_t n, const std::string& extra_key, MambaMatch* out);
  // What match would return, without splitting or stamping: the raw match
  // length, and in *usable the tokens up to the deepest node with a state.
  size_t cached_prefix(const int32_t* tokens, size_t n, const std::string& extra_key, size_t* usable) const;
  // The state slot of a live node (-1 for a tombstone, the root or a stale handle).
  int32_t state_of(NodeHandle node) const;

  // Caches a sequence and the state after its last token. *prefix_len receives
  // the tokens already cached: the caller keeps owning slots[0, prefix_len),
  // the tree takes slots[prefix_len, n). *mamba_exist is true when the end node
  // already had a state: the caller keeps `mamba_slot`; otherwise the tree took
  // it (a new leaf, or a revived tombstone). `n` must be positive. Takes all
  // its memory before its first change.
  // Host tier: host-only nodes on the path take the caller's slots as their device
  // copy again (*prefix_len then ends before the first of them), and `count_hit`
  // counts a write-policy hit on each device node walked (a new leaf starts at 1).
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, int32_t mamba_slot,
                const std::string& extra_key, size_t* prefix_len, bool* mamba_exist, NodeHandle* node = nullptr,
                bool count_hit = false);

  // Protects the node's state and the KV of the node and its ancestors. The
  // root is a no-op; a tombstone is refused (match never returns one, and a
  // full-only lock on it could leave a tombstone leaf behind).
  Status lock(NodeHandle node);
  Status unlock(NodeHandle node);

  // Evicts least recently used unlocked leaves (with their states) and the
  // unlocked childless tombstones left above them, until `full_tokens` tokens
  // are freed or nothing is evictable.
  Status evict(size_t full_tokens, size_t* full_evicted, size_t* mamba_evicted = nullptr);
  // Frees `states` states, least recently used first: internal nodes become
  // tombstones (their KV stays), leaves are evicted entirely.
  Status evict_mamba(size_t states, size_t* mamba_evicted, size_t* full_evicted = nullptr);

  // Forgets everything without freeing (the caller clears the pools too).
  void reset();

  // ---- host tier (mamba_radix_tree_tier.cpp; docs/host-tier.md) ----
  // A node may also hold a host copy of its full-attention KV, and be device-only,
  // device+host or host-only. Device eviction keeps a node as host-only when it and
  // every ancestor have host copies (or `keep` makes them), together with its mamba
  // state, which stays on the device under the mamba list's own LRU. Along every path
  // the device nodes form a prefix. Call once, on an empty tree.
  // `free_host` takes the host slots of host copies the tree drops (never fails).
  using FreeHost = std::function<void(const int64_t* host_slots, size_t n)>;
  void enable_host_tier(FreeHost free_host) {
    tiered_ = true;
    enable_host_spares(0);  // splits of nodes with host copies: their host slots
    free_host_ = std::move(free_host);
  }
  bool host_tier() const { return tiered_; }
  size_t host_size() const { return host_tokens_; }            // tokens with a host copy
  size_t host_only_size() const { return host_only_tokens_; }  // ... of host-only nodes
  // Asked at device eviction of a node whose path lacks host copies: true when they
  // were made (attach_host), false to delete the node instead. The node is locked meanwhile.
  using KeepOnHost = std::function<bool(NodeHandle node)>;
  void set_keep_on_host(KeepOnHost keep) { keep_ = std::move(keep); }
  // backup_candidates() (the nodes of a path a backup copies) is DualLruTree's.
  // Room in a node's host slot list for attach_host() (which then allocates nothing).
  void reserve_host(NodeHandle node);
  // Gives a device node without a host copy its host slots (one per token).
  Status attach_host(NodeHandle node, const int64_t* host_slots, size_t n);
  // The host-only nodes from `node` up to (excluded) the first device node, root-to-leaf,
  // their tokens and host slots.
  Status host_chain(NodeHandle node, std::vector<NodeHandle>* chain, size_t* tokens, std::vector<int64_t>* host_slots) const;
  // Room for restore_chain(chain) and for the KV events of an eviction before it, so that
  // neither allocates: a load-back calls it before it evicts to make device room (as the
  // swa tree's plan_restore). Changes nothing visible.
  void reserve_restore(const std::vector<NodeHandle>& chain);
  // Gives a host chain (host_chain()) its device slots again.
  Status restore_chain(const std::vector<NodeHandle>& chain, const int64_t* slots, size_t n);
  // Locks the full KV of node and its ancestors, host-only ones included (no state lock):
  // a load-back keeps its chain and the device part above it while it evicts.
  Status pin(NodeHandle node);
  Status unpin(NodeHandle node);
  // Deletes host-only leaves (with their states), least recently used first, and the
  // childless tombstones above them, until `tokens` host tokens are freed.
  Status evict_host(size_t tokens, size_t* evicted);
  MambaTierNode tier_node(NodeHandle node) const;
  // The deepest device node with a state at or above `node` (the root if none).
  NodeHandle usable_ancestor(NodeHandle node) const;
  // The device tokens an eviction can free while `node`'s path is pinned (pin()): the
  // evictable tokens less the unlocked device tokens on root..node.
  size_t evictable_beside_path(NodeHandle node) const;
  // A device node's KV slots, appended to *out (nothing for host-only nodes or the root).
  void device_slots(NodeHandle node, std::vector<int64_t>* out) const;
  void collect_host_slots(std::vector<int64_t>* out) const;

  void collect_slots(std::vector<int64_t>* full, std::vector<int32_t>* mamba) const;
  // Verifies the §4.1 invariants; returns the number of problems, describing
  // up to `max_lines` of them in `report`.
  size_t check(std::string* report, size_t max_lines) const;

 private:
  friend class DualLruTree<MambaRadixTree, MambaNode>;
  using Node = MambaNode;

  explicit MambaRadixTree(Callbacks callbacks);

  Status evict_leaf(int32_t id, size_t* full_evicted, size_t* mamba_evicted);
  // Frees a node's slots: device KV (device nodes) and its host copy.
  Status free_node_slots(const MambaNode& n);
  // Tokens of tokens[0, n) that lie in host-only nodes (what an insert of them adopts).
  size_t host_only_on_path(int32_t ns, const int32_t* tokens, size_t n) const;
  void drop_to_host(int32_t id);  // device KV freed by the caller; host copy and state stay
  void adopt(int32_t id, const int64_t* slots);  // a host-only node takes device slots
  void pin_path(int32_t id, int delta);
  // Device eviction of a device leaf: to host-only, or deleted.
  Status evict_device_leaf(int32_t id, size_t* full_evicted, size_t* mamba_evicted);

  Callbacks cb_;
  bool tiered_ = false;
  KeepOnHost keep_;
  FreeHost free_host_;
  size_t host_tokens_ = 0;
  size_t host_only_tokens_ = 0;
  size_t mamba_evictable_ = 0;
  size_t mamba_protected_ = 0;
};

}  // namespace kvp::cache
