#include "config/dtype.hpp"

namespace kvp::config {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kFP8E4M3: return "fp8_e4m3";
    case DType::kFP8E5M2: return "fp8_e5m2";
    case DType::kFP4E2M1: return "fp4_e2m1";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kFP4E2M1}) {
    if (name == dtype_name(d)) return d;
  }
  return std::nullopt;
}

uint32_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kFP8E4M3:
    case DType::kFP8E5M2: return 1;
    case DType::kFP4E2M1: return 0;
  }
  return 0;
}

bool is_fp8(DType dtype) { return dtype == DType::kFP8E4M3 || dtype == DType::kFP8E5M2; }

uint64_t kv_row_bytes(DType dtype, uint64_t elements) {
  if (dtype == DType::kFP4E2M1) return elements / 2 + elements / 16;  // packed nibbles + block-16 scales
  return elements * dtype_bytes(dtype);
}

}  // namespace kvp::config
