// The instruction paths of the KV kernels (cuda/fp8_convert.cuh) must give the scalar
// rules' results (pool/dtype_convert.hpp, which the CPU backend uses): every f32 bit
// pattern to e4m3 as the low and as the high value of a pair, every e4m3 byte pair to
// f32, and the pinned division and product over special and random operands.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "fp8_convert.cuh"
#include "gpu_test_env.hpp"
#include "pool/dtype_convert.hpp"

namespace {

namespace cvt = kvp::pool::cvt;

struct Mismatch {
  unsigned long long count;
  uint32_t bits, got, want;
};

// Counts a mismatch; the first one found keeps its input and both results.
__device__ void record(Mismatch* m, uint32_t bits, uint32_t got, uint32_t want) {
  if (atomicAdd(&m->count, 1ull) == 0) {
    m->bits = bits;
    m->got = got;
    m->want = want;
  }
}

// Runs `launch(m)` on a zeroed record and returns what the kernel found.
template <class Launch>
Mismatch compare_on_device(Launch&& launch) {
  Mismatch* m = nullptr;
  Mismatch out{~0ull, 0, 0, 0};  // a failure to run reads as mismatches
  if (cudaMallocManaged(&m, sizeof(Mismatch)) != cudaSuccess) return out;
  *m = Mismatch{0, 0, 0, 0};
  launch(m);
  if (cudaDeviceSynchronize() == cudaSuccess) out = *m;
  cudaFree(m);
  return out;
}

// Pattern a as the low value, a ^ 0x9e3779b9 (every pattern as a does) as the high one.
__global__ void compare_every_f32(Mismatch* m) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < (uint64_t(1) << 32); i += stride) {
    const uint32_t a = static_cast<uint32_t>(i), b = a ^ 0x9e3779b9u;
    const float fa = __uint_as_float(a), fb = __uint_as_float(b);
    const uint32_t got = kvp::pool::dev::e4m3_pair(fa, fb);
    const uint32_t want = cvt::f32_to_e4m3(fa) | uint32_t(cvt::f32_to_e4m3(fb)) << 8;
    if (got != want) record(m, a, got, want);
  }
}

TEST(GpuFp8Convert, PairInstructionGivesTheScalarRuleForEveryF32) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const Mismatch r = compare_on_device([](Mismatch* m) { compare_every_f32<<<132 * 16, 256>>>(m); });
  EXPECT_EQ(r.count, 0ull) << "first: f32 bits 0x" << std::hex << r.bits << " (and 0x" << (r.bits ^ 0x9e3779b9u)
                            << " high): pair 0x" << r.got << ", scalar rule 0x" << r.want;
}

// Every pair of e4m3 bytes widened by the instruction against cvt::e4m3_to_f32.
__global__ void widen_every_pair(Mismatch* m) {
  const uint32_t pair = blockIdx.x * blockDim.x + threadIdx.x;
  if (pair >= 65536u) return;
  float lo, hi;
  kvp::pool::dev::e4m3_pair_to_f32(pair, lo, hi);
  const uint32_t got_lo = __float_as_uint(lo), got_hi = __float_as_uint(hi);
  const uint32_t want_lo = __float_as_uint(cvt::e4m3_to_f32(static_cast<uint8_t>(pair)));
  const uint32_t want_hi = __float_as_uint(cvt::e4m3_to_f32(static_cast<uint8_t>(pair >> 8)));
  if (got_lo != want_lo) record(m, pair, got_lo, want_lo);
  if (got_hi != want_hi) record(m, pair, got_hi, want_hi);
}

TEST(GpuFp8Convert, PairWideningGivesTheScalarRuleForEveryBytePair) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const Mismatch r = compare_on_device([](Mismatch* m) { widen_every_pair<<<256, 256>>>(m); });
  EXPECT_EQ(r.count, 0ull) << "first: bytes 0x" << std::hex << r.bits << ": f32 0x" << r.got << ", scalar rule 0x"
                            << r.want;
}

// Operands: specials (NaNs with payloads and signs, infinities, zeros, extremes,
// subnormals) against each other, then pseudo-random bit patterns.
__device__ uint32_t operand(uint64_t i, uint32_t salt) {
  const uint32_t specials[] = {0x7fc00000u, 0xffc00001u, 0x7f812345u, 0x7f800000u, 0xff800000u, 0x00000000u,
                               0x80000000u, 0x7f7fffffu, 0x00000001u, 0x807fffffu, 0x3f800000u, 0x43e00000u};
  constexpr uint64_t kSpecials = sizeof specials / sizeof specials[0];
  if (i < kSpecials * kSpecials) return specials[salt == 0 ? i / kSpecials : i % kSpecials];
  uint64_t x = (i + salt) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return static_cast<uint32_t>(x >> 32);
}

__global__ void compare_pinned(Mismatch* m, uint64_t n) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float a = __uint_as_float(operand(i, 0)), b = __uint_as_float(operand(i, 1));
    const uint32_t got_div = __float_as_uint(kvp::pool::dev::div_pinned(a, b));
    const uint32_t got_mul = __float_as_uint(kvp::pool::dev::mul_pinned(a, b));
    const uint32_t want_div = __float_as_uint(cvt::div_f32(a, b));
    const uint32_t want_mul = __float_as_uint(cvt::mul_f32(a, b));
    if (got_div != want_div) record(m, static_cast<uint32_t>(i), got_div, want_div);
    if (got_mul != want_mul) record(m, static_cast<uint32_t>(i), got_mul, want_mul);
  }
}

TEST(GpuFp8Convert, PinnedDivisionAndProductGiveTheScalarRule) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const Mismatch r = compare_on_device([](Mismatch* m) { compare_pinned<<<132 * 8, 256>>>(m, uint64_t(1) << 28); });
  EXPECT_EQ(r.count, 0ull) << "first: operand pair " << r.bits << std::hex << ": 0x" << r.got
                            << ", scalar rule 0x" << r.want;
}

}  // namespace
