// The lock of a thread-safe pool (pool.thread_safe; docs/services.md#threading).
//
// Every extern "C" entry point that takes a pool goes through with_pool()
// (capi/api_util.hpp), which takes the pool's lock around the call's body when the
// pool has one: exclusively for calls that change the pool, shared for the read-only
// queries (Access::kShared), which then run side by side. A pool without the key has
// no lock, and with_pool() costs one more null test of a pointer it loads anyway.
//
// Library threads never take the lock: the storage tier's two threads share only the
// tier's own state with the calls (under the tier's mutex), so the order is always
// pool lock -> tier mutex. User callbacks run inside util::UserCallbackScope; a call on a
// thread-safe pool from inside one, or from a thread that holds that pool's lock already,
// is refused with KVPOOL_ERR_UNSUPPORTED (a non-reentrant lock would deadlock there).
//
// Destroying a pool while other threads call it is the caller's error, as with any C
// library: kvpool_destroy() takes no lock (another thread's call could not tell a freed
// lock from a live one).
#pragma once

#include <pthread.h>

#include "util/status.hpp"

struct kvpool;

namespace kvp::capi {

// How an entry point uses its pool (with_pool's template argument).
enum class Access {
  // Changes the pool, or uses scratch memory of it: the lock exclusively. The default.
  kExclusive,
  // Reads only (the body gets a const kvpool* and touches no mutable member, no scratch
  // buffer, nothing through a component pointer that changes it): the lock shared.
  kShared,
  // kShared, except on a pool with pool.free_list "device", where the call may first
  // bring the host mirror of the free list up to date (capi/device_mirror.hpp) or use the
  // device engine's staging memory: exclusive there.
  kSharedOnHostList,
};

// A readers-writer lock that prefers writers (glibc): a steady stream of read-only
// queries (a metrics scraper on every thread) cannot starve the calls that change the
// pool.
class PoolLock {
 public:
  PoolLock();
  ~PoolLock();
  PoolLock(const PoolLock&) = delete;
  PoolLock& operator=(const PoolLock&) = delete;

  void lock() noexcept;
  void unlock() noexcept;
  void lock_shared() noexcept;
  void unlock_shared() noexcept;

 private:
  pthread_rwlock_t rw_;
};

// Holds a pool's lock for the body of one entry point (with_pool()).
class PoolGuard {
 public:
  PoolGuard() = default;
  ~PoolGuard();
  PoolGuard(const PoolGuard&) = delete;
  PoolGuard& operator=(const PoolGuard&) = delete;

  // Takes `pool`'s lock (which it must have), shared or exclusive; KVPOOL_ERR_UNSUPPORTED
  // without taking it from inside a kvpool callback or when this thread holds it already.
  Status acquire(::kvpool* pool, bool shared);

 private:
  PoolLock* lock_ = nullptr;
  bool shared_ = false;
  const ::kvpool* outer_ = nullptr;  // the pool this thread held before (restored on release)
};

}  // namespace kvp::capi
