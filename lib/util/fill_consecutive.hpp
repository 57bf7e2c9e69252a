// Writing runs of consecutive slot ids (a page's slots from its first one), which the
// allocator and the prefix tree do for every slot of a large extend.
#pragma once

#include <cstdint>

namespace kvp {

// dst[j] = first + j for j < n. Four stores per step, which the compiler turns into vector
// stores also at -O2 (where the plain loop stays scalar: its trip count is a variable).
inline void fill_consecutive(int64_t* dst, int64_t first, int64_t n) {
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
