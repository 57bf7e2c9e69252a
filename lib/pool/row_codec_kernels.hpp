// The per-value kernels behind row_codec: a scalar reference for every pair of
// formats (dtype_convert.hpp's rules, one value at a time) and AVX2 versions
// that give the same bytes eight values at a time. Exposed for the tests,
// which compare the two over every bf16 / f16 / fp8 input and 2^24 f32 ones.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Scalar reference kernels (row_codec.cpp); nullptr for fp4.
EncodeFn scalar_encode(Wide in, config::DType kv, bool divide);
DecodeFn scalar_decode(config::DType kv, Wide out);

// AVX2 kernels (row_codec_avx2.cpp); nullptr when this CPU lacks AVX2, the
// build is not for x86-64, or kv is fp4.
bool cpu_has_avx2();
VecEncodeFn avx2_encode(Wide in, config::DType kv, bool divide);
VecDecodeFn avx2_decode(config::DType kv, Wide out);

// What encode_rows / decode_rows use: the AVX2 kernel where there is one,
// then the scalar kernel for the remainder (or for everything).
struct Encoder {
  VecEncodeFn vec = nullptr;
  EncodeFn scalar = nullptr;
  size_t in_bytes = 0, out_bytes = 0;
  void run(const uint8_t* src, uint8_t* dst, size_t count, float divisor) const {
    const size_t done = vec != nullptr ? vec(src, dst, count, divisor) : 0;
    if (done < count) scalar(src + done * in_bytes, dst + done * out_bytes, count - done, divisor);
  }
};

struct Decoder {
  VecDecodeFn vec = nullptr;
  DecodeFn scalar = nullptr;
  size_t in_bytes = 0, out_bytes = 0;
  void run(const uint8_t* src, uint8_t* dst, size_t count) const {
    const size_t done = vec != nullptr ? vec(src, dst, count) : 0;
    if (done < count) scalar(src + done * in_bytes, dst + done * out_bytes, count - done);
  }
};

// use_vector false gives the scalar reference alone (the tests' baseline).
Encoder pick_encoder(Wide in, config::DType kv, bool divide, bool use_vector = true);
Decoder pick_decoder(config::DType kv, Wide out, bool use_vector = true);

}  // namespace kvp::pool::kernels
