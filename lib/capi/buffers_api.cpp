// extern "C" entry points of buffers.h. KV buffers belong to pool::KvBuffers;
// kvpool_get_buffer also describes the buffers other components own (request
// table, mamba states, swa mapping).
#include <string>
#include <vector>

#include "capi/api_util.hpp"
#include "kvpool/buffers.h"
#include "pool/descriptor.hpp"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::Access;
using kvp::capi::with_pool;
using kvp::pool::make_descriptor;
using kvp::pool::public_dtype;
using kvp::pool::write_descriptor;

namespace {

Status check_out_struct(const kvpool_buffer* out) {
  KVPOOL_RETURN_IF_ERROR(check_out(out, "out"));
  if (out->struct_size < sizeof(kvpool_buffer)) {
    return Status::invalid("out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                           std::to_string(sizeof(kvpool_buffer)) + " (use KVPOOL_BUFFER_INIT)");
  }
  return Status::ok();
}

Status describe_request_table(const kvpool* p, kvpool_buffer* out) {
  const kvp::backend::DeviceMemory& m = p->requests->memory();
  return write_descriptor(make_descriptor(KVPOOL_DTYPE_I32, m.data(), p->backend->device_type(),
                                          p->backend->device_id(),
                                          {p->requests->rows(), p->requests->max_context_len()}, m.bytes()),
                          out);
}

Status describe_swa_mapping(const kvpool* p, kvpool_buffer* out) {
  if (!p->swa) return Status::unsupported("the swa mapping needs attention \"swa\"");
  const auto& mapping = p->swa->mapping();
  return write_descriptor(make_descriptor(KVPOOL_DTYPE_I64, p->swa->mapping_data(), KVPOOL_DEVICE_CPU, 0,
                                          {static_cast<int64_t>(mapping.size())}, mapping.size() * sizeof(int64_t)),
                          out);
}

// One mamba layer's view of a state buffer laid out [layer][slot][...].
Status describe_mamba(const kvpool* p, int32_t kind, int32_t layer, kvpool_buffer* out) {
  if (!p->mamba) return Status::unsupported("mamba state buffers need attention \"hybrid_linear\"");
  const kvp::mamba::MambaPool& m = *p->mamba;
  const kvp::mamba::MambaShape& s = m.shape();
  const kvp::config::MambaConfig& mc = p->config.model.mamba;
  const bool intermediate = kind == KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV || kind == KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM;
  if (intermediate && s.draft_tokens == 0) {
    return Status::unsupported("intermediate mamba states need pool.mamba_spec_draft_tokens > 0");
  }
  const int index = m.layer_index(layer);
  if (index < 0) {
    return Status::invalid("layer " + std::to_string(layer) + " is not a mamba layer held by this pool");
  }
  const bool conv = kind == KVPOOL_BUFFER_MAMBA_CONV || kind == KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV;
  const kvp::backend::DeviceMemory& mem =
      intermediate ? (conv ? m.intermediate_conv() : m.intermediate_ssm()) : (conv ? m.conv_memory() : m.ssm_memory());
  const uint64_t state = conv ? s.conv_bytes : s.ssm_bytes;
  std::vector<int64_t> shape;
  if (intermediate) {
    shape = {s.spec_slots + 1, s.draft_tokens};
  } else {
    shape = {s.slots + 1};
  }
  const std::vector<int64_t>& state_shape = conv ? mc.conv_shape : mc.ssm_shape;
  shape.insert(shape.end(), state_shape.begin(), state_shape.end());
  const uint64_t per_layer = static_cast<uint64_t>(shape[0]) * (intermediate ? s.draft_tokens : 1) * state;
  auto* data = static_cast<char*>(mem.data()) + static_cast<size_t>(index) * per_layer;
  return write_descriptor(make_descriptor(public_dtype(conv ? mc.conv_dtype : mc.ssm_dtype), data,
                                          p->backend->device_type(), p->backend->device_id(), shape, per_layer),
                          out);
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvpool_get_buffer(const kvpool* pool, int32_t kind, int32_t layer, kvpool_buffer* out) {
  return with_pool<Access::kShared>("kvpool_get_buffer", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out_struct(out));
    switch (kind) {
      case KVPOOL_BUFFER_REQ_TABLE: return describe_request_table(p, out);
      case KVPOOL_BUFFER_SWA_MAPPING: return describe_swa_mapping(p, out);
      case KVPOOL_BUFFER_MAMBA_CONV:
      case KVPOOL_BUFFER_MAMBA_SSM:
      case KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM:
      case KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV: return describe_mamba(p, kind, layer, out);
      default: return p->kv->describe(kind, layer, out);
    }
  });
}

KVPOOL_API kvpool_status kvpool_set_kv(kvpool* pool, int32_t layer, const int64_t* slots, size_t slots_len,
                                       const void* k, size_t k_bytes, const void* v, size_t v_bytes,
                                       int32_t src_dtype, float k_scale, float v_scale) {
  return with_pool("kvpool_set_kv", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(k, k_bytes, "k"));
    KVPOOL_RETURN_IF_ERROR(check_array(v, v_bytes, "v"));
    return p->kv->set_kv(layer, slots, slots_len, k, k_bytes, v, v_bytes, src_dtype, k_scale, v_scale);
  });
}

KVPOOL_API kvpool_status kvpool_set_mla_kv(kvpool* pool, int32_t layer, const int64_t* slots, size_t slots_len,
                                           const void* nope, size_t nope_bytes, const void* rope, size_t rope_bytes,
                                           int32_t src_dtype) {
  return with_pool("kvpool_set_mla_kv", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(nope, nope_bytes, "nope"));
    KVPOOL_RETURN_IF_ERROR(check_array(rope, rope_bytes, "rope"));
    return p->kv->set_mla_kv(layer, slots, slots_len, nope, nope_bytes, rope, rope_bytes, src_dtype);
  });
}

KVPOOL_API kvpool_status kvpool_set_label(kvpool* pool, int32_t layer, const int64_t* slots, size_t slots_len,
                                          const void* labels, size_t labels_bytes) {
  return with_pool("kvpool_set_label", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(labels, labels_bytes, "labels"));
    return p->kv->set_label(layer, slots, slots_len, labels, labels_bytes);
  });
}

KVPOOL_API kvpool_status kvpool_set_indexer(kvpool* pool, int32_t layer, const int64_t* slots, size_t slots_len,
                                            const void* keys, size_t keys_bytes, const float* scales,
                                            size_t scales_len) {
  return with_pool("kvpool_set_indexer", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(keys, keys_bytes, "keys"));
    KVPOOL_RETURN_IF_ERROR(check_array(scales, scales_len, "scales"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(scales_len, slots_len, "scales", "slots"));
    return p->kv->set_indexer(layer, slots, slots_len, keys, keys_bytes, scales, scales_len);
  });
}

KVPOOL_API kvpool_status kvpool_get_kv(const kvpool* pool, int32_t layer, const int64_t* slots, size_t slots_len,
                                       void* k, size_t k_bytes, void* v, size_t v_bytes, int32_t dst_dtype) {
  return with_pool("kvpool_get_kv", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(k, k_bytes, "k"));
    KVPOOL_RETURN_IF_ERROR(check_array(v, v_bytes, "v"));
    return p->kv->get_kv(layer, slots, slots_len, k, k_bytes, v, v_bytes, dst_dtype);
  });
}

KVPOOL_API kvpool_status kvpool_move_kv(kvpool* pool, const int64_t* dst, size_t dst_len, const int64_t* src,
                                        size_t src_len) {
  return with_pool("kvpool_move_kv", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(dst, dst_len, "dst"));
    KVPOOL_RETURN_IF_ERROR(check_array(src, src_len, "src"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(src_len, dst_len, "src", "dst"));
    return p->kv->move_kv(dst, src, dst_len);
  });
}

KVPOOL_API kvpool_status kvpool_host_copy_bytes(const kvpool* pool, size_t num_slots, size_t* bytes) {
  return with_pool<Access::kShared>("kvpool_host_copy_bytes", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(bytes, "bytes"));
    return p->kv->host_copy_bytes(num_slots, bytes);
  });
}

KVPOOL_API kvpool_status kvpool_copy_to_host(const kvpool* pool, const int64_t* slots, size_t slots_len, void* host,
                                             size_t host_bytes) {
  return with_pool("kvpool_copy_to_host", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(host, host_bytes, "host"));
    return p->kv->copy_to_host(slots, slots_len, host, host_bytes);
  });
}

KVPOOL_API kvpool_status kvpool_load_from_host(kvpool* pool, const int64_t* slots, size_t slots_len,
                                               const void* host, size_t host_bytes) {
  return with_pool("kvpool_load_from_host", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(host, host_bytes, "host"));
    return p->kv->load_from_host(slots, slots_len, host, host_bytes);
  });
}

}  // extern "C"
