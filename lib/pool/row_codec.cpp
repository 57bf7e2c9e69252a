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
#include "pool/row_codec_kernels.hpp"
#include "util/stream_copy.hpp"

namespace kvp::pool {
namespace {

using config::DType;

// Element accessors: value j of a row starting at p. memcpy keeps unaligned
// caller data legal and compiles to plain loads/stores.
struct F32 {
  [[maybe_unused]] static constexpr size_t kBytes = 4;
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
  [[maybe_unused]] static constexpr size_t kBytes = 2;
  static float load(const uint8_t* p, size_t j) { return cvt::f16_to_f32(load_u16(p + 2 * j)); }
  static void store(uint8_t* p, size_t j, float v) { store_u16(p + 2 * j, cvt::f32_to_f16(v)); }
};

struct BF16 {
  [[maybe_unused]] static constexpr size_t kBytes = 2;
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

// The scalar reference of kernels::Fp4EncodeFn.
template <class In, bool kDivide>
void encode_fp4_span(const uint8_t* s, size_t blocks, float divisor, uint8_t* v, uint8_t* sc) {
  float block[cvt::kFp4Block];
  for (size_t b = 0; b < blocks; ++b) {
    for (int k = 0; k < cvt::kFp4Block; ++k) block[k] = load_scaled<In, kDivide>(s, b * cvt::kFp4Block + k, divisor);
    sc[b] = cvt::fp4_quantize_block(block, v + b * (cvt::kFp4Block / 2));
  }
}

// fp4 rows that stream their stores are built in these first (rows that do
// not fit are written in place, with plain stores).
constexpr size_t kFp4RowBuffer = 4096;

// The caller's rows are asked for util::rows_ahead ahead, as convert_rows
// does; a call that writes at least util::kStreamMinBytes of values builds
// each row's values and scales in a buffer and streams them to the pool.
void encode_fp4(const uint8_t* src, Wide in, size_t n, size_t elements, float divisor, RowRef values, RowRef scales) {
  // x / 1 == x for every x, so the division is skipped rather than changing results.
  const bool divide = divisor != 1.0f;
  const kernels::Fp4EncodeFn vec = kernels::avx2_encode_fp4(in, divide);
  const kernels::Fp4EncodeFn row = vec != nullptr ? vec : kernels::scalar_encode_fp4(in, divide);
  const size_t in_row = elements * wide_bytes(in), blocks = elements / cvt::kFp4Block, value_row = blocks * 8;
  const size_t ahead = util::rows_ahead(in_row), prefetch_bytes = util::prefetch_bytes(in_row);
  const bool stream = n * value_row >= util::kStreamMinBytes && value_row <= kFp4RowBuffer;
  alignas(64) uint8_t value_buf[kFp4RowBuffer], scale_buf[kFp4RowBuffer / 8];
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) util::prefetch_row(src + (i + ahead) * in_row, prefetch_bytes);
    if (!stream) {
      row(src + i * in_row, blocks, divisor, values.at(i), scales.at(i));
      continue;
    }
    row(src + i * in_row, blocks, divisor, value_buf, scale_buf);
    util::copy_streaming(values.at(i), value_buf, value_row);
    util::copy_streaming(scales.at(i), scale_buf, blocks);
  }
  if (stream) util::stream_fence();
}

template <class Stored, class Out>
void decode_span(const uint8_t* __restrict s, uint8_t* __restrict d, size_t count) {
  for (size_t j = 0; j < count; ++j) Out::store(d, j, Stored::load(s, j));
}

// The scalar reference of kernels::scalar_decode_scaled: nsa's nope values.
template <class Stored, class Out>
void decode_scaled_span(const uint8_t* __restrict s, uint8_t* __restrict d, size_t count, float scale) {
  for (size_t j = 0; j < count; ++j) Out::store(d, j, cvt::mul_f32(Stored::load(s, j), scale));
}

// The scalar reference of kernels::Fp4DecodeFn.
template <class Out>
void decode_fp4_span(const uint8_t* v, const uint8_t* sc, size_t blocks, uint8_t* d) {
  for (size_t b = 0; b < blocks; ++b) {
    const float scale = cvt::e4m3_to_f32(sc[b]);
    for (int k = 0; k < cvt::kFp4Block / 2; ++k) {
      const uint8_t byte = v[b * (cvt::kFp4Block / 2) + k];
      const size_t j = b * cvt::kFp4Block + 2 * k;
      Out::store(d, j, cvt::fp4_dequantize(byte & 0xfu, scale));
      Out::store(d, j + 1, cvt::fp4_dequantize(byte >> 4, scale));
    }
  }
}

// The pool's random rows (values and scales) are asked for util::rows_ahead
// ahead; a call that writes at least util::kStreamMinBytes decodes each row
// into a buffer and streams it out.
void decode_fp4(ConstRowRef values, ConstRowRef scales, size_t n, size_t elements, uint8_t* dst, Wide out) {
  const kernels::Fp4DecodeFn vec = kernels::avx2_decode_fp4(out);
  const kernels::Fp4DecodeFn row = vec != nullptr ? vec : kernels::scalar_decode_fp4(out);
  const size_t out_row = elements * wide_bytes(out), blocks = elements / cvt::kFp4Block, value_row = blocks * 8;
  const size_t ahead = util::rows_ahead(value_row), prefetch_bytes = util::prefetch_bytes(value_row);
  constexpr size_t kOutBuffer = 2 * kFp4RowBuffer;
  const bool stream = n * out_row >= util::kStreamMinBytes && out_row <= kOutBuffer;
  alignas(64) uint8_t out_buf[kOutBuffer];
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) {
      util::prefetch_row(values.at(i + ahead), prefetch_bytes);
      util::prefetch_row(scales.at(i + ahead), blocks);
    }
    if (!stream) {
      row(values.at(i), scales.at(i), blocks, dst + i * out_row);
      continue;
    }
    row(values.at(i), scales.at(i), blocks, out_buf);
    util::copy_streaming(dst + i * out_row, out_buf, out_row);
  }
  if (stream) util::stream_fence();
}

// Rows that convert_streaming declines are converted through an L1-sized
// buffer and then streamed out.
constexpr size_t kChunkBytes = 4096;

// An Encoder with its divisor: the row loop below calls encoders and
// decoders alike.
struct DividingEncoder {
  const kernels::Encoder& e;
  float divisor;
  size_t in_bytes() const { return e.in_bytes; }
  size_t out_bytes() const { return e.out_bytes; }
  void run(const uint8_t* s, uint8_t* d, size_t count) const { e.run(s, d, count, divisor); }
  bool run_streaming(const uint8_t* s, uint8_t* d, size_t count) const {
    return e.run_streaming(s, d, count, divisor);
  }
};

struct PlainDecoder {
  const kernels::Decoder& k;
  size_t in_bytes() const { return k.in_bytes; }
  size_t out_bytes() const { return k.out_bytes; }
  void run(const uint8_t* s, uint8_t* d, size_t count) const { k.run(s, d, count); }
  bool run_streaming(const uint8_t* s, uint8_t* d, size_t count) const { return k.run_streaming(s, d, count); }
};

// n rows of `elements` values from `in` to `out`. The source rows are asked
// for util::rows_ahead rows ahead, random pool rows (reads) and contiguous
// caller rows (writes) alike: without it the conversions spent most of their
// time waiting on source loads (bf16 -> e4m3 writes and e4m3 -> bf16 reads
// of 8192 random rows ran 1.6-2.9x faster with it in a standalone loop on the
// 2-core Xeon VM, minimum and median times). A call that
// writes at least util::kStreamMinBytes streams its stores (see
// stream_copy.hpp).
template <class Kernel>
void convert_rows(const Kernel& k, ConstRowRef in, RowRef out, size_t n, size_t elements) {
  const size_t in_row = elements * k.in_bytes(), out_row = elements * k.out_bytes();
  const size_t ahead = util::rows_ahead(in_row), prefetch_bytes = util::prefetch_bytes(in_row);
  const bool stream = n * out_row >= util::kStreamMinBytes;
  alignas(64) uint8_t chunk[kChunkBytes];
  const size_t per_chunk = kChunkBytes / k.out_bytes();
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) util::prefetch_row(in.at(i + ahead), prefetch_bytes);
    const uint8_t* s = in.at(i);
    uint8_t* d = out.at(i);
    if (!stream) {
      k.run(s, d, elements);
      continue;
    }
    // Straight from registers to memory where the row allows, else through the chunk.
    if (k.run_streaming(s, d, elements)) continue;
    for (size_t first = 0; first < elements; first += per_chunk) {
      const size_t count = elements - first < per_chunk ? elements - first : per_chunk;
      k.run(s + first * k.in_bytes(), chunk, count);
      util::copy_streaming(d + first * k.out_bytes(), chunk, count * k.out_bytes());
    }
  }
  if (stream) util::stream_fence();
}

// nsa's packed rows one value at a time: kernels::scalar_encode_nsa_rows /
// scalar_decode_nsa_rows, the reference of row_codec_nsa.cpp's loops.
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
  if (kv == DType::kFP4E2M1) return encode_fp4(s, in, n, elements, divisor, values, scales);
  // x / 1 == x for every x, so the division is skipped rather than changing results.
  const kernels::Encoder e = kernels::pick_encoder(in, kv, divisor != 1.0f);
  const ConstRowRef source{s, elements * e.in_bytes, nullptr};
  convert_rows(DividingEncoder{e, divisor}, source, values, n, elements);
}

void decode_rows(ConstRowRef values, ConstRowRef scales, size_t n, size_t elements, DType kv, void* dst, Wide out) {
  auto* d = static_cast<uint8_t*>(dst);
  if (kv == DType::kFP4E2M1) return decode_fp4(values, scales, n, elements, d, out);
  const kernels::Decoder k = kernels::pick_decoder(kv, out);
  convert_rows(PlainDecoder{k}, values, RowRef{d, elements * k.out_bytes, nullptr}, n, elements);
}

namespace kernels {

void scalar_encode_nsa_rows(const void* nope, const void* rope, Wide in, size_t n, size_t lora, size_t rope_dim,
                            RowRef rows) {
  const auto* a = static_cast<const uint8_t*>(nope);
  const auto* b = static_cast<const uint8_t*>(rope);
  switch (in) {
    case Wide::kF32: return encode_nsa<F32>(a, b, n, lora, rope_dim, rows);
    case Wide::kF16: return encode_nsa<F16>(a, b, n, lora, rope_dim, rows);
    case Wide::kBF16: return encode_nsa<BF16>(a, b, n, lora, rope_dim, rows);
  }
}

void scalar_decode_nsa_rows(ConstRowRef rows, size_t n, size_t lora, size_t rope_dim, void* dst, Wide out) {
  auto* d = static_cast<uint8_t*>(dst);
  switch (out) {
    case Wide::kF32: return decode_nsa<F32>(rows, n, lora, rope_dim, d);
    case Wide::kF16: return decode_nsa<F16>(rows, n, lora, rope_dim, d);
    case Wide::kBF16: return decode_nsa<BF16>(rows, n, lora, rope_dim, d);
  }
}

namespace {

template <class In, bool kDivide>
EncodeFn scalar_encode_to(DType kv) {
  switch (kv) {
    case DType::kF32: return &encode_span<In, F32, kDivide>;
    case DType::kF16: return &encode_span<In, F16, kDivide>;
    case DType::kBF16: return &encode_span<In, BF16, kDivide>;
    case DType::kFP8E4M3: return &encode_span<In, E4M3, kDivide>;
    case DType::kFP8E5M2: return &encode_span<In, E5M2, kDivide>;
    case DType::kFP4E2M1: return nullptr;
  }
  return nullptr;
}

template <bool kDivide>
EncodeFn scalar_encode_from(Wide in, DType kv) {
  switch (in) {
    case Wide::kF32: return scalar_encode_to<F32, kDivide>(kv);
    case Wide::kF16: return scalar_encode_to<F16, kDivide>(kv);
    case Wide::kBF16: return scalar_encode_to<BF16, kDivide>(kv);
  }
  return nullptr;
}

template <class Out>
DecodeFn scalar_decode_to(DType kv) {
  switch (kv) {
    case DType::kF32: return &decode_span<F32, Out>;
    case DType::kF16: return &decode_span<F16, Out>;
    case DType::kBF16: return &decode_span<BF16, Out>;
    case DType::kFP8E4M3: return &decode_span<E4M3, Out>;
    case DType::kFP8E5M2: return &decode_span<E5M2, Out>;
    case DType::kFP4E2M1: return nullptr;
  }
  return nullptr;
}

}  // namespace

EncodeFn scalar_encode(Wide in, DType kv, bool divide) {
  return divide ? scalar_encode_from<true>(in, kv) : scalar_encode_from<false>(in, kv);
}

DecodeFn scalar_decode(DType kv, Wide out) {
  switch (out) {
    case Wide::kF32: return scalar_decode_to<F32>(kv);
    case Wide::kF16: return scalar_decode_to<F16>(kv);
    case Wide::kBF16: return scalar_decode_to<BF16>(kv);
  }
  return nullptr;
}

template <bool kDivide>
Fp4EncodeFn scalar_encode_fp4_from(Wide in) {
  switch (in) {
    case Wide::kF32: return &encode_fp4_span<F32, kDivide>;
    case Wide::kF16: return &encode_fp4_span<F16, kDivide>;
    case Wide::kBF16: return &encode_fp4_span<BF16, kDivide>;
  }
  return nullptr;
}

Fp4EncodeFn scalar_encode_fp4(Wide in, bool divide) {
  return divide ? scalar_encode_fp4_from<true>(in) : scalar_encode_fp4_from<false>(in);
}

Fp4DecodeFn scalar_decode_fp4(Wide out) {
  switch (out) {
    case Wide::kF32: return &decode_fp4_span<F32>;
    case Wide::kF16: return &decode_fp4_span<F16>;
    case Wide::kBF16: return &decode_fp4_span<BF16>;
  }
  return nullptr;
}

EncodeFn scalar_decode_scaled(DType kv, Wide out) {
  if (kv != DType::kFP8E4M3) return nullptr;
  switch (out) {
    case Wide::kF32: return &decode_scaled_span<E4M3, F32>;
    case Wide::kF16: return &decode_scaled_span<E4M3, F16>;
    case Wide::kBF16: return &decode_scaled_span<E4M3, BF16>;
  }
  return nullptr;
}

Encoder pick_scaled_decoder(DType kv, Wide out, bool use_vector) {
  Encoder e;
  e.scalar = scalar_decode_scaled(kv, out);
  if (use_vector) {
    e.vec = avx512_lanes_decode_scaled(kv, out);
    e.vec_stream = avx512_lanes_decode_scaled(kv, out, true);
    if (e.vec == nullptr) {
      e.vec = avx2_decode_scaled(kv, out);
      e.vec_stream = avx2_decode_scaled(kv, out, true);
    }
  }
  e.in_bytes = config::dtype_bytes(kv);
  e.out_bytes = wide_bytes(out);
  return e;
}

Encoder pick_encoder(Wide in, DType kv, bool divide, bool use_vector) {
  Encoder e;
  e.scalar = scalar_encode(in, kv, divide);
  if (use_vector) {
    e.vec = avx512_encode(in, kv, divide);
    e.vec_stream = avx512_encode(in, kv, divide, true);
    if (e.vec == nullptr) {
      e.vec = avx2_encode(in, kv, divide);
      e.vec_stream = avx2_encode(in, kv, divide, true);
    }
  }
  e.in_bytes = wide_bytes(in);
  e.out_bytes = config::dtype_bytes(kv);
  return e;
}

Decoder pick_decoder(DType kv, Wide out, bool use_vector) {
  Decoder d;
  d.scalar = scalar_decode(kv, out);
  if (use_vector) {
    d.vec = avx512_decode(kv, out);
    d.vec_stream = avx512_decode(kv, out, true);
    if (d.vec == nullptr) {
      d.vec = avx2_decode(kv, out);
      d.vec_stream = avx2_decode(kv, out, true);
    }
  }
  d.in_bytes = config::dtype_bytes(kv);
  d.out_bytes = wide_bytes(out);
  return d;
}

}  // namespace kernels
}  // namespace kvp::pool
