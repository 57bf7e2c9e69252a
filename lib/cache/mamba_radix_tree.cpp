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

MambaRadixTree::MambaRadixTree(Callbacks callbacks)
    : cb_(std::move(callbacks)), full_lru_(nodes_.storage()), mamba_lru_(nodes_.storage()) {
  reset();
}

void MambaRadixTree::reset() {
  nodes_.reset();
  full_lru_.clear();
  mamba_lru_.clear();
  // The root holds both locks so that nothing ever treats it as evictable.
  node(kRoot).full_lock = node(kRoot).mamba_lock = 1;
  full_evictable_ = full_protected_ = mamba_evictable_ = mamba_protected_ = 0;
}

size_t MambaRadixTree::key_length(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  return id < 0 ? 0 : node(id).key.size();
}

// Re-derives a node's eviction candidacy after its locks, children or state changed.
void MambaRadixTree::refresh(int32_t id) {
  if (id == kRoot) return;
  const Node& n = node(id);
  full_lru_.set_candidate(id, n.children == 0 && n.full_lock == 0);
  if (mamba_lru_.contains(id)) mamba_lru_.set_candidate(id, n.mamba_lock == 0);
}

void MambaRadixTree::touch(int32_t id) {
  full_lru_.move_to_mru(id);
  if (node(id).mamba >= 0) mamba_lru_.move_to_mru(id);
}

// Makes `id` the most recent node and each ancestor the next older one, so a
// path ages from the root down (tombstones are only in the full list).
void MambaRadixTree::touch_path(int32_t id) {
  std::vector<int32_t> path;
  for (int32_t x = id; x != kRoot; x = node(x).parent) path.push_back(x);
  for (auto it = path.rbegin(); it != path.rend(); ++it) touch(*it);
}

size_t MambaRadixTree::match_len(int32_t id, const int32_t* tokens, size_t n) const {
  return common_prefix(node(id).key, tokens, n);
}

// Splits `child` after `at` tokens; returns the new upper node. The state
// belongs to the end of the sequence, so the upper part is a tombstone; it
// copies the full lock (locks below pass through it) so sizes stay unchanged.
int32_t MambaRadixTree::split(int32_t child, size_t at) {
  const int32_t upper = nodes_.create();  // may grow the storage: index from here on
  const bool has_state = node(child).mamba >= 0;
  full_lru_.remove(child);
  if (has_state) mamba_lru_.remove(child);
  {
    Node& u = node(upper);
    const Node& c = node(child);
    u.ns = c.ns;
    u.key.assign(c.key.begin(), c.key.begin() + static_cast<long>(at));
    u.value.assign(c.value.begin(), c.value.begin() + static_cast<long>(at));
    u.full_lock = c.full_lock;
  }
  const int32_t parent = node(child).parent;
  nodes_.unlink(child);
  nodes_.link(parent, upper);
  Node& c = node(child);
  c.key.erase(c.key.begin(), c.key.begin() + static_cast<long>(at));
  c.value.erase(c.value.begin(), c.value.begin() + static_cast<long>(at));
  nodes_.link(upper, child);
  // The lower part is re-listed after the upper one: descendants stay newer.
  full_lru_.push_mru(upper);
  full_lru_.push_mru(child);
  if (has_state) mamba_lru_.push_mru(child);
  refresh(upper);
  refresh(child);
  return upper;
}

MambaMatch MambaRadixTree::match(const int32_t* tokens, size_t n, const std::string& extra_key) {
  MambaMatch r;
  r.node = root();
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (n == 0 || ns < 0) return r;
  int32_t cur = kRoot, best = kRoot;
  size_t pos = 0, best_len = 0;
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    const size_t len = match_len(c, tokens + pos, n - pos);
    const bool partial = len < node(c).key.size();
    if (partial) c = split(c, len);
    const Node& x = node(c);
    r.slots.insert(r.slots.end(), x.value.begin(), x.value.end());
    pos += len;
    cur = c;
    if (x.mamba >= 0) {
      best = c;
      best_len = pos;
    }
    if (partial) break;
  }
  r.matched = pos;
  r.slots.resize(best_len);
  r.node = nodes_.handle(best);
  r.mamba_slot = best == kRoot ? -1 : node(best).mamba;
  touch_path(best);
  return r;
}

Status MambaRadixTree::insert(const int32_t* tokens, size_t n, const int64_t* slots, int32_t mamba_slot,
                              const std::string& extra_key, size_t* prefix_len, bool* mamba_exist,
                              NodeHandle* last_node) {
  if (n == 0) return Status::invalid("cannot insert an empty key: the root holds no state");
  if (mamba_slot < 0) return Status::invalid("mamba slot " + std::to_string(mamba_slot) + " is negative");
  const int32_t ns = nodes_.intern(extra_key);
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    touch(c);
    const size_t len = match_len(c, tokens + pos, n - pos);
    if (len < node(c).key.size()) c = split(c, len);
    cur = c;
    pos += len;
  }
  *prefix_len = pos;
  *mamba_exist = false;
  if (pos < n) {
    const int32_t leaf = nodes_.create();
    Node& l = node(leaf);
    l.ns = ns;
    l.key.assign(tokens + pos, tokens + n);
    l.value.assign(slots + pos, slots + n);
    l.mamba = mamba_slot;
    nodes_.link(cur, leaf);
    full_lru_.push_mru(leaf);
    mamba_lru_.push_mru(leaf);
    full_evictable_ += n - pos;
    ++mamba_evictable_;
    refresh(cur);
    refresh(leaf);
    cur = leaf;
  } else if (node(cur).mamba < 0) {
    // Revive: the sequence ends exactly at a tombstone (tombstones are never
    // mamba-locked, so the state starts evictable).
    node(cur).mamba = mamba_slot;
    mamba_lru_.push_mru(cur);
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
  if (n.mamba_lock++ == 0) {
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
  if (node(id).mamba < 0 || node(id).mamba_lock <= 0) {
    return Status::invalid("node handle " + std::to_string(h) + " is not locked");
  }
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    if (node(x).full_lock <= 0) return Status::invalid("node handle " + std::to_string(h) + " is not locked");
  }
  Node& n = node(id);
  if (--n.mamba_lock == 0) {
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
// without children above it (a tombstone leaf would only hold KV nobody can
// continue from).
Status MambaRadixTree::evict_leaf(int32_t id, size_t* full_evicted, size_t* mamba_evicted) {
  {
    const Node& n = node(id);
    if (n.children != 0 || n.full_lock != 0 || n.mamba_lock != 0) {
      return Status::internal("mamba radix node " + std::to_string(id) + " is not an unlocked leaf");
    }
    KVPOOL_RETURN_IF_ERROR(cb_.free_full(n.value.data(), n.value.size()));
    if (n.mamba >= 0) {
      KVPOOL_RETURN_IF_ERROR(cb_.free_mamba(n.mamba));
      mamba_lru_.remove(id);
      --mamba_evictable_;
      ++*mamba_evicted;
    }
  }
  int32_t x = id;
  int32_t parent;
  do {
    Node& n = node(x);
    full_evictable_ -= n.key.size();
    *full_evicted += n.value.size();
    full_lru_.remove(x);
    parent = n.parent;
    nodes_.unlink(x);
    nodes_.destroy(x);
    x = parent;
    if (x == kRoot || node(x).children != 0 || node(x).mamba >= 0 || node(x).full_lock != 0) break;
    const Status st = cb_.free_full(node(x).value.data(), node(x).value.size());
    if (!st.is_ok()) {
      refresh(x);
      return st;
    }
  } while (true);
  refresh(x);  // may have become a leaf
  return Status::ok();
}

Status MambaRadixTree::evict(size_t full_tokens, size_t* full_evicted, size_t* mamba_evicted) {
  size_t states = 0;
  *full_evicted = 0;
  while (*full_evicted < full_tokens) {
    const int32_t victim = full_lru_.oldest_candidate();
    if (victim < 0) break;
    KVPOOL_RETURN_IF_ERROR(evict_leaf(victim, full_evicted, &states));
  }
  if (mamba_evicted != nullptr) *mamba_evicted = states;
  return Status::ok();
}

Status MambaRadixTree::evict_mamba(size_t states, size_t* mamba_evicted, size_t* full_evicted) {
  size_t tokens = 0;
  *mamba_evicted = 0;
  while (*mamba_evicted < states) {
    const int32_t victim = mamba_lru_.oldest_candidate();
    if (victim < 0) break;
    Node& n = node(victim);
    if (n.children == 0) {
      // An unlocked-state leaf is fully unlocked: full locks on a leaf come
      // only from locking the leaf itself, which also locks its state.
      KVPOOL_RETURN_IF_ERROR(evict_leaf(victim, &tokens, mamba_evicted));
      continue;
    }
    KVPOOL_RETURN_IF_ERROR(cb_.free_mamba(n.mamba));
    mamba_lru_.remove(victim);
    n.mamba = -1;
    --mamba_evictable_;
    ++*mamba_evicted;
  }
  if (full_evicted != nullptr) *full_evicted = tokens;
  return Status::ok();
}

void MambaRadixTree::collect_slots(std::vector<int64_t>* full, std::vector<int32_t>* mamba) const {
  for (size_t id = 1; id < nodes_.id_limit(); ++id) {
    const Node& n = node(static_cast<int32_t>(id));
    if (!n.live) continue;
    if (full != nullptr) full->insert(full->end(), n.value.begin(), n.value.end());
    if (mamba != nullptr && n.mamba >= 0) mamba->push_back(n.mamba);
  }
}

size_t MambaRadixTree::check(std::string* report, size_t max_lines) const {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  for (const std::string& err : {full_lru_.verify(), mamba_lru_.verify()}) {
    if (!err.empty()) complain("mamba radix lru list: " + err);
  }
  size_t full_ev = 0, full_pr = 0, mamba_ev = 0, mamba_pr = 0, full_members = 0, mamba_members = 0;
  std::vector<int32_t> child_count(nodes_.id_limit(), 0);
  std::vector<int64_t> child_locks(nodes_.id_limit(), 0);
  for (size_t i = 1; i < nodes_.id_limit(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const Node& n = node(id);
    if (!n.live) continue;
    const std::string who = "mamba radix node " + std::to_string(id);
    if (n.key.empty() || n.key.size() != n.value.size()) {
      complain(who + " has " + std::to_string(n.key.size()) + " tokens and " + std::to_string(n.value.size()) + " slots");
      continue;
    }
    if (n.parent < 0 || !node(n.parent).live) {
      complain(who + " has no live parent");
      continue;
    }
    ++child_count[static_cast<size_t>(n.parent)];
    child_locks[static_cast<size_t>(n.parent)] += n.full_lock;
    if (nodes_.find_child(n.parent, n.ns, n.key.front()) != id) complain(who + " is not reachable from its parent");
    const bool tombstone = n.mamba < 0;
    if (n.children == 0 && tombstone) complain(who + " is a tombstone leaf");
    if (n.mamba_lock < 0 || n.full_lock < n.mamba_lock) {
      complain(who + " has full lock " + std::to_string(n.full_lock) + " below mamba lock " + std::to_string(n.mamba_lock));
    }
    if (tombstone && n.mamba_lock != 0) complain(who + " is a mamba-locked tombstone");
    (n.full_lock > 0 ? full_pr : full_ev) += n.key.size();
    if (!tombstone) ++(n.mamba_lock > 0 ? mamba_pr : mamba_ev);
    ++full_members;
    if (!full_lru_.contains(id)) complain(who + " is missing from the full lru list");
    if (mamba_lru_.contains(id) != !tombstone) complain(who + (tombstone ? " is a tombstone in" : " is missing from") + " the mamba lru list");
    mamba_members += tombstone ? 0 : 1;
    if (n.full_lru.candidate != (n.children == 0 && n.full_lock == 0)) complain(who + " has a wrong full eviction candidacy");
    if (!tombstone && n.mamba_lru.candidate != (n.mamba_lock == 0)) complain(who + " has a wrong mamba eviction candidacy");
  }
  for (size_t i = 0; i < nodes_.id_limit(); ++i) {
    const Node& n = node(static_cast<int32_t>(i));
    if (!n.live) continue;
    if (n.children != child_count[i]) complain("mamba radix node " + std::to_string(i) + " child count is wrong");
    // A full lock is taken on a node and all its ancestors, so a node holds at
    // least the locks of its children.
    if (i != kRoot && n.full_lock < child_locks[i]) complain("mamba radix node " + std::to_string(i) + " holds fewer full locks than its children");
  }
  if (full_members != full_lru_.size() || mamba_members != mamba_lru_.size()) complain("mamba radix lru lists hold foreign nodes");
  if (full_ev != full_evictable_ || full_pr != full_protected_ || mamba_ev != mamba_evictable_ || mamba_pr != mamba_protected_) {
    complain("mamba radix sizes: full evictable " + std::to_string(full_evictable_) + " (actual " + std::to_string(full_ev) +
             "), full protected " + std::to_string(full_protected_) + " (actual " + std::to_string(full_pr) +
             "), mamba evictable " + std::to_string(mamba_evictable_) + " (actual " + std::to_string(mamba_ev) +
             "), mamba protected " + std::to_string(mamba_protected_) + " (actual " + std::to_string(mamba_pr) + ")");
  }
  return problems;
}

}  // namespace kvp::cache
