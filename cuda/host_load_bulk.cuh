// Copies between pinned host memory and the device with Hopper's bulk copy unit
// instead of SM loads and stores: each block (one warp) moves a chunk of a (page,
// layer, part) item source -> shared memory with cp.async.bulk (completion counted on
// an mbarrier), then shared -> destination with bulk stores. The bulk unit asks PCIe for whole contiguous runs where
// 16-byte SM loads ask for them a sector at a time (SM loads reached ~91% of a
// cudaMemcpyAsync's rate in docs/performance.md). Same arguments and work split as
// host_copy_kernel; every address, stride and piece a multiple of 16 (checked by the
// host: CudaTransfer::bulk_ok_). sm_90 and later; older targets compile an empty body
// and the host never launches it there.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "host_copy.cuh"

namespace kvp::host::cudak {

constexpr uint32_t kBulkStage = 32768;  // shared-memory bytes per block: a chunk of an item

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Grid: x strides over (page, layer, chunk), y is the part; blockDim.x == 32.
__global__ void __launch_bounds__(32) host_bulk_kernel(CopyArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ PartCopy pc;
  __shared__ __align__(8) uint64_t full;
  const uint32_t lane = threadIdx.x;
  if (lane == 0) {
    pc = a.parts[blockIdx.y];
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&full)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncwarp();
  const uint64_t piece = static_cast<uint64_t>(pc.units) * pc.width;
  const uint32_t per_item = pc.rows * pc.pieces;                // pieces of one (page, layer) item
  const uint32_t per_chunk = static_cast<uint32_t>(kBulkStage / piece);  // pieces that fit the stage
  const uint32_t chunks = (per_item + per_chunk - 1) / per_chunk;
  const int64_t n = a.ids[0];
  const int64_t* host_pages = a.ids + 1;
  const int64_t* dev_pages = a.ids + 1 + n;
  const uint64_t work = static_cast<uint64_t>(n) * a.layers * chunks;
  uint32_t parity = 0;
  for (uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const uint64_t item = w / chunks;
    const uint32_t chunk = static_cast<uint32_t>(w - item * chunks);
    const uint64_t i = item / a.layers;
    const uint32_t l = a.layer0 + static_cast<uint32_t>(item - i * a.layers);
    uint8_t* dev = reinterpret_cast<uint8_t*>(pc.dev_base[l]) + static_cast<uint64_t>(dev_pages[i]) * pc.dev_page;
    uint8_t* host = pc.host + static_cast<uint64_t>(host_pages[i]) * pc.host_page + l * pc.host_layer;
    const uint32_t first = chunk * per_chunk;
    const uint32_t count = min(per_chunk, per_item - first);
    if (lane == 0) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(&full)),
                   "r"(static_cast<uint32_t>(count * piece))
                   : "memory");
    }
    __syncwarp();
    // One bulk read per piece (a row, or a head's part of it under page_head).
    for (uint32_t k = lane; k < count; k += 32) {
      const uint32_t q = first + k;
      const uint32_t r = q / pc.pieces, h = q - r * pc.pieces;
      const uint8_t* src = a.to_host ? dev + r * pc.dev_row + h * pc.dev_piece : host + r * pc.host_row + h * pc.host_piece;
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              smem_addr(stage + k * piece)),
          "l"(src), "r"(static_cast<uint32_t>(piece)), "r"(smem_addr(&full))
          : "memory");
    }
    // Wait for the chunk to land in shared memory.
    uint32_t done = 0;
    while (!done) {
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(smem_addr(&full)), "r"(parity)
          : "memory");
    }
    parity ^= 1;
    for (uint32_t k = lane; k < count; k += 32) {
      const uint32_t q = first + k;
      const uint32_t r = q / pc.pieces, h = q - r * pc.pieces;
      uint8_t* dst = a.to_host ? host + r * pc.host_row + h * pc.host_piece : dev + r * pc.dev_row + h * pc.dev_piece;
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
                   "r"(smem_addr(stage + k * piece)), "r"(static_cast<uint32_t>(piece))
                   : "memory");
    }
    // The stage is reused by the next chunk: its reads by the stores must be over.
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    __syncwarp();
  }
  // Writes to global memory complete before the kernel ends (the next layer's event).
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

}  // namespace kvp::host::cudak
