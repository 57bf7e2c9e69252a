// Mechanics shared by the page-size-1 prefix trees with two resources per node
// (MambaRadixTree: full KV + a mamba state; SwaRadixTree: full KV + window KV),
// SGLANG_SEMANTICS §4.0: the node arena, the two intrusive LRU lists and their
// eviction candidates, access stamping of a path, splitting a node, removing an
// evicted leaf together with the childless tombstones above it, and the
// structural part of the self-check.
//
// A node "has aux" when it holds the second resource; a node without it is a
// tombstone. Tombstones are only in the full list. The derived tree (CRTP)
// provides:
//   static bool has_aux(const Node&);
//   // May allocate; `tail` is a spare buffer for host rows of the node's tail (see
//   // enable_host_spares), whose room the derived tree may use.
//   static void prepare_split(const Node& lower, size_t at, Node* parts, std::vector<int64_t>&& tail);
//   static void on_split(Node& upper, Node& lower, Node& parts);  // fields beyond key, value, ns, full_lock
//   // A new leaf keeps `tail` (room for host rows of its tail, see enable_host_spares) if it uses it.
//   static void keep_tail_room(Node& leaf, std::vector<int64_t>&& tail);
//   static constexpr bool kHostTombstoneLeaves;      // may a host-only leaf be a tombstone
//
// Host memory (DESIGN.md: a failed call changes nothing): every step that
// changes the tree runs on memory taken before the call's first change.
// prepare() reserves the arena and both lists for a number of new nodes (and
// scratch sized by the node count), reserve_buffers() the key/slot buffers of
// the nodes a call will make. split() and add_leaf() prepare for themselves,
// before they change anything, so a call that makes one node is safe as it is;
// a call that makes several, or that changes a pool first (kvseq), reserves
// beforehand (reserve_inserts(), reserve_split()). A split's derived fields
// take their memory in Derived::prepare_split, before the split's first change,
// so on_split only moves what it got.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cache/kv_events.hpp"
#include "cache/lru_list.hpp"
#include "cache/node_arena.hpp"
#include "util/status.hpp"

namespace kvp::cache {

struct DualNodeBase : TreeNodeBase {
  int32_t full_lock = 0;
  int32_t aux_lock = 0;  // mamba lock / swa lock
  LruLinks full_lru;
  LruLinks aux_lru;
  // Host tier (both trees, when their host tier is enabled).
  // A host-only node (evicted) has no device KV (value empty) and is in host_lru
  // instead of full_lru; host_children counts such children, so a device node is a
  // device leaf when every child is host-only.
  bool evicted = false;
  int32_t host_children = 0;
  uint32_t write_hits = 0;      // hits counted for the write policy
  std::vector<int64_t> host;    // host slot per token; empty: no host copy
  LruLinks host_lru;
  Digest tail{};  // KV events: the digest of the node's last token (the chain from the root)
};

// While alive, its tree's reserve_events() asks for nothing (DualLruTree::hold_event_room).
class EventRoomHold {
 public:
  EventRoomHold() = default;
  explicit EventRoomHold(int* holds) : holds_(holds) { ++*holds_; }
  EventRoomHold(EventRoomHold&& o) noexcept : holds_(o.holds_) { o.holds_ = nullptr; }
  EventRoomHold& operator=(EventRoomHold&& o) noexcept {
    if (this != &o) {
      release();
      holds_ = o.holds_;
      o.holds_ = nullptr;
    }
    return *this;
  }
  EventRoomHold(const EventRoomHold&) = delete;
  EventRoomHold& operator=(const EventRoomHold&) = delete;
  ~EventRoomHold() { release(); }

 private:
  void release() {
    if (holds_ != nullptr) --*holds_;
    holds_ = nullptr;
  }
  int* holds_ = nullptr;
};

template <class Derived, class Node>
class DualLruTree {
 public:
  DualLruTree(const DualLruTree&) = delete;
  DualLruTree& operator=(const DualLruTree&) = delete;

  NodeHandle root() const { return nodes_.handle(kRoot); }
  bool is_live(NodeHandle node) const { return nodes_.resolve(node) >= 0; }
  size_t node_count() const { return nodes_.live_count(); }  // the root included
  // Tokens on the node's edge (0 for the root or a stale handle).
  size_t key_length(NodeHandle h) const {
    const int32_t id = nodes_.resolve(h);
    return id < 0 ? 0 : node(id).key.size();
  }
  size_t full_evictable_size() const { return full_evictable_; }
  size_t full_protected_size() const { return full_protected_; }

  // Makes room for `inserts` inserts whose new tokens are at most bounds[i] each,
  // and for the match, lock and unlock after each, so that none of them
  // allocates: for callers that insert after a change they cannot undo (kvseq
  // caches a request's tokens after freeing its out-of-window slots or forking
  // its state). Every node an insert makes (a split's upper part, a leaf) lies
  // past the caller's cached prefix, so bounds[i] bounds each of them.
  void reserve_inserts(const size_t* bounds, size_t inserts) {
    std::vector<size_t> needs;
    size_t tokens = 0;
    for (size_t i = 0; i < inserts; ++i) {
      needs.insert(needs.end(), Derived::kNodesPerInsert, bounds[i]);
      tokens += bounds[i];
    }
    reserve_events(tokens, tokens);  // and the evictions a kvseq call makes after its inserts
    prepare(needs.size());
    reserve_buffers(needs.data(), needs.size());
  }
  // Room for one match of at most `tokens` tokens (a split), for callers that
  // match after a change (kvseq_retract).
  void reserve_match(size_t tokens) {
    prepare(1);
    reserve_buffers(&tokens, 1);
  }
  // Room for the KV events of any eviction (and its write_back copies), for callers that
  // evict after a change they cannot undo and insert nothing before (kvseq_decode frees
  // out-of-window slots first). Changes nothing visible.
  void reserve_eviction_events() { reserve_events(0); }
  // For a caller that reserved, before its first change, room for every KV event the rest
  // of its call can queue (reserve_events counts 3 per token held, which bounds a token's
  // events over any evictions), and whose later steps would ask again after changes: their
  // evictions' reserve_events(0) counts tokens whose events were already queued (a token
  // copied to the host and dropped queues two and is still held) and could grow the queue
  // there. While the hold lives, reserve_events() asks for nothing.
  EventRoomHold hold_event_room() { return EventRoomHold(&event_room_holds_); }
  // Room for one split of `at` tokens off a node (with its host slots) that then
  // allocates nothing, for callers that split after a change they cannot undo (a
  // load-back's planned split, once the device slots are taken). Changes nothing visible.
  void reserve_split(size_t at) {
    prepare(1);
    reserve_buffers(&at, 1);
  }
  // ---- KV events (prefix_cache.events; docs/prefix_cache.md#kv-events) ----
  // One event per token (page size 1): BlockStored when a node's device KV appears (insert,
  // load-back, an insert over a host-only node), BlockRemoved when it goes (deleted, or
  // evicted to the host), HostStored / HostRemoved when its host copy is made / dropped,
  // AllBlocksCleared at reset. Window or mamba-state loss (tombstones) is not an event.
  // Call once, on an empty tree.
  void enable_events() { events_on_ = true; }
  bool events_enabled() const { return events_on_; }
  const std::vector<KvEvent>& queued_events() const { return events_.events(); }
  const std::vector<int32_t>& queued_event_tokens() const { return events_.tokens(); }
  void clear_events() { events_.clear(); }

  // Interns a namespace ahead of an insert. Invisible: a namespace without nodes matches nothing.
  void reserve_namespace(const std::string& extra_key) { (void)nodes_.intern(extra_key); }

  // Host tier (both trees): the device nodes of root..node without a host copy,
  // root-to-leaf, appended to *out; stops at the first with fewer than `min_hits` hits
  // (backed-up nodes stay a prefix of the path). The path goes in leaf-to-root, is
  // reversed, then cut (out's capacity is the caller's: no allocation when it holds the path).
  void backup_candidates(NodeHandle h, uint32_t min_hits, std::vector<NodeHandle>* out) const {
    const int32_t id = nodes_.resolve(h);
    if (id <= kRoot) return;
    const size_t first = out->size();
    for (int32_t x = id; x != kRoot; x = node(x).parent) out->push_back(nodes_.handle(x));
    std::reverse(out->begin() + static_cast<long>(first), out->end());
    size_t keep = first;
    for (size_t i = first; i < out->size(); ++i) {
      const Node& n = node(nodes_.resolve((*out)[i]));
      if (!n.host.empty()) continue;
      if (n.evicted || n.write_hits < min_hits) break;
      (*out)[keep++] = (*out)[i];
    }
    out->resize(keep);
  }

 protected:
  static constexpr int32_t kRoot = 0;  // NodeArena makes the root first

  DualLruTree() : full_lru_(nodes_.storage()), aux_lru_(nodes_.storage()), host_lru_(nodes_.storage()) {}
  ~DualLruTree() = default;

  Node& node(int32_t id) { return nodes_[id]; }
  const Node& node(int32_t id) const { return nodes_[id]; }
  bool has_aux(int32_t id) const { return Derived::has_aux(node(id)); }
  // Host tier: every node of root..id (the root excluded) has a host copy.
  bool path_on_host(int32_t id) const {
    for (int32_t x = id; x != kRoot; x = node(x).parent) {
      if (node(x).host.empty()) return false;
    }
    return true;
  }

  // Host tier: the spare buffers also get room for a node's host slots, and for
  // `tail_room` host rows of its tail (the swa tree's window rows), so that the splits
  // of an insert or a load-back whose memory was reserved allocate nothing either.
  void enable_host_spares(size_t tail_room) {
    host_spares_ = true;
    tail_room_ = tail_room;
  }

  // KV events: room, before a call's first change, for every event it can queue: `more`
  // stored tokens, and for each token the tree holds (after `growth` more come in) a device
  // removal, a write_back copy and a host removal (evictions), plus one (a reset).
  void reserve_events(size_t more, size_t growth = 0) {
    if (!events_on_ || event_room_holds_ > 0) return;
    const size_t held = full_evictable_ + full_protected_ + static_cast<const Derived*>(this)->host_size() + growth;
    events_.reserve(3 * held + more + 1);
  }
  // KV events: room for `count` more events. Enough for a node's HostStored events: inside
  // an eviction the room reserve_events(0) made (a write_back copy per token) holds them, and
  // reserve_events(count) there would ask for that room again and grow the queue mid-eviction.
  void reserve_event_room(size_t count) {
    if (events_on_) events_.reserve(count);
  }
  // Queues one event of `type` per token of node `id` (its parent still linked).
  void emit(int32_t id, EventType type) {
    if (events_on_) emit_events(id, type);
  }
  // Sets node `id`'s tail digest from its parent's (after it is linked or its key changed).
  void set_tail(int32_t id) {
    if (events_on_) compute_tail(id);
  }
  void emit_cleared() {
    if (events_on_) events_.push_cleared();
  }

  // Forgets every node; the root holds both locks so nothing treats it as evictable.
  void reset_structure() {

    nodes_.reset();
    full_lru_.clear();
    aux_lru_.clear();
    host_lru_.clear();
    node(kRoot).full_lock = node(kRoot).aux_lock = 1;
    full_evictable_ = full_protected_ = 0;
  }

  // Re-derives a node's eviction candidacy after its locks, children or aux changed.
  void refresh(int32_t id) {
    if (id == kRoot) return;
    const Node& n = node(id);
    if (full_lru_.contains(id)) full_lru_.set_candidate(id, n.children == n.host_children && n.full_lock == 0);
    if (host_lru_.contains(id)) host_lru_.set_candidate(id, n.children == 0 && n.full_lock == 0);
    if (aux_lru_.contains(id)) aux_lru_.set_candidate(id, n.aux_lock == 0);
  }

  void touch(int32_t id) {
    if (node(id).evicted) {
      host_lru_.move_to_mru(id);
    } else {
      full_lru_.move_to_mru(id);
    }
    if (has_aux(id)) aux_lru_.move_to_mru(id);
  }

  // Makes `id` the most recent node and each ancestor the next older one, so a
  // path ages from the root down (tombstones are only in the full list).
  // Uses path_, whose capacity prepare() keeps at the arena's: no allocation.
  void touch_path(int32_t id) {
    path_.clear();
    for (int32_t x = id; x != kRoot; x = node(x).parent) path_.push_back(x);
    for (auto it = path_.rbegin(); it != path_.rend(); ++it) touch(*it);
  }

  // Room for `new_nodes` new nodes in the arena and both lists, and scratch
  // sized by the node count. Changes nothing visible.
  void prepare(size_t new_nodes) {
    nodes_.reserve(new_nodes);
    const size_t limit = nodes_.id_limit_capacity();
    full_lru_.reserve(limit);
    aux_lru_.reserve(limit);
    host_lru_.reserve(limit);
    if (path_.capacity() < limit) path_.reserve(limit);
  }

  // Makes the spare buffers able to serve one node of each of the `count` sizes
  // (best fit, see take_buffers). Allocates nothing when the spares serve them
  // already; else makes exactly one spare per size, reusing the spares with room
  // and allocating the rest, and moves the spares only after the last allocation.
  // Sizes of 0 need no buffer.
  void reserve_buffers(const size_t* sizes, size_t count) {
    if (spares_serve(sizes, count)) return;
    std::vector<size_t> needs(sizes, sizes + count);
    needs.erase(std::remove(needs.begin(), needs.end(), size_t{0}), needs.end());
    std::sort(needs.begin(), needs.end(), std::greater<size_t>());
    std::sort(spares_.begin(), spares_.end(), [this](const Buffer& a, const Buffer& b) { return room(a) > room(b); });
    std::vector<Buffer> next(needs.size());
    std::vector<bool> reused(needs.size(), false);
    size_t j = 0;  // the largest spares serve the largest needs
    for (size_t i = 0; i < needs.size(); ++i) {
      if (j < spares_.size() && room(spares_[j]) >= needs[i]) {
        reused[i] = true;
        ++j;
      } else {
        next[i].key.reserve(needs[i]);
        next[i].value.reserve(needs[i]);
        if (host_spares_) {
          next[i].host.reserve(needs[i]);
          next[i].tail.reserve(std::min(needs[i], tail_room_));
        }
      }
    }
    j = 0;
    for (size_t i = 0; i < needs.size(); ++i) {
      if (reused[i]) next[i] = std::move(spares_[j++]);
    }
    spares_.swap(next);
  }

  // Whether the spares can serve one node of each size, without allocating: for
  // every size t, as many spares have room for t as sizes are at least t (the
  // sizes then match spares largest first).
  bool spares_serve(const size_t* sizes, size_t count) const {
    for (size_t i = 0; i < count; ++i) {
      if (sizes[i] == 0) continue;
      const size_t wanted = static_cast<size_t>(std::count_if(sizes, sizes + count, [&](size_t x) { return x >= sizes[i]; }));
      const size_t have = static_cast<size_t>(
          std::count_if(spares_.begin(), spares_.end(), [&](const Buffer& b) { return room(b) >= sizes[i]; }));
      if (have < wanted) return false;
    }
    return true;
  }

  // Key and slot buffers for a node of `n` tokens, filled from tokens/slots:
  // the smallest spare with room, else fresh ones (allocating). `host` and `tail`, when
  // given, get the spare's empty host buffers (a split's upper part fills them); with the
  // host tier, with room for the node's host copy (and its tail's rows) in any case.
  void take_buffers(const int32_t* tokens, const int64_t* slots, size_t n, std::vector<int32_t>* key,
                    std::vector<int64_t>* value, std::vector<int64_t>* host = nullptr,
                    std::vector<int64_t>* tail = nullptr) {
    size_t best = spares_.size();
    for (size_t i = 0; i < spares_.size(); ++i) {
      if (room(spares_[i]) >= n && (best == spares_.size() || room(spares_[i]) < room(spares_[best]))) best = i;
    }
    if (best < spares_.size()) {
      *key = std::move(spares_[best].key);
      *value = std::move(spares_[best].value);
      if (host != nullptr) *host = std::move(spares_[best].host);
      if (tail != nullptr) *tail = std::move(spares_[best].tail);
      std::swap(spares_[best], spares_.back());
      spares_.pop_back();
    }
    if (host_spares_) {  // a spare has the room already
      if (host != nullptr) host->reserve(n);
      if (tail != nullptr) tail->reserve(std::min(n, tail_room_));
    }
    key->assign(tokens, tokens + n);
    if (slots != nullptr) {
      value->assign(slots, slots + n);
    } else {
      // A host-only part: room for its device slots now, so that a load-back or an insert
      // that adopts it allocates nothing after its first change.
      value->clear();
      value->reserve(n);
    }
  }

  size_t match_len(int32_t id, const int32_t* tokens, size_t n) const { return common_prefix(node(id).key, tokens, n); }

  // How far tokens[0, n) match in namespace `ns`, changing nothing; *partial
  // receives the tokens matched in a last node that goes on past them (where a
  // match or insert splits it), 0 if the match ends on a node boundary.
  size_t descend(int32_t ns, const int32_t* tokens, size_t n, size_t* partial) const {
    *partial = 0;
    int32_t cur = kRoot;
    size_t pos = 0;
    while (pos < n) {
      size_t len = 0;
      const int32_t c = find_edge(cur, ns, tokens + pos, n - pos, &len);
      if (c < 0) break;
      pos += len;
      if (len < node(c).key.size()) {
        *partial = len;
        break;
      }
      cur = c;
    }
    return pos;
  }

  // The child of `parent` whose key starts tokens[0], and how many tokens it
  // shares with them; -1 if none. Changes nothing.
  int32_t find_edge(int32_t parent, int32_t ns, const int32_t* tokens, size_t n, size_t* len) const {
    const int32_t c = nodes_.find_child(parent, ns, tokens[0]);
    *len = c < 0 ? 0 : match_len(c, tokens, n);
    return c;
  }

  // Splits `child` after `at` tokens; returns the new upper node. The upper
  // part copies the full lock (locks below pass through it) so sizes stay
  // unchanged; Derived::on_split sets the rest. The lower part is re-listed
  // after the upper one: descendants stay newer.
  // Takes its memory before its first change (none after reserve_split(at)).
  int32_t split(int32_t child, size_t at) {
    Node parts;  // the upper part's buffers, filled before anything changes
    std::vector<int64_t> tail;
    const bool evicted = node(child).evicted;
    take_buffers(node(child).key.data(), evicted ? nullptr : node(child).value.data(), at, &parts.key, &parts.value,
                 &parts.host, &tail);
    if (!node(child).host.empty()) parts.host.assign(node(child).host.begin(), node(child).host.begin() + static_cast<long>(at));
    Derived::prepare_split(node(child), at, &parts, std::move(tail));
    prepare(1);
    const int32_t upper = nodes_.create();  // may grow the storage: index from here on
    const bool child_aux = has_aux(child);
    if (evicted) {
      host_lru_.remove(child);
    } else {
      full_lru_.remove(child);
    }
    if (child_aux) aux_lru_.remove(child);
    {
      Node& u = node(upper);
      Node& c = node(child);
      u.ns = c.ns;
      u.key = std::move(parts.key);
      u.value = std::move(parts.value);
      u.full_lock = c.full_lock;
      u.evicted = evicted;
      u.host_children = evicted ? 1 : 0;  // the lower part
      u.write_hits = c.write_hits;
      u.host = std::move(parts.host);
      Derived::on_split(u, c, parts);
    }
    const int32_t parent = node(child).parent;
    nodes_.unlink(child);
    nodes_.link(parent, upper);
    Node& c = node(child);
    c.key.erase(c.key.begin(), c.key.begin() + static_cast<long>(at));
    if (!evicted) c.value.erase(c.value.begin(), c.value.begin() + static_cast<long>(at));
    if (!c.host.empty()) c.host.erase(c.host.begin(), c.host.begin() + static_cast<long>(at));
    nodes_.link(upper, child);
    set_tail(upper);  // the lower part's tail is the node's as before
    if (evicted) {
      host_lru_.push_mru(upper);
      host_lru_.push_mru(child);
    } else {
      full_lru_.push_mru(upper);
      full_lru_.push_mru(child);
    }
    if (has_aux(upper)) aux_lru_.push_mru(upper);
    if (child_aux) aux_lru_.push_mru(child);
    refresh(upper);
    refresh(child);
    return upper;
  }

  // Adds a new leaf under `parent` holding tokens/slots [0, n); the caller
  // sets its aux fields through `init` before it is listed. Takes its memory
  // before its first change.
  template <class Init>
  int32_t add_leaf(int32_t parent, int32_t ns, const int32_t* tokens, const int64_t* slots, size_t n, Init&& init) {
    if (events_on_) events_.reserve(n);
    std::vector<int32_t> key;
    std::vector<int64_t> value, host, tail;
    // Host tier: the leaf keeps the spare's room for its host copy (a spare has it), so
    // that a write_back copy made at device eviction, which an eviction already under way
    // cannot undo, allocates nothing (as RadixTree's leaves keep theirs).
    take_buffers(tokens, slots, n, &key, &value, host_spares_ ? &host : nullptr, host_spares_ ? &tail : nullptr);
    prepare(1);
    const int32_t leaf = nodes_.create();
    Node& l = node(leaf);
    l.ns = ns;
    l.key = std::move(key);
    l.value = std::move(value);
    l.host = std::move(host);  // empty: no host copy yet
    Derived::keep_tail_room(l, std::move(tail));
    init(l);
    nodes_.link(parent, leaf);
    set_tail(leaf);
    emit(leaf, EventType::kBlockStored);
    full_lru_.push_mru(leaf);
    if (has_aux(leaf)) aux_lru_.push_mru(leaf);
    full_evictable_ += n;
    refresh(parent);
    refresh(leaf);
    return leaf;
  }

  // Deletes leaf `id` (its slots already freed, out of the aux list), then every
  // unlocked childless tombstone above it, freeing their slots (device and host)
  // with `free_tombstone(node)`: a tombstone leaf would only hold KV nobody can use.
  // Host-only nodes (host tier) leave the host list; the sizes count device tokens.
  template <class FreeTombstone>
  Status remove_leaf_cascade(int32_t id, size_t* full_evicted, FreeTombstone&& free_tombstone) {
    int32_t x = id;
    while (true) {
      if (!node(x).evicted) emit(x, EventType::kBlockRemoved);
      if (!node(x).host.empty()) emit(x, EventType::kHostRemoved);
      Node& n = node(x);
      const int32_t parent = n.parent;
      if (n.evicted) {
        host_lru_.remove(x);
        --node(parent).host_children;
      } else {
        full_evictable_ -= n.key.size();
        *full_evicted += n.value.size();
        full_lru_.remove(x);
      }
      nodes_.unlink(x);
      nodes_.destroy(x);
      x = parent;
      if (x == kRoot || node(x).children != 0 || has_aux(x) || node(x).full_lock != 0) break;
      const Status st = free_tombstone(node(x));
      if (!st.is_ok()) {
        refresh(x);
        return st;
      }
    }
    refresh(x);  // may have become a leaf
    return Status::ok();
  }

  // Full slots of every node, and `aux(node, out)` for nodes with aux.
  template <class Aux>
  void collect(std::vector<int64_t>* full, Aux&& aux) const {
    for (size_t id = 1; id < nodes_.id_limit(); ++id) {
      const Node& n = node(static_cast<int32_t>(id));
      if (!n.live) continue;
      if (full != nullptr) full->insert(full->end(), n.value.begin(), n.value.end());
      if (Derived::has_aux(n)) aux(n);
    }
  }

  // The invariants both trees share (SGLANG_SEMANTICS §4.1/§4.2): list
  // structure and membership, candidacy, child counts and lock nesting, no
  // tombstone leaf or locked tombstone, and the cached sizes. `aux_weight(n)`
  // is what a node with aux adds to the aux sizes; `extra(id, who, complain)`
  // checks derived fields. `tree` and `aux` name things in messages.
  template <class AuxWeight, class Extra>
  size_t check_structure(const std::string& tree, const std::string& aux, size_t aux_evictable, size_t aux_protected,
                         std::string* report, size_t max_lines, AuxWeight&& aux_weight, Extra&& extra) const {
    size_t problems = 0;
    auto complain = [&](const std::string& line) {
      if (problems++ < max_lines) *report += line + "\n";
    };
    for (const std::string& err : {full_lru_.verify(), aux_lru_.verify(), host_lru_.verify()}) {
      if (!err.empty()) complain(tree + " lru list: " + err);
    }
    size_t full_ev = 0, full_pr = 0, aux_ev = 0, aux_pr = 0, full_members = 0, aux_members = 0, host_members = 0;
    std::vector<int32_t> child_count(nodes_.id_limit(), 0), host_child_count(nodes_.id_limit(), 0);
    std::vector<int64_t> child_locks(nodes_.id_limit(), 0);
    for (size_t i = 1; i < nodes_.id_limit(); ++i) {
      const int32_t id = static_cast<int32_t>(i);
      const Node& n = node(id);
      if (!n.live) continue;
      const std::string who = tree + " node " + std::to_string(id);
      if (n.key.empty() || n.key.size() != (n.evicted ? n.host.size() : n.value.size()) || (n.evicted && !n.value.empty())) {
        complain(who + " has " + std::to_string(n.key.size()) + " tokens and " + std::to_string(n.value.size()) + " slots");
        continue;
      }
      if (n.parent < 0 || !node(n.parent).live) {
        complain(who + " has no live parent");
        continue;
      }
      ++child_count[static_cast<size_t>(n.parent)];
      if (n.evicted) ++host_child_count[static_cast<size_t>(n.parent)];
      if (!n.host.empty() && n.host.size() != n.key.size()) complain(who + " has a host copy of " + std::to_string(n.host.size()) + " slots for " + std::to_string(n.key.size()) + " tokens");
      if (!n.evicted && node(n.parent).evicted) complain(who + " is on the device below a host-only node");
      child_locks[static_cast<size_t>(n.parent)] += n.full_lock;
      if (nodes_.find_child(n.parent, n.ns, n.key.front()) != id) complain(who + " is not reachable from its parent");
      const bool tombstone = !Derived::has_aux(n);
      if (n.children == 0 && tombstone && !(n.evicted && Derived::kHostTombstoneLeaves)) complain(who + " is a tombstone leaf");
      if (n.aux_lock < 0 || n.full_lock < n.aux_lock) {
        complain(who + " has full lock " + std::to_string(n.full_lock) + " below " + aux + " lock " + std::to_string(n.aux_lock));
      }
      if (tombstone && n.aux_lock != 0) complain(who + " is a " + aux + "-locked tombstone");
      if (!n.evicted) (n.full_lock > 0 ? full_pr : full_ev) += n.key.size();
      if (!tombstone) (n.aux_lock > 0 ? aux_pr : aux_ev) += aux_weight(n);
      (n.evicted ? host_members : full_members) += 1;
      aux_members += tombstone ? 0 : 1;
      if (full_lru_.contains(id) == n.evicted) complain(who + (n.evicted ? " is host-only but in" : " is missing from") + " the full lru list");
      if (host_lru_.contains(id) != n.evicted) complain(who + (n.evicted ? " is missing from" : " is on the device but in") + " the host lru list");
      if (aux_lru_.contains(id) == tombstone) complain(who + (tombstone ? " is a tombstone in" : " is missing from") + " the " + aux + " lru list");
      if (!n.evicted && n.full_lru.candidate != (n.children == n.host_children && n.full_lock == 0)) complain(who + " has a wrong full eviction candidacy");
      if (n.evicted && n.host_lru.candidate != (n.children == 0 && n.full_lock == 0)) complain(who + " has a wrong host eviction candidacy");
      if (!tombstone && n.aux_lru.candidate != (n.aux_lock == 0)) complain(who + " has a wrong " + aux + " eviction candidacy");
      extra(n, who, complain);
    }
    for (size_t i = 0; i < nodes_.id_limit(); ++i) {
      const Node& n = node(static_cast<int32_t>(i));
      if (!n.live) continue;
      if (n.children != child_count[i]) complain(tree + " node " + std::to_string(i) + " child count is wrong");
      if (n.host_children != host_child_count[i]) complain(tree + " node " + std::to_string(i) + " host-only child count is wrong");
      // A full lock is taken on a node and all its ancestors.
      if (i != kRoot && n.full_lock < child_locks[i]) complain(tree + " node " + std::to_string(i) + " holds fewer full locks than its children");
    }
    if (full_members != full_lru_.size() || aux_members != aux_lru_.size() || host_members != host_lru_.size()) complain(tree + " lru lists hold foreign nodes");
    if (full_ev != full_evictable_ || full_pr != full_protected_ || aux_ev != aux_evictable || aux_pr != aux_protected) {
      complain(tree + " sizes: full evictable " + std::to_string(full_evictable_) + " (actual " + std::to_string(full_ev) +
               "), full protected " + std::to_string(full_protected_) + " (actual " + std::to_string(full_pr) + "), " +
               aux + " evictable " + std::to_string(aux_evictable) + " (actual " + std::to_string(aux_ev) + "), " + aux +
               " protected " + std::to_string(aux_protected) + " (actual " + std::to_string(aux_pr) + ")");
    }
    return problems;
  }

  NodeArena<Node> nodes_;
  LruList<Node, &DualNodeBase::full_lru> full_lru_;
  LruList<Node, &DualNodeBase::aux_lru> aux_lru_;
  LruList<Node, &DualNodeBase::host_lru> host_lru_;  // host tier: host-only nodes
  size_t full_evictable_ = 0;
  size_t full_protected_ = 0;
  int event_room_holds_ = 0;  // hold_event_room()'s live holds

 private:
  struct Buffer {
    std::vector<int32_t> key;
    std::vector<int64_t> value;
    std::vector<int64_t> host, tail;  // with enable_host_spares only
  };
  // The most tokens a node made from the spare can have without allocating.
  size_t room(const Buffer& b) const {
    size_t r = std::min(b.key.capacity(), b.value.capacity());
    if (host_spares_) {
      r = std::min(r, b.host.capacity());
      if (b.tail.capacity() < tail_room_) r = std::min(r, b.tail.capacity());
    }
    return r;
  }
  std::vector<Buffer> spares_;   // key/slot buffers for nodes to come (reserve_buffers)
  std::vector<int32_t> path_;    // touch_path's scratch
  bool events_on_ = false;
  TokenEventQueue events_;

  // The events-on paths of emit() and set_tail(), kept out of line: the hot paths that call
  // them (inserts, splits, evictions) compile as they did without events.
  [[gnu::cold, gnu::noinline]] void emit_events(int32_t id, EventType type) {
    const Node& n = node(id);
    Digest prev{}, digest{};
    bool has_prev = n.parent != kRoot;
    if (has_prev) prev = node(n.parent).tail;
    for (int32_t token : n.key) {
      digest = page_digest(has_prev ? &prev : nullptr, &token, 1);
      events_.push(type, has_prev ? &prev : nullptr, digest, token);
      prev = digest;
      has_prev = true;
    }
  }
  [[gnu::cold, gnu::noinline]] void compute_tail(int32_t id) {
    Node& n = node(id);
    const int32_t parent = n.parent;
    const Digest* prev = parent == kRoot ? nullptr : &node(parent).tail;
    Digest d{};
    for (int32_t token : n.key) {
      d = page_digest(prev, &token, 1);
      prev = &d;
    }
    n.tail = d;
  }
  bool host_spares_ = false;     // enable_host_spares
  size_t tail_room_ = 0;
};

}  // namespace kvp::cache
