// Small helpers shared by the stream-ordered kernels (cuda/device_*.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "device_fault.cuh"
#include "util/status.hpp"

namespace kvp::devk {

// Status of the last launch (cheap: no synchronization).
inline Status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

inline unsigned blocks_for(int64_t n, int threads, int64_t cap = 65535) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > cap) b = cap;
  return static_cast<unsigned>(b);
}

// Page arithmetic by shifts: page sizes are powers of two (the config refuses any other,
// and DevicePages::make checks it again). No division fallback: its 64-bit division
// sequences made the allocator kernels' code several times larger, and a launch pays for
// every instruction-cache line its path touches.
struct PageMath {
  int64_t size;
  int shift;  // log2(size)
  __device__ __forceinline__ int64_t div(int64_t x) const { return x >> shift; }
  __device__ __forceinline__ int64_t mod(int64_t x) const { return x & (size - 1); }
  // Pages holding x tokens (x >= 0).
  __device__ __forceinline__ int64_t pages(int64_t x) const { return div(x + size - 1); }
  // The same on offsets below 2^32 (the launchers check that the page size fits 32 bits): the
  // per-token loops then need no 64-bit arithmetic, which the GPU emulates with several instructions.
  __device__ __forceinline__ uint32_t div32(uint32_t x) const { return x >> shift; }
  __device__ __forceinline__ uint32_t mod32(uint32_t x) const { return x & static_cast<uint32_t>(size - 1); }
};

// Entry `k` of a ring list starting at `head` (head < cap, k < cap).
__device__ __forceinline__ int64_t ring_index(int64_t head, int64_t k, int64_t cap) {
  const int64_t i = head + k;
  return i >= cap ? i - cap : i;
}

__device__ __forceinline__ uint32_t bit_of(int64_t id) { return 1u << static_cast<uint32_t>(id & 31); }
__device__ __forceinline__ int64_t word_of(int64_t id) { return id >> 5; }

// Thread 0 reads the fault record for the whole block, so that every thread
// takes the same branch before a __syncthreads() (a fault raised concurrently
// by another stream's kernel must not split the block).
__device__ __forceinline__ bool block_faulted(const kvp::backend::FaultRecord* rec) {
  __shared__ int stop;
  __syncthreads();
  if (threadIdx.x == 0) stop = kvp_faulted(rec) ? 1 : 0;
  __syncthreads();
  return stop != 0;
}

}  // namespace kvp::devk
