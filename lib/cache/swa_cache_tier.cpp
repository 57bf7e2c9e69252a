// The host tier of a swa pool's prefix cache (docs/host-tier.md, "swa pools"): the swa
// radix tree's nodes are copied to the host per the write policy (the full-attention
// layers' rows of every token into one host pool, the window layers' rows of a live
// node's last `window` tokens into a second), kept there when the device evicts them, and
// loaded back for a match that ends in a host-only node: full slots for the whole chain,
// window slots for the nodes covering its last `window` tokens, the rest as tombstones.
//
// Copies run on the tier's own streams (the transfer orders a backup after the work
// already on the compute stream; a load is waited for per layer by kvhost_wait_layer).
// Until a poll sees both transfers of a copy finished, tree locks keep the device slots
// it reads or writes in place: a backup locks each live node it copies (which also
// window-locks the node's window tail), a load-back the chain's end. Device eviction's
// write_back copies are waited for, as the mha tier's: the slots are freed right after.
#include <string>

#include "cache/swa_cache.hpp"

namespace kvp::cache {

void SwaCache::enable_host_tier(host::HostPool* full, host::HostTransfer* full_transfer, host::HostPool* window,
                                host::HostTransfer* window_transfer, WritePolicy policy) {
  host_ = full;
  transfer_ = full_transfer;
  host_window_ = window;
  window_transfer_ = window_transfer;
  policy_ = policy;
  // A host copy the tree drops was held by its node: a failed free is a bug kvpool_check reports.
  tree_->enable_host_tier([this](const int64_t* f, size_t n, const int64_t* w, size_t k) {
    (void)host_->free(f, n);
    (void)host_window_->free(w, k);
  });
  const size_t full_slots = owned_.size(), window_slots = static_cast<size_t>(allocator_->swa().num_ids()) + 1;
  node_scratch_.reserve(full_slots);
  device_scratch_.reserve(full_slots);
  host_scratch_.reserve(full_slots);
  length_scratch_.reserve(full_slots);
  tail_scratch_.reserve(full_slots);
  device_window_scratch_.reserve(window_slots);
  host_window_scratch_.reserve(window_slots);
  pending_.reserve(256);
  if (policy == WritePolicy::kWriteBack) {
    tree_->set_keep_on_host([this](NodeHandle node) { return keep_on_host(node); });
  }
}

bool SwaCache::make_host_room(size_t full, size_t window) {
  while (host_->free_pages() < full || host_window_->free_pages() < window) {
    const size_t short_full = full > host_->free_pages() ? full - host_->free_pages() : 0;
    const size_t short_window = window > host_window_->free_pages() ? window - host_window_->free_pages() : 0;
    size_t evicted = 0;
    // Evicting host tokens frees their window rows too: ask for the larger shortfall.
    if (!tree_->evict_host(std::max<size_t>(std::max(short_full, short_window), 1), &evicted).is_ok()) return false;
    stats_.host_evicted_tokens += evicted;
    if (evicted == 0) return false;
  }
  return true;
}

bool SwaCache::copy_to_host(const std::vector<NodeHandle>& nodes, bool wait) {
  for (NodeHandle h : nodes) {
    if (!tree_->is_live(h)) return false;
  }
  Flight flight;
  if (!wait) {  // the record of a copy left in flight (the keeper's copies must not allocate)
    in_flight_.reserve(in_flight_.size() + 1);
    flight.locks.reserve(nodes.size());
  }
  // Device rows of the nodes, root-to-leaf (page size 1: a slot is a page): full slots of
  // every token, window slots of each node's window tail, into scratch sized at
  // enable_host_tier; reserve_host finds the room the nodes got at creation.
  std::vector<int64_t>& device = device_scratch_;
  std::vector<int64_t>& device_window = device_window_scratch_;
  std::vector<int64_t>& hosts = host_scratch_;
  std::vector<int64_t>& hosts_window = host_window_scratch_;
  std::vector<size_t>& lengths = length_scratch_;
  std::vector<size_t>& tails = tail_scratch_;
  device.clear();
  device_window.clear();
  lengths.clear();
  tails.clear();
  const std::vector<int64_t>& mapping = allocator_->mapping();
  for (NodeHandle h : nodes) {
    const size_t before = device.size();
    tree_->device_slots(h, &device);
    const size_t len = device.size() - before, k = tree_->window_tail(h);
    for (size_t i = len - k; i < len; ++i) device_window.push_back(mapping[static_cast<size_t>(device[before + i])]);
    lengths.push_back(len);
    tails.push_back(k);
    tree_->reserve_host(h);
  }
  const size_t n = device.size(), w = device_window.size();
  if (n == 0) return true;
  hosts.resize(n);
  hosts_window.resize(w);
  if (!make_host_room(n, w)) {
    ++stats_.backups_skipped;
    return false;
  }
  if (!host_->alloc(n, hosts.data()).is_ok()) {
    ++stats_.backups_skipped;
    return false;
  }
  if (!host_window_->alloc(w, hosts_window.data()).is_ok()) {
    (void)host_->free(hosts.data(), n);
    ++stats_.backups_skipped;
    return false;
  }
  Status st = transfer_->backup(device.data(), hosts.data(), n, &flight.full);
  if (st.is_ok() && w > 0) {
    st = window_transfer_->backup(device_window.data(), hosts_window.data(), w, &flight.window);
    if (!st.is_ok()) (void)transfer_->wait(flight.full);  // it writes the host slots freed below
  }
  if (st.is_ok() && wait) {
    st = transfer_->wait(flight.full);
    if (st.is_ok()) st = window_transfer_->wait(flight.window);
  }
  if (!st.is_ok()) {
    ++stats_.backup_errors;
    (void)host_->free(hosts.data(), n);
    (void)host_window_->free(hosts_window.data(), w);
    return false;
  }
  size_t at = 0, at_window = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!tree_->attach_host(nodes[i], hosts.data() + at, lengths[i], hosts_window.data() + at_window, tails[i]).is_ok()) {
      // Cannot happen (the nodes were checked above): give the rest back once written.
      wait_for(flight);
      (void)host_->free(hosts.data() + at, n - at);
      (void)host_window_->free(hosts_window.data() + at_window, w - at_window);
      return false;
    }
    at += lengths[i];
    at_window += tails[i];
  }
  ++stats_.backups;
  stats_.backup_tokens += n;
  if (!wait) hold_until_landed(flight, nodes.data(), tails.data(), nodes.size());
  return true;
}

void SwaCache::hold_until_landed(Flight& flight, const NodeHandle* nodes, const size_t* tails, size_t count) {
  if (landed(flight)) return;  // CPU pools: the copies are done
  bool held = true;
  for (size_t i = 0; i < count && held; ++i) {
    if (tails[i] == 0) continue;  // a tombstone: a live node below it full-locks it
    int64_t uuid = 0;
    held = tree_->lock(nodes[i], &uuid).is_ok();
    if (held) flight.locks.emplace_back(nodes[i], uuid);  // reserved
  }
  // A path that ends in a tombstone has no live node below it to lock its full slots
  // (write_through_selective may stop there): that copy, and one whose lock is refused,
  // is waited for instead.
  if (held && count > 0 && tails[count - 1] == 0) held = false;
  if (!held) {
    for (auto it = flight.locks.rbegin(); it != flight.locks.rend(); ++it) (void)tree_->unlock(it->first, it->second);
    wait_for(flight);
    return;
  }
  in_flight_.push_back(std::move(flight));  // reserved
}

Status SwaCache::poll(bool wait, size_t* completed) {
  retry_backups();
  return release_landed(wait, completed);
}

Status SwaCache::release_landed(bool wait, size_t* completed) {
  *completed = 0;
  if (wait) {  // then every copy has landed, and the release below takes them all
    for (const Flight& f : in_flight_) {
      KVPOOL_RETURN_IF_ERROR(transfer_->wait(f.full));
      KVPOOL_RETURN_IF_ERROR(window_transfer_->wait(f.window));
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    Flight& f = in_flight_[i];
    if (!landed(f)) {
      if (kept != i) in_flight_[kept] = std::move(f);
      ++kept;
      continue;
    }
    for (const auto& [node, uuid] : f.locks) {
      const Status st = tree_->unlock(node, uuid);  // locked at the copy's start: cannot fail
      if (!st.is_ok()) return Status::internal("swa host tier: " + st.message());
    }
    ++*completed;
  }
  in_flight_.resize(kept);
  return Status::ok();
}

void SwaCache::back_up_path(NodeHandle node) noexcept {
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

void SwaCache::retry_backups() noexcept {
  const size_t count = pending_.size();
  for (size_t i = 0; i < count; ++i) {
    const NodeHandle node = pending_.front();
    pending_.erase(pending_.begin());  // a failing retry notes it again, at the end
    if (tree_->is_live(node)) back_up_path(node);
  }
}

bool SwaCache::keep_on_host(NodeHandle node) {
  try {
    node_scratch_.clear();
    tree_->backup_candidates(node, 0, &node_scratch_);
    return copy_to_host(node_scratch_, true);
  } catch (...) {
    ++stats_.backup_errors;  // before any change: the node is deleted instead of kept
    return false;
  }
}

Status SwaCache::evict_host(size_t tokens, size_t* evicted) {
  if (host_ == nullptr) return Status::unsupported("the pool has no host tier");
  KVPOOL_RETURN_IF_ERROR(release_landed());
  KVPOOL_RETURN_IF_ERROR(tree_->evict_host(tokens, evicted));
  stats_.host_evicted_tokens += *evicted;
  return Status::ok();
}

Status SwaCache::load_back(NodeHandle host_node, std::vector<int64_t>* slots, size_t* loaded) {
  *loaded = 0;
  if (host_ == nullptr) return Status::unsupported("the pool has no host tier");
  KVPOOL_RETURN_IF_ERROR(release_landed());  // landed copies unlock their nodes: evictable again
  size_t tokens = 0;
  KVPOOL_RETURN_IF_ERROR(tree_->host_chain_tokens(host_node, &tokens));
  if (tokens == 0) return Status::ok();  // on the device already
  if (tokens < PrefixCache::kLoadBackThreshold) {
    ++stats_.loads_refused;
    return Status::ok();
  }
  SwaRestorePlan plan;
  KVPOOL_RETURN_IF_ERROR(tree_->plan_restore(host_node, &plan));
  if (plan.live.empty() || plan.live.back() == 0) {
    // The chain's end has no window rows on the host: it would come back a tombstone,
    // where no match can end.
    ++stats_.loads_refused;
    return Status::ok();
  }
  const size_t dead = plan.tokens - plan.live_tokens, live = plan.live_tokens;
  std::vector<int64_t> fresh(plan.tokens), device_window(live);
  slots->reserve(slots->size() + plan.tokens);
  Flight flight;  // the record of the load if it stays in flight
  in_flight_.reserve(in_flight_.size() + 1);
  flight.locks.reserve(1);
  // The chain and the device part above it stay while room is made.
  KVPOOL_RETURN_IF_ERROR(tree_->pin(host_node));
  bool allocated = false, pinned = true;
  const auto give_back = [&] {
    (void)allocator_->free_full_only(fresh.data(), dead);
    (void)allocator_->free(fresh.data() + dead, live);
  };
  Status st = Status::ok(), unpinned = Status::ok();
  try {
    const size_t full_free = allocator_->full().available(), window_free = allocator_->swa().available();
    if (full_free < plan.tokens || window_free < live) {
      size_t full_evicted = 0, window_evicted = 0;
      st = evict(plan.tokens > full_free ? plan.tokens - full_free : 0, live > window_free ? live - window_free : 0,
                 &full_evicted, &window_evicted);
      stats_.load_evicted_tokens += full_evicted;
    }
    if (st.is_ok() && allocator_->full().available() >= plan.tokens && allocator_->swa().available() >= live) {
      // Tombstone nodes come first in the chain: their slots get no window slot.
      st = allocator_->alloc_full_only(dead, fresh.data());
      if (st.is_ok()) {
        st = allocator_->alloc(live, fresh.data() + dead);
        if (!st.is_ok()) (void)allocator_->free_full_only(fresh.data(), dead);
      }
      allocated = st.is_ok();
    }
    if (st.is_ok() && allocated) {
      st = allocator_->translate(fresh.data() + dead, live, device_window.data());
      if (st.is_ok()) st = transfer_->load(plan.host_full.data(), fresh.data(), plan.tokens, load_set_, &flight.full);
      if (st.is_ok()) {
        st = window_transfer_->load(plan.host_window.data(), device_window.data(), live, load_set_, &flight.window);
      }
      if (!st.is_ok()) {
        wait_for(flight);  // a load that started writes into the slots given back
        give_back();
      }
    }
    unpinned = tree_->unpin(host_node);
    pinned = false;
    if (st.is_ok() && allocated && unpinned.is_ok()) {
      // The planned split happens here, once the load is certain (its memory was reserved).
      st = tree_->restore_chain(plan, fresh.data());
      if (!st.is_ok()) {
        wait_for(flight);
        give_back();
      }
    }
  } catch (...) {
    // Out of host memory part-way (nothing above should allocate): the slots not given
    // to the tree go back once the loads into them are done, and the pin goes
    // (restore_chain makes no change before it throws).
    if (allocated && st.is_ok()) {
      wait_for(flight);
      give_back();
    }
    if (pinned) (void)tree_->unpin(host_node);
    throw;
  }
  KVPOOL_RETURN_IF_ERROR(st);
  KVPOOL_RETURN_IF_ERROR(unpinned);
  if (!allocated) {
    ++stats_.loads_refused;  // no device room even after eviction (what it evicted stays evicted)
    return Status::ok();
  }
  for (int64_t s : fresh) owned_[static_cast<size_t>(s)] = 1;
  slots->insert(slots->end(), fresh.begin(), fresh.end());
  *loaded = plan.tokens;
  ++stats_.loads;
  stats_.load_tokens += plan.tokens;
  // The chain's end is live: its lock keeps the chain's full slots and its last window's
  // window slots (the ones loaded) until the loads land.
  const size_t live_end = 1;
  hold_until_landed(flight, &host_node, &live_end, 1);
  return Status::ok();
}

size_t SwaCache::check_host(std::string* report, size_t max_lines) const {
  size_t problems = host_->check(report, max_lines);
  problems += host_window_->check(report, max_lines > problems ? max_lines - problems : 0);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::vector<int64_t> full, window;
  tree_->collect_host_slots(&full, &window);
  const auto verify = [&](const host::HostPool& pool, const std::vector<int64_t>& held, const std::string& what) {
    std::vector<uint8_t> seen(static_cast<size_t>(pool.pages()), 0);
    for (int64_t h : held) {
      if (h < 0 || static_cast<uint64_t>(h) >= pool.pages()) {
        complain("the swa radix tree holds invalid " + what + " host slot " + std::to_string(h));
        continue;
      }
      if (seen[static_cast<size_t>(h)]++ > 0) complain(what + " host slot " + std::to_string(h) + " is held by two tree nodes");
      if (!pool.is_held(h)) complain(what + " host slot " + std::to_string(h) + " is in the swa radix tree but free in its host pool");
    }
    if (held.size() != pool.held_pages()) {
      complain("the " + what + " host pool holds " + std::to_string(pool.held_pages()) + " pages, the swa radix tree " +
               std::to_string(held.size()));
    }
  };
  verify(*host_, full, "full-layer");
  verify(*host_window_, window, "window-layer");
  return problems;
}

}  // namespace kvp::cache
