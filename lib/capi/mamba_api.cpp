// extern "C" entry points of the state-slot part of mamba.h.
#include "capi/api_util.hpp"
#include "kvpool/mamba.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::need_mamba;
using kvp::capi::refuse_request_state;
using kvp::capi::Access;
using kvp::capi::with_pool;

extern "C" {

KVPOOL_API kvpool_status kvpool_mamba_available(const kvpool* pool, size_t* slots) {
  return with_pool<Access::kShared>("kvpool_mamba_available", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_out(slots, "slots"));
    *slots = p->mamba->ids().available();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvpool_mamba_alloc(kvpool* pool, int32_t* slots, size_t slots_len) {
  return with_pool("kvpool_mamba_alloc", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(p->mamba->alloc(slots, slots_len));
    p->direct_allocations = true;  // kvpool_check can no longer attribute every state slot
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvpool_mamba_free(kvpool* pool, const int32_t* slots, size_t slots_len) {
  return with_pool("kvpool_mamba_free", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    for (size_t i = 0; i < slots_len; ++i) {
      if (p->mamba_cache && p->mamba_cache->owns_state(slots[i])) {
        return Status::invalid("mamba slot " + std::to_string(slots[i]) + " belongs to the prefix tree");
      }
      KVPOOL_RETURN_IF_ERROR(refuse_request_state(p, slots[i], "mamba slot", "kvseq_finish or kvseq_abort frees it"));
    }
    return p->mamba->free_unattached(slots, slots_len);
  });
}

KVPOOL_API kvpool_status kvpool_mamba_copy(kvpool* pool, int32_t src, int32_t dst) {
  return with_pool("kvpool_mamba_copy", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(refuse_request_state(p, dst, "dst", "the copy would overwrite its state"));
    return p->mamba->copy(src, dst);
  });
}

KVPOOL_API kvpool_status kvpool_mamba_fork(kvpool* pool, int32_t src, int32_t* dst) {
  return with_pool("kvpool_mamba_fork", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_out(dst, "dst"));
    KVPOOL_RETURN_IF_ERROR(p->mamba->fork(src, dst));
    p->direct_allocations = true;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvpool_mamba_write(kvpool* pool, int32_t layer, int32_t slot, const void* conv,
                                            size_t conv_bytes, const void* ssm, size_t ssm_bytes) {
  return with_pool("kvpool_mamba_write", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(conv, conv_bytes, "conv"));
    KVPOOL_RETURN_IF_ERROR(check_array(ssm, ssm_bytes, "ssm"));
    return p->mamba->write(layer, slot, conv, conv_bytes, ssm, ssm_bytes);
  });
}

KVPOOL_API kvpool_status kvpool_mamba_read(const kvpool* pool, int32_t layer, int32_t slot, void* conv,
                                           size_t conv_bytes, void* ssm, size_t ssm_bytes) {
  return with_pool("kvpool_mamba_read", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(conv, conv_bytes, "conv"));
    KVPOOL_RETURN_IF_ERROR(check_array(ssm, ssm_bytes, "ssm"));
    return p->mamba->read(layer, slot, conv, conv_bytes, ssm, ssm_bytes);
  });
}

}  // extern "C"
