// Descriptors of the KV buffers (kvpool_get_buffer for K, V, scales,
// indexer and labels). Shapes follow SGLang's tensors; docs/buffers.md lists them.
#include <string>

#include "pool/descriptor.hpp"
#include "pool/kv_buffers_impl.hpp"

namespace kvp::pool {

using config::Attention;
using config::DType;

namespace {

const char* kind_name(int32_t kind) {
  switch (kind) {
    case KVPOOL_BUFFER_K: return "K";
    case KVPOOL_BUFFER_V: return "V";
    case KVPOOL_BUFFER_K_SCALE: return "K_SCALE";
    case KVPOOL_BUFFER_V_SCALE: return "V_SCALE";
    case KVPOOL_BUFFER_INDEXER: return "INDEXER";
    case KVPOOL_BUFFER_LABEL: return "LABEL";
    default: return "?";
  }
}

// Whether the pool's variant and dtype have this kind of buffer at all.
Status applicable(const KvLayout& L, int32_t kind) {
  const bool fp4 = L.kv_dtype == DType::kFP4E2M1;
  bool ok = false;
  switch (kind) {
    case KVPOOL_BUFFER_K:
    case KVPOOL_BUFFER_V: ok = true; break;
    case KVPOOL_BUFFER_K_SCALE: ok = fp4; break;
    case KVPOOL_BUFFER_V_SCALE: ok = fp4 && L.mha_like(); break;
    case KVPOOL_BUFFER_INDEXER: ok = L.variant == Attention::kNSA; break;
    case KVPOOL_BUFFER_LABEL: ok = L.variant == Attention::kDoubleSparse; break;
    default: return Status::unsupported("buffer kind " + std::to_string(kind) + " is not a KV buffer");
  }
  if (ok) return Status::ok();
  return Status::unsupported(std::string("a pool with attention ") + config::attention_name(L.variant) +
                             " and kv_dtype " + config::dtype_name(L.kv_dtype) + " has no " + kind_name(kind) +
                             " buffer");
}

}  // namespace

Status KvBuffers::describe(int32_t kind, int32_t layer, kvpool_buffer* out) const {
  const Impl& I = *impl_;
  const KvLayout& L = I.L;
  KVPOOL_RETURN_IF_ERROR(applicable(L, kind));
  const LayerKv* l = nullptr;
  KVPOOL_RETURN_IF_ERROR(I.find_layer(layer, &l));
  const int dev = I.backend->device_type(), id = I.backend->device_id();
  const bool fp4 = L.kv_dtype == DType::kFP4E2M1;
  // K/V element type: fp4 values and nsa packed rows are described as bytes.
  const kvpool_dtype value_dtype = (fp4 || L.form == RowForm::kNsaPacked) ? KVPOOL_DTYPE_U8 : public_dtype(L.kv_dtype);
  const auto rows = [](const RowBuffer& b) { return static_cast<int64_t>(b.rows); };
  const auto heads_desc = [&](const RowBuffer& b) {
    if (!fp4) return make_descriptor(value_dtype, b.data(), dev, id, {rows(b), L.heads, L.head_dim}, b.mem.bytes());
    // Two values per byte: halve the last dimension (a flat row if head_dim is odd).
    if (L.head_dim % 2 == 0) {
      return make_descriptor(value_dtype, b.data(), dev, id, {rows(b), L.heads, L.head_dim / 2}, b.mem.bytes());
    }
    return make_descriptor(value_dtype, b.data(), dev, id, {rows(b), int64_t(L.value_bytes)}, b.mem.bytes());
  };
  const RowBuffer& k = l->k;
  // Elements of one latent row as described (fp4: bytes; packed: bytes).
  const int64_t latent_row = static_cast<int64_t>(L.form == RowForm::kLatent && !fp4 ? L.elements : L.value_bytes);
  kvpool_buffer d;
  switch (kind) {
    case KVPOOL_BUFFER_K:
      d = L.mha_like() ? heads_desc(k) : make_descriptor(value_dtype, k.data(), dev, id, {rows(k), 1, latent_row},
                                                         k.mem.bytes());
      break;
    case KVPOOL_BUFFER_V:
      if (L.mha_like()) {
        d = heads_desc(l->v);
        break;
      }
      // The value view: the first kv_lora_rank columns of each row (fp4:
      // their bytes; nsa packed: the fp8 nope bytes), with the row's stride.
      if (fp4 && L.lora % 2 != 0) {
        return Status::unsupported("an odd kv_lora_rank has no byte-aligned fp4 value view");
      }
      d = make_descriptor(value_dtype, k.data(), dev, id, {rows(k), 1, fp4 ? L.lora / 2 : L.lora}, k.mem.bytes(),
                          latent_row);
      break;
    case KVPOOL_BUFFER_K_SCALE:
    case KVPOOL_BUFFER_V_SCALE: {
      const RowBuffer& s = kind == KVPOOL_BUFFER_K_SCALE ? l->k_scale : l->v_scale;
      d = make_descriptor(KVPOOL_DTYPE_FP8_E4M3, s.data(), dev, id, {rows(s), int64_t(L.scale_bytes)}, s.mem.bytes());
      break;
    }
    case KVPOOL_BUFFER_INDEXER: {
      const RowBuffer& b = l->indexer;
      d = make_descriptor(KVPOOL_DTYPE_U8, b.data(), dev, id, {rows(b), int64_t(L.indexer_row_bytes)}, b.mem.bytes());
      break;
    }
    default: {  // KVPOOL_BUFFER_LABEL
      const RowBuffer& b = l->label;
      d = make_descriptor(public_dtype(L.kv_dtype), b.data(), dev, id, {rows(b), L.heads, L.heavy}, b.mem.bytes());
      break;
    }
  }
  return write_descriptor(d, out);
}

}  // namespace kvp::pool
