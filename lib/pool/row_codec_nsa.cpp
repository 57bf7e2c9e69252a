// nsa's packed fp8 rows ([lora e4m3 bytes][lora/128 f32 scales][rope bf16
// values]) on the vector kernels, with the row loops' source prefetch and
// streamed stores (as convert_rows in row_codec.cpp). Each piece is a kernel
// the tests already compare with the scalar rules, applied as the scalar
// reference (kernels::scalar_encode_nsa_rows) applies the rule:
//  - a write's 128-value block: its values as f32 (the caller's f32 as they
//    are; bf16 / f16 widened exactly by the decoder to f32), the amax of
//    those (a vector kernel too), cvt::nsa_block_scale of it, then the
//    f32 -> e4m3 encoder with the scale as its divisor
//    (f32_to_e4m3(div_f32(x, scale)), the scalar rule);
//  - a read's block: the scaled decoder (cvt::mul_f32(e4m3 value, scale));
//  - rope: the wide <-> bf16 encoder and decoder.
// tests/unit/row_codec_test.cpp compares whole calls with the reference.
#include <cstring>

#include "pool/dtype_convert.hpp"
#include "pool/row_codec.hpp"
#include "pool/row_codec_kernels.hpp"
#include "util/stream_copy.hpp"

namespace kvp::pool {
namespace {

using config::DType;

DType stored_type(Wide w) { return w == Wide::kF32 ? DType::kF32 : w == Wide::kF16 ? DType::kF16 : DType::kBF16; }

// cvt::amax_f32 over f32 values: the largest |x|, NaN ignored. The vector
// kernel where there is one (an unsigned maximum of the magnitudes' bits),
// then the same rule one value at a time: on non-negative floats that are not
// NaN the order of the bits is the order of the values, so the integer
// maximum is the float loop's value.
float amax_of_f32(kernels::AmaxFn vec, const uint8_t* p, size_t count) {
  uint32_t amax = 0;
  size_t j = vec != nullptr ? vec(p, count, &amax) : 0;
  for (; j < count; ++j) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * j, 4);
    const uint32_t a = bits & 0x7fffffffu;
    const uint32_t kept = a > 0x7f800000u ? 0u : a;
    amax = kept > amax ? kept : amax;
  }
  return cvt::bits_f32(amax);
}

// Rows that stream their stores are built in a buffer first; larger rows are
// written in place with plain stores.
constexpr size_t kRowBuffer = 8192;

}  // namespace

void encode_nsa_rows(const void* nope, const void* rope, Wide in, size_t n, size_t lora, size_t rope_dim, RowRef rows) {
  const auto* nope_rows = static_cast<const uint8_t*>(nope);
  const auto* rope_rows = static_cast<const uint8_t*>(rope);
  const size_t ib = wide_bytes(in), blocks = lora / cvt::kNsaBlock;
  const size_t nope_row = lora * ib, rope_row = rope_dim * ib, packed = lora + 4 * blocks + 2 * rope_dim;
  const kernels::Decoder widen = kernels::pick_decoder(stored_type(in), Wide::kF32);
  const kernels::Encoder quantise = kernels::pick_encoder(Wide::kF32, DType::kFP8E4M3, true);
  const kernels::Encoder rope_bf16 = kernels::pick_encoder(in, DType::kBF16, false);
  const kernels::AmaxFn amax = kernels::avx512_lanes_amax_f32() != nullptr ? kernels::avx512_lanes_amax_f32()
                                                                           : kernels::avx2_amax_f32();
  const size_t ahead = util::rows_ahead(nope_row + rope_row);
  const bool stream = n * packed >= util::kStreamMinBytes && packed <= kRowBuffer;
  alignas(64) uint8_t row_buf[kRowBuffer];
  alignas(64) uint8_t block_f32[4 * cvt::kNsaBlock];
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) {
      util::prefetch_row(nope_rows + (i + ahead) * nope_row, util::prefetch_bytes(nope_row));
      util::prefetch_row(rope_rows + (i + ahead) * rope_row, util::prefetch_bytes(rope_row));
    }
    const uint8_t* s = nope_rows + i * nope_row;
    uint8_t* d = stream ? row_buf : rows.at(i);
    for (size_t b = 0; b < blocks; ++b) {
      const uint8_t* x = s + b * cvt::kNsaBlock * ib;
      if (in != Wide::kF32) {
        widen.run(x, block_f32, cvt::kNsaBlock);
        x = block_f32;
      }
      const float scale = cvt::nsa_block_scale(amax_of_f32(amax, x, cvt::kNsaBlock));
      quantise.run(x, d + b * cvt::kNsaBlock, cvt::kNsaBlock, scale);
      std::memcpy(d + lora + 4 * b, &scale, 4);
    }
    rope_bf16.run(rope_rows + i * rope_row, d + lora + 4 * blocks, rope_dim, 1.0f);
    if (stream) util::copy_streaming(rows.at(i), row_buf, packed);
  }
  if (stream) util::stream_fence();
}

void decode_nsa_rows(ConstRowRef rows, size_t n, size_t lora, size_t rope_dim, void* dst, Wide out) {
  auto* d = static_cast<uint8_t*>(dst);
  const size_t ob = wide_bytes(out), blocks = lora / cvt::kNsaBlock;
  const size_t packed = lora + 4 * blocks + 2 * rope_dim, out_row = (lora + rope_dim) * ob;
  const kernels::Encoder scaled = kernels::pick_scaled_decoder(DType::kFP8E4M3, out);
  const kernels::Decoder rope_out = kernels::pick_decoder(DType::kBF16, out);
  const size_t ahead = util::rows_ahead(packed), prefetch_bytes = util::prefetch_bytes(packed);
  const bool stream = n * out_row >= util::kStreamMinBytes && out_row <= kRowBuffer;
  alignas(64) uint8_t row_buf[kRowBuffer];
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) util::prefetch_row(rows.at(i + ahead), prefetch_bytes);
    const uint8_t* s = rows.at(i);
    uint8_t* o = stream ? row_buf : d + i * out_row;
    for (size_t b = 0; b < blocks; ++b) {
      float scale;
      std::memcpy(&scale, s + lora + 4 * b, 4);
      scaled.run(s + b * cvt::kNsaBlock, o + b * cvt::kNsaBlock * ob, cvt::kNsaBlock, scale);
    }
    rope_out.run(s + lora + 4 * blocks, o + lora * ob, rope_dim);
    if (stream) util::copy_streaming(d + i * out_row, row_buf, out_row);
  }
  if (stream) util::stream_fence();
}

}  // namespace kvp::pool
