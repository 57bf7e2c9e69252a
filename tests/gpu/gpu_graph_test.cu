// A decode step captured once in a CUDA graph and replayed (issue 10, item 3):
// 1,000 replays give exactly the slots of 1,000 eager kvalloc_decode_async calls
// on a twin pool, also when eager allocator calls run between replays; the host
// learns from kvalloc_decode_watermark how many steps fit, without a sync; a
// replay past the watermark faults the pool with a message that says so, and
// kvalloc_clear recovers.
#include <cuda_runtime.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_env.hpp"
#include "kvpool/kvpool.h"

namespace {

using Slots = std::vector<int64_t>;

// The value of kvpool_device_faults_total in the pool's metrics text, or -1 when absent.
double device_faults_metric(const kvpool* pool) {
  size_t len = 0;
  if (kvpool_metrics_text(pool, nullptr, 0, &len) != KVPOOL_ERR_BUFFER_TOO_SMALL) return -2;
  std::string text(len, '\0');
  if (kvpool_metrics_text(pool, &text[0], text.size(), &len) != KVPOOL_OK) return -3;
  const std::string name = "\nkvpool_device_faults_total ";
  const size_t at = text.find(name);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size()));
}

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x

struct PoolDeleter {
  void operator()(kvpool* p) const { kvpool_destroy(p); }
};
using PoolPtr = std::unique_ptr<kvpool, PoolDeleter>;

PoolPtr device_pool(int page, int64_t tokens) {
  const std::string json = R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {"device": "cuda:0", )"
                           R"("free_list": "device", "kv_dtype": "f32", "page_size": )" +
                           std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
                           R"(, "max_context_len": 4096}})";
  kvpool* p = nullptr;
  EXPECT_EQ(kvpool_create(json.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error();
  return PoolPtr(p);
}

// What the rest of an engine's decode graph does with the new slots: records them,
// and makes them the next step's last_locs, with one more token per request.
__global__ void finish_step(int64_t* seq, int64_t* last, const int64_t* out, int64_t* history, int64_t* counter,
                            int64_t batch) {
  const int64_t step = *counter;
  for (int64_t i = threadIdx.x; i < batch; i += blockDim.x) {
    history[step * batch + i] = out[i];
    last[i] = out[i];
    seq[i] += 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) *counter = step + 1;
}

template <class T>
struct Dev {
  T* p = nullptr;
  explicit Dev(size_t n) { EXPECT_EQ(cudaMalloc(&p, (n == 0 ? 1 : n) * sizeof(T)), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  void put(const std::vector<T>& v) { EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> get(size_t n) const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// One pool driven through device arrays: its requests' lengths and last slots, and the
// history of every step's slots.
struct Lane {
  PoolPtr pool;
  int64_t batch;
  Slots seq_host;  // lengths of the next step, as the host knows them
  Dev<int64_t> seq, last, out, history, counter;
  Lane(int page, int64_t tokens, const Slots& seq0, size_t steps)
      : pool(device_pool(page, tokens)),
        batch(static_cast<int64_t>(seq0.size())),
        seq_host(seq0),
        seq(seq0.size()),
        last(seq0.size()),
        out(seq0.size()),
        history(seq0.size() * steps),
        counter(1) {
    // Each request's tokens before the decode, so that last_locs are owned slots.
    Slots pre(seq0.size(), 0), len(seq0), last_locs(seq0.size(), -1);
    size_t total = 0;
    for (auto& s : len) total += static_cast<size_t>(--s);
    Slots slots(total);
    EXPECT_EQ(kvalloc_extend(pool.get(), pre.data(), pre.size(), len.data(), len.size(), last_locs.data(),
                             last_locs.size(), slots.data(), slots.size()),
              KVPOOL_OK)
        << kvpool_last_error();
    Slots lasts;
    size_t o = 0;
    for (int64_t s : len) {
      o += static_cast<size_t>(s);
      lasts.push_back(s == 0 ? -1 : slots[o - 1]);
    }
    seq.put(seq0);
    last.put(lasts);
    counter.put({0});
  }
  // The eager step: kvalloc_decode_async, then the same bookkeeping kernel.
  kvpool_status eager_step(cudaStream_t s) {
    const kvpool_status st = kvalloc_decode_async(pool.get(), seq_host.data(), seq_host.size(), seq.p, last.p, out.p,
                                                  nullptr, 0, s);
    if (st != KVPOOL_OK) return st;
    finish_step<<<1, 128, 0, s>>>(seq.p, last.p, out.p, history.p, counter.p, batch);
    for (auto& x : seq_host) ++x;
    return KVPOOL_OK;
  }
  Slots free_list() {
    Slots ids(1 << 16);
    size_t n = 0;
    EXPECT_EQ(kvalloc_free_list(pool.get(), KVALLOC_LIST_FREE, ids.data(), ids.size(), &n), KVPOOL_OK);
    ids.resize(n);
    return ids;
  }
};

// Captures kvalloc_decode_graph_async + the bookkeeping kernel once.
cudaGraphExec_t capture_step(Lane& l, cudaStream_t s) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(kvalloc_decode_graph_async(l.pool.get(), static_cast<size_t>(l.batch), l.seq.p, l.last.p, l.out.p, s),
            KVPOOL_OK)
      << kvpool_last_error();
  finish_step<<<1, 128, 0, s>>>(l.seq.p, l.last.p, l.out.p, l.history.p, l.counter.p, l.batch);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  return exec;
}

TEST(DecodeGraph, CapturedOnceReplayedAThousandTimesMatchesEagerCalls) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  for (int page : {1, 16}) {
    std::mt19937_64 rng(static_cast<uint64_t>(page) * 31);
    Slots seq0;
    for (int i = 0; i < 8; ++i) seq0.push_back(static_cast<int64_t>(1 + rng() % 60));
    const size_t steps = 1000, extra = 20;
    Lane graph_lane(page, 16384, seq0, steps + extra), eager(page, 16384, seq0, steps + extra);
    cudaStream_t s = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraphExec_t exec = capture_step(graph_lane, s);
    ASSERT_NE(exec, nullptr);
    size_t room = 0;
    ASSERT_EQ(kvalloc_decode_watermark(graph_lane.pool.get(), seq0.data(), seq0.size(), &room), KVPOOL_OK);
    ASSERT_GE(room, steps + extra) << "page " << page;
    for (size_t k = 0; k < steps; ++k) CUDA_OK(cudaGraphLaunch(exec, s));
    for (size_t k = 0; k < steps; ++k) ASSERT_EQ(eager.eager_step(s), KVPOOL_OK) << kvpool_last_error();
    // The host counters catch up without a sync, then agree with the device.
    ASSERT_EQ(kvalloc_decode_graph_advance(graph_lane.pool.get(), seq0.data(), seq0.size(), steps), KVPOOL_OK)
        << kvpool_last_error();
    for (auto& x : graph_lane.seq_host) x += static_cast<int64_t>(steps);
    ASSERT_EQ(kvpool_synchronize(graph_lane.pool.get(), s), KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(kvpool_synchronize(eager.pool.get(), s), KVPOOL_OK) << kvpool_last_error();
    const size_t n = seq0.size() * steps;
    ASSERT_EQ(graph_lane.history.get(n), eager.history.get(n)) << "page " << page;
    ASSERT_EQ(graph_lane.free_list(), eager.free_list()) << "page " << page;

    // Eager allocator calls between replays move the device cursor too: a page taken
    // and given back (page 1: to the back of the list), and eager decode steps.
    Dev<int64_t> taken(static_cast<size_t>(page));
    for (Lane* l : {&graph_lane, &eager}) {
      ASSERT_EQ(kvalloc_alloc_async(l->pool.get(), taken.p, static_cast<size_t>(page), s), KVPOOL_OK);
      Dev<int64_t> pages(1);
      CUDA_OK(cudaStreamSynchronize(s));
      const Slots slot = taken.get(1);
      pages.put({slot[0] / page});
      ASSERT_EQ(kvalloc_free_pages_async(l->pool.get(), pages.p, 1, s), KVPOOL_OK);
      CUDA_OK(cudaStreamSynchronize(s));
      for (int k = 0; k < 5; ++k) ASSERT_EQ(l->eager_step(s), KVPOOL_OK) << kvpool_last_error();
    }
    const Slots seq_mid = graph_lane.seq_host;
    for (size_t k = 0; k < extra - 5; ++k) {
      CUDA_OK(cudaGraphLaunch(exec, s));
      ASSERT_EQ(eager.eager_step(s), KVPOOL_OK);
    }
    ASSERT_EQ(kvalloc_decode_graph_advance(graph_lane.pool.get(), seq_mid.data(), seq_mid.size(), extra - 5), KVPOOL_OK);
    ASSERT_EQ(kvpool_synchronize(graph_lane.pool.get(), s), KVPOOL_OK) << kvpool_last_error();
    const size_t all = seq0.size() * (steps + extra);
    EXPECT_EQ(graph_lane.history.get(all), eager.history.get(all)) << "page " << page;
    EXPECT_EQ(graph_lane.free_list(), eager.free_list()) << "page " << page;
    for (Lane* l : {&graph_lane, &eager}) {
      char report[512];
      EXPECT_EQ(kvpool_check(l->pool.get(), report, sizeof(report)), KVPOOL_OK) << report;
    }
    cudaGraphExecDestroy(exec);
    cudaStreamDestroy(s);
  }
}

TEST(DecodeGraph, AReplayPastTheWatermarkFaultsCleanly) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const int page = 16;
  const Slots seq0{3, 17, 30, 1};
  Lane lane(page, 256, seq0, 64);  // 16 pages
  cudaStream_t s = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraphExec_t exec = capture_step(lane, s);
  size_t room = 0;
  ASSERT_EQ(kvalloc_decode_watermark(lane.pool.get(), seq0.data(), seq0.size(), &room), KVPOOL_OK);
  ASSERT_GT(room, 0u);
  ASSERT_LT(room, 63u);
  for (size_t k = 0; k < room; ++k) CUDA_OK(cudaGraphLaunch(exec, s));
  ASSERT_EQ(kvpool_synchronize(lane.pool.get(), s), KVPOOL_OK) << kvpool_last_error();
  // Telling the host of more steps than fit is refused (nothing ran past the watermark yet).
  EXPECT_EQ(kvalloc_decode_graph_advance(lane.pool.get(), seq0.data(), seq0.size(), room + 1),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(device_faults_metric(lane.pool.get()), 0.0);
  CUDA_OK(cudaGraphLaunch(exec, s));  // one step past the watermark
  EXPECT_EQ(kvpool_synchronize(lane.pool.get(), s), KVPOOL_ERR_DEVICE_FAULT);
  const std::string message = kvpool_last_error();
  EXPECT_EQ(device_faults_metric(lane.pool.get()), 1.0);  // raised, counted once
  EXPECT_NE(message.find("watermark"), std::string::npos) << message;
  EXPECT_EQ(message.find("internal"), std::string::npos) << message;
  // A faulted pool reports the fault to every call until kvalloc_clear.
  EXPECT_EQ(kvalloc_decode_graph_advance(lane.pool.get(), seq0.data(), seq0.size(), room), KVPOOL_ERR_DEVICE_FAULT);
  EXPECT_EQ(kvalloc_clear(lane.pool.get()), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(kvpool_synchronize(lane.pool.get(), s), KVPOOL_OK);
  EXPECT_EQ(device_faults_metric(lane.pool.get()), 1.0);  // cleared, still counted
  char report[512];
  EXPECT_EQ(kvpool_check(lane.pool.get(), report, sizeof(report)), KVPOOL_OK) << report;
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(s);
}

TEST(DecodeGraph, NeedSortPoolsRefuse) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const std::string json = R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {"device": "cuda:0", )"
                           R"("free_list": "device", "kv_dtype": "f32", "page_size": 16, "max_total_tokens": 256, )"
                           R"("max_context_len": 64, "disaggregation_mode": "decode"}})";
  kvpool* p = nullptr;
  ASSERT_EQ(kvpool_create(json.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error();
  PoolPtr pool(p);
  Dev<int64_t> seq(1), last(1), out(1);
  EXPECT_EQ(kvalloc_decode_graph_async(pool.get(), 1, seq.p, last.p, out.p, nullptr), KVPOOL_ERR_UNSUPPORTED);
}

}  // namespace
