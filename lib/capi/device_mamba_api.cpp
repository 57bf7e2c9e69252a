// extern "C" entry points of device.h for mamba states: allocation with the
// zeroing enqueued, fork and batched copies on the caller's stream. Slot ids
// are host-side (the state free list is the host's); only the state bytes move
// on the device. CPU pools run the host calls at once.
#include <string>

#include "capi/api_util.hpp"
#include "capi/device_util.hpp"
#include "kvpool/device.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::need_mamba;
using kvp::capi::with_pool;

extern "C" {

KVPOOL_API kvpool_status kvpool_mamba_alloc_async(kvpool* pool, int32_t* slots, size_t slots_len, void* stream) {
  return with_pool("kvpool_mamba_alloc_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    if (!kvp::capi::on_device(p)) {
      KVPOOL_RETURN_IF_ERROR(p->mamba->alloc(slots, slots_len));
    } else {
      kvp::pool::dev::FaultSink fault;
      KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpMambaCopy, &fault));
      // Enqueue the zeroing of the ids about to be taken, then take them: a failed launch changes nothing.
      KVPOOL_RETURN_IF_ERROR(p->mamba->peek(slots, slots_len));
      KVPOOL_RETURN_IF_ERROR(kvp::mamba::dev::zero_slots(p->mamba->device_states(), slots, slots_len, stream));
      p->mamba->commit_take(slots_len);
    }
    p->direct_allocations = true;  // kvpool_check can no longer attribute every state slot
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvpool_mamba_fork_async(kvpool* pool, int32_t src, int32_t* dst, void* stream) {
  return with_pool("kvpool_mamba_fork_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_out(dst, "dst"));
    if (!kvp::capi::on_device(p)) {
      KVPOOL_RETURN_IF_ERROR(p->mamba->fork(src, dst));
    } else {
      kvp::pool::dev::FaultSink fault;
      KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpMambaCopy, &fault));
      KVPOOL_RETURN_IF_ERROR(p->mamba->check_owned(src, "source"));
      int32_t slot = 0;
      KVPOOL_RETURN_IF_ERROR(p->mamba->peek(&slot, 1));  // taken only once the copy is enqueued
      KVPOOL_RETURN_IF_ERROR(kvp::mamba::dev::copy_slot(p->mamba->device_states(), src, slot, stream));
      p->mamba->commit_take(1);
      *dst = slot;
    }
    p->direct_allocations = true;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvpool_mamba_copy_async(kvpool* pool, const int32_t* src, size_t src_len, const int32_t* dst,
                                                 size_t dst_len, void* stream) {
  return with_pool("kvpool_mamba_copy_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(src, src_len, "src"));
    KVPOOL_RETURN_IF_ERROR(check_array(dst, dst_len, "dst"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(dst_len, src_len, "dst", "src"));
    if (!kvp::capi::on_device(p)) {
      for (size_t i = 0; i < src_len; ++i) {  // every slot checked before any copy
        KVPOOL_RETURN_IF_ERROR(p->mamba->check_owned(src[i], ("src[" + std::to_string(i) + "]").c_str()));
        KVPOOL_RETURN_IF_ERROR(p->mamba->check_owned(dst[i], ("dst[" + std::to_string(i) + "]").c_str()));
        KVPOOL_RETURN_IF_ERROR(kvp::capi::refuse_request_state(p, dst[i], ("dst[" + std::to_string(i) + "]").c_str(),
                                                               "the copy would overwrite its state"));
      }
      for (size_t i = 0; i < src_len; ++i) KVPOOL_RETURN_IF_ERROR(p->mamba->copy(src[i], dst[i]));
      return Status::ok();
    }
    kvp::pool::dev::FaultSink fault;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_work(p, kvp::backend::kOpMambaCopy, &fault));
    return kvp::mamba::dev::copy_slots(p->mamba->device_states(), src, dst, src_len, stream, fault);
  });
}

}  // extern "C"
