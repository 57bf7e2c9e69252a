// Copies for the CPU backend's large scattered row writes and gathers.
//
// A plain memcpy into a row that is not in cache first reads the row's cache
// lines (read-for-ownership), then writes them back later: three memory
// transfers per line written. Non-temporal ("streaming") stores write whole
// lines without the read, which is how glibc's memcpy handles large copies
// and why a contiguous memcpy beat the per-row loop of set_kv by 2x
// (docs/performance.md, KV writes). Streaming only pays once the data written
// would not stay in cache anyway, hence the threshold on the bytes of a call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvp::util {

// A call that writes at least this many bytes streams its stores. Below it the
// written rows may still be in cache when the caller reads them back.
constexpr size_t kStreamMinBytes = size_t{4} << 20;

// memcpy(dst, src, bytes) with streaming stores for the aligned middle of dst
// (ordinary stores for the unaligned head and tail), 64, 32 or 16 bytes per
// store: the widest of AVX-512, AVX2 and SSE2 the CPU has, chosen once at run
// time. The stores are weakly ordered: call stream_fence() before another
// thread may read dst.
void copy_streaming(void* dst, const void* src, size_t bytes);

// The instruction sets copy_streaming chooses from.
enum class StreamIsa { kSse2, kAvx2, kAvx512 };

// copy_streaming with the given instruction set (the tests run each one);
// false, nothing copied, where this CPU or build lacks it. kSse2 is always
// there (a plain memcpy off x86-64).
bool copy_streaming_with(StreamIsa isa, void* dst, const void* src, size_t bytes);

// Orders every earlier streaming store before later stores (sfence on x86).
void stream_fence();

// Asks for the first `bytes` (at most a few KiB) of a row that will be read
// soon: gathers of random rows otherwise wait for each row's first miss and
// page walk in turn, and conversions of contiguous caller rows outran the
// hardware prefetcher (their source loads were most of their time). The
// lines go to L2 (prefetcht2), not L1: on the 2-core Xeon VM an fp8 -> bf16
// gather of 8192 random 1 KiB rows ran 1.3-1.4x faster with L2 prefetches
// than with L1 ones (minimum and median of 60 alternating rounds, load ~5)
// and a gather of 2 KiB rows as stored ~1.17x (load < 1; 1 KiB rows the
// same either way), plausibly because pending L1 misses compete with the
// streaming stores for the core's few line-fill buffers (issue 14, item 5).
inline void prefetch_row(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 1);
}

// prefetch_row into L1 (prefetcht0): what CpuBackend's copies of rows under
// 2 KiB use (see copy_rows).
inline void prefetch_row_l1(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

// How many rows of `row_bytes` a converting loop asks for ahead of the one it
// works on: about 16 KiB in flight, at least 2 rows and at most 32. On the
// 2-core VM (medians of 40 alternating rounds, load < 1) an e4m3 -> bf16
// gather of 1 KiB rows ran at 4.8-4.9 / 5.0 / 5.5-5.6 GB/s with 4 / 8 / 16
// KiB ahead, a bf16 -> e4m3 write from 2 KiB caller rows at 3.8-4.2 /
// 3.7-4.2 / 4.1-4.8.
inline size_t rows_ahead(size_t row_bytes) {
  constexpr size_t kBytesInFlight = size_t{16} << 10;
  const size_t rows = row_bytes == 0 ? 32 : kBytesInFlight / row_bytes;
  return rows < 2 ? 2 : rows > 32 ? 32 : rows;
}

// The part of a row prefetch_row is asked for: all of it up to 4 KiB.
inline size_t prefetch_bytes(size_t row_bytes) { return row_bytes < 4096 ? row_bytes : 4096; }

}  // namespace kvp::util
