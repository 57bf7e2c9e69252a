// The request-table writes of one kvseq call, applied together.
//
// On a CPU pool each write lands at once. On a CUDA pool the writes are staged
// in pinned host memory and applied by one host-to-device copy and one kernel
// on a stream (cuda/table_writes.cu): a batch step then costs two enqueues,
// whatever the batch size, and never waits for the device. Writing the table
// row by row with synchronous copies cost about 6 µs per request and step.
//
// Use: reserve() (reserve_cells()) before the call changes anything (it may
// allocate, and waits only when every staging buffer is still in flight), add()
// each run (add_cells() a decode step's cells), then flush() (or discard()). A failed flush leaves the table as it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"
#include "backend/device_fault.hpp"
#include "req/request_table.hpp"
#include "req/table_cell.hpp"
#include "util/status.hpp"

namespace kvp::req {

// One staged run: table[row][start, start + count) = values[offset, offset + count).
struct TableRun {
  int32_t row;
  int32_t start;
  int32_t count;
  int32_t offset;
};

class TableWrites {
 public:
  // A CUDA implementation for CUDA backends (`fault` is the pool's device fault), else the CPU one.
  static Status make(backend::Backend* backend, RequestTable* table, backend::DeviceFault* fault,
                     std::unique_ptr<TableWrites>* out);
  virtual ~TableWrites() = default;

  // Room for `runs` more runs of `values` more slots in all.
  virtual Status reserve(size_t runs, size_t values) = 0;
  // table[row][start, start + n) = slots (row allocated, columns and slot range checked).
  virtual Status add(int32_t row, size_t start, const int64_t* slots, size_t n) = 0;
  // add() of slots known to be in range (checked in the same call, or held by the allocator
  // or the prefix tree): the row and columns are still checked. The default is add().
  virtual Status add_valid(int32_t row, size_t start, const int64_t* slots, size_t n) {
    return add(row, start, slots, n);
  }
  // Room for `cells` more cells (add_cells) and their slots.
  virtual Status reserve_cells(size_t cells) = 0;
  // table[cells[i].row][cells[i].column] = slots[i] for each i: a decode step's cells
  // (req/table_cell.hpp), checked only against the table's bounds, in one pass; a batch
  // with a cell out of bounds goes through one add() per cell for add()'s first message.
  // Their slots are staged as one contiguous part of the values (flush()'s `out`).
  virtual Status add_cells(const TableCell* cells, const int64_t* slots, size_t n) = 0;
  // add_cells() of cells the caller has tested against the table's bounds, with slots below
  // slot_limit (kvseq_decode's walk: rows it holds, columns below max_context_len, slots it
  // was given): staged without add_cells' test (a CUDA kernel still tests each cell). The
  // default is add_cells().
  virtual Status add_checked_cells(const TableCell* cells, const int64_t* slots, size_t n) {
    return add_cells(cells, slots, n);
  }
  // Applies the staged runs on `stream`. When `out` is not NULL it also receives, as
  // int64, the first `out_n` staged values, which the caller staged first and which
  // equal `out_host` (CPU pools copy `out_host`; `out` is then host memory too).
  // Nothing stays staged afterwards, whether it failed or not.
  virtual Status flush(void* stream, const int64_t* out_host, int64_t* out, size_t out_n) = 0;
  // Drops what was staged (a later step of the call failed).
  virtual void discard() = 0;
  // True when writes are deferred to flush() (CUDA); false when add() wrote at once.
  virtual bool deferred() const = 0;
};

// The CPU implementation (each add() writes at once).
std::unique_ptr<TableWrites> make_host_table_writes(RequestTable* table);

// The CUDA implementation (cuda/table_writes.cu; a stub without CUDA).
Status make_device_table_writes(RequestTable* table, backend::DeviceFault* fault, int device,
                                std::unique_ptr<TableWrites>* out);

}  // namespace kvp::req
