// AVX2 versions of the per-value conversions of row_codec.cpp, eight values
// per instruction. Each one is a lane-wise transcription of the scalar rule
// in dtype_convert.hpp (the same integer steps, the same single f32 addition
// or product where the scalar code has one), so the bytes are identical;
// tests/unit/row_codec_test.cpp checks that exhaustively over bf16 / f16 /
// fp8 inputs and over 2^24 f32 inputs. Compiled for AVX2 with a target pragma
// (not -mavx2 on the file) and called only when the CPU has AVX2, so the
// library still runs on any x86-64; other architectures get no kernels here.
#include "pool/row_codec_kernels.hpp"

#include <cstring>
#include <type_traits>

#include "pool/dtype_convert.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVP_AVX2_KERNELS 1
#endif

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

inline V k(uint32_t x) { return _mm256_set1_epi32(static_cast<int>(x)); }
// a where the lane of c is all ones, else b (cvt::select, per lane).
inline V sel(V c, V a, V b) { return _mm256_blendv_epi8(b, a, c); }
// Signed compare: every caller compares values below 2^31 (magnitudes,
// exponent fields, codes), where it agrees with the scalar unsigned compare.
inline V gt(V a, V b) { return _mm256_cmpgt_epi32(a, b); }
inline V eq(V a, V b) { return _mm256_cmpeq_epi32(a, b); }
inline V band(V a, V b) { return _mm256_and_si256(a, b); }
inline V bor(V a, V b) { return _mm256_or_si256(a, b); }
inline V add(V a, V b) { return _mm256_add_epi32(a, b); }
inline V sub(V a, V b) { return _mm256_sub_epi32(a, b); }
inline V as_bits(__m256 f) { return _mm256_castps_si256(f); }
inline __m256 as_f32(V v) { return _mm256_castsi256_ps(v); }

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

inline V is_nan(V x) { return gt(band(x, k(0x7fffffffu)), k(0x7f800000u)); }

// cvt::div_f32: IEEE division with the NaN result pinned as the scalar does.
inline V div_pinned(V a, V b) {
  const V r = as_bits(_mm256_div_ps(as_f32(a), as_f32(b)));
  const V made = bor(k(0x7fc00000u), band(_mm256_xor_si256(a, b), k(0x80000000u)));
  const V nan = sel(is_nan(a), a, sel(is_nan(b), b, made));
  return sel(is_nan(r), nan, r);
}

// cvt::round_magnitude, lane-wise.
template <int M, int BIAS>
inline V round_magnitude(V ax) {
  constexpr uint32_t kMinNormal = uint32_t(127 - BIAS + 1) << 23;
  constexpr int kDrop = 23 - M;
  const V odd = band(_mm256_srli_epi32(ax, kDrop), k(1));
  const V normal = _mm256_srli_epi32(
      sub(add(add(ax, k((1u << (kDrop - 1)) - 1u)), odd), k(uint32_t(127 - BIAS) << 23)), kDrop);
  const uint32_t c_bits = uint32_t(127 + 1 - BIAS - M + 23) << 23;
  const V subnormal = sub(as_bits(_mm256_add_ps(as_f32(ax), as_f32(k(c_bits)))), k(c_bits));
  return sel(gt(ax, k(kMinNormal - 1)), normal, subnormal);
}

inline V f16_bits_to_f32(V h) {
  const V sign = _mm256_slli_epi32(band(h, k(0x8000u)), 16);
  const V exp = band(_mm256_srli_epi32(h, 10), k(0x1fu));
  const V mant = band(h, k(0x3ffu));
  const V special = bor(k(0x7f800000u), _mm256_slli_epi32(mant, 13));
  const V normal = bor(_mm256_slli_epi32(add(exp, k(112)), 23), _mm256_slli_epi32(mant, 13));
  const V subnormal = as_bits(_mm256_mul_ps(_mm256_cvtepi32_ps(mant), as_f32(k(0x33800000u))));
  return bor(sign, sel(eq(exp, k(0x1fu)), special, sel(eq(exp, k(0)), subnormal, normal)));
}

// Element formats: load eight values as f32 bits; code(x) gives each lane's
// output bits (the scalar rule's result before it is narrowed to the format).
inline V load_u16(const uint8_t* p) {
  return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline V load_u8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

struct F32 {
  static constexpr size_t kBytes = 4;
  static V load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
  static V code(V x) { return x; }
};

struct BF16 {
  static constexpr size_t kBytes = 2;
  static V load(const uint8_t* p) { return _mm256_slli_epi32(load_u16(p), 16); }
  static V code(V x) {
    const V upper = _mm256_srli_epi32(x, 16);
    const V rounded = _mm256_srli_epi32(add(add(x, k(0x7fffu)), band(upper, k(1))), 16);
    const V nan = bor(upper, k(0x0040u));
    return sel(is_nan(x), nan, rounded);
  }
};

struct F16 {
  static constexpr size_t kBytes = 2;
  static V load(const uint8_t* p) { return f16_bits_to_f32(load_u16(p)); }
  static V code(V x) {
    const V sign = band(_mm256_srli_epi32(x, 16), k(0x8000u));
    const V ax = band(x, k(0x7fffffffu));
    const V code = round_magnitude<10, 15>(ax);
    const V finite = sel(gt(k(0x7c00u), code), code, k(0x7c00u));
    const V nan = bor(k(0x7e00u), band(_mm256_srli_epi32(ax, 13), k(0x3ffu)));
    return bor(sign, sel(gt(ax, k(0x7f800000u)), nan, finite));
  }
};

struct E4M3 {
  static constexpr size_t kBytes = 1;
  static V load(const uint8_t* p) {
    const V b = load_u8(p);
    const V sign = _mm256_slli_epi32(band(b, k(0x80u)), 24);
    const V exp = band(_mm256_srli_epi32(b, 3), k(0xfu));
    const V mant = band(b, k(0x7u));
    const V normal = bor(_mm256_slli_epi32(add(exp, k(120)), 23), _mm256_slli_epi32(mant, 20));
    const V subnormal = as_bits(_mm256_mul_ps(_mm256_cvtepi32_ps(mant), as_f32(k(0x3b000000u))));
    const V magnitude = sel(eq(band(b, k(0x7fu)), k(0x7fu)), k(0x7fc00000u), sel(eq(exp, k(0)), subnormal, normal));
    return bor(sign, magnitude);
  }
  static V code(V x) {
    const V sign = band(_mm256_srli_epi32(x, 24), k(0x80u));
    const V ax = band(x, k(0x7fffffffu));
    const V code = round_magnitude<3, 7>(ax);
    return bor(sign, sel(gt(ax, k(0x43e80000u)), k(0x7fu), code));
  }
};

struct E5M2 {
  static constexpr size_t kBytes = 1;
  static V load(const uint8_t* p) { return f16_bits_to_f32(_mm256_slli_epi32(load_u8(p), 8)); }
  static V code(V x) {
    const V sign = band(_mm256_srli_epi32(x, 24), k(0x80u));
    const V ax = band(x, k(0x7fffffffu));
    const V code = round_magnitude<2, 15>(ax);
    const V finite = sel(gt(k(0x7cu), code), code, k(0x7cu));
    return bor(sign, sel(gt(ax, k(0x7f800000u)), k(0x7fu), finite));
  }
};

// One 32-byte output block per step; returns the values converted (a whole
// number of blocks), the scalar kernel does the rest.
template <class In, class Out, bool kDivide, bool kStream>
size_t encode_vec(const uint8_t* s, uint8_t* d, size_t count, float divisor) {
  constexpr size_t kValues = 32 / Out::kBytes;
  const V dv = as_bits(_mm256_set1_ps(divisor));
  size_t j = 0;
  for (; j + kValues <= count; j += kValues) {
    V lanes[kValues / 8];
    for (size_t q = 0; q < kValues / 8; ++q) {
      V x = In::load(s + (j + 8 * q) * In::kBytes);
      if constexpr (kDivide) x = div_pinned(x, dv);
      lanes[q] = Out::code(x);
    }
    store_block<kStream>(d + j * Out::kBytes, pack_block<Out::kBytes>(lanes));
  }
  return j;
}

template <class Stored, class Out, bool kStream>
size_t decode_vec(const uint8_t* s, uint8_t* d, size_t count) {
  return encode_vec<Stored, Out, false, kStream>(s, d, count, 1.0f);
}

// bf16 <-> e4m3 without dividing, the fp8 pools' usual traffic, on sixteen
// 16-bit lanes at a time rather than eight f32 lanes. Every bf16 value is an
// f32 whose low half is zero, so the scalar rule reduces to 16-bit integer
// steps; the exhaustive bf16 test checks each of the 2^16 inputs.
//
// Encode: |x| >= 2^-6 (bf16 magnitude 0x3c80) is an e4m3 normal, rounded to
// even on the 4 dropped mantissa bits; above 0x43e8 (464, the tie to 448) and
// inf / NaN give 0x7f; at most 0x3a80 (2^-10, whose x 2^9 is the tie 0.5)
// rounds to a zero code. Magnitudes between those two, the e4m3 subnormals,
// send their whole block to the f32-lane kernel above.
template <bool kStream>
size_t encode_bf16_e4m3(const uint8_t* s, uint8_t* d, size_t count, float /*divisor*/) {
  const V k7fff = _mm256_set1_epi16(0x7fff), k80 = _mm256_set1_epi16(0x80), k1 = _mm256_set1_epi16(1);
  const V k7 = _mm256_set1_epi16(7), bias = _mm256_set1_epi16(0x3c00), nan_above = _mm256_set1_epi16(0x43e8);
  const V k7f = _mm256_set1_epi16(0x7f), min_normal = _mm256_set1_epi16(0x3c80), zero_to = _mm256_set1_epi16(0x3a80);
  size_t j = 0;
  for (; j + 32 <= count; j += 32) {
    V out[2];
    V mid = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const V x = _mm256_loadu_si256(reinterpret_cast<const V*>(s + 2 * (j + 16 * h)));
      const V ax = _mm256_and_si256(x, k7fff);
      const V sign = _mm256_and_si256(_mm256_srli_epi16(x, 8), k80);
      const V odd = _mm256_and_si256(_mm256_srli_epi16(ax, 4), k1);
      const V normal = _mm256_srli_epi16(_mm256_sub_epi16(_mm256_add_epi16(_mm256_add_epi16(ax, k7), odd), bias), 4);
      const V code = _mm256_blendv_epi8(normal, k7f, _mm256_cmpgt_epi16(ax, nan_above));
      const V small = _mm256_cmpgt_epi16(min_normal, ax);  // signed compares: ax <= 0x7fff
      mid = _mm256_or_si256(mid, _mm256_and_si256(_mm256_cmpgt_epi16(ax, zero_to), small));
      out[h] = _mm256_or_si256(sign, _mm256_andnot_si256(small, code));
    }
    if (!_mm256_testz_si256(mid, mid)) {
      encode_vec<BF16, E4M3, false, kStream>(s + 2 * j, d + j, 32, 1.0f);
      continue;
    }
    // packus pairs 128-bit halves: qwords come out as 0,2,1,3 of the wanted order.
    store_block<kStream>(d + j, _mm256_permute4x64_epi64(_mm256_packus_epi16(out[0], out[1]), 0xD8));
  }
  return j;
}

// Decode: e4m3 values are exact in bf16, so the result is the f32's upper
// half: (byte & 0x7f) << 4 rebiased for normals, a table for the 8 subnormal
// codes, 0x7fc0 for NaN, and the sign bit.
template <bool kStream>
size_t decode_e4m3_bf16(const uint8_t* s, uint8_t* d, size_t count) {
  // Subnormal m x 2^-9 as bf16, m = 0..7: 0, 0x3b00, 0x3b80, 0x3bc0, 0x3c00, 0x3c20, 0x3c40, 0x3c60 (twice, per half).
  const V lo = _mm256_setr_epi8(0, 0, static_cast<char>(0x80), static_cast<char>(0xc0), 0, 0x20, 0x40, 0x60, 0, 0, 0, 0,
                                0, 0, 0, 0, 0, 0, static_cast<char>(0x80), static_cast<char>(0xc0), 0, 0x20, 0x40, 0x60,
                                0, 0, 0, 0, 0, 0, 0, 0);
  const V hi = _mm256_setr_epi8(0, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x3b, 0x3b,
                                0x3c, 0x3c, 0x3c, 0x3c, 0, 0, 0, 0, 0, 0, 0, 0);
  const V k7f = _mm256_set1_epi16(0x7f), k78 = _mm256_set1_epi16(0x78), k80 = _mm256_set1_epi16(0x80);
  const V rebias = _mm256_set1_epi16(120 << 7), nan = _mm256_set1_epi16(0x7fc0), low_byte = _mm256_set1_epi16(0xff);
  size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const V b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j)));
    const V mag = _mm256_and_si256(b, k7f);
    const V sign = _mm256_slli_epi16(_mm256_and_si256(b, k80), 8);
    const V normal = _mm256_add_epi16(_mm256_slli_epi16(mag, 4), rebias);
    const V sub = _mm256_or_si256(_mm256_and_si256(_mm256_shuffle_epi8(lo, mag), low_byte),
                                  _mm256_slli_epi16(_mm256_shuffle_epi8(hi, mag), 8));
    V r = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi16(_mm256_and_si256(b, k78), _mm256_setzero_si256()));
    r = _mm256_blendv_epi8(r, nan, _mm256_cmpeq_epi16(mag, k7f));
    store_block<kStream>(d + 2 * j, _mm256_or_si256(r, sign));
  }
  return j;
}

// The same for e5m2 (bias 15, 2 mantissa bits): normals from 2^-14 (0x3880),
// rounded on 5 dropped bits and clipped to inf (0x7c), NaN above 0x7f80,
// zero codes up to 2^-17 (0x3700, the tie below the smallest subnormal).
template <bool kStream>
size_t encode_bf16_e5m2(const uint8_t* s, uint8_t* d, size_t count, float /*divisor*/) {
  const V k7fff = _mm256_set1_epi16(0x7fff), k80 = _mm256_set1_epi16(0x80), k1 = _mm256_set1_epi16(1);
  const V k15 = _mm256_set1_epi16(15), bias = _mm256_set1_epi16(0x3800), nan_above = _mm256_set1_epi16(0x7f80);
  const V k7f = _mm256_set1_epi16(0x7f), inf = _mm256_set1_epi16(0x7c);
  const V min_normal = _mm256_set1_epi16(0x3880), zero_to = _mm256_set1_epi16(0x3700);
  size_t j = 0;
  for (; j + 32 <= count; j += 32) {
    V out[2];
    V mid = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const V x = _mm256_loadu_si256(reinterpret_cast<const V*>(s + 2 * (j + 16 * h)));
      const V ax = _mm256_and_si256(x, k7fff);
      const V sign = _mm256_and_si256(_mm256_srli_epi16(x, 8), k80);
      const V odd = _mm256_and_si256(_mm256_srli_epi16(ax, 5), k1);
      const V normal = _mm256_srli_epi16(_mm256_sub_epi16(_mm256_add_epi16(_mm256_add_epi16(ax, k15), odd), bias), 5);
      const V finite = _mm256_blendv_epi8(inf, normal, _mm256_cmpgt_epi16(inf, normal));
      const V code = _mm256_blendv_epi8(finite, k7f, _mm256_cmpgt_epi16(ax, nan_above));
      const V small = _mm256_cmpgt_epi16(min_normal, ax);
      mid = _mm256_or_si256(mid, _mm256_and_si256(_mm256_cmpgt_epi16(ax, zero_to), small));
      out[h] = _mm256_or_si256(sign, _mm256_andnot_si256(small, code));
    }
    if (!_mm256_testz_si256(mid, mid)) {
      encode_vec<BF16, E5M2, false, kStream>(s + 2 * j, d + j, 32, 1.0f);
      continue;
    }
    store_block<kStream>(d + j, _mm256_permute4x64_epi64(_mm256_packus_epi16(out[0], out[1]), 0xD8));
  }
  return j;
}

// e5m2 -> bf16: (byte & 0x7f) << 5 rebiased for normals, a table for the 3
// subnormal codes, inf / NaN (payload kept, NaN made quiet) for exponent 31.
template <bool kStream>
size_t decode_e5m2_bf16(const uint8_t* s, uint8_t* d, size_t count) {
  // m x 2^-16 as bf16, m = 0..3: 0, 0x3780, 0x3800, 0x3840 (per 128-bit half).
  const V lo = _mm256_setr_epi8(0, static_cast<char>(0x80), 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                static_cast<char>(0x80), 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const V hi = _mm256_setr_epi8(0, 0x37, 0x38, 0x38, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x37, 0x38, 0x38, 0, 0, 0,
                                0, 0, 0, 0, 0, 0, 0, 0, 0);
  const V k7f = _mm256_set1_epi16(0x7f), k7c = _mm256_set1_epi16(0x7c), k80 = _mm256_set1_epi16(0x80);
  const V k3 = _mm256_set1_epi16(3), quiet = _mm256_set1_epi16(0x40), inf = _mm256_set1_epi16(0x7f80);
  const V rebias = _mm256_set1_epi16(112 << 7), low_byte = _mm256_set1_epi16(0xff), zero = _mm256_setzero_si256();
  size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const V b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j)));
    const V mag = _mm256_and_si256(b, k7f);
    const V m2 = _mm256_and_si256(b, k3);
    const V sign = _mm256_slli_epi16(_mm256_and_si256(b, k80), 8);
    const V normal = _mm256_add_epi16(_mm256_slli_epi16(mag, 5), rebias);
    const V sub = _mm256_or_si256(_mm256_and_si256(_mm256_shuffle_epi8(lo, mag), low_byte),
                                  _mm256_slli_epi16(_mm256_shuffle_epi8(hi, mag), 8));
    const V special = _mm256_or_si256(_mm256_or_si256(inf, _mm256_slli_epi16(m2, 5)),
                                      _mm256_andnot_si256(_mm256_cmpeq_epi16(m2, zero), quiet));
    V r = _mm256_blendv_epi8(normal, sub, _mm256_cmpeq_epi16(_mm256_and_si256(b, k7c), zero));
    r = _mm256_blendv_epi8(r, special, _mm256_cmpeq_epi16(_mm256_and_si256(b, k7c), k7c));
    store_block<kStream>(d + 2 * j, _mm256_or_si256(r, sign));
  }
  return j;
}

template <class In, bool kDivide, bool kStream>
VecEncodeFn encode_to(config::DType kv) {
  if constexpr (std::is_same_v<In, BF16> && !kDivide) {
    if (kv == config::DType::kFP8E4M3) return &encode_bf16_e4m3<kStream>;
    if (kv == config::DType::kFP8E5M2) return &encode_bf16_e5m2<kStream>;
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
    if (kv == config::DType::kFP8E4M3) return &decode_e4m3_bf16<kStream>;
    if (kv == config::DType::kFP8E5M2) return &decode_e5m2_bf16<kStream>;
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

VecDecodeFn avx2_decode(config::DType kv, Wide out, bool stream) {
#if defined(KVP_AVX2_KERNELS)
  if (cpu_has_avx2()) return avx2_decode_impl(kv, out, stream);
#endif
  (void)kv, (void)out, (void)stream;
  return nullptr;
}

}  // namespace kvp::pool::kernels
