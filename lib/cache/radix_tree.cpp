#include "cache/radix_tree.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "util/consecutive.hpp"

namespace kvp::cache {

bool parse_eviction_policy(const std::string& name, EvictionPolicy* out) {
  static const std::pair<const char*, EvictionPolicy> kNames[] = {
      {"lru", EvictionPolicy::kLru},   {"lfu", EvictionPolicy::kLfu},   {"fifo", EvictionPolicy::kFifo},
      {"mru", EvictionPolicy::kMru},   {"filo", EvictionPolicy::kFilo}, {"priority", EvictionPolicy::kPriority}};
  for (const auto& [n, p] : kNames) {
    if (name == n) {
      *out = p;
      return true;
    }
  }
  return false;
}

RadixTree::RadixTree(int64_t page_size, EvictionPolicy policy, bool events)
    : page_(page_size), policy_(policy), events_enabled_(events) {
  namespaces_[""] = 0;
  namespace_names_.emplace_back();
  reserve_children(8);
  evict_values_.reserve(kEvictBatch);
  evict_ends_.reserve(kEvictBatch);
  reset();
  clear_events();  // a fresh tree has nothing to clear
}

NodeHandle RadixTree::handle(int32_t id) const {
  return (static_cast<uint64_t>(nodes_[static_cast<size_t>(id)].generation) << 32) | static_cast<uint32_t>(id);
}

int32_t RadixTree::resolve(NodeHandle h) const {
  const uint32_t id = static_cast<uint32_t>(h & 0xffffffffu);
  const uint32_t generation = static_cast<uint32_t>(h >> 32);
  if (id >= nodes_.size()) return -1;
  const Node& n = nodes_[id];
  return n.live && n.generation == generation ? static_cast<int32_t>(id) : -1;
}

bool RadixTree::is_live(NodeHandle node) const { return resolve(node) >= 0; }

int32_t RadixTree::intern(const std::string& extra_key) {
  auto it = namespaces_.find(extra_key);
  if (it != namespaces_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(namespaces_.size());
  namespace_names_.reserve(namespace_names_.size() + 1);  // both or neither
  namespaces_.emplace(extra_key, id);
  namespace_names_.push_back(extra_key);
  return id;
}

uint64_t RadixTree::child_hash(int32_t parent, int32_t extra, const int32_t* page_tokens) const {
  // (parent, namespace) and the first page read as 64-bit words into four
  // independent multiply lanes, then one finalising mix: a short dependency chain.
  uint64_t lane[4] = {((static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) ^ static_cast<uint32_t>(extra)) *
                          0xd6e8feb86659fd93ull,
                      0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull};
  const size_t bytes = static_cast<size_t>(page_) * sizeof(int32_t);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(page_tokens);
  size_t i = 0, w = 0;
  for (; i + 8 <= bytes; i += 8, ++w) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    lane[w & 3] = (lane[w & 3] ^ v) * 0xff51afd7ed558ccdull;
  }
  if (i < bytes) {  // an odd page size: the last token
    uint32_t v;
    std::memcpy(&v, p + i, 4);
    lane[w & 3] = (lane[w & 3] ^ v) * 0xff51afd7ed558ccdull;
  }
  uint64_t h = lane[0] ^ (lane[1] >> 7) ^ (lane[2] << 11) ^ (lane[3] >> 17) ^ static_cast<uint64_t>(page_);
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  return h;
}

int32_t RadixTree::find_child(int32_t parent, int32_t extra, const int32_t* tokens) const {
  const uint64_t h = child_hash(parent, extra, tokens);
  const size_t mask = child_table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const ChildSlot& slot = child_table_[i];
    if (slot.id < 0) return -1;
    if (slot.hash != h) continue;
    const Node& c = nodes_[static_cast<size_t>(slot.id)];
    if (c.parent == parent && c.extra == extra &&
        std::memcmp(c.key.data(), tokens, static_cast<size_t>(page_) * sizeof(int32_t)) == 0) {
      return slot.id;
    }
  }
}

void RadixTree::reserve_children(size_t links) {
  if (2 * links <= child_table_.size()) return;
  size_t size = child_table_.empty() ? 16 : child_table_.size();
  while (2 * links > size) size *= 2;
  std::vector<ChildSlot> table(size);  // the only allocation; nothing changed yet
  const size_t mask = size - 1;
  for (const ChildSlot& slot : child_table_) {
    if (slot.id < 0) continue;
    size_t i = slot.hash & mask;
    while (table[i].id >= 0) i = (i + 1) & mask;
    table[i] = slot;
  }
  child_table_.swap(table);
}

void RadixTree::link_child(int32_t parent, int32_t child) {
  Node& c = nodes_[static_cast<size_t>(child)];
  c.parent = parent;
  const uint64_t h = child_hash(parent, c.extra, c.key.data());
  c.link_hash = h;
  reserve_children(child_links_ + 1);  // prepared: no growth here
  const size_t mask = child_table_.size() - 1;
  size_t i = h & mask;
  while (child_table_[i].id >= 0) i = (i + 1) & mask;
  child_table_[i] = ChildSlot{h, child};
  ++child_links_;
  Node& p = nodes_[static_cast<size_t>(parent)];
  ++p.children;
  if (!c.evicted) ++p.device_children;
}

RadixTree::ChildSlot* RadixTree::child_entry(int32_t parent, int32_t child) {
  (void)parent;  // the stored hash is that of (parent, namespace, first page)
  const uint64_t h = nodes_[static_cast<size_t>(child)].link_hash;
  const size_t mask = child_table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    ChildSlot& slot = child_table_[i];
    if (slot.id < 0) return nullptr;
    if (slot.id == child) return &slot;
  }
}

void RadixTree::prepare(size_t new_nodes, size_t orders) {
  if (nodes_.capacity() - nodes_.size() < new_nodes) {
    nodes_.reserve(std::max(nodes_.size() + new_nodes, 2 * nodes_.capacity()));
  }
  if (free_ids_.capacity() < nodes_.capacity()) free_ids_.reserve(nodes_.capacity());  // free_node never allocates
  reserve_children(child_links_ + new_nodes + 1);
  // Room to keep one more order node than asked (refresh_order returns unused ones).
  if (spare_orders_.capacity() < orders + 1) spare_orders_.reserve(orders + 1);
  const OrderKey spare{INT64_MIN, INT64_MIN, INT32_MIN};  // no real key: ids are >= 1
  while (spare_orders_.size() < orders) {
    spare_orders_.push_back(evictable_leaves_.extract(evictable_leaves_.insert(spare).first));
  }
}

size_t RadixTree::next_spare(size_t i) {
  size_t root = i;
  while (spare_next_[root] != root) root = spare_next_[root];
  while (spare_next_[i] != root) {  // path compression
    const size_t up = spare_next_[i];
    spare_next_[i] = static_cast<uint32_t>(root);
    i = up;
  }
  return root;
}

size_t RadixTree::find_spare(size_t tokens, size_t values) {
  // Best fit: the smallest spare not taken yet with room, by the index (O(log n)).
  const size_t n = spare_leaves_.size();
  if (spare_next_.size() != n + 1) return n;  // no index (no spares made yet)
  size_t i = static_cast<size_t>(std::lower_bound(spare_rooms_.begin(), spare_rooms_.end(), tokens) - spare_rooms_.begin());
  for (i = next_spare(i); i < n && !spare_leaves_[i].fits(tokens, values, host_for(tokens)); i = next_spare(i + 1)) {
  }
  return i;
}

void RadixTree::take_spare_leaf(size_t tokens, size_t values, std::vector<int32_t>* key, std::vector<int64_t>* value,
                                std::vector<int64_t>* host) {
  // reserve_leaves() made a spare per expected use.
  const size_t i = find_spare(tokens, values);
  if (i >= spare_leaves_.size()) return;
  *key = std::move(spare_leaves_[i].key);
  *value = std::move(spare_leaves_[i].value);
  *host = std::move(spare_leaves_[i].host);
  spare_leaves_[i].key = std::vector<int32_t>();  // moved-from: make the emptiness explicit
  spare_leaves_[i].value = std::vector<int64_t>();
  spare_leaves_[i].host = std::vector<int64_t>();
  spare_next_[i] = static_cast<uint32_t>(i + 1);
}

void RadixTree::reserve_leaves() {
  // Largest needs get the largest spares kept; the rest are made, unused spares dropped.
  // Nothing changes before the last allocation: the spares move only after it. A spare's
  // value buffer holds values_for(need) values (a value per page in a paged tree).
  std::vector<size_t>& needs = leaf_needs_;
  std::sort(needs.begin(), needs.end(), std::greater<size_t>());
  spare_rooms_.reserve(needs.size());  // take_spare_leaf's index, filled below without allocating
  spare_next_.reserve(needs.size() + 1);
  std::sort(spare_leaves_.begin(), spare_leaves_.end(),
            [](const LeafBuffer& a, const LeafBuffer& b) { return a.room() > b.room(); });
  next_leaves_.clear();
  next_leaves_.reserve(needs.size());
  leaf_reused_.assign(needs.size(), 0);
  size_t kept = 0;  // spare_leaves_[0, kept) are reused, in order
  for (size_t i = 0; i < needs.size(); ++i) {
    const size_t need = needs[i];
    if (kept < spare_leaves_.size() && spare_leaves_[kept].fits(need, values_for(need), host_for(need))) {
      next_leaves_.emplace_back();  // filled from spare_leaves_[kept] below
      leaf_reused_[i] = 1;
      ++kept;
      continue;
    }
    LeafBuffer b;
    b.key.reserve(need);
    b.value.reserve(values_for(need));
    b.host.reserve(host_for(need));
    next_leaves_.push_back(std::move(b));
  }
  for (size_t i = 0, j = 0; i < needs.size(); ++i) {
    if (leaf_reused_[i] != 0) next_leaves_[i] = std::move(spare_leaves_[j++]);
  }
  spare_leaves_.swap(next_leaves_);
  next_leaves_.clear();  // the spares not needed now
  // Ascending room (needs were descending; a reused spare may be roomier than its need).
  std::reverse(spare_leaves_.begin(), spare_leaves_.end());
  std::sort(spare_leaves_.begin(), spare_leaves_.end(),
            [](const LeafBuffer& a, const LeafBuffer& b) { return a.room() < b.room(); });
  spare_rooms_.clear();
  spare_next_.clear();
  for (size_t i = 0; i < spare_leaves_.size(); ++i) {
    spare_rooms_.push_back(spare_leaves_[i].room());
    spare_next_.push_back(static_cast<uint32_t>(i));
  }
  spare_next_.push_back(static_cast<uint32_t>(spare_leaves_.size()));
}

void RadixTree::reserve_inserts(const size_t* bounds, size_t inserts) {
  if (inserts == 0) return;
  // Per insert: a split and a leaf, a match_into (no split after the insert, but
  // leave room), an unlock making a leaf evictable.
  prepare(3 * inserts, 4 * inserts);
  // Each insert adds two nodes at most, and a path holds at most every node.
  insert_path_.reserve(live_nodes_ + 2 * inserts + 2);
  leaf_needs_.clear();
  for (size_t i = 0; i < inserts; ++i) leaf_needs_.insert(leaf_needs_.end(), 2, bounds[i]);  // the leaf, a split's upper part
  reserve_leaves();
}

void RadixTree::reserve_match(size_t tokens) {
  prepare(1, 2);
  // A split of a node with page digests copies the upper part's: room for them, so that a
  // match after a change (retract: release, then match) cannot fail.
  const size_t pages = tokens / static_cast<size_t>(page_);
  if (has_hashes_ && spare_hashes_.capacity() < pages) spare_hashes_.reserve(pages);
  // A second call (retract, then its match) allocates nothing. By the index: after a batch
  // of extends up to two spares per request are left, and a scan of them per begin made a
  // batch of begins quadratic.
  if (find_spare(tokens, values_for(tokens)) < spare_leaves_.size()) return;
  leaf_needs_.assign(1, tokens);
  reserve_leaves();
}

namespace {

template <class V>
void trim(V* v) noexcept {
  // A spare buffer much larger than the node's edge: give the room back (optional, so a
  // failure to allocate the smaller copy changes nothing).
  if (v->capacity() <= 2 * v->size() + 64) return;
  try {
    v->shrink_to_fit();
  } catch (...) {
  }
}

}  // namespace

void RadixTree::unlink_child(int32_t parent, int32_t child) {
  ChildSlot* entry = child_entry(parent, child);
  if (entry != nullptr) {  // backward-shift deletion: later entries of the probe run move up
    const size_t mask = child_table_.size() - 1;
    size_t hole = static_cast<size_t>(entry - child_table_.data());
    for (size_t j = (hole + 1) & mask; child_table_[j].id >= 0; j = (j + 1) & mask) {
      const size_t home = child_table_[j].hash & mask;
      // The entry at j may fill the hole unless its home lies cyclically in (hole, j].
      const bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!stays) {
        child_table_[hole] = child_table_[j];
        hole = j;
      }
    }
    child_table_[hole] = ChildSlot{};
    --child_links_;
  }
  Node& p = nodes_[static_cast<size_t>(parent)];
  --p.children;
  if (!nodes_[static_cast<size_t>(child)].evicted) --p.device_children;
}

int32_t RadixTree::new_node() {
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  Node& n = nodes_[static_cast<size_t>(id)];
  n = Node();
  n.generation = ++generations_;  // global, so handles from before a reset stay stale
  n.live = true;
  ++live_nodes_;
  return id;
}

void RadixTree::free_node(int32_t id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.live = false;
  n.key = {};
  n.value = {};
  n.hashes = {};
  n.host = {};
  free_ids_.push_back(id);
  --live_nodes_;
}

size_t common_tokens(const int32_t* a, const int32_t* b, size_t n) {
  // One memcmp for the usual whole match; otherwise 64-token blocks, then tokens.
  if (std::memcmp(a, b, n * sizeof(int32_t)) == 0) return n;
  constexpr size_t kBlock = 64;
  size_t i = 0;
  while (i + kBlock <= n && std::memcmp(a + i, b + i, kBlock * sizeof(int32_t)) == 0) i += kBlock;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

size_t RadixTree::match_len(const Node& node, const int32_t* tokens, size_t n) const {
  // First differing token, rounded down to a whole page (keys are page multiples).
  const size_t same = common_tokens(node.key.data(), tokens, std::min(node.key.size(), n));
  return same - same % static_cast<size_t>(page_);
}

void RadixTree::copy_slots(const Node& n, size_t from, size_t count, int64_t* out) const {
  if (!n.paged) {
    std::memcpy(out, n.value.data() + from, count * sizeof(int64_t));
    return;
  }
  const size_t P = static_cast<size_t>(page_);
  const int64_t* first = n.value.data() + from / P;
  for (size_t p = 0; p < count / P; ++p) fill_consecutive(out + p * P, first[p], static_cast<int64_t>(P));
}

void RadixTree::append_slots(const Node& n, size_t from, size_t count, std::vector<int64_t>* out) const {
  const size_t P = static_cast<size_t>(page_);
  // A paged node stores a page's first slot: the slots are made in a small block (in L1)
  // and appended from there, a few pages at a time, not written twice in the vector.
  constexpr size_t kBlock = 256;
  if (!n.paged || P > kBlock) {
    if (!n.paged) {
      out->insert(out->end(), n.value.data() + from, n.value.data() + from + count);
      return;
    }
    const size_t at = out->size();
    out->resize(at + count);
    copy_slots(n, from, count, out->data() + at);
    return;
  }
  int64_t block[kBlock];
  const size_t per_block = kBlock / P * P;
  for (size_t done = 0; done < count; done += per_block) {
    const size_t k = std::min(per_block, count - done);
    copy_slots(n, from + done, k, block);
    out->insert(out->end(), block, block + k);
  }
}

RadixTree::OrderKey RadixTree::order_key(const Node& n, int32_t id) const {
  const int64_t access = static_cast<int64_t>(n.last_access), created = static_cast<int64_t>(n.creation);
  switch (policy_) {
    case EvictionPolicy::kLru: return {access, 0, id};
    case EvictionPolicy::kLfu: return {static_cast<int64_t>(n.hits), access, id};
    case EvictionPolicy::kFifo: return {created, 0, id};
    case EvictionPolicy::kMru: return {-access, 0, id};
    case EvictionPolicy::kFilo: return {-created, 0, id};
    case EvictionPolicy::kPriority: return {n.priority, access, id};
  }
  return {access, 0, id};
}

void RadixTree::refresh_order(int32_t id) {
  if (id == kRoot) return;
  Node& n = nodes_[static_cast<size_t>(id)];
  // Device candidates: unlocked device nodes without device children (leaves, without the
  // host tier); host candidates: unlocked host-only leaves.
  uint8_t want = 0;
  if (n.live && n.lock_ref == 0) {
    if (!n.evicted && n.device_children == 0) want = kDeviceOrder;
    if (n.evicted && n.children == 0) want = kHostOrder;
  }
  std::set<OrderKey>* const sets[3] = {nullptr, &evictable_leaves_, &host_leaves_};
  if (want != 0 && n.order_set == want) {  // re-keyed in place: its own set node moves, nothing is allocated
    const OrderKey key = order_key(n, id);
    if (key == *n.order_it) return;
    std::set<OrderKey>& set = *sets[want];
    auto nh = set.extract(n.order_it);
    nh.value() = key;
    n.order_it = set.insert(set.end(), std::move(nh));  // LRU: the newest key goes last
    return;
  }
  // Set nodes are moved, not reallocated: the node's own, or the prepared spare.
  std::set<OrderKey>::node_type nh;
  if (n.order_set != 0) {
    nh = sets[n.order_set]->extract(n.order_it);
    n.order_set = 0;
  }
  if (want != 0) {
    const OrderKey key = order_key(n, id);
    if (nh.empty() && !spare_orders_.empty()) {
      nh = std::move(spare_orders_.back());
      spare_orders_.pop_back();
    }
    std::set<OrderKey>& set = *sets[want];
    if (nh.empty()) {
      n.order_it = set.insert(set.end(), key);
    } else {
      nh.value() = key;
      n.order_it = set.insert(set.end(), std::move(nh));
    }
    n.order_set = want;
  } else if (!nh.empty() && spare_orders_.size() < spare_orders_.capacity()) {
    spare_orders_.push_back(std::move(nh));  // within capacity: no allocation
  }
}

void RadixTree::touch(int32_t id, uint64_t stamp) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.last_access = stamp;
  ++n.hits;
  refresh_order(id);
}

int32_t RadixTree::split(int32_t child, size_t at) {
  // The upper part's vectors first: after new_node() nothing may throw (the caller prepared).
  const Node& lower = nodes_[static_cast<size_t>(child)];
  const size_t pages = at / static_cast<size_t>(page_);
  std::vector<int32_t> key;
  std::vector<int64_t> value;
  const size_t values = lower.evicted ? 0 : lower.paged ? pages : at;  // stored values of the upper part
  std::vector<int64_t> host;  // host tier: the host pages split at the same page
  // An evicted node's upper part keeps room for its device copy (adopt() must not allocate).
  take_spare_leaf(at, lower.evicted ? (lower.paged ? pages : at) : values, &key, &value, &host);
  key.assign(lower.key.begin(), lower.key.begin() + static_cast<long>(at));
  value.assign(lower.value.begin(), lower.value.begin() + static_cast<long>(values));
  std::vector<Digest> hashes;
  if (!lower.hashes.empty()) {
    if (spare_hashes_.capacity() >= pages) hashes = std::move(spare_hashes_);  // reserve_match()'s room
    hashes.assign(lower.hashes.begin(), lower.hashes.begin() + static_cast<long>(pages));
  }
  if (!lower.host.empty()) host.assign(lower.host.begin(), lower.host.begin() + static_cast<long>(pages));
  if (tiered_) {  // room for a later host copy and a later device copy (a spare's, if prepared)
    host.reserve(pages);
    if (lower.evicted) value.reserve(lower.paged ? pages : at);
  }
  const int32_t upper = new_node();  // may reallocate nodes_: index from here on
  Node& u = nodes_[static_cast<size_t>(upper)];
  Node& c = nodes_[static_cast<size_t>(child)];
  const int32_t parent = c.parent;
  u.extra = c.extra;
  u.key = std::move(key);
  u.value = std::move(value);
  u.paged = c.paged;
  trim(&u.key);
  trim(&u.value);
  u.lock_ref = c.lock_ref;  // locks of the lower part pass through the upper part
  u.priority = c.priority;
  u.hits = c.hits;
  u.last_access = c.last_access;
  u.creation = c.creation;
  u.evicted = c.evicted;
  u.write_hits = c.write_hits;
  u.host = std::move(host);  // the upper part's copy, or room for one (host tier)
  if (!c.host.empty()) c.host.erase(c.host.begin(), c.host.begin() + static_cast<long>(pages));
  if (!c.hashes.empty()) {
    u.hashes = std::move(hashes);
    c.hashes.erase(c.hashes.begin(), c.hashes.begin() + static_cast<long>(pages));
  }
  // Same first page: the upper part takes the child's entry in its parent.
  child_entry(parent, child)->id = upper;
  u.parent = parent;
  u.link_hash = c.link_hash;
  Node& c2 = nodes_[static_cast<size_t>(child)];
  c2.key.erase(c2.key.begin(), c2.key.begin() + static_cast<long>(at));
  c2.value.erase(c2.value.begin(), c2.value.begin() + static_cast<long>(values));
  link_child(upper, child);
  refresh_order(child);
  refresh_order(upper);
  return upper;
}

// SGLang stamps every child it walks into before it splits a partly matched one, so
// the lower part (the tokens the walk did not match) is refreshed as well and the
// upper part, a new node, is as recent (spec §3.4 step 3, §3.6). Eviction order
// under memory pressure depends on it.
int32_t RadixTree::split_visited(int32_t child, size_t at, uint64_t stamp) {
  nodes_[static_cast<size_t>(child)].last_access = stamp;
  return split(child, at);
}

MatchResult RadixTree::match(const int32_t* tokens, size_t n, const std::string& extra_key) {
  MatchResult r;
  r.last_node = root();
  r.last_host_node = root();  // also when nothing can match (host.h: "the root if none")
  n -= n % static_cast<size_t>(page_);
  auto ns = namespaces_.find(extra_key);
  if (n == 0 || ns == namespaces_.end()) return r;
  const int32_t extra = ns->second;
  prepare(1);  // a match splits at most one node
  r.slots.reserve(n);
  const uint64_t stamp = ++clock_;
  int32_t cur = kRoot, device = kRoot, host = kRoot;
  size_t pos = 0;
  while (pos < n) {
    int32_t c = find_child(cur, extra, tokens + pos);
    if (c < 0) break;
    const size_t len = match_len(nodes_[static_cast<size_t>(c)], tokens + pos, n - pos);
    if (len < nodes_[static_cast<size_t>(c)].key.size()) c = split_visited(c, len, stamp);
    const Node& node = nodes_[static_cast<size_t>(c)];
    if (!node.evicted) {  // device nodes form a prefix of the path: host-only ones follow
      r.slots.resize(pos + node.key.size());  // within the reserved n: no allocation
      copy_slots(node, 0, node.key.size(), r.slots.data() + pos);
      device = c;
    } else {
      r.host_tokens += node.key.size();
    }
    if (!node.host.empty()) host = c;
    touch(c, stamp);
    cur = c;
    pos += len;  // after a split the next page differs, so the next lookup stops the walk
  }
  r.last_node = handle(device);
  r.last_host_node = handle(host);
  return r;
}

size_t RadixTree::match_into(const int32_t* tokens, size_t n, const std::string& extra_key, int64_t* out,
                             NodeHandle* last_node, size_t copy_from, size_t copy_to) {
  *last_node = root();
  n -= n % static_cast<size_t>(page_);
  auto ns = namespaces_.find(extra_key);
  if (n == 0 || ns == namespaces_.end()) return 0;
  const int32_t extra = ns->second;
  prepare(1);  // a split at most (none when the path ends on a node boundary)
  const uint64_t stamp = ++clock_;
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    int32_t c = find_child(cur, extra, tokens + pos);
    if (c < 0 || nodes_[static_cast<size_t>(c)].evicted) break;  // host-only from here: match() reports those
    const size_t len = match_len(nodes_[static_cast<size_t>(c)], tokens + pos, n - pos);
    if (len < nodes_[static_cast<size_t>(c)].key.size()) c = split_visited(c, len, stamp);
    const Node& node = nodes_[static_cast<size_t>(c)];
    // The node's part of [copy_from, copy_to) (page multiples: pos and the key are too).
    const size_t from = std::max(pos, copy_from), to = std::min(pos + node.key.size(), copy_to);
    if (from < to) copy_slots(node, from - pos, to - from, out + from);
    touch(c, stamp);
    cur = c;
    pos += len;
  }
  *last_node = handle(cur);
  return pos;
}

size_t RadixTree::cached_prefix(const int32_t* tokens, size_t n, const std::string& extra_key, int64_t* slots) const {
  auto ns = namespaces_.find(extra_key);
  if (ns == namespaces_.end()) return 0;
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos + static_cast<size_t>(page_) <= n) {
    const int32_t c = find_child(cur, ns->second, tokens + pos);
    if (c < 0 || nodes_[static_cast<size_t>(c)].evicted) break;  // the device part only
    const size_t len = match_len(nodes_[static_cast<size_t>(c)], tokens + pos, n - pos);
    if (slots != nullptr) copy_slots(nodes_[static_cast<size_t>(c)], 0, len, slots + pos);
    pos += len;
    if (len < nodes_[static_cast<size_t>(c)].key.size()) break;
    cur = c;
  }
  return pos;
}

size_t RadixTree::walk_prefix(const int32_t* tokens, size_t n, const std::string& extra_key, size_t* device,
                              std::vector<int64_t>* append) const {
  if (device != nullptr) *device = 0;
  auto ns = namespaces_.find(extra_key);
  if (ns == namespaces_.end()) return 0;
  const size_t from = append != nullptr ? append->size() : SIZE_MAX;
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos + static_cast<size_t>(page_) <= n) {
    const int32_t c = find_child(cur, ns->second, tokens + pos);
    if (c < 0) break;
    const Node& node = nodes_[static_cast<size_t>(c)];
    const size_t len = match_len(node, tokens + pos, n - pos);
    if (!node.evicted) {  // device nodes form a prefix of the path
      const size_t start = std::max(pos, from);
      if (pos + len > start) append_slots(node, start - pos, pos + len - start, append);
      if (device != nullptr) *device = pos + len;
    }
    pos += len;
    if (len < node.key.size()) break;
    cur = c;
  }
  return pos;
}

Status RadixTree::insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                         int32_t priority, size_t* prefix_len, NodeHandle* last_node, size_t known_cached,
                         bool known_paged) {
  if (n % static_cast<size_t>(page_) != 0) {
    return Status::invalid("key length " + std::to_string(n) + " is not a multiple of page_size " +
                           std::to_string(page_));
  }
  const int32_t extra = intern(extra_key);
  // Everything that allocates before the first change: the arena and spares (one
  // split and one leaf at most), the leaf's key, slots, page hashes and events.
  prepare(2);
  // Where the new leaf starts: past every matched node, host-only ones included.
  const size_t cached = known_cached != SIZE_MAX ? known_cached : walk_prefix(tokens, n, extra_key, nullptr);
  std::vector<int32_t> leaf_key;
  std::vector<int64_t> leaf_value;
  // One value per page when every page's slots are consecutive (always, for a pool's tree).
  const size_t P = static_cast<size_t>(page_);
  bool leaf_paged = P > 1;
  for (size_t off = cached; leaf_paged && !known_paged && off < n; off += P) {
    bool in_order = true;  // `&`, not `&&`: a page's compares vectorise
    for (size_t j = 1; j < P; ++j) {  // unsigned: no overflow, whatever the caller passed
      in_order &= static_cast<uint64_t>(slots[off + j]) == static_cast<uint64_t>(slots[off]) + j;
    }
    leaf_paged = in_order;
  }
  std::vector<int64_t> leaf_host;  // host tier: room for the leaf's host copy (attached later without allocating)
  if (cached < n) take_spare_leaf(n - cached, leaf_paged ? (n - cached) / P : n - cached, &leaf_key, &leaf_value, &leaf_host);
  leaf_key.assign(tokens + cached, tokens + n);
  if (leaf_paged) {
    leaf_value.resize((n - cached) / P);
    for (size_t p = 0; p < leaf_value.size(); ++p) leaf_value[p] = slots[cached + p * P];
  } else {
    leaf_value.assign(slots + cached, slots + n);
  }
  if (tiered_ && cached < n) leaf_host.reserve((n - cached) / P);  // a spare's room already, when prepared
  std::vector<Digest> leaf_hashes;
  const Digest* prev = events_enabled_ && cached < n ? digest_before(tokens, cached, extra) : nullptr;
  // The leaf's first page's parent id, taken now: a split on the walk below moves the
  // digests that `prev` points into.
  const bool first_has_parent = prev != nullptr;
  const int64_t first_parent = prev != nullptr ? event_id(*prev) : 0;
  const bool hashed_here = events_enabled_ && cached < n && (cached == 0 || prev != nullptr);
  if (hashed_here) {
    leaf_hashes.resize((n - cached) / static_cast<size_t>(page_));
    page_digest_chain(prev, tokens + cached, static_cast<size_t>(page_), leaf_hashes.size(), leaf_hashes.data());
    reserve_events(leaf_hashes.size(), n - cached);  // BlockStored per page, pushed after the change
  }
  insert_path_.reserve(live_nodes_ + 2);  // the path's nodes, a split's upper part and the leaf
  insert_path_.clear();
  const uint64_t stamp = ++clock_;
  int32_t cur = kRoot;
  size_t pos = 0, adopted_from = SIZE_MAX;
  while (pos < n) {
    int32_t c = find_child(cur, extra, tokens + pos);
    if (c < 0) break;
    const size_t len = match_len(nodes_[static_cast<size_t>(c)], tokens + pos, n - pos);
    if (len < nodes_[static_cast<size_t>(c)].key.size()) c = split_visited(c, len, stamp);
    Node& node = nodes_[static_cast<size_t>(c)];
    node.priority = std::max(node.priority, priority);
    node.last_access = stamp;
    if (node.evicted) {  // host-only: it takes the caller's slots as its device copy again
      if (adopted_from == SIZE_MAX) adopted_from = pos;
      adopt(c, slots + pos);
    } else if (count_hits_) {
      ++nodes_[static_cast<size_t>(c)].write_hits;
    }
    refresh_order(c);
    insert_path_.push_back(c);  // reserved above: no allocation
    cur = c;
    pos += len;
  }
  // The caller keeps the slots of tokens that were on the device; adopted ones are the tree's now.
  *prefix_len = adopted_from != SIZE_MAX ? adopted_from : pos;
  if (pos < n) {
    const int32_t leaf = new_node();
    Node& l = nodes_[static_cast<size_t>(leaf)];
    l.extra = extra;
    l.key = std::move(leaf_key);  // pos == cached: the walk matched what cached_prefix found
    l.value = std::move(leaf_value);
    l.paged = leaf_paged;
    l.host = std::move(leaf_host);
    if (!leaf_paged && page_ > 1) all_paged_ = false;  // spares need a value per token from now on
    trim(&l.key);
    trim(&l.value);
    l.priority = priority;
    l.last_access = l.creation = ++clock_;  // after the walk's stamp, as SGLang creates it after the walk
    l.write_hits = count_hits_ ? 1 : 0;
    link_child(cur, leaf);
    evictable_ += n - pos;
    if (hashed_here) {
      l.hashes = std::move(leaf_hashes);  // the buffer moves: the digests stay where they are
      has_hashes_ = true;
      push_stored(l.hashes.data(), l.hashes.size(), first_has_parent, first_parent, tokens + cached);  // reserved room
    } else if (events_enabled_) {  // an ancestor without hashes (not expected): hash after linking
      ensure_hashes(leaf);
      emit_stored(leaf);
    }
    refresh_order(cur);
    refresh_order(leaf);
    insert_path_.push_back(leaf);
    cur = leaf;
  }
  if (last_node != nullptr) *last_node = handle(cur);
  return Status::ok();
}

size_t RadixTree::match_inserted(int64_t* out, NodeHandle* last_node, size_t copy_from, size_t copy_to) {
  // What match_into() of the inserted key does: the key ends on a node boundary (the insert
  // split there) and every node of the path is on the device (the insert adopted host-only
  // ones), so the walk visits exactly the recorded nodes and splits nothing.
  *last_node = root();
  if (insert_path_.empty()) return 0;  // an empty key: match_into() touches nothing either
  const uint64_t stamp = ++clock_;
  int32_t cur = kRoot;
  size_t pos = 0;
  for (const int32_t c : insert_path_) {
    const Node& node = nodes_[static_cast<size_t>(c)];
    const size_t from = std::max(pos, copy_from), to = std::min(pos + node.key.size(), copy_to);
    if (from < to) copy_slots(node, from - pos, to - from, out + from);
    const size_t len = node.key.size();
    touch(c, stamp);
    cur = c;
    pos += len;
  }
  *last_node = handle(cur);
  return pos;
}

Status RadixTree::lock(NodeHandle h) {
  const int32_t id = resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  prepare(0);
  if (id != kRoot) ++held_locks_;
  for (int32_t x = id; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    Node& n = nodes_[static_cast<size_t>(x)];
    if (n.lock_ref++ == 0) {
      if (!n.evicted) {  // the sizes count device tokens
        evictable_ -= n.key.size();
        protected_ += n.key.size();
      }
      refresh_order(x);
    }
  }
  return Status::ok();
}

Status RadixTree::unlock(NodeHandle h) {
  const int32_t id = resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  prepare(0);  // the unlocked node may become an evictable leaf: a spare order node
  for (int32_t x = id; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    if (nodes_[static_cast<size_t>(x)].lock_ref <= 0) {
      return Status::invalid("node handle " + std::to_string(h) + " is not locked");
    }
  }
  if (id != kRoot) --held_locks_;
  for (int32_t x = id; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    Node& n = nodes_[static_cast<size_t>(x)];
    if (--n.lock_ref == 0) {
      if (!n.evicted) {
        protected_ -= n.key.size();
        evictable_ += n.key.size();
      }
      refresh_order(x);
    }
  }
  return Status::ok();
}

Status RadixTree::evict_tiered(size_t tokens, const FreeSlots& free, const MakeHostCopies& copy, bool copy_missing,
                               const FreeHostPages& free_host, size_t* evicted) {
  *evicted = 0;
  // Host tier: a node kept as host-only moves its own order entry to the host order, so
  // the parent it may turn into a device candidate needs a spare one; each evicted node
  // frees a page at least, which bounds how many this call can need.
  prepare(0, tiered_ ? std::min(live_nodes_, tokens / static_cast<size_t>(page_) + 1) + 1 : 1);
  // A BlockRemoved per evictable page at most (host tier: and a HostStored for each copy made).
  if (events_enabled_) reserve_events((tiered_ ? 2 : 1) * evictable_ / static_cast<size_t>(page_), 0);
  // The evicted nodes' values are batched (one run per node, in eviction order) and
  // freed together; the buffers were sized at creation, so nothing here allocates.
  evict_values_.clear();
  evict_ends_.clear();
  bool batch_paged = false;
  auto flush = [&]() -> Status {
    if (evict_ends_.empty()) return Status::ok();
    const Status st = free(evict_values_.data(), evict_ends_.data(), evict_ends_.size(), batch_paged);
    evict_values_.clear();
    evict_ends_.clear();
    return st;
  };
  while (*evicted < tokens && !evictable_leaves_.empty()) {
    const int32_t id = std::get<2>(*evictable_leaves_.begin());
    Node& n = nodes_[static_cast<size_t>(id)];
    // Host tier: kept as host-only when it and its ancestors have (or now get) host copies.
    // Decided first: the copies are the one step here that can fail.
    const bool keep = tiered_ && (path_on_host(id) || (copy && (copy_missing || !n.host.empty()) && make_host_copies(id, copy)));
    if (!evict_ends_.empty() && (n.paged != batch_paged || evict_ends_.size() == evict_ends_.capacity() ||
                                 evict_values_.size() + n.value.size() > evict_values_.capacity())) {
      KVPOOL_RETURN_IF_ERROR(flush());
    }
    if (n.value.size() > evict_values_.capacity()) {  // too large to batch: freed alone, before it leaves
      const size_t end = n.value.size();
      KVPOOL_RETURN_IF_ERROR(free(n.value.data(), &end, 1, n.paged));
    } else {
      batch_paged = n.paged;
      evict_values_.insert(evict_values_.end(), n.value.begin(), n.value.end());  // within capacity
      evict_ends_.push_back(evict_values_.size());
    }
    *evicted += n.key.size();
    evictable_ -= n.key.size();
    if (events_enabled_) emit_removed(n);
    if (keep) {
      drop_to_host(id);
      continue;
    }
    Node& gone = nodes_[static_cast<size_t>(id)];
    if (gone.children != 0) return Status::internal("radix node " + std::to_string(id) + " has host-only children but no host copy");
    if (!gone.host.empty()) {  // a copy whose ancestors have none: it could never be loaded back
      if (free_host) free_host(gone.host.data(), gone.host.size());
      if (events_enabled_) emit_host(gone, false);
      host_tokens_ -= gone.key.size();
    }
    auto nh = evictable_leaves_.extract(gone.order_it);
    if (spare_orders_.size() < spare_orders_.capacity()) spare_orders_.push_back(std::move(nh));  // for the parent
    gone.order_set = 0;
    const int32_t parent = gone.parent;
    unlink_child(parent, id);
    free_node(id);
    refresh_order(parent);  // a parent left without children becomes a candidate
  }
  return flush();
}

void RadixTree::reset() {
  nodes_.clear();
  free_ids_.clear();
  std::fill(child_table_.begin(), child_table_.end(), ChildSlot{});
  child_links_ = 0;
  evictable_leaves_.clear();
  host_leaves_.clear();
  host_tokens_ = host_only_tokens_ = 0;
  live_nodes_ = 0;
  const int32_t root = new_node();
  nodes_[static_cast<size_t>(root)].lock_ref = 1;  // the root is never evictable and never counted
  live_nodes_ = 1;
  evictable_ = protected_ = 0;
  held_locks_ = 0;
  all_paged_ = true;
  if (events_enabled_) push_event(EventType::kAllBlocksCleared, 0, false, 0, nullptr, 0);
}

void RadixTree::reserve_events(size_t events, size_t tokens) {
  if (events_.capacity() - events_.size() < events) events_.reserve(std::max(events_.size() + events, 2 * events_.capacity()));
  if (event_tokens_.capacity() - event_tokens_.size() < tokens) {
    event_tokens_.reserve(std::max(event_tokens_.size() + tokens, 2 * event_tokens_.capacity()));
  }
}

void RadixTree::push_event(EventType type, int64_t block_hash, bool has_parent, int64_t parent_hash, const int32_t* tokens,
                           size_t count) {
  const KvEvent e{type, block_hash, has_parent ? parent_hash : 0, has_parent, event_tokens_.size(), count};
  event_tokens_.insert(event_tokens_.end(), tokens, tokens + count);
  events_.push_back(e);
}

void RadixTree::push_stored(const Digest* hashes, size_t pages, bool first_has_parent, int64_t first_parent,
                            const int32_t* tokens) {
  // The pages' tokens are consecutive: one append for the run, and each page's id
  // computed once (it is the next page's parent).
  const size_t P = static_cast<size_t>(page_), first_token = event_tokens_.size();
  event_tokens_.insert(event_tokens_.end(), tokens, tokens + pages * P);
  bool has_parent = first_has_parent;
  int64_t parent = first_has_parent ? first_parent : 0;
  for (size_t p = 0; p < pages; ++p) {
    const int64_t id = event_id(hashes[p]);
    events_.push_back(KvEvent{EventType::kBlockStored, id, parent, has_parent, first_token + p * P, P});
    has_parent = true;
    parent = id;
  }
}

std::vector<TakenEvent> RadixTree::take_events() {
  std::vector<TakenEvent> out;
  out.reserve(events_.size());
  for (const KvEvent& e : events_) {
    const int32_t* t = event_tokens_.data() + e.token_offset;
    out.push_back(TakenEvent{e.type, e.block_hash, e.parent_hash, e.has_parent, std::vector<int32_t>(t, t + e.token_count)});
  }
  clear_events();
  return out;
}

const Digest* RadixTree::digest_before(const int32_t* tokens, size_t pos, int32_t extra) const {
  if (pos == 0) return nullptr;
  int32_t cur = kRoot;
  size_t at = 0;
  while (at < pos) {
    const int32_t c = find_child(cur, extra, tokens + at);
    if (c < 0) return nullptr;
    const Node& node = nodes_[static_cast<size_t>(c)];
    const size_t len = std::min(node.key.size(), pos - at);
    if (at + len == pos) {
      const size_t page = len / static_cast<size_t>(page_);
      return page >= 1 && node.hashes.size() * static_cast<size_t>(page_) == node.key.size() ? &node.hashes[page - 1] : nullptr;
    }
    at += len;
    cur = c;
  }
  return nullptr;
}

void RadixTree::ensure_hashes(int32_t id) {
  // Walk up to the nearest node whose hashes exist, then hash downwards.
  std::vector<int32_t> path;
  for (int32_t x = id; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    const Node& n = nodes_[static_cast<size_t>(x)];
    if (n.hashes.size() * static_cast<size_t>(page_) == n.key.size()) break;
    path.push_back(x);
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    Node& n = nodes_[static_cast<size_t>(*it)];
    const Node& parent = nodes_[static_cast<size_t>(n.parent)];
    const Digest* prev = n.parent == kRoot || parent.hashes.empty() ? nullptr : &parent.hashes.back();
    n.hashes.resize(n.key.size() / static_cast<size_t>(page_));
    has_hashes_ = true;
    page_digest_chain(prev, n.key.data(), static_cast<size_t>(page_), n.hashes.size(), n.hashes.data());
  }
}

void RadixTree::emit_stored(int32_t id) {
  const Node& n = nodes_[static_cast<size_t>(id)];
  const Node& parent = nodes_[static_cast<size_t>(n.parent)];
  const bool has_parent = n.parent != kRoot;
  push_stored(n.hashes.data(), n.hashes.size(), has_parent, has_parent ? event_id(parent.hashes.back()) : 0,
              n.key.data());
}

void RadixTree::emit_removed(const Node& n) {
  for (const Digest& d : n.hashes) push_event(EventType::kBlockRemoved, event_id(d), false, 0, nullptr, 0);
}

void RadixTree::collect_slots(std::vector<int64_t>* out) const {
  for (size_t id = 1; id < nodes_.size(); ++id) {
    if (!nodes_[id].live || nodes_[id].evicted) continue;
    const size_t at = out->size();
    out->resize(at + nodes_[id].key.size());
    copy_slots(nodes_[id], 0, nodes_[id].key.size(), out->data() + at);
  }
}

size_t RadixTree::check(std::string* report, size_t max_lines) const {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  size_t evictable = 0, protected_tokens = 0, leaves = 0, host_leaves = 0, host_tokens = 0, host_only = 0;
  std::vector<int32_t> child_count(nodes_.size(), 0), device_count(nodes_.size(), 0);
  for (size_t id = 1; id < nodes_.size(); ++id) {
    const Node& n = nodes_[id];
    if (!n.live) continue;
    const std::string who = "radix node " + std::to_string(id);
    const size_t slots = n.evicted ? n.key.size() : n.value.size() * (n.paged ? static_cast<size_t>(page_) : 1);
    if (n.evicted && !n.value.empty()) complain(who + " is host-only but holds device slots");
    if (!n.host.empty() && n.host.size() * static_cast<size_t>(page_) != n.key.size()) {
      complain(who + " has " + std::to_string(n.key.size()) + " tokens and " + std::to_string(n.host.size()) + " host pages");
    }
    if (n.evicted && !path_on_host(static_cast<int32_t>(id))) complain(who + " is host-only but a node on its path has no host copy");
    host_tokens += n.host.empty() ? 0 : n.key.size();
    host_only += n.evicted ? n.key.size() : 0;
    if (n.key.size() != slots || n.key.empty() || n.key.size() % static_cast<size_t>(page_) != 0) {
      complain(who + " has " + std::to_string(n.key.size()) + " tokens and " + std::to_string(slots) + " slots");
      continue;
    }
    if (n.parent < 0 || !nodes_[static_cast<size_t>(n.parent)].live) {
      complain(who + " has no live parent");
      continue;
    }
    ++child_count[static_cast<size_t>(n.parent)];
    if (!n.evicted) ++device_count[static_cast<size_t>(n.parent)];
    if (!n.evicted && nodes_[static_cast<size_t>(n.parent)].evicted) complain(who + " is on the device below a host-only node");
    if (find_child(n.parent, n.extra, n.key.data()) != static_cast<int32_t>(id)) complain(who + " is not reachable from its parent");
    if (!n.evicted) (n.lock_ref > 0 ? protected_tokens : evictable) += n.key.size();
    if (n.lock_ref < 0) complain(who + " has a negative lock count");
    const bool candidate = !n.evicted && n.device_children == 0 && n.lock_ref == 0;
    const bool host_candidate = n.evicted && n.children == 0 && n.lock_ref == 0;
    leaves += candidate ? 1 : 0;
    host_leaves += host_candidate ? 1 : 0;
    if (candidate != (n.order_set == kDeviceOrder)) complain(who + (candidate ? " is an evictable leaf missing from" : " is wrongly in") + " the eviction order");
    if (host_candidate != (n.order_set == kHostOrder)) complain(who + (host_candidate ? " is a host-only leaf missing from" : " is wrongly in") + " the host eviction order");
  }
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (nodes_[id].live && nodes_[id].children != child_count[id]) complain("radix node " + std::to_string(id) + " child count is wrong");
    if (nodes_[id].live && nodes_[id].device_children != device_count[id]) complain("radix node " + std::to_string(id) + " device child count is wrong");
  }
  if (host_tokens != host_tokens_ || host_only != host_only_tokens_) {
    complain("radix host sizes: held " + std::to_string(host_tokens_) + " (actual " + std::to_string(host_tokens) + "), host-only " +
             std::to_string(host_only_tokens_) + " (actual " + std::to_string(host_only) + ")");
  }
  if (host_leaves != host_leaves_.size()) complain("radix host eviction order holds " + std::to_string(host_leaves_.size()) + " leaves, expected " + std::to_string(host_leaves));
  if (evictable != evictable_ || protected_tokens != protected_) {
    complain("radix sizes: evictable " + std::to_string(evictable_) + " (actual " + std::to_string(evictable) +
             "), protected " + std::to_string(protected_) + " (actual " + std::to_string(protected_tokens) + ")");
  }
  if (leaves != evictable_leaves_.size()) complain("radix eviction order holds " + std::to_string(evictable_leaves_.size()) + " leaves, expected " + std::to_string(leaves));
  return problems;
}

}  // namespace kvp::cache
