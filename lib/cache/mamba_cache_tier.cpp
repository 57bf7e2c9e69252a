// The host tier of a hybrid_linear pool's prefix cache (docs/host-tier.md): the
// full-attention KV of the mamba radix tree's nodes is copied to the host per the write
// policy, kept there when the device evicts it, and loaded back for a match that ends
// at a host-only node with a mamba state. Page size is 1: a host page is a host token.
//
// Copies run on the tier's own streams (the transfer orders a backup after the work
// already on the compute stream; a load is waited for per layer by kvhost_wait_layer).
// Until a poll sees a copy finished, a tree lock on the last node it copies keeps the
// device slots it reads or writes in place (the lock covers the node's path and state).
// Device eviction's write_back copies are waited for, as the mha tier's: the slots are
// freed right after.
#include <string>

#include "cache/mamba_cache.hpp"

namespace kvp::cache {

void MambaCache::enable_host_tier(host::HostPool* pool, host::HostTransfer* transfer, WritePolicy policy) {
  host_ = pool;
  transfer_ = transfer;
  policy_ = policy;
  // A host copy the tree drops was held by its node: a failed free is a bug kvpool_check reports.
  tree_->enable_host_tier([this](const int64_t* host_slots, size_t n) { (void)host_->free(host_slots, n); });
  const size_t slots = owned_.size();
  device_scratch_.reserve(slots);
  host_scratch_.reserve(slots);
  length_scratch_.reserve(slots);
  node_scratch_.reserve(slots);
  pending_.reserve(256);
  if (policy == WritePolicy::kWriteBack) {
    tree_->set_keep_on_host([this](NodeHandle node) { return keep_on_host(node); });
  }
}

bool MambaCache::copy_to_host(const std::vector<NodeHandle>& nodes, bool wait) {
  if (!wait) in_flight_.reserve(in_flight_.size() + 1);  // the keeper's copies must not allocate
  std::vector<int64_t>& device = device_scratch_;
  std::vector<int64_t>& hosts = host_scratch_;
  std::vector<size_t>& lengths = length_scratch_;
  device.clear();
  lengths.clear();
  for (NodeHandle h : nodes) {
    if (!tree_->is_live(h)) return false;
  }
  // Device slots of the nodes, root-to-leaf (page size 1: a slot is a page), and room in
  // each node for its host slots: the only allocations, before anything changes.
  for (NodeHandle h : nodes) {
    const size_t before = device.size();
    tree_->device_slots(h, &device);
    lengths.push_back(device.size() - before);
    tree_->reserve_host(h);
  }
  const size_t n = device.size();
  if (n == 0) return true;
  if (host_->free_pages() < n) {
    size_t evicted = 0;
    if (!tree_->evict_host(n - host_->free_pages(), &evicted).is_ok()) return false;
    stats_.host_evicted_tokens += evicted;
  }
  if (host_->free_pages() < n) {
    ++stats_.backups_skipped;
    return false;
  }
  hosts.resize(n);
  if (!host_->alloc(n, hosts.data()).is_ok()) {
    ++stats_.backups_skipped;
    return false;
  }
  uint64_t ticket = 0;
  Status st = transfer_->backup(device.data(), hosts.data(), n, &ticket);
  if (st.is_ok() && wait) st = transfer_->wait(ticket);
  if (!st.is_ok()) {
    ++stats_.backup_errors;
    (void)host_->free(hosts.data(), n);
    return false;
  }
  size_t at = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!tree_->attach_host(nodes[i], hosts.data() + at, lengths[i]).is_ok()) {
      // Cannot happen (the nodes were checked above): give the rest back once written.
      (void)transfer_->wait(ticket);
      (void)host_->free(hosts.data() + at, n - at);
      return false;
    }
    at += lengths[i];
  }
  ++stats_.backups;
  stats_.backup_tokens += n;
  if (!wait) hold_until_landed(ticket, nodes.back());
  return true;
}

void MambaCache::hold_until_landed(uint64_t ticket, NodeHandle node) {
  if (transfer_->finished(ticket)) return;  // CPU pools: the copy is done
  // A tombstone cannot be locked (write_through_selective may stop a path at one): that
  // copy is waited for instead.
  if (!tree_->lock(node).is_ok()) {
    (void)transfer_->wait(ticket);
    return;
  }
  in_flight_.push_back(Flight{ticket, node});  // reserved
}

Status MambaCache::poll(bool wait, size_t* completed) {
  retry_backups();
  return release_landed(wait, completed);
}

Status MambaCache::release_landed(bool wait, size_t* completed) {
  *completed = 0;
  if (wait) {  // then every copy has landed, and the release below takes them all
    for (const Flight& f : in_flight_) KVPOOL_RETURN_IF_ERROR(transfer_->wait(f.ticket));
  }
  size_t kept = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    const Flight f = in_flight_[i];
    if (!transfer_->finished(f.ticket)) {
      in_flight_[kept++] = f;
      continue;
    }
    const Status st = tree_->unlock(f.locked);  // locked at the copy's start: cannot fail
    if (!st.is_ok()) return Status::internal("hybrid host tier: " + st.message());
    ++*completed;
  }
  in_flight_.resize(kept);
  return Status::ok();
}

void MambaCache::back_up_path(NodeHandle node) noexcept {
  if (policy_ == WritePolicy::kWriteBack) return;
  const uint32_t min_hits = policy_ == WritePolicy::kWriteThroughSelective ? 2 : 1;
  try {
    node_scratch_.clear();
    tree_->backup_candidates(node, min_hits, &node_scratch_);
    if (!node_scratch_.empty()) (void)copy_to_host(node_scratch_, false);
  } catch (...) {
    // Out of host memory before any change: noted for a retry (the note never allocates).
    if (pending_.size() < pending_.capacity()) {
      pending_.push_back(node);
    } else {
      ++stats_.backup_errors;  // the nodes stay device-only
    }
  }
}

void MambaCache::retry_backups() noexcept {
  const size_t count = pending_.size();
  for (size_t i = 0; i < count; ++i) {
    const NodeHandle node = pending_.front();
    pending_.erase(pending_.begin());  // a failing retry notes it again, at the end
    if (tree_->is_live(node)) back_up_path(node);
  }
}

bool MambaCache::keep_on_host(NodeHandle node) {
  try {
    node_scratch_.clear();
    tree_->backup_candidates(node, 0, &node_scratch_);
    return copy_to_host(node_scratch_, true);
  } catch (...) {
    ++stats_.backup_errors;  // before any change: the node is deleted instead of kept
    return false;
  }
}

Status MambaCache::evict_host(size_t tokens, size_t* evicted) {
  if (host_ == nullptr) return Status::unsupported("the pool has no host tier");
  KVPOOL_RETURN_IF_ERROR(release_landed());
  KVPOOL_RETURN_IF_ERROR(tree_->evict_host(tokens, evicted));
  stats_.host_evicted_tokens += *evicted;
  return Status::ok();
}

Status MambaCache::load_back(NodeHandle host_node, std::vector<int64_t>* slots, size_t* loaded) {
  *loaded = 0;
  if (host_ == nullptr) return Status::unsupported("the pool has no host tier");
  KVPOOL_RETURN_IF_ERROR(release_landed());  // landed copies unlock their nodes: evictable again
  std::vector<NodeHandle> chain;
  std::vector<int64_t> hosts;
  size_t tokens = 0;
  KVPOOL_RETURN_IF_ERROR(tree_->host_chain(host_node, &chain, &tokens, &hosts));
  if (tokens == 0) return Status::ok();  // on the device already
  if (tokens < PrefixCache::kLoadBackThreshold) {
    ++stats_.loads_refused;
    return Status::ok();
  }
  std::vector<int64_t> fresh(tokens);
  slots->reserve(slots->size() + tokens);
  in_flight_.reserve(in_flight_.size() + 1);  // the load's record, if it stays in flight
  tree_->reserve_restore(chain);  // the eviction below cannot be undone: nothing after it may allocate
  // The chain and the device part above it stay while room is made.
  KVPOOL_RETURN_IF_ERROR(tree_->pin(host_node));
  Status st = Status::ok();
  bool allocated = false;
  uint64_t ticket = 0;
  try {
    const size_t free_now = kv_->available_tokens();
    if (free_now < tokens) {
      size_t evicted = 0;
      st = tree_->evict(tokens - free_now, &evicted);
      stats_.load_evicted_tokens += evicted;
    }
    if (st.is_ok() && kv_->available_tokens() >= tokens) {
      st = kv_->alloc(tokens, fresh.data());
      allocated = st.is_ok();
    }
    if (st.is_ok() && allocated) {
      st = transfer_->load(hosts.data(), fresh.data(), tokens, load_set_, &ticket);
      if (st.is_ok()) st = tree_->restore_chain(chain, fresh.data(), tokens);
      if (!st.is_ok()) {
        (void)transfer_->wait(ticket);  // a load that started writes into the slots given back
        (void)kv_->free(fresh.data(), tokens);
      }
    }
  } catch (...) {
    // Out of host memory before the eviction's first change (its KV events' room; the
    // restore's was made before it): the fresh slots go back and the pin goes, as in
    // SwaCache::load_back.
    // Without this a failed kvseq_begin left the chain pinned (found by
    // FaultSeq.HybridLinearHostTierWriteThroughEvents).
    if (allocated && st.is_ok()) {
      (void)transfer_->wait(ticket);
      (void)kv_->free(fresh.data(), tokens);
    }
    (void)tree_->unpin(host_node);
    throw;
  }
  const Status unpinned = tree_->unpin(host_node);
  KVPOOL_RETURN_IF_ERROR(st);
  KVPOOL_RETURN_IF_ERROR(unpinned);
  if (!allocated) {
    ++stats_.loads_refused;  // no device room even after eviction (what it evicted stays evicted)
    return Status::ok();
  }
  for (int64_t s : fresh) owned_[static_cast<size_t>(s)] = 1;
  slots->insert(slots->end(), fresh.begin(), fresh.end());
  *loaded = tokens;
  ++stats_.loads;
  stats_.load_tokens += tokens;
  hold_until_landed(ticket, host_node);  // the chain's end has a state: lockable
  return Status::ok();
}

bool MambaCache::load_would_fit(NodeHandle host_node) const {
  if (host_ == nullptr) return false;
  std::vector<NodeHandle> chain;
  std::vector<int64_t> hosts;
  size_t tokens = 0;
  if (!tree_->host_chain(host_node, &chain, &tokens, &hosts).is_ok()) return false;
  if (tokens == 0 || tokens < PrefixCache::kLoadBackThreshold) return false;
  // As load_back: the eviction frees unlocked device nodes off the pinned path, and
  // inside an open free group what it frees is not available until the group ends.
  const size_t evictable = kv_->pages().in_group() ? 0 : tree_->evictable_beside_path(host_node);
  return kv_->available_tokens() + evictable >= tokens;
}

size_t MambaCache::check_host(std::string* report, size_t max_lines) const {
  size_t problems = host_->check(report, max_lines);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::vector<int64_t> held;
  tree_->collect_host_slots(&held);
  std::vector<uint8_t> seen(static_cast<size_t>(host_->pages()), 0);
  for (int64_t h : held) {
    if (h < 0 || static_cast<uint64_t>(h) >= host_->pages()) {
      complain("the mamba radix tree holds invalid host slot " + std::to_string(h));
      continue;
    }
    if (seen[static_cast<size_t>(h)]++ > 0) complain("host slot " + std::to_string(h) + " is held by two tree nodes");
    if (!host_->is_held(h)) complain("host slot " + std::to_string(h) + " is in the mamba radix tree but free in the host pool");
  }
  if (held.size() != host_->held_pages()) {
    complain("the host pool holds " + std::to_string(host_->held_pages()) + " pages, the mamba radix tree " +
             std::to_string(held.size()));
  }
  return problems;
}

}  // namespace kvp::cache
