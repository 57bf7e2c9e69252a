#include "cache/swa_radix_tree.hpp"

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <utility>

namespace kvp::cache {

Status SwaRadixTree::create(int64_t page_size, size_t window, Callbacks callbacks, std::unique_ptr<SwaRadixTree>* out) {
  if (page_size != 1) {
    return Status::unsupported("the swa radix tree supports page_size 1 only, got " + std::to_string(page_size));
  }
  if (window == 0) return Status::invalid("the sliding window must hold at least one token");
  if (!callbacks.free_full || !callbacks.free_swa) {
    return Status::invalid("the swa radix tree needs free_full and free_swa callbacks");
  }
  if (!callbacks.free_tombstone) callbacks.free_tombstone = callbacks.free_full;
  out->reset(new SwaRadixTree(window, std::move(callbacks)));
  return Status::ok();
}

SwaRadixTree::SwaRadixTree(size_t window, Callbacks callbacks)
    : window_(window), cb_(std::move(callbacks)), full_lru_(nodes_.storage()), swa_lru_(nodes_.storage()) {
  reset();
}

void SwaRadixTree::reset() {
  nodes_.reset();
  full_lru_.clear();
  swa_lru_.clear();
  // The root holds both locks so that nothing ever treats it as evictable.
  node(kRoot).full_lock = node(kRoot).swa_lock = 1;
  full_evictable_ = full_protected_ = swa_evictable_ = swa_protected_ = 0;
}

size_t SwaRadixTree::key_length(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  return id < 0 ? 0 : node(id).key.size();
}

bool SwaRadixTree::is_tombstone(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  return id > 0 && node(id).tombstone;
}

// Re-derives a node's eviction candidacy after its locks, children or state changed.
void SwaRadixTree::refresh(int32_t id) {
  if (id == kRoot) return;
  const Node& n = node(id);
  full_lru_.set_candidate(id, n.children == 0 && n.full_lock == 0);
  if (swa_lru_.contains(id)) swa_lru_.set_candidate(id, n.swa_lock == 0);
}

void SwaRadixTree::touch(int32_t id) {
  full_lru_.move_to_mru(id);
  if (!node(id).tombstone) swa_lru_.move_to_mru(id);
}

// Makes `id` the most recent node and each ancestor the next older one.
void SwaRadixTree::touch_path(int32_t id) {
  std::vector<int32_t> path;
  for (int32_t x = id; x != kRoot; x = node(x).parent) path.push_back(x);
  for (auto it = path.rbegin(); it != path.rend(); ++it) touch(*it);
}

size_t SwaRadixTree::match_len(int32_t id, const int32_t* tokens, size_t n) const {
  return common_prefix(node(id).key, tokens, n);
}

// Splits `child` after `at` tokens; returns the new upper node. Both parts keep
// the tombstone flag and both lock counts (locks below pass through the upper
// part, so sizes stay unchanged). An SWA lock that stopped at `child` covered
// all of it, so its uuid moves up to where that lock now stops.
int32_t SwaRadixTree::split(int32_t child, size_t at) {
  const int32_t upper = nodes_.create();  // may grow the storage: index from here on
  const bool live = !node(child).tombstone;
  full_lru_.remove(child);
  if (live) swa_lru_.remove(child);
  {
    Node& u = node(upper);
    Node& c = node(child);
    u.ns = c.ns;
    u.key.assign(c.key.begin(), c.key.begin() + static_cast<long>(at));
    u.value.assign(c.value.begin(), c.value.begin() + static_cast<long>(at));
    u.tombstone = c.tombstone;
    u.full_lock = c.full_lock;
    u.swa_lock = c.swa_lock;
    u.uuid = c.uuid;
    c.uuid = 0;
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
  if (live) {
    swa_lru_.push_mru(upper);
    swa_lru_.push_mru(child);
  }
  refresh(upper);
  refresh(child);
  return upper;
}

SwaMatch SwaRadixTree::match(const int32_t* tokens, size_t n, const std::string& extra_key) {
  SwaMatch r;
  r.node = root();
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (n == 0 || ns < 0) return r;
  // Live tokens since the last tombstone; "infinite" until the first one.
  constexpr size_t kNoTombstone = SIZE_MAX;
  size_t run = kNoTombstone;
  int32_t cur = kRoot, best = kRoot;
  size_t pos = 0, best_len = 0;
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    if (node(c).tombstone) {
      if (run >= window_) {
        best = cur;
        best_len = pos;
      }
      run = 0;  // on every tombstone: a short run must not carry over (SGLang #17061)
    }
    const size_t len = match_len(c, tokens + pos, n - pos);
    const bool partial = len < node(c).key.size();
    if (partial) c = split(c, len);
    const Node& x = node(c);
    r.slots.insert(r.slots.end(), x.value.begin(), x.value.end());
    if (!x.tombstone && run != kNoTombstone) run += len;
    pos += len;
    cur = c;
    if (partial) break;
  }
  if (run >= window_) {
    best = cur;
    best_len = pos;
  }
  r.matched = pos;
  r.slots.resize(best_len);
  r.node = nodes_.handle(best);
  touch_path(best);
  return r;
}

// Revives tombstone `id` with the caller's slots (one per token of the node).
// The node's old full slots are freed as a tombstone's, so no window slot is
// freed through a possibly stale mapping, and an old slot the caller passed
// back as its own is kept rather than freed under the node.
Status SwaRadixTree::take_over(int32_t id, const int64_t* slots) {
  Node& n = node(id);
  std::vector<int64_t> old;
  for (size_t i = 0; i < n.value.size(); ++i) {
    if (n.value[i] != slots[i]) old.push_back(n.value[i]);
  }
  KVPOOL_RETURN_IF_ERROR(cb_.free_tombstone(old.data(), old.size()));
  n.value.assign(slots, slots + n.value.size());
  n.tombstone = false;
  swa_lru_.push_mru(id);
  swa_evictable_ += n.value.size();  // tombstones are never SWA-locked
  refresh(id);
  return Status::ok();
}

// Frees the caller's slots for tokens [from, len) of node `id` (slots[i] is
// the caller's slot for the node's token i), except slots that are the node's own.
Status SwaRadixTree::free_duplicates(int32_t id, const int64_t* slots, size_t from) {
  const Node& n = node(id);
  std::vector<int64_t> dup;
  for (size_t i = from; i < n.value.size(); ++i) {
    if (n.value[i] != slots[i]) dup.push_back(slots[i]);
  }
  return dup.empty() ? Status::ok() : cb_.free_full(dup.data(), dup.size());
}

Status SwaRadixTree::insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                            size_t prev_prefix_len, size_t* prefix_len, NodeHandle* last_node) {
  const int32_t ns = nodes_.intern(extra_key);
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    touch(c);
    const size_t len = match_len(c, tokens + pos, n - pos);
    if (len < node(c).key.size()) c = split(c, len);
    if (pos + len > prev_prefix_len) {
      // Tokens past what the caller got from the tree: its slots are its own.
      const size_t from = prev_prefix_len > pos ? prev_prefix_len - pos : 0;
      if (node(c).tombstone && node(c).full_lock == 0) {
        // Revive only the caller's part; the part before `from` stays a
        // tombstone (the caller's slots there are the node's own, windowless).
        if (from > 0) split(c, from);  // `c` is now the lower part
        KVPOOL_RETURN_IF_ERROR(take_over(c, slots + pos + from));
      } else {
        // A live node keeps its slots. So does a full-locked tombstone: lock
        // holders use its old full slots, which must not be freed under them
        // (later SGLang skips this revive too, PR #29352).
        KVPOOL_RETURN_IF_ERROR(free_duplicates(c, slots + pos, from));
      }
    }
    cur = c;
    pos += len;
  }
  *prefix_len = pos;
  if (pos < n) {
    const int32_t leaf = nodes_.create();
    Node& l = node(leaf);
    l.ns = ns;
    l.key.assign(tokens + pos, tokens + n);
    l.value.assign(slots + pos, slots + n);
    nodes_.link(cur, leaf);
    full_lru_.push_mru(leaf);
    swa_lru_.push_mru(leaf);
    full_evictable_ += n - pos;
    swa_evictable_ += n - pos;
    refresh(cur);
    refresh(leaf);
    cur = leaf;
  }
  if (last_node != nullptr) *last_node = nodes_.handle(cur);
  return Status::ok();
}

Status SwaRadixTree::lock(NodeHandle h, int64_t* uuid) {
  *uuid = 0;
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  size_t covered = 0;
  for (int32_t x = id; x != kRoot && covered < window_; x = node(x).parent) {
    if (node(x).tombstone) {
      return Status::invalid("node handle " + std::to_string(h) + " has a tombstone within its window");
    }
    covered += node(x).key.size();
  }
  covered = 0;
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    Node& p = node(x);
    if (p.full_lock++ == 0) {
      full_evictable_ -= p.key.size();
      full_protected_ += p.key.size();
    }
    if (covered < window_) {
      if (p.swa_lock++ == 0) {
        swa_evictable_ -= p.key.size();
        swa_protected_ += p.key.size();
      }
      covered += p.key.size();
      if (covered >= window_) {
        if (p.uuid == 0) p.uuid = ++next_uuid_;
        *uuid = p.uuid;
      }
    }
    refresh(x);
  }
  return Status::ok();
}

Status SwaRadixTree::unlock(NodeHandle h, int64_t uuid) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  // Validate the whole walk first so a bad unlock changes nothing.
  bool in_window = true;
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    const Node& p = node(x);
    if (p.full_lock <= 0 || (in_window && p.swa_lock <= 0)) {
      return Status::invalid("node handle " + std::to_string(h) + " is not locked");
    }
    if (in_window && uuid != 0 && p.uuid == uuid) in_window = false;
  }
  if (uuid != 0 && in_window) {
    return Status::invalid("lock uuid " + std::to_string(uuid) + " is not on the path of node handle " + std::to_string(h));
  }
  in_window = true;
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    Node& p = node(x);
    if (--p.full_lock == 0) {
      full_protected_ -= p.key.size();
      full_evictable_ += p.key.size();
    }
    if (in_window) {
      if (--p.swa_lock == 0) {
        swa_protected_ -= p.key.size();
        swa_evictable_ += p.key.size();
      }
      if (uuid != 0 && p.uuid == uuid) in_window = false;
    }
    refresh(x);
  }
  return Status::ok();
}

// Frees an unlocked leaf (full and window KV), then every unlocked tombstone
// left without children above it: a tombstone leaf could never be used, as no
// live window would end at it.
Status SwaRadixTree::evict_leaf(int32_t id, size_t* full_evicted, size_t* swa_evicted) {
  {
    const Node& n = node(id);
    if (n.children != 0 || n.full_lock != 0 || n.swa_lock != 0) {
      return Status::internal("swa radix node " + std::to_string(id) + " is not an unlocked leaf");
    }
    if (n.tombstone) {
      KVPOOL_RETURN_IF_ERROR(cb_.free_tombstone(n.value.data(), n.value.size()));
    } else {
      KVPOOL_RETURN_IF_ERROR(cb_.free_full(n.value.data(), n.value.size()));
      swa_lru_.remove(id);
      swa_evictable_ -= n.value.size();
      *swa_evicted += n.value.size();
    }
  }
  int32_t x = id;
  while (true) {
    Node& n = node(x);
    full_evictable_ -= n.key.size();
    *full_evicted += n.value.size();
    full_lru_.remove(x);
    const int32_t parent = n.parent;
    nodes_.unlink(x);
    nodes_.destroy(x);
    x = parent;
    if (x == kRoot || node(x).children != 0 || !node(x).tombstone || node(x).full_lock != 0) break;
    const Status st = cb_.free_tombstone(node(x).value.data(), node(x).value.size());
    if (!st.is_ok()) {
      refresh(x);
      return st;
    }
  }
  refresh(x);  // may have become a leaf
  return Status::ok();
}

// Drops the window KV of an SWA-unlocked internal node; its full KV stays.
Status SwaRadixTree::tombstone(int32_t id, size_t* swa_evicted) {
  Node& n = node(id);
  KVPOOL_RETURN_IF_ERROR(cb_.free_swa(n.value.data(), n.value.size()));
  swa_lru_.remove(id);
  n.tombstone = true;
  swa_evictable_ -= n.value.size();
  *swa_evicted += n.value.size();
  refresh(id);
  return Status::ok();
}

Status SwaRadixTree::evict(size_t full_tokens, size_t swa_tokens, size_t* full_evicted, size_t* swa_evicted) {
  *full_evicted = *swa_evicted = 0;
  while (*full_evicted < full_tokens) {
    const int32_t victim = full_lru_.oldest_candidate();
    if (victim < 0) break;
    KVPOOL_RETURN_IF_ERROR(evict_leaf(victim, full_evicted, swa_evicted));
  }
  while (*swa_evicted < swa_tokens) {
    const int32_t victim = swa_lru_.oldest_candidate();
    if (victim < 0) break;
    // An SWA-unlocked leaf is fully unlocked: full locks on a leaf come only
    // from locking the leaf itself, which SWA-locks it too.
    if (node(victim).children == 0) {
      KVPOOL_RETURN_IF_ERROR(evict_leaf(victim, full_evicted, swa_evicted));
    } else {
      KVPOOL_RETURN_IF_ERROR(tombstone(victim, swa_evicted));
    }
  }
  return Status::ok();
}

void SwaRadixTree::collect_slots(std::vector<int64_t>* full, std::vector<int64_t>* with_window) const {
  for (size_t id = 1; id < nodes_.id_limit(); ++id) {
    const Node& n = node(static_cast<int32_t>(id));
    if (!n.live) continue;
    if (full != nullptr) full->insert(full->end(), n.value.begin(), n.value.end());
    if (with_window != nullptr && !n.tombstone) with_window->insert(with_window->end(), n.value.begin(), n.value.end());
  }
}

size_t SwaRadixTree::check(std::string* report, size_t max_lines) const {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  for (const std::string& err : {full_lru_.verify(), swa_lru_.verify()}) {
    if (!err.empty()) complain("swa radix lru list: " + err);
  }
  size_t full_ev = 0, full_pr = 0, swa_ev = 0, swa_pr = 0, full_members = 0, swa_members = 0;
  std::vector<int32_t> child_count(nodes_.id_limit(), 0);
  std::vector<int64_t> child_locks(nodes_.id_limit(), 0);
  std::unordered_set<int64_t> uuids;
  for (size_t i = 1; i < nodes_.id_limit(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const Node& n = node(id);
    if (!n.live) continue;
    const std::string who = "swa radix node " + std::to_string(id);
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
    if (n.children == 0 && n.tombstone) complain(who + " is a tombstone leaf");
    if (n.swa_lock < 0 || n.full_lock < n.swa_lock) {
      complain(who + " has full lock " + std::to_string(n.full_lock) + " below swa lock " + std::to_string(n.swa_lock));
    }
    if (n.tombstone && n.swa_lock != 0) complain(who + " is an swa-locked tombstone");
    if (n.uuid != 0 && !uuids.insert(n.uuid).second) complain(who + " repeats lock uuid " + std::to_string(n.uuid));
    (n.full_lock > 0 ? full_pr : full_ev) += n.key.size();
    if (!n.tombstone) (n.swa_lock > 0 ? swa_pr : swa_ev) += n.key.size();
    ++full_members;
    swa_members += n.tombstone ? 0 : 1;
    if (!full_lru_.contains(id)) complain(who + " is missing from the full lru list");
    if (swa_lru_.contains(id) == n.tombstone) complain(who + (n.tombstone ? " is a tombstone in" : " is missing from") + " the swa lru list");
    if (n.full_lru.candidate != (n.children == 0 && n.full_lock == 0)) complain(who + " has a wrong full eviction candidacy");
    if (!n.tombstone && n.swa_lru.candidate != (n.swa_lock == 0)) complain(who + " has a wrong swa eviction candidacy");
  }
  for (size_t i = 0; i < nodes_.id_limit(); ++i) {
    const Node& n = node(static_cast<int32_t>(i));
    if (!n.live) continue;
    if (n.children != child_count[i]) complain("swa radix node " + std::to_string(i) + " child count is wrong");
    // A full lock is taken on a node and all its ancestors.
    if (i != kRoot && n.full_lock < child_locks[i]) complain("swa radix node " + std::to_string(i) + " holds fewer full locks than its children");
  }
  if (full_members != full_lru_.size() || swa_members != swa_lru_.size()) complain("swa radix lru lists hold foreign nodes");
  if (full_ev != full_evictable_ || full_pr != full_protected_ || swa_ev != swa_evictable_ || swa_pr != swa_protected_) {
    complain("swa radix sizes: full evictable " + std::to_string(full_evictable_) + " (actual " + std::to_string(full_ev) +
             "), full protected " + std::to_string(full_protected_) + " (actual " + std::to_string(full_pr) +
             "), swa evictable " + std::to_string(swa_evictable_) + " (actual " + std::to_string(swa_ev) +
             "), swa protected " + std::to_string(swa_protected_) + " (actual " + std::to_string(swa_pr) + ")");
  }
  return problems;
}

}  // namespace kvp::cache
