#include "req/request_table.hpp"

#include <algorithm>
#include <climits>

#include <string>

#include "kvpool/buffers.h"  // KVPOOL_DEVICE_CPU
#include "util/narrow.hpp"

namespace kvp::req {

RequestTable::RequestTable(backend::Backend* backend, int64_t rows, int64_t context, int64_t slot_limit)
    : backend_(backend),
      rows_(rows - 1, alloc::GiveBackOrder::kAppend, false, "row"),
      context_(context),
      slot_limit_(slot_limit) {
  // Sized once, so that writing a row or taking rows (which kvseq does after its
  // slots are allocated) never runs out of host memory half-way.
  staging_.reserve(static_cast<size_t>(context));
  ids_.reserve(static_cast<size_t>(rows));
  rows_.reserve_scratch();
}

Status RequestTable::make(backend::Backend* backend, int64_t rows, int64_t max_context_len, int64_t slot_limit,
                          std::unique_ptr<RequestTable>* out) {
  std::unique_ptr<RequestTable> t(new RequestTable(backend, rows, max_context_len, slot_limit));
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(
      backend, static_cast<size_t>(rows) * static_cast<size_t>(max_context_len) * sizeof(int32_t), &t->table_));
  *out = std::move(t);
  return Status::ok();
}

Status RequestTable::alloc(int32_t* out, size_t n) {
  ids_.resize(n);
  KVPOOL_RETURN_IF_ERROR(rows_.take(n, ids_.data()));
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(ids_[i]);
  return Status::ok();
}

Status RequestTable::check_free(const int32_t* rows, size_t n) const {
  std::vector<int64_t> ids(rows, rows + n);
  return rows_.check_give_back(ids.data(), n, false);
}

Status RequestTable::free(const int32_t* rows, size_t n) {
  ids_.assign(rows, rows + n);
  return rows_.give_back(ids_.data(), n, false);
}

Status RequestTable::check_row(int32_t row) const {
  if (row <= 0 || row >= rows()) {
    return Status::invalid("row " + std::to_string(row) + " is " + (row == 0 ? "reserved" : "out of range") +
                           " (rows 1.." + std::to_string(rows() - 1) + " can be allocated)");
  }
  if (!rows_.owned(row)) return Status::invalid("row " + std::to_string(row) + " is not allocated");
  return Status::ok();
}

Status RequestTable::check_columns(int32_t row, size_t start, size_t n) const {
  KVPOOL_RETURN_IF_ERROR(check_row(row));
  if (start > static_cast<size_t>(context_) || n > static_cast<size_t>(context_) - start) {
    return Status::invalid("columns [" + std::to_string(start) + ", " + std::to_string(start + n) +
                           ") exceed max_context_len " + std::to_string(context_));
  }
  return Status::ok();
}

Status RequestTable::check_slots(const int64_t* slots, size_t n) const {
  // One branch-free pass; the exact message comes from the scalar loop.
  if (all_in_range(slots, n, slot_limit_)) return Status::ok();
  for (size_t i = 0; i < n; ++i) {
    if (slots[i] < 0 || slots[i] >= slot_limit_) {
      return Status::invalid("slot " + std::to_string(slots[i]) + " at index " + std::to_string(i) +
                             " is out of range [0, " + std::to_string(slot_limit_) + ")");
    }
  }
  return Status::ok();
}

Status RequestTable::write(int32_t row, size_t start, const int64_t* slots, size_t n) {
  KVPOOL_RETURN_IF_ERROR(check_columns(row, start, n));
  if (n == 0) return Status::ok();  // nothing to copy (and memcpy from an empty staging_'s NULL is UB)
  if (backend_->device_type() != KVPOOL_DEVICE_CPU) {  // narrowed and checked in one pass on the way
    // staging_ holds context_ entries from creation and n <= context_ here: no allocation.
    staging_.resize(n);
    KVPOOL_RETURN_IF_ERROR(narrow_slots(slots, n, staging_.data()));
    int32_t* base = table_.as<int32_t>() + static_cast<size_t>(row) * static_cast<size_t>(context_) + start;
    return backend_->from_host(base, staging_.data(), n * sizeof(int32_t));
  }
  // Host memory: checked before the row changes (a failed write changes nothing), then
  // narrowed straight into the table (no staging copy).
  KVPOOL_RETURN_IF_ERROR(check_slots(slots, n));
  return store_host(row, start, slots, n);
}

Status RequestTable::write_valid(int32_t row, size_t start, const int64_t* slots, size_t n) {
  if (backend_->device_type() != KVPOOL_DEVICE_CPU) return write(row, start, slots, n);  // checks on the way anyway
  KVPOOL_RETURN_IF_ERROR(check_columns(row, start, n));
  return n == 0 ? Status::ok() : store_host(row, start, slots, n);
}

Status RequestTable::store_host(int32_t row, size_t start, const int64_t* slots, size_t n) {
  int32_t* base = table_.as<int32_t>() + static_cast<size_t>(row) * static_cast<size_t>(context_) + start;
  narrow_to_int32(slots, n, base);  // in range: exact
  return Status::ok();
}

Status RequestTable::check_write(int32_t row, size_t start, const int64_t* slots, size_t n) const {
  KVPOOL_RETURN_IF_ERROR(check_columns(row, start, n));
  return n == 0 ? Status::ok() : check_slots(slots, n);  // narrow_slots' failure is check_slots'
}

int32_t* RequestTable::host_entries() {
  return backend_->device_type() == KVPOOL_DEVICE_CPU ? table_.as<int32_t>() : nullptr;
}

Status RequestTable::write_cells(const TableCell* cells, const int64_t* slots, size_t n) {
  // Each cell is written after its bound test: a cell out of bounds stops the pass with
  // write()'s message, the cells before it written, as n one-slot write() calls would.
  int32_t* table = table_.as<int32_t>();
  const size_t stride = static_cast<size_t>(context_);
  const CellBounds bounds(rows(), context_, slot_limit_);
  if (backend_->device_type() == KVPOOL_DEVICE_CPU) {  // host memory: plain stores, no call per cell
    for (size_t i = 0; i < n; ++i) {
      if (!bounds.holds(cells[i], slots[i])) return cell_error(cells[i], slots[i]);
      table[static_cast<size_t>(cells[i].row) * stride + static_cast<size_t>(cells[i].column)] = static_cast<int32_t>(slots[i]);
    }
    return Status::ok();
  }
  for (size_t i = 0; i < n; ++i) {
    if (!bounds.holds(cells[i], slots[i])) return cell_error(cells[i], slots[i]);
    const int32_t value = static_cast<int32_t>(slots[i]);  // below slot_limit: the int32 cast is exact
    int32_t* cell = table + static_cast<size_t>(cells[i].row) * stride + static_cast<size_t>(cells[i].column);
    KVPOOL_RETURN_IF_ERROR(backend_->from_host(cell, &value, sizeof(value)));
  }
  return Status::ok();
}

Status RequestTable::cell_error(TableCell cell, int64_t slot) const {
  const size_t column = static_cast<size_t>(static_cast<uint32_t>(cell.column));  // a negative one exceeds any bound
  KVPOOL_RETURN_IF_ERROR(check_write(cell.row, column, &slot, 1));
  return Status::internal("table cell (" + std::to_string(cell.row) + ", " + std::to_string(cell.column) +
                          ") out of bounds, yet it passes write()'s checks");
}

Status RequestTable::narrow_slots(const int64_t* slots, size_t n, int32_t* dst) const {
  // Narrow and range-check in one branch-free vector pass with check_slots' test; the
  // table stores a valid slot's int32 cast.
  if (!narrow_to_int32_in_range(slots, n, dst, slot_limit_)) return check_slots(slots, n);  // names the first bad slot
  return Status::ok();
}

Status RequestTable::copy_out(int32_t row, size_t start, int32_t* dst, size_t n) const {
  KVPOOL_RETURN_IF_ERROR(check_columns(row, start, n));
  if (n == 0) return Status::ok();
  const int32_t* base = table_.as<int32_t>() + static_cast<size_t>(row) * static_cast<size_t>(context_) + start;
  return backend_->to_host(dst, base, n * sizeof(int32_t));
}

Status RequestTable::read(int32_t row, size_t start, int64_t* out, size_t n) {
  return static_cast<const RequestTable*>(this)->read(row, start, out, n, &staging_);
}

Status RequestTable::read(int32_t row, size_t start, int64_t* out, size_t n, std::vector<int32_t>* staging) const {
  KVPOOL_RETURN_IF_ERROR(check_columns(row, start, n));
  if (n == 0) return Status::ok();
  staging->resize(n);
  KVPOOL_RETURN_IF_ERROR(copy_out(row, start, staging->data(), n));
  for (size_t i = 0; i < n; ++i) out[i] = (*staging)[i];
  return Status::ok();
}

Status RequestTable::write_batch(const int32_t* rows, const int64_t* prefix_lens, const int64_t* seq_lens,
                                 size_t batch, const int64_t* prefix_slots, size_t prefix_total,
                                 const int64_t* extend_slots, size_t extend_total) {
  // Validate the whole batch first: a failed call writes nothing.
  uint64_t prefix_sum = 0, extend_sum = 0;
  for (size_t i = 0; i < batch; ++i) {
    const std::string who = "request " + std::to_string(i) + ": ";
    if (prefix_lens[i] < 0 || seq_lens[i] < prefix_lens[i]) {
      return Status::invalid(who + "needs 0 <= prefix length <= sequence length, got " +
                             std::to_string(prefix_lens[i]) + " and " + std::to_string(seq_lens[i]));
    }
    Status st = check_columns(rows[i], 0, static_cast<size_t>(seq_lens[i]));
    if (!st.is_ok()) return Status::invalid(who + st.message());
    prefix_sum += static_cast<uint64_t>(prefix_lens[i]);
    extend_sum += static_cast<uint64_t>(seq_lens[i] - prefix_lens[i]);
  }
  if (prefix_sum != prefix_total) {
    return Status::invalid("prefix_slots holds " + std::to_string(prefix_total) + " slots, prefix lengths sum to " +
                           std::to_string(prefix_sum));
  }
  if (extend_sum != extend_total) {
    return Status::invalid("extend_slots holds " + std::to_string(extend_total) + " slots, the batch extends by " +
                           std::to_string(extend_sum));
  }
  KVPOOL_RETURN_IF_ERROR(check_slots(prefix_slots, prefix_total));
  KVPOOL_RETURN_IF_ERROR(check_slots(extend_slots, extend_total));
  size_t p = 0, e = 0;
  for (size_t i = 0; i < batch; ++i) {
    const size_t pre = static_cast<size_t>(prefix_lens[i]);
    const size_t ext = static_cast<size_t>(seq_lens[i] - prefix_lens[i]);
    KVPOOL_RETURN_IF_ERROR(write(rows[i], 0, prefix_slots + p, pre));
    KVPOOL_RETURN_IF_ERROR(write(rows[i], pre, extend_slots + e, ext));
    p += pre;
    e += ext;
  }
  return Status::ok();
}

Status RequestTable::last_loc(const int32_t* rows, const int64_t* prefix_lens, size_t batch, int64_t* out) const {
  for (size_t i = 0; i < batch; ++i) {
    if (prefix_lens[i] < 0 || prefix_lens[i] > context_) {
      return Status::invalid("request " + std::to_string(i) + ": prefix length " + std::to_string(prefix_lens[i]) +
                             " is outside [0, " + std::to_string(context_) + "]");
    }
    KVPOOL_RETURN_IF_ERROR(check_row(rows[i]));
  }
  for (size_t i = 0; i < batch; ++i) {
    if (prefix_lens[i] == 0) {
      out[i] = -1;
    } else {
      int32_t last = 0;
      KVPOOL_RETURN_IF_ERROR(copy_out(rows[i], static_cast<size_t>(prefix_lens[i] - 1), &last, 1));
      out[i] = last;
    }
  }
  return Status::ok();
}

}  // namespace kvp::req
