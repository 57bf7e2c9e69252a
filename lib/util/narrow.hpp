// Narrowing slot ids (int64, the API's type) to the request table's int32 cells: every
// slot of a large extend is narrowed once, so the loop is written as vector code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvp {

// dst[i] = (int32_t)src[i] for i < n; the caller checked that every value fits. Eight
// slots per step as GCC/Clang vector extensions: -O2 left the plain loop scalar (about
// five instructions per slot); this is two shuffles and two stores per eight on SSE2.
inline void narrow_to_int32(const int64_t* src, size_t n, int32_t* dst) {
  typedef int64_t Wide __attribute__((vector_size(64)));
  typedef int32_t Narrow __attribute__((vector_size(32)));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Wide w;
    std::memcpy(&w, src + i, sizeof(w));
    const Narrow v = __builtin_convertvector(w, Narrow);
    std::memcpy(dst + i, &v, sizeof(v));
  }
  for (; i < n; ++i) dst[i] = static_cast<int32_t>(src[i]);
}

// The range test of all_in_range() and narrow_to_int32_in_range(), branch-free: a value in
// [0, limit) has the sign bit set neither in itself nor in limit - 1 - value (unsigned: no
// overflow), so OR-ing this over many values and testing bit 63 once tests them all.
inline uint64_t range_bits(uint64_t value, uint64_t last) { return value | (last - value); }

// True when every src[i] lies in [0, limit) (limit >= 1), in one branch-free pass that the
// compiler vectorises.
inline bool all_in_range(const int64_t* src, size_t n, int64_t limit) {
  const uint64_t last = static_cast<uint64_t>(limit) - 1;
  uint64_t bits = 0;
  for (size_t i = 0; i < n; ++i) bits |= range_bits(static_cast<uint64_t>(src[i]), last);
  return (bits >> 63) == 0;
}

// narrow_to_int32() that also tests the values as all_in_range() does (limit >= 1); dst is
// written either way.
inline bool narrow_to_int32_in_range(const int64_t* src, size_t n, int32_t* dst, int64_t limit) {
  typedef uint64_t Wide __attribute__((vector_size(64)));
  typedef int32_t Narrow __attribute__((vector_size(32)));
  const uint64_t last = static_cast<uint64_t>(limit) - 1;
  Wide acc = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Wide w;
    std::memcpy(&w, src + i, sizeof(w));
    acc |= w | (last - w);  // range_bits, eight lanes at a time
    const Narrow v = __builtin_convertvector(w, Narrow);
    std::memcpy(dst + i, &v, sizeof(v));
  }
  uint64_t bits = 0;
  for (int lane = 0; lane < 8; ++lane) bits |= acc[lane];
  for (; i < n; ++i) {
    const uint64_t s = static_cast<uint64_t>(src[i]);
    bits |= range_bits(s, last);
    dst[i] = static_cast<int32_t>(s);
  }
  return (bits >> 63) == 0;
}

}  // namespace kvp
