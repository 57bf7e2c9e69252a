#include "seq/sequences.hpp"

#include <algorithm>
#include <map>

namespace kvp::seq {
namespace {

size_t pages_for(size_t tokens, size_t page) { return (tokens + page - 1) / page; }

std::string who(uint64_t id) { return "request " + std::to_string(id) + ": "; }

}  // namespace

Sequences::Sequences(alloc::PagedAllocator* allocator, req::RequestTable* table, cache::PrefixCache* cache)
    : page_(allocator != nullptr ? static_cast<size_t>(allocator->page_size()) : 1),
      allocator_(allocator), table_(table), cache_(cache) {
  // Requests free their slots after other changes (a row detached, a tree insert):
  // size the allocator's free scratch once, so that those frees never allocate.
  if (allocator_ != nullptr) allocator_->reserve_scratch();
  if (cache_ != nullptr && table_ != nullptr) match_scratch_.reset(new int64_t[static_cast<size_t>(table_->max_context_len())]);
  if (table_ != nullptr) writes_ = req::make_host_table_writes(table_);  // pool_build sets the CUDA one
  const size_t spares =
      table_ != nullptr ? std::min(kMaxSpareBuffers, static_cast<size_t>(table_->rows())) : size_t{8};
  spare_tokens_.reserve(spares);
  spare_slots_.reserve(spares);
}

void Sequences::recycle(Request* r) {
  if (spare_tokens_.size() < spare_tokens_.capacity() && r->tokens.capacity() > 0) {
    r->tokens.clear();
    spare_tokens_.push_back(std::move(r->tokens));  // within capacity: no allocation
  }
  if (spare_slots_.size() < spare_slots_.capacity() && r->slots.capacity() > 0) {
    r->slots.clear();
    spare_slots_.push_back(std::move(r->slots));
  }
}

const Request* Sequences::find(uint64_t id) const { return index_.find(id); }

Status Sequences::lookup(uint64_t id, Request** out) {
  Request* r = index_.find(id);
  if (r == nullptr) return Status::invalid("request " + std::to_string(id) + " does not exist (finished, aborted or never begun)");
  *out = r;
  return Status::ok();
}

void Sequences::forget(uint64_t id) {
  index_.erase(id);
  requests_.erase(id);
}

Status Sequences::check_batch(const uint64_t* ids, size_t n, std::vector<Request*>* reqs) {
  reqs->resize(n);
  // Repeats: each request is stamped with this call's number as it is looked up (O(n),
  // no sort); a request already carrying it appears twice.
  const uint64_t stamp = ++batch_stamp_;
  bool repeated = false;
  for (size_t i = 0; i < n; ++i) {
    Request*& r = (*reqs)[i];
    r = index_.find(ids[i]);
    if (r == nullptr) return lookup(ids[i], &r);  // its message (no Status per found request)
    repeated = repeated || r->batch_stamp == stamp;
    r->batch_stamp = stamp;
  }
  if (!repeated) return Status::ok();
  // Error path (nothing changed): the smallest repeated id, as the message always named.
  std::vector<uint64_t> sorted(ids, ids + n);
  std::sort(sorted.begin(), sorted.end());
  const uint64_t repeat = *std::adjacent_find(sorted.begin(), sorted.end());
  return Status::invalid("request " + std::to_string(repeat) + " appears twice in the batch");
}

Status Sequences::match_and_lock(Request* r) {
  r->cached = r->prefix_hit = r->host_hit = r->storage_hit = 0;
  r->slots.clear();
  if (cache_ == nullptr) return Status::ok();
  // Host tier: load host-only prefixes back, except when retracting (under memory pressure,
  // and after the release: the re-match must not allocate; the host part is recomputed).
  if (cache_->host_tier() && !retracting_) return match_tiered(r);
  // At least one token must be computed to produce logits. Room first (a split's
  // buffers, the lock, the slots), so that the match changes nothing if it fails.
  cache_->tree().reserve_match(r->tokens.size());
  r->slots.reserve(r->tokens.size());
  cache::NodeHandle node = 0;
  const size_t matched =
      cache_->tree().match_into(r->tokens.data(), r->tokens.size() - 1, r->extra_key, match_scratch_.get(), &node);
  KVPOOL_RETURN_IF_ERROR(cache_->tree().lock(node));  // a node just matched is live
  r->node = node;
  r->slots.assign(match_scratch_.get(), match_scratch_.get() + matched);
  r->cached = r->prefix_hit = r->slots.size();
  return Status::ok();
}

Status Sequences::match_tiered(Request* r) {
  // The device part of the match, then the host-only part after it brought back (SGLang's
  // init_load_back), its slots the tree's like the device part's. The device part stays
  // locked while the load makes room, so that its eviction cannot take it.
  // Room first (a split, the locks, the slots), so that nothing allocates after a change.
  cache_->tree().reserve_match(r->tokens.size());
  cache_->tree().reserve_unlocks(4);
  r->slots.reserve(r->tokens.size());
  cache::MatchResult m = cache_->tree().match(r->tokens.data(), r->tokens.size() - 1, r->extra_key);
  cache::NodeHandle node = m.last_node;
  KVPOOL_RETURN_IF_ERROR(cache_->tree().lock(node));  // a node just matched is live
  r->slots.assign(m.slots.begin(), m.slots.end());     // reserved
  if (m.host_tokens > 0) {
    size_t loaded = 0;
    cache::NodeHandle last = node;
    Status st;
    try {  // load_back allocates before it changes anything; the lock must not outlive a throw
      st = cache_->load_back(m.last_host_node, &r->slots, &loaded, &last);
    } catch (...) {
      (void)cache_->tree().unlock(node);
      throw;
    }
    if (loaded > 0) {  // the request locks the loaded chain's end instead (its path includes node)
      KVPOOL_RETURN_IF_ERROR(cache_->tree().lock(last));
      KVPOOL_RETURN_IF_ERROR(cache_->tree().unlock(node));
      node = last;
      r->host_hit = loaded;
      r->storage_hit = cache_->last_load_storage_tokens();
    }
    if (!st.is_ok()) {
      (void)cache_->tree().unlock(node);
      r->slots.clear();
      r->host_hit = r->storage_hit = 0;
      return st;
    }
  }
  r->node = node;
  r->cached = r->prefix_hit = r->slots.size();
  return Status::ok();
}

void Sequences::reserve_rematch(Request* r) {
  if (cache_ != nullptr) cache_->tree().reserve_match(r->tokens.size());  // a split, the lock
  r->slots.reserve(r->tokens.size());
}

Status Sequences::unlock(Request* r) {
  if (cache_ == nullptr) return Status::ok();
  return cache_->tree().unlock(r->node);
}

Status Sequences::on_new_row(Request*) { return Status::ok(); }

Status Sequences::before_chunks(const std::vector<Request*>&) { return Status::ok(); }

void Sequences::undo_allocation(const int64_t*, size_t) { allocator_->undo_last_allocation(); }

Status Sequences::after_chunk(Request* r) { return cache_ != nullptr ? cache_computed_pages(r) : Status::ok(); }

bool Sequences::tree_owns(int64_t slot) const {
  return cache_ != nullptr && cache_->tree_owns_page(slot / static_cast<int64_t>(page_));
}

bool Sequences::slot_held(int64_t slot) const { return allocator_->pages().owned(slot / static_cast<int64_t>(page_)); }

bool Sequences::holds_state(int32_t) const { return false; }

Status Sequences::free_slots(const std::vector<int64_t>& slots, size_t from, size_t to) {
  if (to <= from) return Status::ok();
  return allocator_->free(slots.data() + from, to - from);
}

Status Sequences::make_room(size_t tokens, size_t estimate, bool evict) {
  const size_t available = allocator_->available_tokens();
  // SGLang evicts its whole over-estimate as soon as the free slots fall below it
  // (spec §1.14), even when the allocation itself would fit.
  const size_t wanted = evict_rule_ == EvictRule::kSglang ? std::max(tokens, estimate) : tokens;
  if (wanted <= available) return Status::ok();
  // Inside an open free group evicted slots become free only at the group's end: they cannot make room now.
  const size_t evictable = allocator_->pages().in_group() ? 0 : tree_evictable();
  if (tokens > available && evictable < tokens - available) {
    return Status::out_of_memory("need " + std::to_string(tokens) + " slots, " + std::to_string(available) +
                                 " free and " + std::to_string(evictable) + " evictable");
  }
  if (!evict || evictable == 0) return Status::ok();
  return tree_evict(evict_rule_ == EvictRule::kSglang ? wanted : tokens - available);
}

size_t Sequences::tree_evictable() const { return cache_ != nullptr ? cache_->tree().evictable_size() : 0; }

Status Sequences::tree_evict(size_t tokens) {
  size_t evicted = 0;
  return cache_->evict(tokens, &evicted);
}

Status Sequences::begin(const int32_t* tokens, size_t n, const std::string& extra_key, uint64_t* id, size_t* cached) {
  if (n == 0) return Status::invalid("a request needs at least one token");
  if (n > static_cast<size_t>(table_->max_context_len())) {
    return Status::invalid(std::to_string(n) + " tokens exceed max_context_len " + std::to_string(table_->max_context_len()));
  }
  // The request's map and index entries are made first, so that nothing can fail once
  // its prefix is locked (and, hybrid_linear, its state slot taken); they are erased
  // again if the match fails or throws.
  index_.reserve(requests_.size() + 1);
  auto entry = requests_.try_emplace(next_id_).first;
  index_.insert(next_id_, &entry->second);
  struct EraseUnlessKept {
    Sequences* seqs;
    uint64_t id;
    bool keep = false;
    ~EraseUnlessKept() {
      if (!keep) seqs->forget(id);
    }
  } guard{this, next_id_};
  Request& r = entry->second;
  if (!spare_tokens_.empty()) {  // a finished request's buffers (moves: no allocation)
    r.tokens = std::move(spare_tokens_.back());
    spare_tokens_.pop_back();
  }
  if (!spare_slots_.empty()) {
    r.slots = std::move(spare_slots_.back());
    spare_slots_.pop_back();
  }
  // Room for the prompt and some decoded tokens (a quarter of the prompt, at least a page),
  // so that the first decode steps append without moving the buffers.
  const size_t room = std::min(static_cast<size_t>(table_->max_context_len()), n + std::max(n / 4, page_));
  r.tokens.reserve(room);
  if (cache_ != nullptr) r.slots.reserve(room);
  r.tokens.assign(tokens, tokens + n);
  r.extra_key = extra_key;
  KVPOOL_RETURN_IF_ERROR(match_and_lock(&r));
  guard.keep = true;
  *id = next_id_++;
  *cached = r.cached;
  return Status::ok();
}

Status Sequences::plan_extend(const std::vector<Request*>& reqs, const uint64_t* ids, const int64_t* chunks, size_t n,
                              size_t out_len, size_t* total, size_t* pages, size_t* rows) const {
  *total = *pages = *rows = 0;
  for (size_t i = 0; i < n; ++i) {
    const Request& r = *reqs[i];
    const size_t computed = r.slots.size(), left = r.tokens.size() - computed;
    if (chunks[i] < 1 || static_cast<size_t>(chunks[i]) > left) {
      return Status::invalid(who(ids[i]) + "chunk of " + std::to_string(chunks[i]) + " tokens, expected 1.." +
                             std::to_string(left) + " (tokens not computed yet)");
    }
    const size_t chunk = static_cast<size_t>(chunks[i]);
    *total += chunk;
    *pages += pages_for(computed + chunk, page_) - pages_for(computed, page_);
    *rows += r.row < 0 ? 1 : 0;
  }
  if (*total != out_len) {
    return Status::invalid("slots has length " + std::to_string(out_len) + ", the chunks add up to " + std::to_string(*total));
  }
  if (*rows > table_->available()) {
    return Status::out_of_memory("need " + std::to_string(*rows) + " request rows, " +
                                 std::to_string(table_->available()) + " available");
  }
  return Status::ok();
}

Status Sequences::assign_rows(const std::vector<Request*>& reqs, const int32_t* rows) {
  size_t next_row = 0;
  for (Request* r : reqs) {
    if (r->row >= 0) continue;
    r->row = rows[next_row++];  // its cached prefix is written (write_chunks)
    KVPOOL_RETURN_IF_ERROR(on_new_row(r));
  }
  return Status::ok();
}

Status Sequences::extend(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* out, size_t out_len) {
  std::vector<Request*>& reqs = batch_reqs_;
  KVPOOL_RETURN_IF_ERROR(check_batch(ids, n, &reqs));
  size_t total = 0, pages = 0, rows_needed = 0;
  KVPOOL_RETURN_IF_ERROR(plan_extend(reqs, ids, chunks, n, out_len, &total, &pages, &rows_needed));
  // Host memory first, while a failure still changes nothing: the allocator's inputs,
  // the row list, room for each request's new slots, and (after_chunk caches the
  // computed pages right after the allocation) what the tree's inserts need. The
  // vectors are members reused across calls (sized here, before any change).
  std::vector<int64_t>& pre = batch_pre_;
  std::vector<int64_t>& seq = batch_seq_;
  std::vector<int64_t>& last = batch_last_;
  std::vector<int32_t>& rows = batch_rows_;
  std::vector<size_t>& inserts = batch_inserts_;  // per request that caches pages: its new tokens in the tree at most
  pre.resize(n);
  seq.resize(n);
  last.resize(n);
  rows.resize(rows_needed);
  inserts.clear();
  inserts.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    Request& r = *reqs[i];
    pre[i] = static_cast<int64_t>(r.slots.size());
    seq[i] = pre[i] + chunks[i];
    reserve_more(&r.slots, static_cast<size_t>(chunks[i]));
    const size_t aligned = static_cast<size_t>(seq[i]) - static_cast<size_t>(seq[i]) % page_;
    if (cache_ != nullptr && aligned > r.cached) inserts.push_back(aligned - r.cached);
  }
  if (!inserts.empty()) {
    cache_->tree().reserve_inserts(inserts.data(), inserts.size());
    size_t cacheable = 0;
    for (size_t k : inserts) cacheable += k;
    if (writes_->deferred()) reserve_redirects(inserts.size(), cacheable);  // a host table stages none
  }
  // Check first, so that out of memory changes nothing; before_chunks never lowers
  // free + evictable, so the eviction after it still succeeds.
  const size_t estimate = sglang_estimate(total, n);
  KVPOOL_RETURN_IF_ERROR(make_room(pages * page_, estimate, false));
  KVPOOL_RETURN_IF_ERROR(before_chunks(reqs));
  KVPOOL_RETURN_IF_ERROR(make_room(pages * page_, estimate, true));
  for (size_t i = 0; i < n; ++i) last[i] = reqs[i]->slots.empty() ? -1 : reqs[i]->slots.back();
  KVPOOL_RETURN_IF_ERROR(allocator_->extend({pre.data(), seq.data(), last.data(), n}, out, out_len));
  return place_chunks(reqs, chunks, rows.data(), rows_needed, out);
}

Status Sequences::place_chunks(const std::vector<Request*>& reqs, const int64_t* chunks, int32_t* rows,
                               size_t rows_needed, const int64_t* out) {
  // The request table is device memory on a CUDA pool, so its writes can fail: they all
  // run before the requests change for good, and a failure gives the rows and the slots
  // back exactly as they were taken (the call then changed nothing). A host table's writes
  // cannot fail once checked: they are checked here (check_chunks) and made per request
  // after its caching, from its final slots (write_late_: no redirect writes).
  write_late_ = !writes_->deferred();
  Status st = table_->alloc(rows, rows_needed);
  if (st.is_ok()) {
    st = write_late_ ? check_chunks(reqs, chunks, rows, out) : write_chunks(reqs, chunks, rows, out);
    if (!st.is_ok()) table_->undo_alloc(rows_needed);
  }
  if (!st.is_ok()) {
    write_late_ = false;
    size_t total = 0;
    for (size_t i = 0; i < reqs.size(); ++i) total += static_cast<size_t>(chunks[i]);
    undo_allocation(out, total);
    return st;
  }
  if (!write_late_) {  // the new slots join each request (room reserved by the caller)
    size_t o = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const size_t chunk = static_cast<size_t>(chunks[i]);
      reqs[i]->slots.insert(reqs[i]->slots.end(), out + o, out + o + chunk);
      o += chunk;
    }
  }
  // Caching the batch's pages may point rows at slots another request cached first: those
  // writes are staged and applied together after the loop (one batch, not one per request),
  // unless the rows are written late (then each row gets the tree's slots directly, and
  // each request's new slots join it right before its caching, while in cache).
  stage_redirects_ = true;
  Status cached = assign_rows(reqs, rows), written = Status::ok();
  size_t next_row = 0, i = 0, o = 0;
  for (; i < reqs.size() && cached.is_ok(); ++i) {
    Request& r = *reqs[i];
    const size_t chunk = static_cast<size_t>(chunks[i]);
    if (write_late_) append_chunk(&r, out + o, chunk);
    o += chunk;
    const size_t pre = r.slots.size() - chunk;
    // The row's columns this call changes: a new row whole, else the new slots and the
    // redirected duplicates, which start at the cached length.
    const size_t from = takes_new_row(r, rows, rows_needed, &next_row) ? 0 : std::min(pre, r.cached);
    chunk_from_ = pre;
    cached = after_chunk(&r);
    chunk_values_ = nullptr;
    walked_ = SIZE_MAX;
    // Checked slots only: check_chunks checked the new ones, the rest are the tree's.
    if (write_late_ && written.is_ok()) written = writes_->add_valid(r.row, from, r.slots.data() + from, r.slots.size() - from);
  }
  // A failed caching (or row assignment) stopped the loop: the rest of the batch gets its
  // rows written as write_chunks would have (the cached prefix of a new row, the new
  // slots), and its requests are left without the new slots, as before this call.
  for (; i < reqs.size(); ++i) {
    Request& r = *reqs[i];
    const size_t chunk = static_cast<size_t>(chunks[i]);
    if (write_late_) r.slots.insert(r.slots.end(), out + o, out + o + chunk);  // room reserved by the caller
    o += chunk;
    const size_t pre = r.slots.size() - chunk;
    const bool new_row = takes_new_row(r, rows, rows_needed, &next_row);
    const size_t from = new_row ? 0 : pre;
    const int32_t row = new_row ? rows[next_row - 1] : r.row;
    if (write_late_ && written.is_ok()) written = writes_->add_valid(row, from, r.slots.data() + from, r.slots.size() - from);
    r.slots.resize(pre);
  }
  stage_redirects_ = false;
  chunk_from_ = SIZE_MAX;
  const Status flushed = flush_redirects();
  write_late_ = false;
  if (!cached.is_ok()) return cached;
  return written.is_ok() ? flushed : written;
}

void Sequences::append_chunk(Request* r, const int64_t* fresh, size_t n) {
  // When the request's uncached part is this chunk alone, its pages about to be cached may
  // duplicate pages another request cached first (in this batch, or since its match): the
  // walk the insert needs anyway appends the tree's slots for them here, so that they are
  // written once; the duplicates themselves stay in `fresh`, where stage_redirect frees them.
  const size_t pre = r->slots.size(), end = pre + n, aligned = end - end % page_;
  walked_ = SIZE_MAX;  // also after an earlier call that threw between its walk and its insert
  chunk_values_ = nullptr;
  if (cache_ != nullptr && r->cached == pre && aligned > pre) {
    walked_ = cache_->tree().walk_prefix(r->tokens.data(), aligned, r->extra_key, &walked_device_, &r->slots);
    chunk_values_ = fresh;
  }
  const size_t have = r->slots.size() - pre;  // the duplicates' replacements (at most the chunk)
  r->slots.insert(r->slots.end(), fresh + have, fresh + n);  // room reserved by extend()
}

void Sequences::restore_chunk(Request* r) const {
  if (chunk_values_ == nullptr || walked_device_ <= r->cached) return;
  std::copy(chunk_values_, chunk_values_ + (walked_device_ - r->cached), r->slots.begin() + static_cast<std::ptrdiff_t>(r->cached));
}

bool Sequences::takes_new_row(const Request& r, const int32_t* rows, size_t rows_needed, size_t* next_row) {
  // assign_rows hands the new rows out in request order; a request it did not reach yet
  // still has none. A fresh row is no other request's.
  const bool fresh = *next_row < rows_needed && (r.row < 0 || r.row == rows[*next_row]);
  *next_row += fresh ? 1 : 0;
  return fresh;
}

Status Sequences::check_chunks(const std::vector<Request*>& reqs, const int64_t* chunks, const int32_t* rows,
                               const int64_t* out) const {
  // write_chunks' writes checked in its order (the same first message), none made: the
  // new slots of each request, then the cached prefixes of new rows.
  size_t next_row = 0, o = 0;
  Status st = Status::ok();
  for (size_t i = 0; i < reqs.size() && st.is_ok(); ++i) {
    const Request& r = *reqs[i];
    const int32_t row = r.row >= 0 ? r.row : rows[next_row++];
    const size_t chunk = static_cast<size_t>(chunks[i]);
    st = check_held_write(row, r.slots.size(), out + o, chunk);
    o += chunk;
  }
  next_row = 0;
  for (size_t k = 0; k < reqs.size() && st.is_ok(); ++k) {
    const Request& r = *reqs[k];
    if (r.row < 0) st = check_held_write(rows[next_row++], 0, r.slots.data(), r.slots.size());
  }
  if (st.is_ok()) st = writes_->flush(stream_, out, device_out_, o);  // nothing staged: the *_async output copy
  return st;
}

Status Sequences::check_held_write(int32_t row, size_t start, const int64_t* slots, size_t n) const {
  // Every slot the allocator hands out lies below its slot_limit(): when the table accepts
  // all of those, only the row and columns can be wrong (the range pass over the slots,
  // a read of every new slot, would find nothing).
  if (allocator_ != nullptr && allocator_->slot_limit() <= table_->slot_limit()) return table_->check_columns(row, start, n);
  return table_->check_write(row, start, slots, n);
}

void Sequences::reserve_redirects(size_t requests, size_t slots) {
  reserve_more(&redirects_, requests);
  reserve_more(&duplicates_, slots);
}

void Sequences::stage_redirect(Request* r, size_t n) {
  const size_t from = r->cached;
  int64_t* own = r->slots.data() + from;
  if (write_late_) {
    // The duplicates are in `out` when append_chunk() left them out of the request.
    const int64_t* duplicates = chunk_values_ != nullptr ? chunk_values_ : own;
    // The row is written after this caching (place_chunks): it never names the duplicates,
    // so they are freed now, straight from where they are (the allocator sees the same frees
    // in the same order as from flush_redirects: nothing else frees or allocates in between).
    // Duplicates past the chunk's start are whole pages this call's allocation just took
    // (cached is page-aligned, and the allocator hands out new pages whole from there): one
    // slot read per page.
    const Status f =
        from >= chunk_from_ ? allocator_->free_whole_pages(duplicates, n) : allocator_->free(duplicates, n);
    if (late_frees_.is_ok() && !f.is_ok()) late_frees_ = f;
    return;
  }
  // The duplicates move out (freed by flush_redirects); the staged write then reads the
  // tree's slots from the request (no copy of its own), whose slots nothing else touches
  // before the flush (each request appears once in a batch, and extend() reserved its
  // room: no reallocation). Room for the appends was reserved by extend().
  redirects_.push_back(Redirect{r->row, from, n, duplicates_.size(), own});
  duplicates_.insert(duplicates_.end(), own, own + n);
}

Status Sequences::flush_redirects() {
  if (write_late_) {  // nothing staged: stage_redirect freed the duplicates
    Status st = late_frees_;
    late_frees_ = Status::ok();
    return st;
  }
  if (redirects_.empty()) return Status::ok();
  Status st = writes_->reserve(redirects_.size(), duplicates_.size());
  for (size_t i = 0; i < redirects_.size() && st.is_ok(); ++i) {
    const Redirect& d = redirects_[i];
    st = writes_->add(d.row, d.start, d.values, d.count);
  }
  if (st.is_ok()) {
    st = writes_->flush(stream_, nullptr, nullptr, 0);
  } else {
    writes_->discard();
  }
  // The duplicates are freed only once their row no longer names them. If the batch
  // failed, each row is written on its own; a row that still cannot be written keeps its
  // duplicates allocated (reported: they stay out of the free list rather than be reused).
  Status result = Status::ok();
  for (const Redirect& d : redirects_) {
    if (!st.is_ok()) {
      const Status w = table_->write(d.row, d.start, d.values, d.count);
      if (!w.is_ok()) {
        if (result.is_ok()) {
          result = Status(w.code(), w.message() + " (while pointing request row " + std::to_string(d.row) +
                                        " at cached pages: its " + std::to_string(d.count) +
                                        " duplicate slots stay allocated)");
        }
        continue;
      }
    }
    const Status f = allocator_->free(duplicates_.data() + d.offset, d.count);
    if (result.is_ok() && !f.is_ok()) result = f;
  }
  redirects_.clear();
  duplicates_.clear();
  return result;
}

Status Sequences::write_chunks(const std::vector<Request*>& reqs, const int64_t* chunks, const int32_t* rows,
                               const int64_t* out) const {
  // One batch: the new slots of every request first (request order, so that the staged
  // values begin with `out`), then the cached prefixes of new rows.
  size_t runs = reqs.size(), values = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    values += static_cast<size_t>(chunks[i]);
    if (reqs[i]->row < 0) {
      ++runs;
      values += reqs[i]->slots.size();
    }
  }
  Status st = writes_->reserve(runs, values);
  size_t next_row = 0, o = 0;
  for (size_t i = 0; i < reqs.size() && st.is_ok(); ++i) {
    const Request& r = *reqs[i];
    const int32_t row = r.row >= 0 ? r.row : rows[next_row++];
    const size_t chunk = static_cast<size_t>(chunks[i]);
    st = writes_->add(row, r.slots.size(), out + o, chunk);
    o += chunk;
  }
  next_row = 0;
  for (size_t i = 0; i < reqs.size() && st.is_ok(); ++i) {
    const Request& r = *reqs[i];
    if (r.row < 0) st = writes_->add(rows[next_row++], 0, r.slots.data(), r.slots.size());
  }
  if (!st.is_ok()) {
    writes_->discard();
    return st;
  }
  return writes_->flush(stream_, out, device_out_, o);
}

Status Sequences::cache_computed_pages(Request* r) {
  const size_t aligned = r->slots.size() - r->slots.size() % page_;
  if (aligned <= r->cached) return Status::ok();
  // If another request cached [cached, held) meanwhile, this request's slots there are
  // duplicates: point its table row at the tree's slots first, the one step that can fail
  // (a copy to the device on a CUDA pool), while nothing has changed yet. Inside an extend
  // batch that write is staged after the insert instead (see below), so the walk that
  // finds the tree's slots beforehand is needed only here.
  if (!stage_redirects_) {
    const size_t held =
        cache_->tree().cached_prefix(r->tokens.data(), aligned, r->extra_key, match_scratch_.get());
    if (held > r->cached) {
      const Status st = table_->write(r->row, r->cached, match_scratch_.get() + r->cached, held - r->cached);
      if (!st.is_ok()) {
        return Status(st.code(), st.message() + " (while caching request row " + std::to_string(r->row) +
                                     "'s computed pages: its new slots are kept, uncached)");
      }
    }
  }
  size_t prefix = 0;
  // Host tier: the insert of a prompt not fully computed yet (chunked prefill) counts no
  // write hits, as SGLang's chunked inserts (write_through_selective copies on the 2nd hit).
  cache_->tree().set_count_hits(r->slots.size() >= r->tokens.size());
  Status inserted;
  try {
    // Inside place_chunks, slots from chunk_from_ on are pages this call's allocation just
    // filled in order (SIZE_MAX elsewhere: every slot is checked).
    // append_chunk() may have walked the key already (walked_).
    inserted = walked_ != SIZE_MAX ? cache_->insert_walked(r->tokens.data(), aligned, r->slots.data(), r->extra_key, 0,
                                                           &prefix, nullptr, chunk_from_, walked_, walked_device_)
                                   : cache_->insert(r->tokens.data(), aligned, r->slots.data(), r->extra_key, 0,
                                                    &prefix, nullptr, chunk_from_);
  } catch (...) {
    cache_->tree().set_count_hits(true);
    restore_chunk(r);
    throw;
  }
  cache_->tree().set_count_hits(true);
  if (!inserted.is_ok()) {
    restore_chunk(r);
    return inserted;
  }
  // Another request cached [cached, prefix) first (prefix == what was cached before the
  // insert: the insert added only [prefix, aligned)): ours are duplicates. They leave the
  // request first: freed now, or, inside an extend batch, staged (stage_redirect: the row is
  // pointed at the tree's slots later, with the other rows, and they are freed then, or, with
  // write_late_, freed now).
  if (!stage_redirects_) {
    KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, r->cached, prefix));
  } else if (prefix > r->cached) {
    stage_redirect(r, prefix - r->cached);
  }
  // The match of the key just inserted (SGLang matches again after caching), along the path
  // the insert walked; nothing here allocates (the tree was prepared). It writes the tree's
  // slots for [cached, prefix) straight over the duplicates: [0, cached) and [prefix, aligned)
  // are the request's own slots already (the tree just took the latter as they are).
  // With chunk_values_, append_chunk() appended the tree's slots of the duplicates already.
  if (chunk_values_ != nullptr && prefix != walked_device_) {
    return Status::internal("the prefix tree's device prefix changed between its walk and the insert (" +
                            std::to_string(walked_device_) + " then " + std::to_string(prefix) + " tokens)");
  }
  cache::NodeHandle last_node = 0;
  const size_t copy_to = chunk_values_ != nullptr ? r->cached : prefix;
  const size_t matched = cache_->tree().match_inserted(r->slots.data(), &last_node, r->cached, copy_to);
  if (matched != aligned) {
    return Status::internal("the prefix tree lost pages just inserted (" + std::to_string(matched) + " of " +
                            std::to_string(aligned) + " tokens match)");
  }
  KVPOOL_RETURN_IF_ERROR(cache_->tree().lock(last_node));
  KVPOOL_RETURN_IF_ERROR(unlock(r));
  r->node = last_node;
  r->cached = aligned;
  return Status::ok();
}

Status Sequences::decode(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out) {
  Status one_pass;
  if (decode_in_one_pass(ids, tokens, n, out, &one_pass)) return one_pass;
  batch_reqs_.resize(n);
  batch_last_.resize(n);
  decode_cells_.resize(n);
  size_t pages = 0;
  if (!gather_decode(ids, n, &pages)) return decode_error(ids, n);
  KVPOOL_RETURN_IF_ERROR(make_room(pages * page_, n * page_, true));  // SGLang: a page per request
  KVPOOL_RETURN_IF_ERROR(allocator_->decode_next(batch_last_.data(), n, pages, out));
  return place_decoded(batch_reqs_, tokens, out);
}

[[gnu::noinline, gnu::cold]] void reserve_next_token(Request* r) {
  reserve_more(&r->tokens, 1);
  reserve_more(&r->slots, 1);
}

bool Sequences::gather_decode(const uint64_t* ids, size_t n, size_t* new_pages) {
  // Repeats: as in check_batch, each request is stamped with this call's number.
  const uint64_t stamp = ++batch_stamp_;
  const size_t context = static_cast<size_t>(table_->max_context_len());
  Request** reqs = batch_reqs_.data();
  int64_t* next = batch_last_.data();
  req::TableCell* cells = decode_cells_.data();
  const IdIndex::Reader index(index_);
  // Page sizes are powers of two (config_parse.cpp checks): a token at position len starts
  // a page when len & (page - 1) is 0 (a division would cost more than the rest of the checks).
  const size_t in_page = page_ - 1;
  size_t pages = 0;
  for (size_t i = 0; i < n; ++i) {
    Request* r = index.find(ids[i]);
    if (r == nullptr) return false;
    const size_t len = r->tokens.size();
    // All of decode's checks in one test (any failure is rare): a repeat, no row, tokens
    // not computed yet, a full row.
    if ((r->batch_stamp == stamp) | (r->row < 0) | (r->slots.size() != len) | (len >= context)) return false;
    r->batch_stamp = stamp;
    reqs[i] = r;
    cells[i] = req::TableCell{r->row, static_cast<int32_t>(len)};  // len < max_context_len
    const bool fresh_page = (len & in_page) == 0;
    next[i] = fresh_page ? -1 : r->slots.back() + 1;  // len 0 starts a page: back() never reads an empty vector
    pages += fresh_page ? 1 : 0;
    // The appends after the allocation cannot throw (growing changes no state).
    if (r->tokens.capacity() == len || r->slots.capacity() == len) reserve_next_token(r);
  }
  *new_pages = pages;
  return true;
}

Status Sequences::decode_error(const uint64_t* ids, size_t n) {
  KVPOOL_RETURN_IF_ERROR(check_batch(ids, n, &batch_reqs_));
  for (size_t i = 0; i < n; ++i) {
    const Request& r = *batch_reqs_[i];
    const size_t len = r.tokens.size();
    if (r.row < 0 || r.slots.size() != len) {
      return Status::invalid(who(ids[i]) + "has " + std::to_string(len - r.slots.size()) +
                             " tokens not computed yet; extend it before decoding");
    }
    if (len + 1 > static_cast<size_t>(table_->max_context_len())) {
      return Status::invalid(who(ids[i]) + "would exceed max_context_len " + std::to_string(table_->max_context_len()));
    }
  }
  return Status::internal("decode batch refused, yet it passes every check");
}

Status Sequences::place_decoded(const std::vector<Request*>& reqs, const int32_t* tokens, const int64_t* out) {
  const size_t n = reqs.size();
  // Table writes (device memory on a CUDA pool: one batch) before any request changes, as in
  // extend: one call for the batch (the cells were gathered by gather_decode).
  Status st = writes_->reserve_cells(n);
  if (st.is_ok()) st = writes_->add_cells(decode_cells_.data(), out, n);
  if (st.is_ok()) {
    st = writes_->flush(stream_, out, device_out_, n);
  } else {
    writes_->discard();
  }
  if (!st.is_ok()) {
    undo_allocation(out, n);
    return st;
  }
  // Room reserved by gather_decode: no allocation. The request pointer is read once (a
  // push_back's stores could otherwise make the compiler read it again for the second).
  Request* const* batch = reqs.data();
  for (size_t i = 0; i < n; ++i) {
    Request* r = batch[i];
    r->tokens.push_back(tokens[i]);
    r->slots.push_back(out[i]);
  }
  return Status::ok();
}

namespace {

// Sets a Sequences member for one call and restores it on every return path.
template <class T>
struct ScopedValue {
  T* slot;
  T saved;
  ScopedValue(T* s, T value) : slot(s), saved(*s) { *s = value; }
  ~ScopedValue() { *slot = saved; }
};

}  // namespace

Status Sequences::extend_async(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* device_out,
                               size_t out_len, void* stream) {
  host_out_.resize(out_len);  // before anything changes (it may allocate)
  ScopedValue<void*> s(&stream_, stream);
  ScopedValue<int64_t*> o(&device_out_, device_out);
  return extend(ids, chunks, n, host_out_.data(), out_len);
}

Status Sequences::decode_async(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* device_out,
                               void* stream) {
  host_out_.resize(n);
  ScopedValue<void*> s(&stream_, stream);
  ScopedValue<int64_t*> o(&device_out_, device_out);
  return decode(ids, tokens, n, host_out_.data());
}

Status Sequences::release(Request* r, bool insert, size_t committed) {
  // The unlock at the end must not allocate once slots are freed (room for the
  // insert's new leaf and for the unlock).
  if (cache_ != nullptr) cache_->tree().reserve_unlocks(2);
  size_t own_from = r->cached;  // slots[cached, computed) are the request's
  if (insert && cache_ != nullptr) {
    const size_t aligned = committed - committed % page_;
    if (aligned > r->cached) {
      size_t prefix = 0;
      KVPOOL_RETURN_IF_ERROR(cache_->insert(r->tokens.data(), aligned, r->slots.data(), r->extra_key, 0, &prefix, nullptr));
      KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, r->cached, prefix));  // duplicates of cached tokens
      own_from = aligned;                                               // [prefix, aligned) went to the tree
    } else if (cache_->host_tier() && aligned > 0) {
      // Host tier: a finished request's insert is a hit on its path even when nothing is new
      // (SGLang's cache_finished_req inserts again): write_through_selective copies on it.
      size_t prefix = 0;
      KVPOOL_RETURN_IF_ERROR(cache_->insert(r->tokens.data(), aligned, r->slots.data(), r->extra_key, 0, &prefix, nullptr));
    }
  }
  KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, own_from, r->slots.size()));  // unaligned tail, uncommitted tokens
  if (r->row >= 0) KVPOOL_RETURN_IF_ERROR(table_->free(&r->row, 1));
  r->row = -1;
  return unlock(r);
}

Status Sequences::finish(uint64_t id, size_t committed) {
  Request* r = nullptr;
  KVPOOL_RETURN_IF_ERROR(lookup(id, &r));
  if (committed > r->slots.size()) {
    return Status::invalid(who(id) + "committed length " + std::to_string(committed) + " exceeds the " +
                           std::to_string(r->slots.size()) + " computed tokens");
  }
  KVPOOL_RETURN_IF_ERROR(release(r, true, committed));
  recycle(r);
  forget(id);
  return Status::ok();
}

Status Sequences::abort(uint64_t id) {
  Request* r = nullptr;
  KVPOOL_RETURN_IF_ERROR(lookup(id, &r));
  KVPOOL_RETURN_IF_ERROR(release(r, false, 0));
  recycle(r);
  forget(id);
  return Status::ok();
}

Status Sequences::retract(uint64_t id, size_t* cached) {
  Request* r = nullptr;
  KVPOOL_RETURN_IF_ERROR(lookup(id, &r));
  reserve_rematch(r);  // the match after the release must not allocate
  KVPOOL_RETURN_IF_ERROR(release(r, false, 0));
  ScopedValue<bool> no_load_back(&retracting_, true);
  KVPOOL_RETURN_IF_ERROR(match_and_lock(r));
  *cached = r->cached;
  return Status::ok();
}

size_t Sequences::uncached_tokens() const {
  size_t tokens = 0;
  for (const auto& [id, r] : requests_) tokens += pages_for(r.slots.size(), page_) * page_ - r.cached;
  return tokens;
}

void Sequences::accounting(size_t* available, size_t* evictable, size_t* protected_len, size_t* uncached,
                           size_t* capacity) const {
  *available = allocator_->available_tokens();
  *evictable = cache_ != nullptr ? cache_->tree().evictable_size() : 0;
  *protected_len = cache_ != nullptr ? cache_->tree().protected_size() : 0;
  *uncached = uncached_tokens();
  *capacity = static_cast<size_t>(allocator_->num_pages()) * page_;
}

void Sequences::mark_request_pages(std::vector<uint8_t>* pages) const {
  for (const auto& [id, r] : requests_) {
    for (size_t i = r.cached; i < r.slots.size(); ++i) (*pages)[static_cast<size_t>(r.slots[i] / static_cast<int64_t>(page_))] = 1;
  }
}

size_t Sequences::check_attribution(std::string* report, size_t max_lines) const {
  const auto& pages = allocator_->pages();
  std::vector<uint8_t> attributed(static_cast<size_t>(pages.num_ids()) + 1, 0);
  mark_request_pages(&attributed);
  size_t problems = 0;
  for (int64_t page = 1; page <= pages.num_ids(); ++page) {
    // The cheap tests first: most pages are free or a request's.
    if (pages.owned(page) && attributed[static_cast<size_t>(page)] == 0 && !tree_owns(page * static_cast<int64_t>(page_))) {
      if (problems++ < max_lines) {
        *report += pages.what() + " " + std::to_string(page) + " leaked: held, but owned by no request and no tree node\n";
      }
    }
  }
  return problems;
}

size_t Sequences::check(std::string* report, size_t max_lines) const { return check_requests(report, max_lines, cache_ != nullptr); }

size_t Sequences::check_requests(std::string* report, size_t max_lines, bool has_tree) const {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  const int64_t P = static_cast<int64_t>(page_);
  std::map<int64_t, uint64_t> page_owner;
  std::vector<int32_t> staging;  // the table's own staging buffer is not a reader's to use
  for (const auto& [id, r] : requests_) {
    if (r.cached > r.slots.size() || r.slots.size() > r.tokens.size() || r.cached % page_ != 0) {
      complain(who(id) + "inconsistent lengths");
      continue;
    }
    for (size_t i = 0; i < r.slots.size(); ++i) {
      const int64_t page = r.slots[i] / P;
      const bool tree_part = i < r.cached;
      if (has_tree && tree_part != tree_owns(r.slots[i])) {
        complain(who(id) + "slot " + std::to_string(r.slots[i]) + (tree_part ? " should belong to the tree" : " is owned by the tree and the request"));
      }
      if (!slot_held(r.slots[i])) complain(who(id) + "slot " + std::to_string(r.slots[i]) + " is free in the allocator");
      if (tree_part) continue;
      auto [it, inserted] = page_owner.emplace(page, id);
      if (!inserted && it->second != id) {
        complain("page " + std::to_string(page) + " is double-owned by requests " + std::to_string(it->second) + " and " + std::to_string(id));
      }
    }
    if (r.row >= 0) {
      std::vector<int64_t> row(r.slots.size());
      if (!table_->read(r.row, 0, row.data(), row.size(), &staging).is_ok() || row != r.slots) {
        complain(who(id) + "table row " + std::to_string(r.row) + " does not hold its slots");
      }
    }
  }
  return problems;
}

}  // namespace kvp::seq
