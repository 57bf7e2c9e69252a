#include "plan/plan.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kvp::plan {
namespace {

using config::Attention;
using config::Config;
using config::DType;
using config::PrefixCacheKind;

uint64_t product(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

uint32_t heads_per_rank(const Config& c) {
  if (c.model.kv_heads == 0) return 0;
  return static_cast<uint32_t>(std::max(1, c.model.kv_heads / c.parallel.tp_size));
}

// NSA stores an fp8_e4m3 row as packed bytes: fp8 nope part, one fp32 scale
// per 128 nope values, bf16 rope part (656 bytes for 512 + 64).
uint64_t nsa_row_bytes(const Config& c) {
  const uint64_t lora = c.model.kv_lora_rank, rope = c.model.qk_rope_head_dim;
  if (c.pool.kv_dtype == DType::kFP8E4M3) return lora + lora / 128 * 4 + rope * 2;
  return config::kv_row_bytes(c.pool.kv_dtype, lora + rope);
}

// Indexer bytes per token per layer: fp8 key plus one fp32 scale per 128 values.
uint64_t nsa_indexer_bytes(const Config& c) {
  const uint64_t d = c.model.index_head_dim;
  return d + d / 128 * 4;
}

uint64_t label_bytes(const Config& c) {
  return uint64_t(heads_per_rank(c)) * c.model.heavy_channels * config::dtype_bytes(c.pool.kv_dtype);
}

uint64_t mha_row_bytes(const Config& c) {
  return config::kv_row_bytes(c.pool.kv_dtype, uint64_t(heads_per_rank(c)) * c.model.head_dim);
}

Status not_enough(const std::string& what) {
  return Status::config("$.pool: not enough memory: " + what +
                        "; raise memory_bytes, mem_fraction or max_total_tokens");
}

// Mamba state slots and the bytes they take out of a budget (§4.1 sizing).
struct MambaShare {
  uint64_t slots = 0;
  long double bytes = 0;
};

bool mamba_size_is_fixed(const Config& c) {
  return c.pool.mamba_cache_size.has_value() || c.prefix_cache.kind != PrefixCacheKind::kRadix;
}

uint64_t fixed_mamba_slots(const Config& c) {
  if (c.pool.mamba_cache_size) return static_cast<uint64_t>(*c.pool.mamba_cache_size);
  if (c.pool.max_running_requests) return static_cast<uint64_t>(*c.pool.max_running_requests);
  return 512;
}

}  // namespace

uint64_t bytes_per_token_per_layer(const Config& c) {
  switch (c.model.attention) {
    case Attention::kMLA: return config::kv_row_bytes(c.pool.kv_dtype, uint64_t(c.model.kv_lora_rank) + c.model.qk_rope_head_dim);
    case Attention::kNSA: return nsa_row_bytes(c) + nsa_indexer_bytes(c);
    case Attention::kDoubleSparse: return 2 * mha_row_bytes(c) + label_bytes(c);
    case Attention::kMHA:
    case Attention::kSWA:
    case Attention::kHybridLinear: return 2 * mha_row_bytes(c);
  }
  return 0;
}

Status compute_plan(const Config& c, const MemoryInfo* memory, Plan* out) {
  const config::PoolConfig& pool = c.pool;
  const Attention variant = c.model.attention;
  Plan p;
  p.page_size = static_cast<uint32_t>(pool.page_size);
  p.max_context_len = static_cast<uint32_t>(pool.max_context_len);
  p.kv_heads_per_rank = heads_per_rank(c);
  p.num_layers = static_cast<uint32_t>(c.parallel.end_layer - c.parallel.start_layer + 1);
  for (int l = c.parallel.start_layer; l <= c.parallel.end_layer; ++l) p.full_layers += c.model.layer_is_full[l] ? 1 : 0;
  if (variant == Attention::kSWA) p.swa_layers = p.num_layers - p.full_layers;
  if (variant == Attention::kHybridLinear) p.mamba_layers = p.num_layers - p.full_layers;

  // Bytes per token (the "cell size"): hybrid models count full-attention layers only.
  const uint64_t per_layer = bytes_per_token_per_layer(c);
  const uint32_t cell_layers = variant == Attention::kHybridLinear ? p.full_layers : p.num_layers;
  p.kv_bytes_per_token = per_layer * cell_layers;
  p.full_bytes_per_token = variant == Attention::kSWA ? per_layer * p.full_layers : p.kv_bytes_per_token;
  p.swa_bytes_per_token = per_layer * p.swa_layers;
  if (variant == Attention::kHybridLinear) {
    const config::MambaConfig& m = c.model.mamba;
    p.mamba_conv_bytes = product(m.conv_shape) * config::dtype_bytes(m.conv_dtype);
    p.mamba_ssm_bytes = product(m.ssm_shape) * config::dtype_bytes(m.ssm_dtype);
    p.mamba_state_bytes = uint64_t(p.mamba_layers) * (p.mamba_conv_bytes + p.mamba_ssm_bytes);
  }

  // Token capacity: from a memory budget (minus the mamba share), capped by max_total_tokens.
  MambaShare mamba;
  uint64_t tokens = pool.max_total_tokens ? static_cast<uint64_t>(*pool.max_total_tokens) : UINT64_MAX;
  if (pool.memory_bytes || pool.mem_fraction) {
    long double budget = 0;
    if (pool.memory_bytes) {
      budget = static_cast<long double>(*pool.memory_bytes);
    } else {
      if (memory == nullptr) return Status::internal("plan: mem_fraction needs the device memory");
      budget = static_cast<long double>(memory->free_bytes) -
               static_cast<long double>(memory->total_bytes) * (1.0L - *pool.mem_fraction);
      if (budget <= 0) {
        return not_enough("mem_fraction " + std::to_string(*pool.mem_fraction) + " of " +
                          std::to_string(memory->total_bytes) + " device bytes leaves nothing of the " +
                          std::to_string(memory->free_bytes) + " free");
      }
    }
    if (variant == Attention::kHybridLinear) {
      if (mamba_size_is_fixed(c)) {
        mamba.slots = fixed_mamba_slots(c);
        mamba.bytes = static_cast<long double>(mamba.slots) * p.mamba_state_bytes;
      } else {
        const long double r = pool.mamba_full_memory_ratio;
        mamba.bytes = budget * r / (1.0L + r);
        mamba.slots = static_cast<uint64_t>(std::floor(mamba.bytes / p.mamba_state_bytes));
      }
      budget -= mamba.bytes;
      if (budget <= 0) return not_enough("the mamba states take the whole budget");
    }
    tokens = std::min(tokens, static_cast<uint64_t>(std::floor(budget / p.kv_bytes_per_token)));
  }

  if (variant == Attention::kSWA) {
    // Split the all-layer token budget between the full and the window pools (§4.2).
    const long double all_layer_tokens = static_cast<long double>(tokens) * p.num_layers;
    const long double ratio = pool.swa_full_tokens_ratio;
    const uint64_t full = static_cast<uint64_t>(all_layer_tokens / (ratio * p.swa_layers + p.full_layers));
    p.swa_tokens = static_cast<uint64_t>(static_cast<long double>(full) * ratio);
    tokens = full;
  }
  tokens -= tokens % p.page_size;
  if (tokens == 0 || (variant == Attention::kSWA && p.swa_tokens == 0)) {
    return not_enough("the budget holds less than one page at " + std::to_string(p.kv_bytes_per_token) +
                      " bytes per token");
  }
  p.max_total_tokens = tokens;
  p.num_pages = tokens / p.page_size;

  if (variant == Attention::kHybridLinear && mamba.slots == 0) {
    if (mamba_size_is_fixed(c)) {
      mamba.slots = fixed_mamba_slots(c);
    } else {  // capacity given in tokens: mamba memory = ratio x KV memory
      const long double kv_bytes = static_cast<long double>(tokens) * p.kv_bytes_per_token;
      mamba.slots = static_cast<uint64_t>(std::floor(kv_bytes * pool.mamba_full_memory_ratio / p.mamba_state_bytes));
    }
  }
  p.mamba_slots = mamba.slots;
  if (variant == Attention::kHybridLinear && p.mamba_slots == 0) {
    return not_enough("no room for a single mamba state of " + std::to_string(p.mamba_state_bytes) + " bytes");
  }

  // Running requests: SGLang's default, capped by the mamba slots each request needs.
  uint64_t requests = 0;
  if (pool.max_running_requests) {
    requests = static_cast<uint64_t>(*pool.max_running_requests);
  } else {
    const uint64_t by_tokens = static_cast<uint64_t>(static_cast<long double>(tokens) / pool.max_context_len * 512);
    requests = std::min<uint64_t>(std::max<uint64_t>(by_tokens, 2048), 4096);
  }
  if (variant == Attention::kHybridLinear) {
    const uint64_t per_request = c.prefix_cache.kind == PrefixCacheKind::kRadix ? 5 : 1;
    const uint64_t cap = p.mamba_slots / per_request;
    if (pool.max_running_requests && requests > cap) {
      return Status::config("$.pool.max_running_requests: got " + std::to_string(requests) + ", expected at most " +
                            std::to_string(cap) + " (" + std::to_string(p.mamba_slots) + " mamba slots, " +
                            std::to_string(per_request) + " per request)");
    }
    requests = std::min(requests, cap);
    if (requests == 0) return not_enough("too few mamba slots for one request");
  }
  p.max_running_requests = static_cast<uint32_t>(requests);
  const bool pd_decode = pool.disaggregation_mode == config::DisaggregationMode::kDecode;
  const uint64_t pre_alloc = (pd_decode && requests <= 32) ? 2 * requests : 0;
  p.req_rows = static_cast<uint32_t>(requests + 1 + pre_alloc);  // + reserved row 0

  // Memory of the buffers as they will be allocated (padding page/slot included).
  const uint64_t rows = tokens + p.page_size;
  switch (variant) {
    case Attention::kSWA:
      p.kv_memory_bytes = (tokens + 1) * p.full_bytes_per_token + (p.swa_tokens + 1) * p.swa_bytes_per_token;
      break;
    case Attention::kNSA: {
      const uint64_t index_pages = (rows + 1) / p.page_size;
      p.kv_memory_bytes = p.num_layers * (rows * nsa_row_bytes(c) + index_pages * p.page_size * nsa_indexer_bytes(c));
      break;
    }
    case Attention::kDoubleSparse:
      p.kv_memory_bytes = p.num_layers * (rows * 2 * mha_row_bytes(c) + (tokens + 1) * label_bytes(c));
      break;
    default:
      p.kv_memory_bytes = rows * p.kv_bytes_per_token;
      break;
  }
  p.req_table_bytes = uint64_t(p.req_rows) * p.max_context_len * sizeof(int32_t);
  // Speculative decoding keeps per-draft-token states for every running request (+1 padding).
  p.mamba_intermediate_bytes = uint64_t(pool.mamba_spec_draft_tokens) * (requests + 1) * p.mamba_state_bytes;
  p.mamba_memory_bytes =
      (p.mamba_slots > 0 ? (p.mamba_slots + 1) * p.mamba_state_bytes : 0) + p.mamba_intermediate_bytes;
  p.total_memory_bytes = p.kv_memory_bytes + p.req_table_bytes + p.mamba_memory_bytes;
  *out = p;
  return Status::ok();
}

}  // namespace kvp::plan
