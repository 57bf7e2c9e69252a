// Runs of consecutive slot ids (a page's slots from its first one): the allocator and the
// prefix tree write them, and the prefix tree checks them, for every slot of a large extend.
#pragma once

#include <cstdint>
#include <cstring>

namespace kvp {

// Two int64 lanes (one SSE2 register, the x86-64 baseline): GCC and Clang vector
// extensions, so that the fixed-size loops below are vector code at every optimisation
// level (-O2's cost model left the plain loops scalar, ~3.5 instructions per slot).
typedef int64_t ConsecutiveLanes __attribute__((vector_size(16)));

// dst[j] = first + j for j < kN (even).
template <int64_t kN>
inline void fill_consecutive_fixed(int64_t* dst, int64_t first) {
  static_assert(kN % 2 == 0, "whole vectors");
  ConsecutiveLanes v = {first, first + 1};
  const ConsecutiveLanes step = {2, 2};
  // Unrolled: -O2 kept the loop, whose counter and branch cost more than its store and add.
#pragma GCC unroll 32
  for (int64_t j = 0; j < kN; j += 2) {
    std::memcpy(dst + j, &v, sizeof(v));
    v += step;
  }
}

// dst[j] = first + j for j < n. Whole pages of the usual sizes go through the fixed loops;
// otherwise four stores per step.
inline void fill_consecutive(int64_t* dst, int64_t first, int64_t n) {
  if (n == 16) return fill_consecutive_fixed<16>(dst, first);
  if (n == 64) return fill_consecutive_fixed<64>(dst, first);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    dst[j] = first + j;
    dst[j + 1] = first + j + 1;
    dst[j + 2] = first + j + 2;
    dst[j + 3] = first + j + 3;
  }
  for (; j < n; ++j) dst[j] = first + j;
}

// True if run[j] == run[0] + j for every j < kN (even), compared as unsigned (a caller's
// slot near INT64_MAX must not overflow the expected successor): an OR of XORs.
template <int64_t kN>
inline bool is_consecutive_fixed(const int64_t* run) {
  static_assert(kN % 2 == 0, "whole vectors");
  const uint64_t first = static_cast<uint64_t>(run[0]);
  typedef uint64_t Unsigned __attribute__((vector_size(16)));
  Unsigned expect = {first, first + 1};
  const Unsigned step = {2, 2};
  Unsigned differ = {0, 0};
#pragma GCC unroll 32
  for (int64_t j = 0; j < kN; j += 2) {
    Unsigned got;
    std::memcpy(&got, run + j, sizeof(got));
    differ |= got ^ expect;
    expect += step;
  }
  return (differ[0] | differ[1]) == 0;
}

// The same for any n >= 1.
inline bool is_consecutive(const int64_t* run, int64_t n) {
  if (n == 16) return is_consecutive_fixed<16>(run);
  if (n == 64) return is_consecutive_fixed<64>(run);
  const uint64_t first = static_cast<uint64_t>(run[0]);
  uint64_t differ = 0;
  for (int64_t j = 1; j < n; ++j) differ |= static_cast<uint64_t>(run[j]) ^ (first + static_cast<uint64_t>(j));
  return differ == 0;
}

}  // namespace kvp
