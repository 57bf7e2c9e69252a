// User code that kvpool calls: the kvpool_allocator callbacks (on the calling thread,
// while a call holds the pool), a custom storage backend's callbacks (on the storage
// threads, and `clear` on the calling thread) and any later callback (the log callback).
// Each runs inside a UserCallbackScope, so that a call into a thread-safe pool
// (pool.thread_safe) made from inside one fails cleanly with KVPOOL_ERR_UNSUPPORTED
// (capi/pool_lock.hpp) instead of deadlocking on the pool's lock: the call may hold that
// lock itself, or a caller may hold it while it waits for the callback (kvstore_flush()
// waits for the storage threads).
#pragma once

namespace kvp::util {

// How many user callbacks the calling thread is inside (nested calls are possible).
inline thread_local int t_user_callback_depth = 0;

inline bool in_user_callback() noexcept { return t_user_callback_depth > 0; }

class UserCallbackScope {
 public:
  UserCallbackScope() noexcept { ++t_user_callback_depth; }
  ~UserCallbackScope() { --t_user_callback_depth; }
  UserCallbackScope(const UserCallbackScope&) = delete;
  UserCallbackScope& operator=(const UserCallbackScope&) = delete;
};

}  // namespace kvp::util
