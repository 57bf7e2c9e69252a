// The geometry of a pool's KV buffers, derived once from the config and plan:
// which buffers a layer has, how many rows, and how many bytes a row takes.
// docs/buffers.md describes the same shapes for users.
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "plan/plan.hpp"

namespace kvp::pool {

// How one token's K (or V) values sit in a row.
enum class RowForm {
  kHeads,      // mha / swa / hybrid_linear / double_sparse: [heads, head_dim] in K and in V
  kLatent,     // mla, nsa (not fp8): [kv_lora_rank + qk_rope_head_dim]; V is a view
  kNsaPacked,  // nsa fp8_e4m3: packed bytes (fp8 nope, f32 scales, bf16 rope)
};

struct KvLayout {
  config::Attention variant = config::Attention::kMHA;
  config::DType kv_dtype = config::DType::kBF16;
  RowForm form = RowForm::kHeads;
  uint64_t size = 0;  // plan.max_total_tokens
  uint32_t page_size = 1;
  int start_layer = 0;
  int end_layer = 0;

  uint32_t heads = 0, head_dim = 0;  // kHeads
  uint32_t lora = 0, rope = 0;       // kLatent / kNsaPacked

  uint64_t elements = 0;     // values of one token in K (or V, or the latent row)
  uint64_t value_bytes = 0;  // stored bytes of those values (fp4: packed; kNsaPacked: the packed row)
  uint64_t scale_bytes = 0;  // fp4: one scale byte per 16 values, in a separate buffer; else 0

  uint64_t kv_rows = 0;      // size + page_size (swa full pool: size + 1, page_size is 1)
  uint64_t window_rows = 0;  // swa window pool: swa_tokens + 1

  uint32_t heavy = 0;        // double_sparse
  uint64_t label_rows = 0;   // size + 1
  uint64_t label_bytes = 0;  // heads * heavy_channels values of kv_dtype

  uint32_t index_dim = 0;          // nsa: index_head_dim (128)
  uint64_t indexer_rows = 0;       // nsa: (size + page_size + 1) / page_size pages
  uint64_t indexer_row_bytes = 0;  // page_size * (index_dim + index_dim / 128 * 4)

  bool mha_like() const { return form == RowForm::kHeads; }
  // Bytes of one token's row in the host copy layout (values then fp4 scales).
  uint64_t host_row_bytes() const { return value_bytes + scale_bytes; }
  // Largest slot id + 1 for K/V rows (full-pool ids for swa).
  uint64_t slot_limit() const { return kv_rows; }
};

KvLayout make_layout(const config::Config& c, const plan::Plan& p);

// True if the pool keeps KV for this global layer (hybrid_linear: full layers only).
bool layer_has_kv(const config::Config& c, int layer);

}  // namespace kvp::pool
