// Row movement across all layers: move_kv (speculative-decoding compaction)
// and the host copy used for retraction (SGLang's get_cpu_copy /
// load_cpu_copy), both as batched backend row copies.
#include <algorithm>
#include <string>

#include "pool/kv_buffers_impl.hpp"

namespace kvp::pool {

using config::Attention;

namespace {

// SGLang's cpu_offloading_chunk_size: host copies move at most this many slots per batch.
constexpr size_t kHostChunk = 8192;

// A buffer's values and, for fp4, the scales that travel with them.
struct RowPart {
  const RowBuffer* values;
  const RowBuffer* scales;  // absent buffer unless fp4
};

Status need_host_copy(const KvLayout& L) {
  if (L.variant == Attention::kMHA || L.variant == Attention::kHybridLinear || L.variant == Attention::kMLA) {
    return Status::ok();
  }
  return Status::unsupported(std::string("host copies need attention mha, hybrid_linear or mla; the pool's is ") +
                             config::attention_name(L.variant));
}

template <class Fn>
Status for_each_part(const std::vector<LayerKv>& layers, bool mha_like, Fn&& fn) {
  for (const LayerKv& l : layers) {
    if (!l.has_kv) continue;
    KVPOOL_RETURN_IF_ERROR(fn(RowPart{&l.k, &l.k_scale}));
    if (mha_like) KVPOOL_RETURN_IF_ERROR(fn(RowPart{&l.v, &l.v_scale}));
  }
  return Status::ok();
}

}  // namespace

uint64_t KvBuffers::Impl::move_limit() const {
  // Labels have size + 1 rows only, so double_sparse moves stay below that.
  return L.label_rows > 0 ? std::min(L.kv_rows, L.label_rows) : L.kv_rows;
}

Status KvBuffers::move_kv(const int64_t* dst, const int64_t* src, size_t n) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  if (L.variant == Attention::kSWA) {
    return Status::unsupported("move_kv is not available for swa pools (window rows are not slot-indexed)");
  }
  const uint64_t limit = I.move_limit();
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(dst, n, limit, "dst"));
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(src, n, limit, "src"));
  if (n == 0) return Status::ok();
  uint64_t widest = std::max({L.value_bytes, L.scale_bytes, L.label_bytes});
  size_t scratch = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, widest, "move_kv scratch", &scratch));
  KVPOOL_RETURN_IF_ERROR(I.ensure_device_scratch(scratch));
  void* tmp = I.device_scratch.data();
  // Gather every source row before writing any destination row, so src and
  // dst sets may overlap (a permutation cycle included).
  for (const LayerKv& l : I.layers) {
    if (!l.has_kv) continue;
    for (const RowBuffer* b : {&l.k, &l.v, &l.k_scale, &l.v_scale, &l.label}) {
      if (!b->present()) continue;
      const size_t rb = b->row_bytes;
      KVPOOL_RETURN_IF_ERROR(I.backend->copy_rows({tmp, rb, nullptr, b->data(), rb, src, rb, n}));
      KVPOOL_RETURN_IF_ERROR(I.backend->copy_rows({b->data(), rb, dst, tmp, rb, nullptr, rb, n}));
    }
  }
  return Status::ok();
}

Status KvBuffers::host_copy_bytes(size_t n, size_t* bytes) const {
  const KvLayout& L = impl_->L;
  KVPOOL_RETURN_IF_ERROR(need_host_copy(L));
  uint64_t per_slot = 0;
  for (const LayerKv& l : impl_->layers) {
    if (l.has_kv) per_slot += (L.mha_like() ? 2 : 1) * L.host_row_bytes();
  }
  return byte_count(n, per_slot, "host copy", bytes);
}

Status KvBuffers::copy_to_host(const int64_t* slots, size_t n, void* host, size_t host_bytes) const {
  const Impl& I = *impl_;
  const KvLayout& L = I.L;
  size_t expected = 0;
  KVPOOL_RETURN_IF_ERROR(host_copy_bytes(n, &expected));
  KVPOOL_RETURN_IF_ERROR(check_bytes(host_bytes, expected, "host",
                                     [&] { return "kvpool_host_copy_bytes of " + std::to_string(n) + " slots"; }));
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.slot_limit(), "slots"));
  if (n == 0) return Status::ok();
  const size_t row = L.host_row_bytes();
  auto* out = static_cast<uint8_t*>(host);
  return for_each_part(I.layers, L.mha_like(), [&](const RowPart& part) -> Status {
    for (size_t start = 0; start < n; start += kHostChunk) {
      const size_t count = std::min(kHostChunk, n - start);
      uint8_t* at = out + start * row;
      const RowBuffer& v = *part.values;
      KVPOOL_RETURN_IF_ERROR(I.backend->gather_to_host(
          {at, row, nullptr, v.data(), v.row_bytes, slots + start, L.value_bytes, count}));
      if (L.scale_bytes > 0) {
        const RowBuffer& s = *part.scales;
        KVPOOL_RETURN_IF_ERROR(I.backend->gather_to_host(
            {at + L.value_bytes, row, nullptr, s.data(), s.row_bytes, slots + start, L.scale_bytes, count}));
      }
    }
    out += n * row;
    return Status::ok();
  });
}

Status KvBuffers::load_from_host(const int64_t* slots, size_t n, const void* host, size_t host_bytes) {
  const Impl& I = *impl_;
  const KvLayout& L = I.L;
  size_t expected = 0;
  KVPOOL_RETURN_IF_ERROR(host_copy_bytes(n, &expected));
  KVPOOL_RETURN_IF_ERROR(check_bytes(host_bytes, expected, "host",
                                     [&] { return "kvpool_host_copy_bytes of " + std::to_string(n) + " slots"; }));
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.slot_limit(), "slots"));
  if (n == 0) return Status::ok();
  const size_t row = L.host_row_bytes();
  const auto* in = static_cast<const uint8_t*>(host);
  return for_each_part(I.layers, L.mha_like(), [&](const RowPart& part) -> Status {
    for (size_t start = 0; start < n; start += kHostChunk) {
      const size_t count = std::min(kHostChunk, n - start);
      const uint8_t* at = in + start * row;
      const RowBuffer& v = *part.values;
      KVPOOL_RETURN_IF_ERROR(I.backend->scatter_from_host(
          {v.data(), v.row_bytes, slots + start, at, row, nullptr, L.value_bytes, count}));
      if (L.scale_bytes > 0) {
        const RowBuffer& s = *part.scales;
        KVPOOL_RETURN_IF_ERROR(I.backend->scatter_from_host(
            {s.data(), s.row_bytes, slots + start, at + L.value_bytes, row, nullptr, L.scale_bytes, count}));
      }
    }
    in += n * row;
    return Status::ok();
  });
}

}  // namespace kvp::pool
