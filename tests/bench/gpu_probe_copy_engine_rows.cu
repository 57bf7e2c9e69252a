// gpu_probe_copy_engine_rows: how fast the copy engines move a page_first host layout
// (issue 12: page_first loads >= 52 GB/s). Standalone (no kvpool), run on a GPU machine.
// Llama-3.1-8B shape: 32 layers, 2 KiB rows (K; V alike as a second part), page 64, 64
// random pages a batch (4,096 tokens, 512 MiB). page_first keeps a token's layers together
// on the host, so a page's rows of one layer are 64 rows 64 KiB apart:
//   A: a 2D operation per (page, layer, part): 64 rows of 2 KiB, on 1, 2 or 4 streams;
//   C: a 2D operation per (layer group of G, page, part): 64 rows of G x 2 KiB, into a device
//      staging buffer (what a load with per-group completion could copy);
//   B: whole pages (4 MiB per page and part, every layer) into staging, then (second row) a
//      kernel that scatters them to the layer-first device buffers: no per-layer completion.
// GPU time from a gate (the operations are enqueued behind a spin kernel) to the last
// stream's end, medians of 5; beside it one 512 MiB pinned -> device copy.
//   nvcc -std=c++17 -arch=sm_90 -O2 tests/bench/gpu_probe_copy_engine_rows.cu -o probe && ./probe
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>
#include "gpu_probe_common.cuh"

int G = 1;


int main() {
  const size_t host_part = (size_t)HOST_PAGES * P * L * ROW;  // page_first: [token][layer][row]
  uint8_t* host = nullptr;
  CK(cudaHostAlloc(&host, PARTS * host_part + (size_t)P * L * ROW, cudaHostAllocPortable));
  std::memset(host, 0x33, PARTS * host_part);
  std::vector<uint8_t*> dev(PARTS * L);
  for (auto& d : dev) CK(cudaMalloc(&d, (size_t)DEV_PAGES * P * ROW));
  uint8_t** dev_d; CK(cudaMalloc(&dev_d, dev.size() * sizeof(void*)));
  CK(cudaMemcpy(dev_d, dev.data(), dev.size() * sizeof(void*), cudaMemcpyHostToDevice));
  uint8_t* staging; CK(cudaMalloc(&staging, (size_t)N * PARTS * P * L * ROW));
  int* dpages_d; CK(cudaMalloc(&dpages_d, N * sizeof(int)));
  std::mt19937 rng(5);
  cudaStream_t gate_s, s[4];
  CK(cudaStreamCreateWithFlags(&gate_s, cudaStreamNonBlocking));
  for (auto& x : s) CK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  cudaEvent_t gate, end[4];
  CK(cudaEventCreate(&gate));
  for (auto& e : end) CK(cudaEventCreate(&e));
  const double bytes = (double)N * PARTS * P * L * ROW;
  auto run = [&](const char* name, int streams, int mode, int reps) {
    std::vector<double> gbps;
    for (int rep = 0; rep < reps + 1; ++rep) {
      std::vector<int> hp(HOST_PAGES), dp(DEV_PAGES);
      std::iota(hp.begin(), hp.end(), 0); std::iota(dp.begin(), dp.end(), 0);
      std::shuffle(hp.begin(), hp.end(), rng); std::shuffle(dp.begin(), dp.end(), rng);
      CK(cudaMemcpy(dpages_d, dp.data(), N * sizeof(int), cudaMemcpyHostToDevice));
      CK(cudaDeviceSynchronize());
      spin<<<1, 1, 0, gate_s>>>(60LL * 1000 * 1000);
      CK(cudaEventRecord(gate, gate_s));
      for (int k = 0; k < streams; ++k) CK(cudaStreamWaitEvent(s[k], gate, 0));
      if (mode == 0 || mode == 3) {
        // A 2D operation per (layer group, part, page): 64 rows of g layers' rows (host pitch
        // L * ROW); mode 0: one layer straight into its device buffer, mode 3: G layers into staging.
        const int g = mode == 0 ? 1 : G;
        std::vector<std::vector<cudaMemcpy3DBatchOp>> ops(streams);
        int c = 0;
        for (int g0 = 0; g0 < L; g0 += g)
          for (int part = 0; part < PARTS; ++part)
            for (int i = 0; i < N; ++i) {
              cudaMemcpy3DBatchOp op{};
              op.src.type = cudaMemcpyOperandTypePointer;
              op.src.op.ptr.ptr = host + part * host_part + ((size_t)hp[i] * P * L + g0) * ROW;
              op.src.op.ptr.rowLength = L * ROW;
              op.src.op.ptr.layerHeight = P;
              op.dst.type = cudaMemcpyOperandTypePointer;
              op.dst.op.ptr.ptr = mode == 0 ? dev[part * L + g0] + (size_t)dp[i] * P * ROW
                                            : staging + (((size_t)(g0 / g) * PARTS + part) * N + i) * P * g * ROW;
              op.dst.op.ptr.rowLength = g * ROW;
              op.dst.op.ptr.layerHeight = P;
              op.extent = make_cudaExtent(g * ROW, P, 1);
              op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
              ops[c++ % streams].push_back(op);
            }
        for (int k = 0; k < streams; ++k) CK(cudaMemcpy3DBatchAsync(ops[k].size(), ops[k].data(), 0, s[k]));
      } else {
        // whole pages (all layers) of each part into staging, split over the streams, then scatter on s[0]
        std::vector<std::vector<void*>> d(streams); std::vector<std::vector<const void*>> sr(streams); std::vector<std::vector<size_t>> sz(streams);
        int c = 0;
        for (int i = 0; i < N; ++i) for (int part = 0; part < PARTS; ++part) {
          int k = c++ % streams;
          d[k].push_back(staging + ((size_t)i * PARTS + part) * P * L * ROW);
          sr[k].push_back(host + part * host_part + (size_t)hp[i] * P * L * ROW);
          sz[k].push_back((size_t)P * L * ROW);
        }
        cudaMemcpyAttributes attr{}; attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream; size_t ai = 0;
        for (int k = 0; k < streams; ++k) CK(cudaMemcpyBatchAsync(d[k].data(), sr[k].data(), sz[k].data(), d[k].size(), &attr, &ai, 1, s[k]));
        for (int k = 1; k < streams; ++k) { CK(cudaEventRecord(end[k], s[k])); CK(cudaStreamWaitEvent(s[0], end[k], 0)); }
        if (mode == 2) scatter<<<132 * 8, 256, 0, s[0]>>>(staging, dev_d, dpages_d, N);
      }
      for (int k = 0; k < streams; ++k) CK(cudaEventRecord(end[k], s[k]));
      CK(cudaDeviceSynchronize());
      float worst = 0;
      for (int k = 0; k < streams; ++k) { float ms; CK(cudaEventElapsedTime(&ms, gate, end[k])); worst = std::max(worst, ms); }
      if (rep > 0) gbps.push_back(bytes / (worst * 1e-3) / 1e9);
    }
    std::sort(gbps.begin(), gbps.end());
    std::printf("%-46s streams %d: %.2f GB/s (min %.2f max %.2f)\n", name, streams, gbps[gbps.size() / 2], gbps.front(), gbps.back());
  };
  // reference: one big pinned -> device copy
  {
    std::vector<double> g;
    for (int rep = 0; rep < 6; ++rep) {
      CK(cudaEventRecord(gate, s[0]));
      CK(cudaMemcpyAsync(staging, host, (size_t)bytes, cudaMemcpyHostToDevice, s[0]));
      CK(cudaEventRecord(end[0], s[0])); CK(cudaEventSynchronize(end[0]));
      float ms; CK(cudaEventElapsedTime(&ms, gate, end[0])); if (rep) g.push_back(bytes / (ms * 1e-3) / 1e9);
    }
    std::sort(g.begin(), g.end()); std::printf("PCIe copy 512 MiB: %.2f GB/s\n", g[g.size() / 2]);
  }
  for (int g : {2, 4, 8, 16}) {
    G = g;
    char name[80];
    std::snprintf(name, sizeof name, "C: 2D ops, 64 rows of %d KiB (G=%d) to staging", 2 * g, g);
    run(name, 1, 3, 5);
    run(name, 2, 3, 5);
  }
  for (int st : {1, 2, 4}) run("A: 2D ops, 64 rows of 2 KiB", st, 0, 5);
  for (int st : {1, 2}) run("B: page blocks to staging (CE only)", st, 1, 5);
  for (int st : {1, 2}) run("B: page blocks to staging + scatter", st, 2, 5);
  return 0;
}
