// The host tier's part of the radix tree (SGLANG_SEMANTICS §5.1-§5.3): node states
// device-only / device+host / host-only, device eviction that keeps backed-up nodes,
// host eviction, and moving host-only chains back to the device. The copies themselves
// are the caller's (cache/host_tier.cpp): the tree only records where tokens live.
#include <algorithm>

#include "cache/radix_tree.hpp"

namespace kvp::cache {

bool RadixTree::path_on_host(int32_t id) const {
  for (int32_t x = id; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    if (nodes_[static_cast<size_t>(x)].host.empty()) return false;
  }
  return true;
}

bool RadixTree::make_host_copies(int32_t id, const MakeHostCopies& copy) {
  // The nodes of the path without a copy, root-to-leaf; each must be whole pages.
  tier_nodes_.clear();
  for (int32_t x = id; x != kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    const Node& n = nodes_[static_cast<size_t>(x)];
    if (!n.host.empty()) continue;
    if (n.evicted || (page_ > 1 && !n.paged)) return false;
    tier_nodes_.push_back(x);
  }
  std::reverse(tier_nodes_.begin(), tier_nodes_.end());
  tier_scratch_.clear();
  for (int32_t x : tier_nodes_) {
    const Node& n = nodes_[static_cast<size_t>(x)];
    for (int64_t v : n.value) tier_scratch_.push_back(page_ > 1 ? v / page_ : v);
  }
  const size_t pages = tier_scratch_.size();
  tier_scratch_.resize(2 * pages);  // device pages, then the host pages the hook fills
  if (!copy(tier_scratch_.data(), pages, tier_scratch_.data() + pages)) return false;
  size_t at = pages;
  for (int32_t x : tier_nodes_) {
    Node& n = nodes_[static_cast<size_t>(x)];
    const size_t count = n.value.size();
    n.host.assign(tier_scratch_.begin() + static_cast<long>(at), tier_scratch_.begin() + static_cast<long>(at + count));
    at += count;
    host_tokens_ += n.key.size();
    if (events_enabled_) emit_host(n, true);
    if (copied_.size() < copied_.capacity()) copied_.push_back(handle(x));  // reserved: never allocates
  }
  return true;
}

void RadixTree::drop_to_host(int32_t id) {
  Node& n = nodes_[static_cast<size_t>(id)];
  n.evicted = true;
  n.value.clear();  // capacity kept: a later adopt() of the same tokens reuses it
  host_only_tokens_ += n.key.size();
  Node& parent = nodes_[static_cast<size_t>(n.parent)];
  --parent.device_children;
  refresh_order(id);  // from the device order to the host order (a leaf) or to none
  refresh_order(n.parent);
}

void RadixTree::adopt(int32_t id, const int64_t* slots) {
  Node& n = nodes_[static_cast<size_t>(id)];
  const size_t len = n.key.size(), P = static_cast<size_t>(page_);
  bool paged = P > 1;
  for (size_t off = 0; paged && off < len; off += P) {
    for (size_t j = 1; j < P; ++j) paged = paged && static_cast<uint64_t>(slots[off + j]) == static_cast<uint64_t>(slots[off]) + j;
  }
  if (paged) {
    n.value.resize(len / P);
    for (size_t p = 0; p < n.value.size(); ++p) n.value[p] = slots[p * P];
  } else {
    n.value.assign(slots, slots + len);
    if (P > 1) all_paged_ = false;
  }
  n.paged = paged;
  n.evicted = false;
  host_only_tokens_ -= len;
  (n.lock_ref > 0 ? protected_ : evictable_) += len;
  ++nodes_[static_cast<size_t>(n.parent)].device_children;
  refresh_order(id);
  refresh_order(n.parent);
  if (events_enabled_) {
    ensure_hashes(id);
    emit_stored(id);
  }
}

void RadixTree::emit_host(const Node& n, bool stored) {
  const EventType type = stored ? EventType::kHostStored : EventType::kHostRemoved;
  for (const Digest& d : n.hashes) push_event(type, event_id(d), false, 0, nullptr, 0);
}

Status RadixTree::evict_host(size_t tokens, const FreeHostPages& free_host, size_t* evicted, const KeepHost& keep) {
  *evicted = 0;
  prepare(0);  // spare order nodes for parents that become candidates
  if (events_enabled_) reserve_events(host_only_tokens_ / static_cast<size_t>(page_), 0);  // a HostRemoved per page at most
  // Kept leaves are stepped over (SGLang skips nodes whose host copy is pinned): `at` is the
  // first candidate not yet looked at. A parent that becomes a candidate is inserted by its
  // own key and is looked at when the walk reaches it.
  auto at = host_leaves_.begin();
  while (*evicted < tokens && at != host_leaves_.end()) {
    const int32_t id = std::get<2>(*at);
    Node& n = nodes_[static_cast<size_t>(id)];
    if (keep && keep(n.host.data(), n.host.size())) {
      ++at;
      continue;
    }
    at = std::next(at);
    if (free_host) free_host(n.host.data(), n.host.size());
    if (events_enabled_) emit_host(n, false);
    host_tokens_ -= n.key.size();
    host_only_tokens_ -= n.key.size();
    *evicted += n.key.size();
    auto nh = host_leaves_.extract(n.order_it);
    if (spare_orders_.size() < spare_orders_.capacity()) spare_orders_.push_back(std::move(nh));
    n.order_set = 0;
    const int32_t parent = n.parent;
    unlink_child(parent, id);
    free_node(id);
    refresh_order(parent);  // a host-only parent left without children becomes a candidate
    // A parent that became a candidate may sort before `at` (every candidate before `at`
    // is kept): it is next then, as in SGLang's heap.
    const Node& p = nodes_[static_cast<size_t>(parent)];
    if (p.order_set == kHostOrder && (at == host_leaves_.end() || *p.order_it < *at)) at = p.order_it;
  }
  return Status::ok();
}

void RadixTree::backup_candidates(NodeHandle node, uint32_t min_hits, std::vector<NodeHandle>* out) const {
  const int32_t id = resolve(node);
  const size_t first = out->size();
  for (int32_t x = id; x > kRoot; x = nodes_[static_cast<size_t>(x)].parent) {
    const Node& n = nodes_[static_cast<size_t>(x)];
    if (!n.evicted && n.host.empty() && n.write_hits >= min_hits && (page_ == 1 || n.paged)) out->push_back(handle(x));
  }
  std::reverse(out->begin() + static_cast<long>(first), out->end());
}

Status RadixTree::device_pages(NodeHandle node, std::vector<int64_t>* out) const {
  const int32_t id = resolve(node);
  if (id <= kRoot) return Status::invalid("node handle " + std::to_string(node) + " is stale, unknown or the root");
  const Node& n = nodes_[static_cast<size_t>(id)];
  if (n.evicted) return Status::invalid("radix node " + std::to_string(id) + " is not on the device");
  if (page_ > 1 && !n.paged) {
    return Status::unsupported("radix node " + std::to_string(id) + " holds slots that are not whole pages");
  }
  for (int64_t v : n.value) out->push_back(page_ > 1 ? v / page_ : v);
  return Status::ok();
}

void RadixTree::reserve_host(NodeHandle node) {
  const int32_t id = resolve(node);
  if (id > kRoot) nodes_[static_cast<size_t>(id)].host.reserve(nodes_[static_cast<size_t>(id)].key.size() / static_cast<size_t>(page_));
}

Status RadixTree::attach_host(NodeHandle node, const int64_t* host_pages, size_t pages) {
  const int32_t id = resolve(node);
  if (id <= kRoot) return Status::invalid("node handle " + std::to_string(node) + " is stale, unknown or the root");
  Node& n = nodes_[static_cast<size_t>(id)];
  if (n.evicted || !n.host.empty()) return Status::invalid("radix node " + std::to_string(id) + " already has a host copy");
  if (pages * static_cast<size_t>(page_) != n.key.size()) {
    return Status::invalid("radix node " + std::to_string(id) + " has " + std::to_string(n.key.size()) + " tokens, got " +
                           std::to_string(pages) + " host pages");
  }
  n.host.assign(host_pages, host_pages + pages);
  host_tokens_ += n.key.size();
  if (events_enabled_) {
    ensure_hashes(id);
    emit_host(n, true);
  }
  return Status::ok();
}

Status RadixTree::host_chain(NodeHandle node, std::vector<NodeHandle>* chain, size_t* tokens,
                             std::vector<int64_t>* host_pages, NodeHandle* device_ancestor) const {
  const int32_t id = resolve(node);
  if (id < 0) return Status::invalid("node handle " + std::to_string(node) + " is stale or unknown");
  chain->clear();
  host_pages->clear();
  *tokens = 0;
  int32_t x = id;
  for (; x != kRoot && nodes_[static_cast<size_t>(x)].evicted; x = nodes_[static_cast<size_t>(x)].parent) {
    chain->push_back(handle(x));
    *tokens += nodes_[static_cast<size_t>(x)].key.size();
  }
  std::reverse(chain->begin(), chain->end());
  for (NodeHandle h : *chain) {
    const Node& n = nodes_[static_cast<size_t>(resolve(h))];
    host_pages->insert(host_pages->end(), n.host.begin(), n.host.end());
  }
  *device_ancestor = handle(x);
  return Status::ok();
}

Status RadixTree::restore_chain(const std::vector<NodeHandle>& chain, const int64_t* slots, size_t n) {
  size_t total = 0;
  int32_t above = -1;
  for (NodeHandle h : chain) {
    const int32_t id = resolve(h);
    if (id <= kRoot || !nodes_[static_cast<size_t>(id)].evicted) {
      return Status::invalid("node handle " + std::to_string(h) + " is not a host-only node");
    }
    const int32_t parent = nodes_[static_cast<size_t>(id)].parent;
    if (above >= 0 ? parent != above : nodes_[static_cast<size_t>(parent)].evicted) {
      return Status::invalid("the chain's nodes do not follow each other from a device node");
    }
    above = id;
    total += nodes_[static_cast<size_t>(id)].key.size();
  }
  if (total != n) return Status::invalid("the chain has " + std::to_string(total) + " tokens, got " + std::to_string(n) + " slots");
  size_t at = 0;
  for (NodeHandle h : chain) {
    const int32_t id = resolve(h);
    adopt(id, slots + at);
    at += nodes_[static_cast<size_t>(id)].key.size();
  }
  return Status::ok();
}

Status RadixTree::page_digests(NodeHandle node, std::vector<Digest>* out) {
  const int32_t id = resolve(node);
  if (id <= kRoot) return Status::invalid("node handle " + std::to_string(node) + " is stale, unknown or the root");
  ensure_hashes(id);
  const Node& n = nodes_[static_cast<size_t>(id)];
  out->insert(out->end(), n.hashes.begin(), n.hashes.end());
  return Status::ok();
}

bool RadixTree::last_digest(NodeHandle node, Digest* out) {
  const int32_t id = resolve(node);
  if (id <= kRoot) return false;
  ensure_hashes(id);
  *out = nodes_[static_cast<size_t>(id)].hashes.back();
  return true;
}

void RadixTree::host_pages_of(NodeHandle node, std::vector<int64_t>* out) const {
  const int32_t id = resolve(node);
  if (id > kRoot) out->insert(out->end(), nodes_[static_cast<size_t>(id)].host.begin(), nodes_[static_cast<size_t>(id)].host.end());
}

void RadixTree::take_copied(std::vector<NodeHandle>* out) {
  out->insert(out->end(), copied_.begin(), copied_.end());
  copied_.clear();
}

const std::string& RadixTree::namespace_of(NodeHandle node) const {
  const int32_t id = resolve(node);
  return namespace_names_[static_cast<size_t>(id < 0 ? 0 : nodes_[static_cast<size_t>(id)].extra)];
}

Status RadixTree::insert_host_only(const int32_t* tokens, size_t n, const std::string& extra_key, size_t from,
                                   const int64_t* host_pages, const Digest* digests, size_t* used_from) {
  const size_t P = static_cast<size_t>(page_);
  *used_from = from <= n ? (n - from) / P : 0;
  if (!tiered_) return Status::invalid("the tree has no host tier");
  if (n % P != 0 || from % P != 0 || from > n) {
    return Status::invalid("host-only insert of " + std::to_string(n) + " tokens from " + std::to_string(from) +
                           ": not whole pages of " + std::to_string(P));
  }
  const auto ns = namespaces_.find(extra_key);
  if (from == n || (from > 0 && ns == namespaces_.end())) return Status::ok();
  const int32_t extra = ns == namespaces_.end() ? -1 : ns->second;
  // Allocation first (a split and a leaf, their buffers), then the walk that changes things.
  const int32_t extra_id = extra >= 0 ? extra : intern(extra_key);
  prepare(2, 2);
  std::vector<int32_t> key;
  std::vector<int64_t> value, host;
  std::vector<Digest> hashes;
  int32_t cur = kRoot;
  size_t pos = 0;
  while (pos < n) {
    const int32_t c = find_child(cur, extra_id, tokens + pos);
    if (c < 0) break;
    const size_t len = match_len(nodes_[static_cast<size_t>(c)], tokens + pos, n - pos);
    if (len < nodes_[static_cast<size_t>(c)].key.size()) {
      if (pos + len < from) return Status::ok();  // the part before the fetched pages is not in the tree
      // The leaf will hang below the matched part: split there, if that part is on the host.
      if (!path_on_host(c)) return Status::ok();
      take_spare_leaf(n - pos - len, values_for(n - pos - len), &key, &value, &host);
      key.assign(tokens + pos + len, tokens + n);
      value.reserve(values_for(n - pos - len));  // room for a later load-back (adopt)
      host.assign(host_pages + (pos + len - from) / P, host_pages + (n - from) / P);
      if (digests != nullptr) hashes.assign(digests + (pos + len - from) / P, digests + (n - from) / P);
      cur = split(c, len);
      pos += len;
      break;
    }
    cur = c;
    pos += len;
  }
  if (pos == n) return Status::ok();  // the tree has every page already
  if (pos < from || !path_on_host(cur)) return Status::ok();
  if (key.empty()) {  // no split: the walk stopped at a node boundary
    take_spare_leaf(n - pos, values_for(n - pos), &key, &value, &host);
    key.assign(tokens + pos, tokens + n);
    value.reserve(values_for(n - pos));
    host.assign(host_pages + (pos - from) / P, host_pages + (n - from) / P);
    if (digests != nullptr) hashes.assign(digests + (pos - from) / P, digests + (n - from) / P);
  }
  if (events_enabled_) reserve_events(host.size(), 0);
  const int32_t leaf = new_node();
  Node& l = nodes_[static_cast<size_t>(leaf)];
  l.extra = extra_id;
  l.key = std::move(key);
  l.value = std::move(value);
  l.value.clear();
  l.paged = P > 1;
  l.evicted = true;
  l.host = std::move(host);
  l.hashes = std::move(hashes);
  has_hashes_ = has_hashes_ || !l.hashes.empty();
  l.last_access = l.creation = ++clock_;
  link_child(cur, leaf);
  host_tokens_ += n - pos;
  host_only_tokens_ += n - pos;
  refresh_order(leaf);
  refresh_order(cur);
  if (events_enabled_) {
    ensure_hashes(leaf);
    emit_host(nodes_[static_cast<size_t>(leaf)], true);
  }
  *used_from = (pos - from) / P;
  return Status::ok();
}

TierNodeInfo RadixTree::tier_node(NodeHandle node) const {
  TierNodeInfo info;
  const int32_t id = resolve(node);
  if (id < 0) return info;
  const Node& n = nodes_[static_cast<size_t>(id)];
  info.tokens = n.key.size();
  info.on_device = !n.evicted;
  info.on_host = !n.host.empty() || id == kRoot;
  info.write_hits = n.write_hits;
  info.lock_ref = n.lock_ref;
  return info;
}

void RadixTree::collect_host_pages(std::vector<int64_t>* out) const {
  for (size_t id = 1; id < nodes_.size(); ++id) {
    if (nodes_[id].live) out->insert(out->end(), nodes_[id].host.begin(), nodes_[id].host.end());
  }
}

}  // namespace kvp::cache
