// The parsed, validated configuration (docs/config.md documents every key).
// Everything here has already been checked for range and consistency.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/dtype.hpp"
#include "util/status.hpp"

namespace kvp::config {

enum class Attention { kMHA, kMLA, kNSA, kSWA, kHybridLinear, kDoubleSparse };
enum class DeviceKind { kCpu, kCuda };
enum class DisaggregationMode { kNone, kPrefill, kDecode };
enum class PrefixCacheKind { kRadix, kChunk, kNone };

const char* attention_name(Attention a);

struct MambaConfig {
  std::vector<int64_t> conv_shape;  // per layer and slot, e.g. [conv_dim, kernel-1]
  std::vector<int64_t> ssm_shape;   // per layer and slot, e.g. [heads, head_dim, state]
  DType conv_dtype = DType::kBF16;
  DType ssm_dtype = DType::kF32;
};

struct ModelConfig {
  std::string name;
  int num_layers = 0;
  Attention attention = Attention::kMHA;
  int kv_heads = 0;          // mha, swa, hybrid_linear, double_sparse
  int head_dim = 0;          // mha, swa, hybrid_linear, double_sparse
  int kv_lora_rank = 0;      // mla, nsa
  int qk_rope_head_dim = 0;  // mla, nsa
  int index_head_dim = 0;    // nsa
  int sliding_window = 0;    // swa
  int heavy_channels = 0;    // double_sparse
  // Per global layer: true if the layer keeps KV for every token of the context
  // (full attention); false for sliding-window (swa) or mamba (hybrid_linear) layers.
  std::vector<bool> layer_is_full;
  MambaConfig mamba;         // hybrid_linear
};

struct PoolConfig {
  DeviceKind device = DeviceKind::kCpu;
  int device_index = 0;
  DType kv_dtype = DType::kBF16;
  int page_size = 1;
  std::optional<int64_t> max_total_tokens;
  std::optional<int64_t> memory_bytes;
  std::optional<double> mem_fraction;
  std::optional<int64_t> max_running_requests;
  int64_t max_context_len = 0;
  double swa_full_tokens_ratio = 0.8;
  DisaggregationMode disaggregation_mode = DisaggregationMode::kNone;
  std::optional<int64_t> mamba_cache_size;
  double mamba_full_memory_ratio = 0.9;
  bool mamba_extra_buffer = false;
  int64_t mamba_spec_draft_tokens = 0;  // > 0: speculative intermediate state buffers
  // The KV free-page list lives in device memory (device.h allocation without
  // device-to-host copies); CUDA pools with a token or paged allocator only.
  bool device_free_list = false;
  // Every call on the pool may come from any thread: the C API serializes them on one
  // lock per pool (capi/pool_lock.hpp, docs/services.md#threading). Off: no lock at all.
  bool thread_safe = false;
};

struct ParallelConfig {
  int tp_size = 1;
  int tp_rank = 0;
  int start_layer = 0;
  int end_layer = 0;  // inclusive; defaults to num_layers - 1
};

struct PrefixCacheConfig {
  PrefixCacheKind kind = PrefixCacheKind::kRadix;
  std::string eviction = "lru";
  bool events = false;
  bool sglang_evict_rule = false;  // evict_rule "sglang": SGLang's whole over-estimate, not the shortfall
};

struct HostCacheConfig {
  bool enabled = false;
  double ratio = 2.0;
  int64_t size_bytes = 0;  // > 0 overrides ratio
  // The tier may take at most the free host memory less this (SGLang keeps 10 GiB for the rest of the process).
  int64_t headroom_bytes = int64_t(10) << 30;
  std::string layout = "layer_first";
  std::string write_policy = "write_through";
  std::string io_backend = "kernel";
  // CPU pools: report copies as landed only a few polls later, as a GPU's would be (tests).
  bool defer_completion = false;
};

struct StorageConfig {
  bool enabled = false;
  std::string backend = "file";  // "file", "memcached", "redis" or "custom" (kvpool_create_with_storage())
  std::string path;              // file: the directory
  int64_t max_bytes = 0;         // file: bound on the page files' bytes (0: none); LRU pages go first
  bool mapped_reads = true;      // file: copy cached page files from a mapping, checking as it copies
  // memcached: every server ("host:port"); redis: the primary, then replicas read from when it fails.
  std::vector<std::string> servers;
  int64_t replicas = 0;          // memcached: extra copies of a page on the next servers of the ring
  int64_t timeout_ms = 1000;     // memcached, redis: bound on one operation's wait for a server
  double retry_timeout_s = 2.0;  // memcached: an ejected server is tried again after this long
  std::string prefetch_policy = "best_effort";
  int64_t prefetch_threshold_tokens = 256;
  double prefetch_timeout_base_s = 1.0;
  double prefetch_timeout_per_ki_token_s = 0.25;
};

struct Config {
  ModelConfig model;
  PoolConfig pool;
  ParallelConfig parallel;
  PrefixCacheConfig prefix_cache;
  HostCacheConfig host_cache;
  StorageConfig storage;
};

// Parses and validates a JSON document. On failure `*out` is unchanged and the
// Status (KVPOOL_ERR_CONFIG) names the JSON path, the value and the expectation.
Status parse_config(const char* json, size_t json_len, Config* out);

}  // namespace kvp::config
