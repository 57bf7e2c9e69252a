// gpu_bench's checks: a failed CUDA or kvpool call ends the benchmark with the call named.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "kvpool/kvpool.h"

#define CHECK_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

#define CHECK_KV(x)                                                                         \
  do {                                                                                      \
    kvpool_status s_ = (x);                                                                 \
    if (s_ != KVPOOL_OK) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, kvpool_last_error()); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)
