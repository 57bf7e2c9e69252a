#include "cache/sha256.hpp"

#include <atomic>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define KVPOOL_SHA_NI 1
#endif

namespace kvp::cache {
namespace {

// First 32 bits of the fractional parts of the cube roots of the first 64 primes.
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

#ifdef KVPOOL_SHA_NI
bool cpu_has_sha_ni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const bool ssse3 = (c & (1u << 9)) != 0, sse41 = (c & (1u << 19)) != 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  return ssse3 && sse41 && (b & (1u << 29)) != 0;
}

// The 64 rounds of one block with the SHA extensions (the layout of Intel's reference
// code: state as ABEF / CDGH, the message schedule with sha256msg1/msg2), from the
// block's first four schedule vectors (words 0-3, 4-7, 8-11, 12-15, each in lane order).
__attribute__((target("sha,sse4.1,ssse3"))) inline void rounds_sha_ni(__m128i* abef_io, __m128i* cdgh_io, __m128i w0,
                                                                     __m128i w1, __m128i w2, __m128i w3) {
  __m128i s0 = *abef_io, s1 = *cdgh_io;
  __m128i w[16] = {w0, w1, w2, w3};
  // Unrolled at every optimisation level: the schedule then lives in registers, and the
  // round instructions, whose latency bounds the whole chain, issue back to back.
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i >= 4) {
      __m128i t = _mm_sha256msg1_epu32(w[i - 4], w[i - 3]);
      t = _mm_add_epi32(t, _mm_alignr_epi8(w[i - 1], w[i - 2], 4));
      w[i] = _mm_sha256msg2_epu32(t, w[i - 1]);
    }
    __m128i msg = _mm_add_epi32(w[i], _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRound + 4 * i)));
    s1 = _mm_sha256rnds2_epu32(s1, s0, msg);
    msg = _mm_shuffle_epi32(msg, 0x0E);
    s0 = _mm_sha256rnds2_epu32(s0, s1, msg);
  }
  *abef_io = _mm_add_epi32(s0, *abef_io);
  *cdgh_io = _mm_add_epi32(s1, *cdgh_io);
}

// Big-endian 32-bit words of 16 bytes, in lane order (and back: the shuffle is its own inverse).
__attribute__((target("ssse3"))) inline __m128i swap_words(__m128i v) {
  return _mm_shuffle_epi8(v, _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL));
}

__attribute__((target("ssse3"))) inline __m128i load_words(const uint8_t* p) {
  return swap_words(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// State words A-D / E-H (lane order) to the rounds' ABEF / CDGH registers, and back.
__attribute__((target("sse4.1"))) inline void to_rounds_layout(__m128i abcd, __m128i efgh, __m128i* abef,
                                                               __m128i* cdgh) {
  const __m128i tmp = _mm_shuffle_epi32(abcd, 0xB1);  // CDAB
  const __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);  // EFGH
  *abef = _mm_alignr_epi8(tmp, hgfe, 8);
  *cdgh = _mm_blend_epi16(hgfe, tmp, 0xF0);
}

__attribute__((target("sse4.1"))) inline void from_rounds_layout(__m128i abef, __m128i cdgh, __m128i* abcd,
                                                                 __m128i* efgh) {
  const __m128i tmp = _mm_shuffle_epi32(abef, 0x1B);  // FEBA
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
  *abcd = _mm_blend_epi16(tmp, dchg, 0xF0);
  *efgh = _mm_alignr_epi8(dchg, tmp, 8);
}

// One 64-byte block.
__attribute__((target("sha,sse4.1,ssse3"))) void compress_sha_ni(uint32_t* state, const uint8_t* block) {
  __m128i abef, cdgh;
  to_rounds_layout(_mm_loadu_si128(reinterpret_cast<const __m128i*>(state)),
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(state + 4)), &abef, &cdgh);
  rounds_sha_ni(&abef, &cdgh, load_words(block), load_words(block + 16), load_words(block + 32),
                load_words(block + 48));
  __m128i abcd, efgh;
  from_rounds_layout(abef, cdgh, &abcd, &efgh);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state), abcd);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(state + 4), efgh);
}

// Sha256::chain on the SHA extensions. A message's first 32 bytes are the previous
// digest, whose big-endian words are the previous state words A-H: they stay in two
// registers from one message to the next (no digest bytes written and read back on
// the critical path, no per-message padding: the padded buffer is reused and only
// its tail bytes change). `padded` bytes hold the padded message (<= 256).
__attribute__((target("sha,sse4.1,ssse3"))) void chain_sha_ni(const uint8_t* first, const uint8_t* tails,
                                                              size_t tail_len, size_t count, uint8_t* msg,
                                                              size_t padded, uint8_t* out) {
  alignas(16) static constexpr uint32_t kInitial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  __m128i iv_abef, iv_cdgh;
  to_rounds_layout(_mm_load_si128(reinterpret_cast<const __m128i*>(kInitial)),
                   _mm_load_si128(reinterpret_cast<const __m128i*>(kInitial + 4)), &iv_abef, &iv_cdgh);
  __m128i abcd = load_words(first), efgh = load_words(first + 16);
  for (size_t i = 0; i < count; ++i) {
    std::memcpy(msg + 32, tails + i * tail_len, tail_len);
    __m128i abef = iv_abef, cdgh = iv_cdgh;
    rounds_sha_ni(&abef, &cdgh, abcd, efgh, load_words(msg + 32), load_words(msg + 48));
    for (size_t b = 64; b < padded; b += 64) {
      rounds_sha_ni(&abef, &cdgh, load_words(msg + b), load_words(msg + b + 16), load_words(msg + b + 32),
                    load_words(msg + b + 48));
    }
    from_rounds_layout(abef, cdgh, &abcd, &efgh);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * i), swap_words(abcd));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * i + 16), swap_words(efgh));
  }
}

const bool kCpuHasShaNi = cpu_has_sha_ni();
#else
const bool kCpuHasShaNi = false;
#endif

std::atomic<bool> g_use_hardware{kCpuHasShaNi};

}  // namespace

bool Sha256::hardware() { return g_use_hardware.load(std::memory_order_relaxed); }

void Sha256::allow_hardware(bool on) { g_use_hardware.store(on && kCpuHasShaNi, std::memory_order_relaxed); }

void Sha256::compress(const uint8_t* block) {
#ifdef KVPOOL_SHA_NI
  if (hardware()) {
    compress_sha_ni(state_.data(), block);
    return;
  }
#endif
  compress_portable(block);
}

Sha256::Sha256()
    : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::compress_portable(const uint8_t* block) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = uint32_t(block[4 * i]) << 24 | uint32_t(block[4 * i + 1]) << 16 | uint32_t(block[4 * i + 2]) << 8 |
           uint32_t(block[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
  uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  state_[0] += a;
  state_[1] += b;
  state_[2] += c;
  state_[3] += d;
  state_[4] += e;
  state_[5] += f;
  state_[6] += g;
  state_[7] += h;
}

void Sha256::update(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_bytes_ += len;
  while (len > 0) {
    if (buffered_ == 0 && len >= 64) {  // whole blocks straight from the input
      compress(p);
      p += 64;
      len -= 64;
      continue;
    }
    const size_t take = len < 64 - buffered_ ? len : 64 - buffered_;
    std::memcpy(buffer_.data() + buffered_, p, take);
    buffered_ += take;
    p += take;
    len -= take;
    if (buffered_ == 64) {
      compress(buffer_.data());
      buffered_ = 0;
    }
  }
}

Sha256::Digest Sha256::of(const void* data, size_t len) {
  uint8_t msg[256];
  if (padded_size(len) > sizeof(msg)) {
    Sha256 h;
    h.update(data, len);
    return h.finish();
  }
  if (len > 0) std::memcpy(msg, data, len);
  return of_buffer(msg, len, sizeof(msg));
}

Sha256::Digest Sha256::of_buffer(uint8_t* msg, size_t len, size_t cap) {
  const size_t padded = padded_size(len);
  if (padded > cap) return of(msg, len);  // no room: the incremental way
  Sha256 h;
  std::memset(msg + len, 0, padded - len);
  msg[len] = 0x80;
  const uint64_t bits = static_cast<uint64_t>(len) * 8;
  for (int i = 0; i < 8; ++i) msg[padded - 8 + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  for (size_t b = 0; b < padded; b += 64) h.compress(msg + b);
  Digest out;
  for (int i = 0; i < 8; ++i) {  // big-endian words
    const uint32_t word = h.state_[static_cast<size_t>(i)];
    out[4 * static_cast<size_t>(i)] = static_cast<uint8_t>(word >> 24);
    out[4 * static_cast<size_t>(i) + 1] = static_cast<uint8_t>(word >> 16);
    out[4 * static_cast<size_t>(i) + 2] = static_cast<uint8_t>(word >> 8);
    out[4 * static_cast<size_t>(i) + 3] = static_cast<uint8_t>(word);
  }
  return out;
}

void Sha256::chain(const Digest& first, const uint8_t* tails, size_t tail_len, size_t count, Digest* out) {
  const size_t len = 32 + tail_len, padded = padded_size(len);
  alignas(16) uint8_t msg[256];
#ifdef KVPOOL_SHA_NI
  if (hardware() && padded <= sizeof(msg)) {
    // The padding is the same for every message of the chain: written once.
    std::memset(msg, 0, padded);
    msg[len] = 0x80;
    const uint64_t bits = static_cast<uint64_t>(len) * 8;
    for (int i = 0; i < 8; ++i) msg[padded - 8 + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    static_assert(sizeof(Digest) == 32, "digests lie back to back, 32 bytes apart");
    chain_sha_ni(first.data(), tails, tail_len, count, msg, padded, reinterpret_cast<uint8_t*>(out));
    return;
  }
#endif
  const Digest* prev = &first;
  for (size_t i = 0; i < count; ++i) {
    Sha256 h;
    h.update(prev->data(), prev->size());
    h.update(tails + i * tail_len, tail_len);
    out[i] = h.finish();
    prev = &out[i];
  }
}

Sha256::Digest Sha256::finish() {
  const uint64_t bits = total_bytes_ * 8;
  // 0x80, zeros up to 56 mod 64, the bit length big-endian: at most two blocks.
  uint8_t tail[72] = {0x80};
  const size_t zeros = (buffered_ < 56 ? 56 : 120) - buffered_ - 1;
  for (int i = 0; i < 8; ++i) tail[1 + zeros + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(tail, 1 + zeros + 8);
  Digest out;
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = static_cast<uint8_t>(state_[i] >> 24);
    out[4 * i + 1] = static_cast<uint8_t>(state_[i] >> 16);
    out[4 * i + 2] = static_cast<uint8_t>(state_[i] >> 8);
    out[4 * i + 3] = static_cast<uint8_t>(state_[i]);
  }
  return out;
}

}  // namespace kvp::cache
