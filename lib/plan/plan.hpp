// Sizing: bytes per token and capacities, as SGLang's model runner computes
// them at start-up (SGLANG_SEMANTICS §1.13, §4.1 and §4.2 sizing).
#pragma once

#include <cstdint>

#include "backend/device.hpp"
#include "config/config.hpp"
#include "util/status.hpp"

namespace kvp::plan {

using backend::MemoryInfo;

struct Plan {
  uint32_t page_size = 0;
  uint64_t kv_bytes_per_token = 0;
  uint64_t full_bytes_per_token = 0;
  uint64_t swa_bytes_per_token = 0;
  uint64_t max_total_tokens = 0;
  uint64_t swa_tokens = 0;
  uint64_t num_pages = 0;
  uint32_t max_running_requests = 0;
  uint32_t max_context_len = 0;
  uint32_t req_rows = 0;
  uint32_t num_layers = 0;
  uint32_t full_layers = 0;  // layers of this stage that keep full KV
  uint32_t swa_layers = 0;   // sliding-window layers of this stage
  uint32_t kv_heads_per_rank = 0;
  uint32_t mamba_layers = 0;
  uint64_t mamba_state_bytes = 0;
  uint64_t mamba_slots = 0;
  uint64_t mamba_conv_bytes = 0;          // one slot, one layer
  uint64_t mamba_ssm_bytes = 0;           // one slot, one layer
  uint64_t mamba_intermediate_bytes = 0;  // speculative buffers, all layers
  uint64_t kv_memory_bytes = 0;
  uint64_t req_table_bytes = 0;
  uint64_t mamba_memory_bytes = 0;
  uint64_t total_memory_bytes = 0;
};

// Bytes one token costs in one attention layer of the configured variant,
// dtype and tensor-parallel shard (K and V together for MHA-like variants,
// including NSA indexer bytes, fp4 scales and double-sparse labels).
uint64_t bytes_per_token_per_layer(const config::Config& c);

// Computes the plan. `memory` is needed only when the config uses mem_fraction.
Status compute_plan(const config::Config& c, const MemoryInfo* memory, Plan* out);

}  // namespace kvp::plan
