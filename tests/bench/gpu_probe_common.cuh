// Shared by the standalone page_first probes (gpu_probe_copy_engine_rows.cu,
// gpu_probe_mixed_load.cu): error check, the batch's shape and the staging scatter.
// Llama-3.1-8B: 32 layers, 2 KiB rows (K; V alike as a second part), page 64;
// page_first keeps a token's layers together on the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                    \
  do {                                                           \
    const cudaError_t e_ = (x);                                  \
    if (e_ != cudaSuccess) {                                     \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e_));       \
      std::exit(1);                                              \
    }                                                            \
  } while (0)

constexpr int L = 32, P = 64, PARTS = 2;
constexpr size_t ROW = 2048;
constexpr int HOST_PAGES = 512, DEV_PAGES = 256, N = 64;

__global__ void spin(long long cycles) {
  long long t = clock64();
  while (clock64() - t < cycles) {
  }
}

// staging [page i][part][token r][layer l][ROW] -> dev[part][l] + (dpage*P + r)*ROW
__global__ void scatter(const uint8_t* staging, uint8_t* const* dev, const int* dpages, int n) {
  const size_t page_bytes = (size_t)P * L * ROW;
  const size_t units = (size_t)n * PARTS * P * L * (ROW / 16);
  for (size_t u = blockIdx.x * (size_t)blockDim.x + threadIdx.x; u < units; u += (size_t)gridDim.x * blockDim.x) {
    size_t w = u % (ROW / 16);
    size_t rest = u / (ROW / 16);
    int l = rest % L;
    rest /= L;
    int r = rest % P;
    rest /= P;
    int part = rest % PARTS;
    int i = rest / PARTS;
    const uint4* src = (const uint4*)(staging + ((size_t)i * PARTS + part) * page_bytes + ((size_t)r * L + l) * ROW) + w;
    uint4* dst = (uint4*)(dev[part * L + l] + ((size_t)dpages[i] * P + r) * ROW) + w;
    *dst = *src;
  }
}
