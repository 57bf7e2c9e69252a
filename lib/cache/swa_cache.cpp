#include "cache/swa_cache.hpp"

#include <algorithm>

namespace kvp::cache {

SwaCache::SwaCache(alloc::SwaAllocator* allocator)
    : allocator_(allocator), owned_(static_cast<size_t>(allocator->full().num_ids()) + 1, 0) {
  handed_.reserve(static_cast<size_t>(allocator->full().num_ids()));
}

Status SwaCache::make(alloc::SwaAllocator* allocator, size_t window, std::unique_ptr<SwaCache>* out) {
  std::unique_ptr<SwaCache> c(new SwaCache(allocator));
  SwaCache* self = c.get();
  auto unmark = [self](const int64_t* slots, size_t n) {
    for (size_t i = 0; i < n; ++i) self->owned_[static_cast<size_t>(slots[i])] = 0;
  };
  SwaRadixTree::Callbacks cb;
  cb.free_full = [self, unmark](const int64_t* slots, size_t n) -> Status {
    KVPOOL_RETURN_IF_ERROR(self->allocator_->free(slots, n));
    unmark(slots, n);
    return Status::ok();
  };
  cb.free_swa = [self](const int64_t* slots, size_t n) -> Status { return self->allocator_->free_swa(slots, n); };
  cb.free_tombstone = [self, unmark](const int64_t* slots, size_t n) -> Status {
    KVPOOL_RETURN_IF_ERROR(self->allocator_->free_full_only(slots, n));
    unmark(slots, n);
    return Status::ok();
  };
  KVPOOL_RETURN_IF_ERROR(SwaRadixTree::create(1, window, std::move(cb), &c->tree_));
  *out = std::move(c);
  return Status::ok();
}

// slots[from, to) are the caller's: allocated, not the tree's, distinct;
// windowless before `windowless_to`, with a window slot from there on.
Status SwaCache::check_own(const int64_t* slots, size_t from, size_t to, size_t windowless_to) const {
  const auto& full = allocator_->full();
  const auto& mapping = allocator_->mapping();
  for (size_t i = from; i < to; ++i) {
    const int64_t s = slots[i];
    if (s < 1 || s > full.num_ids() || !full.owned(s)) {
      return Status::invalid("slot " + std::to_string(s) + " at index " + std::to_string(i) + " is not allocated");
    }
    if (owns_slot(s)) return Status::invalid("slot " + std::to_string(s) + " already belongs to the prefix tree");
    const bool windowless = i < windowless_to;
    if (windowless != (mapping[static_cast<size_t>(s)] == 0)) {
      return Status::invalid("slot " + std::to_string(s) + " at index " + std::to_string(i) +
                             (windowless ? " still has a window slot (free it with kvalloc_free_swa first)"
                                         : " has no window slot; pass swa_evicted_len past it"));
    }
  }
  return check_distinct(slots + from, to - from, &handed_);
}

void SwaCache::mark(const int64_t* slots, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    if (allocator_->full().owned(slots[i])) owned_[static_cast<size_t>(slots[i])] = 1;
  }
}

Status SwaCache::insert(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                        size_t prev_prefix_len, size_t swa_evicted_len, size_t* prefix_len, NodeHandle* node,
                        bool count_hit) {
  size_t usable = 0;
  const size_t cached = tree_->cached_prefix(tokens, n, extra_key, &usable);
  if (prev_prefix_len > n || prev_prefix_len > cached) {
    return Status::invalid("prev_prefix_len " + std::to_string(prev_prefix_len) + " exceeds the " +
                           std::to_string(std::min(n, cached)) + " tokens the tree holds of this key");
  }
  if (swa_evicted_len > n) {
    return Status::invalid("swa_evicted_len " + std::to_string(swa_evicted_len) + " exceeds the key length " + std::to_string(n));
  }
  for (size_t i = 0; i < prev_prefix_len; ++i) {
    if (!owns_slot(slots[i])) {
      return Status::invalid("slot " + std::to_string(slots[i]) + " at index " + std::to_string(i) +
                             " is below prev_prefix_len but not the tree's");
    }
  }
  KVPOOL_RETURN_IF_ERROR(check_own(slots, prev_prefix_len, n, swa_evicted_len));
  KVPOOL_RETURN_IF_ERROR(release_landed());
  NodeHandle last = 0;
  KVPOOL_RETURN_IF_ERROR(tree_->insert(tokens, n, slots, extra_key, prev_prefix_len, prefix_len, &last, swa_evicted_len,
                                       host_tier() && count_hit));
  mark(slots, prev_prefix_len, n);  // every slot the caller handed over and that is still held is the tree's now
  if (node != nullptr) *node = last;
  if (host_tier() && count_hit) back_up_path(last);
  if (host_tier() && !pending_.empty()) retry_backups();
  return Status::ok();
}

Status SwaCache::insert_keep_prefix(const int32_t* tokens, size_t n, const int64_t* slots, const std::string& extra_key,
                                    size_t* prefix_len, NodeHandle* node) {
  size_t usable = 0;
  const size_t prefix = tree_->cached_prefix(tokens, n, extra_key, &usable);
  KVPOOL_RETURN_IF_ERROR(check_own(slots, prefix, n, 0));
  KVPOOL_RETURN_IF_ERROR(release_landed());
  // prev_prefix_len = n: the tree frees nothing of the caller's and revives nothing
  // (host-only nodes on the path take the caller's slots as their device copy).
  NodeHandle last = 0;
  KVPOOL_RETURN_IF_ERROR(tree_->insert(tokens, n, slots, extra_key, n, prefix_len, &last, 0, host_tier()));
  mark(slots, *prefix_len, n);
  if (node != nullptr) *node = last;
  if (host_tier()) back_up_path(last);
  if (host_tier() && !pending_.empty()) retry_backups();
  return Status::ok();
}

Status SwaCache::lock(NodeHandle node) {
  if (node == tree_->root()) {
    int64_t uuid = 0;
    return tree_->lock(node, &uuid);
  }
  // The record of the uuid first, so that nothing allocates once the tree is locked.
  auto [it, added] = lock_uuids_.try_emplace(node);
  struct DropUnlessKept {
    std::map<NodeHandle, std::vector<int64_t>>& map;
    std::map<NodeHandle, std::vector<int64_t>>::iterator it;
    bool drop;
    ~DropUnlessKept() {
      if (drop) map.erase(it);
    }
  } guard{lock_uuids_, it, added};
  it->second.reserve(it->second.size() + 1);
  int64_t uuid = 0;
  KVPOOL_RETURN_IF_ERROR(tree_->lock(node, &uuid));
  it->second.push_back(uuid);
  guard.drop = false;
  return Status::ok();
}

Status SwaCache::unlock(NodeHandle node) {
  if (node == tree_->root()) return tree_->unlock(node, 0);
  auto it = lock_uuids_.find(node);
  if (it == lock_uuids_.end() || !tree_->is_live(node)) {
    return Status::invalid("node handle " + std::to_string(node) + " is stale or was not locked with radix_lock");
  }
  KVPOOL_RETURN_IF_ERROR(tree_->unlock(node, it->second.back()));
  it->second.pop_back();
  if (it->second.empty()) lock_uuids_.erase(it);
  return Status::ok();
}

Status SwaCache::evict(size_t full_tokens, size_t swa_tokens, size_t* full_evicted, size_t* swa_evicted) {
  *full_evicted = *swa_evicted = 0;
  KVPOOL_RETURN_IF_ERROR(release_landed());  // landed copies unlock their nodes: evictable again
  const Status st = tree_->evict(full_tokens, swa_tokens, full_evicted, swa_evicted);
  evicted_tokens_ += *full_evicted;
  evicted_window_tokens_ += *swa_evicted;
  return st;
}

Status SwaCache::reset() {
  KVPOOL_RETURN_IF_ERROR(release_landed(true));  // copies in flight read or write slots freed below
  std::vector<int64_t> full, windowed;
  tree_->collect_slots(&full, &windowed);
  std::sort(windowed.begin(), windowed.end());
  std::vector<int64_t> tombstoned;
  for (int64_t s : full) {
    if (!std::binary_search(windowed.begin(), windowed.end(), s)) tombstoned.push_back(s);
  }
  KVPOOL_RETURN_IF_ERROR(allocator_->free(windowed.data(), windowed.size()));
  KVPOOL_RETURN_IF_ERROR(allocator_->free_full_only(tombstoned.data(), tombstoned.size()));
  std::fill(owned_.begin(), owned_.end(), 0);
  lock_uuids_.clear();
  tree_->reset();
  if (host_ != nullptr) {
    host_->clear();
    host_window_->clear();
    pending_.clear();
  }
  return Status::ok();
}

size_t SwaCache::check(std::string* report, size_t max_lines) const {
  size_t problems = tree_->check(report, max_lines);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::vector<int64_t> full, windowed;
  tree_->collect_slots(&full, &windowed);
  std::sort(windowed.begin(), windowed.end());
  const auto& mapping = allocator_->mapping();
  std::vector<uint8_t> seen(owned_.size(), 0);
  for (int64_t s : full) {
    if (s < 1 || static_cast<size_t>(s) >= owned_.size()) {
      complain("the swa radix tree holds invalid slot " + std::to_string(s));
      continue;
    }
    if (seen[static_cast<size_t>(s)]++ > 0) complain("slot " + std::to_string(s) + " is double-owned: two tree nodes");
    if (!allocator_->full().owned(s)) complain("slot " + std::to_string(s) + " is in the swa radix tree but free in the allocator");
    const int64_t w = mapping[static_cast<size_t>(s)];
    if (std::binary_search(windowed.begin(), windowed.end(), s)) {
      if (w <= 0 || !allocator_->swa().owned(w)) complain("slot " + std::to_string(s) + " of a live tree node has no held window slot");
    } else if (w != 0) {
      complain("slot " + std::to_string(s) + " of a tombstone still maps to window slot " + std::to_string(w));
    }
  }
  for (size_t i = 1; i < owned_.size(); ++i) {
    if ((owned_[i] != 0) != (seen[i] != 0)) complain("slot " + std::to_string(i) + " tree-ownership mark is wrong");
  }
  if (host_ != nullptr) problems += check_host(report, max_lines > problems ? max_lines - problems : 0);
  return problems;
}

}  // namespace kvp::cache
