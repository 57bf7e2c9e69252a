// fp8 e4m3fn pairs with the GPU's conversion instructions, and the pinned-NaN division
// and product, giving exactly the results of the scalar rules (pool/dtype_convert.hpp)
// that the CPU backend and every other kernel use.
//
// Why: the scalar rule is ~25 integer operations a value, which made fp8 KV writes
// compute-bound (10 % of the copy limit with the per-value kernel); sm_89+ converts two
// values in one instruction. The instruction rounds to nearest even like the rule, but
// it saturates (.satfinite: past 448 it returns 448, NaN stays NaN), where the rule maps
// every magnitude past 464 (halfway between 448 and the next step), infinity and NaN to
// NaN (sign | 0x7f). Those inputs are patched after the conversion. The exhaustive GPU
// test (tests/gpu/gpu_fp8_convert_test.cu) compares every f32 bit pattern. Before sm_89
// (no such instructions) the functions are the scalar rules themselves.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "pool/dtype_convert.hpp"

namespace kvp::pool::dev {

// The two e4m3 bytes of lo (bits 0-7) and hi (bits 8-15).
__device__ __forceinline__ uint32_t e4m3_pair(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890  // no instruction: cuda_fp8.h would emulate it; use the rule
  return kvp::pool::cvt::f32_to_e4m3(lo) | uint32_t(kvp::pool::cvt::f32_to_e4m3(hi)) << 8;
#else
  uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
  const uint32_t xl = __float_as_uint(lo), xh = __float_as_uint(hi);
  if ((xl & 0x7fffffffu) > 0x43e80000u) pair = (pair & 0xff00u) | ((xl >> 24) & 0x80u) | 0x7fu;
  if ((xh & 0x7fffffffu) > 0x43e80000u) pair = (pair & 0x00ffu) | (((xh >> 24) & 0x80u) | 0x7fu) << 8;
  return pair;
#endif
}

// Two e4m3 bytes (bits 0-7: lo, 8-15: hi) as f32, with cvt::e4m3_to_f32's results: the
// instruction widens to f16 exactly (every e4m3 value is an f16 value), and f16 -> f32 is
// exact; only NaN (0x7f / 0xff) differs, which the rule returns as sign | 0x7fc00000.
__device__ __forceinline__ void e4m3_pair_to_f32(uint32_t pair, float& lo, float& hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  lo = kvp::pool::cvt::e4m3_to_f32(static_cast<uint8_t>(pair));
  hi = kvp::pool::cvt::e4m3_to_f32(static_cast<uint8_t>(pair >> 8));
#else
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  lo = __half2float(__half(__half_raw{h.x}));
  hi = __half2float(__half(__half_raw{h.y}));
  if ((pair & 0x7fu) == 0x7fu) lo = __uint_as_float(((pair & 0x80u) << 24) | 0x7fc00000u);
  if ((pair & 0x7f00u) == 0x7f00u) hi = __uint_as_float(((pair & 0x8000u) << 16) | 0x7fc00000u);
#endif
}

// cvt::div_f32 / cvt::mul_f32 with the NaN pinning only where the result is NaN (rare, so
// the branch is almost never taken): pin_nan returns a non-NaN result unchanged, so the
// values are the same; the rule's branch-free selects cost ~10 operations a value.
__device__ __forceinline__ float div_pinned(float a, float b) {
  const float r = a / b;
  return kvp::pool::cvt::is_nan_f32(r) ? kvp::pool::cvt::pin_nan(r, a, b) : r;
}
__device__ __forceinline__ float mul_pinned(float a, float b) {
  const float r = a * b;
  return kvp::pool::cvt::is_nan_f32(r) ? kvp::pool::cvt::pin_nan(r, a, b) : r;
}

}  // namespace kvp::pool::dev
