// gpu_probe_mixed_load: can the SMs and the copy engines together load a page_first batch
// faster than either path that keeps per-layer completion? (issue 12: page_first loads
// >= 52 GB/s; the SM kernel stops at ~51, the copy engines reach 55 only with whole pages.)
// Standalone (no kvpool), run on a GPU machine. Llama-3.1-8B shape: 32 layers, 2 KiB rows
// (K; V alike as a second part), page 64, 64 random pages a batch (4,096 tokens, 512 MiB).
// A fraction f of the pages goes to the copy engines as whole pages (every layer) into a
// device staging buffer, then a scatter kernel; the other pages go to an SM kernel that reads
// the pinned rows layer by layer (zero-copy), on a second stream, at the same time.
// Reported: GB/s of the whole batch (gate -> both streams done), when the SM kernel's layer 0
// and the copy-engine part (with its scatter) are done, medians of 7.
//   nvcc -std=c++17 -arch=sm_90 -O2 tests/bench/gpu_probe_mixed_load.cu -o probe && ./probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>
#include "gpu_probe_common.cuh"

constexpr int THREADS = 512;

// SM load of n pages, layer by layer: pieces of (layer, part, page, 8 rows) = 16 KiB taken in
// order from a counter; each thread moves two 16-byte words, both loads before the stores.
// The block that finishes layer 0's last piece records the clock in *layer0_ns.
__global__ void __launch_bounds__(THREADS) sm_load(const uint8_t* host, size_t host_part, uint8_t* const* dev,
                                                   const int* hpages, const int* dpages, int n,
                                                   unsigned* next, unsigned* done0, unsigned long long* layer0_ns) {
  constexpr int ROWS_PER_PIECE = 8;
  constexpr int WORDS = ROWS_PER_PIECE * ROW / 16;  // 1024 words = THREADS * 2
  const unsigned per_layer = (unsigned)(PARTS * n * (P / ROWS_PER_PIECE));
  const unsigned pieces = per_layer * L;
  __shared__ unsigned piece;
  for (;;) {
    if (threadIdx.x == 0) piece = atomicAdd(next, 1u);
    __syncthreads();
    const unsigned p = piece;
    __syncthreads();
    if (p >= pieces) break;
    const int l = p / per_layer; unsigned rest = p % per_layer;
    const int part = rest / (n * (P / ROWS_PER_PIECE)); rest %= n * (P / ROWS_PER_PIECE);
    const int i = rest / (P / ROWS_PER_PIECE); const int r0 = (rest % (P / ROWS_PER_PIECE)) * ROWS_PER_PIECE;
    uint4 v[WORDS / THREADS];
#pragma unroll
    for (int k = 0; k < WORDS / THREADS; ++k) {
      const int w = threadIdx.x + k * THREADS; const int r = r0 + w / (ROW / 16);
      v[k] = *((const uint4*)(host + part * host_part + (((size_t)hpages[i] * P + r) * L + l) * ROW) + w % (ROW / 16));
    }
#pragma unroll
    for (int k = 0; k < WORDS / THREADS; ++k) {
      const int w = threadIdx.x + k * THREADS; const int r = r0 + w / (ROW / 16);
      *((uint4*)(dev[part * L + l] + ((size_t)dpages[i] * P + r) * ROW) + w % (ROW / 16)) = v[k];
    }
    if (l == 0) {
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        if (atomicAdd(done0, 1u) + 1 == per_layer) {
          unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); *layer0_ns = t;
        }
      }
    }
  }
}

__global__ void stamp(unsigned long long* at) { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); *at = t; }

int main() {
  const size_t host_part = (size_t)HOST_PAGES * P * L * ROW;
  uint8_t* host = nullptr;
  CK(cudaHostAlloc(&host, PARTS * host_part, cudaHostAllocPortable | cudaHostAllocMapped));
  for (size_t i = 0; i < PARTS * host_part; i += 4096) host[i] = (uint8_t)(i >> 12);
  std::vector<uint8_t*> dev(PARTS * L);
  for (auto& d : dev) CK(cudaMalloc(&d, (size_t)DEV_PAGES * P * ROW));
  uint8_t** dev_d; CK(cudaMalloc(&dev_d, dev.size() * sizeof(void*)));
  CK(cudaMemcpy(dev_d, dev.data(), dev.size() * sizeof(void*), cudaMemcpyHostToDevice));
  uint8_t* staging; CK(cudaMalloc(&staging, (size_t)N * PARTS * P * L * ROW));
  int *hp_d, *dp_d; CK(cudaMalloc(&hp_d, N * sizeof(int))); CK(cudaMalloc(&dp_d, N * sizeof(int)));
  unsigned* counters; CK(cudaMalloc(&counters, 2 * sizeof(unsigned)));
  unsigned long long* times; CK(cudaMalloc(&times, 4 * sizeof(unsigned long long)));
  std::mt19937 rng(7);
  cudaStream_t gate_s, ce_s, sm_s;
  CK(cudaStreamCreateWithFlags(&gate_s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&ce_s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&sm_s, cudaStreamNonBlocking));
  cudaEvent_t gate, end_ce, end_sm;
  CK(cudaEventCreate(&gate)); CK(cudaEventCreate(&end_ce)); CK(cudaEventCreate(&end_sm));
  const double bytes = (double)N * PARTS * P * L * ROW;
  {
    std::vector<double> g;
    for (int rep = 0; rep < 6; ++rep) {
      CK(cudaEventRecord(gate, ce_s));
      CK(cudaMemcpyAsync(staging, host, (size_t)bytes, cudaMemcpyHostToDevice, ce_s));
      CK(cudaEventRecord(end_ce, ce_s)); CK(cudaEventSynchronize(end_ce));
      float ms; CK(cudaEventElapsedTime(&ms, gate, end_ce)); if (rep) g.push_back(bytes / (ms * 1e-3) / 1e9);
    }
    std::sort(g.begin(), g.end()); std::printf("PCIe copy 512 MiB: %.2f GB/s\n", g[g.size() / 2]);
  }
  auto run = [&](int n_ce, int blocks) {
    std::vector<double> gbps, l0, cedone;
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<int> hp(HOST_PAGES), dp(DEV_PAGES);
      std::iota(hp.begin(), hp.end(), 0); std::iota(dp.begin(), dp.end(), 0);
      std::shuffle(hp.begin(), hp.end(), rng); std::shuffle(dp.begin(), dp.end(), rng);
      // pages [0, n_ce) to the copy engines, [n_ce, N) to the SMs
      CK(cudaMemcpy(hp_d, hp.data(), N * sizeof(int), cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dp_d, dp.data(), N * sizeof(int), cudaMemcpyHostToDevice));
      CK(cudaMemset(counters, 0, 2 * sizeof(unsigned)));
      CK(cudaMemset(times, 0, 4 * sizeof(unsigned long long)));
      CK(cudaDeviceSynchronize());
      spin<<<1, 1, 0, gate_s>>>(60LL * 1000 * 1000);
      stamp<<<1, 1, 0, gate_s>>>(times + 0);
      CK(cudaEventRecord(gate, gate_s));
      CK(cudaStreamWaitEvent(ce_s, gate, 0)); CK(cudaStreamWaitEvent(sm_s, gate, 0));
      if (n_ce > 0) {
        std::vector<void*> d; std::vector<const void*> s; std::vector<size_t> z;
        for (int i = 0; i < n_ce; ++i) for (int part = 0; part < PARTS; ++part) {
          d.push_back(staging + ((size_t)i * PARTS + part) * P * L * ROW);
          s.push_back(host + part * host_part + (size_t)hp[i] * P * L * ROW);
          z.push_back((size_t)P * L * ROW);
        }
        cudaMemcpyAttributes attr{}; attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream; size_t ai = 0;
        CK(cudaMemcpyBatchAsync(d.data(), s.data(), z.data(), d.size(), &attr, &ai, 1, ce_s));
        scatter<<<132 * 2, 256, 0, ce_s>>>(staging, dev_d, dp_d, n_ce);
        stamp<<<1, 1, 0, ce_s>>>(times + 2);
      }
      if (n_ce < N)
        sm_load<<<blocks, THREADS, 0, sm_s>>>(host, host_part, dev_d, hp_d + n_ce, dp_d + n_ce, N - n_ce,
                                              counters, counters + 1, times + 1);
      CK(cudaEventRecord(end_ce, ce_s)); CK(cudaEventRecord(end_sm, sm_s));
      CK(cudaDeviceSynchronize());
      float a, b; CK(cudaEventElapsedTime(&a, gate, end_ce)); CK(cudaEventElapsedTime(&b, gate, end_sm));
      unsigned long long t[4]; CK(cudaMemcpy(t, times, sizeof t, cudaMemcpyDeviceToHost));
      if (rep == 0) continue;
      gbps.push_back(bytes / (std::max(a, b) * 1e-3) / 1e9);
      l0.push_back(t[1] ? (t[1] - t[0]) * 1e-6 : 0); cedone.push_back(t[2] ? (t[2] - t[0]) * 1e-6 : 0);
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    std::sort(gbps.begin(), gbps.end());
    std::printf("pages to copy engines %2d/%d, SM blocks %3d: %.2f GB/s (min %.2f max %.2f); SM layer 0 at %.2f ms, "
                "copy-engine part at %.2f ms\n", n_ce, N, blocks, med(gbps), gbps.front(), gbps.back(), med(l0), med(cedone));
  };
  for (int blocks : {32, 64}) run(0, blocks);
  for (int n_ce : {4, 8, 12, 16, 24, 32}) for (int blocks : {32, 64}) run(n_ce, blocks);
  run(N, 32);
  run(0, 32);
  return 0;
}
