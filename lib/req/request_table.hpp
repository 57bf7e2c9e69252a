// The request-to-token table (SGLang's ReqToTokenPool): rows x max_context_len
// int32 slot ids in backend memory, with a FIFO free list of rows; row 0 is
// reserved. The table's memory is what attention kernels read.
#pragma once

#include <cstdint>
#include <vector>

#include "alloc/id_allocator.hpp"
#include "backend/backend.hpp"
#include "req/table_cell.hpp"
#include "util/status.hpp"

namespace kvp::req {

class RequestTable {
 public:
  // `rows` includes the reserved row 0; slot values must be < `slot_limit`.
  static Status make(backend::Backend* backend, int64_t rows, int64_t max_context_len, int64_t slot_limit,
                     std::unique_ptr<RequestTable>* out);

  int64_t rows() const { return rows_.num_ids() + 1; }
  int64_t max_context_len() const { return context_; }
  int64_t slot_limit() const { return slot_limit_; }
  const backend::DeviceMemory& memory() const { return table_; }
  // The entries, row-major with max_context_len() columns, when they live in host memory
  // (a CPU backend), else NULL: kvseq_decode stores its cells there itself, having checked
  // their bounds while it gathered them.
  int32_t* host_entries();
  alloc::IdAllocator& row_ids() { return rows_; }
  const alloc::IdAllocator& row_ids() const { return rows_; }
  size_t available() const { return rows_.available(); }

  Status alloc(int32_t* out, size_t n);
  Status check_free(const int32_t* rows, size_t n) const;
  Status free(const int32_t* rows, size_t n);
  // Undoes the last alloc() of `n` rows (nothing else may have taken or freed rows since).
  void undo_alloc(size_t n) { rows_.untake(n); }
  Status write(int32_t row, size_t start, const int64_t* slots, size_t n);
  // The checks of write() (and its message), without the write.
  Status check_write(int32_t row, size_t start, const int64_t* slots, size_t n) const;
  // write() of slots known to be in range (checked by check_write() in the same call, or
  // held by the allocator or the prefix tree): the row and columns are checked, the slots
  // are not (kvseq_extend's late row writes on a host table).
  Status write_valid(int32_t row, size_t start, const int64_t* slots, size_t n);
  // table[cells[i].row][cells[i].column] = slots[i] for each i: a decode step's one slot
  // per request (req/table_cell.hpp), in one pass. Each cell is tested against the table's
  // bounds only (CellBounds; kvseq holds every row it names), not for row ownership; a cell
  // out of bounds stops the pass with write()'s message, the cells before it written, as
  // n one-slot write() calls would.
  Status write_cells(const TableCell* cells, const int64_t* slots, size_t n);
  // write()'s message for a cell out of bounds (CellBounds), without writing.
  Status cell_error(TableCell cell, int64_t slot) const;
  // Reads `n` columns of `row` from `start` into `out`, through the table's own staging
  // buffer (no allocation once it has grown: kvreq_read).
  Status read(int32_t row, size_t start, int64_t* out, size_t n);
  // The same through the caller's `staging`: changes nothing of the table, so that the
  // read-only queries (kvpool_check) may run side by side on a thread-safe pool.
  Status read(int32_t row, size_t start, int64_t* out, size_t n, std::vector<int32_t>* staging) const;
  Status write_batch(const int32_t* rows, const int64_t* prefix_lens, const int64_t* seq_lens, size_t batch,
                     const int64_t* prefix_slots, size_t prefix_total, const int64_t* extend_slots,
                     size_t extend_total);
  Status last_loc(const int32_t* rows, const int64_t* prefix_lens, size_t batch, int64_t* out) const;
  void clear() { rows_.clear(); }

  // Range and ownership checks shared by the operations.
  Status check_row(int32_t row) const;
  Status check_columns(int32_t row, size_t start, size_t n) const;
  Status check_slots(const int64_t* slots, size_t n) const;
  // The table's int32 form of `n` slots into `dst`, range-checked (the message of check_slots).
  Status narrow_slots(const int64_t* slots, size_t n, int32_t* dst) const;

 private:
  RequestTable(backend::Backend* backend, int64_t rows, int64_t context, int64_t slot_limit);
  // Copies the table's int32 entries of `row`, columns [start, start + n), checked, into `dst`.
  Status copy_out(int32_t row, size_t start, int32_t* dst, size_t n) const;
  // Stores the int32 form of `n` checked slots at table[row][start, start + n) of a table
  // in host memory (a CPU backend's).
  Status store_host(int32_t row, size_t start, const int64_t* slots, size_t n);

  backend::Backend* backend_;
  alloc::IdAllocator rows_;
  int64_t context_;
  int64_t slot_limit_;
  backend::DeviceMemory table_;
  std::vector<int32_t> staging_;  // write() and read(): the int32 form of a row's slots
  std::vector<int64_t> ids_;
};

}  // namespace kvp::req
