// KV and state element types, and their storage sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvp::config {

enum class DType { kF32, kF16, kBF16, kFP8E4M3, kFP8E5M2, kFP4E2M1 };

// The JSON spelling ("f32", "bf16", "fp8_e4m3", ...).
const char* dtype_name(DType dtype);
std::optional<DType> parse_dtype(const std::string& name);

// Bytes per element for whole-byte types; 0 for fp4 (two values share a byte).
uint32_t dtype_bytes(DType dtype);
bool is_fp8(DType dtype);

// Bytes that `elements` values of `dtype` occupy in a KV row. fp4 packs two
// values per byte and adds one uint8 scale per block of 16 values, so
// `elements` must be a multiple of 16 for fp4 (the config validator checks).
uint64_t kv_row_bytes(DType dtype, uint64_t elements);

}  // namespace kvp::config
