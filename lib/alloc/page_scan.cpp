#include "alloc/page_scan.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define KVPOOL_PAGE_SCAN_AVX2 1
#endif

namespace kvp::alloc {
namespace {

// A page is accepted when the OR of (slot - first slot of its page), as unsigned, stays
// below `page` (a power of two): every slot then lies in that page, and a negative or
// foreign slot sets a higher bit. The page's range is checked once, on its first slot,
// with one unsigned compare: s in [page, limit).
inline bool page_start_ok(int64_t s, int64_t page, int64_t limit) {
  return static_cast<uint64_t>(s) - static_cast<uint64_t>(page) < static_cast<uint64_t>(limit - page);
}

}  // namespace

size_t scan_whole_pages_portable(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit,
                                 PageList* list) {
  const size_t P = static_cast<size_t>(page);
  const int shift = __builtin_ctzll(static_cast<unsigned long long>(page));
  PageList l = *list;  // a local copy: the out stores cannot alias its fields
  for (; i + P <= n; i += P) {
    const int64_t s = slots[i];
    if (!page_start_ok(s, page, limit)) break;
    const uint64_t base = static_cast<uint64_t>(s & ~(page - 1));
    uint64_t offsets = 0;
    for (size_t j = 0; j < P; ++j) offsets |= static_cast<uint64_t>(slots[i + j]) - base;
    if (offsets >= static_cast<uint64_t>(page)) break;
    l.note(static_cast<int64_t>(base >> shift));
  }
  *list = l;
  return i;
}

namespace {

#ifdef KVPOOL_PAGE_SCAN_AVX2
// The same with four slots per instruction (page >= 4); the portable loop compiles to
// two per instruction, which made it the largest part of a 262K-slot free. The page
// base comes from the first vector itself (no scalar-to-vector move on the path to the
// compare), and a page size fixed at compile time (kPage > 0: the usual 16 and 64)
// unrolls the page's loads so that they issue together.
// Prefetching the slots 2 KiB ahead, every line, took a 262K-slot free at page 16 from
// ~106 to ~56 us at best on the project's VM (1 KiB ahead: ~81 us; the slots were just
// written by the caller, partly out of the core's caches).
constexpr size_t kPrefetchBytes = 2048;

template <int kPage>
__attribute__((target("avx2"))) size_t scan_avx2(const int64_t* slots, size_t i, size_t n, int64_t page,
                                                 int64_t limit, PageList* list) {
  if (kPage > 0) page = kPage;
  const size_t P = static_cast<size_t>(page);
  const int shift = __builtin_ctzll(static_cast<unsigned long long>(page));
  const __m256i high = _mm256_set1_epi64x(~(page - 1));  // bits that no in-page offset has
  PageList l = *list;  // a local copy: the out stores cannot alias its fields
  for (; i + P <= n; i += P) {
    const __m256i* q = reinterpret_cast<const __m256i*>(slots + i);
    // Every 64-byte line of the page, kPrefetchBytes ahead; none at page 4 (a line per two
    // pages, where prefetching it measured slower: ~54 vs ~47 us at best for 64 requests).
    for (size_t line = 0; line < P / 8; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(q + 2 * line) + kPrefetchBytes, _MM_HINT_T0);
    }
    const __m256i first = _mm256_loadu_si256(q);
    const int64_t s = slots[i];
    if (!page_start_ok(s, page, limit)) break;
    const __m256i vbase = _mm256_andnot_si256(_mm256_set1_epi64x(page - 1), _mm256_permute4x64_epi64(first, 0));
    __m256i acc = _mm256_sub_epi64(first, vbase);
    for (size_t j = 1; j < P / 4; ++j) acc = _mm256_or_si256(acc, _mm256_sub_epi64(_mm256_loadu_si256(q + j), vbase));
    if (!_mm256_testz_si256(acc, high)) break;
    l.note(s >> shift);  // s >= page: the shift is the division
  }
  *list = l;
  return i;
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;  // also checks that the OS saves the YMM state
}
#endif

}  // namespace

size_t scan_whole_pages(const int64_t* slots, size_t i, size_t n, int64_t page, int64_t limit, PageList* list) {
#ifdef KVPOOL_PAGE_SCAN_AVX2
  static const bool avx2 = cpu_has_avx2();
  if (avx2 && page == 16) return scan_avx2<16>(slots, i, n, page, limit, list);
  if (avx2 && page == 64) return scan_avx2<64>(slots, i, n, page, limit, list);
  if (avx2 && page >= 4) return scan_avx2<0>(slots, i, n, page, limit, list);
#endif
  return scan_whole_pages_portable(slots, i, n, page, limit, list);
}

}  // namespace kvp::alloc
