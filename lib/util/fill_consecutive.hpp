// Writing runs of consecutive slot ids (a page's slots from its first one), which the
// allocator and the prefix tree do for every slot of a large extend.
#pragma once

#include <cstdint>

namespace kvp {

// dst[j] = first + j for j < kN: a trip count known at compile time, which the compiler
// unrolls into vector adds and stores (also at -O2).
template <int64_t kN>
inline void fill_consecutive_fixed(int64_t* dst, int64_t first) {
  for (int64_t j = 0; j < kN; ++j) dst[j] = first + j;
}

// dst[j] = first + j for j < n. A whole page of the usual sizes goes through the fixed
// loops; otherwise four stores per step (the plain loop with a variable trip count stayed
// scalar, ~5 instructions per slot).
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

}  // namespace kvp
