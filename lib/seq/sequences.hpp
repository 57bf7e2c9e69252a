// The request layer (kvseq_*): each request's tokens, row, slots and tree
// lock, and the transitions that move slot ownership between the allocator,
// the request and the prefix tree (SGLANG_SEMANTICS §1.14, §3.9, §3.10, §1.19).
//
// Ownership per request: slots[0, cached) belong to the tree (the request holds
// a lock on the node where they end); slots[cached, computed) belong to the
// request. Every transition frees or hands over exactly the request's part.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/paged_allocator.hpp"
#include "cache/prefix_cache.hpp"
#include "req/request_table.hpp"
#include "req/table_cell.hpp"
#include "req/table_writes.hpp"
#include "seq/id_index.hpp"
#include "util/status.hpp"

namespace kvp::seq {

// Room for `more` elements, growing geometrically as push_back would: reserved
// before a pool changes, so that recording the change afterwards cannot throw.
template <class T>
void reserve_more(std::vector<T>* v, size_t more) {
  if (v->capacity() - v->size() < more) v->reserve(std::max(v->size() + more, 2 * v->capacity()));
}

struct Request {
  // The fields a decode step reads and writes come first, next to each other (fewer
  // cache lines per request in a large batch).
  std::vector<int32_t> tokens;
  std::vector<int64_t> slots;  // one per computed token; mirrors the table row
  int32_t row = -1;
  uint64_t batch_stamp = 0;    // the last batch call that named it (check_batch's repeat test)
  std::string extra_key;
  size_t cached = 0;           // leading tokens owned by the tree (page-aligned)
  size_t prefix_hit = 0;
  size_t host_hit = 0;         // of prefix_hit, tokens loaded back from the host tier
  size_t storage_hit = 0;      // of host_hit, tokens a storage prefetch brought
  cache::NodeHandle node = 0;  // locked node (meaningful with a tree)
  int32_t state = -1;          // hybrid_linear: the request's own mamba state slot
  int64_t swa_uuid = 0;        // swa: bound of the window lock on `node`
  size_t window_from = 0;      // swa: slots[cached, window_from) have no window slot any more
};

// Room for one more token and slot in r's buffers, out of line: a decode step appends
// within capacity almost always (begin reserves ahead, and the buffers grow geometrically).
void reserve_next_token(Request* r);

// The requests of a pool whose KV is fully described by its token slots (mha,
// mla, nsa, double_sparse), and the base of the variants with a second
// resource (MambaSequences, SwaSequences), which override the hooks.
// How much kvseq_extend / kvseq_decode evict from the prefix tree when free slots are short.
enum class EvictRule {
  kShortfall,  // exactly what is missing (the default)
  kSglang,     // SGLang's scheduler: when free < its estimate, evict the whole estimate
};

class Sequences {
 public:
  // `cache` may be NULL (prefix cache kind "chunk" or "none").
  Sequences(alloc::PagedAllocator* allocator, req::RequestTable* table, cache::PrefixCache* cache);
  // How much kvseq evicts when an allocation is short (prefix_cache.evict_rule).
  void set_evict_rule(EvictRule rule) { evict_rule_ = rule; }
  // How the request-table writes of a call are applied (req/table_writes.hpp); set once at creation.
  void set_table_writes(std::unique_ptr<req::TableWrites> writes) { writes_ = std::move(writes); }
  virtual ~Sequences() = default;
  Sequences(const Sequences&) = delete;
  Sequences& operator=(const Sequences&) = delete;

  Status begin(const int32_t* tokens, size_t n, const std::string& extra_key, uint64_t* id, size_t* cached);
  virtual Status extend(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* out, size_t out_len);
  virtual Status decode(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out);
  // The stream-ordered forms: the same work, the table writes enqueued on `stream`, and the
  // new slots also written to the device array `device_out` (host memory on CPU pools).
  Status extend_async(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* device_out, size_t out_len,
                      void* stream);
  Status decode_async(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* device_out, void* stream);
  Status finish(uint64_t id, size_t committed);
  Status abort(uint64_t id);
  Status retract(uint64_t id, size_t* cached);

  const Request* find(uint64_t id) const;
  size_t active() const { return requests_.size(); }
  // Tokens held by requests beyond what the tree owns, counted in whole pages.
  size_t uncached_tokens() const;
  // SGLang's identity available + evictable + protected + uncached == capacity (§1.19), full KV pool.
  virtual void accounting(size_t* available, size_t* evictable, size_t* protected_len, size_t* uncached,
                          size_t* capacity) const;
  virtual size_t check(std::string* report, size_t max_lines) const;
  // Every held slot (and state) belongs to exactly one request or tree node
  // (valid while only kvseq_* allocate).
  virtual size_t check_attribution(std::string* report, size_t max_lines) const;
  // True if a request holds mamba state slot `slot`.
  virtual bool holds_state(int32_t slot) const;

 protected:
  Status lookup(uint64_t id, Request** out);
  Status check_batch(const uint64_t* ids, size_t n, std::vector<Request*>* reqs);
  // Validates the chunks of an extend batch: *total tokens, *pages new pages, *rows new rows.
  Status plan_extend(const std::vector<Request*>& reqs, const uint64_t* ids, const int64_t* chunks, size_t n,
                     size_t out_len, size_t* total, size_t* pages, size_t* rows) const;
  // Allocates the rows the batch needs and writes the table (write_chunks; a host table is
  // only checked, by check_chunks, and written per request after its after_chunk); if
  // either fails, gives the rows and the extend's slots back as they were. Then appends the
  // slots (a host table: each request's right before its after_chunk, by append_chunk),
  // assigns the rows and runs after_chunk per request.
  Status place_chunks(const std::vector<Request*>& reqs, const int64_t* chunks, int32_t* rows, size_t rows_needed,
                      const int64_t* out);
  // Writes each request's new slots (out, request-major) to its row, and a new row's
  // cached prefix first; requests without a row take the next of `rows`. Changes no request.
  Status write_chunks(const std::vector<Request*>& reqs, const int64_t* chunks, const int32_t* rows,
                      const int64_t* out) const;
  // Writes each request's decoded slot (out[i]) to its cell (decode_cells_, filled by
  // gather_decode), then appends it and the token (tokens[i]); a failed write gives the
  // decode's slots back (undo_allocation) first. gather_decode reserved room for the appends.
  Status place_decoded(const std::vector<Request*>& reqs, const int32_t* tokens, const int64_t* out);
  // A decode step's one pass over its batch: looks each id up into batch_reqs_, checks
  // that the batch can decode (no repeat, each request with a row, every token computed,
  // room in its row), gathers its table cell (decode_cells_) and its next slot in its last
  // page, or -1 where the new token starts a page (batch_last_; *new_pages of them), and
  // reserves room for the appends. False, without a message, on the first failed check:
  // decode_error() then words it. The three arrays must hold n entries.
  bool gather_decode(const uint64_t* ids, size_t n, size_t* new_pages);
  // The status of a batch gather_decode refused: the first failure in check_batch's order
  // (an unknown id anywhere, then a repeat), then per request in order (tokens not yet
  // computed, a full row). Changes nothing but the requests' batch stamps.
  Status decode_error(const uint64_t* ids, size_t n);
  // kvseq_decode's usual case, when the allocator's free list proper holds a page for every
  // request (then the checked path would neither evict nor merge deferred frees): one pass
  // over the batch looks each request up, checks it, gives it its slot, writes its cell
  // (a host table; other tables are written through writes_ after the pass) and appends
  // its token and slot (decode_pass). False, with nothing changed, when the free pages are
  // short (the caller takes the checked path); true otherwise, with the call's status in
  // *st (a refused batch: decode_error()'s).
  bool decode_in_one_pass(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out, Status* st);
  // decode_in_one_pass's loop: request i's slot goes to batch_last_[i], its table cell to
  // `cells` (CellSink: decode_pass.cpp); `pages` are the allocator's next free pages
  // (decode_pages()), *new_pages of which the batch starts. Returns the number of requests
  // done: n, or the first that fails a check, whose predecessors' appends and cells are
  // taken back (undo_pass) by then.
  template <class CellSink>
  size_t decode_pass(const uint64_t* ids, const int32_t* tokens, size_t n, const int64_t* pages, CellSink cells,
                     size_t* new_pages);
  // Takes back the token, slot and cell a decode_pass gave each of the first `done` requests of `ids`.
  template <class CellSink>
  void undo_pass(const uint64_t* ids, size_t done, CellSink cells);
  // For a host table (written late: place_chunks): write_chunks' checks without its writes.
  Status check_chunks(const std::vector<Request*>& reqs, const int64_t* chunks, const int32_t* rows,
                      const int64_t* out) const;
  // Inside place_chunks on a host table: appends r's `n` new slots `fresh`. When they are all
  // of r's uncached slots, the walk its caching needs is made here (walked_), which appends
  // the tree's slots for those that duplicate cached pages instead of theirs (chunk_values_
  // then keeps `fresh`, where stage_redirect finds the duplicates to free).
  void append_chunk(Request* r, const int64_t* fresh, size_t n);
  // A failed insert after append_chunk() left r's new slots uncached: its own go back over
  // the tree's that append_chunk() put in their place (the request then holds its own again).
  void restore_chunk(Request* r) const;
  // table_->check_write() of slots the allocator holds (a request's new or cached slots):
  // skips the slots' range pass when the allocator's slots all fit the table.
  Status check_held_write(int32_t row, size_t start, const int64_t* slots, size_t n) const;
  // Inside place_chunks, in request order: true if r's row is one of `rows` (new in this
  // call, assigned or about to be), which *next_row then steps past.
  static bool takes_new_row(const Request& r, const int32_t* rows, size_t rows_needed, size_t* next_row);
  // Gives requests without a row the next of `rows` (in write_chunks' order).
  Status assign_rows(const std::vector<Request*>& reqs, const int32_t* rows);
  // Frees unlocked cached prefixes so that `tokens` more slots fit, or fails without
  // evicting. `estimate` is SGLang's over-estimate of the same step (sglang_estimate());
  // the rule (prefix_cache.evict_rule) decides how much goes. With evict false it only
  // checks that it could.
  Status make_room(size_t tokens, size_t estimate, bool evict);
  // SGLang's scheduler estimate for a step of `batch` requests allocating `tokens` tokens:
  // the tokens plus a page per request when pages are larger than a token (spec §1.14).
  size_t sglang_estimate(size_t tokens, size_t batch) const { return page_ == 1 ? tokens : tokens + batch * page_; }
  // The tree's evictable tokens, and its eviction (the plain and the mamba tree differ).
  virtual size_t tree_evictable() const;
  virtual Status tree_evict(size_t tokens);
  virtual Status match_and_lock(Request* r);
  // match_and_lock with the host tier: the host-only part of the match is loaded back.
  Status match_tiered(Request* r);
  // Takes the host memory a match_and_lock of `r` needs (the match's split and the
  // request's slots), for retract, which matches again after the release.
  virtual void reserve_rematch(Request* r);
  virtual Status unlock(Request* r);
  virtual Status on_new_row(Request* r);
  // Before the slots of an extend batch are allocated, once its capacity is known to
  // suffice: must not lower free plus evictable slots (hybrid_linear caches the
  // chunks computed so far here, the only time the request's state describes them).
  virtual Status before_chunks(const std::vector<Request*>& reqs);
  // After a prefill chunk got its slots (the plain and swa trees cache the computed pages).
  virtual Status after_chunk(Request* r);
  // Gives back the `n` slots in `out` that this call's allocation just took, when a later
  // step of the call failed: exactly as they were taken (free-list order included).
  virtual void undo_allocation(const int64_t* out, size_t n);
  virtual bool tree_owns(int64_t slot) const;
  virtual bool slot_held(int64_t slot) const;
  virtual Status free_slots(const std::vector<int64_t>& slots, size_t from, size_t to);
  Status cache_computed_pages(Request* r);
  // Inside an extend batch, before the tree's slots for [cached, cached + n) are written over
  // r's duplicates there: stages pointing r's row at them (the values are read from r's slots
  // at the flush) and keeps the duplicates for flush_redirects() to free, or, with
  // write_late_, frees the duplicates at once.
  void stage_redirect(Request* r, size_t n);
  // Applies the staged redirects with one batch of table writes, then frees the duplicates they
  // replaced (one synchronous write per request if the batch fails).
  Status flush_redirects();
  // Room for the redirects of an extend batch whose requests cache at most `slots` new slots.
  void reserve_redirects(size_t requests, size_t slots);
  virtual Status release(Request* r, bool insert, size_t committed);
  size_t check_requests(std::string* report, size_t max_lines, bool has_tree) const;
  // Marks every slot id (page with page_size > 1) a request owns (slots[cached, computed)).
  void mark_request_pages(std::vector<uint8_t>* pages) const;

  size_t page_ = 1;
  EvictRule evict_rule_ = EvictRule::kShortfall;
  alloc::PagedAllocator* allocator_;
  req::RequestTable* table_;
  cache::PrefixCache* cache_;
  std::unordered_map<uint64_t, Request> requests_;
  IdIndex index_;  // the same requests by id, for lookup() (kept in step with requests_)
  uint64_t next_id_ = 1;
  // Forgets a request (its map entry and index entry; allocates nothing).
  void forget(uint64_t id);
  // The prefix matches of begin/retract/extend, max_context_len entries made once
  // (left uninitialized: only the part a match writes is ever touched).
  std::unique_ptr<int64_t[]> match_scratch_;
  // Token and slot buffers of finished requests, kept (emptied, capacity intact) for the
  // next requests: a new request reuses grown memory instead of faulting in fresh pages
  // (and a batch of begins / finishes does not go through malloc / free per request).
  // As many as the table has rows (a batch's worth), at most kMaxSpareBuffers.
  static constexpr size_t kMaxSpareBuffers = 1024;
  std::vector<std::vector<int32_t>> spare_tokens_;
  std::vector<std::vector<int64_t>> spare_slots_;
  // Moves r's buffers to the spares while there is room (never allocates).
  void recycle(Request* r);
  // check_batch's call counter (see Request::batch_stamp).
  uint64_t batch_stamp_ = 0;
  // Scratch of extend / decode, reused across calls (sized before anything changes).
  std::vector<Request*> batch_reqs_;
  std::vector<int64_t> batch_pre_, batch_seq_, batch_last_;
  std::vector<int32_t> batch_rows_;
  std::vector<size_t> batch_inserts_;
  // A decode step's table cells: request i's new slot goes to decode_cells_[i] (place_decoded).
  std::vector<req::TableCell> decode_cells_;
  // decode_in_one_pass on a host table: the entries its cells replaced (a refused batch puts them back).
  std::vector<int32_t> decode_replaced_;
  // The table writes of a call; the stream and device output of the *_async forms (NULL: the
  // legacy default stream, no device output).
  std::unique_ptr<req::TableWrites> writes_;
  void* stream_ = nullptr;
  int64_t* device_out_ = nullptr;
  std::vector<int64_t> host_out_;  // the *_async forms' host copy of the new slots
  // Redirects staged inside an extend batch (see stage_redirect): per request its row, first
  // column, count, offset of its duplicates in duplicates_ (freed afterwards) and the new
  // values (the request's own slots, which hold the tree's by then).
  struct Redirect {
    int32_t row;
    size_t start, count, offset;
    const int64_t* values;
  };
  bool stage_redirects_ = false;
  bool retracting_ = false;  // match_and_lock inside retract: no load-back from the host tier
  // Inside place_chunks on a host table: each row is written after its request's caching,
  // so nothing is staged: stage_redirect frees the duplicates at once (the first failure
  // of those frees is kept here for flush_redirects).
  bool write_late_ = false;
  Status late_frees_;
  // Inside place_chunks: the first token of the request being cached whose slot this call
  // allocated (SIZE_MAX elsewhere); stage_redirect frees duplicates from there page by page.
  size_t chunk_from_ = SIZE_MAX;
  // Inside place_chunks, for the request being cached: append_chunk's walk of its key
  // (walk_prefix(); SIZE_MAX: none made) and the device part, and its new slots when the
  // duplicates among them were left out of the request (NULL otherwise).
  size_t walked_ = SIZE_MAX, walked_device_ = 0;
  const int64_t* chunk_values_ = nullptr;
  std::vector<Redirect> redirects_;
  std::vector<int64_t> duplicates_;
};

}  // namespace kvp::seq
