// AVX-512 (F, BW) versions of the per-value conversions between f32, f16,
// bf16, e4m3 and e5m2: row_codec_lanes32.inc's rules on sixteen u32 lanes
// (AVX2 runs them on eight), with mask registers for the selects and 64-byte
// stores, one whole cache line per step. row_codec_avx512.cpp's table
// decoders and bf16 -> fp8 encoders are tried before these (they need VBMI
// too); these cover every other pair, with or without a divisor, and every
// pair on CPUs with AVX-512 BW but no VBMI. Compiled with a target pragma and
// called only when the CPU has F and BW; tests/unit/row_codec_test.cpp runs
// them on their own against the scalar kernels.
#include <cstring>

#include "pool/dtype_convert.hpp"
#include "pool/row_codec_kernels.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVP_AVX512_LANE_KERNELS 1
#endif

#if defined(KVP_AVX512_LANE_KERNELS)
#include <immintrin.h>

// As in row_codec_avx2.cpp: only functions in an anonymous namespace are
// compiled for AVX-512, so no shared inline function gets its instructions.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
// GCC 12's AVX-512 headers start shifts and widenings from
// _mm512_undefined_epi32(), which its -Wmaybe-uninitialized reports (GCC bug
// 105593); the value is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kvp::pool::kernels {
namespace {

using V = __m512i;    // sixteen f32 values as their bit patterns
using M = __mmask16;  // a condition, one bit per lane
constexpr size_t kLanes = 16;

inline V k(uint32_t x) { return _mm512_set1_epi32(static_cast<int>(x)); }
inline V sel(M c, V a, V b) { return _mm512_mask_blend_epi32(c, b, a); }  // blend takes its second operand where c
inline M gt(V a, V b) { return _mm512_cmpgt_epi32_mask(a, b); }
inline M eq(V a, V b) { return _mm512_cmpeq_epi32_mask(a, b); }
inline V band(V a, V b) { return _mm512_and_si512(a, b); }
inline V bor(V a, V b) { return _mm512_or_si512(a, b); }
inline V bxor(V a, V b) { return _mm512_xor_si512(a, b); }
inline V add(V a, V b) { return _mm512_add_epi32(a, b); }
inline V sub(V a, V b) { return _mm512_sub_epi32(a, b); }
inline V min_u32(V a, V b) { return _mm512_min_epu32(a, b); }
inline V max_u32(V a, V b) { return _mm512_max_epu32(a, b); }
template <int N>
inline V shr(V a) {
  return _mm512_srli_epi32(a, N);
}
template <int N>
inline V shl(V a) {
  return _mm512_slli_epi32(a, N);
}
inline __m512 as_f32(V v) { return _mm512_castsi512_ps(v); }
inline V as_bits(__m512 f) { return _mm512_castps_si512(f); }
inline V fadd(V a, V b) { return as_bits(_mm512_add_ps(as_f32(a), as_f32(b))); }
inline V fmul(V a, V b) { return as_bits(_mm512_mul_ps(as_f32(a), as_f32(b))); }
inline V fdiv(V a, V b) { return as_bits(_mm512_div_ps(as_f32(a), as_f32(b))); }
inline V i32_to_f32(V a) { return as_bits(_mm512_cvtepi32_ps(a)); }
inline V load_u32(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline V load_u16(const uint8_t* p) {
  return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline V load_u8(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Output lines of 64 bytes: 16 f32, 32 f16/bf16 or 64 fp8 values from u32
// lanes of codes. The packs work within 128-bit blocks, so each block holds
// a group of four values from every input register; the permutes put the
// groups back in value order.
template <size_t kOutBytes>
inline V pack_block(const V* lanes) {
  if constexpr (kOutBytes == 4) {
    return lanes[0];
  } else if constexpr (kOutBytes == 2) {
    // Qwords: group g of lanes[0] at 2g, of lanes[1] at 2g + 1.
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),
                                    _mm512_packus_epi32(lanes[0], lanes[1]));
  } else {
    const V ab = _mm512_packus_epi32(lanes[0], lanes[1]);
    const V cd = _mm512_packus_epi32(lanes[2], lanes[3]);
    // Dwords: group g of lanes[q] at 4g + q.
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                    _mm512_packus_epi16(ab, cd));
  }
}

// Streaming stores need a 64-byte-aligned address: the callers pick the
// streaming kernels only for line-aligned destinations (convert_streaming).
template <bool kStream>
inline void store_block(uint8_t* p, V v) {
  if constexpr (kStream) {
    _mm512_stream_si512(reinterpret_cast<V*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}

#include "pool/row_codec_lanes32.inc"

template <class In, bool kDivide, bool kStream>
VecEncodeFn encode_to(config::DType kv) {
  switch (kv) {
    case config::DType::kF32: return &encode_vec<In, F32, kDivide, kStream>;
    case config::DType::kF16: return &encode_vec<In, F16, kDivide, kStream>;
    case config::DType::kBF16: return &encode_vec<In, BF16, kDivide, kStream>;
    case config::DType::kFP8E4M3: return &encode_vec<In, E4M3, kDivide, kStream>;
    case config::DType::kFP8E5M2: return &encode_vec<In, E5M2, kDivide, kStream>;
    case config::DType::kFP4E2M1: return nullptr;  // block quantisation
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

template <bool kStream>
VecDecodeFn decode_table(config::DType kv, Wide out) {
  switch (out) {
    case Wide::kF32: return decode_to<F32, kStream>(kv);
    case Wide::kF16: return decode_to<F16, kStream>(kv);
    case Wide::kBF16: return decode_to<BF16, kStream>(kv);
  }
  return nullptr;
}

// The tables, built here so that the selectors below need no AVX-512 code.
VecEncodeFn lanes_encode_impl(Wide in, config::DType kv, bool divide, bool stream) {
  if (stream) return divide ? encode_from<true, true>(in, kv) : encode_from<false, true>(in, kv);
  return divide ? encode_from<true, false>(in, kv) : encode_from<false, false>(in, kv);
}

VecDecodeFn lanes_decode_impl(config::DType kv, Wide out, bool stream) {
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

VecEncodeFn lanes_decode_scaled_impl(config::DType kv, Wide out, bool stream) {
  if (kv != config::DType::kFP8E4M3) return nullptr;
  return stream ? decode_scaled_e4m3<true>(out) : decode_scaled_e4m3<false>(out);
}

}  // namespace
}  // namespace kvp::pool::kernels

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif  // KVP_AVX512_LANE_KERNELS

namespace kvp::pool::kernels {

bool cpu_has_avx512bw() {
#if defined(KVP_AVX512_LANE_KERNELS)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0;
  }();
  return has;
#else
  return false;
#endif
}

VecEncodeFn avx512_lanes_encode(Wide in, config::DType kv, bool divide, bool stream) {
#if defined(KVP_AVX512_LANE_KERNELS)
  if (cpu_has_avx512bw()) return lanes_encode_impl(in, kv, divide, stream);
#endif
  (void)in, (void)kv, (void)divide, (void)stream;
  return nullptr;
}

VecDecodeFn avx512_lanes_decode(config::DType kv, Wide out, bool stream) {
#if defined(KVP_AVX512_LANE_KERNELS)
  if (cpu_has_avx512bw()) return lanes_decode_impl(kv, out, stream);
#endif
  (void)kv, (void)out, (void)stream;
  return nullptr;
}

VecEncodeFn avx512_lanes_decode_scaled(config::DType kv, Wide out, bool stream) {
#if defined(KVP_AVX512_LANE_KERNELS)
  if (cpu_has_avx512bw()) return lanes_decode_scaled_impl(kv, out, stream);
#endif
  (void)kv, (void)out, (void)stream;
  return nullptr;
}

AmaxFn avx512_lanes_amax_f32() {
#if defined(KVP_AVX512_LANE_KERNELS)
  if (cpu_has_avx512bw()) return &amax_f32_vec;
#endif
  return nullptr;
}

}  // namespace kvp::pool::kernels
