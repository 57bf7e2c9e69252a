#include "cache/mamba_cache.hpp"

#include <algorithm>

namespace kvp::cache {

MambaCache::MambaCache(alloc::PagedAllocator* kv, mamba::MambaPool* states)
    : kv_(kv), states_(states), owned_(static_cast<size_t>(kv->slot_limit()), 0),
      owned_state_(static_cast<size_t>(states->ids().num_ids()) + 1, 0) {
  handed_.reserve(owned_.size());
}

Status MambaCache::make(alloc::PagedAllocator* kv, mamba::MambaPool* states, std::unique_ptr<MambaCache>* out) {
  std::unique_ptr<MambaCache> c(new MambaCache(kv, states));
  MambaCache* self = c.get();
  MambaRadixTree::Callbacks cb;
  cb.free_full = [self](const int64_t* slots, size_t n) -> Status {
    KVPOOL_RETURN_IF_ERROR(self->kv_->free(slots, n));
    for (size_t i = 0; i < n; ++i) self->owned_[static_cast<size_t>(slots[i])] = 0;
    return Status::ok();
  };
  cb.free_mamba = [self](int32_t slot) -> Status {
    KVPOOL_RETURN_IF_ERROR(self->states_->free_unattached(&slot, 1));
    self->owned_state_[static_cast<size_t>(slot)] = 0;
    return Status::ok();
  };
  KVPOOL_RETURN_IF_ERROR(MambaRadixTree::create(kv->page_size(), std::move(cb), &c->tree_));
  *out = std::move(c);
  return Status::ok();
}

Status MambaCache::check_state(int32_t state, const char* what) const {
  if (state < 1 || state > states_->ids().num_ids() || !states_->ids().owned(state)) {
    return Status::invalid(std::string(what) + " mamba slot " + std::to_string(state) + " is not allocated");
  }
  if (owns_state(state)) return Status::invalid(std::string(what) + " mamba slot " + std::to_string(state) + " belongs to the prefix tree");
  if (states_->attached(state)) {
    return Status::invalid(std::string(what) + " mamba slot " + std::to_string(state) + " belongs to a request row");
  }
  return Status::ok();
}

Status MambaCache::match(const int32_t* tokens, size_t n, const std::string& extra_key, int32_t cow_slot, MambaMatch* out) {
  if (cow_slot >= 0) {
    if (cow_slot < 1 || cow_slot > states_->ids().num_ids() || !states_->ids().owned(cow_slot)) {
      return Status::invalid("cow_slot " + std::to_string(cow_slot) + " is not an allocated mamba slot");
    }
    if (owns_state(cow_slot)) return Status::invalid("cow_slot " + std::to_string(cow_slot) + " belongs to the prefix tree");
  }
  tree_->match_into(tokens, n, extra_key, out);
  if (cow_slot >= 0 && out->mamba_slot >= 0) return states_->copy(out->mamba_slot, cow_slot);
  return Status::ok();
}

Status MambaCache::insert(const int32_t* tokens, size_t n, const int64_t* slots, int32_t state,
                          const std::string& extra_key, size_t* prefix_len, bool* state_exist, NodeHandle* node,
                          bool count_hit) {
  if (n == 0) return Status::invalid("cannot insert an empty key: the root holds no state");
  KVPOOL_RETURN_IF_ERROR(check_state(state, "state"));
  size_t usable = 0;
  const size_t prefix = tree_->cached_prefix(tokens, n, extra_key, &usable);
  for (size_t i = prefix; i < n; ++i) {
    const int64_t s = slots[i];
    if (s < 1 || s >= kv_->slot_limit() || !kv_->pages().owned(s)) {
      return Status::invalid("slot " + std::to_string(s) + " at index " + std::to_string(i) + " is not allocated");
    }
    if (owns_slot(s)) return Status::invalid("slot " + std::to_string(s) + " already belongs to the prefix tree");
  }
  KVPOOL_RETURN_IF_ERROR(check_distinct(slots + prefix, n - prefix, &handed_));
  KVPOOL_RETURN_IF_ERROR(release_landed());
  NodeHandle last = 0;
  KVPOOL_RETURN_IF_ERROR(tree_->insert(tokens, n, slots, state, extra_key, prefix_len, state_exist, &last,
                                       host_tier() && count_hit));
  for (size_t i = *prefix_len; i < n; ++i) owned_[static_cast<size_t>(slots[i])] = 1;
  if (!*state_exist) owned_state_[static_cast<size_t>(state)] = 1;
  if (node != nullptr) *node = last;
  if (host_tier() && count_hit) back_up_path(last);
  if (host_tier() && !pending_.empty()) retry_backups();
  return Status::ok();
}

Status MambaCache::evict(size_t tokens, size_t* evicted) {
  *evicted = 0;
  KVPOOL_RETURN_IF_ERROR(release_landed());  // landed copies unlock their nodes: evictable again
  const Status st = tree_->evict(tokens, evicted);
  evicted_tokens_ += *evicted;
  return st;
}

Status MambaCache::evict_mamba(size_t states, size_t* evicted) {
  *evicted = 0;
  KVPOOL_RETURN_IF_ERROR(release_landed());
  const Status st = tree_->evict_mamba(states, evicted);
  evicted_states_ += *evicted;
  return st;
}

Status MambaCache::reset() {
  KVPOOL_RETURN_IF_ERROR(release_landed(true));  // copies in flight read or write slots freed below
  std::vector<int64_t> slots;
  std::vector<int32_t> states;
  tree_->collect_slots(&slots, &states);
  KVPOOL_RETURN_IF_ERROR(kv_->free(slots.data(), slots.size()));
  KVPOOL_RETURN_IF_ERROR(states_->free_unattached(states.data(), states.size()));
  std::fill(owned_.begin(), owned_.end(), 0);
  std::fill(owned_state_.begin(), owned_state_.end(), 0);
  tree_->reset();
  if (host_ != nullptr) host_->clear();
  return Status::ok();
}

size_t MambaCache::check(std::string* report, size_t max_lines) const {
  size_t problems = tree_->check(report, max_lines);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::vector<int64_t> slots;
  std::vector<int32_t> states;
  tree_->collect_slots(&slots, &states);
  std::vector<uint8_t> seen(owned_.size(), 0), seen_state(owned_state_.size(), 0);
  for (int64_t s : slots) {
    if (s < 1 || static_cast<size_t>(s) >= owned_.size()) {
      complain("the mamba radix tree holds invalid slot " + std::to_string(s));
      continue;
    }
    if (seen[static_cast<size_t>(s)]++ > 0) complain("slot " + std::to_string(s) + " is double-owned: two tree nodes");
    if (!kv_->pages().owned(s)) complain("slot " + std::to_string(s) + " is in the mamba radix tree but free in the allocator");
  }
  for (int32_t s : states) {
    if (s < 1 || static_cast<size_t>(s) >= owned_state_.size()) {
      complain("the mamba radix tree holds invalid mamba slot " + std::to_string(s));
      continue;
    }
    if (seen_state[static_cast<size_t>(s)]++ > 0) complain("mamba slot " + std::to_string(s) + " is held by two tree nodes");
    if (!states_->ids().owned(s)) complain("mamba slot " + std::to_string(s) + " is in the tree but free");
    if (states_->attached(s)) complain("mamba slot " + std::to_string(s) + " is in the tree and attached to a request row");
  }
  for (size_t i = 1; i < owned_.size(); ++i) {
    if ((owned_[i] != 0) != (seen[i] != 0)) complain("slot " + std::to_string(i) + " tree-ownership mark is wrong");
  }
  for (size_t i = 1; i < owned_state_.size(); ++i) {
    if ((owned_state_[i] != 0) != (seen_state[i] != 0)) complain("mamba slot " + std::to_string(i) + " tree-ownership mark is wrong");
  }
  if (host_ != nullptr) problems += check_host(report, max_lines > problems ? max_lines - problems : 0);
  return problems;
}

}  // namespace kvp::cache
