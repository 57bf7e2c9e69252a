// Value conversions of the KV buffers, checked through set_kv / get_kv:
// known encodings (docs/buffers.md), and every conversion against an
// independent brute-force reference (nearest representable value, ties to
// the even code) on exact ties, their neighbours, subnormals and overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "buffers_test_util.hpp"

namespace {

using kvbt::bits_f32;
using kvbt::create;
using kvbt::f32_bits;
using kvbt::Pool;

constexpr size_t kRow = 32;     // values per K row of kvbt::mha()
constexpr size_t kBatch = 256;  // slots per call

// Writes `xs` (padded to whole rows) as f32 into K of layer 0 and reads the stored bytes back.
std::vector<uint8_t> stored_bytes(kvpool* p, std::vector<float> xs, int32_t kv_dtype, size_t bytes_per_value) {
  const size_t n = xs.size();
  xs.resize((n + kRow - 1) / kRow * kRow, 0.0f);
  std::vector<uint8_t> out;
  for (size_t start = 0; start < xs.size(); start += kBatch * kRow) {
    const size_t rows = std::min(kBatch, (xs.size() - start) / kRow);
    std::vector<int64_t> slots(rows);
    for (size_t i = 0; i < rows; ++i) slots[i] = int64_t(i);
    const size_t in_bytes = rows * kRow * 4;
    EXPECT_EQ(kvpool_set_kv(p, 0, slots.data(), rows, xs.data() + start, in_bytes, xs.data() + start, in_bytes,
                            KVPOOL_DTYPE_F32, 1.0f, 1.0f),
              KVPOOL_OK)
        << kvpool_last_error();
    const size_t stored = rows * kRow * bytes_per_value;
    std::vector<uint8_t> k(stored), v(stored);
    EXPECT_EQ(kvpool_get_kv(p, 0, slots.data(), rows, k.data(), stored, v.data(), stored, kv_dtype), KVPOOL_OK)
        << kvpool_last_error();
    out.insert(out.end(), k.begin(), k.end());
  }
  out.resize(n * bytes_per_value);
  return out;
}

// Writes stored bytes (whole rows) and reads them back as f32.
std::vector<float> decoded(kvpool* p, std::vector<uint8_t> raw, int32_t kv_dtype, size_t bytes_per_value) {
  const size_t n = raw.size() / bytes_per_value;
  raw.resize((n + kRow - 1) / kRow * kRow * bytes_per_value, 0);
  std::vector<float> out;
  const size_t row_bytes = kRow * bytes_per_value;
  for (size_t start = 0; start < raw.size(); start += kBatch * row_bytes) {
    const size_t rows = std::min(kBatch, (raw.size() - start) / row_bytes);
    std::vector<int64_t> slots(rows);
    for (size_t i = 0; i < rows; ++i) slots[i] = int64_t(i);
    EXPECT_EQ(kvpool_set_kv(p, 0, slots.data(), rows, raw.data() + start, rows * row_bytes, raw.data() + start,
                            rows * row_bytes, kv_dtype, 1.0f, 1.0f),
              KVPOOL_OK)
        << kvpool_last_error();
    std::vector<float> k(rows * kRow), v(rows * kRow);
    EXPECT_EQ(kvpool_get_kv(p, 0, slots.data(), rows, k.data(), k.size() * 4, v.data(), v.size() * 4,
                            KVPOOL_DTYPE_F32),
              KVPOOL_OK);
    out.insert(out.end(), k.begin(), k.end());
  }
  out.resize(n);
  return out;
}

// ---- the reference: small binary float formats by enumeration ----

struct MiniFloat {
  int exp_bits, mant_bits, bias;
  bool e4m3fn;  // no inf; only S.1111.111 is NaN
  // Value of a non-negative code; `virtual_top` asks for the value one step past the largest finite one.
  double value(uint32_t code) const {
    const uint32_t e = code >> mant_bits, m = code & ((1u << mant_bits) - 1);
    const double frac = double(m) / double(1u << mant_bits);
    if (e == 0) return std::ldexp(frac, 1 - bias);
    return std::ldexp(1.0 + frac, int(e) - bias);
  }
  uint32_t top_finite() const { return e4m3fn ? 0x7e : ((1u << (exp_bits + mant_bits)) - (1u << mant_bits) - 1); }
  uint32_t nan_code() const { return 0x7f; }
  // Nearest code to |x|, ties to the even code; one step past the top is "overflow" (returned as top + 1).
  uint32_t nearest(double ax) const {
    uint32_t best = 0;
    double best_d = std::numeric_limits<double>::infinity();
    for (uint32_t c = 0; c <= top_finite() + 1; ++c) {
      const double d = std::fabs(value(c) - ax);
      if (d < best_d || (d == best_d && (c & 1u) == 0)) {
        best = c;
        best_d = d;
      }
    }
    return best;
  }
  uint8_t encode(float x) const {
    const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
    if (std::isnan(x)) return sign | 0x7f;
    // At or past the first value beyond the format (where distances in double
    // stop being exact) the result is overflow.
    if (std::isinf(x) || std::fabs(double(x)) >= value(top_finite() + 1)) return sign | (e4m3fn ? 0x7f : 0x7c);
    const uint32_t c = nearest(std::fabs(double(x)));
    if (c > top_finite()) return sign | (e4m3fn ? 0x7f : 0x7c);
    return static_cast<uint8_t>(sign | c);
  }
  double decode(uint8_t b) const {
    if (is_nan(b)) return std::numeric_limits<double>::quiet_NaN();
    if (is_inf(b)) return (b & 0x80) != 0 ? -HUGE_VAL : HUGE_VAL;
    const double v = value(b & 0x7fu);
    return (b & 0x80) != 0 ? -v : v;
  }
  bool is_nan(uint8_t b) const {
    return e4m3fn ? (b & 0x7f) == 0x7f : (b & 0x7c) == 0x7c && (b & 0x03) != 0;
  }
  bool is_inf(uint8_t b) const { return !e4m3fn && (b & 0x7f) == 0x7c; }
};

const MiniFloat kE4M3{4, 3, 7, true};
const MiniFloat kE5M2{5, 2, 15, false};

// Inputs around every representable value of `f`: the values, the exact
// midpoints between neighbours and one f32 ulp either side, both signs.
std::vector<float> probes(const MiniFloat& f) {
  std::vector<float> xs;
  for (uint32_t c = 0; c <= f.top_finite() + 1; ++c) {
    const float v = float(f.value(c));
    const float mid = float((f.value(c) + f.value(c + 1)) / 2);
    for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f), std::nextafter(v, 1e30f)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  for (float x : {0.0f, 1e-30f, 1e30f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::quiet_NaN(),
                  bits_f32(0x7f800001u)}) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  uint32_t r = 12345;
  for (int i = 0; i < 4000; ++i) {
    r = r * 1664525u + 1013904223u;
    xs.push_back(bits_f32((r & 0x807fffffu) | (uint32_t(0x60 + (r >> 8) % 0x40) << 23)));  // 2^-31 .. 2^32
  }
  return xs;
}

// ---- known values ----

TEST(BufferDtypes, KnownE4M3) {
  Pool pool = create(kvbt::mha("fp8_e4m3"));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {1.0f, 448.0f, 500.0f, -2.0f, 464.0f, 465.0f, -464.0f, inf, -inf, nan, -nan,
                                 0.0f, -0.0f, 0.001953125f /*2^-9*/, 0.0009765625f /*2^-10: tie -> 0*/,
                                 0.00146484375f /*1.5 x 2^-10 -> 1*/, 0.0029296875f /*3 x 2^-10: tie -> 2*/,
                                 0.015625f /*2^-6*/, 1.0625f /*tie -> 1.0*/, 1.1875f /*tie -> 1.25*/};
  const std::vector<uint8_t> want = {0x38, 0x7e, 0x7f, 0xc0, 0x7e, 0x7f, 0xfe, 0x7f, 0xff, 0x7f, 0xff,
                                     0x00, 0x80, 0x01, 0x00, 0x01, 0x02, 0x08, 0x38, 0x3a};
  EXPECT_EQ(stored_bytes(pool.get(), xs, KVPOOL_DTYPE_FP8_E4M3, 1), want);
}

TEST(BufferDtypes, KnownE5M2) {
  Pool pool = create(kvbt::mha("fp8_e5m2"));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {1.0f, 65536.0f, 57344.0f, 61440.0f /*tie -> inf*/, 61439.0f, -inf, nan, -nan,
                                 -1.0f, 0.0000152587890625f /*2^-16*/, 1.125f /*tie -> 1.0*/, 1.375f /*tie -> 1.5*/};
  const std::vector<uint8_t> want = {0x3c, 0x7c, 0x7b, 0x7c, 0x7b, 0xfc, 0x7f, 0xff, 0xbc, 0x01, 0x3c, 0x3e};
  EXPECT_EQ(stored_bytes(pool.get(), xs, KVPOOL_DTYPE_FP8_E5M2, 1), want);
}

std::vector<uint16_t> as_u16(const std::vector<uint8_t>& b) {
  std::vector<uint16_t> v(b.size() / 2);
  std::memcpy(v.data(), b.data(), v.size() * 2);
  return v;
}

TEST(BufferDtypes, KnownBF16) {
  Pool pool = create(kvbt::mha("bf16"));
  const std::vector<float> xs = {1.0f,
                                 bits_f32(0x3f808000u) /*tie -> even 0x3f80*/,
                                 bits_f32(0x3f818000u) /*tie -> even 0x3f82*/,
                                 bits_f32(0x3f808001u),
                                 bits_f32(0x7f800001u) /*signalling NaN -> quiet*/,
                                 bits_f32(0xffc12345u),
                                 bits_f32(0x7f7fffffu) /*max float rounds to inf*/,
                                 bits_f32(0x00018000u) /*subnormal tie -> 0x0002*/,
                                 -0.0f};
  const std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x7fc0, 0xffc1, 0x7f80, 0x0002, 0x8000};
  EXPECT_EQ(as_u16(stored_bytes(pool.get(), xs, KVPOOL_DTYPE_BF16, 2)), want);
  // Decoding is exact: the upper half of an f32.
  std::vector<uint8_t> raw(0x10000 * 2);
  for (uint32_t i = 0; i < 0x10000; ++i) std::memcpy(&raw[2 * i], &i, 2);
  const std::vector<float> back = decoded(pool.get(), raw, KVPOOL_DTYPE_BF16, 2);
  for (uint32_t i = 0; i < 0x10000; ++i) ASSERT_EQ(f32_bits(back[i]), i << 16) << i;
}

TEST(BufferDtypes, KnownF16) {
  Pool pool = create(kvbt::mha("f16"));
  const std::vector<float> xs = {1.0f, 65504.0f, 65520.0f /*tie -> inf*/, 65519.0f, bits_f32(0x33000000u) /*2^-25: tie -> 0*/,
                                 bits_f32(0x33000001u), bits_f32(0x33800000u) /*2^-24*/, -2.0f,
                                 std::numeric_limits<float>::quiet_NaN()};
  const std::vector<uint16_t> want = {0x3c00, 0x7bff, 0x7c00, 0x7bff, 0x0000, 0x0001, 0x0001, 0xc000, 0x7e00};
  EXPECT_EQ(as_u16(stored_bytes(pool.get(), xs, KVPOOL_DTYPE_F16, 2)), want);
}

TEST(BufferDtypes, NanBytesDoNotDependOnTheScale) {
  // A NaN divided by a scale keeps its sign and payload (bf16 keeps the upper payload bits, fp8 the sign).
  const float nan_neg = bits_f32(0xffc12345u), nan_pos = bits_f32(0x7fa00001u);
  for (const char* dtype : {"bf16", "fp8_e4m3", "fp8_e5m2", "f16"}) {
    SCOPED_TRACE(dtype);
    Pool pool = create(kvbt::mha(dtype));
    std::vector<float> k(32, 1.0f);
    k[0] = nan_neg;
    k[1] = nan_pos;
    k[2] = -std::numeric_limits<float>::infinity();
    const std::vector<int64_t> a = {1}, b = {2};
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, a.data(), 1, k.data(), 128, k.data(), 128, KVPOOL_DTYPE_F32, 1.0f, 1.0f),
              KVPOOL_OK);
    ASSERT_EQ(kvpool_set_kv(pool.get(), 0, b.data(), 1, k.data(), 128, k.data(), 128, KVPOOL_DTYPE_F32, 3.0f, 3.0f),
              KVPOOL_OK);
    const kvpool_buffer kd = kvbt::describe(pool.get(), KVPOOL_BUFFER_K, 0);
    const size_t eb = kvbt::elem_size(kd.dtype);
    EXPECT_EQ(kvbt::row_bytes(kd, 1, 2 * eb), kvbt::row_bytes(kd, 2, 2 * eb));
  }
  Pool bf = create(kvbt::mha("bf16"));
  std::vector<float> k(32, 0.0f);
  k[0] = nan_neg;
  const int64_t slot = 3;
  ASSERT_EQ(kvpool_set_kv(bf.get(), 0, &slot, 1, k.data(), 128, k.data(), 128, KVPOOL_DTYPE_F32, 2.0f, 2.0f), KVPOOL_OK);
  EXPECT_EQ(kvbt::row_bytes(kvbt::describe(bf.get(), KVPOOL_BUFFER_K, 0), 3, 2), (std::vector<uint8_t>{0xc1, 0xff}));
}

// ---- against the reference ----

void check_fp8(const char* dtype, int32_t kv, const MiniFloat& f) {
  Pool pool = create(kvbt::mha(dtype));
  const std::vector<float> xs = probes(f);
  const std::vector<uint8_t> got = stored_bytes(pool.get(), xs, kv, 1);
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_EQ(got[i], f.encode(xs[i])) << dtype << " of " << xs[i] << " (bits 0x" << std::hex << f32_bits(xs[i])
                                       << ")";
  }
  // Every code decodes to its value (NaN codes to NaN, e5m2 infinities to inf).
  std::vector<uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  const std::vector<float> back = decoded(pool.get(), codes, kv, 1);
  for (int c = 0; c < 256; ++c) {
    const uint8_t b = static_cast<uint8_t>(c);
    if (f.is_nan(b)) {
      EXPECT_TRUE(std::isnan(back[c])) << c;
    } else if (f.is_inf(b)) {
      EXPECT_EQ(back[c], (c & 0x80) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity());
    } else {
      EXPECT_EQ(double(back[c]), f.decode(b)) << c;
      EXPECT_EQ(std::signbit(back[c]), (c & 0x80) != 0) << c;
    }
  }
}

TEST(BufferDtypes, E4M3MatchesReference) { check_fp8("fp8_e4m3", KVPOOL_DTYPE_FP8_E4M3, kE4M3); }
TEST(BufferDtypes, E5M2MatchesReference) { check_fp8("fp8_e5m2", KVPOOL_DTYPE_FP8_E5M2, kE5M2); }

#if defined(__FLT16_MAX__)
TEST(BufferDtypes, F16MatchesTheCompiler) {
  Pool pool = create(kvbt::mha("f16"));
  // f32 -> f16 on a spread of bit patterns (all exponents, subnormals, ties).
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 0x10001u * 7) xs.push_back(bits_f32(static_cast<uint32_t>(b)));
  for (uint32_t h = 0; h < 0x7c00; h += 3) {  // exact f16 midpoints and their neighbours
    _Float16 a, c;
    const uint16_t hb = static_cast<uint16_t>(h), hn = static_cast<uint16_t>(h + 1);
    std::memcpy(&a, &hb, 2);
    std::memcpy(&c, &hn, 2);
    const float m = (float(a) + float(c)) / 2.0f;
    xs.push_back(m);
    xs.push_back(std::nextafter(m, 0.0f));
    xs.push_back(-std::nextafter(m, 1e30f));
  }
  const std::vector<uint16_t> got = as_u16(stored_bytes(pool.get(), xs, KVPOOL_DTYPE_F16, 2));
  for (size_t i = 0; i < xs.size(); ++i) {
    const _Float16 ref = static_cast<_Float16>(xs[i]);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    if (std::isnan(xs[i])) {
      ASSERT_EQ(got[i] & 0x7c00, 0x7c00);
      ASSERT_NE(got[i] & 0x3ff, 0);
      ASSERT_NE(got[i] & 0x200, 0) << "quiet NaN";
    } else {
      ASSERT_EQ(got[i], rb) << xs[i] << " (bits 0x" << std::hex << f32_bits(xs[i]) << ")";
    }
  }
  // f16 -> f32 for every code.
  std::vector<uint8_t> raw(0x10000 * 2);
  for (uint32_t i = 0; i < 0x10000; ++i) std::memcpy(&raw[2 * i], &i, 2);
  const std::vector<float> back = decoded(pool.get(), raw, KVPOOL_DTYPE_F16, 2);
  for (uint32_t i = 0; i < 0x10000; ++i) {
    _Float16 h;
    const uint16_t hb = static_cast<uint16_t>(i);
    std::memcpy(&h, &hb, 2);
    if (std::isnan(float(h))) {
      ASSERT_TRUE(std::isnan(back[i])) << i;
    } else {
      ASSERT_EQ(f32_bits(back[i]), f32_bits(float(h))) << i;
    }
  }
}
#endif

// ---- fp4 ----

// Reference block quantisation (docs/buffers.md).
void ref_fp4_block(const float* x, uint8_t* packed, uint8_t* scale_byte) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]);
  }
  *scale_byte = kE4M3.encode(amax / 6.0f);
  const float scale = float(kE4M3.decode(*scale_byte));
  for (int j = 0; j < 8; ++j) {
    uint32_t nib[2] = {0, 0};
    for (int h = 0; h < 2 && scale != 0.0f; ++h) {
      const float q = std::fabs(x[2 * j + h]) / scale;
      uint32_t best = q > 6.0f ? 7 : 0;  // a NaN quotient (NaN scale) gives code 0
      if (q <= 6.0f) {
        double best_d = 1e300;
        for (uint32_t c = 0; c < 8; ++c) {
          const double d = std::fabs(kMag[c] - double(q));
          if (d < best_d || (d == best_d && (c & 1u) == 0)) {
            best = c;
            best_d = d;
          }
        }
      }
      nib[h] = (std::signbit(x[2 * j + h]) ? 8u : 0u) | best;
    }
    packed[j] = static_cast<uint8_t>(nib[0] | nib[1] << 4);
  }
}

struct Fp4Result {
  std::vector<uint8_t> packed, scales;
  std::vector<float> back;
};

// One row (two blocks) per slot.
Fp4Result fp4_via_pool(kvpool* p, const std::vector<float>& xs) {
  const size_t rows = xs.size() / kRow;
  std::vector<int64_t> slots(rows);
  for (size_t i = 0; i < rows; ++i) slots[i] = int64_t(i);
  EXPECT_EQ(kvpool_set_kv(p, 0, slots.data(), rows, xs.data(), xs.size() * 4, xs.data(), xs.size() * 4,
                          KVPOOL_DTYPE_F32, 1.0f, 1.0f),
            KVPOOL_OK)
      << kvpool_last_error();
  Fp4Result r;
  r.packed.resize(rows * 16);
  std::vector<uint8_t> v(rows * 16);
  EXPECT_EQ(kvpool_get_kv(p, 0, slots.data(), rows, r.packed.data(), r.packed.size(), v.data(), v.size(),
                          KVPOOL_DTYPE_FP4_E2M1),
            KVPOOL_OK);
  const kvpool_buffer sb = kvbt::describe(p, KVPOOL_BUFFER_K_SCALE, 0);
  r.scales.assign(kvbt::bytes_of(sb), kvbt::bytes_of(sb) + rows * 2);
  r.back.resize(xs.size());
  std::vector<float> vb(xs.size());
  EXPECT_EQ(kvpool_get_kv(p, 0, slots.data(), rows, r.back.data(), r.back.size() * 4, vb.data(), vb.size() * 4,
                          KVPOOL_DTYPE_F32),
            KVPOOL_OK);
  return r;
}

TEST(BufferDtypes, Fp4KnownBlocks) {
  Pool pool = create(kvbt::mha("fp4_e2m1"));
  std::vector<float> xs = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6,
                           // amax 12 -> scale 2: q = 0.5, 1.25 (tie -> 1), 1.75 (tie -> 2), 3.5 (tie -> 4),
                           // 5 (tie -> 4), 5.5 (-> 6), 0.25 (tie -> 0), 0.3 (-> 0.5), 6 (-> 6)
                           1.0f, 2.5f, 3.5f, 7.0f, 10.0f, 11.0f, 0.5f, 0.6f, -12.0f, 0, 0, 0, 0, 0, 0, 0};
  // A zero block and a block too small for its scale (amax / 6 rounds to e4m3 zero).
  for (int i = 0; i < 16; ++i) xs.push_back(0.0f);
  for (int i = 0; i < 16; ++i) xs.push_back(-0.0001f);
  const Fp4Result r = fp4_via_pool(pool.get(), xs);
  const std::vector<uint8_t> row0 = {0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
                                     0x21, 0x64, 0x76, 0x10, 0x0f, 0x00, 0x00, 0x00};
  EXPECT_EQ(std::vector<uint8_t>(r.packed.begin(), r.packed.begin() + 16), row0);
  EXPECT_EQ(r.scales[0], 0x38);  // 1.0
  EXPECT_EQ(r.scales[1], 0x40);  // 2.0
  EXPECT_EQ(std::vector<uint8_t>(r.packed.begin() + 16, r.packed.end()), std::vector<uint8_t>(16, 0));
  EXPECT_EQ(r.scales[2], 0x00);
  EXPECT_EQ(r.scales[3], 0x00);
  const std::vector<float> back1 = {1, 2, 4, 8, 8, 12, 0, 1, -12, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<float>(r.back.begin() + 16, r.back.begin() + 32), back1);
  EXPECT_EQ(std::vector<float>(r.back.begin(), r.back.begin() + 16), std::vector<float>(xs.begin(), xs.begin() + 16));
  for (size_t i = 32; i < 64; ++i) EXPECT_EQ(r.back[i], 0.0f);
}

TEST(BufferDtypes, Fp4MatchesReference) {
  Pool pool = create(kvbt::mha("fp4_e2m1"));
  std::vector<float> xs;
  uint32_t s = 99;
  for (size_t block = 0; block < 256 * 2; ++block) {
    // Half the blocks: multiples of a quarter step (many exact ties); half: random magnitudes.
    s = s * 1664525u + 1013904223u;
    const float unit = std::ldexp(1.0f, int(s >> 28) - 8);
    for (int i = 0; i < 16; ++i) {
      s = s * 1664525u + 1013904223u;
      float x = block % 2 == 0 ? unit * 0.25f * float((s >> 8) % 32) : unit * float((s >> 8) % 100000) / 3000.0f;
      if ((s >> 5) & 1u) x = -x;
      xs.push_back(x);
    }
  }
  const Fp4Result r = fp4_via_pool(pool.get(), xs);
  for (size_t b = 0; b < xs.size() / 16; ++b) {
    uint8_t packed[8], scale;
    ref_fp4_block(&xs[b * 16], packed, &scale);
    ASSERT_EQ(r.scales[b], scale) << "block " << b;
    for (int j = 0; j < 8; ++j) ASSERT_EQ(r.packed[b * 8 + j], packed[j]) << "block " << b << " byte " << j;
  }
}

}  // namespace
