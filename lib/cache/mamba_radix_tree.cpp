#include "cache/mamba_radix_tree.hpp"

#include <algorithm>
#include <utility>

namespace kvp::cache {

Status MambaRadixTree::create(int64_t page_size, Callbacks callbacks, std::unique_ptr<MambaRadixTree>* out) {
  if (page_size != 1) {
    return Status::unsupported("the mamba radix tree supports page_size 1 only (SGLang's no_buffer mode), got " +
                               std::to_string(page_size));
  }
  if (!callbacks.free_full || !callbacks.free_mamba) {
    return Status::invalid("the mamba radix tree needs free_full and free_mamba callbacks");
  }
  out->reset(new MambaRadixTree(std::move(callbacks)));
  return Status::ok();
}

MambaRadixTree::MambaRadixTree(Callbacks callbacks) : cb_(std::move(callbacks)) { reset(); }

void MambaRadixTree::reset() {
  reserve_events(0);
  reset_structure();
  emit_cleared();
  mamba_evictable_ = mamba_protected_ = 0;
  host_tokens_ = host_only_tokens_ = 0;
}

// The state belongs to the end of the sequence, so the upper part is a
// tombstone and holds no mamba lock; the lower part keeps the state.
void MambaRadixTree::on_split(MambaNode& upper, MambaNode& lower, MambaNode& parts) {
  (void)lower;
  (void)parts;
  upper.mamba = -1;
  upper.aux_lock = 0;
}

int32_t MambaRadixTree::state_of(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  return id <= kRoot ? -1 : node(id).mamba;
}

size_t MambaRadixTree::cached_prefix(const int32_t* tokens, size_t n, const std::string& extra_key,
                                     size_t* usable) const {
  *usable = 0;
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (n == 0 || ns < 0) return 0;
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    size_t len = 0;
    const int32_t c = find_edge(cur, ns, tokens + pos, n - pos, &len);
    if (c < 0 || node(c).evicted) break;  // host-only from here: not usable before a load-back
    pos += len;
    if (len < node(c).key.size()) break;  // a split's upper part has no state
    if (node(c).mamba >= 0) *usable = pos;
    cur = c;
  }
  return pos;
}

MambaMatch MambaRadixTree::match(const int32_t* tokens, size_t n, const std::string& extra_key) {
  MambaMatch r;
  match_into(tokens, n, extra_key, &r);
  return r;
}

void MambaRadixTree::match_into(const int32_t* tokens, size_t n, const std::string& extra_key, MambaMatch* out) {
  MambaMatch& r = *out;
  r.slots.clear();
  r.slots.reserve(n);  // before the split, the one change before the stamps
  r.node = root();
  r.mamba_slot = -1;
  r.matched = 0;
  r.host_node = 0;
  r.host_tokens = r.device_tokens = 0;
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (n == 0 || ns < 0) return;
  int32_t cur = kRoot, best = kRoot, host_best = -1;
  size_t pos = 0, best_len = 0, host_len = 0;
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    const size_t len = match_len(c, tokens + pos, n - pos);
    const bool partial = len < node(c).key.size();
    if (partial) c = split(c, len);
    const Node& x = node(c);
    if (!x.evicted) r.slots.insert(r.slots.end(), x.value.begin(), x.value.end());
    pos += len;
    cur = c;
    if (!x.evicted) r.device_tokens = pos;
    if (x.mamba >= 0) {
      if (x.evicted) {
        host_best = c;
        host_len = pos;
      } else {
        best = c;
        best_len = pos;
      }
    }
    if (partial) break;
  }
  r.matched = pos;
  r.slots.resize(best_len);
  r.node = nodes_.handle(best);
  r.mamba_slot = best == kRoot ? -1 : node(best).mamba;
  if (host_best >= 0) {
    r.host_node = nodes_.handle(host_best);
    r.host_tokens = host_len - r.device_tokens;
    touch_path(host_best);
  } else {
    touch_path(best);
  }
}

size_t MambaRadixTree::host_only_on_path(int32_t ns, const int32_t* tokens, size_t n) const {
  size_t host_only = 0;
  int32_t at = kRoot;
  for (size_t p = 0; p < n;) {
    size_t len = 0;
    const int32_t c = find_edge(at, ns, tokens + p, n - p, &len);
    if (c < 0) break;
    if (node(c).evicted) host_only += len;
    p += len;
    at = c;
    if (len < node(c).key.size()) break;
  }
  return host_only;
}

Status MambaRadixTree::insert(const int32_t* tokens, size_t n, const int64_t* slots, int32_t mamba_slot,
                              const std::string& extra_key, size_t* prefix_len, bool* mamba_exist,
                              NodeHandle* last_node, bool count_hit) {
  if (n == 0) return Status::invalid("cannot insert an empty key: the root holds no state");
  if (mamba_slot < 0) return Status::invalid("mamba slot " + std::to_string(mamba_slot) + " is negative");
  // Memory first: the namespace (invisible until a node uses it), then the
  // room for a split's upper part and a leaf.
  const int32_t ns = nodes_.intern(extra_key);
  size_t partial = 0;
  const size_t cached = descend(ns, tokens, n, &partial);
  prepare(kNodesPerInsert);
  const size_t needs[kNodesPerInsert] = {partial, n - cached};
  reserve_buffers(needs, kNodesPerInsert);
  if (tiered_) {  // room for the device copies host-only nodes on the path take back
    int32_t at = kRoot;
    size_t p = 0;
    while (p < n) {
      size_t len = 0;
      const int32_t c = find_edge(at, ns, tokens + p, n - p, &len);
      if (c < 0) break;
      if (node(c).evicted) node(c).value.reserve(node(c).key.size());
      p += len;
      at = c;
      if (len < node(c).key.size()) break;
    }
  }
  // KV events: the new leaf's tokens and the host-only ones the insert adopts.
  if (events_enabled()) reserve_events(n - cached + host_only_on_path(ns, tokens, n));
  int32_t cur = kRoot;
  size_t pos = 0, adopted_from = SIZE_MAX;
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    touch(c);
    const size_t len = match_len(c, tokens + pos, n - pos);
    if (len < node(c).key.size()) c = split(c, len);
    if (node(c).evicted) {  // host-only: the caller's slots become its device copy again
      if (adopted_from == SIZE_MAX) adopted_from = pos;
      adopt(c, slots + pos);
    } else if (count_hit) {
      ++node(c).write_hits;
    }
    cur = c;
    pos += len;
  }
  *prefix_len = adopted_from != SIZE_MAX ? adopted_from : pos;
  *mamba_exist = false;
  if (pos < n) {
    cur = add_leaf(cur, ns, tokens + pos, slots + pos, n - pos, [&](Node& l) {
      l.mamba = mamba_slot;
      l.write_hits = count_hit ? 1 : 0;
    });
    ++mamba_evictable_;
  } else if (node(cur).mamba < 0) {
    // Revive: the sequence ends exactly at a tombstone (tombstones are never
    // mamba-locked, so the state starts evictable).
    node(cur).mamba = mamba_slot;
    aux_lru_.push_mru(cur);
    ++mamba_evictable_;
    refresh(cur);
  } else {
    *mamba_exist = true;
  }
  if (last_node != nullptr) *last_node = nodes_.handle(cur);
  return Status::ok();
}

Status MambaRadixTree::lock(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  if (id == kRoot) return Status::ok();
  Node& n = node(id);
  if (n.mamba < 0) return Status::invalid("node handle " + std::to_string(h) + " has no mamba state to lock");
  if (n.evicted) {
    return Status::invalid("node handle " + std::to_string(h) + " is host-only: load it back first (kvhost_load_back)");
  }
  if (n.aux_lock++ == 0) {
    --mamba_evictable_;
    ++mamba_protected_;
  }
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    Node& p = node(x);
    if (p.full_lock++ == 0) {
      full_evictable_ -= p.key.size();
      full_protected_ += p.key.size();
    }
    refresh(x);
  }
  return Status::ok();
}

Status MambaRadixTree::unlock(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  if (id == kRoot) return Status::ok();
  // Validate the whole path first so a bad unlock changes nothing.
  if (node(id).mamba < 0 || node(id).aux_lock <= 0) {
    return Status::invalid("node handle " + std::to_string(h) + " is not locked");
  }
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    if (node(x).full_lock <= 0) return Status::invalid("node handle " + std::to_string(h) + " is not locked");
  }
  Node& n = node(id);
  if (--n.aux_lock == 0) {
    --mamba_protected_;
    ++mamba_evictable_;
  }
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    Node& p = node(x);
    if (--p.full_lock == 0) {
      full_protected_ -= p.key.size();
      full_evictable_ += p.key.size();
    }
    refresh(x);
  }
  return Status::ok();
}

// Frees an unlocked leaf and its state, then every unlocked tombstone left
// without children above it.
Status MambaRadixTree::evict_leaf(int32_t id, size_t* full_evicted, size_t* mamba_evicted) {
  const Node& n = node(id);
  if (n.children != 0 || n.full_lock != 0 || n.aux_lock != 0) {
    return Status::internal("mamba radix node " + std::to_string(id) + " is not an unlocked leaf");
  }
  KVPOOL_RETURN_IF_ERROR(free_node_slots(n));
  if (n.mamba >= 0) {
    KVPOOL_RETURN_IF_ERROR(cb_.free_mamba(n.mamba));
    aux_lru_.remove(id);
    --mamba_evictable_;
    ++*mamba_evicted;
  }
  return remove_leaf_cascade(id, full_evicted, [this](const Node& t) { return free_node_slots(t); });
}

Status MambaRadixTree::free_node_slots(const MambaNode& n) {
  if (!n.evicted) KVPOOL_RETURN_IF_ERROR(cb_.free_full(n.value.data(), n.value.size()));
  if (!n.host.empty()) {
    if (free_host_) free_host_(n.host.data(), n.host.size());
    host_tokens_ -= n.key.size();
    if (n.evicted) host_only_tokens_ -= n.key.size();
  }
  return Status::ok();
}

Status MambaRadixTree::evict(size_t full_tokens, size_t* full_evicted, size_t* mamba_evicted) {
  size_t states = 0;
  *full_evicted = 0;
  reserve_events(0);
  while (*full_evicted < full_tokens) {
    const int32_t victim = full_lru_.oldest_candidate();
    if (victim < 0) break;
    KVPOOL_RETURN_IF_ERROR(evict_device_leaf(victim, full_evicted, &states));
  }
  if (mamba_evicted != nullptr) *mamba_evicted = states;
  return Status::ok();
}

Status MambaRadixTree::evict_mamba(size_t states, size_t* mamba_evicted, size_t* full_evicted) {
  size_t tokens = 0;
  *mamba_evicted = 0;
  reserve_events(0);
  while (*mamba_evicted < states) {
    const int32_t victim = aux_lru_.oldest_candidate();
    if (victim < 0) break;
    Node& n = node(victim);
    if (n.children == 0) {
      // An unlocked-state leaf is fully unlocked: full locks on a leaf come
      // only from locking the leaf itself, which also locks its state.
      KVPOOL_RETURN_IF_ERROR(evict_leaf(victim, &tokens, mamba_evicted));
      continue;
    }
    KVPOOL_RETURN_IF_ERROR(cb_.free_mamba(n.mamba));
    aux_lru_.remove(victim);
    n.mamba = -1;
    --mamba_evictable_;
    ++*mamba_evicted;
  }
  if (full_evicted != nullptr) *full_evicted = tokens;
  return Status::ok();
}

void MambaRadixTree::collect_slots(std::vector<int64_t>* full, std::vector<int32_t>* mamba) const {
  collect(full, [mamba](const Node& n) {
    if (mamba != nullptr) mamba->push_back(n.mamba);
  });
}

size_t MambaRadixTree::check(std::string* report, size_t max_lines) const {
  size_t host = 0, host_only = 0;
  size_t problems = check_structure(
      "mamba radix", "mamba", mamba_evictable_, mamba_protected_, report, max_lines, [](const Node&) { return size_t{1}; },
      [&](const Node& n, const std::string& who, const auto& complain) {
        if (!n.host.empty()) host += n.key.size();
        if (n.evicted) host_only += n.key.size();
        if (!n.host.empty() && !tiered_) complain(who + " has a host copy but the tree has no host tier");
        if (n.evicted && n.aux_lock != 0) complain(who + " is host-only with a locked state");
      });
  // Every host-only node's path has host copies (a load-back can bring it back).
  for (size_t i = 1; i < nodes_.id_limit(); ++i) {
    const Node& n = node(static_cast<int32_t>(i));
    if (!n.live || !n.evicted || path_on_host(static_cast<int32_t>(i))) continue;
    if (problems++ < max_lines) *report += "mamba radix node " + std::to_string(i) + " is host-only but a node on its path has no host copy\n";
  }
  if (host != host_tokens_ || host_only != host_only_tokens_) {
    if (problems++ < max_lines) {
      *report += "mamba radix host sizes: " + std::to_string(host_tokens_) + " host tokens (actual " + std::to_string(host) + "), " +
                 std::to_string(host_only_tokens_) + " host-only (actual " + std::to_string(host_only) + ")\n";
    }
  }
  return problems;
}

}  // namespace kvp::cache
