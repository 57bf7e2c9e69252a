// The per-value kernels behind row_codec: a scalar reference for every pair of
// formats (dtype_convert.hpp's rules, one value at a time) and AVX2 and
// AVX-512 versions that give the same bytes eight or more values at a time. Exposed for the tests,
// which compare the two over every bf16 / f16 / fp8 input and 2^24 f32 ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "config/dtype.hpp"
#include "pool/row_codec.hpp"

namespace kvp::pool::kernels {

// `count` values from src (format In) to dst (format Out), each divided by
// `divisor` first where the kernel divides. Plain stored types only (not fp4).
using EncodeFn = void (*)(const uint8_t* src, uint8_t* dst, size_t count, float divisor);
using DecodeFn = void (*)(const uint8_t* src, uint8_t* dst, size_t count);
// Vector kernels convert the longest prefix that is a whole number of vectors
// and return its length; the scalar kernel finishes the rest.
using VecEncodeFn = size_t (*)(const uint8_t* src, uint8_t* dst, size_t count, float divisor);
using VecDecodeFn = size_t (*)(const uint8_t* src, uint8_t* dst, size_t count);

// Wide -> fp4_e2m1 of `blocks` whole 16-value blocks of src (each value
// divided by `divisor` first where divide): 8 bytes of nibbles and one e4m3
// scale byte per block (cvt::fp4_quantize_block's rule).
using Fp4EncodeFn = void (*)(const uint8_t* src, size_t blocks, float divisor, uint8_t* values, uint8_t* scales);
Fp4EncodeFn scalar_encode_fp4(Wide in, bool divide);  // row_codec.cpp
Fp4EncodeFn avx2_encode_fp4(Wide in, bool divide);    // nullptr without AVX2

// fp4_e2m1 -> f32 / f16 / bf16 of `blocks` whole 16-value blocks: 8 bytes of
// nibbles and one e4m3 scale byte each (cvt::fp4_dequantize's rule).
using Fp4DecodeFn = void (*)(const uint8_t* values, const uint8_t* scales, size_t blocks, uint8_t* dst);
Fp4DecodeFn scalar_decode_fp4(Wide out);  // row_codec.cpp
Fp4DecodeFn avx2_decode_fp4(Wide out);    // nullptr without AVX2

// The constants of the bf16 -> fp8 kernels (AVX2 and AVX-512 alike), in
// bf16 magnitude bits: mantissa bits dropped, the exponent re-bias, the
// magnitude above which the code is NaN 0x7f, the smallest normal, whether
// finite overflow clips to inf (0x7c), and round_magnitude's subnormal addend.
struct E4M3FromBf16 {
  static constexpr int kDrop = 4;
  static constexpr int16_t kRebias = 0x3c00, kNanAbove = 0x43e8, kMinNormal = 0x3c80;
  static constexpr bool kClipToInf = false;
  static constexpr uint32_t kSubnormalAddend = 0x46800000u;  // round_magnitude<3, 7>'s c: 2^14
};
struct E5M2FromBf16 {
  static constexpr int kDrop = 5;
  static constexpr int16_t kRebias = 0x3800, kNanAbove = 0x7f80, kMinNormal = 0x3880;
  static constexpr bool kClipToInf = true;
  static constexpr uint32_t kSubnormalAddend = 0x43000000u;  // round_magnitude<2, 15>'s c: 2^7
};

// Scalar reference kernels (row_codec.cpp); nullptr for fp4.
EncodeFn scalar_encode(Wide in, config::DType kv, bool divide);
DecodeFn scalar_decode(config::DType kv, Wide out);

// AVX2 kernels (row_codec_avx2.cpp); nullptr when this CPU lacks AVX2, the
// build is not for x86-64, or kv is fp4. With `stream` the kernel writes with
// streaming stores and needs a 64-byte-aligned dst (then util::stream_fence()).
bool cpu_has_avx2();
VecEncodeFn avx2_encode(Wide in, config::DType kv, bool divide, bool stream = false);
VecDecodeFn avx2_decode(config::DType kv, Wide out, bool stream = false);

// AVX-512 kernels, an extra path tried before the AVX2 ones. With F, BW and
// VBMI (row_codec_avx512.cpp): fp8 -> bf16 / f32 decodes by table lookup and
// bf16 -> fp8 encodes (no divisor) on 32 lanes. Every other plain pair, with
// or without a divisor, and every pair on a CPU with F and BW but no VBMI:
// the per-value kernels on sixteen u32 lanes (row_codec_avx512_lanes.cpp,
// also reachable on their own for the tests). nullptr for fp4 and where the
// CPU lacks AVX-512 BW. Streaming versions need a 64-byte-aligned dst.
bool cpu_has_avx512_vbmi();
bool cpu_has_avx512bw();  // F and BW
VecEncodeFn avx512_encode(Wide in, config::DType kv, bool divide, bool stream = false);
VecDecodeFn avx512_decode(config::DType kv, Wide out, bool stream = false);
VecEncodeFn avx512_lanes_encode(Wide in, config::DType kv, bool divide, bool stream = false);
VecDecodeFn avx512_lanes_decode(config::DType kv, Wide out, bool stream = false);

// Stored values times one f32 scale, to a wide format: Out's rule of
// cvt::mul_f32(value, scale), nsa's packed fp8 rows (e4m3 x the block's
// scale). Shaped like an encode kernel, the divisor argument being the scale.
// e4m3 only (nullptr for every other stored type and where the CPU lacks the
// instruction set).
EncodeFn scalar_decode_scaled(config::DType kv, Wide out);  // row_codec.cpp
VecEncodeFn avx2_decode_scaled(config::DType kv, Wide out, bool stream = false);
VecEncodeFn avx512_lanes_decode_scaled(config::DType kv, Wide out, bool stream = false);

// cvt::amax_f32's value over the longest prefix of `count` f32 values that is
// a whole number of vectors, as bits: raises *amax_bits to the largest
// magnitude's bits (NaN ignored) and returns the values done; the caller
// finishes the rest. nullptr where the CPU lacks the instruction set.
using AmaxFn = size_t (*)(const uint8_t* f32_values, size_t count, uint32_t* amax_bits);
AmaxFn avx2_amax_f32();
AmaxFn avx512_lanes_amax_f32();

// Converts `count` values from src to dst with streaming stores for every
// whole 64-byte line of dst and plain stores for the partial lines at either
// end, so dst need not be aligned (a caller's buffer from malloc sits 16 bytes
// past a line; rows at an offset into a pool row, like mla's rope part, too).
// plain(s, d, k) converts k values into d; stream(s, d, k) converts the
// longest prefix of whole vectors into line-aligned d with streaming stores
// and returns its length. The partial lines are converted a whole line's
// worth of values at a time into a buffer (a whole number of vectors for
// every kernel: 64 bytes of output), so no value takes the scalar path, and
// the conversion is per value, so a value converts the same in either place.
// False, nothing written, where dst is not a whole number of values past a
// line boundary (an odd address for 2-byte values) or count is under two
// lines of output: the caller converts through an aligned buffer instead.
template <class Plain, class Stream>
bool convert_streaming(const uint8_t* src, uint8_t* dst, size_t count, size_t in_bytes, size_t out_bytes,
                       const Plain& plain, const Stream& stream) {
  constexpr size_t kLine = 64;
  const size_t line_values = kLine / out_bytes;
  const size_t head_bytes = (kLine - (reinterpret_cast<uintptr_t>(dst) & (kLine - 1))) & (kLine - 1);
  if (head_bytes % out_bytes != 0 || count < 2 * line_values) return false;
  alignas(64) uint8_t edge[kLine];
  const size_t head = head_bytes / out_bytes;
  if (head > 0) {
    plain(src, edge, line_values);
    std::memcpy(dst, edge, head_bytes);
  }
  // count - head >= line_values: at least one whole line to stream.
  size_t done = head + stream(src + head * in_bytes, dst + head_bytes, count - head);
  // What is left (less than a vector for today's kernels) a line's worth at a
  // time, the last one ending at count (its values before `done` are
  // converted again but not written).
  while (done < count) {
    const size_t first = done < count - line_values ? done : count - line_values;
    plain(src + first * in_bytes, edge, line_values);
    std::memcpy(dst + done * out_bytes, edge + (done - first) * out_bytes, (first + line_values - done) * out_bytes);
    done = first + line_values;
  }
  return true;
}

// What encode_rows / decode_rows use: the AVX-512 or else the AVX2 kernel
// where there is one, then the scalar kernel for the remainder (or for
// everything).
struct Encoder {
  VecEncodeFn vec = nullptr, vec_stream = nullptr;
  EncodeFn scalar = nullptr;
  size_t in_bytes = 0, out_bytes = 0;
  void run(const uint8_t* src, uint8_t* dst, size_t count, float divisor) const {
    const size_t done = vec != nullptr ? vec(src, dst, count, divisor) : 0;
    if (done < count) scalar(src + done * in_bytes, dst + done * out_bytes, count - done, divisor);
  }
  // With streaming stores (convert_streaming); false, nothing written, where
  // there is no streaming kernel or convert_streaming declines dst or count.
  // The caller then converts into an aligned buffer and streams that out.
  bool run_streaming(const uint8_t* src, uint8_t* dst, size_t count, float divisor) const {
    if (vec_stream == nullptr) return false;
    return convert_streaming(
        src, dst, count, in_bytes, out_bytes, [&](const uint8_t* s, uint8_t* d, size_t k) { run(s, d, k, divisor); },
        [&](const uint8_t* s, uint8_t* d, size_t k) { return vec_stream(s, d, k, divisor); });
  }
};

struct Decoder {
  VecDecodeFn vec = nullptr, vec_stream = nullptr;
  DecodeFn scalar = nullptr;
  size_t in_bytes = 0, out_bytes = 0;
  void run(const uint8_t* src, uint8_t* dst, size_t count) const {
    const size_t done = vec != nullptr ? vec(src, dst, count) : 0;
    if (done < count) scalar(src + done * in_bytes, dst + done * out_bytes, count - done);
  }
  bool run_streaming(const uint8_t* src, uint8_t* dst, size_t count) const {
    if (vec_stream == nullptr) return false;
    return convert_streaming(
        src, dst, count, in_bytes, out_bytes, [&](const uint8_t* s, uint8_t* d, size_t k) { run(s, d, k); },
        [&](const uint8_t* s, uint8_t* d, size_t k) { return vec_stream(s, d, k); });
  }
};

// use_vector false gives the scalar reference alone (the tests' baseline).
Encoder pick_encoder(Wide in, config::DType kv, bool divide, bool use_vector = true);
Decoder pick_decoder(config::DType kv, Wide out, bool use_vector = true);
// The scaled decode as an Encoder (its divisor is the scale): AVX-512, else AVX2, then scalar.
Encoder pick_scaled_decoder(config::DType kv, Wide out, bool use_vector = true);

// nsa's packed fp8 rows (encode_nsa_rows / decode_nsa_rows) one value at a
// time, with no prefetch and no streaming: the tests' reference.
void scalar_encode_nsa_rows(const void* nope, const void* rope, Wide in, size_t n, size_t lora, size_t rope_dim,
                            RowRef rows);
void scalar_decode_nsa_rows(ConstRowRef rows, size_t n, size_t lora, size_t rope_dim, void* dst, Wide out);

}  // namespace kvp::pool::kernels
