// A decode step's request-table writes: one cell per request, the request's row and
// its next column, which receives the step's new slot. kvseq gathers the cells from
// its own requests (every row held, every column below max_context_len), so the
// writes test only that each cell lies inside the table: a test that must stay (a bad
// cell would write outside the table) and costs a few instructions, unlike the
// per-cell ownership test of RequestTable::write(), which kvseq's cells cannot fail.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvp::req {

/// One cell of a decode step: table[row][column] receives the request's new slot.
struct TableCell {
  int32_t row;
  int32_t column;
};

/// The largest valid row - 1, column and slot of a table (row 0 is reserved): a cell and
/// its slot lie inside the table exactly when, taken unsigned (a negative value wraps to a
/// huge one), row - 1, column and slot are at most these.
struct CellBounds {
  uint32_t last_row;  ///< rows - 2: rows 1 .. rows - 1, as row - 1
  uint32_t last_column;
  uint64_t last_slot;
  CellBounds(int64_t rows, int64_t context, int64_t slot_limit)
      : last_row(static_cast<uint32_t>(rows - 2)), last_column(static_cast<uint32_t>(context - 1)),
        last_slot(static_cast<uint64_t>(slot_limit - 1)) {}
  /// True when the cell and its slot lie inside the table.
  bool holds(TableCell cell, int64_t slot) const {
    return (static_cast<uint32_t>(cell.row) - 1u <= last_row) & (static_cast<uint32_t>(cell.column) <= last_column) &
           (static_cast<uint64_t>(slot) <= last_slot);
  }
};

}  // namespace kvp::req
