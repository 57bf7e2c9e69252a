#include "pool/kv_layout.hpp"

namespace kvp::pool {

using config::Attention;
using config::DType;

bool layer_has_kv(const config::Config& c, int layer) {
  if (c.model.attention != Attention::kHybridLinear) return true;
  return c.model.layer_is_full[static_cast<size_t>(layer)];
}

KvLayout make_layout(const config::Config& c, const plan::Plan& p) {
  KvLayout L;
  L.variant = c.model.attention;
  L.kv_dtype = c.pool.kv_dtype;
  L.size = p.max_total_tokens;
  L.page_size = p.page_size;
  L.start_layer = c.parallel.start_layer;
  L.end_layer = c.parallel.end_layer;
  const bool latent = L.variant == Attention::kMLA || L.variant == Attention::kNSA;
  if (latent) {
    L.lora = static_cast<uint32_t>(c.model.kv_lora_rank);
    L.rope = static_cast<uint32_t>(c.model.qk_rope_head_dim);
    L.elements = uint64_t(L.lora) + L.rope;
    L.form = (L.variant == Attention::kNSA && L.kv_dtype == DType::kFP8E4M3) ? RowForm::kNsaPacked : RowForm::kLatent;
  } else {
    L.heads = p.kv_heads_per_rank;
    L.head_dim = static_cast<uint32_t>(c.model.head_dim);
    L.elements = uint64_t(L.heads) * L.head_dim;
    L.form = RowForm::kHeads;
  }
  if (L.form == RowForm::kNsaPacked) {
    L.value_bytes = uint64_t(L.lora) + L.lora / 128 * 4 + uint64_t(L.rope) * 2;
  } else if (L.kv_dtype == DType::kFP4E2M1) {
    L.value_bytes = L.elements / 2;
    L.scale_bytes = L.elements / 16;
  } else {
    L.value_bytes = L.elements * config::dtype_bytes(L.kv_dtype);
  }
  // swa pools are page_size 1, so size + page_size is the full pool's size + 1.
  L.kv_rows = L.size + L.page_size;
  if (L.variant == Attention::kSWA) L.window_rows = p.swa_tokens + 1;
  if (L.variant == Attention::kDoubleSparse) {
    L.heavy = static_cast<uint32_t>(c.model.heavy_channels);
    L.label_rows = L.size + 1;
    L.label_bytes = uint64_t(L.heads) * L.heavy * config::dtype_bytes(L.kv_dtype);
  }
  if (L.variant == Attention::kNSA) {
    L.index_dim = static_cast<uint32_t>(c.model.index_head_dim);
    L.indexer_rows = (L.kv_rows + 1) / L.page_size;
    L.indexer_row_bytes = uint64_t(L.page_size) * (L.index_dim + L.index_dim / 128 * 4);
  }
  return L;
}

}  // namespace kvp::pool
