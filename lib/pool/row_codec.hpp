// Host loops that convert whole rows between the caller's float formats and
// the stored KV formats, on top of the scalar rules in dtype_convert.hpp.
// The dtype switch happens once per call; the per-value work is inlined.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config/dtype.hpp"

namespace kvp::pool {

// The formats data may have on the caller's side of a conversion.
enum class Wide { kF32, kF16, kBF16 };

inline size_t wide_bytes(Wide w) { return w == Wide::kF32 ? 4 : 2; }

// Row i lives at base + (rows ? rows[i] : i) * stride.
struct RowRef {
  uint8_t* base = nullptr;
  size_t stride = 0;
  const int64_t* rows = nullptr;
  uint8_t* at(size_t i) const { return base + (rows != nullptr ? static_cast<size_t>(rows[i]) : i) * stride; }
};

struct ConstRowRef {
  const uint8_t* base = nullptr;
  size_t stride = 0;
  const int64_t* rows = nullptr;
  const uint8_t* at(size_t i) const { return base + (rows != nullptr ? static_cast<size_t>(rows[i]) : i) * stride; }
};

// n rows of `elements` values in format `in` (contiguous at `src`), each value
// divided by `divisor` (skipped when 1), stored as `kv` into `values` (and,
// for fp4, the block scales into `scales`). `kv` may also be a wide type.
void encode_rows(const void* src, Wide in, size_t n, size_t elements, float divisor, config::DType kv, RowRef values,
                 RowRef scales);

// The inverse: stored rows (fp4: with their scales) to contiguous `out` values.
void decode_rows(ConstRowRef values, ConstRowRef scales, size_t n, size_t elements, config::DType kv, void* dst,
                 Wide out);

// nsa fp8 packed rows: [lora fp8 bytes][lora/128 f32 scales][rope bf16 values]
// (row_codec_nsa.cpp).
void encode_nsa_rows(const void* nope, const void* rope, Wide in, size_t n, size_t lora, size_t rope_dim, RowRef rows);
void decode_nsa_rows(ConstRowRef rows, size_t n, size_t lora, size_t rope_dim, void* dst, Wide out);

}  // namespace kvp::pool
