// The host tier's part of the swa radix tree (docs/host-tier.md, "swa pools"): a node
// may hold a host copy of its full-layer rows (every token) and of its window-layer rows
// (its last min(window, tokens) tokens, when it was live at backup), and leave the device
// as a host-only node, a tombstone for the window layers. A load-back gives the nodes that
// cover the last `window` tokens of the chain window slots again, so a match can end there.
// The copies are the caller's (cache/swa_cache_tier.cpp): the tree records where rows live.
#include <algorithm>

#include "cache/swa_radix_tree.hpp"

namespace kvp::cache {

void SwaRadixTree::drop_to_host(int32_t id) {
  Node& n = node(id);
  full_evictable_ -= n.key.size();  // a device leaf candidate is unlocked
  full_lru_.remove(id);
  n.value.clear();  // capacity kept: a load-back reuses it
  n.evicted = true;
  n.tombstone = true;  // its window slots went with its device KV
  emit(id, EventType::kBlockRemoved);
  host_lru_.push_mru(id);
  host_only_tokens_ += n.key.size();
  ++node(n.parent).host_children;
  refresh(id);
  refresh(n.parent);
}

void SwaRadixTree::adopt(int32_t id, const int64_t* slots, bool live) {
  Node& n = node(id);
  n.value.assign(slots, slots + n.key.size());  // capacity reserved by the caller
  n.evicted = false;
  emit(id, EventType::kBlockStored);
  host_lru_.remove(id);
  full_lru_.push_mru(id);
  host_only_tokens_ -= n.key.size();
  (n.full_lock > 0 ? full_protected_ : full_evictable_) += n.key.size();
  if (live) {
    n.tombstone = false;
    aux_lru_.push_mru(id);
    swa_evictable_ += n.key.size();  // host-only nodes hold no swa lock
  }
  --node(n.parent).host_children;
  refresh(id);
  refresh(n.parent);
}

void SwaRadixTree::pin_path(int32_t id, int delta, bool window) {
  size_t covered = 0;  // live device tokens above the host-only part (window pins)
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    Node& p = node(x);
    const bool was = p.full_lock > 0;
    p.full_lock += delta;
    if (!p.evicted && was != (p.full_lock > 0)) {
      if (was) {
        full_protected_ -= p.key.size();
        full_evictable_ += p.key.size();
      } else {
        full_evictable_ -= p.key.size();
        full_protected_ += p.key.size();
      }
    }
    // The window of live device tokens right above the chain: what makes a loaded chain's
    // end usable when the chain itself holds less than a window. A tombstone ends it (and
    // stays one: nothing revives a node while the pin is held).
    if (window && !p.evicted && covered < window_ && !p.tombstone) {
      const bool aux_was = p.aux_lock > 0;
      p.aux_lock += delta;
      if (aux_was != (p.aux_lock > 0)) {
        if (aux_was) {
          swa_protected_ -= p.key.size();
          swa_evictable_ += p.key.size();
        } else {
          swa_evictable_ -= p.key.size();
          swa_protected_ += p.key.size();
        }
      }
      covered += p.key.size();
    } else if (window && !p.evicted) {
      covered = window_;  // past a tombstone or a whole window: no more window pins
    }
    refresh(x);
  }
}

Status SwaRadixTree::pin(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  pin_path(id, 1, true);
  return Status::ok();
}

Status SwaRadixTree::unpin(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    if (node(x).full_lock <= 0) return Status::invalid("node handle " + std::to_string(h) + " is not pinned");
  }
  pin_path(id, -1, true);
  return Status::ok();
}

Status SwaRadixTree::evict_device_leaf(int32_t id, size_t* full_evicted, size_t* swa_evicted) {
  if (tiered_) {
    bool keep = path_on_host(id);
    if (!keep && keep_) {
      // The keeper may copy (and, for room, delete host-only leaves): the node and its path
      // stay locked meanwhile, so no cascade removes them.
      const NodeHandle h = nodes_.handle(id);
      pin_path(id, 1, false);
      bool made = false;
      {
        // The keeper's copy may first evict host-only nodes for room (a full host tier):
        // this eviction's reserve_events(0) holds their HostRemoved events too.
        const EventRoomHold held = hold_event_room();
        made = keep_(h);
      }
      pin_path(id, -1, false);
      keep = made && path_on_host(id);
    }
    if (keep) {
      Node& n = node(id);
      if (n.tombstone) {
        KVPOOL_RETURN_IF_ERROR(cb_.free_tombstone(n.value.data(), n.value.size()));
      } else {
        KVPOOL_RETURN_IF_ERROR(cb_.free_full(n.value.data(), n.value.size()));
        aux_lru_.remove(id);
        swa_evictable_ -= n.key.size();  // an evicted device leaf is unlocked
        *swa_evicted += n.key.size();
      }
      *full_evicted += n.key.size();
      drop_to_host(id);
      return Status::ok();
    }
  }
  if (node(id).children != 0) {
    // Only host-only children, yet no host copy on the path: cannot happen (a host-only
    // node's ancestors all have copies); refuse rather than orphan them.
    return Status::internal("swa radix node " + std::to_string(id) + " has host-only children but no host copy");
  }
  return evict_leaf(id, full_evicted, swa_evicted);
}

void SwaRadixTree::reserve_host(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id <= kRoot) return;
  node(id).host.reserve(node(id).key.size());
  node(id).host_window.reserve(std::min(window_, node(id).key.size()));
  reserve_event_room(node(id).key.size());  // its HostStored events (device eviction's keeper calls this)
}

size_t SwaRadixTree::window_tail(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  if (id <= kRoot || node(id).evicted || node(id).tombstone) return 0;
  return std::min(window_, node(id).key.size());
}

Status SwaRadixTree::attach_host(NodeHandle h, const int64_t* full, size_t n, const int64_t* window, size_t k) {
  const int32_t id = nodes_.resolve(h);
  if (id <= kRoot) return Status::invalid("node handle " + std::to_string(h) + " is stale, unknown or the root");
  Node& x = node(id);
  if (x.evicted || !x.host.empty()) return Status::invalid("swa radix node " + std::to_string(id) + " already has a host copy");
  if (n != x.key.size() || k != window_tail(h)) {
    return Status::invalid("swa radix node " + std::to_string(id) + " has " + std::to_string(x.key.size()) + " tokens and a " +
                           std::to_string(window_tail(h)) + "-token window tail, got " + std::to_string(n) + " and " +
                           std::to_string(k) + " host slots");
  }
  x.host.assign(full, full + n);
  x.host_window.assign(window, window + k);
  host_tokens_ += n;
  emit(id, EventType::kHostStored);
  return Status::ok();
}

Status SwaRadixTree::host_chain_tokens(NodeHandle h, size_t* tokens) const {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  *tokens = 0;
  for (int32_t x = id; x != kRoot && node(x).evicted; x = node(x).parent) *tokens += node(x).key.size();
  return Status::ok();
}

Status SwaRadixTree::plan_restore(NodeHandle h, SwaRestorePlan* plan) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  plan->chain.clear();
  plan->live.clear();
  plan->host_full.clear();
  plan->host_window.clear();
  plan->tokens = plan->live_tokens = 0;
  plan->split_node = 0;
  plan->split_at = 0;
  // From the chain's end upward: nodes whose window rows cover them whole stay live while
  // fewer than `window` tokens are covered; the first covered only at its end is to be
  // split there (its upper part, and everything above, come back as tombstones). The
  // split waits for restore_chain: a load refused for want of device room changes no node.
  size_t covered = 0;
  int32_t top_live = -1;
  for (int32_t x = id; x != kRoot && node(x).evicted && covered < window_; x = node(x).parent) {
    const size_t k = node(x).host_window.size(), len = node(x).key.size();
    if (k == 0) break;
    top_live = x;
    if (k < len) {
      plan->split_node = nodes_.handle(x);
      plan->split_at = len - k;
      break;
    }
    covered += len;
  }
  std::vector<int32_t> ids;
  for (int32_t x = id; x != kRoot && node(x).evicted; x = node(x).parent) ids.push_back(x);
  std::reverse(ids.begin(), ids.end());
  bool live = false;
  for (int32_t x : ids) {
    if (x == top_live) live = true;
    Node& n = node(x);
    if (n.value.capacity() < n.key.size()) n.value.reserve(n.key.size());  // restore_chain allocates nothing
    plan->chain.push_back(nodes_.handle(x));
    plan->live.push_back(live ? 1 : 0);
    plan->tokens += n.key.size();
    plan->host_full.insert(plan->host_full.end(), n.host.begin(), n.host.end());
    if (live) {
      // A split node's window rows all lie in its lower part, the part that comes back live.
      plan->live_tokens += x == top_live ? n.key.size() - plan->split_at : n.key.size();
      plan->host_window.insert(plan->host_window.end(), n.host_window.begin(), n.host_window.end());
    }
  }
  if (plan->split_at > 0) reserve_split(plan->split_at);  // its upper part's buffers hold split_at slots
  reserve_events(plan->tokens);
  return Status::ok();
}

Status SwaRadixTree::restore_chain(const SwaRestorePlan& plan, const int64_t* slots) {
  int32_t above = -1;
  for (NodeHandle h : plan.chain) {
    const int32_t id = nodes_.resolve(h);
    if (id <= kRoot || !node(id).evicted) return Status::invalid("node handle " + std::to_string(h) + " is not a host-only node");
    const int32_t parent = node(id).parent;
    if (above >= 0 ? parent != above : node(parent).evicted) {
      return Status::invalid("the chain's nodes do not follow each other from a device node");
    }
    if (node(id).value.capacity() < node(id).key.size()) node(id).value.reserve(node(id).key.size());  // before any change
    above = id;
  }
  const int32_t split_id = plan.split_at > 0 ? nodes_.resolve(plan.split_node) : -1;
  if (plan.split_at > 0 && (split_id <= kRoot || plan.split_at >= node(split_id).key.size())) {
    return Status::invalid("the planned split does not cut a node of the chain");
  }
  size_t at = 0;
  for (size_t i = 0; i < plan.chain.size(); ++i) {
    const int32_t id = nodes_.resolve(plan.chain[i]);
    if (id == split_id) {
      // The planned split (plan_restore reserved its memory): the upper part comes back a
      // tombstone, the lower part, which holds the window rows, live.
      const int32_t upper = split(id, plan.split_at);
      adopt(upper, slots + at, false);
      at += plan.split_at;
    }
    adopt(id, slots + at, plan.live[i] != 0);
    at += node(id).key.size();
  }
  return Status::ok();
}

Status SwaRadixTree::evict_host(size_t tokens, size_t* evicted) {
  *evicted = 0;
  reserve_events(0);
  size_t device_freed = 0;
  while (*evicted < tokens) {
    const int32_t victim = host_lru_.oldest_candidate();
    if (victim < 0) break;
    const size_t host_before = host_tokens_;
    KVPOOL_RETURN_IF_ERROR(free_node_slots(node(victim)));
    KVPOOL_RETURN_IF_ERROR(remove_leaf_cascade(victim, &device_freed, [this](const Node& t) { return free_node_slots(t); }));
    *evicted += host_before - host_tokens_;  // tombstones the cascade took count too
  }
  return Status::ok();
}

SwaTierNode SwaRadixTree::tier_node(NodeHandle h) const {
  SwaTierNode info;
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return info;
  const Node& n = node(id);
  info.tokens = n.key.size();
  info.on_device = !n.evicted;
  info.on_host = !n.host.empty() || id == kRoot;
  info.tombstone = id != kRoot && n.tombstone;
  info.host_window = n.host_window.size();
  return info;
}

NodeHandle SwaRadixTree::device_ancestor(NodeHandle h) const {
  int32_t id = nodes_.resolve(h);
  if (id < 0) return root();
  while (id != kRoot && node(id).evicted) id = node(id).parent;
  return nodes_.handle(id);
}

void SwaRadixTree::device_slots(NodeHandle h, std::vector<int64_t>* out) const {
  const int32_t id = nodes_.resolve(h);
  if (id > kRoot && !node(id).evicted) out->insert(out->end(), node(id).value.begin(), node(id).value.end());
}

void SwaRadixTree::collect_host_slots(std::vector<int64_t>* full, std::vector<int64_t>* window) const {
  for (size_t id = 1; id < nodes_.id_limit(); ++id) {
    const Node& n = node(static_cast<int32_t>(id));
    if (!n.live) continue;
    full->insert(full->end(), n.host.begin(), n.host.end());
    window->insert(window->end(), n.host_window.begin(), n.host_window.end());
  }
}

}  // namespace kvp::cache
