// Scalar conversions between f32 and the KV storage types, bit-exact and
// shared by the host code and (later) CUDA kernels: every function is inline
// and KVP_HD, so a kernel including this header produces the same bytes as
// the CPU backend. docs/buffers.md states the rules; summary:
//  - f16, fp8_e4m3fn, fp8_e5m2: round to nearest, ties to even, subnormals kept;
//  - f16 / e5m2 overflow to +-inf; e4m3fn has no inf: a magnitude that rounds
//    above 448 (and inf, NaN) becomes NaN 0x7F|sign, as PyTorch's cast does;
//  - bf16: round to nearest even, NaN stays NaN (quiet bit set);
//  - fp4_e2m1: 4-bit codes relative to a per-block scale (see fp4_* below).
// No <cmath>: only integer bit manipulation and IEEE f32 + - * /, which the
// host and the device evaluate identically.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVP_HD __host__ __device__
#else
#define KVP_HD
#endif

namespace kvp::pool::cvt {

KVP_HD inline uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

KVP_HD inline float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// a if c else b, as bit masks: both operands are computed unconditionally, so
// compilers keep loops over these functions branch-free (vectorisable) instead
// of sinking the f32 addition below into a branch it may not speculate.
KVP_HD inline uint32_t select(bool c, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

KVP_HD inline bool is_nan_f32(float x) { return (f32_bits(x) & 0x7fffffffu) > 0x7f800000u; }

// f32 division and product with every NaN result pinned down. IEEE leaves a
// NaN's sign and payload to the hardware (x86 keeps an operand's, CUDA returns
// 0x7fffffff), and those bits reach the stored bytes (an fp8 NaN's sign, a bf16
// NaN's payload). Here a NaN operand comes back unchanged (the first one), and
// a NaN made from numbers (inf / inf, 0 x inf) is 0x7fc00000 with the sign the
// operation gives.
KVP_HD inline float pin_nan(float r, float a, float b) {
  const uint32_t made = 0x7fc00000u | ((f32_bits(a) ^ f32_bits(b)) & 0x80000000u);
  const uint32_t nan = select(is_nan_f32(a), f32_bits(a), select(is_nan_f32(b), f32_bits(b), made));
  return bits_f32(select(is_nan_f32(r), nan, f32_bits(r)));
}

KVP_HD inline float div_f32(float a, float b) { return pin_nan(a / b, a, b); }
KVP_HD inline float mul_f32(float a, float b) { return pin_nan(a * b, a, b); }

// Rounds a non-negative f32 magnitude (bits `ax`, at most 0x7fffffff) to a
// binary format with M stored mantissa bits and exponent bias BIAS, ties to
// even. Returns exponent_field << M | mantissa without an upper bound: the
// caller maps codes past the format's largest finite value (and inf / NaN,
// which land there) to inf or NaN. Both paths are computed and one is
// selected, so loops over it vectorise.
template <int M, int BIAS>
KVP_HD inline uint32_t round_magnitude(uint32_t ax) {
  constexpr uint32_t kMinNormal = uint32_t(127 - BIAS + 1) << 23;  // 2^(1 - BIAS)
  // Normal in the target: re-bias the exponent and drop 23 - M mantissa bits,
  // rounding to even; a carry out of the mantissa correctly bumps the exponent.
  constexpr int kDrop = 23 - M;
  const uint32_t normal = (ax + ((1u << (kDrop - 1)) - 1u) + ((ax >> kDrop) & 1u) - (uint32_t(127 - BIAS) << 23)) >> kDrop;
  // Subnormal in the target: adding C = 2^23 units (unit = 2^(1 - BIAS - M))
  // leaves a sum whose last mantissa bit is one unit, so the f32 addition
  // itself rounds |x| to whole units, ties to even; the units are the code
  // (reaching 2^M units gives the smallest normal's code, as it should).
  // f32 subnormal inputs are far below half a unit: flushing them is harmless.
  const float c = bits_f32(uint32_t(127 + 1 - BIAS - M + 23) << 23);
  const uint32_t subnormal = f32_bits(bits_f32(ax) + c) - f32_bits(c);
  return select(ax >= kMinNormal, normal, subnormal);
}

// ---- f16 (IEEE binary16) ----

KVP_HD inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t code = round_magnitude<10, 15>(ax);
  const uint32_t finite = select(code < 0x7c00u, code, 0x7c00u);  // overflow and inf: inf
  const uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);       // quiet, top payload bits kept
  return static_cast<uint16_t>(sign | select(ax > 0x7f800000u, nan, finite));
}

KVP_HD inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  const uint32_t special = 0x7f800000u | (mant << 13);  // inf / NaN, payload kept
  const uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
  const uint32_t subnormal = f32_bits(static_cast<float>(mant) * bits_f32(0x33800000u));  // mant x 2^-24, exact
  return bits_f32(sign | select(exp == 0x1fu, special, select(exp != 0, normal, subnormal)));
}

// ---- bf16 ----

KVP_HD inline uint16_t f32_to_bf16(float f) {
  const uint32_t x = f32_bits(f);
  // Round to nearest even on the upper half; overflow carries into inf, f32
  // subnormals become bf16 subnormals. NaN keeps its upper half, made quiet.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>(select((x & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

KVP_HD inline float bf16_to_f32(uint16_t b) { return bits_f32(uint32_t(b) << 16); }

// ---- fp8 e4m3fn (bias 7, max 448, no inf; 0x7F / 0xFF are NaN) ----

KVP_HD inline uint8_t f32_to_e4m3(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7fffffffu;
  // 464 = halfway between 448 and 480: ties go to 448 (even mantissa), anything
  // larger (also inf and NaN) rounds past the largest finite value: NaN.
  const uint32_t code = round_magnitude<3, 7>(ax);
  return static_cast<uint8_t>(sign | select(ax > 0x43e80000u, 0x7fu, code));
}

KVP_HD inline float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = uint32_t(b & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xfu;
  const uint32_t mant = b & 0x7u;
  const uint32_t normal = ((exp + 120u) << 23) | (mant << 20);
  const uint32_t subnormal = f32_bits(static_cast<float>(mant) * bits_f32(0x3b000000u));  // mant x 2^-9, exact
  const uint32_t magnitude = select((b & 0x7fu) == 0x7fu, 0x7fc00000u, select(exp != 0, normal, subnormal));
  return bits_f32(sign | magnitude);
}

// ---- fp8 e5m2 (the upper byte of an f16) ----

KVP_HD inline uint8_t f32_to_e5m2(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7fffffffu;
  const uint32_t code = round_magnitude<2, 15>(ax);
  const uint32_t finite = select(code < 0x7cu, code, 0x7cu);  // overflow and inf: inf
  return static_cast<uint8_t>(sign | select(ax > 0x7f800000u, 0x7fu, finite));
}

KVP_HD inline float e5m2_to_f32(uint8_t b) { return f16_to_f32(static_cast<uint16_t>(uint32_t(b) << 8)); }

// ---- fp4 e2m1 with block-16 fp8_e4m3 scales ----
//
// A block of 16 consecutive values x shares the scale byte s = e4m3(amax / 6)
// (amax = largest |x|, NaN ignored). Each value becomes sign << 3 | code, where
// code picks the nearest of {0, 0.5, 1, 1.5, 2, 3, 4, 6} to |x| / scale (ties
// to the even code, saturating at 6); a zero scale gives nibble 0 everywhere.

constexpr int kFp4Block = 16;

KVP_HD inline float fp4_magnitude(uint32_t code) {
  // code = e(2) m(1): 0, 0.5, 1, 1.5, 2, 3, 4, 6
  const uint32_t e = (code >> 1) & 3u, m = code & 1u;
  if (e == 0) return m != 0 ? 0.5f : 0.0f;
  return static_cast<float>(2u + m) * static_cast<float>(1u << e) * 0.25f;
}

// Nearest code to a non-negative quotient: one step per midpoint passed, with
// ties to the even code (0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2,
// 3.5 -> 4, 5 -> 4), saturating at 6. A NaN quotient passes no midpoint: code 0.
KVP_HD inline uint32_t fp4_code(float q) {
  return static_cast<uint32_t>(q > 0.25f) + static_cast<uint32_t>(q >= 0.75f) + static_cast<uint32_t>(q > 1.25f) +
         static_cast<uint32_t>(q >= 1.75f) + static_cast<uint32_t>(q > 2.5f) + static_cast<uint32_t>(q >= 3.5f) +
         static_cast<uint32_t>(q > 5.0f);
}

KVP_HD inline float abs_f32(float x) { return bits_f32(f32_bits(x) & 0x7fffffffu); }

// Largest |x| over n values; NaN never compares greater, so it is ignored.
KVP_HD inline float amax_f32(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = abs_f32(x[i]);
    if (a > amax) amax = a;
  }
  return amax;
}

KVP_HD inline uint8_t fp4_block_scale(const float* x) { return f32_to_e4m3(amax_f32(x, kFp4Block) / 6.0f); }

// Quantises 16 values into 8 bytes (value 2j in the low nibble of byte j) and
// returns the scale byte. Flat loops without branches, so they vectorise.
KVP_HD inline uint8_t fp4_quantize_block(const float* x, uint8_t* packed) {
  const uint8_t scale_byte = fp4_block_scale(x);
  const float scale = e4m3_to_f32(scale_byte);
  const uint32_t keep = select(scale != 0.0f, 0xfu, 0u);  // a zero scale zeroes every nibble
  uint8_t nibbles[kFp4Block];
  for (int i = 0; i < kFp4Block; ++i) {
    const uint32_t bits = f32_bits(x[i]);
    const float q = bits_f32(bits & 0x7fffffffu) / scale;
    nibbles[i] = static_cast<uint8_t>((((bits >> 28) & 0x8u) | fp4_code(q)) & keep);
  }
  for (int j = 0; j < kFp4Block / 2; ++j) packed[j] = static_cast<uint8_t>(nibbles[2 * j] | (nibbles[2 * j + 1] << 4));
  return scale_byte;
}

KVP_HD inline float fp4_dequantize(uint32_t nibble, float scale) {
  // The sign goes on as a bit, so a NaN scale gives a NaN of the nibble's sign.
  const float v = mul_f32(fp4_magnitude(nibble & 7u), scale);
  return bits_f32(f32_bits(v) | ((nibble & 8u) << 28));
}

// ---- nsa packed rows: fp8_e4m3 nope values with one f32 scale per 128 ----

constexpr int kNsaBlock = 128;

// The divisor of a block of nope values: amax / 448, or 1 for an all-zero block.
KVP_HD inline float nsa_block_scale(float amax) { return amax == 0.0f ? 1.0f : amax / 448.0f; }

}  // namespace kvp::pool::cvt
