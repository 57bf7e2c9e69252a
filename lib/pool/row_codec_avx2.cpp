// AVX2 versions of the per-value conversions of row_codec.cpp, eight values
// per instruction (sixteen for bf16 <-> fp8; the per-value rules themselves
// are row_codec_lanes32.inc, shared with AVX-512), and of its fp4_e2m1 block
// quantisation (one 16-value block per step). Each one is a lane-wise
// transcription of the scalar rule in dtype_convert.hpp (the same integer
// steps, the same single f32 addition, product or division where the scalar
// code has one), so the bytes are identical; tests/unit/row_codec_test.cpp
// checks that exhaustively over bf16 / f16 / fp8 inputs (and every fp4 byte
// with every scale byte) and over 2^24 f32 inputs. Compiled for AVX2 with a
// target pragma (not -mavx2 on the file) and called only when the CPU has
// AVX2, so the library still runs on any x86-64; other architectures get no
// kernels here.
#include "pool/row_codec_kernels.hpp"

#include <cstring>
#include <type_traits>

#include "pool/dtype_convert.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVP_AVX2_KERNELS 1
#endif

namespace kvp::pool::kernels {
namespace {

// Every e4m3 byte's f32 bits, by the scalar rule (plain code, not AVX2): the
// fp4 reads' block scales.
[[maybe_unused]] const uint32_t* e4m3_f32_bits() {
  static const struct Table {
    uint32_t bits[256];
    Table() {
      for (uint32_t b = 0; b < 256; ++b) bits[b] = cvt::f32_bits(cvt::e4m3_to_f32(static_cast<uint8_t>(b)));
    }
  } table;
  return table.bits;
}

}  // namespace
}  // namespace kvp::pool::kernels

#if defined(KVP_AVX2_KERNELS)
#include <immintrin.h>

// Everything from here to the pop is AVX2 code in an anonymous namespace:
// nothing with external linkage is compiled for AVX2, so no inline function
// the rest of the library shares can end up with AVX2 instructions in it.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif

namespace kvp::pool::kernels {
namespace {

using V = __m256i;  // eight f32 values as their bit patterns
using M = __m256i;  // a condition: all-ones lanes where it holds
constexpr size_t kLanes = 8;

inline V k(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
inline V sel(M c, V a, V b) { return _mm256_blendv_epi8(b, a, c); }
inline M gt(V a, V b) { return _mm256_cmpgt_epi32(a, b); }
inline M eq(V a, V b) { return _mm256_cmpeq_epi32(a, b); }
inline V band(V a, V b) { return _mm256_and_si256(a, b); }
inline V bor(V a, V b) { return _mm256_or_si256(a, b); }
inline V bxor(V a, V b) { return _mm256_xor_si256(a, b); }
inline V add(V a, V b) { return _mm256_add_epi32(a, b); }
inline V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
inline V min_u32(V a, V b) { return _mm256_min_epu32(a, b); }
inline V max_u32(V a, V b) { return _mm256_max_epu32(a, b); }
template <int N>
inline V shr(V a) {
  return _mm256_srli_epi32(a, N);
}
template <int N>
inline V shl(V a) {
  return _mm256_slli_epi32(a, N);
}
inline V as_bits(__m256 f) { return _mm256_castps_si256(f); }
inline __m256 as_f32(V v) { return _mm256_castsi256_ps(v); }
inline V fadd(V a, V b) { return as_bits(_mm256_add_ps(as_f32(a), as_f32(b))); }
inline V fmul(V a, V b) { return as_bits(_mm256_mul_ps(as_f32(a), as_f32(b))); }
inline V fdiv(V a, V b) { return as_bits(_mm256_div_ps(as_f32(a), as_f32(b))); }
inline V i32_to_f32(V a) { return as_bits(_mm256_cvtepi32_ps(a)); }
inline V load_u32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
inline V load_u16(const uint8_t* p) {
  return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline V load_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

// Output blocks of 32 bytes: 8 f32, 16 f16/bf16 or 32 fp8 values, packed from
// u32 lanes holding the output codes (<= 0xffff resp. <= 0xff, so the
// saturating packs are exact) and put back in value order.
template <size_t kOutBytes>
inline V pack_block(const V* lanes) {
  if constexpr (kOutBytes == 4) {
    return lanes[0];
  } else if constexpr (kOutBytes == 2) {
    // packus works within 128-bit halves: qwords come out as 0,2,1,3 of the wanted order.
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(lanes[0], lanes[1]), 0xD8);
  } else {
    const V ab = _mm256_packus_epi32(lanes[0], lanes[1]);
    const V cd = _mm256_packus_epi32(lanes[2], lanes[3]);
    // Dwords come out as values 0-3, 8-11, 16-19, 24-27, 4-7, 12-15, 20-23, 28-31.
    return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
}

// Streaming stores (see util/stream_copy.hpp) need a 32-byte-aligned address;
// the callers only pick the streaming kernels for such rows.
template <bool kStream>
inline void store_block(uint8_t* p, V v) {
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<V*>(p), v);
  } else {
    _mm256_storeu_si256(reinterpret_cast<V*>(p), v);
  }
}

#include "pool/row_codec_lanes32.inc"

// The 16-bit lane operations row_codec_bf16_fp8.inc is written in, on AVX2.
struct Lanes16 {
  using V = __m256i;
  static V load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
  template <bool kStream>
  static void store(uint8_t* p, V v) {
    store_block<kStream>(p, v);
  }
  static V set(int16_t x) { return _mm256_set1_epi16(x); }
  static V set32(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
  static V zero() { return _mm256_setzero_si256(); }
  static V bit_and(V a, V b) { return _mm256_and_si256(a, b); }
  static V bit_or(V a, V b) { return _mm256_or_si256(a, b); }
  static V add(V a, V b) { return _mm256_add_epi16(a, b); }
  static V sub(V a, V b) { return _mm256_sub_epi16(a, b); }
  static V shift_right(V a, int n) { return _mm256_srli_epi16(a, n); }
  static V min(V a, V b) { return _mm256_min_epi16(a, b); }
  // Per lane: a > b (signed) ? x : y.
  static V where_greater(V a, V b, V x, V y) { return _mm256_blendv_epi8(y, x, _mm256_cmpgt_epi16(a, b)); }
  static V interleave_low(V a, V b) { return _mm256_unpacklo_epi16(a, b); }
  static V interleave_high(V a, V b) { return _mm256_unpackhi_epi16(a, b); }
  static V add_f32(V a, V b) { return as_bits(_mm256_add_ps(as_f32(a), as_f32(b))); }
  static V sub32(V a, V b) { return _mm256_sub_epi32(a, b); }
  // The u32 lanes of interleave_low / interleave_high back to u16, in their order.
  static V pack32(V lo, V hi) { return _mm256_packus_epi32(lo, hi); }
  // a's and b's u16 codes (<= 0xff) as bytes, a's first: packus pairs
  // 128-bit halves, so qwords come out as 0,2,1,3 of the wanted order.
  static V pack_bytes_in_order(V a, V b) { return _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xD8); }
};

#include "pool/row_codec_bf16_fp8.inc"

// fp8 -> bf16 / f32: every e4m3 and e5m2 value is exact in bf16, so both
// outputs are the upper 16 bits of the scalar rule's f32 (the lower 16 are
// zero), computed on sixteen 16-bit lanes from one byte per lane. The one
// difference: an e5m2 NaN read as f32 keeps its payload as is, while the bf16
// rule (f32_to_bf16) sets the quiet bit; e4m3's only NaN is already quiet.
//
// e4m3: (byte & 0x7f) << 4 rebiased for normals, a table for the 8 subnormal
// codes, 0x7fc0 for NaN, and the sign bit.
struct E4M3Upper {
  template <bool kQuietNaN>
  static V of(V b) {
    // Subnormal m x 2^-9 as bf16, m = 0..7: 0, 0x3b00, 0x3b80, 0x3bc0, 0x3c00, 0x3c20, 0x3c40, 0x3c60 (per half).
    const V lo = _mm256_setr_epi8(0, 0, static_cast<char>(0x80), static_cast<char>(0xc0), 0, 0x20, 0x40, 0x60, 0, 0,
                                  0, 0, 0, 0, 0, 0, 0, 0, static_cast<char>(0x80), static_cast<char>(0xc0), 0, 0x20,
                                  0x40, 0x60, 0, 0, 0, 0, 0, 0, 0, 0);
    const V hi = _mm256_setr_epi8(0, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x3b,
                                  0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0);
    const V k7f = _mm256_set1_epi16(0x7f);
    const V mag = _mm256_and_si256(b, k7f);
    const V sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
    const V normal = _mm256_add_epi16(_mm256_slli_epi16(mag, 4), _mm256_set1_epi16(120 << 7));
    const V sub = _mm256_or_si256(_mm256_and_si256(_mm256_shuffle_epi8(lo, mag), _mm256_set1_epi16(0xff)),
                                  _mm256_slli_epi16(_mm256_shuffle_epi8(hi, mag), 8));
    const V is_sub = _mm256_cmpeq_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x78)), _mm256_setzero_si256());
    V r = _mm256_blendv_epi8(normal, sub, is_sub);
    r = _mm256_blendv_epi8(r, _mm256_set1_epi16(0x7fc0), _mm256_cmpeq_epi16(mag, k7f));
    return _mm256_or_si256(r, sign);
  }
};

// e5m2: (byte & 0x7f) << 5 rebiased for normals, a table for the 3 subnormal
// codes, inf / NaN (payload kept) for exponent 31.
struct E5M2Upper {
  template <bool kQuietNaN>
  static V of(V b) {
    // m x 2^-16 as bf16, m = 0..3: 0, 0x3780, 0x3800, 0x3840 (per 128-bit half).
    const V lo = _mm256_setr_epi8(0, static_cast<char>(0x80), 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                  static_cast<char>(0x80), 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const V hi = _mm256_setr_epi8(0, 0x37, 0x38, 0x38, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x37, 0x38, 0x38, 0, 0,
                                  0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const V k7c = _mm256_set1_epi16(0x7c), zero = _mm256_setzero_si256();
    const V mag = _mm256_and_si256(b, _mm256_set1_epi16(0x7f));
    const V m2 = _mm256_and_si256(b, _mm256_set1_epi16(3));
    const V sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
    const V normal = _mm256_add_epi16(_mm256_slli_epi16(mag, 5), _mm256_set1_epi16(112 << 7));
    const V sub = _mm256_or_si256(_mm256_and_si256(_mm256_shuffle_epi8(lo, mag), _mm256_set1_epi16(0xff)),
                                  _mm256_slli_epi16(_mm256_shuffle_epi8(hi, mag), 8));
    V special = _mm256_or_si256(_mm256_set1_epi16(0x7f80), _mm256_slli_epi16(m2, 5));
    if constexpr (kQuietNaN) {
      special = _mm256_or_si256(special, _mm256_andnot_si256(_mm256_cmpeq_epi16(m2, zero), _mm256_set1_epi16(0x40)));
    }
    const V exp = _mm256_and_si256(b, k7c);
    V r = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi16(exp, zero));
    r = _mm256_blendv_epi8(r, special, _mm256_cmpeq_epi16(exp, k7c));
    return _mm256_or_si256(r, sign);
  }
};

inline V load_bytes_as_u16(const uint8_t* p) {
  return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <class Fmt, bool kStream>
size_t decode_fp8_bf16(const uint8_t* s, uint8_t* d, size_t count) {
  size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    store_block<kStream>(d + 2 * j, Fmt::template of<true>(load_bytes_as_u16(s + j)));
  }
  return j;
}

// To f32: each upper half gets a zero lower half. The unpacks work within
// 128-bit halves (lo: values 0-3 and 8-11, hi: 4-7 and 12-15), so the two
// output blocks take one 128-bit half of each.
template <class Fmt, bool kStream>
size_t decode_fp8_f32(const uint8_t* s, uint8_t* d, size_t count) {
  const V zero = _mm256_setzero_si256();
  size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const V r = Fmt::template of<false>(load_bytes_as_u16(s + j));
    const V lo = _mm256_unpacklo_epi16(zero, r), hi = _mm256_unpackhi_epi16(zero, r);
    store_block<kStream>(d + 4 * j, _mm256_permute2x128_si256(lo, hi, 0x20));
    store_block<kStream>(d + 4 * j + 32, _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  return j;
}

// fp4_e2m1 -> f32 / f16 / bf16, one 16-value block (8 bytes, one e4m3
// scale) per step: cvt::fp4_dequantize lane-wise. The nibbles (value 2j in
// the low nibble of byte j) are spread to one per lane in value order, the
// magnitude comes from an 8-entry table by the low 3 bits, times the scale,
// then the sign bit, then Out's rounding. mul_f32's NaN pinning reduces to
// one case: magnitudes are finite and e4m3 has no inf, so the product is NaN
// only for a NaN scale, and then it is the scale's bits.
template <class Out>
void decode_fp4_blocks(const uint8_t* values, const uint8_t* scales, size_t blocks, uint8_t* d) {
  const uint32_t* scale_bits = e4m3_f32_bits();
  // 0, 0.5, 1, 1.5, 2, 3, 4, 6 as f32 bits (cvt::fp4_magnitude).
  const V magnitudes = _mm256_setr_epi32(0, 0x3f000000, 0x3f800000, 0x3fc00000, 0x40000000, 0x40400000, 0x40800000,
                                         0x40c00000);
  const __m128i low4 = _mm_set1_epi8(0x0f);
  for (size_t b = 0; b < blocks; ++b) {
    const uint32_t bits = scale_bits[scales[b]];
    const bool nan_scale = (bits & 0x7fffffffu) > 0x7f800000u;
    const V scale = k(bits);
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(values + 8 * b));
    const __m128i nibbles =
        _mm_unpacklo_epi8(_mm_and_si128(bytes, low4), _mm_and_si128(_mm_srli_epi16(bytes, 4), low4));
    V lanes[2];
    for (int h = 0; h < 2; ++h) {
      const V n = _mm256_cvtepu8_epi32(h == 0 ? nibbles : _mm_srli_si128(nibbles, 8));
      const V magnitude = _mm256_permutevar8x32_epi32(magnitudes, n);  // index: n's low 3 bits
      const V value = nan_scale ? scale : as_bits(_mm256_mul_ps(as_f32(magnitude), as_f32(scale)));
      lanes[h] = Out::code(bor(value, _mm256_slli_epi32(band(n, k(8)), 28)));
    }
    uint8_t* out = d + 16 * Out::kBytes * b;
    if constexpr (Out::kBytes == 4) {
      _mm256_storeu_si256(reinterpret_cast<V*>(out), lanes[0]);
      _mm256_storeu_si256(reinterpret_cast<V*>(out + 32), lanes[1]);
    } else {
      _mm256_storeu_si256(reinterpret_cast<V*>(out), pack_block<2>(lanes));
    }
  }
}

// Wide -> fp4_e2m1, one 16-value block per step: cvt::fp4_quantize_block
// lane-wise. amax ignores NaN as the scalar `a > amax` does: maxps returns
// its second operand when either is NaN, and the running maximum is that
// operand. The scale is the e4m3 code of amax / 6 (the same division), the
// nibble code the count of midpoints passed (ordered compares: a NaN quotient
// passes none), zeroed when the scale is 0.
template <class In, bool kDivide>
void encode_fp4_blocks(const uint8_t* s, size_t blocks, float divisor, uint8_t* values, uint8_t* scales) {
  const V dv = as_bits(_mm256_set1_ps(divisor));
  const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(6.0f);
  const __m256 midpoints[7] = {_mm256_set1_ps(0.25f), _mm256_set1_ps(0.75f), _mm256_set1_ps(1.25f),
                               _mm256_set1_ps(1.75f), _mm256_set1_ps(2.5f),  _mm256_set1_ps(3.5f),
                               _mm256_set1_ps(5.0f)};
  // Low byte of each u32 lane to the front of its 128-bit half, then the two halves' dwords together.
  const V low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1, -1,
                                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  for (size_t b = 0; b < blocks; ++b) {
    V x[2];
    __m256 a[2];
    for (int h = 0; h < 2; ++h) {
      x[h] = In::load(s + (16 * b + 8 * h) * In::kBytes);
      if constexpr (kDivide) x[h] = div_pinned(x[h], dv);
      a[h] = as_f32(band(x[h], k(0x7fffffffu)));
    }
    __m256 amax = _mm256_max_ps(a[1], _mm256_max_ps(a[0], zero));
    amax = _mm256_max_ps(amax, _mm256_permute2f128_ps(amax, amax, 1));  // no NaN left: order no longer matters
    amax = _mm256_max_ps(amax, _mm256_shuffle_ps(amax, amax, 0x4e));
    amax = _mm256_max_ps(amax, _mm256_shuffle_ps(amax, amax, 0xb1));
    const V scale_code = E4M3::code(as_bits(_mm256_div_ps(amax, six)));  // equal lanes
    scales[b] = static_cast<uint8_t>(_mm256_cvtsi256_si32(scale_code));
    const __m256 scale = as_f32(E4M3::from_bytes(scale_code));
    const V keep = band(as_bits(_mm256_cmp_ps(scale, zero, _CMP_NEQ_UQ)), k(0xfu));
    V nibbles[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 q = _mm256_div_ps(a[h], scale);
      V code = _mm256_setzero_si256();
      for (int m = 0; m < 7; ++m) {
        // cvt::fp4_code: ">" at 0.25, 1.25, 2.5, 5 and ">=" at 0.75, 1.75, 3.5 (ties to the even code).
        const __m256 passed = m % 2 == 0 ? _mm256_cmp_ps(q, midpoints[m], _CMP_GT_OQ)
                                         : _mm256_cmp_ps(q, midpoints[m], _CMP_GE_OQ);
        code = sub(code, as_bits(passed));  // a passed midpoint is all ones: -1
      }
      nibbles[h] = band(bor(band(_mm256_srli_epi32(x[h], 28), k(8u)), code), keep);
    }
    // u16 values 0-15 in order, then byte j = value 2j | value 2j+1 << 4 in the low byte of u32 lane j.
    const V words = _mm256_permute4x64_epi64(_mm256_packus_epi32(nibbles[0], nibbles[1]), 0xD8);
    const V pairs = _mm256_shuffle_epi8(bor(words, _mm256_srli_epi32(words, 12)), low_bytes);
    const V packed = _mm256_permutevar8x32_epi32(pairs, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(values + 8 * b), _mm256_castsi256_si128(packed));
  }
}

template <bool kDivide>
Fp4EncodeFn encode_fp4_from(Wide in) {
  switch (in) {
    case Wide::kF32: return &encode_fp4_blocks<F32, kDivide>;
    case Wide::kF16: return &encode_fp4_blocks<F16, kDivide>;
    case Wide::kBF16: return &encode_fp4_blocks<BF16, kDivide>;
  }
  return nullptr;
}

Fp4EncodeFn avx2_encode_fp4_impl(Wide in, bool divide) {
  return divide ? encode_fp4_from<true>(in) : encode_fp4_from<false>(in);
}

Fp4DecodeFn avx2_decode_fp4_impl(Wide out) {
  switch (out) {
    case Wide::kF32: return &decode_fp4_blocks<F32>;
    case Wide::kF16: return &decode_fp4_blocks<F16>;
    case Wide::kBF16: return &decode_fp4_blocks<BF16>;
  }
  return nullptr;
}

template <class In, bool kDivide, bool kStream>
VecEncodeFn encode_to(config::DType kv) {
  if constexpr (std::is_same_v<In, BF16> && !kDivide) {
    if (kv == config::DType::kFP8E4M3) return &encode_bf16_fp8<E4M3FromBf16, kStream>;
    if (kv == config::DType::kFP8E5M2) return &encode_bf16_fp8<E5M2FromBf16, kStream>;
  }
  switch (kv) {
    case config::DType::kF32: return &encode_vec<In, F32, kDivide, kStream>;
    case config::DType::kF16: return &encode_vec<In, F16, kDivide, kStream>;
    case config::DType::kBF16: return &encode_vec<In, BF16, kDivide, kStream>;
    case config::DType::kFP8E4M3: return &encode_vec<In, E4M3, kDivide, kStream>;
    case config::DType::kFP8E5M2: return &encode_vec<In, E5M2, kDivide, kStream>;
    case config::DType::kFP4E2M1: return nullptr;  // block quantisation: scalar only
  }
  return nullptr;
}

template <bool kDivide, bool kStream>
VecEncodeFn encode_from(Wide in, config::DType kv) {
  switch (in) {
    case Wide::kF32: return encode_to<F32, kDivide, kStream>(kv);
    case Wide::kF16: return encode_to<F16, kDivide, kStream>(kv);
    case Wide::kBF16: return encode_to<BF16, kDivide, kStream>(kv);
  }
  return nullptr;
}

template <class Out, bool kStream>
VecDecodeFn decode_to(config::DType kv) {
  if constexpr (std::is_same_v<Out, BF16>) {
    if (kv == config::DType::kFP8E4M3) return &decode_fp8_bf16<E4M3Upper, kStream>;
    if (kv == config::DType::kFP8E5M2) return &decode_fp8_bf16<E5M2Upper, kStream>;
  }
  if constexpr (std::is_same_v<Out, F32>) {
    if (kv == config::DType::kFP8E4M3) return &decode_fp8_f32<E4M3Upper, kStream>;
    if (kv == config::DType::kFP8E5M2) return &decode_fp8_f32<E5M2Upper, kStream>;
  }
  switch (kv) {
    case config::DType::kF32: return &decode_vec<F32, Out, kStream>;
    case config::DType::kF16: return &decode_vec<F16, Out, kStream>;
    case config::DType::kBF16: return &decode_vec<BF16, Out, kStream>;
    case config::DType::kFP8E4M3: return &decode_vec<E4M3, Out, kStream>;
    case config::DType::kFP8E5M2: return &decode_vec<E5M2, Out, kStream>;
    case config::DType::kFP4E2M1: return nullptr;
  }
  return nullptr;
}

// The tables, built here so that the selectors below need no AVX2 code.
VecEncodeFn avx2_encode_impl(Wide in, config::DType kv, bool divide, bool stream) {
  if (stream) return divide ? encode_from<true, true>(in, kv) : encode_from<false, true>(in, kv);
  return divide ? encode_from<true, false>(in, kv) : encode_from<false, false>(in, kv);
}

template <bool kStream>
VecDecodeFn decode_table(config::DType kv, Wide out) {
  switch (out) {
    case Wide::kF32: return decode_to<F32, kStream>(kv);
    case Wide::kF16: return decode_to<F16, kStream>(kv);
    case Wide::kBF16: return decode_to<BF16, kStream>(kv);
  }
  return nullptr;
}

VecDecodeFn avx2_decode_impl(config::DType kv, Wide out, bool stream) {
  return stream ? decode_table<true>(kv, out) : decode_table<false>(kv, out);
}

template <bool kStream>
VecEncodeFn decode_scaled_e4m3(Wide out) {
  switch (out) {
    case Wide::kF32: return &decode_scaled_vec<E4M3, F32, kStream>;
    case Wide::kF16: return &decode_scaled_vec<E4M3, F16, kStream>;
    case Wide::kBF16: return &decode_scaled_vec<E4M3, BF16, kStream>;
  }
  return nullptr;
}

VecEncodeFn avx2_decode_scaled_impl(config::DType kv, Wide out, bool stream) {
  if (kv != config::DType::kFP8E4M3) return nullptr;
  return stream ? decode_scaled_e4m3<true>(out) : decode_scaled_e4m3<false>(out);
}

}  // namespace
}  // namespace kvp::pool::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // KVP_AVX2_KERNELS

namespace kvp::pool::kernels {

bool cpu_has_avx2() {
#if defined(KVP_AVX2_KERNELS)
  static const bool has = [] {
    __builtin_cpu_init();  // harmless when the constructors already ran; needed if called before them
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
#else
  return false;
#endif
}

VecEncodeFn avx2_encode(Wide in, config::DType kv, bool divide, bool stream) {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return avx2_encode_impl(in, kv, divide, stream);
#endif
  (void)in, (void)kv, (void)divide, (void)stream;
  return nullptr;
}

Fp4EncodeFn avx2_encode_fp4(Wide in, bool divide) {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return avx2_encode_fp4_impl(in, divide);
#endif
  (void)in, (void)divide;
  return nullptr;
}

Fp4DecodeFn avx2_decode_fp4(Wide out) {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return avx2_decode_fp4_impl(out);
#endif
  (void)out;
  return nullptr;
}

VecEncodeFn avx2_decode_scaled(config::DType kv, Wide out, bool stream) {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return avx2_decode_scaled_impl(kv, out, stream);
#endif
  (void)kv, (void)out, (void)stream;
  return nullptr;
}

AmaxFn avx2_amax_f32() {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return &amax_f32_vec;
#endif
  return nullptr;
}

VecDecodeFn avx2_decode(config::DType kv, Wide out, bool stream) {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return avx2_decode_impl(kv, out, stream);
#endif
  (void)kv, (void)out, (void)stream;
  return nullptr;
}

}  // namespace kvp::pool::kernels
