// kvseq_decode in one pass over its batch, the usual case (the free pages suffice).
//
// The checked path (Sequences::decode after decode_in_one_pass declines) walks the batch
// three times: gather_decode (lookups, checks, next slots), the allocator's decode_next,
// place_decoded (table cells, appends). Here one loop (walk) does all of it per request
// while the request's fields are in registers, and it appends optimistically: a refused
// batch is rare, and taking its appends back costs less than a second walk over every
// batch. The loop calls nothing (a refusal or a full buffer ends it; the caller grows
// the buffer and walks on), so that its values stay in registers: a call anywhere in it,
// even push_back's growth path, pinned them to the few callee-saved ones.
// The slots are the checked path's: with a free page per request in the free list proper,
// make_room would evict nothing and decode_next would merge no deferred frees, so both
// hand out the same pages in the same order.
#include <cstring>
#include <new>

#include "seq/sequences.hpp"

namespace kvp::seq {
namespace {

// Where the walk puts request i's table cell: put(i, entry, row, column, slot), entry being
// row * max_context_len + column; undo(i, entry) takes it back.
//
// A CPU pool's table is host memory: each cell is written in the walk, and the entry it
// replaces is kept so that a refused batch can put it back.
struct HostCells {
  int32_t* table;
  int32_t* replaced;  // one per request
  void put(size_t i, size_t entry, int32_t, size_t, int64_t slot) const {
    replaced[i] = table[entry];
    table[entry] = static_cast<int32_t>(slot);  // below slot_limit (see walk): exact as int32
  }
  void undo(size_t i, size_t entry) const { table[entry] = replaced[i]; }
};

// Any other table (a CUDA pool's): the cells are gathered for the table writes, which stage
// them after the pass; nothing to take back.
struct StagedCells {
  req::TableCell* cells;
  void put(size_t i, size_t, int32_t row, size_t column, int64_t) const {
    cells[i] = req::TableCell{row, static_cast<int32_t>(column)};  // column < max_context_len
  }
  void undo(size_t, size_t) const {}
};

// What decode_pass's loop reads, copied out of Sequences (into registers, in walk).
struct DecodeWalk {
  const uint64_t* ids;
  const int32_t* tokens;
  int64_t* slots;          // request i's new slot
  const int64_t* next_page;  // the next free page a request starting a page takes
  IdIndex::Reader index;
  uint64_t stamp;          // this call's (check_batch's repeat test)
  size_t context;          // max_context_len
  uint32_t row_count;      // rows - 1
  size_t in_page;          // page size - 1 (page sizes are powers of two)
  int64_t page;
};

enum class WalkEnd { kDone, kRefused, kFull };

// Walks requests i.. of the batch until the end (kDone), a request that fails a check
// (kRefused) or one whose token or slot buffer is full (kFull; not stamped, nothing
// appended). *i is then the request it stopped at.
template <class CellSink>
[[gnu::noinline]] WalkEnd walk(DecodeWalk& w, size_t* i_io, size_t n, CellSink cells) {
  const uint64_t* ids = w.ids;
  const int32_t* tokens = w.tokens;
  int64_t* slots = w.slots;
  const int64_t* next_page = w.next_page;
  const IdIndex::Reader index = w.index;
  const uint64_t stamp = w.stamp;
  const size_t context = w.context, in_page = w.in_page;
  const uint32_t row_count = w.row_count;
  const int64_t page = w.page;
  WalkEnd end = WalkEnd::kDone;
  size_t i = *i_io;
  for (; i < n; ++i) {
    Request* r = index.find(ids[i]);
    // Decode's checks, each its own branch (never taken in a good batch): an unknown id, a
    // repeat, no row (or one outside the table), tokens not computed yet, a full row.
    if (r == nullptr || r->batch_stamp == stamp) {
      end = WalkEnd::kRefused;
      break;
    }
    const size_t len = r->tokens.size();
    if (static_cast<uint32_t>(r->row) - 1u >= row_count || r->slots.size() != len || len >= context) {
      end = WalkEnd::kRefused;
      break;
    }
    // Room for the appends (almost always: begin reserves ahead, and buffers grow
    // geometrically); tested here so that the push_backs below need no growth path.
    if (r->tokens.size() == r->tokens.capacity() || r->slots.size() == r->slots.capacity()) {
      end = WalkEnd::kFull;
      break;
    }
    r->batch_stamp = stamp;
    // The slot after the request's last one, or the next free page's first where the new
    // token starts a page (len 0 starts one: back() never reads an empty vector).
    const int64_t slot = (len & in_page) != 0 ? r->slots.back() + 1 : *next_page++ * page;
    slots[i] = slot;
    // The cell (row, len) lies inside the table: row in 1 .. rows - 1, len < context. The
    // slot is below slot_limit: it continues a page the request holds or starts a free page.
    cells.put(i, static_cast<size_t>(r->row) * context + len, r->row, len, slot);
    r->tokens.push_back(tokens[i]);
    r->slots.push_back(slot);
  }
  *i_io = i;
  w.next_page = next_page;
  return end;
}

// Room for one more token and slot in r's full buffers. False if memory ran out.
[[gnu::noinline, gnu::cold]] bool grow_for_next_token(Request* r) noexcept {
  try {
    reserve_next_token(r);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

template <class CellSink>
void Sequences::undo_pass(const uint64_t* ids, size_t done, CellSink cells) {
  const IdIndex::Reader index(index_);
  for (size_t k = 0; k < done; ++k) {
    Request* r = index.find(ids[k]);  // found: the pass did
    r->tokens.pop_back();
    r->slots.pop_back();
    cells.undo(k, static_cast<size_t>(r->row) * static_cast<size_t>(table_->max_context_len()) + r->tokens.size());
  }
}

template <class CellSink>
size_t Sequences::decode_pass(const uint64_t* ids, const int32_t* tokens, size_t n, const int64_t* pages,
                              CellSink cells, size_t* new_pages) {
  DecodeWalk w{ids,
               tokens,
               batch_last_.data(),
               pages,
               IdIndex::Reader(index_),
               ++batch_stamp_,  // repeats: as in check_batch, each request is stamped with it
               static_cast<size_t>(table_->max_context_len()),
               static_cast<uint32_t>(table_->rows() - 1),
               page_ - 1,
               static_cast<int64_t>(page_)};
  size_t i = 0;
  for (;;) {
    const WalkEnd end = walk(w, &i, n, cells);
    if (end == WalkEnd::kDone) break;
    if (end == WalkEnd::kFull && grow_for_next_token(w.index.find(ids[i]))) continue;
    undo_pass(ids, i, cells);  // growing changes no state; the appends before it do
    if (end == WalkEnd::kFull) throw std::bad_alloc();
    return i;
  }
  *new_pages = static_cast<size_t>(w.next_page - pages);
  return n;
}

bool Sequences::decode_in_one_pass(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out, Status* st) {
  const int64_t* pages = allocator_->decode_pages(n);
  if (pages == nullptr) return false;
  batch_last_.resize(n);
  size_t new_pages = 0;
  int32_t* host = writes_->deferred() ? nullptr : table_->host_entries();
  if (host != nullptr) {
    decode_replaced_.resize(n);
    const HostCells cells{host, decode_replaced_.data()};
    if (decode_pass(ids, tokens, n, pages, cells, &new_pages) < n) {
      *st = decode_error(ids, n);
      return true;
    }
    std::memcpy(out, batch_last_.data(), n * sizeof(int64_t));
    // The *_async forms' copy of the slots to device_out (host memory on a CPU pool).
    *st = writes_->flush(stream_, out, device_out_, n);
    if (st->is_ok()) {
      allocator_->take_decode_pages(new_pages);
    } else {
      undo_pass(ids, n, cells);
    }
    return true;
  }
  decode_cells_.resize(n);
  const StagedCells cells{decode_cells_.data()};
  if (decode_pass(ids, tokens, n, pages, cells, &new_pages) < n) {
    *st = decode_error(ids, n);
    return true;
  }
  // As place_decoded: the staging is reserved (it may wait or allocate) once the batch is
  // known to decode and the pages are taken; then the cells are staged and flushed. A
  // failure takes the pass and the allocation back.
  *st = writes_->reserve_cells(n);
  if (!st->is_ok()) {
    undo_pass(ids, n, cells);
    return true;
  }
  allocator_->take_decode_pages(new_pages);
  std::memcpy(out, batch_last_.data(), n * sizeof(int64_t));
  *st = writes_->add_checked_cells(decode_cells_.data(), out, n);  // bounds tested in the walk
  if (st->is_ok()) {
    *st = writes_->flush(stream_, out, device_out_, n);
  } else {
    writes_->discard();
  }
  if (!st->is_ok()) {
    undo_pass(ids, n, cells);
    undo_allocation(out, n);
  }
  return true;
}

}  // namespace kvp::seq
