// The copy kernel of the host tier (cuda/host_transfer.cu): device KV rows <->
// pinned host memory, which the GPU reads and writes directly through unified
// addressing (cudaHostAlloc memory has one pointer on both sides).
//
// Every layout of host_geometry.hpp is affine in (host page, layer, row of the page,
// head piece), and every device buffer is affine in (device page, row, piece) once
// the layer's base is known. So one kernel serves every layout and part: it gets
// byte strides, not layout names, and the host computes the strides from
// HostGeometry::offset() itself, so the layout arithmetic lives in one place.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvp::host::cudak {

constexpr int kCopyThreads = 256;
// Loads in flight per thread before the first store (PCIe latency is ~1-2 µs): 4, 8 or 16
// (CudaTransferOptions::copy_unroll; 8 and 16 measured no faster). A block's work piece is
// kCopyThreads * unroll accesses: 16 KiB at 4 and 16-byte accesses.
constexpr int kCopyUnroll = 4;
__host__ __device__ constexpr uint32_t chunk_units(int unroll) { return static_cast<uint32_t>(kCopyThreads * unroll); }

// One part (K, V, scales, latent row, indexer row) of one transfer, both sides.
struct PartCopy {
  const uint64_t* dev_base;              // device array: per tiered layer, the device buffer's address
  uint64_t dev_page, dev_row, dev_piece;  // device byte strides
  uint8_t* host;                         // the part's host region (offset of page 0, layer 0, row 0)
  uint64_t host_page, host_layer, host_row, host_piece;
  uint32_t rows;        // rows per page: P, or 1 for page parts
  uint32_t pieces;      // contiguous pieces per row (page_head: heads), else 1
  uint32_t units;       // width-byte units per piece
  int32_t units_shift;  // log2(units) when a power of two, else -1 (no division on the hot path)
  uint32_t width;       // 16, 8, 4, 2 or 1: the widest access every address and size allows
  uint32_t item_units;  // rows * pieces * units: one (page, layer) item
  int32_t item_shift;   // log2(item_units) when a power of two, else -1
  uint32_t chunks;      // ceil(item_units / chunk_units(unroll)): blocks' work pieces per item
  // Items smaller than a work piece (page size 1: a token's row) are copied several to a
  // piece, pages_per_piece of them (1: one item, or a chunk of one, per piece), so that a
  // block keeps a whole piece's bytes in flight rather than one row's.
  uint32_t pages_per_piece;
};

// ids: [n, host pages (n), device pages (n)] in device (or mapped pinned) memory, checked on the host.
struct CopyArgs {
  const PartCopy* parts;  // device array, blockIdx.y selects
  const int64_t* ids;
  uint32_t layer0, layers;  // tiered layers [layer0, layer0 + layers)
  int to_host;              // 1: device -> host (backup), 0: host -> device (load)
  // Loads that mark each layer done in device memory (layer_flag NULL: none). Per tiered layer
  // l, blocks add the work pieces they finished to layer_done[l]; the block whose pieces
  // complete the layer (layer_work of them, every part) zeroes the counter for the next load
  // and stores seq to layer_flag[l], which wait_layer waits on (cuStreamWaitValue32, >= seq).
  // sweep: per part the next work piece, then the count of blocks done (all zero at launch).
  unsigned long long* layer_done;
  unsigned long long* sweep;
  unsigned* layer_flag;
  unsigned seq;
  unsigned long long layer_work;
};

// Byte offset of access k of an item, on the device side (dev) or the host side.
template <class V>
__device__ __forceinline__ uint64_t unit_offset(const PartCopy& pc, uint32_t k, bool dev) {
  uint32_t c, rest;
  if (pc.units_shift >= 0) {
    c = k & (pc.units - 1);
    rest = k >> pc.units_shift;
  } else {
    c = k % pc.units;
    rest = k / pc.units;
  }
  const uint32_t h = pc.pieces == 1 ? 0 : rest % pc.pieces;
  const uint32_t r = pc.pieces == 1 ? rest : rest / pc.pieces;
  return r * (dev ? pc.dev_row : pc.host_row) + h * (dev ? pc.dev_piece : pc.host_piece) +
         static_cast<uint64_t>(c) * sizeof(V);
}

template <class V, int kUnroll>
__device__ __forceinline__ void copy_chunk(const PartCopy& pc, uint8_t* dev, uint8_t* host, uint32_t first,
                                           bool to_host) {
  const uint8_t* src = to_host ? dev : host;
  uint8_t* dst = to_host ? host : dev;
  // All loads first, then all stores: kUnroll transactions of each thread are in flight at
  // once. The offsets are computed again for the stores (a few integer operations per
  // access) rather than kept: only the loaded values stay live across the loads.
  V v[kUnroll];
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const uint32_t k = first + static_cast<uint32_t>(j * kCopyThreads) + threadIdx.x;
    // Streaming loads: each byte is read once, keep it out of the caches.
    if (k < pc.item_units) v[j] = __ldcs(reinterpret_cast<const V*>(src + unit_offset<V>(pc, k, to_host)));
  }
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const uint32_t k = first + static_cast<uint32_t>(j * kCopyThreads) + threadIdx.x;
    if (k < pc.item_units) __stcs(reinterpret_cast<V*>(dst + unit_offset<V>(pc, k, !to_host)), v[j]);
  }
}

// The page ids of a thread's accesses in a piece of several pages (pages_per_piece > 1):
// access j of thread t is unit j * kCopyThreads + t of the piece, whose page is the same in
// every piece, so a thread reads the next piece's ids while it copies this one (ids in a
// mapped staging slot cost a trip over PCIe).
template <int kUnroll>
struct PageIds {
  uint32_t host[kUnroll], dev[kUnroll];  // page ids (checked on the host: below 2^31)
  uint32_t count;                        // pages in the piece
};

template <int kUnroll>
__device__ __forceinline__ uint32_t page_of_access(const PartCopy& pc, int j) {
  const uint32_t k = static_cast<uint32_t>(j * kCopyThreads) + threadIdx.x;
  return pc.item_shift >= 0 ? k >> pc.item_shift : k / pc.item_units;
}

template <int kUnroll>
__device__ __forceinline__ void read_page_ids(const PartCopy& pc, const int64_t* host_pages, const int64_t* dev_pages,
                                              uint32_t count, PageIds<kUnroll>* ids) {
  ids->count = count;
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    const uint32_t i = page_of_access<kUnroll>(pc, j);
    if (i < count) {
      ids->host[j] = static_cast<uint32_t>(host_pages[i]);
      ids->dev[j] = static_cast<uint32_t>(dev_pages[i]);
    }
  }
}

// Up to pages_per_piece whole items of one layer (the piece holds at most
// chunk_units(kUnroll) accesses: one round of loads, then one of stores).
template <class V, int kUnroll>
__device__ __forceinline__ void copy_pages(const PartCopy& pc, uint8_t* dev_layer, uint8_t* host_layer,
                                           const PageIds<kUnroll>& ids, bool to_host) {
  const auto address = [&](int j, bool dev) {
    const uint32_t k = static_cast<uint32_t>(j * kCopyThreads) + threadIdx.x;
    const uint32_t kk = k - page_of_access<kUnroll>(pc, j) * pc.item_units;
    return dev ? dev_layer + static_cast<uint64_t>(ids.dev[j]) * pc.dev_page + unit_offset<V>(pc, kk, true)
               : host_layer + static_cast<uint64_t>(ids.host[j]) * pc.host_page + unit_offset<V>(pc, kk, false);
  };
  V v[kUnroll];
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (page_of_access<kUnroll>(pc, j) < ids.count) v[j] = __ldcs(reinterpret_cast<const V*>(address(j, to_host)));
  }
#pragma unroll
  for (int j = 0; j < kUnroll; ++j) {
    if (page_of_access<kUnroll>(pc, j) < ids.count) __stcs(reinterpret_cast<V*>(address(j, !to_host)), v[j]);
  }
}

// Calls f with a value of the access type of `width` bytes (16, 8, 4, 2 or 1).
template <class F>
__device__ __forceinline__ void with_width(uint32_t width, F&& f) {
  switch (width) {
    case 16: f(uint4{}); break;
    case 8: f(uint2{}); break;
    case 4: f(0u); break;
    case 2: f(static_cast<unsigned short>(0)); break;
    default: f(static_cast<unsigned char>(0)); break;
  }
}

// A block finished `count` work pieces of tiered layer l (all its threads call this).
__device__ __forceinline__ void mark_layer(const CopyArgs& a, uint32_t l, unsigned long long count) {
  __threadfence();  // this thread's stores of the layer are visible device-wide...
  __syncthreads();  // ...and so every thread's, before thread 0 counts them
  if (threadIdx.x == 0) {
    const unsigned long long before = atomicAdd(&a.layer_done[l], count);
    if (before + count == a.layer_work) {  // the layer's last pieces: every block has counted
      __threadfence();
      a.layer_done[l] = 0;  // the next load is ordered after this kernel on the load stream
      __threadfence_system();
      atomicExch(&a.layer_flag[l], a.seq);
    }
  }
}

// Grid: x sweeps (layer, page, chunk) work pieces, layer-major; y is the part. Without
// layer marks the blocks stride over the pieces (the grid may be larger than the work: a
// captured load graph has a fixed grid and reads n on the device; spare blocks exit).
// With them the blocks take the next piece of their part from a counter (a.sweep), so
// the pieces are started strictly in order and layer 0 lands first whatever the blocks'
// speeds; the last block to finish zeroes the counters for the next load.
// kGrouped: the build that copies pieces of several pages (a transfer with small items);
// without it the kernel keeps its registers for one item per piece (80 at unroll 4).
template <int kUnroll, bool kGrouped>
__global__ void __launch_bounds__(kCopyThreads) host_copy_kernel(CopyArgs a) {
  __shared__ PartCopy pc;
  __shared__ unsigned long long taken;
  if (threadIdx.x == 0) pc = a.parts[blockIdx.y];
  __syncthreads();
  const int64_t n = a.ids[0];
  const int64_t* host_pages = a.ids + 1;
  const int64_t* dev_pages = a.ids + 1 + n;
  const bool marks = a.layer_flag != nullptr;
  if (marks && n == 0) {  // an empty load: every layer is done at once (one block)
    __threadfence_system();
    for (uint32_t l = threadIdx.x; l < a.layers; l += blockDim.x) atomicExch(&a.layer_flag[a.layer0 + l], a.seq);
    return;
  }
  // Work pieces: per layer, the groups of pages_per_piece pages, each in `chunks` pieces.
  const uint64_t groups = (static_cast<uint64_t>(n) + pc.pages_per_piece - 1) / pc.pages_per_piece;
  const uint64_t work = groups * a.layers * pc.chunks;
  // The block's next piece (the same in every thread).
  const auto next_piece = [&](uint64_t w) -> uint64_t {
    if (!marks) return w + gridDim.x;
    __syncthreads();  // every thread has read the last one
    if (threadIdx.x == 0) taken = atomicAdd(&a.sweep[blockIdx.y], 1ULL);
    __syncthreads();
    return taken;
  };
  // A piece's layer, chunk and page ids. The ids of the next piece are read while this one
  // is copied: ids in the mapped staging slot cost a trip over PCIe, which waits behind the
  // copies' own reads while the link is busy.
  struct Piece {
    uint32_t l, chunk;
    int64_t host_page, dev_page;  // pages_per_piece 1: the page's ids
    uint64_t first;               // the piece's first page (index into the ids)
  };
  const bool grouped = kGrouped && pc.pages_per_piece > 1;
  const auto piece_of = [&](uint64_t w) {
    Piece p{};
    if (w < work) {
      const uint64_t item = w / pc.chunks;
      const uint64_t ll = item / groups;
      const uint64_t i = (item - ll * groups) * pc.pages_per_piece;
      p = Piece{a.layer0 + static_cast<uint32_t>(ll), static_cast<uint32_t>(w - item * pc.chunks),
                grouped ? 0 : host_pages[i], grouped ? 0 : dev_pages[i], i};
    }
    return p;
  };
  // A piece's pages: min(pages_per_piece, n - first); its ids (grouped pieces).
  const auto pages_in = [&](const Piece& p) {
    return static_cast<uint32_t>(min(static_cast<uint64_t>(pc.pages_per_piece), static_cast<uint64_t>(n) - p.first));
  };
  PageIds<kUnroll> cur_ids{}, next_ids{};
  uint32_t open = UINT32_MAX;  // the layer whose pieces `done` counts
  unsigned long long done = 0;
  uint64_t w = marks ? next_piece(0) : blockIdx.x;
  Piece cur = piece_of(w);
  if (grouped && w < work) read_page_ids(pc, host_pages + cur.first, dev_pages + cur.first, pages_in(cur), &cur_ids);
  while (w < work) {
    const uint64_t w_next = next_piece(w);
    const Piece next = piece_of(w_next);
    if (grouped && w_next < work) {
      read_page_ids(pc, host_pages + next.first, dev_pages + next.first, pages_in(next), &next_ids);
    }
    if (marks && cur.l != open) {
      if (done != 0) mark_layer(a, open, done);
      open = cur.l;
      done = 0;
    }
    ++done;
    const bool to_host = a.to_host != 0;
    if (grouped) {
      uint8_t* dev_layer = reinterpret_cast<uint8_t*>(pc.dev_base[cur.l]);
      uint8_t* host_layer = pc.host + cur.l * pc.host_layer;
      with_width(pc.width, [&](auto word) {
        copy_pages<decltype(word), kUnroll>(pc, dev_layer, host_layer, cur_ids, to_host);
      });
      w = w_next;
      cur = next;
      cur_ids = next_ids;
      continue;
    }
    uint8_t* dev = reinterpret_cast<uint8_t*>(pc.dev_base[cur.l]) + static_cast<uint64_t>(cur.dev_page) * pc.dev_page;
    uint8_t* host = pc.host + static_cast<uint64_t>(cur.host_page) * pc.host_page + cur.l * pc.host_layer;
    const uint32_t first = cur.chunk * chunk_units(kUnroll);
    with_width(pc.width, [&](auto word) { copy_chunk<decltype(word), kUnroll>(pc, dev, host, first, to_host); });
    w = w_next;
    cur = next;
  }
  if (!marks) return;
  if (done != 0) mark_layer(a, open, done);
  if (threadIdx.x == 0) {
    // Every block has taken its last piece before it counts itself out here.
    unsigned long long* finished = a.sweep + gridDim.y;
    if (atomicAdd(finished, 1ULL) == static_cast<unsigned long long>(gridDim.x) * gridDim.y - 1) {
      for (uint32_t p = 0; p < gridDim.y; ++p) a.sweep[p] = 0;
      *finished = 0;
    }
  }
}

}  // namespace kvp::host::cudak
