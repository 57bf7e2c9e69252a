// Helpers every extern "C" entry point that takes a pool uses: the live-handle
// check, the exception guard, the function name in front of every message,
// and the checks of (pointer, length) arguments.
#pragma once

#include <string>

#include "capi/errors.hpp"
#include "capi/handles.hpp"
#include "capi/pool_handle.hpp"
#include "capi/pool_lock.hpp"

namespace kvp::capi {

inline Status prefixed(const char* function, const Status& st) {
  if (st.is_ok()) return st;
  return Status(st.code(), std::string(function) + ": " + st.message());
}

// Runs `body(kvpool*)` for a live pool; messages start with the function name. On a
// thread-safe pool (pool.thread_safe) the body runs under the pool's lock, taken as
// `access` says (capi/pool_lock.hpp): with_pool<Access::kShared>(...) for a query that
// only reads, whose body then gets a `const kvpool*`. This is the one place where entry
// points resolve their pool: a new entry point that takes a pool goes through here.
//
// (For the coordinator of the metrics branch: kvpool_metrics_text() is a read-only query;
// give it with_pool<kvp::capi::Access::kShared> once its body reads only, like
// kvpool_get_stats(); call a user log callback inside a util::UserCallbackScope.)
template <Access access = Access::kExclusive, class Body>
kvpool_status with_pool(const char* function, const ::kvpool* pool, Body&& body) noexcept {
  return guarded(function, [&]() -> Status {
    if (!is_live_handle(pool, HandleKind::kPool)) {
      return Status::invalid(std::string(function) + ": pool is NULL or not a live kvpool handle");
    }
    ::kvpool* p = const_cast<::kvpool*>(pool);
    const auto run = [&]() -> Status {
      if constexpr (access == Access::kShared) {
        return prefixed(function, body(static_cast<const ::kvpool*>(p)));
      } else {
        return prefixed(function, body(p));
      }
    };
    if (p->lock == nullptr) return run();  // pool.thread_safe off: the caller serializes
    const bool shared = access == Access::kShared || (access == Access::kSharedOnHostList && !p->device_pages);
    PoolGuard guard;
    KVPOOL_RETURN_IF_ERROR(prefixed(function, guard.acquire(p, shared)));
    return run();
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
