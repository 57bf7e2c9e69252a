// Writes: set_kv, set_mla_kv, set_label, set_indexer. Each one validates all
// of its arguments first and only then touches a buffer, so a failed call
// writes nothing.
#include <cmath>
#include <cstring>
#include <string>

#include "pool/descriptor.hpp"
#include "pool/kv_buffers_impl.hpp"
#include "pool/row_staging.hpp"

namespace kvp::pool {

using config::Attention;
using config::DType;

namespace {

Status check_scale(float scale, const char* name) {
  if (!std::isfinite(scale) || !(scale > 0.0f)) {
    return Status::invalid(std::string(name) + " is " + std::to_string(scale) + ", expected a finite value > 0");
  }
  return Status::ok();
}

}  // namespace

Status write_format(int32_t src_dtype, DType kv, bool allow_raw, WriteFormat* out) {
  const int32_t stored = public_dtype(kv);
  if (src_dtype == stored && allow_raw) {
    if (kv == DType::kFP4E2M1) {
      return Status::invalid("src_dtype fp4_e2m1: fp4 rows cannot be written as they are stored (values and block "
                             "scales live apart); pass f32, f16 or bf16 values, which are quantised");
    }
    out->raw = true;
    out->value_bytes = config::dtype_bytes(kv);
    return Status::ok();
  }
  if (!wide_of(src_dtype, &out->wide)) {
    return Status::invalid("src_dtype is " + dtype_text(src_dtype) + ", expected f32, f16, bf16" +
                           (allow_raw && kv != DType::kFP4E2M1 ? " or the pool's kv_dtype " + dtype_text(stored) : ""));
  }
  out->value_bytes = wide_bytes(out->wide);
  return Status::ok();
}

Status KvBuffers::Impl::check_set_kv(int32_t layer, size_t n, size_t k_bytes, const void* v, size_t v_bytes,
                                     int32_t src_dtype, float k_scale, float v_scale, const LayerKv** l,
                                     WriteFormat* out) const {
  KVPOOL_RETURN_IF_ERROR(find_layer(layer, l));
  if (L.form == RowForm::kNsaPacked) {
    return Status::unsupported("nsa with kv_dtype fp8_e4m3 stores packed rows; write them with kvpool_set_mla_kv");
  }
  WriteFormat& f = *out;
  KVPOOL_RETURN_IF_ERROR(write_format(src_dtype, L.kv_dtype, true, &f));
  KVPOOL_RETURN_IF_ERROR(check_scale(k_scale, "k_scale"));
  KVPOOL_RETURN_IF_ERROR(check_scale(v_scale, "v_scale"));
  size_t expected = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, f.raw ? L.value_bytes : L.elements * f.value_bytes, "k", &expected));
  const auto why = [&] {
    return std::to_string(n) + " slots x " + std::to_string(L.elements) + " values of " + dtype_text(src_dtype);
  };
  KVPOOL_RETURN_IF_ERROR(check_bytes(k_bytes, expected, "k", why));
  if (L.mha_like()) {
    KVPOOL_RETURN_IF_ERROR(check_bytes(v_bytes, expected, "v", why));
  } else if (v != nullptr || v_bytes != 0) {
    return Status::invalid("v must be NULL with v_bytes 0 for attention " +
                           std::string(config::attention_name(L.variant)) + " (k holds the whole row)");
  }
  return Status::ok();
}

Status KvBuffers::set_kv(int32_t layer, const int64_t* slots, size_t n, const void* k, size_t k_bytes, const void* v,
                         size_t v_bytes, int32_t src_dtype, float k_scale, float v_scale) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  const LayerKv* l = nullptr;
  WriteFormat f;
  KVPOOL_RETURN_IF_ERROR(I.check_set_kv(layer, n, k_bytes, v, v_bytes, src_dtype, k_scale, v_scale, &l, &f));
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.slot_limit(), "slots"));
  if (n == 0) return Status::ok();

  const int64_t* rows = I.rows_for(*l, slots, n);
  auto write = [&](const RowBuffer& values, const RowBuffer& scales, const void* src, float divisor) -> Status {
    if (f.raw) {
      return I.backend->scatter_from_host(
          {values.data(), values.row_bytes, rows, src, L.value_bytes, nullptr, L.value_bytes, n});
    }
    RowSink value_sink(I.backend, I.host_addressable, values.data(), values.row_bytes, rows, n, &I.stage_values);
    if (L.scale_bytes == 0) {
      encode_rows(src, f.wide, n, L.elements, divisor, L.kv_dtype, value_sink.ref(), RowRef{});
      return value_sink.flush();
    }
    RowSink scale_sink(I.backend, I.host_addressable, scales.data(), scales.row_bytes, rows, n, &I.stage_scales);
    encode_rows(src, f.wide, n, L.elements, divisor, L.kv_dtype, value_sink.ref(), scale_sink.ref());
    KVPOOL_RETURN_IF_ERROR(value_sink.flush());
    return scale_sink.flush();
  };
  KVPOOL_RETURN_IF_ERROR(write(l->k, l->k_scale, k, k_scale));
  if (L.mha_like()) KVPOOL_RETURN_IF_ERROR(write(l->v, l->v_scale, v, v_scale));
  return Status::ok();
}

Status KvBuffers::Impl::check_set_mla_kv(int32_t layer, size_t n, size_t nope_bytes, size_t rope_bytes,
                                         int32_t src_dtype, const LayerKv** l, WriteFormat* out) const {
  if (L.variant != Attention::kMLA && L.variant != Attention::kNSA) {
    return Status::unsupported(std::string("the pool's attention is ") + config::attention_name(L.variant) +
                               ", set_mla_kv needs mla or nsa");
  }
  KVPOOL_RETURN_IF_ERROR(find_layer(layer, l));
  const bool packed = L.form == RowForm::kNsaPacked;
  WriteFormat& f = *out;
  KVPOOL_RETURN_IF_ERROR(write_format(src_dtype, L.kv_dtype, !packed, &f));
  size_t nope_expected = 0, rope_expected = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, uint64_t(L.lora) * f.value_bytes, "nope", &nope_expected));
  KVPOOL_RETURN_IF_ERROR(byte_count(n, uint64_t(L.rope) * f.value_bytes, "rope", &rope_expected));
  KVPOOL_RETURN_IF_ERROR(check_bytes(nope_bytes, nope_expected, "nope", [&] {
    return std::to_string(n) + " slots x kv_lora_rank " + std::to_string(L.lora) + " values of " +
           dtype_text(src_dtype);
  }));
  KVPOOL_RETURN_IF_ERROR(check_bytes(rope_bytes, rope_expected, "rope", [&] {
    return std::to_string(n) + " slots x qk_rope_head_dim " + std::to_string(L.rope) + " values of " +
           dtype_text(src_dtype);
  }));
  return Status::ok();
}

Status KvBuffers::set_mla_kv(int32_t layer, const int64_t* slots, size_t n, const void* nope, size_t nope_bytes,
                             const void* rope, size_t rope_bytes, int32_t src_dtype) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  const LayerKv* l = nullptr;
  WriteFormat f;
  KVPOOL_RETURN_IF_ERROR(I.check_set_mla_kv(layer, n, nope_bytes, rope_bytes, src_dtype, &l, &f));
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.slot_limit(), "slots"));
  if (n == 0) return Status::ok();
  const bool packed = L.form == RowForm::kNsaPacked;

  const RowBuffer& k = l->k;
  if (f.raw) {  // both parts as they are stored: two partial-row copies
    const size_t nope_row = L.lora * f.value_bytes, rope_row = L.rope * f.value_bytes;
    KVPOOL_RETURN_IF_ERROR(
        I.backend->scatter_from_host({k.data(), k.row_bytes, slots, nope, nope_row, nullptr, nope_row, n}));
    return I.backend->scatter_from_host(
        {k.data() + nope_row, k.row_bytes, slots, rope, rope_row, nullptr, rope_row, n});
  }
  RowSink sink(I.backend, I.host_addressable, k.data(), k.row_bytes, slots, n, &I.stage_values);
  if (packed) {
    encode_nsa_rows(nope, rope, f.wide, n, L.lora, L.rope, sink.ref());
    return sink.flush();
  }
  if (L.kv_dtype != DType::kFP4E2M1) {
    const size_t stored = config::dtype_bytes(L.kv_dtype);
    encode_rows(nope, f.wide, n, L.lora, 1.0f, L.kv_dtype, sink.ref(), RowRef{});
    encode_rows(rope, f.wide, n, L.rope, 1.0f, L.kv_dtype, sink.ref(L.lora * stored), RowRef{});
    return sink.flush();
  }
  // fp4 blocks may straddle the nope/rope boundary: assemble whole f32 rows first.
  const size_t row_f32 = L.elements * 4;
  I.wide_scratch.resize(n * row_f32);
  uint8_t* whole = I.wide_scratch.data();
  encode_rows(nope, f.wide, n, L.lora, 1.0f, DType::kF32, RowRef{whole, row_f32, nullptr}, RowRef{});
  encode_rows(rope, f.wide, n, L.rope, 1.0f, DType::kF32, RowRef{whole + L.lora * 4, row_f32, nullptr}, RowRef{});
  const RowBuffer& s = l->k_scale;
  RowSink scale_sink(I.backend, I.host_addressable, s.data(), s.row_bytes, slots, n, &I.stage_scales);
  encode_rows(whole, Wide::kF32, n, L.elements, 1.0f, L.kv_dtype, sink.ref(), scale_sink.ref());
  KVPOOL_RETURN_IF_ERROR(sink.flush());
  return scale_sink.flush();
}

Status KvBuffers::set_label(int32_t layer, const int64_t* slots, size_t n, const void* labels, size_t labels_bytes) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  if (L.variant != Attention::kDoubleSparse) {
    return Status::unsupported(std::string("the pool's attention is ") + config::attention_name(L.variant) +
                               ", labels need double_sparse");
  }
  const LayerKv* l = nullptr;
  KVPOOL_RETURN_IF_ERROR(I.find_layer(layer, &l));
  size_t expected = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, L.label_bytes, "labels", &expected));
  KVPOOL_RETURN_IF_ERROR(check_bytes(labels_bytes, expected, "labels", [&] {
    return std::to_string(n) + " slots x " + std::to_string(L.heads) + " heads x " + std::to_string(L.heavy) +
           " heavy channels of " + config::dtype_name(L.kv_dtype);
  }));
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.label_rows, "slots"));
  if (n == 0) return Status::ok();
  const RowBuffer& b = l->label;
  return I.backend->scatter_from_host({b.data(), b.row_bytes, slots, labels, b.row_bytes, nullptr, b.row_bytes, n});
}

Status KvBuffers::set_indexer(int32_t layer, const int64_t* slots, size_t n, const void* keys, size_t keys_bytes,
                              const float* scales, size_t scales_len) {
  Impl& I = *impl_;
  const KvLayout& L = I.L;
  if (L.variant != Attention::kNSA) {
    return Status::unsupported(std::string("the pool's attention is ") + config::attention_name(L.variant) +
                               ", the indexer needs nsa");
  }
  const LayerKv* l = nullptr;
  KVPOOL_RETURN_IF_ERROR(I.find_layer(layer, &l));
  size_t expected = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, L.index_dim, "keys", &expected));
  KVPOOL_RETURN_IF_ERROR(check_bytes(keys_bytes, expected, "keys", [&] {
    return std::to_string(n) + " slots x " + std::to_string(L.index_dim) + " fp8 bytes";
  }));
  if (scales_len != n) {
    return Status::invalid("scales has length " + std::to_string(scales_len) + ", expected " + std::to_string(n) +
                           " (one per slot)");
  }
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.slot_limit(), "slots"));
  if (n == 0) return Status::ok();
  // Slot s sits in page s / page_size at position s % page_size; a page holds
  // page_size keys, then page_size f32 scales. Rows are addressed by byte offset.
  const uint64_t ps = L.page_size, key = L.index_dim, page = L.indexer_row_bytes;
  I.rows_scratch.resize(2 * n);
  int64_t* key_at = I.rows_scratch.data();
  int64_t* scale_at = key_at + n;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t s = static_cast<uint64_t>(slots[i]);
    key_at[i] = static_cast<int64_t>(s / ps * page + s % ps * key);
    scale_at[i] = static_cast<int64_t>(s / ps * page + ps * key + s % ps * 4);
  }
  uint8_t* base = l->indexer.data();
  KVPOOL_RETURN_IF_ERROR(I.backend->scatter_from_host({base, 1, key_at, keys, key, nullptr, key, n}));
  return I.backend->scatter_from_host({base, 1, scale_at, scales, 4, nullptr, 4, n});
}

}  // namespace kvp::pool
