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

/// A table's bounds for a cell and its slot: rows 1 .. rows - 1 (row 0 is reserved),
/// columns 0 .. context - 1, slots 0 .. slot_limit - 1. Each test is one unsigned
/// compare: a negative row, column or slot wraps to a huge value and fails it.
struct CellBounds {
  uint32_t row_count;     ///< rows - 1, compared with row - 1
  uint32_t column_count;  ///< context
  uint64_t slot_count;    ///< slot_limit
  CellBounds(int64_t rows, int64_t context, int64_t slot_limit)
      : row_count(static_cast<uint32_t>(rows > 1 ? rows - 1 : 0)),
        column_count(static_cast<uint32_t>(context > 0 ? context : 0)),
        slot_count(static_cast<uint64_t>(slot_limit > 0 ? slot_limit : 0)) {}
  /// True when the cell and its slot lie inside the table.
  bool holds(TableCell cell, int64_t slot) const {
    return (static_cast<uint32_t>(cell.row) - 1u < row_count) & (static_cast<uint32_t>(cell.column) < column_count) &
           (static_cast<uint64_t>(slot) < slot_count);
  }
};

}  // namespace kvp::req
