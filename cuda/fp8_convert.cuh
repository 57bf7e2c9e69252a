// f32 -> fp8 e4m3fn pairs with the GPU's conversion instruction, giving exactly the
// bytes of the scalar rule cvt::f32_to_e4m3 (pool/dtype_convert.hpp) that the CPU
// backend and every other kernel use.
//
// Why: the scalar rule is ~25 integer operations a value, which made fp8 KV writes
// compute-bound (10 % of the copy limit with the per-value kernel); sm_89+ converts two
// values in one instruction. The instruction rounds to nearest even like the rule, but
// it saturates (.satfinite: past 448 it returns 448, NaN stays NaN), where the rule maps
// every magnitude past 464 (halfway between 448 and the next step), infinity and NaN to
// NaN (sign | 0x7f). Those inputs are patched after the conversion. The exhaustive GPU
// test (tests/gpu/gpu_fp8_convert_test.cu) compares every f32 bit pattern.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace kvp::pool::dev {

// The two e4m3 bytes of lo (bits 0-7) and hi (bits 8-15).
__device__ __forceinline__ uint32_t e4m3_pair(float lo, float hi) {
  uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
  const uint32_t xl = __float_as_uint(lo), xh = __float_as_uint(hi);
  if ((xl & 0x7fffffffu) > 0x43e80000u) pair = (pair & 0xff00u) | ((xl >> 24) & 0x80u) | 0x7fu;
  if ((xh & 0x7fffffffu) > 0x43e80000u) pair = (pair & 0x00ffu) | (((xh >> 24) & 0x80u) | 0x7fu) << 8;
  return pair;
}

}  // namespace kvp::pool::dev
