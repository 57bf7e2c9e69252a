// The AVX2 and AVX-512 conversion kernels against the scalar reference (dtype_convert.hpp's
// rules, one value at a time): identical bytes for every bf16, f16 and fp8
// input, for 2^24 f32 inputs (edge cases around every rounding boundary of
// every exponent, then random bit patterns, fixed seed), with and without a
// divisor; then whole rows through encode_rows / decode_rows with streamed
// stores, and the CPU backend's streamed row copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "pool/dtype_convert.hpp"
#include "pool/row_codec.hpp"
#include "pool/row_codec_kernels.hpp"
#include "util/stream_copy.hpp"

namespace {

using kvp::config::DType;
using kvp::pool::Wide;
namespace kn = kvp::pool::kernels;

constexpr DType kPlain[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2};
constexpr Wide kWide[] = {Wide::kF32, Wide::kF16, Wide::kBF16};

const char* name(DType d) { return kvp::config::dtype_name(d); }
const char* name(Wide w) { return w == Wide::kF32 ? "f32" : w == Wide::kF16 ? "f16" : "bf16"; }

bool machine_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
#else
  return false;
#endif
}

bool machine_has_avx512bw() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0;
#else
  return false;
#endif
}

// Index of the first differing element (elements of `bytes` bytes), or -1.
long first_mismatch(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t bytes) {
  if (a == b) return -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<long>(i / bytes);
  }
  return -1;
}

std::string hex(const uint8_t* p, size_t bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (size_t i = bytes; i-- > 0;) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

// A streaming conversion, stream(dst, count): the first `count` values of
// the source to dst, `want` being the scalar kernel's bytes for all of them.
// At every dst offset within a line it must either refuse, writing nothing
// (an offset that is not a whole number of values, or under two lines of
// output), or write exactly want's bytes and nothing around them: the whole
// source at a few offsets, then prefixes around the two-line minimum and
// the vector widths at every offset.
template <class Stream>
void expect_streamed_matches(const Stream& stream, const std::vector<uint8_t>& want, size_t ob) {
  const size_t total = want.size() / ob, line_values = 64 / ob;
  auto check = [&](size_t offset, size_t count) {
    SCOPED_TRACE("dst offset " + std::to_string(offset) + ", " + std::to_string(count) + " values");
    // A line of guard bytes before the destination line and after the values.
    std::vector<uint8_t> space(count * ob + 192, 0x33);
    const size_t at_line = 64 + ((64 - (reinterpret_cast<uintptr_t>(space.data()) & 63)) & 63);
    const bool accepted = stream(space.data() + at_line + offset, count);
    kvp::util::stream_fence();
    ASSERT_EQ(accepted, offset % ob == 0 && count >= 2 * line_values);
    std::vector<uint8_t> expect(space.size(), 0x33);
    if (accepted) std::memcpy(expect.data() + at_line + offset, want.data(), count * ob);
    const long at = first_mismatch(expect, space, 1);
    ASSERT_EQ(at, -1) << "byte " << at - static_cast<long>(at_line) << " from the line boundary";
  };
  for (size_t offset : {size_t{0}, ob, size_t{16}, size_t{63}}) check(offset, total);
  for (size_t count : {2 * line_values - 1, 2 * line_values, 2 * line_values + 1, 3 * line_values - 1, size_t{97},
                       size_t{300}}) {
    if (count > total) continue;
    for (size_t offset = 0; offset < 64; ++offset) check(offset, count);
  }
}

// Each instruction set's kernels, tested on their own: the AVX2 ones (which
// also run where AVX-512 ones are picked before them), the AVX-512 ones as
// picked, and AVX-512's per-value kernels on sixteen u32 lanes (picked for
// every pair that has no more special AVX-512 kernel).
enum class KernelSet { kAvx2, kAvx512, kAvx512Lanes };
constexpr KernelSet kSets[] = {KernelSet::kAvx2, KernelSet::kAvx512, KernelSet::kAvx512Lanes};

const char* set_name(KernelSet set) {
  return set == KernelSet::kAvx2 ? "AVX2 kernels" : set == KernelSet::kAvx512 ? "AVX-512 kernels" : "AVX-512 lanes";
}

kn::VecEncodeFn encode_kernel(KernelSet set, Wide in, DType kv, bool divide, bool stream) {
  switch (set) {
    case KernelSet::kAvx2: return kn::avx2_encode(in, kv, divide, stream);
    case KernelSet::kAvx512: return kn::avx512_encode(in, kv, divide, stream);
    case KernelSet::kAvx512Lanes: return kn::avx512_lanes_encode(in, kv, divide, stream);
  }
  return nullptr;
}

kn::VecDecodeFn decode_kernel(KernelSet set, DType kv, Wide out, bool stream) {
  switch (set) {
    case KernelSet::kAvx2: return kn::avx2_decode(kv, out, stream);
    case KernelSet::kAvx512: return kn::avx512_decode(kv, out, stream);
    case KernelSet::kAvx512Lanes: return kn::avx512_lanes_decode(kv, out, stream);
  }
  return nullptr;
}

// One encoder (vector kernel + scalar tail) against the scalar kernel alone,
// plain and, where it has them, with streaming stores at every alignment.
void expect_encoder_matches(const kn::Encoder& fast, const kn::Encoder& ref, const std::vector<uint8_t>& src,
                            float divisor) {
  const size_t ib = ref.in_bytes, ob = ref.out_bytes, count = src.size() / ib;
  std::vector<uint8_t> want(count * ob, 0xAA), got(count * ob, 0x55);
  ref.run(src.data(), want.data(), count, divisor);
  fast.run(src.data(), got.data(), count, divisor);
  long at = first_mismatch(want, got, ob);
  ASSERT_EQ(at, -1) << "input " << hex(src.data() + at * ib, ib) << ": scalar " << hex(want.data() + at * ob, ob)
                    << ", vector " << hex(got.data() + at * ob, ob);
  if (fast.vec_stream == nullptr) {
    ASSERT_FALSE(fast.run_streaming(src.data(), got.data(), count, divisor)) << "no streaming kernel";
    return;
  }
  expect_streamed_matches(
      [&](uint8_t* dst, size_t k) { return fast.run_streaming(src.data(), dst, k, divisor); }, want, ob);
}

// Every pair from `in` to each plain stored type: the encoder encode_rows
// picks, then each instruction set's kernels on their own (the AVX2 ones also
// run where AVX-512 ones are picked before them).
void expect_encode_same(Wide in, const std::vector<uint8_t>& src, float divisor) {
  for (DType kv : kPlain) {
    SCOPED_TRACE(std::string(name(in)) + " -> " + name(kv) + " divisor " + std::to_string(divisor));
    const bool divide = divisor != 1.0f;
    const kn::Encoder ref = kn::pick_encoder(in, kv, divide, false);
    const kn::Encoder fast = kn::pick_encoder(in, kv, divide, true);
    ASSERT_EQ(ref.vec, nullptr);
    ASSERT_NE(ref.scalar, nullptr);
    if (machine_has_avx2()) {
      ASSERT_NE(fast.vec, nullptr);
    }
    expect_encoder_matches(fast, ref, src, divisor);
    for (KernelSet set : kSets) {
      SCOPED_TRACE(set_name(set));
      kn::Encoder only = ref;
      only.vec = encode_kernel(set, in, kv, divide, false);
      only.vec_stream = encode_kernel(set, in, kv, divide, true);
      if (only.vec == nullptr) continue;
      ASSERT_NE(only.vec_stream, nullptr);
      // The per-value AVX-512 kernels where the picked AVX-512 kernel is another one (else tested just before).
      if (set == KernelSet::kAvx512Lanes && only.vec == kn::avx512_encode(in, kv, divide)) continue;
      expect_encoder_matches(only, ref, src, divisor);
    }
  }
}

// One decoder (vector kernel + scalar tail) against the scalar kernel, plain
// and, where it has them, with streaming stores.
void expect_decoder_matches(const kn::Decoder& fast, const kn::Decoder& ref, const std::vector<uint8_t>& src) {
  const size_t ib = ref.in_bytes, ob = ref.out_bytes, count = src.size() / ib;
  std::vector<uint8_t> want(count * ob, 0xAA), got(count * ob, 0x55);
  ref.run(src.data(), want.data(), count);
  fast.run(src.data(), got.data(), count);
  long at = first_mismatch(want, got, ob);
  ASSERT_EQ(at, -1) << "stored " << hex(src.data() + at * ib, ib) << ": scalar " << hex(want.data() + at * ob, ob)
                    << ", vector " << hex(got.data() + at * ob, ob);
  if (fast.vec_stream == nullptr) {
    ASSERT_FALSE(fast.run_streaming(src.data(), got.data(), count)) << "no streaming kernel";
    return;
  }
  expect_streamed_matches([&](uint8_t* dst, size_t k) { return fast.run_streaming(src.data(), dst, k); }, want, ob);
}

// The decoder decode_rows picks, then each instruction set's kernels on their
// own (the AVX2 ones also run where AVX-512 ones are picked before them).
void expect_decode_same(DType kv, const std::vector<uint8_t>& src) {
  for (Wide out : kWide) {
    SCOPED_TRACE(std::string(name(kv)) + " -> " + name(out));
    const kn::Decoder ref = kn::pick_decoder(kv, out, false);
    const kn::Decoder fast = kn::pick_decoder(kv, out, true);
    ASSERT_EQ(ref.vec, nullptr);
    if (machine_has_avx2()) {
      ASSERT_NE(fast.vec, nullptr);
    }
    expect_decoder_matches(fast, ref, src);
    for (KernelSet set : kSets) {
      SCOPED_TRACE(set_name(set));
      kn::Decoder only = ref;
      only.vec = decode_kernel(set, kv, out, false);
      only.vec_stream = decode_kernel(set, kv, out, true);
      if (only.vec == nullptr) continue;
      ASSERT_NE(only.vec_stream, nullptr);
      if (set == KernelSet::kAvx512Lanes && only.vec == kn::avx512_decode(kv, out)) continue;
      expect_decoder_matches(only, ref, src);
    }
  }
}

// All 2^16 patterns, plus 5 more so that the scalar tail after the last whole vector is used too.
std::vector<uint8_t> all_u16() {
  std::vector<uint8_t> v(2 * (65536 + 5));
  for (uint32_t i = 0; i < 65536 + 5; ++i) {
    const uint16_t x = static_cast<uint16_t>(i * 40503u);  // odd multiplier: a permutation of all 2^16 values
    std::memcpy(v.data() + 2 * i, &x, 2);
  }
  return v;
}

// 2^24 f32 bit patterns: for both signs and every exponent, mantissas whose
// low bits sit at, just below and just above each rounding point of bf16
// (16 dropped bits), f16 (13), e4m3 (20) and e5m2 (21), with varied upper
// bits; the rest random. Inf, NaNs (quiet and signalling, with payloads),
// zeros, f32 subnormals and the fp8/f16 overflow boundaries are among them.
std::vector<uint8_t> f32_sweep(size_t total) {
  std::vector<uint32_t> v;
  v.reserve(total);
  std::mt19937_64 rng(0x6b76706f6f6cull);
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t exp = 0; exp < 256; ++exp) {
      for (int drop : {13, 16, 20, 21}) {
        const uint32_t half = 1u << (drop - 1);
        for (uint32_t low : {0u, 1u, half - 1, half, half + 1, 2 * half - 1}) {
          for (int r = 0; r < 8; ++r) {
            const uint32_t upper = r == 0 ? 0u : r == 1 ? 0x7fffffu : static_cast<uint32_t>(rng());
            const uint32_t mant = ((upper >> drop) << drop | low) & 0x7fffffu;
            v.push_back(sign << 31 | exp << 23 | mant);
          }
        }
      }
    }
  }
  for (uint32_t x : {0x43e00000u, 0x43e80000u, 0x43e80001u, 0x43f00000u, 0x477fe000u, 0x477ff000u, 0x477ff001u,
                     0x47600000u, 0x47700000u, 0x47700001u, 0x7f7fffffu, 0x00000001u, 0x007fffffu, 0x7fc00000u,
                     0x7f800001u, 0x7fbfffffu, 0xffffffffu}) {
    v.push_back(x);
    v.push_back(x | 0x80000000u);
  }
  while (v.size() < total) v.push_back(static_cast<uint32_t>(rng()));
  v.resize(total);
  std::vector<uint8_t> bytes(4 * v.size());
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST(RowCodecKernels, DispatchPicksTheVectorPathWhereTheCpuHasAvx2) {
  const bool avx2 = machine_has_avx2();
  EXPECT_EQ(kn::cpu_has_avx2(), avx2);
  EXPECT_EQ(kn::cpu_has_avx512bw(), machine_has_avx512bw());
  for (Wide w : kWide) {
    for (DType kv : kPlain) {
      EXPECT_EQ(kn::pick_encoder(w, kv, false).vec != nullptr, avx2) << name(w) << " -> " << name(kv);
      EXPECT_EQ(kn::pick_encoder(w, kv, true).vec != nullptr, avx2) << name(w) << " -> " << name(kv);
      EXPECT_EQ(kn::pick_decoder(kv, w).vec != nullptr, avx2) << name(kv) << " -> " << name(w);
    }
    const bool bw = kn::cpu_has_avx512bw();
    for (DType kv : kPlain) {
      const bool fp8 = kv == DType::kFP8E4M3 || kv == DType::kFP8E5M2;
      const bool table = fp8 && w != Wide::kF16 && kn::cpu_has_avx512_vbmi();
      const bool from_bf16 = fp8 && w == Wide::kBF16 && kn::cpu_has_avx512_vbmi();
      // Every plain pair has an AVX-512 kernel where the CPU has BW: the
      // special one where there is one, else the per-value one.
      EXPECT_EQ(kn::avx512_lanes_decode(kv, w) != nullptr, bw) << name(kv) << " -> " << name(w);
      EXPECT_EQ(kn::avx512_lanes_encode(w, kv, false) != nullptr, bw) << name(w) << " -> " << name(kv);
      EXPECT_EQ(kn::avx512_lanes_encode(w, kv, true) != nullptr, bw) << name(w) << " -> " << name(kv) << " divided";
      EXPECT_EQ(kn::avx512_decode(kv, w) != nullptr, bw || table) << name(kv) << " -> " << name(w);
      EXPECT_EQ(kn::avx512_encode(w, kv, false) != nullptr, bw || from_bf16) << name(w) << " -> " << name(kv);
      EXPECT_EQ(kn::avx512_encode(w, kv, true), kn::avx512_lanes_encode(w, kv, true)) << "only per-value kernels divide";
      if (!table) {
        EXPECT_EQ(kn::avx512_decode(kv, w), kn::avx512_lanes_decode(kv, w)) << name(kv) << " -> " << name(w);
      }
      if (!from_bf16) {
        EXPECT_EQ(kn::avx512_encode(w, kv, false), kn::avx512_lanes_encode(w, kv, false)) << name(w) << " -> " << name(kv);
      }
      if (bw || from_bf16) {
        EXPECT_EQ(kn::pick_encoder(w, kv, false).vec, kn::avx512_encode(w, kv, false)) << "AVX-512 picked first";
        EXPECT_EQ(kn::pick_encoder(w, kv, true).vec, kn::avx512_encode(w, kv, true)) << "AVX-512 picked first";
      }
      if (bw || table) {
        EXPECT_EQ(kn::pick_decoder(kv, w).vec, kn::avx512_decode(kv, w)) << "AVX-512 picked first";
      }
    }
    EXPECT_EQ(kn::avx512_encode(w, DType::kFP4E2M1, false), nullptr);
    EXPECT_EQ(kn::avx512_decode(DType::kFP4E2M1, w), nullptr);
    // fp4 quantises 16-value blocks: no per-value kernels (its block kernels are tested below).
    EXPECT_EQ(kn::pick_encoder(w, DType::kFP4E2M1, false).scalar, nullptr);
    EXPECT_EQ(kn::avx2_encode(w, DType::kFP4E2M1, false), nullptr);
  }
#if defined(__x86_64__)
  // This project's CI and development machines are AVX2 x86-64: say so if not.
  if (!avx2) GTEST_SKIP() << "this CPU has no AVX2: only the scalar kernels run";
#endif
}

TEST(RowCodecKernels, EveryBf16AndF16InputEncodesIdentically) {
  const std::vector<uint8_t> src = all_u16();
  for (Wide in : {Wide::kBF16, Wide::kF16}) {
    for (float divisor : {1.0f, 3.0f, 0.0625f, 1e-30f, 1e30f, 448.0f / 7.0f}) expect_encode_same(in, src, divisor);
  }
}

TEST(RowCodecKernels, DenseF32SweepEncodesIdentically) {
  const std::vector<uint8_t> src = f32_sweep(size_t{1} << 24);
  expect_encode_same(Wide::kF32, src, 1.0f);
  expect_encode_same(Wide::kF32, src, 3.0f);
  const std::vector<uint8_t> part(src.begin(), src.begin() + 4 * (size_t{1} << 20));
  for (float divisor : {0.0625f, 1e-30f, 1e30f}) expect_encode_same(Wide::kF32, part, divisor);
}

TEST(RowCodecKernels, EveryStoredInputDecodesIdentically) {
  std::vector<uint8_t> bytes(256 + 7);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 167u);
  expect_decode_same(DType::kFP8E4M3, bytes);
  expect_decode_same(DType::kFP8E5M2, bytes);
  const std::vector<uint8_t> u16 = all_u16();
  expect_decode_same(DType::kBF16, u16);
  expect_decode_same(DType::kF16, u16);
  expect_decode_same(DType::kF32, f32_sweep(size_t{1} << 22));
}

// fp4_e2m1 writes: whole blocks from bf16 / f16 (every pattern, in permuted
// order), from the f32 sweep (runs of one exponent: blocks of like
// magnitudes) and from crafted blocks: amax 6 x 2^e with the other values on
// every quarter step (the code's ties), NaN, inf, zero, overflowing and tiny
// blocks; with and without divisors.
void expect_fp4_encode_same(Wide in, const std::vector<uint8_t>& src, float divisor) {
  SCOPED_TRACE(std::string(name(in)) + " -> fp4_e2m1 divisor " + std::to_string(divisor));
  const bool divide = divisor != 1.0f;
  const kn::Fp4EncodeFn ref = kn::scalar_encode_fp4(in, divide);
  const kn::Fp4EncodeFn vec = kn::avx2_encode_fp4(in, divide);
  ASSERT_NE(ref, nullptr);
  ASSERT_EQ(vec != nullptr, machine_has_avx2());
  if (vec == nullptr) return;
  const size_t blocks = src.size() / kvp::pool::wide_bytes(in) / 16;
  std::vector<uint8_t> want_v(8 * blocks, 0xAA), got_v(8 * blocks, 0x55), want_s(blocks, 0xAA), got_s(blocks, 0x55);
  ref(src.data(), blocks, divisor, want_v.data(), want_s.data());
  vec(src.data(), blocks, divisor, got_v.data(), got_s.data());
  const long at_s = first_mismatch(want_s, got_s, 1);
  ASSERT_EQ(at_s, -1) << "block " << at_s << " scale: scalar " << hex(&want_s[at_s], 1) << ", vector "
                      << hex(&got_s[at_s], 1);
  const long at = first_mismatch(want_v, got_v, 8);
  ASSERT_EQ(at, -1) << "block " << at << " nibbles: scalar " << hex(&want_v[8 * at], 8) << ", vector "
                    << hex(&got_v[8 * at], 8);
}

std::vector<uint8_t> fp4_crafted_blocks() {
  std::vector<float> v;
  std::mt19937_64 rng(9);
  for (int e = -12; e <= 10; ++e) {
    const float unit = std::ldexp(0.25f, e);  // a quarter of the scale 2^e
    for (int rep = 0; rep < 4; ++rep) {
      v.push_back(24 * unit);  // amax = 6 x 2^e: the scale is exactly 2^e
      for (int k = 1; k < 16; ++k) {
        const float q = static_cast<float>((k + rep * 15) % 25);  // 0 .. 24 quarters: every tie and step
        v.push_back((rng() & 1) != 0 ? -q * unit : q * unit);
      }
    }
  }
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  for (float special : {nan, inf, -inf, 0.0f, -0.0f, 1e30f, 3000.0f, 2688.0f, 2689.0f, 1e-30f, 1e-3f, 1e-2f}) {
    for (int k = 0; k < 16; ++k) v.push_back(k % 3 == 0 ? special : (k % 3 == 1 ? 1.0f : -0.5f));
    for (int k = 0; k < 16; ++k) v.push_back(special);
  }
  std::vector<uint8_t> bytes(4 * v.size());
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

TEST(RowCodecKernels, Fp4BlocksEncodeIdentically) {
  const std::vector<uint8_t> u16 = all_u16();
  const std::vector<uint8_t> sweep = f32_sweep(size_t{1} << 20), crafted = fp4_crafted_blocks();
  for (float divisor : {1.0f, 3.0f, 0.0625f, 1e-30f, 1e30f}) {
    expect_fp4_encode_same(Wide::kBF16, u16, divisor);
    expect_fp4_encode_same(Wide::kF16, u16, divisor);
    expect_fp4_encode_same(Wide::kF32, sweep, divisor);
    expect_fp4_encode_same(Wide::kF32, crafted, divisor);
  }
}

// fp4_e2m1 reads: every (scale byte, value byte) pair, i.e. every input a
// block can hold for each of its 8 bytes: 256 scales x 32 blocks whose 8-byte
// values run through all 256 bytes. Then decode_rows over rows at random
// slots against the scalar kernel row by row.
TEST(RowCodecKernels, EveryFp4ScaleAndValueByteDecodesIdentically) {
  const size_t blocks = 256 * 32;
  std::vector<uint8_t> values(8 * blocks), scales(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    scales[b] = static_cast<uint8_t>(b / 32);
    for (size_t j = 0; j < 8; ++j) values[8 * b + j] = static_cast<uint8_t>(((b % 32) * 8 + j) * 167u);
  }
  for (Wide out : kWide) {
    SCOPED_TRACE(name(out));
    const kn::Fp4DecodeFn ref = kn::scalar_decode_fp4(out);
    const kn::Fp4DecodeFn vec = kn::avx2_decode_fp4(out);
    ASSERT_NE(ref, nullptr);
    EXPECT_EQ(vec != nullptr, machine_has_avx2());
    if (vec == nullptr) continue;
    const size_t ob = kvp::pool::wide_bytes(out);
    std::vector<uint8_t> want(16 * blocks * ob, 0xAA), got(16 * blocks * ob, 0x55);
    ref(values.data(), scales.data(), blocks, want.data());
    vec(values.data(), scales.data(), blocks, got.data());
    const long at = first_mismatch(want, got, ob);
    ASSERT_EQ(at, -1) << "scale " << hex(&scales[at / 16], 1) << " value byte " << hex(&values[at / 2], 1)
                      << ": scalar " << hex(want.data() + at * ob, ob) << ", vector " << hex(got.data() + at * ob, ob);
  }
  // Rows: 64 values (4 blocks) each, at random slots of a pool of fp4 rows.
  const size_t elements = 64, pool_rows = 500, n = 300;
  std::vector<int64_t> rows(pool_rows);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::mt19937_64 rng(3);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(n);
  std::vector<uint8_t> pool_values(pool_rows * elements / 2), pool_scales(pool_rows * elements / 16);
  for (auto& b : pool_values) b = static_cast<uint8_t>(rng());
  for (auto& b : pool_scales) b = static_cast<uint8_t>(rng());
  for (Wide out : kWide) {
    const size_t ob = kvp::pool::wide_bytes(out);
    std::vector<uint8_t> got(n * elements * ob), want(elements * ob);
    const kvp::pool::ConstRowRef v{pool_values.data(), elements / 2, rows.data()};
    const kvp::pool::ConstRowRef sc{pool_scales.data(), elements / 16, rows.data()};
    kvp::pool::decode_rows(v, sc, n, elements, DType::kFP4E2M1, got.data(), out);
    for (size_t i = 0; i < n; ++i) {
      kn::scalar_decode_fp4(out)(v.at(i), sc.at(i), elements / 16, want.data());
      ASSERT_EQ(std::memcmp(got.data() + i * elements * ob, want.data(), want.size()), 0) << name(out) << " row " << i;
    }
  }
}

// nsa reads' scaled decode (e4m3 x an f32 block scale, cvt::mul_f32's rule):
// every e4m3 byte times scales of every kind (ones whose products overflow,
// underflow to subnormals or zero, inf, NaNs with payloads and signs, zero
// and negative ones), each instruction set on its own and as picked, plain
// and streamed at every offset. Shaped like an encoder: its divisor is the scale.
TEST(RowCodecKernels, EveryE4m3ByteTimesEveryKindOfScaleDecodesIdentically) {
  std::vector<uint8_t> bytes(256 + 7 + 64);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 167u);
  std::vector<float> scales = {1.0f, 0.5f, 3.0f, 224.0f / 448.0f, 1.0f / 448.0f, 1e-30f, 1e-38f, 1e-45f, 1e30f,
                               3.4e38f, 0.0f, -0.0f, -2.0f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity()};
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffa00001u}) {
    float nan;
    std::memcpy(&nan, &bits, 4);
    scales.push_back(nan);
  }
  for (Wide out : kWide) {
    const kn::Encoder ref = kn::pick_scaled_decoder(DType::kFP8E4M3, out, false);
    const kn::Encoder fast = kn::pick_scaled_decoder(DType::kFP8E4M3, out, true);
    ASSERT_NE(ref.scalar, nullptr);
    ASSERT_EQ(ref.vec, nullptr);
    EXPECT_EQ(fast.vec != nullptr, machine_has_avx2()) << name(out);
    EXPECT_EQ(kn::scalar_decode_scaled(DType::kFP8E5M2, out), nullptr) << "e4m3 only";
    for (float scale : scales) {
      SCOPED_TRACE(std::string("e4m3 -> ") + name(out) + " x " + hex(reinterpret_cast<const uint8_t*>(&scale), 4));
      expect_encoder_matches(fast, ref, bytes, scale);
      for (int set = 0; set < 2; ++set) {
        SCOPED_TRACE(set == 0 ? "AVX2 kernels" : "AVX-512 lanes");
        kn::Encoder only = ref;
        only.vec = set == 0 ? kn::avx2_decode_scaled(DType::kFP8E4M3, out)
                            : kn::avx512_lanes_decode_scaled(DType::kFP8E4M3, out);
        only.vec_stream = set == 0 ? kn::avx2_decode_scaled(DType::kFP8E4M3, out, true)
                                   : kn::avx512_lanes_decode_scaled(DType::kFP8E4M3, out, true);
        if (only.vec == nullptr) continue;
        ASSERT_NE(only.vec_stream, nullptr);
        expect_encoder_matches(only, ref, bytes, scale);
      }
    }
  }
}

// nsa writes' block amax kernels against cvt::amax_f32: runs of 1-300 values
// of the f32 sweep (every sign, exponent and NaN kind; runs of NaN only,
// infinities, zeros), each instruction set on its own; the values a kernel
// leaves (under a whole vector) are not looked at, so each run is checked
// over exactly the prefix the kernel returns.
TEST(RowCodecKernels, BlockAmaxEqualsTheScalarRule) {
  std::vector<uint8_t> values = f32_sweep(size_t{1} << 20);
  const uint32_t specials[] = {0x7fc00000u, 0xffc00001u, 0x7f800000u, 0x80000000u, 0x00000001u};
  for (size_t i = 0; i < 4096; ++i) std::memcpy(&values[4 * i], &specials[(i / 300) % 5], 4);  // runs of one kind
  int sets = 0;
  for (kn::AmaxFn amax : {kn::avx2_amax_f32(), kn::avx512_lanes_amax_f32()}) {
    if (amax == nullptr) continue;
    ++sets;
    size_t at = 0, count = 1;
    while (at + count <= values.size() / 4) {
      uint32_t bits = 0;
      const size_t done = amax(values.data() + 4 * at, count, &bits);
      ASSERT_EQ(done % 8, 0u);
      ASSERT_LE(done, count);
      ASSERT_GT(done + 16, count);
      std::vector<float> run(done);
      if (done > 0) std::memcpy(run.data(), values.data() + 4 * at, 4 * done);  // data() may be NULL when empty
      const float want = kvp::pool::cvt::amax_f32(run.data(), static_cast<int>(done));
      ASSERT_EQ(bits, kvp::pool::cvt::f32_bits(want)) << "values " << at << " + " << done;
      at += count;
      count = count % 300 + 1;
    }
  }
  EXPECT_EQ(sets, machine_has_avx2() + machine_has_avx512bw());
}

// nsa's packed fp8 rows through encode_nsa_rows / decode_nsa_rows against the
// scalar reference, DeepSeek's shape (lora 512, rope 64: 656-byte rows) at
// random slots: few rows (plain stores) and enough that the stores stream.
// Writes take every bf16 / f16 pattern or the f32 sweep, with blocks of
// zeros, NaNs, infinities and overflowing values among them; reads take the
// rows written and rows of random bytes (any e4m3 byte, any scale bits); the
// caller's buffer of a read sits 0, 16 or 1 bytes past a line.
std::vector<uint8_t> nsa_sources(Wide in, size_t values) {
  if (in == Wide::kF32) {
    std::vector<uint8_t> v = f32_sweep(values);
    auto fill_block = [&](size_t block, uint32_t bits) {
      for (size_t j = 0; j < 128; ++j) std::memcpy(&v[4 * (128 * block + j)], &bits, 4);
    };
    fill_block(1, 0);            // all zero: scale 1
    fill_block(3, 0x7fc00000u);  // all NaN: amax 0
    fill_block(6, 0xff800000u);  // all -inf
    fill_block(9, 0x43e00000u);  // all 448
    return v;
  }
  std::vector<uint8_t> v;
  const std::vector<uint8_t> all = all_u16();
  while (v.size() < 2 * values) v.insert(v.end(), all.begin(), all.end());
  v.resize(2 * values);
  std::fill(v.begin() + 2 * 128, v.begin() + 2 * 256, uint8_t{0});  // block 1 all zero
  return v;
}

TEST(RowCodecRows, NsaPackedRowsEqualTheScalarReference) {
  const size_t lora = 512, rope = 64, packed = lora + 4 * 4 + 2 * rope, pool_rows = 7000;
  std::mt19937_64 rng(13);
  for (size_t n : {size_t{100}, size_t{6500}}) {
    SCOPED_TRACE(std::to_string(n) + " rows");
    if (n > 1000) {
      ASSERT_GE(n * packed, kvp::util::kStreamMinBytes);
    }
    std::vector<int64_t> rows(pool_rows);
    std::iota(rows.begin(), rows.end(), int64_t{0});
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(n);
    for (Wide in : kWide) {
      SCOPED_TRACE(std::string("from ") + name(in));
      const size_t ib = kvp::pool::wide_bytes(in);
      const std::vector<uint8_t> nope = nsa_sources(in, n * lora);
      std::vector<uint8_t> rope_src = nsa_sources(in, n * rope + 4096);
      rope_src.erase(rope_src.begin(), rope_src.begin() + 4096 * ib);  // other values than the nope part's
      std::vector<uint8_t> want(pool_rows * packed, 0x5a), got(pool_rows * packed, 0x5a);
      kn::scalar_encode_nsa_rows(nope.data(), rope_src.data(), in, n, lora, rope,
                                 kvp::pool::RowRef{want.data(), packed, rows.data()});
      kvp::pool::encode_nsa_rows(nope.data(), rope_src.data(), in, n, lora, rope,
                                 kvp::pool::RowRef{got.data(), packed, rows.data()});
      const long at = first_mismatch(want, got, 1);
      ASSERT_EQ(at, -1) << "row " << at / static_cast<long>(packed) << " byte " << at % static_cast<long>(packed);
    }
    // Reads of rows of random bytes.
    std::vector<uint8_t> pool(pool_rows * packed);
    for (auto& b : pool) b = static_cast<uint8_t>(rng());
    const kvp::pool::ConstRowRef in_rows{pool.data(), packed, rows.data()};
    for (Wide out : kWide) {
      const size_t row = (lora + rope) * kvp::pool::wide_bytes(out);
      for (size_t offset : {size_t{0}, size_t{16}, size_t{1}}) {
        SCOPED_TRACE(std::string("to ") + name(out) + " at offset " + std::to_string(offset));
        std::vector<uint8_t> want(n * row + 128, 0x33), got(n * row + 128, 0x33);
        const size_t at_line = (64 - (reinterpret_cast<uintptr_t>(got.data()) & 63)) & 63;
        kn::scalar_decode_nsa_rows(in_rows, n, lora, rope, want.data() + at_line + offset, out);
        kvp::pool::decode_nsa_rows(in_rows, n, lora, rope, got.data() + at_line + offset, out);
        ASSERT_EQ(std::memcmp(want.data() + at_line + offset, got.data() + at_line + offset, n * row), 0);
        for (size_t i = 0; i < at_line + offset; ++i) ASSERT_EQ(got[i], 0x33) << "before the rows";
        for (size_t i = at_line + offset + n * row; i < got.size(); ++i) ASSERT_EQ(got[i], 0x33) << "after the rows";
      }
    }
  }
}

// fp4 rows through encode_rows / decode_rows against the scalar block
// kernels row by row, with enough rows that the stores stream (the values
// and scales rows built in a buffer, the reads' rows decoded into one).
TEST(RowCodecRows, StreamedFp4RowsEqualTheScalarReference) {
  const size_t elements = 1024, n = 8300, pool_rows = 9000, value_row = elements / 2, scale_row = elements / 16;
  ASSERT_GE(n * value_row, kvp::util::kStreamMinBytes);
  std::vector<int64_t> rows(pool_rows);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::mt19937_64 rng(17);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(n);
  const std::vector<uint8_t> src = f32_sweep(n * elements);
  std::vector<uint8_t> values(pool_rows * value_row, 0x5a), scales(pool_rows * scale_row, 0x5a);
  const kvp::pool::RowRef v{values.data(), value_row, rows.data()}, sc{scales.data(), scale_row, rows.data()};
  for (float divisor : {1.0f, 3.0f}) {
    SCOPED_TRACE("divisor " + std::to_string(divisor));
    kvp::pool::encode_rows(src.data(), Wide::kF32, n, elements, divisor, DType::kFP4E2M1, v, sc);
    std::vector<uint8_t> want_v(value_row), want_s(scale_row);
    const kn::Fp4EncodeFn ref = kn::scalar_encode_fp4(Wide::kF32, divisor != 1.0f);
    for (size_t i = 0; i < n; ++i) {
      ref(src.data() + i * elements * 4, elements / 16, divisor, want_v.data(), want_s.data());
      ASSERT_EQ(std::memcmp(v.at(i), want_v.data(), value_row), 0) << "values of row " << i;
      ASSERT_EQ(std::memcmp(sc.at(i), want_s.data(), scale_row), 0) << "scales of row " << i;
    }
  }
  const kvp::pool::ConstRowRef cv{values.data(), value_row, rows.data()}, csc{scales.data(), scale_row, rows.data()};
  for (Wide out : kWide) {
    SCOPED_TRACE(name(out));
    const size_t row = elements * kvp::pool::wide_bytes(out);
    std::vector<uint8_t> got(n * row + 16), want(row);
    kvp::pool::decode_rows(cv, csc, n, elements, DType::kFP4E2M1, got.data() + 16, out);
    for (size_t i = 0; i < n; ++i) {
      kn::scalar_decode_fp4(out)(cv.at(i), csc.at(i), elements / 16, want.data());
      ASSERT_EQ(std::memcmp(got.data() + 16 + i * row, want.data(), row), 0) << "row " << i;
    }
  }
}

// Whole calls: rows at random slots, elements not a multiple of the vector
// width, and enough bytes that the stores are streamed through the chunk
// buffer; every row must equal the scalar kernel's conversion of it.
TEST(RowCodecRows, StreamedRowsEqualTheScalarReference) {
  const size_t elements = 2 * 1024 + 3, n = 1100, pool_rows = 3000;
  std::vector<int64_t> rows(pool_rows);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::mt19937_64 rng(7);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(n);
  const std::vector<uint8_t> values = f32_sweep(n * elements);
  // Offset 0: rows start at varying alignments (streamed from registers where
  // line-aligned, else through the chunk buffer); offset 1: odd addresses (all through the chunk buffer).
  for (size_t offset : {size_t{0}, size_t{1}}) {
    for (DType kv : {DType::kBF16, DType::kFP8E4M3, DType::kF32}) {
      SCOPED_TRACE(std::string(name(kv)) + " offset " + std::to_string(offset));
      const size_t ob = kvp::config::dtype_bytes(kv), row = elements * ob;
      ASSERT_GE(n * row, kv == DType::kFP8E4M3 ? size_t{2} << 20 : kvp::util::kStreamMinBytes);
      std::vector<uint8_t> pool(pool_rows * row + 1, 0);
      kvp::pool::RowRef out{pool.data() + offset, row, rows.data()};
      kvp::pool::encode_rows(values.data(), Wide::kF32, n, elements, 1.0f, kv, out, kvp::pool::RowRef{});
      const kn::Encoder ref = kn::pick_encoder(Wide::kF32, kv, false, false);
      std::vector<uint8_t> want(row);
      for (size_t i = 0; i < n; ++i) {
        ref.run(values.data() + i * elements * 4, want.data(), elements, 1.0f);
        ASSERT_EQ(std::memcmp(out.at(i), want.data(), row), 0) << "row " << i;
      }
      // And back: the gather of those rows to f32 / bf16 equals the scalar decode.
      for (Wide w : {Wide::kF32, Wide::kBF16}) {
        const size_t wb = kvp::pool::wide_bytes(w);
        std::vector<uint8_t> got(n * elements * wb);
        kvp::pool::ConstRowRef in{pool.data() + offset, row, rows.data()};
        kvp::pool::decode_rows(in, kvp::pool::ConstRowRef{}, n, elements, kv, got.data(), w);
        const kn::Decoder dref = kn::pick_decoder(kv, w, false);
        std::vector<uint8_t> back(elements * wb);
        for (size_t i = 0; i < n; ++i) {
          dref.run(in.at(i), back.data(), elements);
          ASSERT_EQ(std::memcmp(got.data() + i * elements * wb, back.data(), back.size()), 0) << name(w) << " row " << i;
        }
      }
    }
  }
}

// Every streaming copy the CPU has (SSE2 always; AVX2, AVX-512 where present)
// is a memcpy: every length 0..300 (short copies, heads and tails around each
// store width) at every destination and source offset within a line, then
// rows of 1 and 2 KiB; the bytes around the destination stay untouched.
TEST(StreamCopy, EveryInstructionSetCopiesExactlyTheBytes) {
  using kvp::util::StreamIsa;
  std::mt19937_64 rng(5);
  std::vector<uint8_t> src(4096 + 128), dst(4096 + 256), want;
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  int sets = 0;
  for (StreamIsa isa : {StreamIsa::kSse2, StreamIsa::kAvx2, StreamIsa::kAvx512}) {
    std::vector<uint8_t> probe(64);
    if (!kvp::util::copy_streaming_with(isa, probe.data(), src.data(), probe.size())) {
      EXPECT_NE(isa, StreamIsa::kSse2) << "the SSE2 copy exists everywhere";
      continue;
    }
    ++sets;
    SCOPED_TRACE("instruction set " + std::to_string(static_cast<int>(isa)));
    auto check = [&](size_t d_off, size_t s_off, size_t bytes) {
      std::fill(dst.begin(), dst.end(), uint8_t{0xA5});
      want = dst;
      std::memcpy(want.data() + d_off, src.data() + s_off, bytes);
      ASSERT_TRUE(kvp::util::copy_streaming_with(isa, dst.data() + d_off, src.data() + s_off, bytes));
      kvp::util::stream_fence();
      ASSERT_EQ(first_mismatch(want, dst, 1), -1)
          << "dst offset " << d_off << " src offset " << s_off << " bytes " << bytes;
    };
    for (size_t bytes = 0; bytes <= 300; ++bytes) {
      for (size_t d_off = 0; d_off < 64; ++d_off) check(d_off, (d_off * 7) % 64, bytes);
    }
    for (size_t bytes : {size_t{1024}, size_t{2048}, size_t{2048 + 24}, size_t{4096}}) {
      for (size_t d_off = 0; d_off < 64; d_off += 3) check(d_off, 64 - d_off, bytes);
    }
  }
  EXPECT_GE(sets, 1);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  std::vector<uint8_t> probe(64);
  EXPECT_EQ(kvp::util::copy_streaming_with(StreamIsa::kAvx2, probe.data(), src.data(), 64),
            __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(kvp::util::copy_streaming_with(StreamIsa::kAvx512, probe.data(), src.data(), 64),
            __builtin_cpu_supports("avx512f") != 0);
#endif
}

TEST(CpuBackendCopies, LargeScatterAndGatherMoveExactlyTheRows) {
  std::unique_ptr<kvp::backend::Backend> cpu = kvp::backend::make_cpu_backend();
  const size_t row = 2048 + 24, pool_rows = 8192, n = 4000;  // 8.3 MB moved: the streamed path
  ASSERT_GE(n * row, kvp::util::kStreamMinBytes);
  void* pool = nullptr;
  ASSERT_TRUE(cpu->allocate(pool_rows * row, &pool).is_ok());  // 17 MB: the huge-page mapping
  const auto* zero = static_cast<const uint8_t*>(pool);
  for (size_t i = 0; i < pool_rows * row; i += 4096) ASSERT_EQ(zero[i], 0) << "allocate must zero-fill";
  std::vector<int64_t> rows(pool_rows);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  std::mt19937_64 rng(11);
  std::shuffle(rows.begin(), rows.end(), rng);
  rows.resize(n);
  std::vector<uint8_t> src(n * row);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  ASSERT_TRUE(cpu->scatter_from_host({pool, row, rows.data(), src.data(), row, nullptr, row, n}).is_ok());
  std::vector<uint8_t> expect(pool_rows * row, 0);
  for (size_t i = 0; i < n; ++i) std::memcpy(expect.data() + rows[i] * row, src.data() + i * row, row);
  ASSERT_EQ(std::memcmp(pool, expect.data(), expect.size()), 0);
  std::vector<uint8_t> back(n * row + 1, 0);
  // Unaligned destination: the streamed copy's head and tail are ordinary stores.
  ASSERT_TRUE(cpu->gather_to_host({back.data() + 1, row, nullptr, pool, row, rows.data(), row, n}).is_ok());
  ASSERT_EQ(std::memcmp(back.data() + 1, src.data(), src.size()), 0);
  cpu->deallocate(pool);
}

}  // namespace
