// AVX-512 (BW, VBMI) fp8 -> bf16 / f32 decoders and bf16 -> fp8 encoders: an
// extra path for CPUs that have it, chosen at run time before the AVX2 kernels (which stay, for AVX2-only
// CPUs, and are tested on their own); every other pair gets
// row_codec_avx512_lanes.cpp's per-value kernels. One vpermt2b looks up 64 bytes in a
// 128-entry byte table, so a decode is two table lookups per value (the low
// and high byte of the bf16 upper half) instead of AVX2's ~12 instructions
// per 16 values. The tables are filled from the scalar rules themselves
// (dtype_convert.hpp) for the 128 magnitudes, outside the AVX-512 code; the
// sign is the byte's top bit in either format. The encoders are the AVX2
// kernel's steps (row_codec_bf16_fp8.inc, shared) on 32 lanes.
// tests/unit/row_codec_test.cpp compares every fp8 byte and every bf16 input
// against the scalar kernels.
#include <cstring>

#include "pool/dtype_convert.hpp"
#include "pool/row_codec_kernels.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVP_AVX512_KERNELS 1
#endif

namespace kvp::pool::kernels {
namespace {

// Upper 16 bits of each magnitude's decoded value, split into byte tables:
// [0] low bytes, [1] high bytes. Every fp8 value is exact in bf16, so the f32
// result's lower 16 bits are zero; bf16 output differs from the f32's upper
// half only for e5m2 NaNs (f32_to_bf16 sets the quiet bit).
struct UpperTables {
  alignas(64) uint8_t bytes[2][128];
};

enum TableId { kE4M3ToBf16, kE4M3ToF32, kE5M2ToBf16, kE5M2ToF32, kTableCount };

// Built once, by plain (not AVX-512) code: the scalar rules of the library.
const UpperTables* tables() {
  static const UpperTables* const built = [] {
    static UpperTables t[kTableCount];
    for (uint32_t b = 0; b < 128; ++b) {
      const uint8_t byte = static_cast<uint8_t>(b);
      const uint16_t words[kTableCount] = {
          cvt::f32_to_bf16(cvt::e4m3_to_f32(byte)), static_cast<uint16_t>(cvt::f32_bits(cvt::e4m3_to_f32(byte)) >> 16),
          cvt::f32_to_bf16(cvt::e5m2_to_f32(byte)), static_cast<uint16_t>(cvt::f32_bits(cvt::e5m2_to_f32(byte)) >> 16)};
      for (int id = 0; id < kTableCount; ++id) {
        t[id].bytes[0][b] = static_cast<uint8_t>(words[id] & 0xff);
        t[id].bytes[1][b] = static_cast<uint8_t>(words[id] >> 8);
      }
    }
    return t;
  }();
  return built;
}

}  // namespace
}  // namespace kvp::pool::kernels

#if defined(KVP_AVX512_KERNELS)
#include <immintrin.h>

// As in row_codec_avx2.cpp: only functions in an anonymous namespace are
// compiled for AVX-512, so no shared inline function gets its instructions.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vbmi"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi")
// GCC 12's AVX-512 headers start shifts and widenings from
// _mm512_undefined_epi32(), which its -Wmaybe-uninitialized reports (GCC bug
// 105593); the value is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kvp::pool::kernels {
namespace {

using Z = __m512i;

template <bool kStream>
inline void store64(uint8_t* p, Z v) {
  if constexpr (kStream) {
    _mm512_stream_si512(reinterpret_cast<Z*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}

struct Lookup {
  Z lo0, lo1, hi0, hi1;
  explicit Lookup(const UpperTables& t)
      : lo0(_mm512_load_si512(t.bytes[0])),
        lo1(_mm512_load_si512(t.bytes[0] + 64)),
        hi0(_mm512_load_si512(t.bytes[1])),
        hi1(_mm512_load_si512(t.bytes[1] + 64)) {}
  // words: one fp8 byte per 16-bit lane; returns the upper halves, signed.
  // vpermt2b uses each byte's low 7 bits, so the sign bit needs no masking,
  // and the zero high byte of each lane looks up entry 0 (+0.0: zero bytes).
  Z upper(Z words) const {
    const Z lo = _mm512_permutex2var_epi8(lo0, words, lo1);
    const Z hi = _mm512_permutex2var_epi8(hi0, words, hi1);
    const Z sign = _mm512_and_si512(words, _mm512_set1_epi16(0x80));
    return _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_or_si512(hi, sign), 8));
  }
};

// 32 values per step: 64 bytes of bf16.
template <TableId kTable, bool kStream>
size_t decode_fp8_bf16(const uint8_t* s, uint8_t* d, size_t count) {
  const Lookup lut(tables()[kTable]);
  size_t j = 0;
  for (; j + 32 <= count; j += 32) {
    const Z words = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + j)));
    store64<kStream>(d + 2 * j, lut.upper(words));
  }
  return j;
}

// 16 values per step: each upper half moved up over a zero lower half.
template <TableId kTable, bool kStream>
size_t decode_fp8_f32(const uint8_t* s, uint8_t* d, size_t count) {
  const Lookup lut(tables()[kTable]);
  size_t j = 0;
  for (; j + 16 <= count; j += 16) {
    const Z dwords = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + j)));
    store64<kStream>(d + 4 * j, _mm512_slli_epi32(lut.upper(dwords), 16));
  }
  return j;
}

// The 16-bit lane operations row_codec_bf16_fp8.inc is written in, on
// AVX-512: mask registers for the selects.
struct Lanes16 {
  using V = Z;
  static V load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  template <bool kStream>
  static void store(uint8_t* p, V v) {
    store64<kStream>(p, v);
  }
  static V set(int16_t x) { return _mm512_set1_epi16(x); }
  static V set32(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
  static V zero() { return _mm512_setzero_si512(); }
  static V bit_and(V a, V b) { return _mm512_and_si512(a, b); }
  static V bit_or(V a, V b) { return _mm512_or_si512(a, b); }
  static V add(V a, V b) { return _mm512_add_epi16(a, b); }
  static V sub(V a, V b) { return _mm512_sub_epi16(a, b); }
  static V shift_right(V a, int n) { return _mm512_srli_epi16(a, static_cast<unsigned>(n)); }
  static V min(V a, V b) { return _mm512_min_epi16(a, b); }
  // Per lane: a > b (signed) ? x : y.
  static V where_greater(V a, V b, V x, V y) { return _mm512_mask_mov_epi16(y, _mm512_cmpgt_epi16_mask(a, b), x); }
  static V interleave_low(V a, V b) { return _mm512_unpacklo_epi16(a, b); }
  static V interleave_high(V a, V b) { return _mm512_unpackhi_epi16(a, b); }
  static V add_f32(V a, V b) { return _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(b))); }
  static V sub32(V a, V b) { return _mm512_sub_epi32(a, b); }
  static V pack32(V lo, V hi) { return _mm512_packus_epi32(lo, hi); }
  // packus works within 128-bit lanes: qwords come out as a0 b0 a1 b1 a2 b2 a3 b3.
  static V pack_bytes_in_order(V a, V b) {
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi16(a, b));
  }
};

#include "pool/row_codec_bf16_fp8.inc"

VecEncodeFn avx512_encode_impl(Wide in, config::DType kv, bool divide, bool stream) {
  if (in != Wide::kBF16 || divide) return nullptr;
  if (kv == config::DType::kFP8E4M3) {
    return stream ? &encode_bf16_fp8<E4M3FromBf16, true> : &encode_bf16_fp8<E4M3FromBf16, false>;
  }
  if (kv == config::DType::kFP8E5M2) {
    return stream ? &encode_bf16_fp8<E5M2FromBf16, true> : &encode_bf16_fp8<E5M2FromBf16, false>;
  }
  return nullptr;
}

template <bool kStream>
VecDecodeFn decode_table(config::DType kv, Wide out) {
  const bool e4m3 = kv == config::DType::kFP8E4M3, e5m2 = kv == config::DType::kFP8E5M2;
  if (out == Wide::kBF16 && e4m3) return &decode_fp8_bf16<kE4M3ToBf16, kStream>;
  if (out == Wide::kBF16 && e5m2) return &decode_fp8_bf16<kE5M2ToBf16, kStream>;
  if (out == Wide::kF32 && e4m3) return &decode_fp8_f32<kE4M3ToF32, kStream>;
  if (out == Wide::kF32 && e5m2) return &decode_fp8_f32<kE5M2ToF32, kStream>;
  return nullptr;
}

VecDecodeFn avx512_decode_impl(config::DType kv, Wide out, bool stream) {
  return stream ? decode_table<true>(kv, out) : decode_table<false>(kv, out);
}

}  // namespace
}  // namespace kvp::pool::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif  // KVP_AVX512_KERNELS

namespace kvp::pool::kernels {

bool cpu_has_avx512_vbmi() {
#if defined(KVP_AVX512_KERNELS)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
           __builtin_cpu_supports("avx512vbmi") != 0;
  }();
  return has;
#else
  return false;
#endif
}

// The kernels here where they exist, else the per-value ones of
// row_codec_avx512_lanes.cpp (nullptr without AVX-512 BW).
VecEncodeFn avx512_encode(Wide in, config::DType kv, bool divide, bool stream) {
#if defined(KVP_AVX512_KERNELS)
  if (cpu_has_avx512_vbmi()) {
    if (VecEncodeFn f = avx512_encode_impl(in, kv, divide, stream)) return f;
  }
#endif
  return avx512_lanes_encode(in, kv, divide, stream);
}

VecDecodeFn avx512_decode(config::DType kv, Wide out, bool stream) {
#if defined(KVP_AVX512_KERNELS)
  if (cpu_has_avx512_vbmi()) {
    tables();  // built here, by plain code, before any kernel runs
    if (VecDecodeFn f = avx512_decode_impl(kv, out, stream)) return f;
  }
#endif
  return avx512_lanes_decode(kv, out, stream);
}

}  // namespace kvp::pool::kernels
