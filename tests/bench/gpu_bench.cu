// GPU benchmarks of the device.h fast path, measured the way the SGLang
// anchor was (tests/bench/anchors_h100.json; method in tests/bench/README.md):
//   host call  - steady_clock around the call after a device sync, no sync after;
//   GPU time   - CUDA events around the call while a spin kernel keeps the GPU
//                busy, so the interval is the GPU work the call launched;
//   bandwidth  - bytes / GPU time, next to a device-to-device copy of 2 GiB
//                measured in the same run.
// Inputs rotate over 8 pre-built sets. Each result is one JSON line with the
// median, p10, p90 and the anchor ratio; `--quick` runs a few repetitions.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_bench_check.cuh"
#include "kvpool/kvpool.h"

namespace {

using Clock = std::chrono::steady_clock;

// SGLang's own figures (the anchor files measured with SGLang's code on the same
// kinds of GPU; primary-run medians), for the ratio column. The table of the
// GPU the benchmark runs on is used.
struct Anchor {
  const char* metric;
  int page;
  int batch;
  double h100, h200;
};
const Anchor kAnchors[] = {
    {"extend_host_us", 16, 1, 65.1, 73.8},    {"extend_host_us", 16, 32, 80.6, 83.1},
    {"extend_host_us", 16, 256, 80.9, 194},   {"extend_host_us", 64, 1, 74.2, 186},
    {"extend_host_us", 64, 32, 78.3, 200},    {"extend_host_us", 64, 256, 78.3, 210},
    {"extend_gpu_us", 16, 1, 4.13, 3.94},     {"extend_gpu_us", 16, 32, 4.58, 4.54},
    {"extend_gpu_us", 16, 256, 5.79, 5.63},   {"extend_gpu_us", 64, 1, 4.26, 4.10},
    {"extend_gpu_us", 64, 32, 4.61, 4.35},    {"extend_gpu_us", 64, 256, 5.79, 5.63},
    // need_sort: SGLang's alloc_extend calls that ran merge_and_sort_free (SGLANG_H100_MORE.md 4, SGLANG_H200.md).
    {"need_sort_merge_extend_host_us", 64, 32, 197, 279},
    {"need_sort_merge_extend_host_us", 64, 256, 165, 251},
    {"need_sort_merge_extend_sync_host_us", 64, 32, 197, 279},
    {"need_sort_merge_extend_sync_host_us", 64, 256, 165, 251},
    {"free_host_us", 16, 1, 63.8, 68.0},      {"free_host_us", 16, 32, 191, 193},
    {"free_host_us", 16, 256, 185, 317},      {"free_host_us", 64, 1, 89.3, 175},
    {"free_host_us", 64, 32, 184, 323},       {"free_host_us", 64, 256, 179, 336},
    {"decode_host_us", 16, 1, 74.8, 53.8},    {"decode_host_us", 16, 64, 124, 115},
    {"decode_host_us", 16, 256, 128, 146},    {"decode_host_us", 16, 1024, 62.6, 70.2},
    {"decode_host_us", 64, 1, 45.3, 50.6},    {"decode_host_us", 64, 64, 90.1, 59.2},
    {"decode_host_us", 64, 256, 58.0, 61.6},  {"decode_host_us", 64, 1024, 64.6, 101},
    {"decode_gpu_us", 16, 1, 3.46, 3.26},     {"decode_gpu_us", 16, 64, 3.78, 3.68},
    {"decode_gpu_us", 16, 256, 3.78, 3.71},   {"decode_gpu_us", 16, 1024, 4.96, 4.99},
    {"decode_gpu_us", 64, 1, 3.46, 3.26},     {"decode_gpu_us", 64, 64, 3.62, 3.49},
    {"decode_gpu_us", 64, 256, 3.78, 3.71},   {"decode_gpu_us", 64, 1024, 4.96, 4.99},
    {"set_kv_gbps", 0, 8192, 779, 793},       {"set_kv_gbps", 0, 65536, 853, 869},
    {"set_kv_gpu_us", 0, 8192, 86.3, 84.8},   {"set_kv_gpu_us", 0, 65536, 631, 619},
    {"d2d_copy_gbps", 0, 0, 3008, 4215},
    // SGLANG_H100_MORE.md / SGLANG_H200.md (M1, M2): MLA write (Triton) and move_kv_cache, GPU time.
    {"mla_set_gpu_us", 0, 8192, 13.4, 13.4},  {"mla_set_gpu_us", 0, 65536, 82.3, 82.3},
    {"mla_set_gbps", 0, 8192, 1416, 1416},     {"mla_set_gbps", 0, 65536, 1841, 1840},
    {"move_kv_gpu_us", 0, 1024, 3693, 2889},   {"move_kv_gpu_us", 0, 8192, 29556, 23123},
    {"move_kv_gbps", 0, 1024, 72.7, 92.9},     {"move_kv_gbps", 0, 8192, 72.7, 92.9},
};

bool g_h200 = false;  // set from the device name in main()

double anchor_of(const char* metric, int page, int batch) {
  for (const Anchor& a : kAnchors) {
    if (std::strcmp(a.metric, metric) == 0 && a.page == page && a.batch == batch) return g_h200 ? a.h200 : a.h100;
  }
  return 0.0;
}

struct Stats {
  double median, p10, p90;
};

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9)};
}

// One JSON line; `lower_is_better` picks the ratio's direction (anchor / ours for times, ours / anchor for bandwidths).
void report(const char* metric, int page, int batch, const std::vector<double>& samples, const char* unit,
            bool lower_is_better, double goal) {
  const Stats s = stats_of(samples);
  const double anchor = anchor_of(metric, page, batch);
  const double ratio = anchor > 0 ? (lower_is_better ? anchor / s.median : s.median / anchor) : 0.0;
  const bool met = goal <= 0 || (lower_is_better ? s.median <= goal : s.median >= goal);
  std::printf(
      "{\"metric\": \"%s\", \"page_size\": %d, \"batch\": %d, \"median\": %.3f, \"p10\": %.3f, \"p90\": %.3f, "
      "\"unit\": \"%s\", \"n\": %zu, \"sglang_anchor\": %.3f, \"x_better_than_sglang\": %.2f, \"goal\": %.3f, "
      "\"goal_met\": %s}\n",
      metric, page, batch, s.median, s.p10, s.p90, unit, samples.size(), anchor, ratio, goal, met ? "true" : "false");
  std::fflush(stdout);
}

__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void empty_kernel() {}

// The floor of the "GPU time" method on this machine: an empty kernel measured
// exactly like the calls (events around one launch on a pre-loaded GPU).
void bench_floor(int reps, cudaStream_t stream);

template <class T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

// Times `call` (which enqueues on `stream`) both ways; `after` undoes its effect untimed.
template <class Call, class After>
void time_call(int reps, cudaStream_t stream, Call&& call, After&& after, std::vector<double>* host_us,
               std::vector<double>* gpu_us) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int r = -50; r < reps; ++r) {  // 50 warm-up calls
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto t0 = Clock::now();
    call(r);
    const auto t1 = Clock::now();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    after(r);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    if (gpu_us != nullptr) {
      spin_kernel<<<1, 1, 0, stream>>>(2000000);
      CHECK_CUDA(cudaEventRecord(a, stream));
      call(r);
      CHECK_CUDA(cudaEventRecord(b, stream));
      CHECK_CUDA(cudaEventSynchronize(b));
      after(r);
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
      if (r >= 0) gpu_us->push_back(ms * 1e3);
    }
    if (r >= 0 && host_us != nullptr) host_us->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
}

// `need_sort`: a PD-disaggregation pool (frees deferred to the release list, merged when short).
kvpool* make_pool(int page, bool device_free_list, int64_t tokens, int64_t rows, bool need_sort = false) {
  const std::string json = "{\"model\": {\"num_layers\": 1, \"kv_heads\": 8, \"head_dim\": 128}, \"pool\": "
                           "{\"device\": \"cuda\", \"kv_dtype\": \"bf16\", \"page_size\": " +
                           std::to_string(page) + ", \"max_total_tokens\": " + std::to_string(tokens) +
                           ", \"max_context_len\": 8192, \"max_running_requests\": " + std::to_string(rows) +
                           (device_free_list ? ", \"free_list\": \"device\"" : "") +
                           (need_sort ? ", \"disaggregation_mode\": \"prefill\"" : "") +
                           "}, \"prefix_cache\": {\"kind\": \"none\"}}";
  kvpool* pool = nullptr;
  CHECK_KV(kvpool_create(json.data(), json.size(), &pool));
  return pool;
}

// First slot of a freshly allocated page.
int64_t own_page(kvpool* pool, int page) {
  std::vector<int64_t> slots(static_cast<size_t>(page));
  CHECK_KV(kvalloc_alloc(pool, slots.data(), slots.size()));
  return slots[0];
}

// One input set of the anchor's extend workload: prefixes that own real pages.
struct ExtendSet {
  std::vector<int64_t> prefix, seq, last;
  int64_t *d_prefix, *d_seq, *d_last;
  size_t new_tokens;
};

// The anchor's extend workload: 8 input sets of `bs` requests whose prefixes own real pages of `pool`.
std::vector<ExtendSet> make_extend_sets(kvpool* pool, int page, int bs) {
  std::mt19937_64 rng(1234 + page * 1000 + bs);
  std::vector<ExtendSet> sets(8);
  for (ExtendSet& s : sets) {
    for (int i = 0; i < bs; ++i) {
      int64_t p = static_cast<int64_t>(rng() % 4097);
      const int kind = static_cast<int>(rng() % 100);
      if (kind < 15) p = 0;
      else if (kind < 35) p = p / page * page;
      const int64_t e = 1 + static_cast<int64_t>(rng() % 2048);
      // The prefix's last page is allocated for real, so last_loc is a valid slot.
      int64_t last = -1;
      if (p > 0) last = own_page(pool, page) + (p - 1) % page;
      s.prefix.push_back(p);
      s.seq.push_back(p + e);
      s.last.push_back(last);
    }
    s.new_tokens = 0;
    for (int i = 0; i < bs; ++i) s.new_tokens += static_cast<size_t>(s.seq[i] - s.prefix[i]);
    s.d_prefix = to_device(s.prefix);
    s.d_seq = to_device(s.seq);
    s.d_last = to_device(s.last);
  }
  return sets;
}

void free_extend_sets(std::vector<ExtendSet>* sets) {
  for (ExtendSet& s : *sets) {
    cudaFree(s.d_prefix);
    cudaFree(s.d_seq);
    cudaFree(s.d_last);
  }
}

void bench_extend(int page, int bs, int reps, cudaStream_t stream) {
  kvpool* pool = make_pool(page, true, 1 << 20, 16);
  std::vector<ExtendSet> sets = make_extend_sets(pool, page, bs);
  size_t most = 0, most_pages = 0;
  for (ExtendSet& s : sets) {
    size_t pages = 0;
    CHECK_KV(kvalloc_extend_pages(pool, s.prefix.data(), s.seq.data(), s.prefix.size(), &pages));
    most = std::max(most, s.new_tokens);
    most_pages = std::max(most_pages, pages);
  }
  int64_t *d_out, *d_pages;
  CHECK_CUDA(cudaMalloc(&d_out, most * 8));
  CHECK_CUDA(cudaMalloc(&d_pages, std::max<size_t>(1, most_pages) * 8));
  // Pages each set takes (for the free): computed once, outside the timed calls.
  std::vector<size_t> taken(8);
  for (size_t k = 0; k < 8; ++k) {
    CHECK_KV(kvalloc_extend_pages(pool, sets[k].prefix.data(), sets[k].seq.data(), sets[k].prefix.size(), &taken[k]));
  }
  auto extend = [&](int r) {
    ExtendSet& s = sets[static_cast<size_t>(r + 800) % 8];
    CHECK_KV(kvalloc_extend_async(pool, s.prefix.data(), s.seq.data(), s.prefix.size(), s.d_prefix, s.d_seq, s.d_last,
                                  d_out, s.new_tokens, d_pages, most_pages, stream));
  };
  auto free_new = [&](int r) {
    CHECK_KV(kvalloc_free_pages_async(pool, d_pages, taken[static_cast<size_t>(r + 800) % 8], stream));
  };
  std::vector<double> host, gpu;
  time_call(reps, stream, extend, free_new, &host, &gpu);
  report("extend_host_us", page, bs, host, "us", true, 8.0);
  report("extend_gpu_us", page, bs, gpu, "us", true, 4.0);
  // The free itself, host call (the extend before it is untimed).
  std::vector<double> free_host;
  for (int r = -50; r < reps; ++r) {
    extend(r);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto t0 = Clock::now();
    free_new(r);
    const auto t1 = Clock::now();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    if (r >= 0) free_host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  report("free_host_us", page, bs, free_host, "us", true, 8.0);
  CHECK_KV(kvpool_synchronize(pool, stream));
  free_extend_sets(&sets);
  cudaFree(d_out);
  cudaFree(d_pages);
  kvpool_destroy(pool);
}

// Page ids of n allocated pages whose slots are `slots` (page after page).
__global__ void first_slot_pages_kernel(const int64_t* slots, int64_t page, int64_t n, int64_t* pages) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) pages[i] = slots[i * page] / page;
}

// Moves every page of the free list to the release list (untimed set-up): the next extend
// then finds the free list short and merges, like SGLang's calls that run merge_and_sort_free.
void empty_free_list(kvpool* pool, int page, int64_t* d_slots, int64_t* d_ids, cudaStream_t stream) {
  size_t free_len = 0;
  const kvpool_status st = kvalloc_free_list(pool, KVALLOC_LIST_FREE, nullptr, 0, &free_len);
  if (st != KVPOOL_OK && st != KVPOOL_ERR_BUFFER_TOO_SMALL) CHECK_KV(st);
  if (free_len == 0) return;
  CHECK_KV(kvalloc_alloc_async(pool, d_slots, free_len * static_cast<size_t>(page), stream));
  const int64_t n = static_cast<int64_t>(free_len);
  first_slot_pages_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(d_slots, page, n, d_ids);
  CHECK_CUDA(cudaGetLastError());
  CHECK_KV(kvalloc_free_pages_async(pool, d_ids, free_len, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
}

// The pages an extend took, read off its host-array output (as the C API does for CPU pools).
void new_pages_of(const ExtendSet& s, int64_t P, const std::vector<int64_t>& slots, std::vector<int64_t>* first_slots) {
  first_slots->clear();
  size_t o = 0;
  for (size_t i = 0; i < s.prefix.size(); ++i) {
    const int64_t pre_end = (s.prefix[i] + P - 1) / P * P;
    for (int64_t t = s.prefix[i]; t < s.seq[i]; ++t, ++o) {
      if (t >= pre_end && (t - pre_end) % P == 0) first_slots->push_back(slots[o]);
    }
  }
}

// need_sort (PD disaggregation) pools: extends that merge the deferred frees first, every
// timed call (SGLANG_H100_MORE.md section 4 times the calls that ran merge_and_sort_free:
// 197 / 165 us at batch 32 / 256, page 64). Both forms: the stream-ordered call (host time
// and GPU time) and the host-array kvalloc_extend (synchronous: copies in, kernels, copy out).
void bench_need_sort_merge(int page, int bs, int reps, cudaStream_t stream) {
  const int64_t tokens = 1 << 20;
  kvpool* pool = make_pool(page, true, tokens, 16, true);
  std::vector<ExtendSet> sets = make_extend_sets(pool, page, bs);
  size_t most = 0, most_pages = 0;
  std::vector<size_t> taken(8);
  for (size_t k = 0; k < 8; ++k) {
    CHECK_KV(kvalloc_extend_pages(pool, sets[k].prefix.data(), sets[k].seq.data(), sets[k].prefix.size(), &taken[k]));
    most = std::max(most, sets[k].new_tokens);
    most_pages = std::max(most_pages, taken[k]);
  }
  int64_t *d_out, *d_pages, *d_fill, *d_fill_ids;
  CHECK_CUDA(cudaMalloc(&d_out, most * 8));
  CHECK_CUDA(cudaMalloc(&d_pages, std::max<size_t>(1, most_pages) * 8));
  CHECK_CUDA(cudaMalloc(&d_fill, static_cast<size_t>(tokens) * 8));
  CHECK_CUDA(cudaMalloc(&d_fill_ids, static_cast<size_t>(tokens / page) * 8));
  std::vector<double> async_host, async_gpu, sync_host;
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  auto extend_async = [&](const ExtendSet& s) {
    CHECK_KV(kvalloc_extend_async(pool, s.prefix.data(), s.seq.data(), s.prefix.size(), s.d_prefix, s.d_seq, s.d_last,
                                  d_out, s.new_tokens, d_pages, most_pages, stream));
  };
  auto free_new = [&](size_t k) {
    CHECK_KV(kvalloc_free_pages_async(pool, d_pages, taken[k], stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
  };
  std::vector<int64_t> host_slots(most), first_slots;
  for (int r = -20; r < reps; ++r) {
    const size_t k = static_cast<size_t>(r + 800) % 8;
    const ExtendSet& s = sets[k];
    // 1. stream-ordered call, host time (after a sync, as the anchor measures).
    empty_free_list(pool, page, d_fill, d_fill_ids, stream);
    auto t0 = Clock::now();
    extend_async(s);
    auto t1 = Clock::now();
    CHECK_CUDA(cudaStreamSynchronize(stream));
    free_new(k);
    if (r >= 0) async_host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    // 2. the same call, GPU time (merge + extend kernels behind a spin kernel).
    empty_free_list(pool, page, d_fill, d_fill_ids, stream);
    spin_kernel<<<1, 1, 0, stream>>>(2000000);
    CHECK_CUDA(cudaEventRecord(a, stream));
    extend_async(s);
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    free_new(k);
    if (r >= 0) async_gpu.push_back(ms * 1e3);
    // 3. the host-array call (synchronous by contract).
    empty_free_list(pool, page, d_fill, d_fill_ids, stream);
    t0 = Clock::now();
    CHECK_KV(kvalloc_extend(pool, s.prefix.data(), s.prefix.size(), s.seq.data(), s.seq.size(), s.last.data(),
                            s.last.size(), host_slots.data(), s.new_tokens));
    t1 = Clock::now();
    if (r >= 0) sync_host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    new_pages_of(s, page, host_slots, &first_slots);
    CHECK_KV(kvalloc_free(pool, first_slots.data(), first_slots.size()));
  }
  report("need_sort_merge_extend_host_us", page, bs, async_host, "us", true, 30.0);
  report("need_sort_merge_extend_gpu_us", page, bs, async_gpu, "us", true, 0.0);
  report("need_sort_merge_extend_sync_host_us", page, bs, sync_host, "us", true, 30.0);
  CHECK_KV(kvpool_synchronize(pool, stream));
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  free_extend_sets(&sets);
  cudaFree(d_out);
  cudaFree(d_pages);
  cudaFree(d_fill);
  cudaFree(d_fill_ids);
  kvpool_destroy(pool);
}

void bench_decode(int page, int bs, int reps, cudaStream_t stream) {
  kvpool* pool = make_pool(page, true, 1 << 20, 16);
  std::mt19937_64 rng(99 + page * 1000 + bs);
  struct DecodeSet {
    std::vector<int64_t> seq, last;
    int64_t *d_seq, *d_last;
  };
  std::vector<DecodeSet> sets(8);
  for (DecodeSet& s : sets) {
    for (int i = 0; i < bs; ++i) {
      const int64_t seq = 2 + static_cast<int64_t>(rng() % 8191);
      const int64_t held = seq - 1;  // tokens already stored; their last page is real
      s.seq.push_back(seq);
      s.last.push_back(own_page(pool, page) + (held - 1) % page);
    }
    s.d_seq = to_device(s.seq);
    s.d_last = to_device(s.last);
  }
  int64_t *d_out, *d_pages;
  CHECK_CUDA(cudaMalloc(&d_out, static_cast<size_t>(bs) * 8));
  CHECK_CUDA(cudaMalloc(&d_pages, static_cast<size_t>(bs) * 8));
  std::vector<size_t> taken(8);  // pages each set takes: computed once, outside the timed calls
  for (size_t k = 0; k < 8; ++k) {
    for (int64_t seq : sets[k].seq) taken[k] += (seq % page == 1 % page) ? 1 : 0;
  }
  auto decode = [&](int r) {
    DecodeSet& s = sets[static_cast<size_t>(r + 800) % 8];
    CHECK_KV(kvalloc_decode_async(pool, s.seq.data(), s.seq.size(), s.d_seq, s.d_last, d_out, d_pages,
                                  static_cast<size_t>(bs), stream));
  };
  auto free_new = [&](int r) {
    const size_t n = taken[static_cast<size_t>(r + 800) % 8];
    if (n > 0) CHECK_KV(kvalloc_free_pages_async(pool, d_pages, n, stream));
  };
  std::vector<double> host, gpu;
  time_call(reps, stream, decode, free_new, &host, &gpu);
  report("decode_host_us", page, bs, host, "us", true, 6.0);
  report("decode_gpu_us", page, bs, gpu, "us", true, 0.0);
  CHECK_KV(kvpool_synchronize(pool, stream));
  for (DecodeSet& s : sets) {
    cudaFree(s.d_seq);
    cudaFree(s.d_last);
  }
  cudaFree(d_out);
  cudaFree(d_pages);
  kvpool_destroy(pool);
}

// A decode step captured once (kvalloc_decode_graph_async plus a kernel that appends
// the new slots as the next step's last_locs and advances the lengths, as an engine's
// graph would) and replayed `steps` times: GPU time per replay (CUDA events around all
// replays, divided) and host time per cudaGraphLaunch; then kvalloc_decode_graph_advance.
__global__ void next_step_kernel(int64_t* seq, int64_t* last, const int64_t* out, int64_t batch) {
  for (int64_t i = threadIdx.x; i < batch; i += blockDim.x) {
    last[i] = out[i];
    seq[i] += 1;
  }
}

void bench_graph_decode(int page, int bs, int steps, cudaStream_t stream) {
  kvpool* pool = make_pool(page, true, 1 << 22, 16);
  std::vector<int64_t> seq, last;
  for (int i = 0; i < bs; ++i) {
    seq.push_back(2);  // one token stored: its page is real
    last.push_back(own_page(pool, page));
  }
  int64_t* d_seq = to_device(seq);
  int64_t* d_last = to_device(last);
  int64_t* d_out = nullptr;
  CHECK_CUDA(cudaMalloc(&d_out, static_cast<size_t>(bs) * 8));
  size_t room = 0;
  CHECK_KV(kvalloc_decode_watermark(pool, seq.data(), seq.size(), &room));
  if (room < static_cast<size_t>(steps)) {
    std::fprintf(stderr, "graph decode: only %zu steps fit\n", room);
    std::exit(1);
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  CHECK_KV(kvalloc_decode_graph_async(pool, static_cast<size_t>(bs), d_seq, d_last, d_out, stream));
  next_step_kernel<<<1, 256, 0, stream>>>(d_seq, d_last, d_out, bs);
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  CHECK_CUDA(cudaEventRecord(a, stream));
  const auto t0 = Clock::now();
  for (int k = 0; k < steps; ++k) CHECK_CUDA(cudaGraphLaunch(exec, stream));
  const double host_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / steps;
  CHECK_CUDA(cudaEventRecord(b, stream));
  CHECK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
  CHECK_KV(kvalloc_decode_graph_advance(pool, seq.data(), seq.size(), static_cast<size_t>(steps)));
  CHECK_KV(kvpool_synchronize(pool, stream));
  char text[256];
  CHECK_KV(kvpool_check(pool, text, sizeof(text)));
  std::printf("{\"metric\": \"graph_decode_step\", \"page_size\": %d, \"batch\": %d, \"steps\": %d, "
              "\"gpu_us_per_step\": %.3f, \"host_us_per_launch\": %.3f, \"check\": \"%s\"}\n",
              page, bs, steps, ms * 1e3 / steps, host_us, text);
  std::fflush(stdout);
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  cudaFree(d_seq);
  cudaFree(d_last);
  cudaFree(d_out);
  kvpool_destroy(pool);
}

void bench_floor(int reps, cudaStream_t stream) {
  std::vector<double> host, gpu;
  time_call(
      reps, stream, [&](int) { empty_kernel<<<1, 32, 0, stream>>>(); }, [](int) {}, &host, &gpu);
  report("empty_launch_host_us", 0, 0, host, "us", true, 0.0);  // the host floor of any one-launch call
  report("empty_kernel_gpu_us", 0, 0, gpu, "us", true, 0.0);
}

// Device-to-device copy bandwidth (read + write bytes), the ceiling set_kv is compared with.
double bench_d2d(int reps, cudaStream_t stream) {
  const size_t bytes = size_t(2) << 30;
  void *a, *b;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  std::vector<double> gbps;
  time_call(
      reps, stream, [&](int) { CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream)); },
      [](int) {}, nullptr, &gbps);
  for (double& v : gbps) v = 2.0 * static_cast<double>(bytes) / (v * 1e-6) / 1e9;
  report("d2d_copy_gbps", 0, 0, gbps, "GB/s", false, 0.0);
  cudaFree(a);
  cudaFree(b);
  return stats_of(gbps).median;
}

void bench_set_kv(int n, int reps, double ceiling, cudaStream_t stream) {
  kvpool* pool = make_pool(1, false, 1 << 20, 16);
  const size_t row = 8 * 128 * 2;
  std::mt19937_64 rng(7 + n);
  std::vector<int64_t> all(1 << 20);
  std::iota(all.begin(), all.end(), 1);
  std::vector<int64_t*> d_slots(4);
  for (auto& d : d_slots) {
    std::shuffle(all.begin(), all.end(), rng);
    d = to_device(std::vector<int64_t>(all.begin(), all.begin() + n));
  }
  void *k, *v;
  CHECK_CUDA(cudaMalloc(&k, n * row));
  CHECK_CUDA(cudaMalloc(&v, n * row));
  CHECK_CUDA(cudaMemset(k, 0x3c, n * row));
  CHECK_CUDA(cudaMemset(v, 0x3d, n * row));
  std::vector<double> gpu;
  time_call(
      reps, stream,
      [&](int r) {
        CHECK_KV(kvpool_set_kv_async(pool, 0, d_slots[static_cast<size_t>(r + 400) % 4], static_cast<size_t>(n), k,
                                     n * row, v, n * row, KVPOOL_DTYPE_BF16, 1.0f, 1.0f, stream));
      },
      [](int) {}, nullptr, &gpu);
  CHECK_KV(kvpool_synchronize(pool, stream));
  report("set_kv_gpu_us", 0, n, gpu, "us", true, 0.0);
  // Bytes as the anchor counts them: K and V read and written, the int64 slots read twice.
  const double bytes = 4.0 * n * row + 16.0 * n;
  std::vector<double> gbps(gpu);
  for (double& g : gbps) g = bytes / (g * 1e-6) / 1e9;
  report("set_kv_gbps", 0, n, gbps, "GB/s", false, 0.8 * ceiling);
  std::printf("{\"metric\": \"set_kv_fraction_of_d2d\", \"batch\": %d, \"value\": %.3f}\n", n,
              stats_of(gbps).median / ceiling);
  for (auto* d : d_slots) cudaFree(d);
  cudaFree(k);
  cudaFree(v);
  kvpool_destroy(pool);
}

// `sets` distinct-slot arrays of `n` random slots in [1, limit], on the device.
std::vector<int64_t*> random_slot_sets(int sets, size_t n, int64_t limit, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> all(static_cast<size_t>(limit));
  std::iota(all.begin(), all.end(), 1);
  std::vector<int64_t*> out;
  for (int k = 0; k < sets; ++k) {
    std::shuffle(all.begin(), all.end(), rng);
    out.push_back(to_device(std::vector<int64_t>(all.begin(), all.begin() + static_cast<long>(n))));
  }
  return out;
}

// One "<metric>_fraction_of_d2d" line: the bandwidth's median over the same run's copy limit.
void report_fraction(const char* what, int n, const std::vector<double>& gbps, double ceiling) {
  std::printf("{\"metric\": \"%s_fraction_of_d2d\", \"batch\": %d, \"value\": %.3f, \"d2d_gbps\": %.1f}\n", what, n,
              stats_of(gbps).median / ceiling, ceiling);
  std::fflush(stdout);
}

// Per call, kBurst calls enqueued back to back behind a spin kernel: the kernel plus the gap
// before the next one, the way an engine's per-layer KV calls run. The anchor's method (events
// around one call) also counts the launch itself, ~3 us for an empty kernel on an H100, which
// a 10 us call cannot hide.
template <class Call>
std::vector<double> time_back_to_back(int rounds, cudaStream_t stream, Call&& call) {
  constexpr int kBurst = 20;
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  std::vector<double> per_call;
  for (int r = -3; r < rounds; ++r) {
    CHECK_CUDA(cudaStreamSynchronize(stream));
    spin_kernel<<<1, 1, 0, stream>>>(2000000);
    CHECK_CUDA(cudaEventRecord(a, stream));
    for (int k = 0; k < kBurst; ++k) call(r * kBurst + k + 1000);
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (r >= 0) per_call.push_back(ms * 1e3 / kBurst);
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return per_call;
}

// Events around each call as time_call takes them, with `produce()` enqueued right before
// the first event: the caller's rows are then written just before the call reads them, as
// in an engine where the projection kernel before the KV write produced them (so they are
// in L2 if they fit).
template <class Call, class Produce>
std::vector<double> time_after_producer(int reps, cudaStream_t stream, Call&& call, Produce&& produce) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  std::vector<double> us;
  for (int r = -20; r < reps; ++r) {
    CHECK_CUDA(cudaStreamSynchronize(stream));
    spin_kernel<<<1, 1, 0, stream>>>(2000000);
    produce();
    CHECK_CUDA(cudaEventRecord(a, stream));
    call(r);
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (r >= 0) us.push_back(ms * 1e3);
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return us;
}

// One KV data row: `call(r)` moves `bytes` (read + written, as the anchor counts them).
// Reports <what>_gpu_us / _gbps / _fraction_of_d2d by the anchor's method (events around
// each call), <what>_b2b_* back to back (time_back_to_back) and, for writes (`produce`
// given), <what>_fresh_* with the caller's rows written just before (time_after_producer).
template <class Call>
void report_kv_call(const char* what, int n, double bytes, int reps, double ceiling, cudaStream_t stream,
                    Call&& call, const std::function<void()>& produce = nullptr) {
  std::vector<double> gpu;
  time_call(reps, stream, call, [](int) {}, nullptr, &gpu);
  const std::vector<double> b2b = time_back_to_back(reps / 10 < 10 ? 10 : reps / 10, stream, call);
  const std::vector<double> fresh = produce ? time_after_producer(reps, stream, call, produce) : std::vector<double>();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  for (const char* way : {"", "_b2b", "_fresh"}) {
    const std::vector<double>& us = *way == 0 ? gpu : way[1] == 'b' ? b2b : fresh;
    if (us.empty()) continue;
    const std::string name = std::string(what) + way;
    report((name + "_gpu_us").c_str(), 0, n, us, "us", true, 0.0);
    std::vector<double> gbps(us);
    for (double& g : gbps) g = bytes / (g * 1e-6) / 1e9;
    report((name + "_gbps").c_str(), 0, n, gbps, "GB/s", false, 0.8 * ceiling);
    report_fraction(name.c_str(), n, gbps, ceiling);
  }
}

// A CUDA pool of one layer from a model section and a kv_dtype (1M slots).
kvpool* make_kv_pool(const std::string& model, const char* dtype, int page) {
  const std::string json = "{\"model\": {\"num_layers\": 1, " + model + "}, \"pool\": {\"device\": \"cuda\", "
                           "\"kv_dtype\": \"" + dtype + "\", \"page_size\": " + std::to_string(page) +
                           ", \"max_total_tokens\": 1048576, \"max_context_len\": 8192, \"max_running_requests\": 16}, "
                           "\"prefix_cache\": {\"kind\": \"none\"}}";
  kvpool* pool = nullptr;
  CHECK_KV(kvpool_create(json.data(), json.size(), &pool));
  return pool;
}

// A device buffer of `bytes` filled with `byte` (bf16 0x3c3c = 0.0115: finite, normal).
void* device_filled(size_t bytes, int byte) {
  void* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, bytes));
  CHECK_CUDA(cudaMemset(p, byte, bytes));
  return p;
}

// DeepSeek-shaped latent rows (kv_lora_rank 512 + rope 64) from bf16 at n random slots:
// kvpool_set_mla_kv_async into an mla pool stored as bf16 (the anchor's row) and as
// fp8_e4m3, into an nsa pool (fp8 packed rows of 656 bytes: 512 e4m3 values, 4 block
// scales, 64 bf16 rope values), and kvpool_get_kv_async of the nsa rows back to bf16.
// Bytes: the caller's rows, the stored rows and the 8-byte slot.
void bench_mla_rows(int n, int reps, double ceiling, cudaStream_t stream) {
  const size_t un = static_cast<size_t>(n), nope_row = 512 * 2, rope_row = 64 * 2;
  const std::string mla = "\"attention\": \"mla\", \"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64";
  const std::string nsa = "\"attention\": \"nsa\", \"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64";
  std::vector<int64_t*> d_slots = random_slot_sets(4, un, 1 << 20, 11 + static_cast<uint64_t>(n));
  void* nope = device_filled(un * nope_row, 0x3c);
  void* rope = device_filled(un * rope_row, 0x3d);
  void* out = device_filled(un * (nope_row + rope_row), 0);
  const double caller = static_cast<double>(un) * (nope_row + rope_row);
  struct Stored {
    const char* what;
    const std::string& model;
    const char* dtype;
    int page;
    double row;
  };
  for (const Stored& s : {Stored{"mla_set", mla, "bf16", 1, 1152.0}, Stored{"mla_set_fp8", mla, "fp8_e4m3", 1, 576.0},
                          Stored{"nsa_set", nsa, "fp8_e4m3", 64, 656.0}}) {
    kvpool* pool = make_kv_pool(s.model, s.dtype, s.page);
    const double bytes = caller + un * (s.row + 8.0);
    report_kv_call(
        s.what, n, bytes, reps, ceiling, stream,
        [&](int r) {
          CHECK_KV(kvpool_set_mla_kv_async(pool, 0, d_slots[static_cast<size_t>(r + 400) % 4], un, nope,
                                           un * nope_row, rope, un * rope_row, KVPOOL_DTYPE_BF16, stream));
        },
        [&] {
          CHECK_CUDA(cudaMemsetAsync(nope, 0x3c, un * nope_row, stream));
          CHECK_CUDA(cudaMemsetAsync(rope, 0x3d, un * rope_row, stream));
        });
    if (std::strcmp(s.what, "nsa_set") == 0) {
      report_kv_call("nsa_get", n, bytes, reps, ceiling, stream, [&](int r) {
        CHECK_KV(kvpool_get_kv_async(pool, 0, d_slots[static_cast<size_t>(r + 400) % 4], un, out,
                                     un * (nope_row + rope_row), nullptr, 0, KVPOOL_DTYPE_BF16, stream));
      });
    }
    CHECK_KV(kvpool_synchronize(pool, stream));
    kvpool_destroy(pool);
  }
  for (auto* d : d_slots) cudaFree(d);
  cudaFree(nope);
  cudaFree(rope);
  cudaFree(out);
}

// kvpool_set_kv_async of bf16 K and V (8 heads x 128) into an fp8_e4m3 pool, divided by
// k_scale 1.5 and v_scale 0.75 on the way: bf16 rows read, e4m3 rows written, slots twice.
void bench_set_kv_fp8(int n, int reps, double ceiling, cudaStream_t stream) {
  const size_t un = static_cast<size_t>(n), row = 8 * 128 * 2;
  kvpool* pool = make_kv_pool("\"kv_heads\": 8, \"head_dim\": 128", "fp8_e4m3", 1);
  std::vector<int64_t*> d_slots = random_slot_sets(4, un, 1 << 20, 17 + static_cast<uint64_t>(n));
  void* k = device_filled(un * row, 0x3c);
  void* v = device_filled(un * row, 0x3d);
  const double bytes = static_cast<double>(un) * (2.0 * row + row + 16.0);
  report_kv_call(
      "set_kv_fp8", n, bytes, reps, ceiling, stream,
      [&](int r) {
        CHECK_KV(kvpool_set_kv_async(pool, 0, d_slots[static_cast<size_t>(r + 400) % 4], un, k, un * row, v,
                                     un * row, KVPOOL_DTYPE_BF16, 1.5f, 0.75f, stream));
      },
      [&] {
        CHECK_CUDA(cudaMemsetAsync(k, 0x3c, un * row, stream));
        CHECK_CUDA(cudaMemsetAsync(v, 0x3d, un * row, stream));
      });
  CHECK_KV(kvpool_synchronize(pool, stream));
  for (auto* d : d_slots) cudaFree(d);
  cudaFree(k);
  cudaFree(v);
  kvpool_destroy(pool);
}

// kvpool_move_kv_async on the anchor's pool (32 layers, K and V of 8 heads x 128 bf16:
// 64 buffers of 2,048-byte rows, 65,536 tokens). `chained`: each pair moves a row onto
// the previous slot of a random chain (speculative decoding's compaction), so every
// destination but one is also a source and those rows take the staged path; otherwise
// the pairs are disjoint random slots (the anchor's workload) and move directly. Bytes
// as the anchor counts them: every moved row read once and written once.
void bench_move(int n, bool chained, int reps, double ceiling, cudaStream_t stream) {
  const int64_t tokens = 65536;
  const std::string json = "{\"model\": {\"num_layers\": 32, \"kv_heads\": 8, \"head_dim\": 128}, \"pool\": "
                           "{\"device\": \"cuda\", \"kv_dtype\": \"bf16\", \"page_size\": 1, \"max_total_tokens\": " +
                           std::to_string(tokens) +
                           ", \"max_context_len\": 8192, \"max_running_requests\": 16}, \"prefix_cache\": {\"kind\": \"none\"}}";
  kvpool* pool = nullptr;
  CHECK_KV(kvpool_create(json.data(), json.size(), &pool));
  const size_t un = static_cast<size_t>(n);
  std::mt19937_64 rng(5 + static_cast<uint64_t>(n) + (chained ? 1000 : 0));
  std::vector<int64_t> all(static_cast<size_t>(tokens));
  std::iota(all.begin(), all.end(), 1);
  struct Pairs {
    int64_t *dst, *src;
  };
  std::vector<Pairs> sets;
  for (int k = 0; k < 4; ++k) {
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int64_t> dst, src;
    for (size_t i = 0; i < un; ++i) {
      dst.push_back(all[i]);
      src.push_back(chained ? all[i + 1] : all[un + i]);
    }
    sets.push_back({to_device(dst), to_device(src)});
  }
  std::vector<double> gpu;
  time_call(
      reps, stream,
      [&](int r) {
        const Pairs& p = sets[static_cast<size_t>(r + 400) % 4];
        CHECK_KV(kvpool_move_kv_async(pool, p.dst, un, p.src, un, stream));
      },
      [](int) {}, nullptr, &gpu);
  CHECK_KV(kvpool_synchronize(pool, stream));
  const char* us_metric = chained ? "move_kv_chain_gpu_us" : "move_kv_gpu_us";
  const char* bw_metric = chained ? "move_kv_chain_gbps" : "move_kv_gbps";
  report(us_metric, 0, n, gpu, "us", true, 0.0);
  const double bytes = 2.0 * static_cast<double>(un) * 64 * 2048;
  std::vector<double> gbps(gpu);
  for (double& g : gbps) g = bytes / (g * 1e-6) / 1e9;
  report(bw_metric, 0, n, gbps, "GB/s", false, chained ? 0.0 : 0.7 * ceiling);
  report_fraction(chained ? "move_kv_chain" : "move_kv", n, gbps, ceiling);
  for (Pairs& p : sets) {
    cudaFree(p.dst);
    cudaFree(p.src);
  }
  kvpool_destroy(pool);
}

// The KV data rows: the copy limit, then every KV call against it.
void bench_kv_rows(bool quick, int reps, cudaStream_t stream) {
  const double ceiling = bench_d2d(quick ? 5 : 20, stream);
  for (int n : {8192, 65536}) bench_set_kv(n, reps, ceiling, stream);
  for (int n : {8192, 65536}) bench_mla_rows(n, reps, ceiling, stream);
  for (int n : {8192, 65536}) bench_set_kv_fp8(n, reps, ceiling, stream);
  const int move_reps = quick ? 10 : 100;  // 8,192 pairs move 2 GiB per call
  for (bool chained : {false, true}) {
    for (int n : {1024, 8192}) bench_move(n, chained, move_reps, ceiling, stream);
  }
}

}  // namespace


// An integer from the environment, or `fallback` when unset.
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? fallback : std::atoi(v);
}

// --- the request path as an engine takes it (issue 10) ----------------------------
// A CUDA pool of Llama-3.1-8B's KV (32 layers, 8 KV heads x 128, bf16), 450K tokens,
// page 16, radix cache; prompts of `prompt` tokens whose first `shared` tokens are
// shared in groups of 8 (fresh tokens every round, so every round does the same
// work; the tree keeps each round's pages, so from the second round on the extend
// also evicts). Per round: kvseq_begin per request, one kvseq_extend of every whole
// prompt, 8 kvseq_decode steps, kvseq_finish per request. Host time of each call;
// the extend and decode calls are timed while a spin kernel keeps their stream busy
// (20 ms / 2 ms): a call that returned faster than the spin but found its stream
// drained (cudaStreamQuery) waited for the device, and is counted as "synced".
struct SeqPath {
  bool device_list;
  bool async;
  const char* name;
};

// GPU_BENCH_SEQ_CPU=1: the same workload on a CPU pool of one layer (the KV buffers are
// never touched), to compare the host work of both backends in one harness.
kvpool* make_seq_pool(bool device_list) {
  const bool cpu = env_int("GPU_BENCH_SEQ_CPU", 0) == 1;
  const std::string json =
      std::string("{\"model\": {\"num_layers\": ") + (cpu ? "1" : "32") +
      ", \"kv_heads\": 8, \"head_dim\": 128}, \"pool\": {\"device\": \"" + (cpu ? "cpu" : "cuda") + "\", "
      "\"kv_dtype\": \"bf16\", \"page_size\": 16, \"max_total_tokens\": 450000, \"max_context_len\": 4096, "
      "\"max_running_requests\": 1100" +
      std::string(device_list ? ", \"free_list\": \"device\"" : "") + "}, \"prefix_cache\": {\"kind\": \"radix\"}}";
  kvpool* pool = nullptr;
  CHECK_KV(kvpool_create(json.data(), json.size(), &pool));
  return pool;
}

void report_seq(const SeqPath& path, const char* metric, int bs, int prompt, const std::vector<double>& v,
                double goal, size_t synced) {
  const Stats s = stats_of(v);
  std::printf(
      "{\"metric\": \"%s\", \"path\": \"%s\", \"page_size\": 16, \"batch\": %d, \"prompt\": %d, \"median\": %.3f, "
      "\"p10\": %.3f, \"p90\": %.3f, \"unit\": \"us\", \"n\": %zu, \"synced\": %zu, \"goal\": %.3f, \"goal_met\": %s}\n",
      metric, path.name, bs, prompt, s.median, s.p10, s.p90, v.size(), synced, goal,
      goal <= 0 || s.median <= goal ? "true" : "false");
  std::fflush(stdout);
}

// True when `path` (an element of `paths`) is the one GPU_BENCH_SEQ_PATH selects, or none is selected.
bool seq_selected(const SeqPath& path, const SeqPath* paths, int only_path) {
  return only_path < 0 || &path == &paths[only_path];
}

// One pass of bench_seq's rounds: the timed run (times != NULL) or a rehearsal.
struct SeqTimes;
void run_seq_rounds(kvpool* pool, const SeqPath& path, int bs, int prompt, int shared, int rounds,
                    cudaStream_t stream, SeqTimes* times);

// GPU_BENCH_SEQ_REHEARSE=1: before the timed rounds, the same rounds run untimed on a pool of
// their own and are destroyed, so that the timed run finds the process heap grown as in a
// long-running engine (bench_seq.cpp's rehearsal); without it every round's new tree nodes
// and request buffers fault in fresh pages, which the timed calls pay.
bool seq_rehearse() {
  const char* v = std::getenv("GPU_BENCH_SEQ_REHEARSE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

struct SeqTimes {
  std::vector<double> begin_us, extend_us, decode_us, finish_us;
  size_t extend_synced = 0, decode_synced = 0;
};

void bench_seq(const SeqPath& path, int bs, int prompt, int shared, int rounds, cudaStream_t stream) {
  rounds = env_int("GPU_BENCH_SEQ_ROUNDS", rounds);
  if (seq_rehearse()) {
    kvpool* rehearsal = make_seq_pool(path.device_list);
    run_seq_rounds(rehearsal, path, bs, prompt, shared, rounds, stream, nullptr);
    CHECK_CUDA(cudaDeviceSynchronize());
    kvpool_destroy(rehearsal);
  }
  kvpool* pool = make_seq_pool(path.device_list);
  SeqTimes t;
  run_seq_rounds(pool, path, bs, prompt, shared, rounds, stream, &t);
  CHECK_CUDA(cudaDeviceSynchronize());
  char report_text[256];
  CHECK_KV(kvpool_check(pool, report_text, sizeof(report_text)));
  const double extend_goal = bs == 1 ? 15 : bs == 32 ? 150 : bs == 256 ? 1000 : 0;
  report_seq(path, "kvseq_begin_us_per_request", bs, prompt, t.begin_us, 3, 0);
  report_seq(path, "kvseq_extend_us", bs, prompt, t.extend_us, prompt == 1536 ? extend_goal : 0, t.extend_synced);
  report_seq(path, "kvseq_decode_us", bs, prompt, t.decode_us, 10, t.decode_synced);
  report_seq(path, "kvseq_finish_us_per_request", bs, prompt, t.finish_us, 3, 0);
  kvpool_destroy(pool);
}

void run_seq_rounds(kvpool* pool, const SeqPath& path, int bs, int prompt, int shared, int rounds,
                    cudaStream_t stream, SeqTimes* times) {
  SeqTimes scratch;
  SeqTimes& t = times != nullptr ? *times : scratch;
  const int warm_us = env_int("GPU_BENCH_SEQ_WARM_US", 0);
  // GPU_BENCH_SEQ_WARM_US=N: after each wait for the device, the thread spins N µs on the CPU
  // before the next timed call (a diagnostic: the first call after a wait in the CUDA driver
  // runs several times slower than the same call on a thread that kept working).
  auto device_wait = [warm_us] {
    CHECK_CUDA(cudaDeviceSynchronize());
    if (warm_us > 0) {
      const auto until = Clock::now() + std::chrono::microseconds(warm_us);
      while (Clock::now() < until) {
      }
    }
  };
  cudaStream_t s = path.async ? stream : nullptr;  // the host-array calls use the legacy default stream
  std::mt19937 rng(static_cast<unsigned>(bs * 7919 + prompt));
  std::uniform_int_distribution<int32_t> tok(0, 120000);
  int64_t* d_slots = nullptr;
  CHECK_CUDA(cudaMalloc(&d_slots, static_cast<size_t>(bs) * prompt * sizeof(int64_t)));
  std::vector<int64_t> slots(static_cast<size_t>(bs) * prompt);
  const double extend_spin_us = 20000, decode_spin_us = 2000;
  // True when the call returned before the spin ended yet the stream is idle: it waited.
  auto waited = [&](double us, double spin_us) { return us < spin_us && cudaStreamQuery(s) == cudaSuccess; };
  const long long cycles_per_us = 1980;  // H100 SXM boost clock; the spin only needs to be long
  for (int round = -1; round < rounds; ++round) {  // round -1 warms up (staging buffers grow)
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(bs));
    for (int i = 0; i < bs; ++i) {
      if (i % 8 == 0) {
        prompts[static_cast<size_t>(i)].resize(static_cast<size_t>(shared));
        for (auto& x : prompts[static_cast<size_t>(i)]) x = tok(rng);
      } else {
        prompts[static_cast<size_t>(i)].assign(prompts[static_cast<size_t>(i / 8 * 8)].begin(),
                                               prompts[static_cast<size_t>(i / 8 * 8)].begin() + shared);
      }
      while (prompts[static_cast<size_t>(i)].size() < static_cast<size_t>(prompt)) prompts[static_cast<size_t>(i)].push_back(tok(rng));
    }
    std::vector<uint64_t> ids(static_cast<size_t>(bs));
    std::vector<int64_t> chunks(static_cast<size_t>(bs));
    device_wait();
    double t_begin = 0;
    size_t total = 0;
    for (int i = 0; i < bs; ++i) {
      size_t cached = 0;
      const auto t0 = Clock::now();
      CHECK_KV(kvseq_begin(pool, prompts[static_cast<size_t>(i)].data(), static_cast<size_t>(prompt), nullptr,
                           &ids[static_cast<size_t>(i)], &cached));
      t_begin += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      chunks[static_cast<size_t>(i)] = prompt - static_cast<int64_t>(cached);
      total += static_cast<size_t>(chunks[static_cast<size_t>(i)]);
    }
    device_wait();
    spin_kernel<<<1, 1, 0, s>>>(static_cast<long long>(extend_spin_us) * cycles_per_us);
    auto t0 = Clock::now();
    if (path.async) {
      CHECK_KV(kvseq_extend_async(pool, ids.data(), ids.size(), chunks.data(), chunks.size(), d_slots, total, s));
    } else {
      CHECK_KV(kvseq_extend(pool, ids.data(), ids.size(), chunks.data(), chunks.size(), slots.data(), total));
    }
    const double t_extend = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (round >= 0) t.extend_synced += waited(t_extend, extend_spin_us) ? 1 : 0;
    std::vector<int32_t> next(static_cast<size_t>(bs));
    for (int step = 0; step < 8; ++step) {
      for (auto& x : next) x = tok(rng);
      device_wait();
      spin_kernel<<<1, 1, 0, s>>>(static_cast<long long>(decode_spin_us) * cycles_per_us);
      t0 = Clock::now();
      if (path.async) {
        CHECK_KV(kvseq_decode_async(pool, ids.data(), ids.size(), next.data(), next.size(), d_slots, ids.size(), s));
      } else {
        CHECK_KV(kvseq_decode(pool, ids.data(), ids.size(), next.data(), next.size(), slots.data(), ids.size()));
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (round >= 0) {
        t.decode_us.push_back(us);
        t.decode_synced += waited(us, decode_spin_us) ? 1 : 0;
      }
    }
    device_wait();
    double t_finish = 0;
    for (int i = 0; i < bs; ++i) {
      const auto t1 = Clock::now();
      CHECK_KV(kvseq_finish(pool, ids[static_cast<size_t>(i)], static_cast<size_t>(prompt + 8)));
      t_finish += std::chrono::duration<double, std::micro>(Clock::now() - t1).count();
    }
    if (round >= 0) {
      t.begin_us.push_back(t_begin / bs);
      t.extend_us.push_back(t_extend);
      t.finish_us.push_back(t_finish / bs);
    }
  }
  CHECK_CUDA(cudaFree(d_slots));
}

// The allocator rows: the method's floor, extend / decode (host call, GPU time, free), and
// need_sort extends that merge.
void bench_alloc_rows(int reps, cudaStream_t stream) {
  bench_floor(reps, stream);
  for (int page : {16, 64}) {
    for (int bs : {1, 32, 256}) bench_extend(page, bs, reps, stream);
    for (int bs : {1, 64, 256, 1024}) bench_decode(page, bs, reps, stream);
  }
  for (int bs : {32, 256}) bench_need_sort_merge(64, bs, reps, stream);
}

void bench_host_tier(bool quick);  // gpu_bench_host_tier.cu
void bench_host_seq(bool quick);   // gpu_bench_host_seq.cu

int main(int argc, char** argv) {
  // [--quick] [--seq | --host-tier | --host-seq | --kv | --alloc]
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 20 : 300;
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_h200 = std::strstr(prop.name, "H200") != nullptr;
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"reps\": %d, \"anchor\": \"%s\"}\n", prop.name,
              prop.multiProcessorCount, reps, g_h200 ? "SGLANG_H200" : "SGLANG_H100");
  if (argc > 1 && std::strcmp(argv[argc - 1], "--host-tier") == 0) {
    bench_host_tier(quick);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[argc - 1], "--host-seq") == 0) {
    bench_host_seq(quick);
    return 0;
  }
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (argc > 1 && std::strcmp(argv[argc - 1], "--kv") == 0) {  // only the KV data rows (d2d, set, mla, move)
    bench_kv_rows(quick, reps, stream);
    CHECK_CUDA(cudaStreamDestroy(stream));
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[argc - 1], "--alloc") == 0) {  // only the allocator rows
    bench_alloc_rows(reps, stream);
    CHECK_CUDA(cudaStreamDestroy(stream));
    return 0;
  }
  const bool seq_only = argc > 1 && std::strcmp(argv[argc - 1], "--seq") == 0;
  // GPU_BENCH_SEQ_BATCH=N runs only batch N; GPU_BENCH_SEQ_PATH=K only the K-th path below (0-2).
  const int only_batch = env_int("GPU_BENCH_SEQ_BATCH", 0);
  const int only_path = env_int("GPU_BENCH_SEQ_PATH", -1);
  const SeqPath paths[] = {{false, false, "host list, kvseq_*"},
                           {false, true, "host list, kvseq_*_async"},
                           {true, true, "device list, kvseq_*_async"}};
  for (const SeqPath& path : paths) {
    if (!seq_selected(path, paths, only_path)) continue;
    for (int bs : {1, 32, 256}) {
      if (only_batch == 0 || only_batch == bs) {
        bench_seq(path, bs, 1536, 1024, bs == 1 ? (quick ? 10 : 100) : bs == 32 ? (quick ? 4 : 20) : (quick ? 2 : 6), stream);
      }
    }
    // decode at batch 1024 (shorter prompts to fit)
    if (only_batch == 0 || only_batch == 1024) bench_seq(path, 1024, 384, 256, quick ? 2 : 4, stream);
  }
  if (only_batch == 0 && only_path < 0) {
    for (int bs : {1, 256, 1024}) bench_graph_decode(16, bs, quick ? 100 : 2000, stream);
  }
  if (seq_only) {
    CHECK_CUDA(cudaStreamDestroy(stream));
    return 0;
  }
  bench_alloc_rows(reps, stream);
  bench_kv_rows(quick, reps, stream);
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
