#include "alloc/page_scan.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KVPOOL_PAGE_SCAN_AVX2 1
#endif

namespace kvp::alloc {
namespace {

// A page is accepted when the OR of (slot - first slot of its page), as unsigned, stays
// below `page` (a power of two): every slot then lies in that page, and a negative or
// foreign slot sets a higher bit. The page's range is checked once, on its first slot.
inline bool page_start_ok(int64_t s, int64_t page, int64_t limit) { return s >= page && s < limit; }

inline void note_page(int64_t p, std::vector<int64_t>* pages) {
  if (pages->empty() || pages->back() != p) pages->push_back(p);  // within the caller's room
}

size_t scan_portable(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit, std::vector<int64_t>* pages) {
  const size_t P = static_cast<size_t>(page);
  const int shift = __builtin_ctzll(static_cast<unsigned long long>(page));
  for (; i + P <= n; i += P) {
    const int64_t s = slots[i];
    if (!page_start_ok(s, page, limit)) break;
    const uint64_t base = static_cast<uint64_t>(s & ~(page - 1));
    uint64_t offsets = 0;
    for (size_t j = 0; j < P; ++j) offsets |= static_cast<uint64_t>(slots[i + j]) - base;
    if (offsets >= static_cast<uint64_t>(page)) break;
    note_page(static_cast<int64_t>(base >> shift), pages);
  }
  return i;
}

#ifdef KVPOOL_PAGE_SCAN_AVX2
// The same with four slots per instruction (page >= 4); the portable loop compiles to
// two per instruction, which made it the largest part of a 262K-slot free.
__attribute__((target("avx2"))) size_t scan_avx2(const int64_t* slots, size_t i, size_t n, int64_t page,
                                                 int64_t limit, std::vector<int64_t>* pages) {
  const size_t P = static_cast<size_t>(page);
  const int shift = __builtin_ctzll(static_cast<unsigned long long>(page));
  const __m256i high = _mm256_set1_epi64x(~(page - 1));  // bits that no in-page offset has
  for (; i + P <= n; i += P) {
    _mm_prefetch(reinterpret_cast<const char*>(slots + i) + 1024, _MM_HINT_T0);
    const int64_t s = slots[i];
    if (!page_start_ok(s, page, limit)) break;
    const int64_t base = s & ~(page - 1);
    const __m256i vbase = _mm256_set1_epi64x(base);
    __m256i acc = _mm256_setzero_si256();
    for (size_t j = 0; j < P; j += 4) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(slots + i + j));
      acc = _mm256_or_si256(acc, _mm256_sub_epi64(v, vbase));
    }
    if (!_mm256_testz_si256(acc, high)) break;
    note_page(base >> shift, pages);
  }
  return i;
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;  // also checks that the OS saves the YMM state
}
#endif

}  // namespace

size_t scan_whole_pages(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit,
                        std::vector<int64_t>* pages) {
#ifdef KVPOOL_PAGE_SCAN_AVX2
  static const bool avx2 = cpu_has_avx2();
  if (avx2 && page >= 4) return scan_avx2(slots, i, n, page, limit, pages);
#endif
  return scan_portable(slots, i, n, page, limit, pages);
}

}  // namespace kvp::alloc
