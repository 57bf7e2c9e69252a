// SWARadixCache (SGLANG_SEMANTICS §4.2): a prefix tree for models that mix
// full attention with sliding-window attention (SWA). Each node owns the
// full-pool slots of its tokens; the window slots are reached through the
// allocator's full→window mapping. A node whose window KV was dropped (it is
// out of every running request's window) is an SWA tombstone: its full KV
// stays, and a prefix through it is still usable when at least `window`
// consecutive live tokens end the match.
//
// - page_size 1 only (the SGLang snapshot's SWA allocator is page_size 1).
// - The usable-prefix rule restarts the live run on every tombstone (the
//   snapshot kept counting across a tombstone met after a short run and
//   over-reported; SGLang PR #17061).
// - Locks: full locks go to the root, SWA locks only up to the node where the
//   locked tokens reach the window; that node's uuid bounds the unlock.
// - Two intrusive LRU lists (full: every node; SWA: live nodes), each with an
//   ordered index of eviction candidates, so no eviction walks the tree.
// - Slots go back through callbacks; the tree knows no allocator.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/dual_lru_tree.hpp"
#include "util/status.hpp"

namespace kvp::cache {

struct SwaNode : DualNodeBase {
  bool tombstone = false;  // window KV dropped (aux_lock is the swa lock); host-only nodes are tombstones
  int64_t uuid = 0;        // set on the node where some SWA lock stopped
  // Host tier: host slots of the window-layer rows of the node's last host_window.size()
  // tokens (at most `window`; empty without a host copy or when it was backed up as a tombstone).
  std::vector<int64_t> host_window;
};

struct SwaMatch {
  std::vector<int64_t> slots;  // full slots of the usable prefix
  NodeHandle node = 0;         // last node of the usable prefix (the root if none)
  size_t matched = 0;          // raw match length (>= slots.size()), host-only nodes included
  // Host tier: the deepest matched host-only node where a match would be usable once its
  // host chain is loaded back (0: none), and the tokens from the end of the device nodes to it.
  NodeHandle host_node = 0;
  size_t host_tokens = 0;
  size_t device_tokens = 0;    // matched tokens in device nodes (tombstones included)
};

// What the host tier knows of one node (tier_node()).
struct SwaTierNode {
  size_t tokens = 0;
  bool on_device = true;   // false: host-only
  bool on_host = false;    // has a host copy (the root: true)
  bool tombstone = false;  // on the device without window KV (host-only nodes: true)
  size_t host_window = 0;  // tokens at the node's end whose window rows the host copy holds
};

// A load-back's plan (SwaRadixTree::plan_restore): the host-only chain root-to-leaf, which
// of its nodes come back with window slots, and their host slots in chain order.
struct SwaRestorePlan {
  std::vector<NodeHandle> chain;
  std::vector<uint8_t> live;          // per chain node: comes back with window slots
  size_t tokens = 0;                  // the chain's tokens
  size_t live_tokens = 0;             // ... of live nodes
  std::vector<int64_t> host_full;     // full-layer host slots, every chain token
  std::vector<int64_t> host_window;   // window-layer host slots, the live nodes' tokens
  // The topmost live node when its window rows cover only its last tokens: restore_chain
  // splits it `split_at` tokens in (the upper part comes back as a tombstone). 0: no split.
  NodeHandle split_node = 0;
  size_t split_at = 0;
};

class SwaRadixTree : public DualLruTree<SwaRadixTree, SwaNode> {
 public:
  using FreeSlots = std::function<Status(const int64_t* full_slots, size_t n)>;
  struct Callbacks {
    // Frees full slots and the window slots they map to.
    FreeSlots free_full;
    // Frees only the window slots of full slots the tree keeps (tombstoning).
    FreeSlots free_swa;
    // Frees full slots of a tombstone, whose window slots are already gone.
    // It must not free window slots even if the mapping still names one: the
    // entry may be stale and name a slot reused since (SGLang #27586), so it
    // should only clear it. Optional: free_full is used when unset, which is
    // safe with an allocator whose free_swa clears the mapping (kvpool's).
    FreeSlots free_tombstone;
  };

  static Status create(int64_t page_size, size_t window, Callbacks callbacks, std::unique_ptr<SwaRadixTree>* out);

  size_t window() const { return window_; }
  bool is_tombstone(NodeHandle node) const;
  static bool has_aux(const SwaNode& n) { return !n.tombstone; }
  // Host-only tombstone leaves are fine: their host copy may hold the window rows a match needs.
  static constexpr bool kHostTombstoneLeaves = true;
  // Splits of the last matched node and of a revived tombstone, a tombstone leaf and a live leaf.
  static constexpr size_t kNodesPerInsert = 4;
  // The upper part's window rows (those of the host copy's tail that fall in it) go into
  // parts->host_window before the split changes anything; on_split moves them over.
  static void prepare_split(const SwaNode& lower, size_t at, SwaNode* parts, std::vector<int64_t>&& tail);
  static void on_split(SwaNode& upper, SwaNode& lower, SwaNode& parts);
  // A new leaf's room for the window rows of its host copy (empty: none yet).
  static void keep_tail_room(SwaNode& leaf, std::vector<int64_t>&& tail) { leaf.host_window = std::move(tail); }

  size_t swa_evictable_size() const { return swa_evictable_; }
  size_t swa_protected_size() const { return swa_protected_; }

  // Longest usable prefix: no tombstone on the path, or at least `window` live
  // tokens since the last tombstone. Splits a node matched part-way; the
  // result node and its ancestors become most recently used.
  SwaMatch match(const int32_t* tokens, size_t n, const std::string& extra_key);
  // As match, into *out, whose slots keep their capacity: allocates nothing when
  // that holds n slots and the match ends on a node boundary (as right after an
  // insert of the same key).
  void match_into(const int32_t* tokens, size_t n, const std::string& extra_key, SwaMatch* out);
  // What match would return, without splitting or stamping: the raw match
  // length, and in *usable the length of the usable prefix.
  size_t cached_prefix(const int32_t* tokens, size_t n, const std::string& extra_key, size_t* usable) const;

  // Caches a sequence. slots[0, prev_prefix_len) are the tree's own slots the
  // caller got from match; for the rest the tree frees the caller's
  // duplicates of cached tokens itself, revives tombstones with the caller's
  // slots (freeing the node's old ones), and takes the uncached tail. So after
  // the call the caller owns none of slots[prev_prefix_len, n). *prefix_len
  // receives the tokens that were cached already.
  //
  // slots[0, swa_evicted_len) have no window slots any more (a running request
  // freed them when they slid out of its window): they never revive a
  // tombstone, and a new part made of them becomes a tombstone node above the
  // new leaf, or, if the whole new part is windowless, is freed instead of
  // cached (a tombstone leaf could never be used).
  //
  // Takes all its memory before its first change (see reserve_inserts).
  //
  // Host tier: a host-only node on the path takes the caller's slots as its device copy
  // again (a tombstone for the caller's windowless tokens, live for its windowed ones), and
  // *prefix_len then ends before the first of them; when nothing windowed follows, the
  // caller's slots from the first host-only node on are freed instead and the nodes stay
  // host-only. `count_hit` counts a write-policy hit on each device node walked (a new
  // leaf starts at 1).
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                size_t prev_prefix_len, size_t* prefix_len, NodeHandle* node = nullptr, size_t swa_evicted_len = 0,
                bool count_hit = false);
  // What caching tokens[0, n) for a running request would do to window KV,
  // without changing anything: insert(prev_prefix_len, swa_evicted_len), then
  // a lock on the end node replacing the request's lock on its prefix.
  struct InsertPreview {
    // A full-locked tombstone lies within the caller's windowed tokens: insert
    // keeps its old slots (its lock holders use them) and frees the caller's,
    // window slots included, which a running request still attends to.
    bool frees_windowed = false;
    // Upper bound on window tokens that the new lock turns from evictable to
    // protected without a window slot of the caller coming back: live,
    // SWA-unlocked nodes over the caller's windowless tokens.
    size_t window_locked = 0;
  };
  InsertPreview preview_insert(const int32_t* tokens, size_t n, const std::string& extra_key, size_t prev_prefix_len,
                               size_t swa_evicted_len) const;

  // Full-locks the node and its ancestors, SWA-locks them until `window`
  // tokens are covered. *uuid receives the id unlock needs (0: the SWA lock
  // reaches the root). The root is a no-op; SWA-locking a tombstone is refused.
  Status lock(NodeHandle node, int64_t* uuid);
  Status unlock(NodeHandle node, int64_t uuid);

  // DualLruTree::reserve_inserts, with the scratch the inserts free the caller's slots through.
  void reserve_inserts(const size_t* bounds, size_t inserts);

  // Phase 1 frees least recently used unlocked leaves (full and window KV)
  // with the unlocked childless tombstones above them, until `full_tokens`
  // full tokens are freed. Phase 2, only while fewer than `swa_tokens` window
  // tokens were freed, walks the SWA list: SWA-unlocked internal nodes become
  // tombstones, leaves are evicted entirely.
  Status evict(size_t full_tokens, size_t swa_tokens, size_t* full_evicted, size_t* swa_evicted);

  // Forgets everything without freeing (the caller clears the pools too).
  void reset();

  // Full slots the tree owns; `with_window` gets those whose window slots it owns too.
  void collect_slots(std::vector<int64_t>* full, std::vector<int64_t>* with_window) const;
  size_t check(std::string* report, size_t max_lines) const;

  // ---- host tier (swa_radix_tree_tier.cpp; docs/host-tier.md, "swa pools") ----
  // A node may hold a host copy: full-layer rows for every token and window-layer rows for
  // its last min(window, tokens) tokens when it was live at backup. Device eviction keeps a
  // node whose path has host copies (or gets them from `keep`) as host-only: a tombstone
  // for the window layers, in the host list. Along every path the device nodes form a
  // prefix. Call once, on an empty tree. `free_host` takes the host slots of copies the
  // tree drops (full rows, window rows; never fails).
  using FreeHost = std::function<void(const int64_t* full, size_t n, const int64_t* window, size_t k)>;
  void enable_host_tier(FreeHost free_host) {
    tiered_ = true;
    enable_host_spares(window_);  // a split's upper part gets at most `window` window rows
    free_host_ = std::move(free_host);
  }
  bool host_tier() const { return tiered_; }
  size_t host_size() const { return host_tokens_; }            // tokens with a host copy
  size_t host_only_size() const { return host_only_tokens_; }  // ... of host-only nodes
  // Asked at device eviction of a node whose path lacks host copies: true when they were
  // made (attach_host), false to delete the node instead. The node is locked meanwhile.
  using KeepOnHost = std::function<bool(NodeHandle node)>;
  void set_keep_on_host(KeepOnHost keep) { keep_ = std::move(keep); }
  // backup_candidates() (the nodes of a path a backup copies) is DualLruTree's.
  // Room in a node's host slot lists for attach_host() (which then allocates nothing).
  void reserve_host(NodeHandle node);
  // Gives a device node without a host copy its host slots: `full` per token, `window` for
  // its last k tokens (k = window_tail(node)).
  Status attach_host(NodeHandle node, const int64_t* full, size_t n, const int64_t* window, size_t k);
  // Tokens at the end of a device node whose window rows a backup copies now: min(window,
  // tokens) for a live node, 0 for a tombstone.
  size_t window_tail(NodeHandle node) const;
  // The host-only nodes from `node` up to (excluded) the first device node: their tokens.
  Status host_chain_tokens(NodeHandle node, size_t* tokens) const;
  // Plans bringing the host chain that ends at `node` back: the nodes covering the last
  // `window` tokens that have window rows come back live, the rest as tombstones; the
  // topmost live node is to be split where its window rows begin. Changes nothing visible
  // (it reserves what restore_chain needs), so a load that is then refused leaves the tree
  // as it was.
  Status plan_restore(NodeHandle node, SwaRestorePlan* plan);
  // Gives the planned chain its device slots (one per chain token, in chain order; the
  // tombstone part's slots without window slots, the live part's with them), making the
  // planned split first. Allocates nothing when no tree call came between it and
  // plan_restore.
  Status restore_chain(const SwaRestorePlan& plan, const int64_t* slots);
  // Locks the full KV of node and its ancestors, host-only ones included, and the window KV
  // of the last `window` live device tokens above the host-only part: a load-back keeps its
  // chain and the device part above it (usable as it was) while it evicts.
  Status pin(NodeHandle node);
  Status unpin(NodeHandle node);
  // Deletes host-only leaves, least recently used first, and the childless tombstones above
  // them, until `tokens` host tokens are freed.
  Status evict_host(size_t tokens, size_t* evicted);
  SwaTierNode tier_node(NodeHandle node) const;
  // The deepest device node at or above `node` (the root if none).
  NodeHandle device_ancestor(NodeHandle node) const;
  // A device node's full slots, appended to *out (nothing for host-only nodes or the root).
  void device_slots(NodeHandle node, std::vector<int64_t>* out) const;
  // Host slots of every copy: full rows, window rows.
  void collect_host_slots(std::vector<int64_t>* full, std::vector<int64_t>* window) const;

 private:
  friend class DualLruTree<SwaRadixTree, SwaNode>;
  using Node = SwaNode;

  SwaRadixTree(size_t window, Callbacks callbacks);

  // One matched node of an insert and what the insert does there.
  struct InsertStep {
    int32_t node;
    size_t pos, len;        // the key's tokens [pos, pos + len) lie on the node
    bool split;             // matched part-way: split after len tokens
    bool own;               // the caller's slots past prev_prefix_len lie here
    bool revive;            // a tombstone revived from `windowed` on
    bool adopt;             // host-only: takes the caller's slots (tombstone before `windowed`, live from it)
    bool drop;              // host-only with nothing windowed after: the caller's slots from here are freed
    size_t from, windowed;  // the caller's own tokens from `from`, windowed from `windowed` (node-relative)
  };
  // The steps of an insert over the cached part of the key (into steps_),
  // changing nothing; returns the tokens already cached.
  size_t plan_insert(const int32_t* tokens, size_t n, int32_t ns, size_t prev_prefix_len, size_t swa_evicted_len);
  // Where the uncached tail [pos, n) splits into a windowless part (a tombstone
  // node) and a windowed part (a live leaf); *windowless_end == n: nothing is cached.
  static size_t windowless_end(size_t pos, size_t n, size_t swa_evicted_len) {
    return std::min(n, std::max(pos, swa_evicted_len));
  }
  // Reserves what the planned steps and the tail [pos, n) need: nodes, their buffers, scratch.
  void reserve_planned(size_t pos, size_t n, size_t swa_evicted_len);

  Status take_over(int32_t id, const int64_t* slots);
  Status free_duplicates(int32_t id, const int64_t* slots, size_t from, size_t to);
  Status evict_leaf(int32_t id, size_t* full_evicted, size_t* swa_evicted);
  Status tombstone(int32_t id, size_t* swa_evicted);
  // Host tier (swa_radix_tree_tier.cpp).
  Status free_node_slots(const SwaNode& n);  // a tombstone's or host-only node's device and host slots
  // Device eviction of a device leaf: to host-only, or deleted.
  Status evict_device_leaf(int32_t id, size_t* full_evicted, size_t* swa_evicted);
  void drop_to_host(int32_t id);                          // device KV freed by the caller
  void adopt(int32_t id, const int64_t* slots, bool live);  // a host-only node takes device slots
  // Full-locks root..id by `delta`; `window`: also swa-locks the live device nodes covering
  // the `window` tokens above the host-only part (a load-back's pin).
  void pin_path(int32_t id, int delta, bool window);

  size_t window_;
  Callbacks cb_;
  bool tiered_ = false;
  KeepOnHost keep_;
  FreeHost free_host_;
  size_t host_tokens_ = 0;
  size_t host_only_tokens_ = 0;
  std::vector<InsertStep> steps_;  // plan_insert's output
  std::vector<int64_t> freed_;     // slots take_over / free_duplicates give back
  size_t swa_evictable_ = 0;
  size_t swa_protected_ = 0;
  int64_t next_uuid_ = 0;
};

}  // namespace kvp::cache
