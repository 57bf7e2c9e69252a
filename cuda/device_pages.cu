// Kernels of the device free-list engine (lib/alloc/device_pages.hpp holds the
// host half: counters, capacity checks, ring positions).
//
// State in device memory: the free ring and the release ring (page ids, the
// host knows each list's head and length), an owned bitmap (bit per page id)
// and a scratch bitmap that is all zero between calls. Every kernel starts by
// checking the pool's fault record and does nothing once the pool faulted.
// Slots are computed exactly as lib/alloc/paged_allocator.cpp does.
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "alloc/device_kernels.hpp"
#include "device_common.cuh"
#include "util/fault_injection.hpp"

namespace kvp::devk {
namespace {

using backend::FaultRecord;

// --- extend ----------------------------------------------------------------

// Every kernel that moves the free list also stores its new position (computed by
// the host) in the pool's device cursor, which a captured graph decode reads at replay
// time (graph_decode_kernel). Only thread 0 of block 0 writes it; nothing else in the
// same kernel reads it.
__device__ __forceinline__ void store_cursor(RingPos* cursor, RingPos next) {
  if (cursor != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *cursor = next;
}

constexpr int kExtendThreads = 256;
// Tokens per thread: the launcher picks 1 for a small grid and 4 for a large one. A
// launch takes about as long as its slowest warp's chain of dependent instructions, so
// one token per thread (a block per 256 tokens, the work on more SMs) is faster while
// the blocks all fit at once (H100, page 16 / 64: batch 1 5.6 -> 4.4 us, batch 32 6.2 ->
// 5.7 / 5.9 -> 5.0 us of GPU time); with thousands of blocks, each of which sums the
// requests before its own, four per thread is (batch 256, page 64: 7.2 against 8.1 us).
constexpr int kExtendWide = 4;
constexpr int kExtendNarrow = 1;
template <int kPer>
constexpr int kExtendChunk = kExtendThreads * kPer;  // tokens of one request per block
// A launch of at most this many one-token-per-thread blocks takes the narrow form.
constexpr int64_t kExtendNarrowBlocks = 512;

struct ExtendParams {
  ExtendArgs a;
  RingPos* cursor;
  RingPos next;
  const int64_t* ring;
  int64_t head;
  int64_t cap;
  uint32_t* owned;
  PageMath page;
  int64_t slot_limit;
  FaultRecord* fault;
  int* flag;
};

// Up to this many earlier requests, every warp sums them itself (see below).
constexpr int64_t kWarpSumRequests = 64;  // beyond, a block-wide sum was faster (batch 256: 8.8 against 10.1 µs)

// Request i's extend and new pages packed as (extend << 32) | pages (0 for an invalid request,
// which its own block reports): both sums fit in 32 bits for any one call.
__device__ __forceinline__ unsigned long long packed_need(const PageMath& page, int64_t pi, int64_t si) {
  if (pi < 0 || si < pi) return 0;
  return (static_cast<unsigned long long>(si - pi) << 32) |
         static_cast<unsigned long long>(page.pages(si) - page.pages(pi));
}

// The packed needs of requests first, first + stride, ... below r. Two requests per
// iteration, both loaded before either is used: in-order issue would otherwise wait one
// load latency per request (a zero pair adds nothing: packed_need(0, 0) == 0).
__device__ __forceinline__ unsigned long long sum_needs(const ExtendParams& p, int first, int stride, int r) {
  unsigned long long sum = 0;  // 32-bit indices: the launcher caps the batch at INT32_MAX
  // Not unrolled: a thread makes one or two iterations at the batch sizes engines use, and
  // the unrolled copies only lengthened the code a launch fetches.
#pragma unroll 1
  for (int i = first; i < r; i += 2 * stride) {
    const int j = i + stride;
    const bool two = j < r;
    const int64_t pi = p.a.prefix_lens[i], si = p.a.seq_lens[i];
    const int64_t pj = two ? p.a.prefix_lens[j] : 0, sj = two ? p.a.seq_lens[j] : 0;
    sum += packed_need(p.page, pi, si) + packed_need(p.page, pj, sj);
  }
  return sum;
}

// Sets the ownership bits of the pages this warp's lanes start, one atomicOr per bitmap
// word and warp: the pages a warp starts are mostly consecutive ids in one word, and a
// red.or per page (16K at batch 256, page 16) queued on a few bitmap lines ahead of the
// warps' free-list loads. Fire-and-forget: the old value is not waited for (kvpool_check
// verifies ownership). Every lane of the warp must call it.
__device__ __forceinline__ void mark_owned(uint32_t* owned, bool starts, int64_t page) {
  const unsigned active = __ballot_sync(0xffffffffu, starts);
  if (!starts) return;
  const long long word = word_of(page);
  const unsigned peers = __match_any_sync(active, word);
  const uint32_t bits = __reduce_or_sync(peers, bit_of(page));
  if (static_cast<int>(threadIdx.x & 31u) == __ffs(static_cast<int>(peers)) - 1) atomicOr(&owned[word], bits);
}

// The stores of request r's block: tokens [blockIdx.y * C, +C) of its extend, C = kExtendChunk<kPer> (`ext`
// tokens, after the `pre` of its prefix). `before` packs the extends and new pages of the
// requests before it (output and free-list offsets). All offsets here are 32-bit: one extend is
// at most max_extend <= 65535 * 1024 tokens (checked by the caller against the device length)
// and a call's totals are below 2^32 (the launcher checks them), so only the slot values need
// 64 bits. Every write is bounded by the host's counts, so device lengths that differ fault
// instead of writing past the arrays.
template <int kPer>
__device__ __forceinline__ void extend_tokens(const ExtendParams& p, int64_t r, uint32_t ext,
                                              unsigned long long before, int64_t pre, int64_t last) {
  const ExtendArgs& a = p.a;
  const uint32_t out_off = static_cast<uint32_t>(before >> 32);
  const uint32_t page_off = static_cast<uint32_t>(before);
  const uint32_t out_len = static_cast<uint32_t>(a.out_len), pages = static_cast<uint32_t>(a.pages);
  // Tokens that still fit the prefix's partial last page (part 1): fewer than a page.
  const uint32_t room = static_cast<uint32_t>(p.page.pages(pre) * p.page.size - pre);
  const uint32_t first = blockIdx.y * static_cast<uint32_t>(kExtendChunk<kPer>) + threadIdx.x;
  // Two passes: pass 1 starts every free-list read of the thread, pass 2 uses
  // them (in-order issue: a use of a loaded value stalls the warp).
  int64_t value[kPer];
  uint32_t q_of[kPer], offset[kPer];
  constexpr uint32_t kNone = 0xffffffffu;  // q_of of a token of part 1 (or none)
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const uint32_t within = first + static_cast<uint32_t>(k * kExtendThreads);
    q_of[k] = kNone;
    value[k] = 0;
    offset[k] = 0;
    if (within >= ext) continue;
    if (within < room) {  // part 1: continue the prefix's partial page
      value[k] = last + 1 + within;
      continue;
    }
    const uint32_t d = within - room;        // tokens after the prefix's last page
    // Parts 2 and 3: the batch's q-th new page (64-bit sum: device lengths that differ from the
    // host's may push it past 2^32, and the check below must see that).
    const uint64_t q = uint64_t{page_off} + p.page.div32(d);
    if (q >= pages) {
      kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpExtend, r, static_cast<int64_t>(q) + 1,
                a.pages);
      continue;
    }
    q_of[k] = static_cast<uint32_t>(q);
    offset[k] = p.page.mod32(d);  // the prefix's last page ends on a page boundary
    value[k] = p.ring[ring_index(p.head, q, p.cap)];
  }
  // Pass 2 runs every iteration on every lane (no `continue`): mark_owned is a warp-wide step.
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const uint32_t within = first + static_cast<uint32_t>(k * kExtendThreads);
    bool starts = false;  // this token is the first slot of a new page
    int64_t page = 0;
    if (within < ext) {
      const uint64_t o = uint64_t{out_off} + within;  // 64-bit for the same reason as q
      if (o >= out_len) {
        kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpExtend, r, static_cast<int64_t>(o) + 1,
                  a.out_len);
      } else if (q_of[k] == kNone) {
        a.out[o] = value[k];
      } else {
        page = value[k];
        a.out[o] = page * p.page.size + offset[k];
        starts = offset[k] == 0;  // a new page's first slot records the page (every new page has one)
        if (starts && a.new_pages != nullptr) a.new_pages[q_of[k]] = page;
      }
    }
    mark_owned(p.owned, starts, page);
  }
}

// Grid (request r, chunk c): the block writes tokens [c * C, (c + 1) * C) of request
// r's extend, C = kExtendChunk<kPer> (256 or 1,024 tokens). As in SGLang's kernel, every block sums the extends
// and new pages of the requests before it (both sums packed into one 64-bit
// word), which gives its output offset and its free-list offset: no scan
// across blocks and no search per token. The critical path is one read of the
// lengths, a warp reduction, one read of the free list and the stores. The last request's block compares the device
// totals with the host's; every write is bounded by the host's counts, so
// device lengths that differ fault instead of writing past the arrays.
template <int kPer>
__global__ void __launch_bounds__(kExtendThreads) extend_kernel(ExtendParams p) {
  store_cursor(p.cursor, p.next);
  __shared__ int s_stop;
  const ExtendArgs& a = p.a;
  const int64_t r = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t P = p.page.size;
  const int64_t pre = a.prefix_lens[r], seq = a.seq_lens[r], last = a.last_locs[r];
  // Chunks past the end of this request's extend have nothing to write (the grid
  // covers the longest extend): they leave before any barrier, as a whole block.
  if (blockIdx.y > 0 && static_cast<int64_t>(blockIdx.y) * kExtendChunk<kPer> >= seq - pre) return;
  // (extends << 32) | new pages, summed over the requests before r.
  unsigned long long before = 0;
  if (r <= kWarpSumRequests) {
    // Each warp sums them itself (lanes, then shuffles): no block barrier on the
    // critical path, so every thread also checks the fault record on its own.
    const bool faulted = kvp_faulted(p.fault);  // issued with the loads below
    const int lane = tid & 31;
    before = sum_needs(p, lane, 32, static_cast<int>(r));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) before += __shfl_xor_sync(0xffffffffu, before, o);
    // Uniform per warp (a fault raised meanwhile may reach the lanes' reads apart): the
    // stores end in a warp-wide step (mark_owned).
    if (__any_sync(0xffffffffu, faulted)) return;
  } else {
    // Wide batches (r is the block's, so every thread takes this branch): each warp sums
    // its share, and after ONE barrier every thread adds the warps' sums itself (a block
    // reduction would need a second barrier to hand thread 0's total to the others).
    __shared__ unsigned long long s_warp[kExtendThreads / 32];
    unsigned long long part = sum_needs(p, tid, kExtendThreads, static_cast<int>(r));
    if (tid == 0) s_stop = kvp_faulted(p.fault) ? 1 : 0;  // issued with the loads above
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
    if ((tid & 31) == 0) s_warp[tid >> 5] = part;
    __syncthreads();
    if (s_stop) return;  // uniform: read after the barrier
#pragma unroll
    for (int w = 0; w < kExtendThreads / 32; ++w) before += s_warp[w];
  }
  const bool bad_length = pre < 0 || seq < pre;
  const bool bad_last = !bad_length && ((pre == 0 && last != -1) || (pre > 0 && (last < 0 || last >= p.slot_limit)) ||
                                        (P > 1 && p.page.mod(last + 1) != p.page.mod(pre)));
  // An extend longer than the host's longest means the device lengths differ from the host's;
  // rejecting it here also keeps every per-token offset below 2^32 (see extend_tokens).
  const bool too_long = !bad_length && !bad_last && seq - pre > a.max_extend;
  if (bad_length || bad_last || too_long) {  // uniform: the request is the block's
    if (blockIdx.y == 0 && tid == 0) {
      if (bad_length) {
        kvp_raise(p.fault, p.flag, backend::kFaultBadLength, backend::kOpExtend, r, seq, pre);
      } else if (bad_last) {
        kvp_raise(p.fault, p.flag, backend::kFaultBadLastLoc, backend::kOpExtend, r, last, pre);
      } else {
        kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpExtend, r, seq - pre, a.max_extend);
      }
    }
    return;
  }
  const int64_t ext = seq - pre;
  if (r == a.batch - 1 && blockIdx.y == 0 && tid == 0) {
    const int64_t total = static_cast<int64_t>(before >> 32) + ext;
    const int64_t pages = static_cast<int64_t>(before & 0xffffffffull) + p.page.pages(seq) - p.page.pages(pre);
    if (total != a.out_len) {
      kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpExtend, -1, total, a.out_len);
    } else if (pages != a.pages) {
      kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpExtend, -1, pages, a.pages);
    }
  }
  extend_tokens<kPer>(p, r, static_cast<uint32_t>(ext), before, pre, last);
}

// --- decode ----------------------------------------------------------------

// A decode request's length and last_loc (the slot of token seq - 2, -1 for a first
// token), as PagedAllocator::decode checks them; raises the fault of `op` and returns
// false when they do not fit.
__device__ __forceinline__ bool decode_input_ok(const PageMath& page, int64_t seq, int64_t last, int64_t slot_limit,
                                                FaultRecord* fault, int* flag, int32_t op, int64_t i) {
  if (seq < 1) {
    kvp_raise(fault, flag, backend::kFaultBadLength, op, i, seq, seq - 1);
    return false;
  }
  if ((seq == 1 && last != -1) || (seq > 1 && (last < 0 || last >= slot_limit)) ||
      (page.size > 1 && page.mod(last + 2) != page.mod(seq))) {
    kvp_raise(fault, flag, backend::kFaultBadLastLoc, op, i, last, seq - 1);
    return false;
  }
  return true;
}

// Decode's block size, chosen per launch: one block of 32 or 128 threads for batches
// that fit (fewer warps make the barriers and the scan shorter), else blocks of 256
// requests side by side (decode_kernel).
constexpr int kDecodeTiny = 32;
constexpr int kDecodeSmall = 128;
constexpr int kDecodeLarge = 256;
constexpr int kGraphDecodeThreads = 512;

struct DecodeParams {
  DecodeArgs a;
  RingPos* cursor;
  RingPos next;
  const int64_t* ring;
  int64_t head;
  int64_t cap;
  uint32_t* owned;
  PageMath page;
  int64_t slot_limit;
  FaultRecord* fault;
  int* flag;
};

// Hands out request i's new page: the free-list entry q. The slot and new_pages are
// stored before the ownership check waits for its atomic, so the check's round trip
// overlaps the stores instead of delaying them.
__device__ __forceinline__ void decode_new_page(const DecodeParams& p, int64_t i, int64_t q) {
  const int64_t page = p.ring[ring_index(p.head, q, p.cap)];
  p.a.out[i] = page * p.page.size;
  if (p.a.new_pages != nullptr) p.a.new_pages[q] = page;
  if (page < 1 || page > p.cap || (atomicOr(&p.owned[word_of(page)], bit_of(page)) & bit_of(page))) {
    kvp_raise(p.fault, p.flag, backend::kFaultCorrupt, backend::kOpDecode, i, page);
  }
}

// Block b decodes requests [b * kThreads, (b + 1) * kThreads): an exclusive sum of
// "needs a new page" over its requests, started at the new pages of the requests
// before the block, gives each request its free-list entry. As in the extend kernel,
// every block after the first sums those earlier requests itself (a strided loop and
// one reduction) instead of a scan across blocks, so large batches run on several SMs
// at once rather than in tiles one after another. The last block also sums the
// lengths and compares both totals with the host's.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) decode_kernel(DecodeParams p) {
  using Reduce = cub::BlockReduce<long long, kThreads>;
  __shared__ struct {
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ long long s_before[3];  // new pages and lengths before the block; any length below 1
  store_cursor(p.cursor, p.next);
  const DecodeArgs& a = p.a;
  const int64_t P = p.page.size;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads;
  const int64_t i = base + threadIdx.x;
  const bool last_block = blockIdx.x == gridDim.x - 1;
  // The fault record is read by every thread together with its lengths and made
  // uniform by one barrier (a block-wide early return must not split the block).
  const bool faulted = kvp_faulted(p.fault);
  int64_t seq = 0, last = -1;
  if (i < a.batch) {
    seq = a.seq_lens[i];
    last = a.last_locs[i];
  }
  long long need_before = 0, seq_before = 0;
  bool earlier_bad = false;
  if (base > 0) {  // uniform: the block's
    long long need = 0, lengths = 0;
    int bad = 0;
    for (int64_t j = threadIdx.x; j < base; j += kThreads) {
      const int64_t s = a.seq_lens[j];
      // A length below 1 is its own block's fault and needs no page there either.
      bad |= s < 1 ? 1 : 0;
      need += (s >= 1 && (P == 1 || p.page.mod(s) == 1)) ? 1 : 0;
      lengths += s;
    }
    const long long need_sum = Reduce(tmp.reduce).Sum(need);  // valid in thread 0
    __syncthreads();
    const long long length_sum = Reduce(tmp.reduce).Sum(lengths);
    const int any_bad = __syncthreads_or(bad);
    if (threadIdx.x == 0) {
      s_before[0] = need_sum;
      s_before[1] = length_sum;
      s_before[2] = any_bad;
    }
    __syncthreads();
    need_before = s_before[0];
    seq_before = s_before[1];
    earlier_bad = s_before[2] != 0;
  }
  if (__syncthreads_or(faulted ? 1 : 0)) return;
  bool ok = false;
  int mine = 0;
  long long seq_sum = 0;
  if (i < a.batch && decode_input_ok(p.page, seq, last, p.slot_limit, p.fault, p.flag, backend::kOpDecode, i)) {
    ok = true;
    mine = (P == 1 || p.page.mod(seq) == 1) ? 1 : 0;
    seq_sum = seq;
  }
  // Exclusive sum of the 0/1 flags `mine` over the block: a ballot per warp and, with more
  // than one warp, the warps' counts through shared memory (fewer steps than a general scan).
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  const unsigned flags = __ballot_sync(0xffffffffu, mine != 0);
  int excl = __popc(flags & ((1u << lane) - 1u));
  int total = __popc(flags);
  if constexpr (kThreads > 32) {
    __shared__ int s_warp[kThreads / 32];
    if (lane == 0) s_warp[warp] = total;
    __syncthreads();
    total = 0;
#pragma unroll
    for (unsigned w = 0; w < kThreads / 32; ++w) {
      const int c = s_warp[w];
      excl += w < warp ? c : 0;
      total += c;
    }
  }
  if (ok) {
    if (mine == 0) {
      a.out[i] = last + 1;
    } else {
      const int64_t q = need_before + excl;
      if (q >= a.pages) {
        kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpDecode, i, q + 1, a.pages);
      } else {
        decode_new_page(p, i, q);
      }
    }
  }
  if (!last_block) return;  // uniform
  const long long sum = seq_before + Reduce(tmp.reduce).Sum(seq_sum);  // valid in thread 0
  // An earlier block refused a length of its own: that fault is the one to report.
  if (threadIdx.x == 0 && !earlier_bad) {
    if (sum != a.sum_seq) {
      kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpDecode, -1, sum, a.sum_seq);
    } else if (need_before + total != a.pages) {
      kvp_raise(p.fault, p.flag, backend::kFaultLengthMismatch, backend::kOpDecode, -1, need_before + total,
                a.pages);
    }
  }
}

// --- decode inside a captured graph -------------------------------------------------

struct GraphDecodeParams {
  const int64_t* seq_lens;
  const int64_t* last_locs;
  int64_t batch;
  int64_t* out;
  const int64_t* ring;
  RingPos* cursor;
  int64_t cap;
  uint32_t* owned;
  PageMath page;
  int64_t slot_limit;
  FaultRecord* fault;
  int* flag;
};

// decode_kernel for graph replays: nothing comes from the host at launch time. Pass 1
// checks every request and counts the new pages; the capacity check against the
// cursor is the device's (a step past the watermark faults before anything is
// written); pass 2 hands out pages as decode_kernel does, and thread 0 advances the
// cursor. One block, as decode_kernel.
__global__ void __launch_bounds__(kGraphDecodeThreads) graph_decode_kernel(GraphDecodeParams p) {
  using Scan = cub::BlockScan<long long, kGraphDecodeThreads, cub::BLOCK_SCAN_RAKING>;
  using Reduce = cub::BlockReduce<long long, kGraphDecodeThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  __shared__ long long s_need;
  __shared__ RingPos s_pos;
  if (block_faulted(p.fault)) return;
  const int64_t P = p.page.size;
  long long need = 0;
  bool bad = false;
  for (int64_t i = threadIdx.x; i < p.batch; i += kGraphDecodeThreads) {
    const int64_t seq = p.seq_lens[i], last = p.last_locs[i];
    if (decode_input_ok(p.page, seq, last, p.slot_limit, p.fault, p.flag, backend::kOpDecodeGraph, i)) {
      need += (P == 1 || p.page.mod(seq) == 1) ? 1 : 0;
    } else {
      bad = true;
    }
  }
  const long long total = Reduce(tmp.reduce).Sum(need);  // valid in thread 0
  const int any_bad = __syncthreads_or(bad ? 1 : 0);
  if (threadIdx.x == 0) {
    s_need = total;
    s_pos = *p.cursor;
  }
  __syncthreads();
  if (any_bad) return;
  if (s_need > s_pos.count) {
    if (threadIdx.x == 0) {
      kvp_raise(p.fault, p.flag, backend::kFaultPastWatermark, backend::kOpDecodeGraph, -1, s_need, s_pos.count);
    }
    return;
  }
  long long carry = 0;
  for (int64_t tile = 0; tile < p.batch; tile += kGraphDecodeThreads) {
    const int64_t i = tile + threadIdx.x;
    long long mine = 0;
    int64_t seq = 0, last = -1;
    if (i < p.batch) {
      seq = p.seq_lens[i];
      last = p.last_locs[i];
      mine = (P == 1 || p.page.mod(seq) == 1) ? 1 : 0;
    }
    long long excl = 0, tile_total = 0;
    Scan(tmp.scan).ExclusiveSum(mine, excl, tile_total);
    if (i < p.batch) {
      if (mine == 0) {
        p.out[i] = last + 1;
      } else {
        const int64_t page = p.ring[ring_index(s_pos.head, carry + excl, p.cap)];
        if (page < 1 || page > p.cap || (atomicOr(&p.owned[word_of(page)], bit_of(page)) & bit_of(page))) {
          kvp_raise(p.fault, p.flag, backend::kFaultCorrupt, backend::kOpDecodeGraph, i, page);
        }
        p.out[i] = page * P;
      }
    }
    carry += tile_total;
    __syncthreads();  // tmp is reused by the next tile
  }
  if (threadIdx.x == 0) *p.cursor = RingPos{(s_pos.head + s_need) % p.cap, s_pos.count - s_need};
}

// --- alloc(n) ----------------------------------------------------------------

__global__ void alloc_kernel(const int64_t* ring, int64_t head, int64_t cap, uint32_t* owned, PageMath page,
                             int64_t* out, int64_t slots, FaultRecord* fault, int* flag, RingPos* cursor,
                             RingPos next) {
  store_cursor(cursor, next);
  if (kvp_faulted(fault)) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < slots; t += stride) {
    const int64_t k = page.div(t);
    const int64_t id = ring[ring_index(head, k, cap)];
    const int64_t j = t - k * page.size;
    out[t] = id * page.size + j;
    if (j == 0 && (id < 1 || id > cap || (atomicOr(&owned[word_of(id)], bit_of(id)) & bit_of(id)))) {
      kvp_raise(fault, flag, backend::kFaultCorrupt, backend::kOpAlloc, k, id);
    }
  }
}

// --- free ------------------------------------------------------------------

// Page size 1 (FIFO): each id to the back, in the given order. The owned bit
// is cleared atomically, so an id listed twice (or not allocated) is caught
// by whichever thread comes second.
__global__ void free_append_kernel(const int64_t* pages, int64_t n, int64_t* ring, int64_t start, int64_t cap,
                                   uint32_t* owned, FaultRecord* fault, int* flag, RingPos* cursor, RingPos next) {
  store_cursor(cursor, next);
  if (kvp_faulted(fault)) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t id = pages[i];
    if (id == 0) {
      kvp_raise(fault, flag, backend::kFaultReservedId, backend::kOpFreePages, i, 0);
      continue;
    }
    if (id < 0 || id > cap) {
      kvp_raise(fault, flag, backend::kFaultOutOfRange, backend::kOpFreePages, i, id, cap + 1);
      continue;
    }
    const uint32_t old = atomicAnd(&owned[word_of(id)], ~bit_of(id));
    if (!(old & bit_of(id))) {
      kvp_raise(fault, flag, backend::kFaultNotAllocated, backend::kOpFreePages, i, id);
      continue;
    }
    ring[ring_index(start, i, cap)] = id;
  }
}

// One id's checks: reserved, range, owned. True if it may be freed.
__device__ __forceinline__ bool check_free_id(int64_t id, int64_t index, int64_t cap, const uint32_t* owned,
                                              FaultRecord* fault, int* flag) {
  if (id == 0) {
    kvp_raise(fault, flag, backend::kFaultReservedId, backend::kOpFreePages, index, 0);
    return false;
  }
  if (id < 0 || id > cap) {
    kvp_raise(fault, flag, backend::kFaultOutOfRange, backend::kOpFreePages, index, id, cap + 1);
    return false;
  }
  if (!(owned[word_of(id)] & bit_of(id))) {
    kvp_raise(fault, flag, backend::kFaultNotAllocated, backend::kOpFreePages, index, id);
    return false;
  }
  return true;
}

constexpr int kSmallSort = 1024;

// Paged, up to 1024 pages: one block ranks every id against all others in
// shared memory (rank = its place in ascending order; an equal id elsewhere is
// a duplicate), checks everything, and only then clears the owned bits and
// writes the ids at ring positions start + rank.
__global__ void __launch_bounds__(kSmallSort) free_sorted_small_kernel(const int64_t* pages, int n, int64_t* ring,
                                                                       int64_t start, int64_t cap, uint32_t* owned,
                                                                       FaultRecord* fault, int* flag, RingPos* cursor,
                                                                       RingPos next) {
  __shared__ int64_t s[kSmallSort];
  store_cursor(cursor, next);
  if (block_faulted(fault)) return;
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) s[i] = pages[i];
  __syncthreads();
  int rank = 0;
  if (i < n) {
    const int64_t id = s[i];
    bool duplicate = false;
    for (int j = 0; j < n; ++j) {
      const int64_t other = s[j];
      rank += other < id ? 1 : 0;
      duplicate |= other == id && j != i;
    }
    if (check_free_id(id, i, cap, owned, fault, flag) && duplicate) {
      kvp_raise(fault, flag, backend::kFaultDuplicate, backend::kOpFreePages, i, id);
    }
  }
  if (block_faulted(fault)) return;
  if (i < n) {
    const int64_t id = s[i];
    atomicAnd(&owned[word_of(id)], ~bit_of(id));
    ring[ring_index(start, rank, cap)] = id;
  }
}

// Paged, more than 1024 pages: the ids are distinct page numbers, so sorting
// them is marking a bitmap and reading it back in order (compact_bits below,
// free_sorted_large_kernel). Marking checks each id: a bit
// already set in the scratch bitmap is a duplicate, an owned bit already clear
// a page not allocated. The owned bits are cleared here; after a fault the
// pool does nothing until kvalloc_clear(), which resets both bitmaps.
// Marks one freed id in the scratch bitmap and clears its owned bit; false (after raising) on a bad id.
__device__ __forceinline__ void mark_freed(const int64_t* pages, int64_t i, int64_t cap, uint32_t* owned,
                                           uint32_t* bits, FaultRecord* fault, int* flag) {
  const int64_t id = pages[i];
  if (id == 0) {
    kvp_raise(fault, flag, backend::kFaultReservedId, backend::kOpFreePages, i, 0);
    return;
  }
  if (id < 0 || id > cap) {
    kvp_raise(fault, flag, backend::kFaultOutOfRange, backend::kOpFreePages, i, id, cap + 1);
    return;
  }
  if (atomicOr(&bits[word_of(id)], bit_of(id)) & bit_of(id)) {
    kvp_raise(fault, flag, backend::kFaultDuplicate, backend::kOpFreePages, i, id);
    return;
  }
  if (!(atomicAnd(&owned[word_of(id)], ~bit_of(id)) & bit_of(id))) {
    kvp_raise(fault, flag, backend::kFaultNotAllocated, backend::kOpFreePages, i, id);
  }
}

// --- merge-and-sort ----------------------------------------------------------

// Marks entry k of the concatenated free and release lists in the scratch bitmap; an id out
// of range or already marked means the lists are corrupt.
__device__ __forceinline__ void mark_listed(const int64_t* free_ring, RingPos free, const int64_t* release_ring,
                                            RingPos release, int64_t k, int64_t cap, uint32_t* bits,
                                            FaultRecord* fault, int* flag) {
  const int64_t id = k < free.count ? free_ring[ring_index(free.head, k, cap)]
                                    : release_ring[ring_index(release.head, k - free.count, cap)];
  if (id < 1 || id > cap || (atomicOr(&bits[word_of(id)], bit_of(id)) & bit_of(id))) {
    kvp_raise(fault, flag, backend::kFaultCorrupt, backend::kOpMerge, k, id);
  }
}

constexpr int kCompactThreads = 512;  // 1024 would cap registers at 64 and spill
constexpr int kCompactWords = 8;  // consecutive bitmap words per thread and tile

// One block: the bitmap in tiles of 4096 words; an exclusive sum of the
// words' popcounts gives each word its output position; set bits are written
// in ascending order at ring positions start, start + 1, ... and the words
// are zeroed again (the scratch bitmap is all zero between calls).
__device__ __forceinline__ void compact_bits(uint32_t* bits, int64_t words, int64_t* ring, int64_t start, int64_t cap,
                                             FaultRecord* fault) {
  using Scan = cub::BlockScan<long long, kCompactThreads, cub::BLOCK_SCAN_RAKING>;
  __shared__ typename Scan::TempStorage scan_tmp;
  if (block_faulted(fault)) return;  // also orders the marking before the reads
  long long carry = 0;
  for (int64_t tile = 0; tile < words; tile += static_cast<int64_t>(kCompactThreads) * kCompactWords) {
    const int64_t first = tile + static_cast<int64_t>(threadIdx.x) * kCompactWords;
    uint32_t w[kCompactWords];
    long long count = 0;
    for (int k = 0; k < kCompactWords; ++k) {
      w[k] = first + k < words ? __ldcg(&bits[first + k]) : 0u;  // L2: other blocks' marks (merge_kernel)
      count += __popc(w[k]);
    }
    long long pos = 0, total = 0;
    Scan(scan_tmp).ExclusiveSum(count, pos, total);
    pos += carry;
    for (int k = 0; k < kCompactWords; ++k) {
      uint32_t word = w[k];
      if (word == 0) continue;
      bits[first + k] = 0u;
      while (word != 0) {
        const int b = __ffs(word) - 1;
        word &= word - 1;
        ring[ring_index(start, pos++, cap)] = (first + k) * 32 + b;
      }
    }
    carry += total;
    __syncthreads();  // scan_tmp is reused by the next tile
  }
}


// Merge-and-sort in ONE launch (a merging extend or decode is then two launches, not
// three): every block marks its share of the two lists in the scratch bitmap, and the
// last block to finish compacts the bitmap into the free ring from position 0. "Last" is
// decided by a counter in device memory that the last block sets back to zero, so it is
// zero between calls (and kvalloc_clear zeroes it). Blocks count themselves even when the
// pool is faulted, so the counter always returns to zero; compact_bits then does nothing.
__global__ void __launch_bounds__(kCompactThreads) merge_kernel(int64_t* free_ring, RingPos free,
                                                                const int64_t* release_ring, RingPos release,
                                                                int64_t cap, uint32_t* bits, int64_t words,
                                                                unsigned int* blocks_done, FaultRecord* fault,
                                                                int* flag, RingPos* cursor, RingPos next) {
  __shared__ int s_last;
  store_cursor(cursor, next);
  if (!kvp_faulted(fault)) {
    const int64_t n = free.count + release.count;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
      mark_listed(free_ring, free, release_ring, release, k, cap, bits, fault, flag);
    }
  }
  __threadfence();  // this block's marks (and its reads of the rings) are done before it counts itself
  __syncthreads();
  if (threadIdx.x == 0) {
    s_last = atomicAdd(blocks_done, 1u) == gridDim.x - 1 ? 1 : 0;
    if (s_last) *blocks_done = 0;  // every block has counted: nothing else touches it in this launch
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();  // the other blocks' marks before the reads below
  compact_bits(bits, words, free_ring, 0, cap, fault);
}

// Paged, more than 1024 pages, in ONE launch (the host call stays one launch
// long): the block marks every id, then compacts the bitmap into the ring.
// One block is enough: the work is O(n + num_pages / 32) and nothing waits on
// the host; a fault raised while marking stops the compaction.
__global__ void __launch_bounds__(kCompactThreads) free_sorted_large_kernel(const int64_t* pages, int64_t n,
                                                                            int64_t* ring, int64_t start,
                                                                            int64_t cap, uint32_t* owned,
                                                                            uint32_t* bits, int64_t words,
                                                                            FaultRecord* fault, int* flag,
                                                                            RingPos* cursor, RingPos next) {
  store_cursor(cursor, next);
  if (block_faulted(fault)) return;
  for (int64_t i = threadIdx.x; i < n; i += kCompactThreads) mark_freed(pages, i, cap, owned, bits, fault, flag);
  compact_bits(bits, words, ring, start, cap, fault);
}

// --- reset and host-path checks ------------------------------------------------

__global__ void iota_kernel(int64_t* ring, int64_t n, RingPos* cursor) {
  store_cursor(cursor, RingPos{0, n});
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) ring[i] = i + 1;
}

__global__ void first_not_owned_kernel(const int64_t* pages, int64_t n, const uint32_t* owned,
                                       unsigned long long* result) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t id = pages[i];
    if (!(owned[word_of(id)] & bit_of(id))) atomicMin(result, static_cast<unsigned long long>(i));
  }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

PageMath page_math(const PagesView& v) { return PageMath{v.page_size, v.page_shift}; }

int64_t bitmap_words(const PagesView& v) { return v.num_pages / 32 + 1; }

}  // namespace

Status use_device(int device) {
  int current = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess && current == device) return Status::ok();
  return cuda_status(cudaSetDevice(device), "cudaSetDevice");
}

Status extend(const PagesView& v, RingPos free, RingPos next, const ExtendArgs& a, void* stream) {
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  ExtendParams p{a,       v.cursor,   next, v.free_ring, free.head, v.num_pages, v.owned, page_math(v), v.slot_limit,
                 v.fault, v.host_flag};
  auto chunks_of = [&](int64_t chunk) { return a.max_extend <= 0 ? 1 : (a.max_extend + chunk - 1) / chunk; };
  const int64_t wide_chunks = chunks_of(kExtendChunk<kExtendWide>);
  if (a.batch > INT32_MAX - 1024 || wide_chunks > 65535) {  // sum_needs steps 32-bit indices past the batch
    return Status::invalid("extend batch too large for one launch (" + std::to_string(a.batch) + " requests, " +
                           std::to_string(a.max_extend) + " tokens in the longest extend)");
  }
  // The kernel packs a call's extends and pages into 32 bits each and does its per-token
  // arithmetic in 32 bits (extend_tokens).
  if (a.out_len > UINT32_MAX || a.pages >= UINT32_MAX || v.page_size > UINT32_MAX) {
    return Status::invalid("extend of " + std::to_string(a.out_len) + " tokens (" + std::to_string(a.pages) +
                           " pages) exceeds what one call can allocate (2^32 - 1)");
  }
  const int64_t narrow_chunks = chunks_of(kExtendChunk<kExtendNarrow>);
  const bool narrow = a.batch * narrow_chunks <= kExtendNarrowBlocks;  // both factors are bounded above
  const dim3 grid(static_cast<unsigned>(a.batch), static_cast<unsigned>(narrow ? narrow_chunks : wide_chunks));
  KVP_INJECTION_POINT("extend_kernel launch");
  if (narrow) {
    extend_kernel<kExtendNarrow><<<grid, kExtendThreads, 0, as_stream(stream)>>>(p);
  } else {
    extend_kernel<kExtendWide><<<grid, kExtendThreads, 0, as_stream(stream)>>>(p);
  }
  return launch_status("extend kernel launch");
}

Status decode(const PagesView& v, RingPos free, RingPos next, const DecodeArgs& a, void* stream) {
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  DecodeParams p{a,          v.cursor, next, v.free_ring, free.head, v.num_pages, v.owned, page_math(v), v.slot_limit,
                 v.fault,    v.host_flag};
  KVP_INJECTION_POINT("decode_kernel launch");
  cudaStream_t s = as_stream(stream);
  if (a.batch <= kDecodeTiny) {
    decode_kernel<kDecodeTiny><<<1, kDecodeTiny, 0, s>>>(p);
  } else if (a.batch <= kDecodeSmall) {
    decode_kernel<kDecodeSmall><<<1, kDecodeSmall, 0, s>>>(p);
  } else {
    decode_kernel<kDecodeLarge><<<blocks_for(a.batch, kDecodeLarge, INT32_MAX), kDecodeLarge, 0, s>>>(p);
  }
  return launch_status("decode kernel launch");
}

Status decode_graph(const PagesView& v, const int64_t* seq_lens, const int64_t* last_locs, int64_t batch,
                    int64_t* out, void* stream) {
  if (batch == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  GraphDecodeParams p{seq_lens, last_locs, batch, out, v.free_ring, v.cursor, v.num_pages, v.owned, page_math(v),
                      v.slot_limit, v.fault, v.host_flag};
  KVP_INJECTION_POINT("graph_decode_kernel launch");
  graph_decode_kernel<<<1, kGraphDecodeThreads, 0, as_stream(stream)>>>(p);
  return launch_status("graph decode kernel launch");
}

Status alloc(const PagesView& v, RingPos free, RingPos next, int64_t* out, int64_t pages, void* stream) {
  if (pages == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  const int64_t slots = pages * v.page_size;
  KVP_INJECTION_POINT("alloc_kernel launch");
  alloc_kernel<<<blocks_for(slots, 256), 256, 0, as_stream(stream)>>>(v.free_ring, free.head, v.num_pages, v.owned,
                                                                      page_math(v), out, slots, v.fault, v.host_flag,
                                                                      v.cursor, next);
  return launch_status("alloc kernel launch");
}

Status free_pages(const PagesView& v, const int64_t* pages, int64_t n, int64_t* ring, int64_t start, bool sorted,
                  RingPos next, void* stream) {
  if (n == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  cudaStream_t s = as_stream(stream);
  if (!sorted) {
    KVP_INJECTION_POINT("free_append_kernel launch");
    free_append_kernel<<<blocks_for(n, 256), 256, 0, s>>>(pages, n, ring, start, v.num_pages, v.owned, v.fault,
                                                          v.host_flag, v.cursor, next);
    return launch_status("free kernel launch");
  }
  if (n <= kSmallSort) {
    const int threads = static_cast<int>((n + 31) / 32 * 32);
    KVP_INJECTION_POINT("free_sorted_small_kernel launch");
    free_sorted_small_kernel<<<1, threads, 0, s>>>(pages, static_cast<int>(n), ring, start, v.num_pages, v.owned,
                                                   v.fault, v.host_flag, v.cursor, next);
    return launch_status("free kernel launch");
  }
  KVP_INJECTION_POINT("free_sorted_large_kernel launch");
  free_sorted_large_kernel<<<1, kCompactThreads, 0, s>>>(pages, n, ring, start, v.num_pages, v.owned, v.scratch_bits,
                                                         bitmap_words(v), v.fault, v.host_flag, v.cursor, next);
  return launch_status("free kernel launch");
}

Status merge(const PagesView& v, RingPos free, RingPos release, void* stream) {
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  cudaStream_t s = as_stream(stream);
  const int64_t n = free.count + release.count;
  KVP_INJECTION_POINT("merge_kernel launch");
  merge_kernel<<<blocks_for(n, kCompactThreads), kCompactThreads, 0, s>>>(
      v.free_ring, free, v.release_ring, release, v.num_pages, v.scratch_bits, bitmap_words(v), v.blocks_done, v.fault,
      v.host_flag, v.cursor, RingPos{0, n});
  return launch_status("merge kernel launch");
}

Status reset(const PagesView& v, void* stream) {
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  cudaStream_t s = as_stream(stream);
  const size_t bytes = static_cast<size_t>(bitmap_words(v)) * sizeof(uint32_t);
  KVPOOL_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(v.owned, 0, bytes, s), "cudaMemsetAsync (owned bitmap)"));
  KVPOOL_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(v.scratch_bits, 0, bytes, s), "cudaMemsetAsync (scratch)"));
  KVPOOL_RETURN_IF_ERROR(
      cuda_status(cudaMemsetAsync(v.blocks_done, 0, sizeof(*v.blocks_done), s), "cudaMemsetAsync (merge counter)"));
  KVP_INJECTION_POINT("iota_kernel launch");
  iota_kernel<<<blocks_for(v.num_pages, 256), 256, 0, s>>>(v.free_ring, v.num_pages, v.cursor);
  return launch_status("free-list reset kernel launch");
}

Status first_not_owned(const PagesView& v, const int64_t* pages, int64_t n, void* stream, int64_t* index) {
  *index = -1;
  if (n == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(use_device(v.device));
  cudaStream_t s = as_stream(stream);
  KVPOOL_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(v.result, 0xFF, sizeof(uint64_t), s), "cudaMemsetAsync"));
  KVP_INJECTION_POINT("first_not_owned_kernel launch");
  first_not_owned_kernel<<<blocks_for(n, 256), 256, 0, s>>>(pages, n, v.owned,
                                                           reinterpret_cast<unsigned long long*>(v.result));
  KVPOOL_RETURN_IF_ERROR(launch_status("ownership check kernel launch"));
  uint64_t r = 0;
  KVPOOL_RETURN_IF_ERROR(
      cuda_status(cudaMemcpyAsync(&r, v.result, sizeof(r), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync"));
  KVPOOL_RETURN_IF_ERROR(cuda_status(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
  if (r != ~uint64_t{0}) *index = static_cast<int64_t>(r);
  return Status::ok();
}

}  // namespace kvp::devk
