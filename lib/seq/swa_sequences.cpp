#include "seq/swa_sequences.hpp"

#include <algorithm>
#include <vector>

namespace kvp::seq {

SwaSequences::SwaSequences(alloc::SwaAllocator* allocator, req::RequestTable* table, cache::SwaCache* cache, size_t window)
    : Sequences(nullptr, table, nullptr), swa_(allocator), scache_(cache), window_(window) {
  // Matches right after an insert or a release: into a buffer sized once.
  if (scache_ != nullptr) match_.slots.reserve(static_cast<size_t>(table_->max_context_len()));
}

bool SwaSequences::tree_owns(int64_t slot) const { return scache_ != nullptr && scache_->owns_slot(slot); }

void SwaSequences::undo_allocation(const int64_t* out, size_t n) { (void)swa_->free(out, n); }

bool SwaSequences::slot_held(int64_t slot) const { return swa_->full().owned(slot); }

Status SwaSequences::free_slots(const std::vector<int64_t>& slots, size_t from, size_t to) {
  if (to <= from) return Status::ok();
  return swa_->free(slots.data() + from, to - from);  // windowless slots map to 0: only the full slot is freed
}

Status SwaSequences::match_and_lock(Request* r) {
  r->cached = r->prefix_hit = r->host_hit = 0;
  r->slots.clear();
  r->node = 0;
  r->swa_uuid = 0;
  r->window_from = 0;
  if (scache_ == nullptr) return Status::ok();
  r->slots.reserve(r->tokens.size());  // before the match: its split is a change
  cache::SwaMatch& m = match_;
  scache_->tree().match_into(r->tokens.data(), r->tokens.size() - 1, r->extra_key, &m);
  if (scache_->host_tier() && !retracting_ && m.host_tokens > 0) {
    // A usable end on a host-only node: its chain comes back (full slots, and window slots
    // for its last window of tokens; the load keeps the matched path pinned while it makes
    // room), then the match ends there.
    std::vector<int64_t> loaded_slots;
    size_t loaded = 0;
    KVPOOL_RETURN_IF_ERROR(scache_->load_back(m.host_node, &loaded_slots, &loaded));
    // Then the match again, loaded or not: the eviction that made room may have run even
    // where the load did not (too little room made), and it can tombstone the window
    // above the first match's end, which the load pins only where it is right above the
    // chain (a device tombstone between them ends that pin). The first match's node would
    // then be refused by lock() after the eviction's changes (FaultSeq seed 149).
    const size_t before = m.slots.size();
    scache_->tree().match_into(r->tokens.data(), r->tokens.size() - 1, r->extra_key, &m);
    r->host_hit = loaded > 0 && m.slots.size() > before ? std::min(loaded, m.slots.size() - before) : 0;
  }
  // The usable prefix ends with at least `window` live tokens (or has no tombstone).
  KVPOOL_RETURN_IF_ERROR(scache_->tree().lock(m.node, &r->swa_uuid));
  r->node = m.node;
  r->slots.assign(m.slots.begin(), m.slots.end());
  r->cached = r->prefix_hit = r->slots.size();
  return Status::ok();
}

void SwaSequences::reserve_rematch(Request* r) {
  if (scache_ != nullptr) scache_->tree().reserve_match(r->tokens.size());
  r->slots.reserve(r->tokens.size());
}

Status SwaSequences::unlock(Request* r) {
  if (scache_ == nullptr) return Status::ok();
  return scache_->tree().unlock(r->node, r->swa_uuid);
}

// Full slots free + evictable never drop here (the duplicates freed match the
// tokens newly locked; the rest goes from uncached to protected); window ones
// drop at most by the preview's window_locked, which is checked against `need`.
Status SwaSequences::cache_unfinished(Request* r, size_t need) {
  const size_t n = r->slots.size();
  // slots[cached, swa_evicted) lost their window slots; the rest (at least the last window) still have them.
  const size_t swa_evicted = std::max(r->cached, r->window_from);
  const cache::SwaRadixTree::InsertPreview p = scache_->tree().preview_insert(r->tokens.data(), n, r->extra_key, r->cached, swa_evicted);
  // Host-only nodes on the path take the request's slots as their device copy (its last
  // window is windowed, so the insert never drops them: docs/host-tier.md).
  if (p.frees_windowed) return Status::ok();
  const size_t window = swa_->swa().available() + (swa_->full().in_group() ? 0 : scache_->tree().swa_evictable_size());
  if (window < need + p.window_locked) return Status::ok();
  size_t prefix = 0;
  // The tree frees the request's duplicates itself and takes the rest of slots[cached, n).
  // A chunk of a prompt not fully computed yet: no write-policy hit (SGLang's chunked insert).
  KVPOOL_RETURN_IF_ERROR(scache_->insert(r->tokens.data(), n, r->slots.data(), r->extra_key, r->cached, swa_evicted,
                                         &prefix, nullptr, false));
  // Usable to the end: the windowed tokens now in the tree are live and, with
  // the request's locked window before `cached`, end the path with a whole window.
  cache::SwaMatch& m = match_;
  scache_->tree().match_into(r->tokens.data(), n, r->extra_key, &m);
  if (m.slots.size() != n) {
    return Status::internal("the swa radix tree cannot match tokens just inserted (" + std::to_string(m.slots.size()) +
                            " of " + std::to_string(n) + ")");
  }
  std::copy(m.slots.begin() + static_cast<long>(r->cached), m.slots.end(), r->slots.begin() + static_cast<long>(r->cached));
  KVPOOL_RETURN_IF_ERROR(table_->write(r->row, r->cached, m.slots.data() + r->cached, n - r->cached));
  int64_t uuid = 0;
  KVPOOL_RETURN_IF_ERROR(scache_->tree().lock(m.node, &uuid));  // before the unlock, so the path never becomes evictable
  KVPOOL_RETURN_IF_ERROR(unlock(r));
  r->node = m.node;
  r->swa_uuid = uuid;
  r->cached = n;
  return Status::ok();
}

void SwaSequences::reserve_caching(const std::vector<Request*>& reqs) {
  std::vector<size_t> bounds;  // per request that caches: its tokens not in the tree yet
  for (const Request* r : reqs) {
    if (r->slots.size() <= r->cached) continue;
    bounds.push_back(r->slots.size() - r->cached);
    scache_->tree().reserve_namespace(r->extra_key);
  }
  scache_->tree().reserve_inserts(bounds.data(), bounds.size());
}

void SwaSequences::out_of_window(const Request& r, size_t* from, size_t* to) const {
  *from = std::max(r.cached, r.window_from);
  const size_t computed = r.slots.size();
  *to = computed > window_ ? computed - window_ : 0;
  if (*to < *from) *to = *from;
}

Status SwaSequences::allocate(const std::vector<Request*>& reqs, size_t total, bool cache, int64_t* out) {
  size_t released = 0;
  for (const Request* r : reqs) {
    size_t from = 0, to = 0;
    out_of_window(*r, &from, &to);
    released += to - from;
  }
  const size_t full_free = swa_->full().available(), window_free = swa_->swa().available() + released;
  // Inside an open free group evicted slots become free only at the group's end: they cannot make room now.
  const bool evict_frees = scache_ != nullptr && !swa_->full().in_group();
  const size_t full_evictable = evict_frees ? scache_->tree().full_evictable_size() : 0;
  const size_t window_evictable = evict_frees ? scache_->tree().swa_evictable_size() : 0;
  if (full_free + full_evictable < total || window_free + window_evictable < total) {
    return Status::out_of_memory("need " + std::to_string(total) + " slots in both pools: " + std::to_string(full_free) +
                                 " full slots free and " + std::to_string(full_evictable) + " evictable, " +
                                 std::to_string(window_free) + " window slots free and " +
                                 std::to_string(window_evictable) + " evictable");
  }
  if (cache && scache_ != nullptr) reserve_caching(reqs);  // also the eviction's KV events
  // Without inserts (decode) the eviction below still comes after the frees: its KV events'
  // room is taken first (a failed kvseq_decode freed window slots before).
  if (!cache && scache_ != nullptr) scache_->tree().reserve_eviction_events();
  for (Request* r : reqs) {
    size_t from = 0, to = 0;
    out_of_window(*r, &from, &to);
    if (to > from) KVPOOL_RETURN_IF_ERROR(swa_->free_swa(r->slots.data() + from, to - from));
    r->window_from = std::max(r->window_from, to);
  }
  // After the frees, so that tokens out of the window go in as tombstones.
  if (cache && scache_ != nullptr) {
    for (Request* r : reqs) {
      if (r->slots.size() > r->cached) KVPOOL_RETURN_IF_ERROR(cache_unfinished(r, total));
    }
  }
  const size_t full_short = total > swa_->full().available() ? total - swa_->full().available() : 0;
  const size_t window_short = total > swa_->swa().available() ? total - swa_->swa().available() : 0;
  if (full_short > 0 || window_short > 0) {
    size_t full_evicted = 0, window_evicted = 0;
    KVPOOL_RETURN_IF_ERROR(scache_->evict(full_short, window_short, &full_evicted, &window_evicted));
  }
  return swa_->alloc(total, out);
}

Status SwaSequences::extend(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* out, size_t out_len) {
  std::vector<Request*> reqs;
  KVPOOL_RETURN_IF_ERROR(check_batch(ids, n, &reqs));
  size_t total = 0, pages = 0, rows_needed = 0;
  KVPOOL_RETURN_IF_ERROR(plan_extend(reqs, ids, chunks, n, out_len, &total, &pages, &rows_needed));
  std::vector<int32_t> rows(rows_needed);
  for (size_t i = 0; i < n; ++i) reserve_more(&reqs[i]->slots, static_cast<size_t>(chunks[i]));
  KVPOOL_RETURN_IF_ERROR(allocate(reqs, total, true, out));
  return place_chunks(reqs, chunks, rows.data(), rows_needed, out);
}

Status SwaSequences::decode(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out) {
  batch_reqs_.resize(n);
  batch_last_.resize(n);
  decode_cells_.resize(n);
  size_t pages = 0;  // page size 1: a slot per request, allocated by allocate()
  if (!gather_decode(ids, n, &pages)) return decode_error(ids, n);
  KVPOOL_RETURN_IF_ERROR(allocate(batch_reqs_, n, false, out));
  return place_decoded(batch_reqs_, tokens, out);
}

Status SwaSequences::release(Request* r, bool insert, size_t committed) {
  size_t own_from = r->cached;
  if (insert && scache_ != nullptr && committed > r->cached) {
    size_t prefix = 0;
    // The tree frees the request's duplicates itself: afterwards the request owns none of [cached, committed).
    KVPOOL_RETURN_IF_ERROR(scache_->insert(r->tokens.data(), committed, r->slots.data(), r->extra_key, r->cached,
                                           std::min(committed, std::max(r->cached, r->window_from)), &prefix, nullptr));
    own_from = committed;
  }
  KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, own_from, r->slots.size()));
  if (r->row >= 0) KVPOOL_RETURN_IF_ERROR(table_->free(&r->row, 1));
  r->row = -1;
  r->window_from = 0;
  return unlock(r);
}

void SwaSequences::accounting(size_t* available, size_t* evictable, size_t* protected_len, size_t* uncached,
                              size_t* capacity) const {
  *available = swa_->full().available();
  *evictable = scache_ != nullptr ? scache_->tree().full_evictable_size() : 0;
  *protected_len = scache_ != nullptr ? scache_->tree().full_protected_size() : 0;
  *uncached = uncached_tokens();
  *capacity = static_cast<size_t>(swa_->full().num_ids());
}

size_t SwaSequences::check(std::string* report, size_t max_lines) const {
  size_t problems = check_requests(report, max_lines, scache_ != nullptr);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  const auto& mapping = swa_->mapping();
  for (const auto& [id, r] : requests_) {
    const std::string who = "request " + std::to_string(id) + ": ";
    if (r.window_from > r.slots.size()) {
      complain(who + "window frontier " + std::to_string(r.window_from) + " is past its computed tokens");
      continue;
    }
    for (size_t i = r.cached; i < r.slots.size(); ++i) {
      const int64_t s = r.slots[i];
      if (s < 1 || s > swa_->full().num_ids()) continue;  // reported above
      const int64_t w = mapping[static_cast<size_t>(s)];
      if (i < r.window_from && w != 0) complain(who + "slot " + std::to_string(s) + " slid out of the window but still maps to window slot " + std::to_string(w));
      if (i >= r.window_from && (w <= 0 || !swa_->swa().owned(w))) complain(who + "slot " + std::to_string(s) + " in the window has no held window slot");
    }
  }
  return problems;
}

size_t SwaSequences::check_attribution(std::string* report, size_t max_lines) const {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  const auto& full = swa_->full();
  const auto& mapping = swa_->mapping();
  std::vector<uint8_t> owner(static_cast<size_t>(full.num_ids()) + 1, 0);
  for (const auto& [id, r] : requests_) {
    for (size_t i = r.cached; i < r.slots.size(); ++i) {
      if (r.slots[i] >= 1 && r.slots[i] <= full.num_ids()) owner[static_cast<size_t>(r.slots[i])] = 1;
    }
  }
  std::vector<uint8_t> window_users(static_cast<size_t>(swa_->swa().num_ids()) + 1, 0);
  for (int64_t s = 1; s <= full.num_ids(); ++s) {
    const bool attributed = owner[static_cast<size_t>(s)] != 0 || tree_owns(s);
    if (full.owned(s) && !attributed) complain("slot " + std::to_string(s) + " leaked: held, but owned by no request and no tree node");
    const int64_t w = mapping[static_cast<size_t>(s)];
    if (w <= 0) continue;
    if (!full.owned(s)) complain("free slot " + std::to_string(s) + " still maps to window slot " + std::to_string(w));
    if (w <= swa_->swa().num_ids() && window_users[static_cast<size_t>(w)]++ > 0) {
      complain("window slot " + std::to_string(w) + " is mapped from two slots");
    }
  }
  for (int64_t w = 1; w <= swa_->swa().num_ids(); ++w) {
    if (swa_->swa().owned(w) && window_users[static_cast<size_t>(w)] == 0) {
      complain("window slot " + std::to_string(w) + " leaked: held, but mapped from no slot");
    }
  }
  return problems;
}

}  // namespace kvp::seq
