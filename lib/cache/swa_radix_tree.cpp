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

SwaRadixTree::SwaRadixTree(size_t window, Callbacks callbacks) : window_(window), cb_(std::move(callbacks)) { reset(); }

void SwaRadixTree::reset() {
  reserve_events(0);
  reset_structure();
  emit_cleared();
  swa_evictable_ = swa_protected_ = 0;
  host_tokens_ = host_only_tokens_ = 0;
}

bool SwaRadixTree::is_tombstone(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  return id > 0 && node(id).tombstone;
}

namespace {
// How many of a node's host window rows (they cover its last k tokens) fall in its first
// `at` tokens, when it is split there.
size_t window_rows_above(const SwaNode& n, size_t at) {
  const size_t len = n.key.size(), k = n.host_window.size();
  return k > len - at ? k - (len - at) : 0;
}
}  // namespace

void SwaRadixTree::prepare_split(const SwaNode& lower, size_t at, SwaNode* parts, std::vector<int64_t>&& tail) {
  const long upper_k = static_cast<long>(window_rows_above(lower, at));
  parts->host_window = std::move(tail);  // a spare's room for `window` rows: no allocation after a reserve
  if (upper_k > 0) parts->host_window.assign(lower.host_window.begin(), lower.host_window.begin() + upper_k);
}

// Both parts keep the tombstone flag and both lock counts (locks below pass
// through the upper part, so sizes stay unchanged). An SWA lock that stopped
// at the lower part covered all of it, so its uuid moves up to where that lock
// now stops. The host copy's window rows cover the node's last tokens: the lower part
// keeps those that fall in it, the upper part the rest (its own last tokens, copied
// by prepare_split). Allocates nothing.
void SwaRadixTree::on_split(SwaNode& upper, SwaNode& lower, SwaNode& parts) {
  upper.tombstone = lower.tombstone;
  upper.aux_lock = lower.aux_lock;
  upper.uuid = lower.uuid;
  lower.uuid = 0;
  const long upper_k = static_cast<long>(parts.host_window.size());
  upper.host_window = std::move(parts.host_window);
  lower.host_window.erase(lower.host_window.begin(), lower.host_window.begin() + upper_k);
}

namespace {
constexpr size_t kNoTombstone = SIZE_MAX;  // live run length before any tombstone
}  // namespace

size_t SwaRadixTree::cached_prefix(const int32_t* tokens, size_t n, const std::string& extra_key, size_t* usable) const {
  *usable = 0;
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (n == 0 || ns < 0) return 0;
  size_t run = kNoTombstone;
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    size_t len = 0;
    const int32_t c = find_edge(cur, ns, tokens + pos, n - pos, &len);
    if (c < 0 || node(c).evicted) break;  // host-only from here: not usable before a load-back
    const Node& x = node(c);
    if (x.tombstone) {
      if (run >= window_) *usable = pos;
      run = 0;
    }
    if (!x.tombstone && run != kNoTombstone) run += len;
    pos += len;
    cur = c;
    if (len < x.key.size()) break;
  }
  if (run >= window_) *usable = pos;
  return pos;
}

SwaRadixTree::InsertPreview SwaRadixTree::preview_insert(const int32_t* tokens, size_t n, const std::string& extra_key,
                                                         size_t prev_prefix_len, size_t swa_evicted_len) const {
  InsertPreview r;
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (ns < 0) return r;
  const size_t windowed_from = std::max(prev_prefix_len, swa_evicted_len);
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    size_t len = 0;
    const int32_t c = find_edge(cur, ns, tokens + pos, n - pos, &len);
    if (c < 0) break;
    const Node& x = node(c);
    // Only [pos, pos + len) matters: a split there keeps the flag and the locks in the upper part.
    const size_t end = pos + len;
    if (x.tombstone && x.full_lock > 0 && end > windowed_from) r.frees_windowed = true;
    if (!x.tombstone && x.aux_lock == 0) {
      const size_t lo = std::max(pos, prev_prefix_len), hi = std::min(end, swa_evicted_len);
      if (hi > lo) r.window_locked += hi - lo;
    }
    pos = end;
    cur = c;
    if (len < x.key.size()) break;
  }
  return r;
}

SwaMatch SwaRadixTree::match(const int32_t* tokens, size_t n, const std::string& extra_key) {
  SwaMatch r;
  match_into(tokens, n, extra_key, &r);
  return r;
}

void SwaRadixTree::match_into(const int32_t* tokens, size_t n, const std::string& extra_key, SwaMatch* out) {
  SwaMatch& r = *out;
  r.slots.clear();
  r.slots.reserve(n);  // before the split, the one change before the stamps
  r.node = root();
  r.matched = 0;
  r.host_node = 0;
  r.host_tokens = r.device_tokens = 0;
  const int32_t ns = nodes_.find_namespace(extra_key);
  if (n == 0 || ns < 0) return;
  // Live tokens since the last tombstone; "infinite" until the first one.
  size_t run = kNoTombstone;
  int32_t cur = kRoot, best = kRoot, host_best = -1;
  size_t pos = 0, best_len = 0, host_len = 0;
  bool on_device = true;  // still in the device nodes (they form a prefix of the path)
  while (pos < n) {
    int32_t c = nodes_.find_child(cur, ns, tokens[pos]);
    if (c < 0) break;
    if (on_device && node(c).evicted) {
      // The device part ends here: where a match can end without a load-back.
      if (run >= window_) {
        best = cur;
        best_len = pos;
      }
      on_device = false;
    }
    if (on_device && node(c).tombstone) {
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
    pos += len;
    cur = c;
    if (on_device) {
      r.slots.insert(r.slots.end(), x.value.begin(), x.value.end());
      if (!x.tombstone && run != kNoTombstone) run += len;
      r.device_tokens = pos;
    } else {
      // Host-only: a load-back gives its last host_window.size() tokens window slots (the
      // rest comes back as a tombstone), so a match could end at its end when that run is long enough.
      const size_t k = x.host_window.size();
      if (k < len) {
        run = k;
      } else if (run != kNoTombstone) {
        run += len;
      }
      if (run >= window_) {
        host_best = c;
        host_len = pos;
      }
    }
    if (partial) break;
  }
  if (on_device && run >= window_) {
    best = cur;
    best_len = pos;
  }
  r.matched = pos;
  r.slots.resize(best_len);
  r.node = nodes_.handle(best);
  if (host_best >= 0) {
    r.host_node = nodes_.handle(host_best);
    r.host_tokens = host_len - r.device_tokens;
    touch_path(host_best);
  } else {
    touch_path(best);
  }
}

// Revives tombstone `id` with the caller's slots (one per token of the node).
// The node's old full slots are freed as a tombstone's, so no window slot is
// freed through a possibly stale mapping, and an old slot the caller passed
// back as its own is kept rather than freed under the node.
Status SwaRadixTree::take_over(int32_t id, const int64_t* slots) {
  Node& n = node(id);
  std::vector<int64_t>& old = freed_;  // room reserved by insert
  old.clear();
  for (size_t i = 0; i < n.value.size(); ++i) {
    if (n.value[i] != slots[i]) old.push_back(n.value[i]);
  }
  KVPOOL_RETURN_IF_ERROR(cb_.free_tombstone(old.data(), old.size()));
  n.value.assign(slots, slots + n.value.size());
  n.tombstone = false;
  aux_lru_.push_mru(id);
  swa_evictable_ += n.value.size();  // tombstones are never SWA-locked
  refresh(id);
  return Status::ok();
}

// Frees the caller's slots for tokens [from, to) of node `id` (slots[i] is
// the caller's slot for the node's token i), except slots that are the node's own.
Status SwaRadixTree::free_duplicates(int32_t id, const int64_t* slots, size_t from, size_t to) {
  const Node& n = node(id);
  std::vector<int64_t>& dup = freed_;  // room reserved by insert
  dup.clear();
  for (size_t i = from; i < to; ++i) {
    if (n.value[i] != slots[i]) dup.push_back(slots[i]);
  }
  return dup.empty() ? Status::ok() : cb_.free_full(dup.data(), dup.size());
}

size_t SwaRadixTree::plan_insert(const int32_t* tokens, size_t n, int32_t ns, size_t prev_prefix_len,
                                 size_t swa_evicted_len) {
  steps_.clear();
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    InsertStep s{};
    s.node = find_edge(cur, ns, tokens + pos, n - pos, &s.len);
    if (s.node < 0) break;
    const Node& x = node(s.node);
    s.pos = pos;
    s.split = s.len < x.key.size();
    if (x.evicted) {
      // Host-only (the caller got nothing of it from the tree): the caller's slots become
      // its device copy, windowless ones as a tombstone. With nothing windowed after it,
      // that would leave a tombstone leaf: the caller's slots from here are freed instead.
      s.own = s.adopt = true;
      s.from = 0;
      s.windowed = std::min(s.len, swa_evicted_len > pos ? swa_evicted_len - pos : 0);
      s.drop = swa_evicted_len >= n;
      steps_.push_back(s);
      if (s.drop) return pos;
      pos += s.len;
      cur = s.node;
      if (s.split) break;
      continue;
    }
    // Tokens past what the caller got from the tree: its slots are its own.
    s.own = pos + s.len > prev_prefix_len;
    if (s.own) {
      s.from = prev_prefix_len > pos ? prev_prefix_len - pos : 0;
      // The caller's slots from here on still have window slots.
      s.windowed = std::min(s.len, std::max(s.from, swa_evicted_len > pos ? swa_evicted_len - pos : 0));
      // A live node keeps its slots. So does a full-locked tombstone: lock
      // holders use its old full slots, which must not be freed under them
      // (later SGLang skips this revive too, PR #29352).
      s.revive = x.tombstone && x.full_lock == 0 && s.windowed < s.len;
    }
    steps_.push_back(s);
    pos += s.len;
    cur = s.node;
    if (s.split) break;  // the split's upper part has no other child to follow
  }
  return pos;
}

void SwaRadixTree::reserve_planned(size_t pos, size_t n, size_t swa_evicted_len) {
  size_t needs[kNodesPerInsert] = {0, 0, 0, 0};  // the two splits, the two parts of the tail
  size_t freed = 0, nodes = 0, adopted = 0;
  for (const InsertStep& s : steps_) {
    if (s.drop) break;
    if (s.adopt) adopted += s.len;
    if (s.split) needs[0] = s.len;
    if (s.revive && s.windowed > 0) needs[1] = s.windowed;
    if (s.adopt && s.windowed > 0 && s.windowed < s.len) needs[1] = s.windowed;  // one windowed boundary per insert
    if (s.adopt && !s.split) node(s.node).value.reserve(s.len);  // a split's upper part gets a spare buffer
    if (s.own && !s.adopt) freed = std::max(freed, std::max(s.len - s.from, s.len - s.windowed));
  }
  const size_t mid = windowless_end(pos, n, swa_evicted_len);
  if (mid < n) {
    needs[2] = mid - pos;
    needs[3] = n - mid;
  }
  for (size_t need : needs) nodes += need > 0 ? 1 : 0;
  prepare(nodes);
  reserve_buffers(needs, kNodesPerInsert);
  if (freed_.capacity() < freed) freed_.reserve(freed);
  reserve_events(n - pos + adopted);  // KV events: the new leaves' tokens and the adopted host-only ones
}

void SwaRadixTree::reserve_inserts(const size_t* bounds, size_t inserts) {
  DualLruTree::reserve_inserts(bounds, inserts);
  const size_t most = inserts == 0 ? 0 : *std::max_element(bounds, bounds + inserts);
  if (freed_.capacity() < most) freed_.reserve(most);
  if (steps_.capacity() < nodes_.id_limit_capacity()) steps_.reserve(nodes_.id_limit_capacity());  // a path is shorter
}

Status SwaRadixTree::insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                            size_t prev_prefix_len, size_t* prefix_len, NodeHandle* last_node, size_t swa_evicted_len,
                            bool count_hit) {
  // Memory first: the namespace (invisible until a node uses it), the plan, and
  // what the planned steps and the tail need.
  const int32_t ns = nodes_.intern(extra_key);
  size_t pos = plan_insert(tokens, n, ns, prev_prefix_len, swa_evicted_len);
  reserve_planned(pos, n, swa_evicted_len);
  int32_t cur = kRoot;
  size_t adopted_from = SIZE_MAX;
  for (const InsertStep& s : steps_) {
    if (s.drop) {
      // Nothing windowed follows the host-only nodes: the caller's windowless slots go back.
      KVPOOL_RETURN_IF_ERROR(cb_.free_full(slots + s.pos, n - s.pos));
      *prefix_len = adopted_from != SIZE_MAX ? adopted_from : s.pos;
      if (last_node != nullptr) *last_node = nodes_.handle(cur);
      return Status::ok();
    }
    int32_t c = s.node;
    touch(c);
    if (s.split) c = split(c, s.len);
    const int64_t* own = slots + s.pos;  // the caller's slot for the node's token i is own[i]
    if (s.adopt) {
      if (adopted_from == SIZE_MAX) adopted_from = s.pos;
      if (s.windowed > 0 && s.windowed < s.len) {
        const int32_t upper = split(c, s.windowed);  // `c` is now the lower part
        adopt(upper, own, false);
        adopt(c, own + s.windowed, true);
      } else {
        adopt(c, own, s.windowed == 0);
      }
    } else if (s.revive) {
      // Revive only the caller's windowed part; the part before it stays a
      // tombstone (the caller's slots there are the node's own, or windowless duplicates).
      KVPOOL_RETURN_IF_ERROR(free_duplicates(c, own, s.from, s.windowed));
      if (s.windowed > 0) split(c, s.windowed);  // `c` is now the lower part
      KVPOOL_RETURN_IF_ERROR(take_over(c, own + s.windowed));
    } else if (s.own) {
      KVPOOL_RETURN_IF_ERROR(free_duplicates(c, own, s.from, s.len));
    }
    if (count_hit && !s.adopt) ++node(c).write_hits;
    cur = c;
  }
  *prefix_len = pos;
  if (pos < n) {
    const size_t mid = windowless_end(pos, n, swa_evicted_len);
    if (mid == n) {
      // Nothing of the new part has window KV: caching it would make a tombstone leaf.
      KVPOOL_RETURN_IF_ERROR(cb_.free_full(slots + pos, n - pos));
    } else {
      const uint32_t hits = count_hit ? 1 : 0;
      if (mid > pos) {
        cur = add_leaf(cur, ns, tokens + pos, slots + pos, mid - pos, [hits](Node& t) {
          t.tombstone = true;
          t.write_hits = hits;
        });
        pos = mid;
      }
      cur = add_leaf(cur, ns, tokens + pos, slots + pos, n - pos, [hits](Node& l) { l.write_hits = hits; });
      swa_evictable_ += n - pos;
    }
  }
  if (adopted_from != SIZE_MAX) *prefix_len = adopted_from;
  if (last_node != nullptr) *last_node = nodes_.handle(cur);
  return Status::ok();
}

Status SwaRadixTree::lock(NodeHandle h, int64_t* uuid) {
  *uuid = 0;
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  if (node(id).evicted) {
    return Status::invalid("node handle " + std::to_string(h) + " is host-only: load it back first (kvhost_load_back)");
  }
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
      if (p.aux_lock++ == 0) {
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
    if (p.full_lock <= 0 || (in_window && p.aux_lock <= 0)) {
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
      if (--p.aux_lock == 0) {
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
  const Node& n = node(id);
  if (n.children != 0 || n.full_lock != 0 || n.aux_lock != 0) {
    return Status::internal("swa radix node " + std::to_string(id) + " is not an unlocked leaf");
  }
  if (n.tombstone) {
    KVPOOL_RETURN_IF_ERROR(free_node_slots(n));
  } else {
    KVPOOL_RETURN_IF_ERROR(cb_.free_full(n.value.data(), n.value.size()));
    aux_lru_.remove(id);
    swa_evictable_ -= n.value.size();
    *swa_evicted += n.value.size();
    if (!n.host.empty()) {
      free_host_(n.host.data(), n.host.size(), n.host_window.data(), n.host_window.size());
      host_tokens_ -= n.key.size();
    }
  }
  return remove_leaf_cascade(id, full_evicted, [this](const Node& t) { return free_node_slots(t); });
}

Status SwaRadixTree::free_node_slots(const SwaNode& n) {
  if (!n.evicted) KVPOOL_RETURN_IF_ERROR(cb_.free_tombstone(n.value.data(), n.value.size()));
  if (!n.host.empty()) {
    if (free_host_) free_host_(n.host.data(), n.host.size(), n.host_window.data(), n.host_window.size());
    host_tokens_ -= n.key.size();
    if (n.evicted) host_only_tokens_ -= n.key.size();
  }
  return Status::ok();
}

// Drops the window KV of an SWA-unlocked internal node; its full KV stays.
Status SwaRadixTree::tombstone(int32_t id, size_t* swa_evicted) {
  Node& n = node(id);
  KVPOOL_RETURN_IF_ERROR(cb_.free_swa(n.value.data(), n.value.size()));
  aux_lru_.remove(id);
  n.tombstone = true;
  swa_evictable_ -= n.value.size();
  *swa_evicted += n.value.size();
  refresh(id);
  return Status::ok();
}

Status SwaRadixTree::evict(size_t full_tokens, size_t swa_tokens, size_t* full_evicted, size_t* swa_evicted) {
  *full_evicted = *swa_evicted = 0;
  reserve_events(0);
  while (*full_evicted < full_tokens) {
    const int32_t victim = full_lru_.oldest_candidate();
    if (victim < 0) break;
    KVPOOL_RETURN_IF_ERROR(evict_device_leaf(victim, full_evicted, swa_evicted));
  }
  while (*swa_evicted < swa_tokens) {
    const int32_t victim = aux_lru_.oldest_candidate();
    if (victim < 0) break;
    // An SWA-unlocked leaf is fully unlocked: full locks on a leaf come only
    // from locking the leaf itself, which SWA-locks it too (or from a load-back's pin of
    // the device node above its chain: that one is only tombstoned). With the host tier a
    // device leaf may have host-only children.
    const Node& v = node(victim);
    if (v.children == v.host_children && v.full_lock == 0) {
      KVPOOL_RETURN_IF_ERROR(evict_device_leaf(victim, full_evicted, swa_evicted));
    } else {
      KVPOOL_RETURN_IF_ERROR(tombstone(victim, swa_evicted));
    }
  }
  return Status::ok();
}

void SwaRadixTree::collect_slots(std::vector<int64_t>* full, std::vector<int64_t>* with_window) const {
  collect(full, [with_window](const Node& n) {
    if (with_window != nullptr) with_window->insert(with_window->end(), n.value.begin(), n.value.end());
  });
}

size_t SwaRadixTree::check(std::string* report, size_t max_lines) const {
  std::unordered_set<int64_t> uuids;
  size_t host = 0, host_only = 0;
  size_t problems = check_structure(
      "swa radix", "swa", swa_evictable_, swa_protected_, report, max_lines, [](const Node& n) { return n.key.size(); },
      [&](const Node& n, const std::string& who, const auto& complain) {
        if (n.uuid != 0 && !uuids.insert(n.uuid).second) {
          complain(who + " repeats lock uuid " + std::to_string(n.uuid));
        }
        if (!n.host.empty()) host += n.key.size();
        if (n.evicted) host_only += n.key.size();
        if (!n.host.empty() && !tiered_) complain(who + " has a host copy but the tree has no host tier");
        if (n.evicted && !n.tombstone) complain(who + " is host-only but not a tombstone");
        if (n.evicted && n.aux_lock != 0) complain(who + " is host-only with a swa lock");
        if (n.host_window.size() > std::min(window_, n.key.size()) || (!n.host_window.empty() && n.host.empty())) {
          complain(who + " holds " + std::to_string(n.host_window.size()) + " host window rows for " +
                   std::to_string(n.key.size()) + " tokens (window " + std::to_string(window_) +
                   (n.host.empty() ? ", no host copy)" : ")"));
        }
      });
  // Every host-only node's path has host copies (a load-back can bring it back).
  for (size_t i = 1; i < nodes_.id_limit(); ++i) {
    const Node& n = node(static_cast<int32_t>(i));
    if (!n.live || !n.evicted || path_on_host(static_cast<int32_t>(i))) continue;
    if (problems++ < max_lines) *report += "swa radix node " + std::to_string(i) + " is host-only but a node on its path has no host copy\n";
  }
  if (host != host_tokens_ || host_only != host_only_tokens_) {
    if (problems++ < max_lines) {
      *report += "swa radix host sizes: " + std::to_string(host_tokens_) + " host tokens (actual " + std::to_string(host) + "), " +
                 std::to_string(host_only_tokens_) + " host-only (actual " + std::to_string(host_only) + ")\n";
    }
  }
  return problems;
}

}  // namespace kvp::cache
