#include "pool/row_codec.hpp"

// The per-value loops below are branch-free so that they vectorise. GCC's -O2
// default cost model ("very cheap") declines loops that need a scalar
// epilogue, i.e. all of these; the "cheap" model accepts them (3-4x faster
// f32 -> bf16/f16/fp8 on x86-64). Results do not depend on it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=cheap")
#endif

#include <cstring>

#include "pool/dtype_convert.hpp"

namespace kvp::pool {
namespace {

using config::DType;

// Element accessors: value j of a row starting at p. memcpy keeps unaligned
// caller data legal and compiles to plain loads/stores.
struct F32 {
  static constexpr size_t kBytes = 4;
  static float load(const uint8_t* p, size_t j) {
    float v;
    std::memcpy(&v, p + 4 * j, 4);
    return v;
  }
  static void store(uint8_t* p, size_t j, float v) { std::memcpy(p + 4 * j, &v, 4); }
};

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

inline void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

struct F16 {
  static constexpr size_t kBytes = 2;
  static float load(const uint8_t* p, size_t j) { return cvt::f16_to_f32(load_u16(p + 2 * j)); }
  static void store(uint8_t* p, size_t j, float v) { store_u16(p + 2 * j, cvt::f32_to_f16(v)); }
};

struct BF16 {
  static constexpr size_t kBytes = 2;
  static float load(const uint8_t* p, size_t j) { return cvt::bf16_to_f32(load_u16(p + 2 * j)); }
  static void store(uint8_t* p, size_t j, float v) { store_u16(p + 2 * j, cvt::f32_to_bf16(v)); }
};

struct E4M3 {
  [[maybe_unused]] static constexpr size_t kBytes = 1;
  static float load(const uint8_t* p, size_t j) { return cvt::e4m3_to_f32(p[j]); }
  static void store(uint8_t* p, size_t j, float v) { p[j] = cvt::f32_to_e4m3(v); }
};

struct E5M2 {
  [[maybe_unused]] static constexpr size_t kBytes = 1;
  static float load(const uint8_t* p, size_t j) { return cvt::e5m2_to_f32(p[j]); }
  static void store(uint8_t* p, size_t j, float v) { p[j] = cvt::f32_to_e5m2(v); }
};

template <class In, bool kDivide>
inline float load_scaled(const uint8_t* p, size_t j, float divisor) {
  const float v = In::load(p, j);
  if constexpr (kDivide) return cvt::div_f32(v, divisor);
  return v;
}

// One row; restrict lets the compiler vectorise without runtime overlap checks
// (caller data and pool rows never overlap).
template <class In, class Out, bool kDivide>
void encode_span(const uint8_t* __restrict s, uint8_t* __restrict d, size_t count, float divisor) {
  for (size_t j = 0; j < count; ++j) Out::store(d, j, load_scaled<In, kDivide>(s, j, divisor));
}

template <class In, class Out, bool kDivide>
void encode_plain(const uint8_t* src, size_t n, size_t elements, float divisor, RowRef out) {
  for (size_t i = 0; i < n; ++i) encode_span<In, Out, kDivide>(src + i * elements * In::kBytes, out.at(i), elements, divisor);
}

template <class In, bool kDivide>
void encode_fp4(const uint8_t* src, size_t n, size_t elements, float divisor, RowRef values, RowRef scales) {
  float block[cvt::kFp4Block];
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = src + i * elements * In::kBytes;
    uint8_t* v = values.at(i);
    uint8_t* sc = scales.at(i);
    for (size_t b = 0; b < elements / cvt::kFp4Block; ++b) {
      for (int k = 0; k < cvt::kFp4Block; ++k) block[k] = load_scaled<In, kDivide>(s, b * cvt::kFp4Block + k, divisor);
      sc[b] = cvt::fp4_quantize_block(block, v + b * (cvt::kFp4Block / 2));
    }
  }
}

template <class In, bool kDivide>
void encode_from(const uint8_t* src, size_t n, size_t elements, float divisor, DType kv, RowRef values,
                 RowRef scales) {
  switch (kv) {
    case DType::kF32: return encode_plain<In, F32, kDivide>(src, n, elements, divisor, values);
    case DType::kF16: return encode_plain<In, F16, kDivide>(src, n, elements, divisor, values);
    case DType::kBF16: return encode_plain<In, BF16, kDivide>(src, n, elements, divisor, values);
    case DType::kFP8E4M3: return encode_plain<In, E4M3, kDivide>(src, n, elements, divisor, values);
    case DType::kFP8E5M2: return encode_plain<In, E5M2, kDivide>(src, n, elements, divisor, values);
    case DType::kFP4E2M1: return encode_fp4<In, kDivide>(src, n, elements, divisor, values, scales);
  }
}

template <class In>
void encode_dispatch(const uint8_t* src, size_t n, size_t elements, float divisor, DType kv, RowRef values,
                     RowRef scales) {
  // x / 1 == x for every x, so the division is skipped rather than changing results.
  if (divisor == 1.0f) return encode_from<In, false>(src, n, elements, divisor, kv, values, scales);
  encode_from<In, true>(src, n, elements, divisor, kv, values, scales);
}

template <class Stored, class Out>
void decode_span(const uint8_t* __restrict s, uint8_t* __restrict d, size_t count) {
  for (size_t j = 0; j < count; ++j) Out::store(d, j, Stored::load(s, j));
}

template <class Stored, class Out>
void decode_plain(ConstRowRef values, size_t n, size_t elements, uint8_t* dst) {
  for (size_t i = 0; i < n; ++i) decode_span<Stored, Out>(values.at(i), dst + i * elements * Out::kBytes, elements);
}

template <class Out>
void decode_fp4(ConstRowRef values, ConstRowRef scales, size_t n, size_t elements, uint8_t* dst) {
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* v = values.at(i);
    const uint8_t* sc = scales.at(i);
    uint8_t* d = dst + i * elements * Out::kBytes;
    for (size_t b = 0; b < elements / cvt::kFp4Block; ++b) {
      const float scale = cvt::e4m3_to_f32(sc[b]);
      for (int k = 0; k < cvt::kFp4Block / 2; ++k) {
        const uint8_t byte = v[b * (cvt::kFp4Block / 2) + k];
        const size_t j = b * cvt::kFp4Block + 2 * k;
        Out::store(d, j, cvt::fp4_dequantize(byte & 0xfu, scale));
        Out::store(d, j + 1, cvt::fp4_dequantize(byte >> 4, scale));
      }
    }
  }
}

template <class Out>
void decode_to(ConstRowRef values, ConstRowRef scales, size_t n, size_t elements, DType kv, uint8_t* dst) {
  switch (kv) {
    case DType::kF32: return decode_plain<F32, Out>(values, n, elements, dst);
    case DType::kF16: return decode_plain<F16, Out>(values, n, elements, dst);
    case DType::kBF16: return decode_plain<BF16, Out>(values, n, elements, dst);
    case DType::kFP8E4M3: return decode_plain<E4M3, Out>(values, n, elements, dst);
    case DType::kFP8E5M2: return decode_plain<E5M2, Out>(values, n, elements, dst);
    case DType::kFP4E2M1: return decode_fp4<Out>(values, scales, n, elements, dst);
  }
}

template <class In>
void encode_nsa(const uint8_t* nope, const uint8_t* rope, size_t n, size_t lora, size_t rope_dim, RowRef rows) {
  const size_t blocks = lora / cvt::kNsaBlock;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = nope + i * lora * In::kBytes;
    uint8_t* d = rows.at(i);
    for (size_t b = 0; b < blocks; ++b) {
      const size_t first = b * cvt::kNsaBlock;
      float amax = 0.0f;
      for (size_t k = 0; k < cvt::kNsaBlock; ++k) {
        const float a = cvt::abs_f32(In::load(s, first + k));
        if (a > amax) amax = a;
      }
      const float scale = cvt::nsa_block_scale(amax);
      for (size_t k = 0; k < cvt::kNsaBlock; ++k) {
        d[first + k] = cvt::f32_to_e4m3(cvt::div_f32(In::load(s, first + k), scale));
      }
      std::memcpy(d + lora + 4 * b, &scale, 4);
    }
    const uint8_t* r = rope + i * rope_dim * In::kBytes;
    uint8_t* out = d + lora + 4 * blocks;
    for (size_t j = 0; j < rope_dim; ++j) BF16::store(out, j, In::load(r, j));
  }
}

template <class Out>
void decode_nsa(ConstRowRef rows, size_t n, size_t lora, size_t rope_dim, uint8_t* dst) {
  const size_t blocks = lora / cvt::kNsaBlock;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = rows.at(i);
    uint8_t* d = dst + i * (lora + rope_dim) * Out::kBytes;
    for (size_t b = 0; b < blocks; ++b) {
      float scale;
      std::memcpy(&scale, s + lora + 4 * b, 4);
      for (size_t k = 0; k < cvt::kNsaBlock; ++k) {
        const size_t j = b * cvt::kNsaBlock + k;
        Out::store(d, j, cvt::mul_f32(cvt::e4m3_to_f32(s[j]), scale));
      }
    }
    const uint8_t* r = s + lora + 4 * blocks;
    for (size_t j = 0; j < rope_dim; ++j) Out::store(d, lora + j, BF16::load(r, j));
  }
}

}  // namespace

void encode_rows(const void* src, Wide in, size_t n, size_t elements, float divisor, DType kv, RowRef values,
                 RowRef scales) {
  const auto* s = static_cast<const uint8_t*>(src);
  switch (in) {
    case Wide::kF32: return encode_dispatch<F32>(s, n, elements, divisor, kv, values, scales);
    case Wide::kF16: return encode_dispatch<F16>(s, n, elements, divisor, kv, values, scales);
    case Wide::kBF16: return encode_dispatch<BF16>(s, n, elements, divisor, kv, values, scales);
  }
}

void decode_rows(ConstRowRef values, ConstRowRef scales, size_t n, size_t elements, DType kv, void* dst, Wide out) {
  auto* d = static_cast<uint8_t*>(dst);
  switch (out) {
    case Wide::kF32: return decode_to<F32>(values, scales, n, elements, kv, d);
    case Wide::kF16: return decode_to<F16>(values, scales, n, elements, kv, d);
    case Wide::kBF16: return decode_to<BF16>(values, scales, n, elements, kv, d);
  }
}

void encode_nsa_rows(const void* nope, const void* rope, Wide in, size_t n, size_t lora, size_t rope_dim, RowRef rows) {
  const auto* a = static_cast<const uint8_t*>(nope);
  const auto* b = static_cast<const uint8_t*>(rope);
  switch (in) {
    case Wide::kF32: return encode_nsa<F32>(a, b, n, lora, rope_dim, rows);
    case Wide::kF16: return encode_nsa<F16>(a, b, n, lora, rope_dim, rows);
    case Wide::kBF16: return encode_nsa<BF16>(a, b, n, lora, rope_dim, rows);
  }
}

void decode_nsa_rows(ConstRowRef rows, size_t n, size_t lora, size_t rope_dim, void* dst, Wide out) {
  auto* d = static_cast<uint8_t*>(dst);
  switch (out) {
    case Wide::kF32: return decode_nsa<F32>(rows, n, lora, rope_dim, d);
    case Wide::kF16: return decode_nsa<F16>(rows, n, lora, rope_dim, d);
    case Wide::kBF16: return decode_nsa<BF16>(rows, n, lora, rope_dim, d);
  }
}

}  // namespace kvp::pool
