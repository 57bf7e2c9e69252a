// The host tier's part of the mamba radix tree (docs/host-tier.md, "hybrid_linear"):
// the full-attention KV of a node may have a host copy and leave the device; its mamba
// state never does (it stays on the device under the mamba list's own LRU). The copies
// are the caller's (cache/mamba_cache_tier.cpp): the tree records where tokens live.
#include <algorithm>

#include "cache/mamba_radix_tree.hpp"

namespace kvp::cache {

void MambaRadixTree::drop_to_host(int32_t id) {
  Node& n = node(id);
  full_evictable_ -= n.key.size();  // a device leaf candidate is unlocked
  full_lru_.remove(id);
  n.value.clear();  // capacity kept: a load-back reuses it
  n.evicted = true;
  emit(id, EventType::kBlockRemoved);
  host_lru_.push_mru(id);
  host_only_tokens_ += n.key.size();
  ++node(n.parent).host_children;
  refresh(id);
  refresh(n.parent);
}

void MambaRadixTree::adopt(int32_t id, const int64_t* slots) {
  Node& n = node(id);
  n.value.assign(slots, slots + n.key.size());
  n.evicted = false;
  emit(id, EventType::kBlockStored);
  host_lru_.remove(id);
  full_lru_.push_mru(id);
  host_only_tokens_ -= n.key.size();
  (n.full_lock > 0 ? full_protected_ : full_evictable_) += n.key.size();
  --node(n.parent).host_children;
  refresh(id);
  refresh(n.parent);
}

void MambaRadixTree::pin_path(int32_t id, int delta) {
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
    refresh(x);
  }
}

Status MambaRadixTree::pin(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  pin_path(id, 1);
  return Status::ok();
}

Status MambaRadixTree::unpin(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  for (int32_t x = id; x != kRoot; x = node(x).parent) {
    if (node(x).full_lock <= 0) return Status::invalid("node handle " + std::to_string(h) + " is not pinned");
  }
  pin_path(id, -1);
  return Status::ok();
}

Status MambaRadixTree::evict_device_leaf(int32_t id, size_t* full_evicted, size_t* mamba_evicted) {
  if (tiered_) {
    bool keep = path_on_host(id);
    if (!keep && keep_) {
      // The keeper may copy (and, for room, delete host-only leaves): the node and its
      // path stay locked meanwhile, so no cascade removes them.
      const NodeHandle h = nodes_.handle(id);
      pin_path(id, 1);
      bool made = false;
      {
        // The keeper's copy may first evict host-only nodes for room (a full host tier):
        // this eviction's reserve_events(0) holds their HostRemoved events too.
        const EventRoomHold held = hold_event_room();
        made = keep_(h);
      }
      pin_path(id, -1);
      keep = made && path_on_host(id);
    }
    if (keep) {
      Node& n = node(id);
      KVPOOL_RETURN_IF_ERROR(cb_.free_full(n.value.data(), n.value.size()));
      *full_evicted += n.key.size();
      drop_to_host(id);
      return Status::ok();
    }
  }
  if (node(id).children != 0) {
    // Only host-only children, yet no host copy on the path: cannot happen (a host-only
    // node's ancestors all have copies); refuse rather than orphan them.
    return Status::internal("mamba radix node " + std::to_string(id) + " has host-only children but no host copy");
  }
  return evict_leaf(id, full_evicted, mamba_evicted);
}

void MambaRadixTree::reserve_host(NodeHandle h) {
  const int32_t id = nodes_.resolve(h);
  if (id <= kRoot) return;
  node(id).host.reserve(node(id).key.size());
  reserve_event_room(node(id).key.size());  // its HostStored events (device eviction's keeper calls this)
}

Status MambaRadixTree::attach_host(NodeHandle h, const int64_t* host_slots, size_t n) {
  const int32_t id = nodes_.resolve(h);
  if (id <= kRoot) return Status::invalid("node handle " + std::to_string(h) + " is stale, unknown or the root");
  Node& x = node(id);
  if (x.evicted || !x.host.empty()) return Status::invalid("mamba radix node " + std::to_string(id) + " already has a host copy");
  if (n != x.key.size()) {
    return Status::invalid("mamba radix node " + std::to_string(id) + " has " + std::to_string(x.key.size()) + " tokens, got " +
                           std::to_string(n) + " host slots");
  }
  x.host.assign(host_slots, host_slots + n);
  host_tokens_ += n;
  emit(id, EventType::kHostStored);
  return Status::ok();
}

Status MambaRadixTree::host_chain(NodeHandle h, std::vector<NodeHandle>* chain, size_t* tokens,
                                  std::vector<int64_t>* host_slots) const {
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return Status::invalid("node handle " + std::to_string(h) + " is stale or unknown");
  chain->clear();
  host_slots->clear();
  *tokens = 0;
  for (int32_t x = id; x != kRoot && node(x).evicted; x = node(x).parent) {
    chain->push_back(nodes_.handle(x));
    *tokens += node(x).key.size();
  }
  std::reverse(chain->begin(), chain->end());
  for (NodeHandle c : *chain) {
    const Node& n = node(nodes_.resolve(c));
    host_slots->insert(host_slots->end(), n.host.begin(), n.host.end());
  }
  return Status::ok();
}

void MambaRadixTree::reserve_restore(const std::vector<NodeHandle>& chain) {
  size_t tokens = 0;
  for (NodeHandle h : chain) {
    const int32_t id = nodes_.resolve(h);
    if (id <= kRoot) continue;
    Node& x = node(id);
    if (x.value.capacity() < x.key.size()) x.value.reserve(x.key.size());
    tokens += x.key.size();
  }
  reserve_events(tokens);  // the eviction's events (3 per held token at most) and the chain's BlockStored
}

Status MambaRadixTree::restore_chain(const std::vector<NodeHandle>& chain, const int64_t* slots, size_t n) {
  size_t total = 0;
  int32_t above = -1;
  for (NodeHandle h : chain) {
    const int32_t id = nodes_.resolve(h);
    if (id <= kRoot || !node(id).evicted) return Status::invalid("node handle " + std::to_string(h) + " is not a host-only node");
    const int32_t parent = node(id).parent;
    if (above >= 0 ? parent != above : node(parent).evicted) {
      return Status::invalid("the chain's nodes do not follow each other from a device node");
    }
    if (node(id).value.capacity() < node(id).key.size()) node(id).value.reserve(node(id).key.size());  // before any change
    above = id;
    total += node(id).key.size();
  }
  if (total != n) return Status::invalid("the chain has " + std::to_string(total) + " tokens, got " + std::to_string(n) + " slots");
  // Its BlockStored events only: after a load-back's eviction, reserve_events(n) would ask
  // again for the room reserve_restore() made, which the eviction's events used, and grow
  // the queue after that eviction's changes (found by
  // FaultSeq.HybridLinearHostTierWriteBackHostFullEvents).
  reserve_event_room(n);
  size_t at = 0;
  for (NodeHandle h : chain) {
    const int32_t id = nodes_.resolve(h);
    adopt(id, slots + at);
    at += node(id).key.size();
  }
  return Status::ok();
}

Status MambaRadixTree::evict_host(size_t tokens, size_t* evicted) {
  *evicted = 0;
  reserve_events(0);
  size_t device_freed = 0;
  while (*evicted < tokens) {
    const int32_t victim = host_lru_.oldest_candidate();
    if (victim < 0) break;
    Node& n = node(victim);
    const size_t host_before = host_tokens_;
    KVPOOL_RETURN_IF_ERROR(free_node_slots(n));
    if (n.mamba >= 0) {
      KVPOOL_RETURN_IF_ERROR(cb_.free_mamba(n.mamba));
      aux_lru_.remove(victim);
      n.mamba = -1;
      --mamba_evictable_;  // a host-only node's state is never locked
    }
    KVPOOL_RETURN_IF_ERROR(remove_leaf_cascade(victim, &device_freed, [this](const Node& t) { return free_node_slots(t); }));
    *evicted += host_before - host_tokens_;  // tombstones the cascade took count too
  }
  return Status::ok();
}

MambaTierNode MambaRadixTree::tier_node(NodeHandle h) const {
  MambaTierNode info;
  const int32_t id = nodes_.resolve(h);
  if (id < 0) return info;
  const Node& n = node(id);
  info.tokens = n.key.size();
  info.on_device = !n.evicted;
  info.on_host = !n.host.empty() || id == kRoot;
  info.has_state = n.mamba >= 0;
  return info;
}

NodeHandle MambaRadixTree::usable_ancestor(NodeHandle h) const {
  int32_t id = nodes_.resolve(h);
  if (id < 0) return root();
  while (id != kRoot && (node(id).evicted || node(id).mamba < 0)) id = node(id).parent;
  return nodes_.handle(id);
}

size_t MambaRadixTree::evictable_beside_path(NodeHandle h) const {
  const int32_t id = nodes_.resolve(h);
  size_t on_path = 0;  // what pin_path() would move from evictable to protected
  for (int32_t x = id < 0 ? kRoot : id; x != kRoot; x = node(x).parent) {
    if (!node(x).evicted && node(x).full_lock == 0) on_path += node(x).key.size();
  }
  return full_evictable_ - on_path;
}

void MambaRadixTree::device_slots(NodeHandle h, std::vector<int64_t>* out) const {
  const int32_t id = nodes_.resolve(h);
  if (id > kRoot && !node(id).evicted) out->insert(out->end(), node(id).value.begin(), node(id).value.end());
}

void MambaRadixTree::collect_host_slots(std::vector<int64_t>* out) const {
  for (size_t id = 1; id < nodes_.id_limit(); ++id) {
    const Node& n = node(static_cast<int32_t>(id));
    if (n.live) out->insert(out->end(), n.host.begin(), n.host.end());
  }
}

}  // namespace kvp::cache
