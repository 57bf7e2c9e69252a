// Kernels for gpu_host_tier_test.cpp (a .cpp test needs its kernels compiled by nvcc).
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Counts the bytes of `n` rows of `row_bytes` (rows[i] of a buffer with `stride`) that differ from `expect`.
__global__ void count_mismatches_kernel(const uint8_t* base, uint64_t stride, const int64_t* rows, int64_t n,
                                        uint64_t row_bytes, const uint8_t* expect, unsigned long long* out) {
  unsigned long long bad = 0;
  const uint64_t total = static_cast<uint64_t>(n) * row_bytes;
  for (uint64_t k = blockIdx.x * blockDim.x + threadIdx.x; k < total; k += gridDim.x * blockDim.x) {
    const uint64_t i = k / row_bytes, b = k % row_bytes;
    if (base[static_cast<uint64_t>(rows[i]) * stride + b] != expect[k]) ++bad;
  }
  atomicAdd(out, bad);
}

}  // namespace

void host_tier_test_spin(cudaStream_t stream, long long cycles) { spin_kernel<<<1, 1, 0, stream>>>(cycles); }

void host_tier_test_count_mismatches(cudaStream_t stream, const uint8_t* base, uint64_t stride, const int64_t* rows,
                                     int64_t n, uint64_t row_bytes, const uint8_t* expect, unsigned long long* out) {
  count_mismatches_kernel<<<64, 256, 0, stream>>>(base, stride, rows, n, row_bytes, expect, out);
}
