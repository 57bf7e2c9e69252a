// extern "C" entry points of device.h for KV rows: set_kv, set_mla_kv, get_kv
// and move_kv on device arrays. A CUDA pool enqueues one job on the caller's
// stream; a CPU pool runs the host call at once (its arrays are host memory),
// which is the reference the CUDA results are compared with.
#include "capi/api_util.hpp"
#include "capi/device_util.hpp"
#include "kvpool/device.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_same_length;
using kvp::capi::with_pool;

extern "C" {

KVPOOL_API kvpool_status kvpool_set_kv_async(kvpool* pool, int32_t layer, const int64_t* slots, size_t slots_len,
                                             const void* k, size_t k_bytes, const void* v, size_t v_bytes,
                                             int32_t src_dtype, float k_scale, float v_scale, void* stream) {
  return with_pool("kvpool_set_kv_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(k, k_bytes, "k"));
    KVPOOL_RETURN_IF_ERROR(check_array(v, v_bytes, "v"));
    if (!kvp::capi::on_device(p)) {
      return p->kv->set_kv(layer, slots, slots_len, k, k_bytes, v, v_bytes, src_dtype, k_scale, v_scale);
    }
    kvp::pool::dev::FaultSink fault;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpSetKv, &fault));
    return p->kv->set_kv_async(layer, slots, slots_len, k, k_bytes, v, v_bytes, src_dtype, k_scale, v_scale, stream,
                               fault);
  });
}

KVPOOL_API kvpool_status kvpool_set_mla_kv_async(kvpool* pool, int32_t layer, const int64_t* slots,
                                                 size_t slots_len, const void* nope, size_t nope_bytes,
                                                 const void* rope, size_t rope_bytes, int32_t src_dtype,
                                                 void* stream) {
  return with_pool("kvpool_set_mla_kv_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(nope, nope_bytes, "nope"));
    KVPOOL_RETURN_IF_ERROR(check_array(rope, rope_bytes, "rope"));
    if (!kvp::capi::on_device(p)) {
      return p->kv->set_mla_kv(layer, slots, slots_len, nope, nope_bytes, rope, rope_bytes, src_dtype);
    }
    kvp::pool::dev::FaultSink fault;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpSetMlaKv, &fault));
    return p->kv->set_mla_kv_async(layer, slots, slots_len, nope, nope_bytes, rope, rope_bytes, src_dtype, stream,
                                   fault);
  });
}

KVPOOL_API kvpool_status kvpool_get_kv_async(const kvpool* pool, int32_t layer, const int64_t* slots,
                                             size_t slots_len, void* k, size_t k_bytes, void* v, size_t v_bytes,
                                             int32_t dst_dtype, void* stream) {
  return with_pool("kvpool_get_kv_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(k, k_bytes, "k"));
    KVPOOL_RETURN_IF_ERROR(check_array(v, v_bytes, "v"));
    if (!kvp::capi::on_device(p)) {
      return p->kv->get_kv(layer, slots, slots_len, k, k_bytes, v, v_bytes, dst_dtype);
    }
    kvp::pool::dev::FaultSink fault;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpGetKv, &fault));
    return p->kv->get_kv_async(layer, slots, slots_len, k, k_bytes, v, v_bytes, dst_dtype, stream, fault);
  });
}

KVPOOL_API kvpool_status kvpool_move_kv_async(kvpool* pool, const int64_t* dst, size_t dst_len, const int64_t* src,
                                              size_t src_len, void* stream) {
  return with_pool("kvpool_move_kv_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(dst, dst_len, "dst"));
    KVPOOL_RETURN_IF_ERROR(check_array(src, src_len, "src"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(src_len, dst_len, "src", "dst"));
    if (!kvp::capi::on_device(p)) return p->kv->move_kv(dst, src, dst_len);
    kvp::pool::dev::FaultSink fault;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpMoveKv, &fault));
    return p->kv->move_kv_async(dst, src, dst_len, stream, fault);
  });
}

}  // extern "C"
