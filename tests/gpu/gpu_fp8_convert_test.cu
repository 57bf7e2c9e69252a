// The fp8 conversion instruction path of the KV kernels (cuda/fp8_convert.cuh) must give
// the scalar rule's bytes (pool/dtype_convert.hpp, which the CPU backend uses): every
// f32 bit pattern, converted as the low and as the high value of a pair.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "fp8_convert.cuh"
#include "gpu_test_env.hpp"
#include "pool/dtype_convert.hpp"

namespace {

namespace cvt = kvp::pool::cvt;

struct Mismatch {
  unsigned long long count;
  uint32_t bits, got, want;
};

// Pattern a as the low value, a ^ 0x9e3779b9 (every pattern as a does) as the high one.
__global__ void compare_every_f32(Mismatch* m) {
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < (uint64_t(1) << 32); i += stride) {
    const uint32_t a = static_cast<uint32_t>(i), b = a ^ 0x9e3779b9u;
    const float fa = __uint_as_float(a), fb = __uint_as_float(b);
    const uint32_t got = kvp::pool::dev::e4m3_pair(fa, fb);
    const uint32_t want = cvt::f32_to_e4m3(fa) | uint32_t(cvt::f32_to_e4m3(fb)) << 8;
    if (got != want && atomicAdd(&m->count, 1ull) == 0) {
      m->bits = a;
      m->got = got;
      m->want = want;
    }
  }
}

TEST(GpuFp8Convert, PairInstructionGivesTheScalarRuleForEveryF32) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  Mismatch* m = nullptr;
  ASSERT_EQ(cudaMallocManaged(&m, sizeof(Mismatch)), cudaSuccess);
  *m = Mismatch{0, 0, 0, 0};
  compare_every_f32<<<132 * 16, 256>>>(m);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(m->count, 0ull) << "first: f32 bits 0x" << std::hex << m->bits << " (and 0x" << (m->bits ^ 0x9e3779b9u)
                            << " high): pair 0x" << m->got << ", scalar rule 0x" << m->want;
  cudaFree(m);
}

}  // namespace
