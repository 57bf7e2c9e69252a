// gpu_bench --host-seq: the host tier on the path an engine takes, through the public
// API on CUDA pools: Llama-3.1-8B (32 layers, 8 KV heads x 128, bf16) at page 64 in each
// host layout and at page 1, gpt-oss-120b's swa shape and Qwen3-Next-80B's hybrid_linear
// shape (whose trees tier their full-attention layers; swa also the window layers' rows of
// the last window). Each repetition:
//   * the backup that write_through starts when kvseq_finish caches 4,096 computed tokens:
//     host time of that call, and the copy's duration until kvhost_poll(wait);
//   * kvseq_begin of a prompt whose 4,096-token prefix is host-only: host time of the call
//     (match, device room, load-back enqueued), then the load on the GPU until the first
//     tiered layer and until every layer are usable on the compute stream
//     (kvhost_wait_layer + events), and the load's GB/s.
// One JSON line per metric with the median over the repetitions.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gpu_bench_check.cuh"
#include "kvpool/kvpool.h"

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A pool of the benchmark: `json` without its prefix_cache and host_cache sections,
// `host` more keys of host_cache (the layout), the model layers `layers`, `first_tiered`
// the first layer whose rows a load brings back.
struct TreePool {
  std::string name;
  std::string json;
  int layers;
  int first_tiered;
  double load_bytes;  // bytes a 4,096-token load-back copies (every tiered row)
  std::string host;
};

void emit_tree(const char* metric, const TreePool& t, double value, const char* unit, int reps) {
  std::printf("{\"bench\": \"host_seq\", \"metric\": \"%s\", \"pool\": \"%s\", \"median\": %.2f, \"unit\": \"%s\", "
              "\"reps\": %d, \"tokens\": 4096, \"layers\": %d}\n",
              metric, t.name.c_str(), value, unit, reps, t.layers);
  std::fflush(stdout);
}

void run_pool(const TreePool& t, int reps) {
  const std::string json = t.json + R"(, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 1.5,
      "headroom_bytes": 1073741824, "write_policy": "write_through")" + t.host + "}}";
  kvpool* pool = nullptr;
  CHECK_KV(kvpool_create(json.data(), json.size(), &pool));
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  CHECK_KV(kvhost_set_stream(pool, stream));
  cudaEvent_t start, first, last;
  cudaEventCreate(&start);
  cudaEventCreate(&first);
  cudaEventCreate(&last);
  std::vector<double> begin_us, first_ms, last_ms, finish_us, backup_ms;
  std::vector<int32_t> prompt(4097);
  for (int rep = 0; rep < reps + 2; ++rep) {
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(rep * 100000 + i);  // a new prefix each time
    uint64_t seq = 0;
    size_t cached = 0;
    CHECK_KV(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached));
    // Computes and caches the 4,096 tokens the next begin matches (a match ending inside a
    // host-only swa node would end short of a window of live tokens, and a hybrid_linear
    // request caches only with a state of every computed token): write_through backs them up.
    int64_t chunk = static_cast<int64_t>(prompt.size() - 1);
    std::vector<int64_t> slots(prompt.size() - 1);
    CHECK_KV(kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()));
    cudaStreamSynchronize(stream);
    const double t0 = now_us();
    CHECK_KV(kvseq_finish(pool, seq, prompt.size() - 1));
    const double t1 = now_us();
    CHECK_KV(kvhost_poll(pool, 1, nullptr));
    const double t2 = now_us();
    size_t evicted = 0;
    CHECK_KV(radix_evict(pool, 1 << 20, &evicted));  // host-only now
    int32_t set = 0;
    CHECK_KV(kvhost_next_load_set(pool, &set));
    cudaStreamSynchronize(stream);
    cudaEventRecord(start, stream);
    const double b0 = now_us();
    CHECK_KV(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached));
    const double b1 = now_us();
    CHECK_KV(kvhost_wait_layer(pool, set, t.first_tiered, stream));
    cudaEventRecord(first, stream);
    for (int layer = 0; layer < t.layers; ++layer) CHECK_KV(kvhost_wait_layer(pool, set, layer, stream));
    cudaEventRecord(last, stream);
    cudaEventSynchronize(last);
    kvseq_info info = KVSEQ_INFO_INIT;
    CHECK_KV(kvseq_get_info(pool, seq, &info));
    if (info.host_hit != 4096) {
      std::fprintf(stderr, "%s: expected a 4096-token host hit, got %llu\n", t.name.c_str(),
                   static_cast<unsigned long long>(info.host_hit));
      std::exit(1);
    }
    CHECK_KV(kvseq_abort(pool, seq));
    CHECK_KV(kvhost_poll(pool, 1, nullptr));
    size_t freed = 0;
    CHECK_KV(radix_evict(pool, 1 << 20, &evicted));
    CHECK_KV(kvhost_evict(pool, 1 << 20, &freed));
    if (rep < 2) continue;  // warm-up
    float f = 0, l = 0;
    cudaEventElapsedTime(&f, start, first);
    cudaEventElapsedTime(&l, start, last);
    begin_us.push_back(b1 - b0);
    first_ms.push_back(f);
    last_ms.push_back(l);
    finish_us.push_back(t1 - t0);
    backup_ms.push_back((t2 - t1) / 1000.0);
  }
  emit_tree("kvseq_finish host call, starting the 4096-token backup", t, median_of(finish_us), "us", reps);
  emit_tree("backup until kvhost_poll(wait) returns", t, median_of(backup_ms), "ms", reps);
  emit_tree("kvseq_begin host call, 4096-token host hit (load-back enqueued)", t, median_of(begin_us), "us", reps);
  emit_tree("load: first tiered layer usable on the compute stream", t, median_of(first_ms), "ms", reps);
  emit_tree("load: every layer usable", t, median_of(last_ms), "ms", reps);
  emit_tree("load GB/s (bytes loaded / every layer usable)", t, t.load_bytes / (median_of(last_ms) * 1e-3) / 1e9,
            "GB/s", reps);
  cudaEventDestroy(start);
  cudaEventDestroy(first);
  cudaEventDestroy(last);
  cudaStreamDestroy(stream);
  kvpool_destroy(pool);
}

}  // namespace

void bench_host_seq(bool quick) {
  const int reps = quick ? 5 : 20;
  const std::string llama = R"({"model": {"num_layers": 32, "kv_heads": 8, "head_dim": 128}, "pool": {"device": "cuda:0",
      "kv_dtype": "bf16", "max_total_tokens": 32768, "max_running_requests": 8, "max_context_len": 8192, "page_size": )";
  const double llama_bytes = 4096.0 * 32 * 2 * 8 * 128 * 2;
  if (std::getenv("GPU_BENCH_HOST_SEQ_TREES_ONLY") == nullptr) {
    // io_backend "direct" loads layer_first and page_first_direct through the copy engines.
    const std::pair<const char*, const char*> layouts[] = {
        {"layer_first", "kernel"}, {"layer_first", "direct"}, {"page_first", "kernel"}, {"page_first_direct", "direct"}};
    for (const auto& [layout, io] : layouts) {
      run_pool({std::string("mha page 64 ") + layout + " " + io + " (Llama-3.1-8B)", llama + "64}", 32, 0,
                llama_bytes, std::string(R"(, "layout": ")") + layout + R"(", "io_backend": ")" + io + "\""},
               reps);
    }
  }
  // Page size 1, as SGLang runs these models: a load copies one token's row per page.
  // examples/configs/gpt-oss-120b.json and qwen3-next-80b.json, sized for the benchmark.
  run_pool({"mha page 1 (Llama-3.1-8B)", llama + "1}", 32, 0, llama_bytes, ""}, reps);
  run_pool({"swa (gpt-oss-120b)",
            R"({"model": {"num_layers": 36, "attention": "swa", "kv_heads": 8, "head_dim": 64, "sliding_window": 128,
            "swa_layer_pattern": "SF"}, "pool": {"device": "cuda:0", "kv_dtype": "bf16", "page_size": 1,
            "max_total_tokens": 32768, "max_running_requests": 8, "max_context_len": 8192})",
            36, 1, (4096.0 * 18 + 128.0 * 18) * 2 * 8 * 64 * 2, ""},
           reps);
  run_pool({"hybrid_linear (Qwen3-Next-80B)",
            R"({"model": {"num_layers": 48, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 256,
            "full_attention_layers": [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47],
            "mamba": {"conv_shape": [8192, 3], "ssm_shape": [32, 128, 128], "conv_dtype": "bf16", "ssm_dtype": "f32"}},
            "pool": {"device": "cuda:0", "kv_dtype": "bf16", "page_size": 1, "max_total_tokens": 32768,
            "max_running_requests": 2, "mamba_cache_size": 12, "max_context_len": 8192})",
            48, 3, 4096.0 * 12 * 2 * 2 * 256 * 2, ""},
           reps);
}
