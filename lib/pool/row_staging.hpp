// Where host conversion code reads and writes buffer rows. Host-addressable
// memory (the CPU backend) is converted in place, which is what keeps
// set_kv/get_kv a single pass; device memory goes through host staging that
// is moved with one batched backend copy per buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "pool/row_codec.hpp"
#include "util/status.hpp"

namespace kvp::pool {

// Rows `rows[0..n)` of a buffer (base, row_bytes) about to be written.
class RowSink {
 public:
  RowSink(backend::Backend* backend, bool in_place, uint8_t* base, size_t row_bytes, const int64_t* rows, size_t n,
          std::vector<uint8_t>* stage)
      : backend_(backend), in_place_(in_place), base_(base), row_bytes_(row_bytes), rows_(rows), n_(n), stage_(stage) {
    if (!in_place_) stage_->resize(n * row_bytes);
  }
  // Row i, starting `offset` bytes into the row.
  RowRef ref(size_t offset = 0) const {
    if (in_place_) return RowRef{base_ + offset, row_bytes_, rows_};
    return RowRef{stage_->data() + offset, row_bytes_, nullptr};
  }
  // Moves staged rows to the device (whole rows: every byte must have been written).
  Status flush() const {
    if (in_place_) return Status::ok();
    return backend_->scatter_from_host({base_, row_bytes_, rows_, stage_->data(), row_bytes_, nullptr, row_bytes_, n_});
  }

 private:
  backend::Backend* backend_;
  bool in_place_;
  uint8_t* base_;
  size_t row_bytes_;
  const int64_t* rows_;
  size_t n_;
  std::vector<uint8_t>* stage_;
};

// Rows `rows[0..n)` of a buffer about to be read: in place, or gathered first.
inline Status source_rows(backend::Backend* backend, bool in_place, const uint8_t* base, size_t row_bytes,
                          const int64_t* rows, size_t n, std::vector<uint8_t>* stage, ConstRowRef* out) {
  if (in_place) {
    *out = ConstRowRef{base, row_bytes, rows};
    return Status::ok();
  }
  stage->resize(n * row_bytes);
  KVPOOL_RETURN_IF_ERROR(backend->gather_to_host(
      {stage->data(), row_bytes, nullptr, base, row_bytes, rows, row_bytes, n}));
  *out = ConstRowRef{stage->data(), row_bytes, nullptr};
  return Status::ok();
}

}  // namespace kvp::pool
