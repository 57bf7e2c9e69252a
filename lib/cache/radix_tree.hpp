// RadixCache (SGLANG_SEMANTICS §3): a page-aware prefix tree whose nodes own
// the KV slots of the tokens on their edge.
//
// - Keys are token ids in a namespace (`extra_key`, e.g. a LoRA id or a cache
//   salt); children are found by (parent, namespace, first page) in one hash map.
// - Matches and inserts work in whole pages; unaligned tails are never matched
//   (insert rejects unaligned keys, match truncates).
// - A split copies the lock count, so evictable/protected sizes need no change,
//   and emits no events.
// - Eviction takes whole unlocked leaves in policy order from an ordered set
//   that is updated incrementally (no walk over the tree per eviction).
// - Access order uses a logical clock: every node touched by one call gets
//   the same stamp (SGLang stamps them with one wall-clock reading).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cache/kv_events.hpp"
#include "cache/page_hash.hpp"
#include "util/status.hpp"

namespace kvp::cache {

// Number of leading tokens a[0, n) and b[0, n) share.
size_t common_tokens(const int32_t* a, const int32_t* b, size_t n);

enum class EvictionPolicy { kLru, kLfu, kFifo, kMru, kFilo, kPriority };
bool parse_eviction_policy(const std::string& name, EvictionPolicy* out);

// An event with its own copy of its tokens (take_events(), for tests and tools).
struct TakenEvent {
  EventType type;
  int64_t block_hash = 0;
  int64_t parent_hash = 0;
  bool has_parent = false;
  std::vector<int32_t> tokens;  // BlockStored only
};

// A node handle for callers: arena index and generation (stale handles are detected).
using NodeHandle = uint64_t;

struct MatchResult {
  std::vector<int64_t> slots;  // the device-resident part
  NodeHandle last_node = 0;    // the deepest matched node on the device
  // Host tier (enable_host_tier()): tokens matched past last_node in host-only nodes, and
  // the deepest matched node with a host copy (the root when none).
  size_t host_tokens = 0;
  NodeHandle last_host_node = 0;
};

// What a host-tier tree reports about one node (tier_node()).
struct TierNodeInfo {
  size_t tokens = 0;
  bool on_device = true;   // false: host-only (evicted from the device)
  bool on_host = false;    // has a host copy
  uint32_t write_hits = 0;
  int32_t lock_ref = 0;
};

class RadixTree {
 public:
  // Gives evicted slots back: `runs` runs, run r = values[ends[r-1], ends[r]), one run per
  // evicted node in eviction order. With `paged` each value is the first slot of a whole
  // page of consecutive slots (the page's other slots are implied), else one slot per token.
  using FreeSlots = std::function<Status(const int64_t* values, const size_t* ends, size_t runs, bool paged)>;

  RadixTree(int64_t page_size, EvictionPolicy policy, bool events);

  // ---- host tier (SGLANG_SEMANTICS §5.1-§5.3; radix_tree_tier.cpp) ----
  // Nodes may then also hold host pages (one per page of their key) and be device+host
  // or host-only. Device eviction keeps a node as host-only when it and all its
  // ancestors have host copies, so along any root-to-leaf path the device nodes form a
  // prefix and every host-only node can be loaded back. Call once, on an empty tree.
  void enable_host_tier() { tiered_ = true; }
  // Room for the host copies an eviction makes of up to `pages` pages (no allocation then).
  void reserve_tier_scratch(size_t pages) {
    tier_scratch_.reserve(2 * pages);
    tier_nodes_.reserve(pages);
    copied_.reserve(pages);
  }
  bool host_tier() const { return tiered_; }
  // Host tokens held by nodes (device+host and host-only), and those in host-only nodes.
  size_t host_size() const { return host_tokens_; }
  size_t host_only_size() const { return host_only_tokens_; }
  // Host copies for nodes that have none, at device eviction: device pages (page ids:
  // slot / page_size) of the nodes in root-to-leaf order in; host pages of the same
  // count out. False when the host tier cannot take them now (nothing changed).
  using MakeHostCopies = std::function<bool(const int64_t* device_pages, size_t pages, int64_t* host_pages)>;
  // Called with the host pages of nodes deleted from the host tier.
  using FreeHostPages = std::function<void(const int64_t* host_pages, size_t pages)>;
  // Device eviction with the host tier: as evict(), but a node whose copy is (or, through
  // `copy`, can be made) on the host, as are all its ancestors', stays as host-only.
  // `copy_missing`: also make copies of nodes without one (write_back); otherwise only of
  // ancestors of a node that has one. Nodes deleted outright give their host pages to
  // `free_host`.
  Status evict_tiered(size_t tokens, const FreeSlots& free, const MakeHostCopies& copy, bool copy_missing,
                      const FreeHostPages& free_host, size_t* evicted);
  // Whether a host-only leaf must stay for now (its host pages are still being read).
  using KeepHost = std::function<bool(const int64_t* host_pages, size_t pages)>;
  // Deletes host-only leaves in policy order (unlocked, and not kept by `keep`) until
  // `tokens` host tokens are freed.
  Status evict_host(size_t tokens, const FreeHostPages& free_host, size_t* evicted, const KeepHost& keep = nullptr);
  // The nodes on the path root..node, root excluded, that are on the device, have no host
  // copy, can have one (whole pages) and were hit at least `min_hits` times; root-to-leaf order.
  void backup_candidates(NodeHandle node, uint32_t min_hits, std::vector<NodeHandle>* out) const;
  // The device pages (slot / page_size) of a device node, appended to `out`.
  Status device_pages(NodeHandle node, std::vector<int64_t>* out) const;
  // Room in a node's host page list for attach_host() (which then allocates nothing).
  void reserve_host(NodeHandle node);
  // Gives a device node without a host copy its host pages (one per page of its key).
  Status attach_host(NodeHandle node, const int64_t* host_pages, size_t pages);
  // The host-only nodes from `node` up to (excluded) the first node on the device, in
  // root-to-leaf order, their tokens, host pages (root-to-leaf) and that device ancestor.
  Status host_chain(NodeHandle node, std::vector<NodeHandle>* chain, size_t* tokens, std::vector<int64_t>* host_pages,
                    NodeHandle* device_ancestor) const;
  // Puts a host chain back on the device: its nodes, root-to-leaf, take `slots` (one per
  // token, whole pages in order) as their device copy.
  Status restore_chain(const std::vector<NodeHandle>& chain, const int64_t* slots, size_t n);
  // ---- storage tier (radix_tree_tier.cpp) ----
  // The digests of a node's pages (the page-hash chain from the root), computed once and
  // kept in the node; appended to *out.
  Status page_digests(NodeHandle node, std::vector<Digest>* out);
  // The digest of the last page on the path root..node; false for the root.
  bool last_digest(NodeHandle node, Digest* out);
  // The host pages of a node (empty when it has no host copy), appended to *out.
  void host_pages_of(NodeHandle node, std::vector<int64_t>* out) const;
  // The nodes that device eviction gave host copies since the last call (they may have
  // been deleted since: check is_live()).
  void take_copied(std::vector<NodeHandle>* out);
  void clear_copied() { copied_.clear(); }
  // The namespace (extra key) of a node ("" for the root).
  const std::string& namespace_of(NodeHandle node) const;
  // Pages fetched from storage become host-only nodes: tokens[0, n) is a key whose
  // tokens [from, n) have host pages host_pages[0, (n - from) / page) with their digests.
  // The part of the key the tree already has is kept as it is (those pages are not used);
  // the rest becomes one host-only leaf, provided that [0, from) is in the tree and every
  // node above the leaf has a host copy (else nothing changes). *used_from: the first host
  // page the tree took (pages before it are the caller's to free; (n - from) / page: none).
  Status insert_host_only(const int32_t* tokens, size_t n, const std::string& extra_key, size_t from,
                          const int64_t* host_pages, const Digest* digests, size_t* used_from);
  TierNodeInfo tier_node(NodeHandle node) const;
  // Every host page the tree holds (for ownership checks).
  void collect_host_pages(std::vector<int64_t>* out) const;
  // The hit counting of the write policies: inserts count a hit on every device node they
  // walk through unless off (chunked prefill's partial inserts do not count, as SGLang).
  void set_count_hits(bool on) { count_hits_ = on; }

  int64_t page_size() const { return page_; }
  NodeHandle root() const { return handle(kRoot); }
  size_t evictable_size() const { return evictable_; }
  size_t protected_size() const { return protected_; }
  size_t total_size() const { return evictable_ + protected_; }
  size_t node_count() const { return live_nodes_; }
  // lock() calls on nodes other than the root not yet undone by unlock(). Unlike
  // protected_size() it counts locks on host-only nodes, which protect no device tokens.
  size_t held_locks() const { return held_locks_; }

  // Longest cached page-aligned prefix of `tokens` in namespace `extra_key`.
  // Splits a node matched part-way and refreshes the access order of the path.
  MatchResult match(const int32_t* tokens, size_t n, const std::string& extra_key);

  // As match(), writing the slots to `out` (room for n): allocates nothing after
  // reserve_inserts() when the matched path ends on node boundaries (as right after
  // an insert of the same key). Only the slots of tokens [copy_from, copy_to) are
  // written (page multiples; out's other entries are left as they were): a caller that
  // knows the rest (kvseq after an insert: its own slots) skips their copy.
  size_t match_into(const int32_t* tokens, size_t n, const std::string& extra_key, int64_t* out, NodeHandle* last_node,
                    size_t copy_from = 0, size_t copy_to = SIZE_MAX);

  // match_into() of the key the last insert() took, right after that insert (nothing in
  // the tree changed since): the same walk, touches, slots and result, from the path the
  // insert recorded instead of a second lookup of every node by its tokens.
  size_t match_inserted(int64_t* out, NodeHandle* last_node, size_t copy_from = 0, size_t copy_to = SIZE_MAX);

  // Makes room for inserts whose new tokens are at most bounds[i] each (for the
  // leaf and a split's upper part), and as many match_into / lock / unlock calls, so
  // that they do not allocate (KV events still do): for callers that must insert after
  // a change they cannot undo (kvseq_extend caches pages right after allocating them).
  // The spare buffers kept are exactly those for this reservation.
  void reserve_inserts(const size_t* bounds, size_t inserts);
  // Room for one match_into of at most `tokens` tokens (a split), a lock and an unlock.
  void reserve_match(size_t tokens);
  // Room for `n` unlocks (each may make a leaf evictable), so that they do not allocate.
  void reserve_unlocks(size_t n) { prepare(0, n); }

  // Length of the cached prefix of an aligned key, without touching anything; its slots
  // go to `slots` (room for n) unless NULL.
  size_t cached_prefix(const int32_t* tokens, size_t n, const std::string& extra_key,
                       int64_t* slots = nullptr) const;

  // Tokens of the key matched by the tree's nodes, host-only ones included (a host-tier
  // tree: *device receives the device part, what cached_prefix() returns); no change.
  // With `append` (holding `from` slots, a page multiple), the slots of the device part's
  // tokens [from, *device) are appended to it: a caller about to insert the key learns its
  // duplicates' replacements in the walk the insert needs anyway (kvseq_extend).
  size_t walk_prefix(const int32_t* tokens, size_t n, const std::string& extra_key, size_t* device,
                     std::vector<int64_t>* append = nullptr) const;

  // Inserts an aligned key with its slots. *prefix_len receives the tokens that
  // were already cached (the caller keeps owning slots[0, prefix_len)); the tree
  // takes ownership of slots[prefix_len, n).
  // `cached`, when known, is walk_prefix() of the same key (saves a walk). `paged`: the
  // caller checked that slots[cached, n) are whole pages of consecutive slots (saves
  // the scan that decides whether the new leaf stores a value per page).
  Status insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                int32_t priority, size_t* prefix_len, NodeHandle* last_node = nullptr, size_t cached = SIZE_MAX,
                bool paged = false);

  Status lock(NodeHandle node);
  Status unlock(NodeHandle node);
  bool is_live(NodeHandle node) const;

  // Evicts whole unlocked leaves (parents may follow) until at least `tokens`
  // tokens are freed or nothing evictable remains; frees slots through `free`.
  Status evict(size_t tokens, const FreeSlots& free, size_t* evicted) {
    return evict_tiered(tokens, free, nullptr, false, nullptr, evicted);
  }

  // Forgets everything (without freeing slots) and emits AllBlocksCleared; after
  // reserve_reset() it cannot throw.
  void reset();
  void reserve_reset() {
    if (events_enabled_) events_.reserve(events_.size() + 1);
  }

  // The queued events and their tokens, oldest first, left queued until clear_events()
  // (a caller whose buffer is too small drains nothing).
  const std::vector<KvEvent>& queued_events() const { return events_; }
  const std::vector<int32_t>& queued_event_tokens() const { return event_tokens_; }
  void clear_events() {
    events_.clear();  // capacities kept: the next events reuse them
    event_tokens_.clear();
  }
  // Drains the queue as self-contained copies.
  std::vector<TakenEvent> take_events();

  // Every slot the tree owns (for ownership checks), and an internal consistency check.
  void collect_slots(std::vector<int64_t>* out) const;
  // Calls f(values, n, paged) with the stored values of every live node (no copy);
  // paged: one value per page, its first slot.
  template <class F>
  void for_each_value(F&& f) const {
    for (size_t id = 1; id < nodes_.size(); ++id) {
      if (nodes_[id].live) f(nodes_[id].value.data(), nodes_[id].value.size(), nodes_[id].paged);
    }
  }
  size_t check(std::string* report, size_t max_lines) const;

 private:
  static constexpr int32_t kRoot = 0;
  using OrderKey = std::tuple<int64_t, int64_t, int32_t>;

  struct Node {
    int32_t parent = -1;
    int32_t extra = 0;
    uint32_t generation = 0;
    int32_t children = 0;
    int32_t lock_ref = 0;
    int32_t priority = 0;
    bool live = false;
    uint8_t order_set = 0;  // 0: in no eviction order; kDeviceOrder / kHostOrder: in that one
    bool paged = false;  // see `value`
    bool evicted = false;  // host tier: the device copy is gone (value empty), `host` holds the tokens
    int32_t device_children = 0;  // children not evicted (all of them without the host tier)
    uint32_t write_hits = 0;      // host tier: hits counted for the write policy
    uint64_t last_access = 0;
    uint64_t creation = 0;
    uint64_t hits = 0;
    // child_hash() of its link in the parent's table, kept so that unlinking (every
    // evicted node) reads neither the key nor hashes it again.
    uint64_t link_hash = 0;
    std::set<OrderKey>::iterator order_it{};  // its entry in the set named by order_set
    std::vector<int32_t> key;
    // The slots of the key's tokens: one per token, or, when `paged`, one per page
    // (the page's first slot; the others follow it in order), which is what every
    // node of a pool's tree holds when page_size > 1 (whole allocated pages).
    std::vector<int64_t> value;
    std::vector<Digest> hashes;  // one per page, when events are on
    std::vector<int64_t> host;   // host tier: host page per page of the key, empty if not backed up
  };
  static constexpr uint8_t kDeviceOrder = 1, kHostOrder = 2;
  // Writes the slots of node tokens [from, from + count) (page multiples when paged).
  void copy_slots(const Node& n, size_t from, size_t count, int64_t* out) const;
  // The same slots appended to *out.
  void append_slots(const Node& n, size_t from, size_t count, std::vector<int64_t>* out) const;

  NodeHandle handle(int32_t id) const;
  int32_t resolve(NodeHandle h) const;  // -1 if stale
  int32_t intern(const std::string& extra_key);
  uint64_t child_hash(int32_t parent, int32_t extra, const int32_t* page_tokens) const;
  int32_t find_child(int32_t parent, int32_t extra, const int32_t* tokens) const;
  void link_child(int32_t parent, int32_t child);
  void unlink_child(int32_t parent, int32_t child);
  int32_t new_node();
  void free_node(int32_t id);
  size_t match_len(const Node& node, const int32_t* tokens, size_t n) const;
  int32_t split(int32_t child, size_t at);
  int32_t split_visited(int32_t child, size_t at, uint64_t stamp);  // split() of a child the walk stamped
  void touch(int32_t id, uint64_t stamp);
  void refresh_order(int32_t id);
  OrderKey order_key(const Node& n, int32_t id) const;
  void ensure_hashes(int32_t id);
  void emit_stored(int32_t id);
  void emit_removed(const Node& n);
  // Makes, before a call changes anything, whatever the change may allocate: arena
  // room for `new_nodes` nodes, spare nodes of the child map and the eviction order,
  // and room in the free-id list. Linking, ordering and freeing then cannot throw,
  // so a call that runs out of host memory fails before its first change.
  void prepare(size_t new_nodes, size_t orders = 1);
  // Moves the best-fitting spare key/value buffer pair with room for `tokens` tokens and
  // `values` stored values into *key / *value, if one is left (reserve_inserts() /
  // reserve_match() made them); otherwise the caller's assign allocates.
  void take_spare_leaf(size_t tokens, size_t values, std::vector<int32_t>* key, std::vector<int64_t>* value,
                       std::vector<int64_t>* host);
  // The stored values a node of `tokens` tokens may need: one per page while every node
  // of the tree is paged (page_size > 1), else one per token.
  size_t values_for(size_t tokens) const {
    const size_t P = static_cast<size_t>(page_);
    return P > 1 && all_paged_ ? (tokens + P - 1) / P : tokens;
  }
  // The child-map entry of `child` under `parent` (end() if missing).
  struct ChildSlot {
    uint64_t hash = 0;
    int32_t id = -1;  // -1: empty
  };
  ChildSlot* child_entry(int32_t parent, int32_t child);
  // Room for `links` child links without growing (grows the table: may allocate).
  void reserve_children(size_t links);
  // The digest of the page that ends at `pos` of a cached key (nullptr at 0 or without hashes).
  const Digest* digest_before(const int32_t* tokens, size_t pos, int32_t extra) const;

  int64_t page_;
  EvictionPolicy policy_;
  bool events_enabled_;
  std::vector<Node> nodes_;
  std::vector<int32_t> free_ids_;
  size_t live_nodes_ = 0;
  // The nodes of the last insert's key, root excluded, in walk order (match_inserted()).
  std::vector<int32_t> insert_path_;
  // Child links: an open-addressing table (linear probing, at most half full, power-of-two
  // size) of (hash of parent, namespace and first page; child id); deletion shifts back.
  std::vector<ChildSlot> child_table_;
  size_t child_links_ = 0;
  std::unordered_map<std::string, int32_t> namespaces_;
  std::vector<std::string> namespace_names_;  // by id
  std::set<OrderKey> evictable_leaves_;  // device eviction candidates
  std::set<OrderKey> host_leaves_;       // host tier: host-only unlocked leaves
  bool tiered_ = false;
  bool count_hits_ = true;
  size_t host_tokens_ = 0, host_only_tokens_ = 0;
  // Host-tier pieces of insert/evict (radix_tree_tier.cpp).
  void adopt(int32_t id, const int64_t* slots);  // a host-only node takes device slots
  bool path_on_host(int32_t id) const;           // id and every ancestor have host copies
  // Host copies (through `copy`) for id and its ancestors that have none; false if impossible.
  bool make_host_copies(int32_t id, const MakeHostCopies& copy);
  void drop_to_host(int32_t id);                 // device copy gone, host copy kept
  void emit_host(const Node& n, bool stored);
  std::vector<int64_t> tier_scratch_;
  std::vector<int32_t> tier_nodes_;
  std::vector<NodeHandle> copied_;  // nodes make_host_copies() copied (take_copied())
  // Spare container nodes and leaf buffers made by prepare() / reserve_inserts().
  std::vector<std::set<OrderKey>::node_type> spare_orders_;
  bool has_hashes_ = false;            // some node has kept page digests (events, storage)
  std::vector<Digest> spare_hashes_;   // room for a split's digests (reserve_match)
  struct LeafBuffer {
    std::vector<int32_t> key;
    std::vector<int64_t> value;
    std::vector<int64_t> host;  // host tier: room for the node's host pages
    size_t room() const { return key.capacity(); }  // tokens
    bool fits(size_t tokens, size_t values, size_t host_pages) const {
      return key.capacity() >= tokens && value.capacity() >= values && host.capacity() >= host_pages;
    }
  };
  // Host pages a node of `tokens` tokens may get (0 without the host tier: no room kept).
  size_t host_for(size_t tokens) const { return tiered_ ? tokens / static_cast<size_t>(page_) : 0; }
  std::vector<LeafBuffer> spare_leaves_;  // ascending room after reserve_leaves(); taken ones left empty
  // take_spare_leaf's index over spare_leaves_: each spare's room when it was made (a
  // taken spare keeps its entry, so the array stays sorted for a binary search), and the
  // next spare not taken yet (path-compressed; entry n is the end). O(log n) per take:
  // a batch of n inserts used to search all n spares for each of its 2n takes.
  std::vector<size_t> spare_rooms_;
  std::vector<uint32_t> spare_next_;
  size_t next_spare(size_t i);
  // The index of the smallest spare not taken yet that fits, or spare_leaves_.size().
  size_t find_spare(size_t tokens, size_t values);
  std::vector<LeafBuffer> next_leaves_;  // reserve_leaves' scratch (capacity reused)
  std::vector<size_t> leaf_needs_;       // the tokens each expected leaf or split needs
  std::vector<uint8_t> leaf_reused_;     // reserve_leaves' scratch: need i keeps a spare
  void reserve_leaves();                 // makes spare_leaves_ fit leaf_needs_
  // No node without `paged` was made since the last reset (page_size > 1): the spares'
  // value buffers need a value per page only (values_for). Cleared until the next reset
  // by an insert of slots that are not whole pages of consecutive slots.
  bool all_paged_ = true;
  size_t evictable_ = 0;
  size_t protected_ = 0;
  size_t held_locks_ = 0;  // see held_locks()
  uint64_t clock_ = 0;
  uint32_t generations_ = 0;
  std::vector<KvEvent> events_;
  std::vector<int32_t> event_tokens_;  // the BlockStored events' tokens, in queue order
  // Room for `events` more events with `tokens` more tokens (before a call's first change).
  void reserve_events(size_t events, size_t tokens);
  void push_event(EventType type, int64_t block_hash, bool has_parent, int64_t parent_hash, const int32_t* tokens,
                  size_t count);
  // BlockStored for `pages` consecutive pages (digests `hashes`, tokens from `tokens`), the
  // first one's parent given, each later one's the page before.
  void push_stored(const Digest* hashes, size_t pages, bool first_has_parent, int64_t first_parent,
                   const int32_t* tokens);
  // evict()'s batch: the evicted nodes' values and the end of each node's run.
  static constexpr size_t kEvictBatch = size_t{1} << 16;
  std::vector<int64_t> evict_values_;
  std::vector<size_t> evict_ends_;
};

}  // namespace kvp::cache
