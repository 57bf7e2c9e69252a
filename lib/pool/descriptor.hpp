// Building kvpool_buffer descriptors (DLPack-style: shape and strides in
// elements) for the KV buffers and for the buffers other components own.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "config/dtype.hpp"
#include "kvpool/buffers.h"
#include "util/status.hpp"

namespace kvp::pool {

constexpr int kMaxDims = 5;

inline kvpool_dtype public_dtype(config::DType d) {
  switch (d) {
    case config::DType::kF32: return KVPOOL_DTYPE_F32;
    case config::DType::kF16: return KVPOOL_DTYPE_F16;
    case config::DType::kBF16: return KVPOOL_DTYPE_BF16;
    case config::DType::kFP8E4M3: return KVPOOL_DTYPE_FP8_E4M3;
    case config::DType::kFP8E5M2: return KVPOOL_DTYPE_FP8_E5M2;
    case config::DType::kFP4E2M1: return KVPOOL_DTYPE_FP4_E2M1;
  }
  return KVPOOL_DTYPE_U8;
}

// A descriptor for `shape`; `row_stride` (elements between rows of the first
// dimension) is the product of the other dimensions unless given, which is how
// a column view (mla's value part) keeps the full row's stride. Shapes with
// more than five dimensions fold their trailing dimensions together (they are
// contiguous). `bytes` counts from `data` to the end of the underlying buffer.
inline kvpool_buffer make_descriptor(kvpool_dtype dtype, void* data, int device_type, int device_id,
                                     std::vector<int64_t> shape, uint64_t bytes, int64_t row_stride = 0) {
  while (shape.size() > static_cast<size_t>(kMaxDims)) {
    const int64_t last = shape.back();
    shape.pop_back();
    shape.back() *= last;
  }
  kvpool_buffer b;
  std::memset(&b, 0, sizeof b);
  b.struct_size = sizeof(kvpool_buffer);
  b.dtype = dtype;
  b.data = data;
  b.device_type = device_type;
  b.device_id = device_id;
  b.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int d = b.ndim - 1; d >= 0; --d) {
    b.shape[d] = shape[static_cast<size_t>(d)];
    b.strides[d] = stride;
    stride *= shape[static_cast<size_t>(d)];
  }
  if (row_stride > 0 && b.ndim > 1) {
    // Dimensions between the first and the last are 1 for column views; keep
    // their strides consistent with the row stride.
    for (int d = 0; d < b.ndim - 1; ++d) b.strides[d] = row_stride;
  }
  b.bytes = bytes;
  return b;
}

// Copies `desc` into the caller's struct, whose struct_size must cover it; the
// caller's struct_size is kept.
inline Status write_descriptor(const kvpool_buffer& desc, kvpool_buffer* out) {
  if (out == nullptr) return Status::invalid("out is NULL");
  if (out->struct_size < sizeof(kvpool_buffer)) {
    return Status::invalid("out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                           std::to_string(sizeof(kvpool_buffer)) + " (use KVPOOL_BUFFER_INIT)");
  }
  const uint32_t caller_size = out->struct_size;
  std::memcpy(out, &desc, sizeof desc);
  out->struct_size = caller_size;
  return Status::ok();
}

}  // namespace kvp::pool
