// The prefix cache's host tier (SGLANG_SEMANTICS §5.2-§5.3, HiRadixCache): write
// policies, device eviction that keeps backed-up nodes, host eviction, load-back,
// and the locks that hold nodes while their copies are in flight.
//
// Copies on CPU pools land inside the call, so nothing is ever in flight there; on
// CUDA pools a node is locked from the start of its copy until a poll sees it land
// (every tier operation polls first, without blocking). Write-back eviction is the
// one place that waits, as SGLang's does: its device pages are freed right after.
#include <algorithm>

#include "cache/prefix_cache.hpp"
#include "util/log.hpp"

namespace kvp::cache {

bool parse_write_policy(const std::string& name, WritePolicy* out) {
  if (name == "write_through") *out = WritePolicy::kWriteThrough;
  else if (name == "write_through_selective") *out = WritePolicy::kWriteThroughSelective;
  else if (name == "write_back") *out = WritePolicy::kWriteBack;
  else return false;
  return true;
}

void PrefixCache::enable_host_tier(host::HostPool* pool, host::HostTransfer* transfer, WritePolicy policy) {
  host_ = pool;
  transfer_ = transfer;
  policy_ = policy;
  tree_.enable_host_tier();
  // Inserts note their paths without allocating: a batch's inserts fit (a kvseq call
  // inserts once per request at most, and copies start after each successful call).
  pending_.reserve(1024);
  tree_.reserve_tier_scratch(static_cast<size_t>(allocator_->num_pages()));
}

Status PrefixCache::poll(bool wait, size_t* completed) {
  *completed = 0;
  if (!pending_.empty()) KVPOOL_RETURN_IF_ERROR(start_pending_backups(pending_.size()));
  if (wait) {  // then every copy has landed, and the release below takes them all
    for (const InFlight& f : in_flight_) KVPOOL_RETURN_IF_ERROR(transfer_->wait(f.ticket));
  }
  return release_landed(completed);
}

Status PrefixCache::release_landed(size_t* completed) {
  *completed = 0;
  if (storage_ != nullptr) drain_storage();
  size_t kept = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    InFlight& f = in_flight_[i];
    if (!transfer_->finished(f.ticket)) {
      if (kept != i) in_flight_[kept] = std::move(f);
      ++kept;
      continue;
    }
    for (NodeHandle h : f.locked) {
      const Status st = tree_.unlock(h);  // locked by us at the start of the copy: cannot fail
      if (!st.is_ok()) return Status::internal("host tier: " + st.message());
    }
    if (f.backup && storage_ != nullptr) store_nodes(f.locked);  // best effort, never throws
    ++*completed;
  }
  in_flight_.resize(kept);
  return Status::ok();
}

Status PrefixCache::land_copies() {
  for (const InFlight& f : in_flight_) KVPOOL_RETURN_IF_ERROR(transfer_->wait(f.ticket));
  size_t done = 0;
  return release_landed(&done);
}

void PrefixCache::tick(size_t noted) noexcept {
  try {
    if (noted > 0) (void)start_pending_backups(std::min(noted, pending_.size()));
    size_t done = 0;
    (void)release_landed(&done);
  } catch (...) {  // out of host memory: the pending copies stay pending, the next call retries
  }
}

bool PrefixCache::take_host_pages(size_t n, int64_t* out) {
  if (host_->free_pages() < n) {
    size_t freed = 0;
    const size_t short_tokens = (n - host_->free_pages()) * static_cast<size_t>(page_size());
    (void)evict_host(short_tokens, &freed);
    if (storage_ != nullptr && host_->free_pages() < n) drain_storage();  // pages backups no longer read
  }
  return host_->free_pages() >= n && host_->alloc(n, out).is_ok();
}

void PrefixCache::back_up_path(NodeHandle node) {
  if (policy_ == WritePolicy::kWriteBack) return;  // copies are made at eviction
  // Reserved at the insert's start (PrefixCache::insert): no allocation after its change.
  if (pending_.size() < pending_.capacity()) pending_.push_back(node);
}

Status PrefixCache::start_pending_backups(size_t count) {
  // The nodes of the noted paths that the policy wants copied, once each (paths share
  // ancestors), copied together: one transfer, a constant number of launches. Everything
  // that allocates comes first, so that a failure leaves the inserts pending.
  tier_handles_.clear();
  const uint32_t min_hits = policy_ == WritePolicy::kWriteThrough ? 1 : 2;
  for (size_t i = 0; i < count; ++i) {
    if (tree_.is_live(pending_[i])) tree_.backup_candidates(pending_[i], min_hits, &tier_handles_);
  }
  std::sort(tier_handles_.begin(), tier_handles_.end());
  tier_handles_.erase(std::unique(tier_handles_.begin(), tier_handles_.end()), tier_handles_.end());
  std::vector<int64_t>& pages = tier_pages_;
  pages.clear();
  for (NodeHandle h : tier_handles_) KVPOOL_RETURN_IF_ERROR(tree_.device_pages(h, &pages));
  const size_t n = pages.size();
  pages.resize(2 * n);
  for (NodeHandle h : tier_handles_) tree_.reserve_host(h);  // attach_host below then allocates nothing
  in_flight_.reserve(in_flight_.size() + 1);
  InFlight flight{0, tier_handles_, true};
  tree_.reserve_unlocks(tier_handles_.size());  // the locks below
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<long>(count));  // no allocation
  if (n == 0) return Status::ok();
  if (!take_host_pages(n, pages.data() + n)) {
    stats_.backups_skipped += tier_handles_.size();
    return Status::ok();
  }
  uint64_t ticket = 0;
  const Status st = transfer_->backup(pages.data(), pages.data() + n, n, &ticket);
  if (!st.is_ok()) {
    (void)host_->free(pages.data() + n, n);
    ++stats_.backup_errors;
    KVPOOL_LOG(KVPOOL_LOG_WARN, "host tier: a backup of " + std::to_string(n) +
                                    " pages failed to start, the nodes stay device-only: " + st.message());
    return Status::ok();  // counted; the nodes stay device-only
  }
  ++stats_.backups;
  stats_.backup_tokens += n * static_cast<size_t>(page_size());
  size_t at = n;
  for (NodeHandle h : tier_handles_) {
    const size_t pages_of_node = tree_.tier_node(h).tokens / static_cast<size_t>(page_size());
    (void)tree_.attach_host(h, pages.data() + at, pages_of_node);  // reserved: no allocation
    at += pages_of_node;
  }
  if (transfer_->finished(ticket)) {  // landed already (CPU pools): on to storage
    if (storage_ != nullptr) store_nodes(tier_handles_);
    return Status::ok();
  }
  // The device pages must stay put until they are read: the nodes stay locked.
  for (NodeHandle h : tier_handles_) (void)tree_.lock(h);  // live handles, reserved room
  flight.ticket = ticket;
  in_flight_.push_back(std::move(flight));  // reserved
  return Status::ok();
}

Status PrefixCache::evict_tiered(size_t tokens, size_t* evicted) {
  size_t done = 0;
  KVPOOL_RETURN_IF_ERROR(release_landed(&done));  // landed copies unlock their nodes: evictable again
  // Copies made at eviction (write_back, or ancestors of a backed-up node) are not locked:
  // the pages are waited for below, before the call returns and anything can reuse them.
  // The lambdas capture two pointers at most: their std::function wrappers allocate nothing.
  struct Copies {
    uint64_t last = 0;
    bool made = false;
  } copies;
  auto copy = [this, &copies](const int64_t* device_pages, size_t pages, int64_t* host_pages) -> bool {
    if (!take_host_pages(pages, host_pages)) {
      ++stats_.backups_skipped;
      return false;
    }
    uint64_t ticket = 0;
    const Status started = transfer_->backup(device_pages, host_pages, pages, &ticket);
    if (!started.is_ok()) {
      (void)host_->free(host_pages, pages);
      ++stats_.backup_errors;
      KVPOOL_LOG(KVPOOL_LOG_WARN, "host tier: the backup of " + std::to_string(pages) +
                                      " evicted pages failed to start, they are dropped: " + started.message());
      return false;
    }
    ++stats_.backups;
    stats_.backup_tokens += pages * static_cast<size_t>(page_size());
    copies.last = ticket;
    copies.made = true;
    return true;
  };
  auto free_host = [this](const int64_t* pages, size_t n) { release_host(pages, n); };
  const Status st = tree_.evict_tiered(
      tokens, [this](const int64_t* values, const size_t* ends, size_t runs, bool paged) { return give_back(values, ends, runs, paged); },
      copy, policy_ == WritePolicy::kWriteBack, free_host, evicted);
  if (copies.made) KVPOOL_RETURN_IF_ERROR(transfer_->wait(copies.last));  // one write stream: the last one lands last
  // Nodes the eviction gave host copies go on to storage (best effort: the eviction stands).
  if (storage_ == nullptr) {
    tree_.clear_copied();
  } else {
    try {
      std::vector<NodeHandle> copied;
      tree_.take_copied(&copied);
      store_nodes(copied);
    } catch (...) {
      tree_.clear_copied();
    }
  }
  return st;
}

Status PrefixCache::evict_host(size_t tokens, size_t* evicted) {
  // With storage, a leaf whose host pages a backup still reads stays (SGLang skips nodes
  // whose host copy is pinned): freeing it would free nothing until the backup finishes.
  RadixTree::KeepHost keep;
  if (storage_ != nullptr) {
    keep = [this](const int64_t* pages, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        if (host_pins_[static_cast<size_t>(pages[i])] != 0) return true;
      }
      return false;
    };
  }
  const Status st = tree_.evict_host(tokens, [this](const int64_t* pages, size_t n) { release_host(pages, n); }, evicted, keep);
  stats_.host_evicted_tokens += *evicted;
  return st;
}

Status PrefixCache::load_back(NodeHandle host_node, std::vector<int64_t>* slots, size_t* loaded,
                              NodeHandle* node) {
  *loaded = 0;
  last_load_storage_tokens_ = 0;
  size_t done = 0;
  KVPOOL_RETURN_IF_ERROR(release_landed(&done));
  std::vector<NodeHandle> chain;
  std::vector<int64_t> host_pages;
  size_t tokens = 0;
  NodeHandle device_ancestor = 0;  // the chain hangs below it
  KVPOOL_RETURN_IF_ERROR(tree_.host_chain(host_node, &chain, &tokens, &host_pages, &device_ancestor));
  *node = device_ancestor;
  if (tokens == 0) return Status::ok();
  if (tokens < kLoadBackThreshold) {
    ++stats_.loads_refused;
    return Status::ok();
  }
  // Everything that allocates first: after the eviction below, nothing may fail for want
  // of memory (the eviction would stay, the fresh slots leak).
  const size_t P = static_cast<size_t>(page_size());
  std::vector<int64_t> fresh(tokens), device_pages(tokens / P);
  slots->reserve(slots->size() + tokens);
  in_flight_.reserve(in_flight_.size() + 1);
  InFlight flight{0, {chain.back()}};
  tree_.reserve_unlocks(2);
  // Device room, evicting if needed. The chain and its ancestors stay locked meanwhile:
  // the device eviction cannot take the path, nor a host eviction (room for copies
  // that eviction makes) the chain's host-only nodes.
  const NodeHandle last = chain.back();
  KVPOOL_RETURN_IF_ERROR(tree_.lock(last));
  bool room = false;
  try {  // the lock must not outlive a throw
    if (allocator_->available_tokens() < tokens) {
      size_t freed = 0;
      const Status st = evict(tokens - allocator_->available_tokens(), &freed);
      stats_.load_evicted_tokens += freed;  // evicted even when the eviction then failed
      if (!st.is_ok()) {
        (void)tree_.unlock(last);
        return st;
      }
    }
    room = allocator_->available_tokens() >= tokens && allocator_->alloc(tokens, fresh.data()).is_ok();
  } catch (...) {
    (void)tree_.unlock(last);
    throw;
  }
  KVPOOL_RETURN_IF_ERROR(tree_.unlock(last));
  if (!room) {
    ++stats_.loads_refused;
    return Status::ok();
  }
  // Copy, then hand the pages to the tree.
  for (size_t p = 0; p < device_pages.size(); ++p) device_pages[p] = page_of(fresh[p * P]);
  uint64_t ticket = 0;
  Status st = transfer_->load(host_pages.data(), device_pages.data(), device_pages.size(), load_set_, &ticket);
  if (st.is_ok()) st = tree_.restore_chain(chain, fresh.data(), tokens);
  if (!st.is_ok()) {
    (void)allocator_->free(fresh.data(), tokens);
    return st;
  }
  for (int64_t page : device_pages) owned_[static_cast<size_t>(page)] = 1;
  last_load_storage_tokens_ = 0;
  if (!from_storage_.empty()) {  // pages a prefetch brought: counted once, at their first load
    for (int64_t page : host_pages) {
      if (from_storage_[static_cast<size_t>(page)] != 0) {
        from_storage_[static_cast<size_t>(page)] = 0;
        last_load_storage_tokens_ += P;
      }
    }
    storage_stats_.storage_hit_tokens += last_load_storage_tokens_;
  }
  ++stats_.loads;
  stats_.load_tokens += tokens;
  *loaded = tokens;
  *node = chain.back();
  slots->insert(slots->end(), fresh.begin(), fresh.end());  // reserved
  if (!transfer_->finished(ticket)) {
    KVPOOL_RETURN_IF_ERROR(tree_.lock(chain.back()));  // until the pages land
    flight.ticket = ticket;
    in_flight_.push_back(std::move(flight));  // reserved
  }
  return Status::ok();
}

size_t PrefixCache::check_host(std::string* report, size_t max_lines) const {
  size_t problems = host_->check(report, max_lines);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::vector<int64_t> pages;
  tree_.collect_host_pages(&pages);
  std::vector<uint8_t> seen(static_cast<size_t>(host_->pages()), 0);
  for (int64_t page : pages) {
    if (page < 0 || page >= static_cast<int64_t>(host_->pages())) {
      complain("the prefix tree holds invalid host page " + std::to_string(page));
      continue;
    }
    if (seen[static_cast<size_t>(page)]++ > 0) complain("host page " + std::to_string(page) + " is double-owned: two tree nodes");
    if (!host_->is_held(page)) complain("host page " + std::to_string(page) + " is in the prefix tree but free in the host pool");
  }
  // Every held host page belongs to a node (copies are attached as they start), or to the
  // storage tier: a page a backup still reads after the tree let go of it, a prefetch's page.
  if (pages.size() + storage_held_pages_ != host_->held_pages()) {
    complain("the host pool holds " + std::to_string(host_->held_pages()) + " pages, the prefix tree " +
             std::to_string(pages.size()) + " and the storage tier " + std::to_string(storage_held_pages_));
  }
  return problems;
}

}  // namespace kvp::cache
