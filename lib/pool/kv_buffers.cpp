// KvBuffers: allocation of every layer's buffers and the checks the
// operations share. The operations live in kv_buffers_{write,read,move}.cpp
// and kv_describe.cpp.
#include <string>

#include "pool/kv_buffers_impl.hpp"

namespace kvp::pool {

using config::Attention;
using config::DType;

namespace {

Status allocate(backend::Backend* backend, uint64_t rows, uint64_t row_bytes, RowBuffer* out) {
  out->rows = rows;
  out->row_bytes = row_bytes;
  return backend::DeviceMemory::make(backend, static_cast<size_t>(rows * row_bytes), &out->mem);
}

}  // namespace

bool wide_of(int32_t dtype, Wide* out) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32: *out = Wide::kF32; return true;
    case KVPOOL_DTYPE_F16: *out = Wide::kF16; return true;
    case KVPOOL_DTYPE_BF16: *out = Wide::kBF16; return true;
    default: return false;
  }
}

std::string dtype_text(int32_t dtype) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32: return "f32";
    case KVPOOL_DTYPE_F16: return "f16";
    case KVPOOL_DTYPE_BF16: return "bf16";
    case KVPOOL_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case KVPOOL_DTYPE_FP8_E5M2: return "fp8_e5m2";
    case KVPOOL_DTYPE_FP4_E2M1: return "fp4_e2m1";
    case KVPOOL_DTYPE_U8: return "u8";
    case KVPOOL_DTYPE_I32: return "i32";
    case KVPOOL_DTYPE_I64: return "i64";
    default: return "dtype " + std::to_string(dtype);
  }
}

Status byte_count(size_t n, uint64_t row_bytes, const char* what, size_t* out) {
  size_t total = 0;
  if (__builtin_mul_overflow(n, static_cast<size_t>(row_bytes), &total)) {
    return Status::invalid(std::string(what) + ": " + std::to_string(n) + " rows of " + std::to_string(row_bytes) +
                           " bytes overflow size_t");
  }
  *out = total;
  return Status::ok();
}

Status bytes_error(size_t got, size_t expected, const char* name, const std::string& why) {
  return Status::invalid(std::string(name) + " has " + std::to_string(got) + " bytes, expected " +
                         std::to_string(expected) + " (" + why + ")");
}

Status KvBuffers::Impl::find_layer(int32_t layer, const LayerKv** out) const {
  if (layer < L.start_layer || layer > L.end_layer) {
    return Status::invalid("layer " + std::to_string(layer) + " is not held by this pool (it holds layers " +
                           std::to_string(L.start_layer) + ".." + std::to_string(L.end_layer) + ")");
  }
  const LayerKv& l = layers[static_cast<size_t>(layer - L.start_layer)];
  if (!l.has_kv) {
    return Status::invalid("layer_id=" + std::to_string(layer) +
                           " not in full attention layers (hybrid_linear keeps KV only for full-attention layers)");
  }
  *out = &l;
  return Status::ok();
}

Status KvBuffers::Impl::check_slots(const int64_t* slots, size_t n, uint64_t limit, const char* name) {
  for (size_t i = 0; i < n; ++i) {
    if (slots[i] < 0 || static_cast<uint64_t>(slots[i]) >= limit) {
      return Status::invalid(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(slots[i]) +
                             " is out of range [0, " + std::to_string(limit) + ")");
    }
  }
  return Status::ok();
}

const int64_t* KvBuffers::Impl::rows_for(const LayerKv& l, const int64_t* slots, size_t n) const {
  if (!l.window) return slots;
  // Window layers live in the window pool: translate through the allocator's
  // mapping (0 = no window slot: the padding row 0, as SGLang writes it).
  rows_scratch.resize(n);
  for (size_t i = 0; i < n; ++i) rows_scratch[i] = swa_mapping[static_cast<size_t>(slots[i])];
  return rows_scratch.data();
}

Status KvBuffers::Impl::ensure_device_scratch(size_t bytes) {
  if (device_scratch.bytes() >= bytes) return Status::ok();
  device_scratch.reset();
  return backend::DeviceMemory::make(backend, bytes, &device_scratch);
}

KvBuffers::KvBuffers(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KvBuffers::~KvBuffers() = default;

Status KvBuffers::make(backend::Backend* backend, const config::Config& c, const plan::Plan& p,
                       const int64_t* swa_mapping, std::unique_ptr<KvBuffers>* out) {
  auto impl = std::make_unique<Impl>();
  impl->backend = backend;
  impl->L = make_layout(c, p);
  impl->swa_mapping = swa_mapping;
  impl->host_addressable = backend->device_type() == KVPOOL_DEVICE_CPU;
  const KvLayout& L = impl->L;
  if (L.variant == Attention::kSWA && swa_mapping == nullptr) {
    return Status::internal("swa buffers need the allocator's full-to-window mapping");
  }
  for (int layer = L.start_layer; layer <= L.end_layer; ++layer) {
    LayerKv l;
    l.layer = layer;
    l.has_kv = layer_has_kv(c, layer);
    l.window = L.variant == Attention::kSWA && !c.model.layer_is_full[static_cast<size_t>(layer)];
    if (l.has_kv) {
      const uint64_t rows = l.window ? L.window_rows : L.kv_rows;
      KVPOOL_RETURN_IF_ERROR(allocate(backend, rows, L.value_bytes, &l.k));
      if (L.mha_like()) KVPOOL_RETURN_IF_ERROR(allocate(backend, rows, L.value_bytes, &l.v));
      if (L.scale_bytes > 0) {
        KVPOOL_RETURN_IF_ERROR(allocate(backend, rows, L.scale_bytes, &l.k_scale));
        if (L.mha_like()) KVPOOL_RETURN_IF_ERROR(allocate(backend, rows, L.scale_bytes, &l.v_scale));
      }
      if (L.label_rows > 0) KVPOOL_RETURN_IF_ERROR(allocate(backend, L.label_rows, L.label_bytes, &l.label));
      if (L.indexer_rows > 0) {
        KVPOOL_RETURN_IF_ERROR(allocate(backend, L.indexer_rows, L.indexer_row_bytes, &l.indexer));
      }
    }
    impl->layers.push_back(std::move(l));
  }
  out->reset(new KvBuffers(std::move(impl)));
  return Status::ok();
}

uint64_t KvBuffers::bytes() const {
  uint64_t total = 0;
  for (const LayerKv& l : impl_->layers) {
    for (const RowBuffer* b : {&l.k, &l.v, &l.k_scale, &l.v_scale, &l.label, &l.indexer}) total += b->mem.bytes();
  }
  return total;
}

}  // namespace kvp::pool
