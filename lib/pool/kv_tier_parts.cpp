// The rows the host tier (lib/host/) copies between the device buffers and host
// memory, for every pool variant: what a token (or, for the nsa indexer, a page) of
// one layer consists of on the device.
#include <string>

#include "pool/kv_buffers_impl.hpp"

namespace kvp::pool {

Status KvBuffers::tier_parts(std::vector<host::TierPart>* parts, uint32_t* layers, bool window_layers) const {
  const Impl& I = *impl_;
  const KvLayout& L = I.L;
  // Tiered layers: those whose rows are token slots of the full pool. hybrid_linear's
  // mamba layers have no KV (their states live in the mamba pool). swa's window layers
  // are left out: their rows are window-pool slots, recycled as the window slides; the swa
  // host tier asks for them separately (`window_layers`) and keeps the rows of window tails
  // in a host pool of their own, indexed by window slot on the device side.
  std::vector<const LayerKv*> tiered;
  for (const LayerKv& l : I.layers) {
    if (l.has_kv && l.window == window_layers) tiered.push_back(&l);
  }
  if (tiered.empty() && window_layers) {
    return Status::config("$.host_cache: this swa pool holds no sliding-window layer (layers " +
                          std::to_string(L.start_layer) + ".." + std::to_string(L.end_layer) + ")");
  }
  if (tiered.empty()) {
    return Status::config("$.host_cache: this pool holds no layer whose KV the host tier could keep "
                          "(layers " + std::to_string(L.start_layer) + ".." + std::to_string(L.end_layer) +
                          " have no full-attention KV)");
  }
  std::vector<host::TierPart> out;
  // `heads`: page_head may split the row into this many equal pieces (0: it may not).
  const auto add = [&](RowBuffer LayerKv::*buffer, uint64_t item_bytes, uint32_t heads, bool per_page) {
    host::TierPart part;
    const RowBuffer& first = tiered.front()->*buffer;
    part.device_stride = first.row_bytes;
    part.device_rows = first.rows;
    part.item_bytes = item_bytes;
    part.per_page = per_page;
    part.heads = heads;
    for (const LayerKv* l : tiered) part.device_base.push_back((l->*buffer).data());
    out.push_back(std::move(part));
  };
  if (L.mha_like()) {
    // K and V values are [heads, head_dim]: page_head can split them per head.
    add(&LayerKv::k, L.value_bytes, L.heads, false);
    add(&LayerKv::v, L.value_bytes, L.heads, false);
  } else {
    add(&LayerKv::k, L.value_bytes, 0, false);  // mla / nsa: the latent row (V is a view of it)
  }
  if (L.scale_bytes > 0) {  // fp4: one scale byte per 16 values, a buffer of its own
    add(&LayerKv::k_scale, L.scale_bytes, 0, false);
    if (L.mha_like()) add(&LayerKv::v_scale, L.scale_bytes, 0, false);
  }
  // double_sparse labels have size + 1 rows (SGLang's shape) while K/V have size + page_size:
  // with page_size > 1 the last device page has no label rows, and HostGeometry::device_pages()
  // (the smallest limit of all parts) leaves it out of the tier.
  if (L.label_rows > 0) add(&LayerKv::label, L.label_bytes, 0, false);
  if (L.indexer_rows > 0) add(&LayerKv::indexer, L.indexer_row_bytes, 0, true);  // nsa: one row per page
  *parts = std::move(out);
  *layers = static_cast<uint32_t>(tiered.size());
  return Status::ok();
}

}  // namespace kvp::pool
