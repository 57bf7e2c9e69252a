// Reads: get_kv gathers rows as stored or converted to f32 / f16 / bf16.
#include <string>

#include "pool/descriptor.hpp"
#include "pool/kv_buffers_impl.hpp"
#include "pool/row_staging.hpp"

namespace kvp::pool {

using config::DType;

Status KvBuffers::Impl::check_get_kv(int32_t layer, size_t n, size_t k_bytes, const void* v, size_t v_bytes,
                                     int32_t dst_dtype, const LayerKv** l, ReadFormat* f) const {
  KVPOOL_RETURN_IF_ERROR(find_layer(layer, l));
  // As stored: the pool's kv_dtype, or u8 where the stored form is bytes (fp4 nibbles, nsa packed rows).
  const bool byte_form = L.kv_dtype == DType::kFP4E2M1 || L.form == RowForm::kNsaPacked;
  const bool raw = dst_dtype == public_dtype(L.kv_dtype) || (dst_dtype == KVPOOL_DTYPE_U8 && byte_form);
  f->raw = raw;
  if (!raw && !wide_of(dst_dtype, &f->wide)) {
    return Status::invalid("dst_dtype is " + dtype_text(dst_dtype) + ", expected f32, f16, bf16 or the stored " +
                           config::dtype_name(L.kv_dtype));
  }
  const Wide wide = f->wide;
  size_t expected = 0;
  KVPOOL_RETURN_IF_ERROR(byte_count(n, raw ? L.value_bytes : L.elements * wide_bytes(wide), "k", &expected));
  const auto why = [&] {
    return raw ? std::to_string(n) + " stored rows of " + std::to_string(L.value_bytes) + " bytes"
               : std::to_string(n) + " slots x " + std::to_string(L.elements) + " values of " + dtype_text(dst_dtype);
  };
  KVPOOL_RETURN_IF_ERROR(check_bytes(k_bytes, expected, "k", why));
  if (L.mha_like()) {
    KVPOOL_RETURN_IF_ERROR(check_bytes(v_bytes, expected, "v", why));
  } else if (v != nullptr || v_bytes != 0) {
    return Status::invalid("v must be NULL with v_bytes 0 for attention " +
                           std::string(config::attention_name(L.variant)) + " (k receives the whole row)");
  }
  return Status::ok();
}

Status KvBuffers::get_kv(int32_t layer, const int64_t* slots, size_t n, void* k, size_t k_bytes, void* v,
                         size_t v_bytes, int32_t dst_dtype) const {
  const Impl& I = *impl_;
  const KvLayout& L = I.L;
  const LayerKv* l = nullptr;
  ReadFormat f;
  KVPOOL_RETURN_IF_ERROR(I.check_get_kv(layer, n, k_bytes, v, v_bytes, dst_dtype, &l, &f));
  const bool raw = f.raw;
  const Wide wide = f.wide;
  KVPOOL_RETURN_IF_ERROR(Impl::check_slots(slots, n, L.slot_limit(), "slots"));
  if (n == 0) return Status::ok();

  const int64_t* rows = I.rows_for(*l, slots, n);
  auto read = [&](const RowBuffer& values, const RowBuffer& scales, void* dst) -> Status {
    if (raw) {
      return I.backend->gather_to_host({dst, L.value_bytes, nullptr, values.data(), values.row_bytes, rows,
                                        L.value_bytes, n});
    }
    ConstRowRef value_rows, scale_rows;
    KVPOOL_RETURN_IF_ERROR(source_rows(I.backend, I.host_addressable, values.data(), values.row_bytes, rows, n,
                                       &I.stage_values, &value_rows));
    if (L.form == RowForm::kNsaPacked) {
      decode_nsa_rows(value_rows, n, L.lora, L.rope, dst, wide);
      return Status::ok();
    }
    if (L.scale_bytes > 0) {
      KVPOOL_RETURN_IF_ERROR(source_rows(I.backend, I.host_addressable, scales.data(), scales.row_bytes, rows, n,
                                         &I.stage_scales, &scale_rows));
    }
    decode_rows(value_rows, scale_rows, n, L.elements, L.kv_dtype, dst, wide);
    return Status::ok();
  };
  KVPOOL_RETURN_IF_ERROR(read(l->k, l->k_scale, k));
  if (L.mha_like()) KVPOOL_RETURN_IF_ERROR(read(l->v, l->v_scale, v));
  return Status::ok();
}

}  // namespace kvp::pool
