// The state behind KvBuffers, shared by its source files (allocation,
// writes, reads, moves and host copies, descriptors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "pool/kv_buffers.hpp"
#include "pool/kv_layout.hpp"
#include "pool/row_codec.hpp"

namespace kvp::pool {

// One slot-indexed buffer: `rows` rows of `row_bytes` bytes, zero-filled.
struct RowBuffer {
  backend::DeviceMemory mem;
  uint64_t rows = 0;
  uint64_t row_bytes = 0;
  bool present() const { return mem.data() != nullptr; }
  uint8_t* data() const { return mem.as<uint8_t>(); }
};

struct LayerKv {
  int layer = 0;         // global id
  bool has_kv = false;   // false: a hybrid_linear mamba layer
  bool window = false;   // swa sliding-window layer: its rows are window-pool slots
  RowBuffer k, v;        // v absent for mla/nsa (a view of k)
  RowBuffer k_scale, v_scale;  // fp4 only (v_scale: mha-like only)
  RowBuffer label;       // double_sparse
  RowBuffer indexer;     // nsa
};

// How caller data becomes stored rows.
struct WriteFormat {
  bool raw = false;        // same dtype as stored: bytes copied unchanged
  Wide wide = Wide::kF32;  // otherwise: the caller's float format
  size_t value_bytes = 0;  // bytes of one caller value
};

// How stored rows become caller data.
struct ReadFormat {
  bool raw = false;        // as stored (the kv_dtype, or u8 for byte forms)
  Wide wide = Wide::kF32;  // otherwise: the caller's float format
};

// Formats a write accepts: f32/f16/bf16 (converted), or the pool's kv_dtype
// itself when it is a whole-byte type and `allow_raw` (copied).
Status write_format(int32_t src_dtype, config::DType kv, bool allow_raw, WriteFormat* out);

struct KvBuffers::Impl {
  backend::Backend* backend = nullptr;
  KvLayout L;
  const int64_t* swa_mapping = nullptr;  // swa: full slot -> window slot (0: padding row)
  std::vector<LayerKv> layers;           // index: layer - start_layer
  // True when buffer memory can be read and written by host code (CPU
  // backend): conversions then work on the rows in place instead of staging.
  bool host_addressable = false;

  // Scratch reused across calls (hot paths allocate only when they grow).
  backend::DeviceMemory device_scratch;  // move_kv gather buffer
  backend::DeviceMemory move_table;      // move_kv_async: every slot-indexed buffer (dev::MoveBuffer), built once
  uint64_t move_table_count = 0, move_table_scratch_row = 0;
  backend::DeviceMemory move_marks;      // move_kv_async: per-slot writer/reader marks (dev::MoveMarks)
  mutable std::vector<uint8_t> stage_values, stage_scales;
  mutable std::vector<int64_t> rows_scratch;
  std::vector<uint8_t> wide_scratch;

  // ---- checks (kv_buffers.cpp); none of them writes anything ----
  // The held layer `layer` with KV; INVALID_ARGUMENT otherwise.
  Status find_layer(int32_t layer, const LayerKv** out) const;
  // Every slot in [0, limit).
  static Status check_slots(const int64_t* slots, size_t n, uint64_t limit, const char* name);
  // Row ids of `slots` in the layer's buffers (swa window layers: translated).
  const int64_t* rows_for(const LayerKv& l, const int64_t* slots, size_t n) const;
  Status ensure_device_scratch(size_t bytes);

  // Everything set_kv / set_mla_kv / get_kv check except slot values, shared by
  // the host calls and the device calls (whose slots are only readable on the device).
  Status check_set_kv(int32_t layer, size_t n, size_t k_bytes, const void* v, size_t v_bytes, int32_t src_dtype,
                      float k_scale, float v_scale, const LayerKv** l, WriteFormat* f) const;
  Status check_set_mla_kv(int32_t layer, size_t n, size_t nope_bytes, size_t rope_bytes, int32_t src_dtype,
                          const LayerKv** l, WriteFormat* f) const;
  Status check_get_kv(int32_t layer, size_t n, size_t k_bytes, const void* v, size_t v_bytes, int32_t dst_dtype,
                      const LayerKv** l, ReadFormat* f) const;
  // Largest slot + 1 that move_kv accepts.
  uint64_t move_limit() const;
  // move_kv_async: the buffer table and the marks, built by the first call.
  Status build_move_table();
};

// f32 / f16 / bf16 as a caller-side format; false for other kvpool_dtype values.
bool wide_of(int32_t dtype, Wide* out);
// "f32", "fp8_e4m3", "u8", ... or "dtype N" for values outside kvpool_dtype.
std::string dtype_text(int32_t dtype);

// Checked n * row_bytes; INVALID_ARGUMENT if it does not fit in size_t.
Status byte_count(size_t n, uint64_t row_bytes, const char* what, size_t* out);
// "<name> has N bytes, expected M (<why>)".
Status bytes_error(size_t got, size_t expected, const char* name, const std::string& why);

// `why()` builds the explanation only on a mismatch: successful calls stay free of string work.
template <class Why>
Status check_bytes(size_t got, size_t expected, const char* name, Why&& why) {
  if (got == expected) return Status::ok();
  return bytes_error(got, expected, name, why());
}

}  // namespace kvp::pool
