// The prefix cache's storage tier (SGLANG_SEMANTICS §5.5): host copies go on to
// storage once they land, and prefetches bring a prompt's continuation from storage
// into the host tier as host-only nodes, which a later match then finds as a host hit.
//
// Host pages and storage: a backup reads its pages on the storage tier's thread, so
// they are pinned until the backup is reported finished; a page the tree lets go of
// meanwhile (host eviction) is freed only then. A prefetch's pages belong to it until
// it ends; then the landed ones go to the tree and the others come back once the
// storage thread is through with them. Nothing here waits for storage I/O, except
// reset(), which lets the current batch finish.
#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>

#include "cache/prefix_cache.hpp"

namespace kvp::cache {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void PrefixCache::enable_storage(storage::StorageTier* tier, std::string identity, const StorageOptions& options) {
  storage_ = tier;
  identity_ = std::move(identity);
  storage_options_ = options;
  const size_t pages = static_cast<size_t>(host_->pages());
  host_pins_.assign(pages, 0);
  host_freed_.assign(pages, 0);
  from_storage_.assign(pages, 0);
  pages_scratch_.reserve(pages);  // release_host() and drain_storage() then never allocate
}

const storage::Fingerprint& PrefixCache::namespace_fingerprint(const std::string& extra_key) {
  for (const auto& [key, fp] : fingerprints_) {
    if (key == extra_key) return fp;
  }
  // A namespace (an engine's extra key: a LoRA adapter, a salt) changes what the KV means,
  // so it is part of the fingerprint; SGLang leaves it out of its storage keys.
  const std::string identity = extra_key.empty() ? identity_ : identity_ + ";namespace=" + extra_key;
  fingerprints_.emplace_back(extra_key, storage::fingerprint_of(identity));
  return fingerprints_.back().second;
}

void PrefixCache::store_nodes(const std::vector<NodeHandle>& nodes) noexcept {
  try {
    // One backup job per namespace, pages in path order (a node's digests chain from its parent's).
    std::vector<std::string> spaces;
    for (NodeHandle h : nodes) {
      if (tree_.is_live(h)) spaces.push_back(tree_.namespace_of(h));
    }
    std::sort(spaces.begin(), spaces.end());
    spaces.erase(std::unique(spaces.begin(), spaces.end()), spaces.end());
    for (const std::string& space : spaces) {
      std::vector<int64_t> pages;
      std::vector<Digest> digests;
      size_t tokens = 0;
      for (NodeHandle h : nodes) {
        if (!tree_.is_live(h) || tree_.namespace_of(h) != space) continue;
        const size_t before = pages.size();
        tree_.host_pages_of(h, &pages);
        if (pages.size() == before) continue;  // no host copy (any more)
        if (!tree_.page_digests(h, &digests).is_ok() || digests.size() != pages.size()) {
          pages.resize(before);
          digests.resize(before);
          continue;
        }
        tokens += tree_.tier_node(h).tokens;
      }
      if (pages.empty()) continue;
      storage_backups_.reserve(storage_backups_.size() + 1);
      finished_scratch_.reserve(storage_backups_.size() + 1);  // drain_storage() takes them all without allocating
      std::vector<int64_t> pinned = pages;
      const uint64_t id = storage_->backup(std::move(pages), std::move(digests), namespace_fingerprint(space));
      for (int64_t p : pinned) ++host_pins_[static_cast<size_t>(p)];
      storage_backups_.emplace_back(id, std::move(pinned));
      ++storage_stats_.backup_jobs;
      storage_stats_.backup_tokens += tokens;
    }
  } catch (...) {  // out of memory: these pages are not backed up to storage; the cache is unchanged
  }
}

void PrefixCache::release_host(const int64_t* pages, size_t n) {
  if (storage_ == nullptr) {
    (void)host_->free(pages, n);
    return;
  }
  std::vector<int64_t>& now = pages_scratch_;
  now.clear();
  for (size_t i = 0; i < n; ++i) {
    const size_t p = static_cast<size_t>(pages[i]);
    from_storage_[p] = 0;
    if (host_pins_[p] > 0) {  // a backup still reads it: freed when the backup finishes
      host_freed_[p] = 1;
      ++storage_held_pages_;
    } else {
      now.push_back(pages[i]);
    }
  }
  (void)host_->free(now.data(), now.size());
}

// Allocates nothing (the scratch vectors are reserved), so ids taken from the tier are
// always applied: a pin never outlives its backup.
void PrefixCache::drain_storage() {
  finished_scratch_.clear();
  storage_->take_finished_backups(&finished_scratch_);
  std::vector<int64_t>& unpinned = pages_scratch_;
  unpinned.clear();
  for (uint64_t id : finished_scratch_) {
    const auto it = std::find_if(storage_backups_.begin(), storage_backups_.end(),
                                 [id](const auto& b) { return b.first == id; });
    if (it == storage_backups_.end()) continue;
    for (int64_t page : it->second) {
      const size_t p = static_cast<size_t>(page);
      if (--host_pins_[p] == 0 && host_freed_[p] != 0) {
        host_freed_[p] = 0;
        --storage_held_pages_;
        unpinned.push_back(page);
      }
    }
    storage_backups_.erase(it);
  }
  const size_t before = unpinned.size();
  storage_->take_released(&unpinned);  // pages of ended prefetches the storage thread let go of
  storage_held_pages_ -= unpinned.size() - before;
  (void)host_->free(unpinned.data(), unpinned.size());
}

Status PrefixCache::prefetch(const int32_t* tokens, size_t n, const std::string& extra_key, uint64_t* id,
                             PrefetchSkip* why) {
  *id = 0;
  *why = PrefetchSkip::kNone;
  if (storage_ == nullptr) return Status::unsupported("the pool has no storage tier (config: storage)");
  const size_t P = static_cast<size_t>(page_size());
  size_t done = 0;
  KVPOOL_RETURN_IF_ERROR(release_landed(&done));
  n -= n % P;
  const MatchResult m = tree_.match(tokens, n, extra_key);
  const size_t cached = m.slots.size() + m.host_tokens;
  const size_t asked = n - cached;
  // The fetched pages hang below the deepest cached node, which needs a host copy (every
  // host-only node's ancestors have one); with no host-only part that is the device node.
  if (cached > 0 && m.host_tokens == 0 && m.last_host_node != m.last_node) {
    *why = PrefetchSkip::kNotBackedUp;
  } else if (asked == 0 || asked < std::max(storage_options_.threshold_tokens, P)) {
    *why = PrefetchSkip::kBelowThreshold;
  } else if (prefetch_tokens_held_ + asked > storage_options_.capacity_tokens) {
    *why = PrefetchSkip::kCapacity;
  }
  if (*why != PrefetchSkip::kNone) {
    ++storage_stats_.prefetches_skipped;
    return Status::ok();
  }
  PrefetchOp op;
  op.tokens.assign(tokens, tokens + n);
  op.extra_key = extra_key;
  op.from = cached;
  const size_t pages = asked / P;
  op.digests.resize(pages);
  Digest parent{};
  const bool has_parent = cached > 0 && tree_.last_digest(m.last_host_node, &parent);
  page_digest_chain(has_parent ? &parent : nullptr, tokens + cached, P, pages, op.digests.data());
  op.pages.resize(pages);
  prefetches_.reserve(prefetches_.size() + 1);
  const size_t min_pages = std::max<size_t>(1, (storage_options_.threshold_tokens + P - 1) / P);
  // Everything that allocates (the job, the threads on first use) before host pages are
  // taken, which may evict host-only nodes: a failure changes nothing.
  storage::StorageTier::StagedPrefetch staged =
      storage_->stage_prefetch(op.digests, namespace_fingerprint(extra_key), min_pages);
  if (!take_host_pages(pages, op.pages.data())) {
    *why = PrefetchSkip::kHostFull;
    ++storage_stats_.prefetches_skipped;
    return Status::ok();
  }
  std::copy(op.pages.begin(), op.pages.end(), staged.pages);
  op.started_s = now_s();
  op.timeout_s = storage_options_.timeout_base_s +
                 static_cast<double>(asked) / 1024.0 * storage_options_.timeout_per_ki_token_s;
  *id = storage_->commit_prefetch(std::move(staged));
  storage_held_pages_ += pages;
  prefetch_tokens_held_ += asked;
  ++storage_stats_.prefetches;
  storage_stats_.prefetch_tokens += asked;
  prefetches_.emplace_back(*id, std::move(op));
  return Status::ok();
}

Status PrefixCache::prefetch_state(uint64_t id, PrefetchState* out) const {
  const auto it = std::find_if(prefetches_.begin(), prefetches_.end(), [id](const auto& p) { return p.first == id; });
  if (storage_ == nullptr || it == prefetches_.end()) {
    return Status::invalid("prefetch " + std::to_string(id) + " is unknown or ended");
  }
  const PrefetchOp& op = it->second;
  const storage::StorageTier::Progress p = storage_->progress(id);
  const size_t P = static_cast<size_t>(page_size());
  *out = PrefetchState{};
  out->done = p.done;
  out->revoked = p.revoked;
  out->searched = p.searched;
  out->asked_tokens = op.tokens.size() - op.from;
  out->hit_tokens = p.hit_pages * P;
  out->loaded_tokens = p.loaded_pages * P;
  switch (storage_options_.policy) {
    case StorageOptions::Policy::kBestEffort: out->ready = true; break;
    case StorageOptions::Policy::kWaitComplete: out->ready = p.done; break;
    case StorageOptions::Policy::kTimeout: out->ready = p.done || now_s() - op.started_s >= op.timeout_s; break;
  }
  return Status::ok();
}

Status PrefixCache::prefetch_end(uint64_t id, size_t* inserted_tokens) {
  *inserted_tokens = 0;
  const auto it = std::find_if(prefetches_.begin(), prefetches_.end(), [id](const auto& p) { return p.first == id; });
  if (storage_ == nullptr || it == prefetches_.end()) {
    return Status::invalid("prefetch " + std::to_string(id) + " is unknown or ended");
  }
  const PrefetchOp& op = it->second;
  const size_t P = static_cast<size_t>(page_size());
  // Everything that may fail comes first, while the prefetch still runs: a failed call
  // leaves it running (the caller may end it again). Pages [0, landed) are whole and the
  // storage thread never writes them again, so the tree may take them before the end.
  storage_->reserve_finish(op.pages.size());
  const size_t landed = storage_->progress(id).loaded_pages;
  size_t used_from = landed;
  if (landed > 0) {  // std::bad_alloc leaves the tree unchanged
    KVPOOL_RETURN_IF_ERROR(tree_.insert_host_only(op.tokens.data(), op.from + landed * P, op.extra_key, op.from,
                                                  op.pages.data(), op.digests.data(), &used_from));
  }
  // No allocation from here on.
  const size_t taken = storage_->finish_prefetch(id, landed);  // pages [landed, ...) come back later
  assert(taken == landed);
  (void)taken;
  storage_held_pages_ -= landed;
  prefetch_tokens_held_ -= op.tokens.size() - op.from;
  // Pages the tree did not take (it had those tokens, or lost the path meanwhile) are freed.
  (void)host_->free(op.pages.data(), used_from);
  for (size_t i = used_from; i < landed; ++i) from_storage_[static_cast<size_t>(op.pages[i])] = 1;
  *inserted_tokens = (landed - used_from) * P;
  storage_stats_.prefetch_inserted_tokens += *inserted_tokens;
  storage_stats_.prefetch_dropped_tokens += used_from * P;
  prefetches_.erase(it);
  return Status::ok();
}

void PrefixCache::forget_storage_jobs() {
  for (const auto& [id, op] : prefetches_) (void)storage_->finish_prefetch(id);
  prefetches_.clear();
  prefetch_tokens_held_ = 0;
  storage_->wait_idle();  // the current batches read or write no host page after this
  std::vector<uint64_t> ids;
  storage_->take_finished_backups(&ids);
  std::vector<int64_t> released;
  storage_->take_released(&released);
  storage_backups_.clear();
  std::fill(host_pins_.begin(), host_pins_.end(), 0);
  std::fill(host_freed_.begin(), host_freed_.end(), 0);
  std::fill(from_storage_.begin(), from_storage_.end(), 0);
  storage_held_pages_ = 0;
}

}  // namespace kvp::cache
