// Helpers every extern "C" entry point that takes a pool uses: the live-handle
// check, the exception guard, the function name in front of every message,
// and the checks of (pointer, length) arguments.
#pragma once

#include <string>

#include "capi/errors.hpp"
#include "capi/handles.hpp"
#include "capi/pool_handle.hpp"

namespace kvp::capi {

inline Status prefixed(const char* function, const Status& st) {
  if (st.is_ok()) return st;
  return Status(st.code(), std::string(function) + ": " + st.message());
}

// Runs `body(kvpool*)` for a live pool; messages start with the function name.
template <class Body>
kvpool_status with_pool(const char* function, const ::kvpool* pool, Body&& body) noexcept {
  return guarded(function, [&]() -> Status {
    if (!is_live_handle(pool, HandleKind::kPool)) {
      return Status::invalid(std::string(function) + ": pool is NULL or not a live kvpool handle");
    }
    return prefixed(function, body(const_cast<::kvpool*>(pool)));
  });
}

// A (pointer, length) argument: NULL is only allowed with length 0.
inline Status check_array(const void* data, size_t len, const char* name) {
  if (data == nullptr && len > 0) return Status::invalid(std::string(name) + " is NULL but its length is " + std::to_string(len));
  return Status::ok();
}

inline Status check_same_length(size_t len, size_t expected, const char* name, const char* expected_name) {
  if (len != expected) {
    return Status::invalid(std::string(name) + " has length " + std::to_string(len) + ", expected " +
                           std::to_string(expected) + " (the length of " + expected_name + ")");
  }
  return Status::ok();
}

inline Status need_mamba(const ::kvpool* pool) {
  if (!pool->mamba) return Status::unsupported("the pool has no mamba states (attention is not \"hybrid_linear\")");
  return Status::ok();
}

// A kvseq request owns its state slot from kvseq_begin on, also before its first extend
// gives it a row (MambaPool::attached sees only row-held slots): no other call may
// take that slot, free it or copy into it. `what` names the argument ("mamba_slot",
// "cow_slot", "dst"); `hint` (may be "") follows the message after "; ".
inline Status refuse_request_state(const ::kvpool* pool, int32_t slot, const char* what, const char* hint) {
  if (pool->seqs && pool->seqs->holds_state(slot)) {
    return Status::invalid(std::string(what) + " " + std::to_string(slot) + " belongs to a kvseq request" +
                           (hint[0] != '\0' ? "; " + std::string(hint) : std::string()));
  }
  return Status::ok();
}

inline Status check_out(const void* out, const char* name) {
  if (out == nullptr) return Status::invalid(std::string(name) + " is NULL");
  return Status::ok();
}

}  // namespace kvp::capi
