#include "capi/pool_lock.hpp"

#include <cerrno>
#include <new>
#include <string>
#include <system_error>

#include "capi/pool_handle.hpp"
#include "util/callback_scope.hpp"

namespace kvp::capi {
namespace {

// The pool whose lock this thread holds (innermost), to refuse a call that would wait for itself.
thread_local const ::kvpool* t_held = nullptr;

}  // namespace

PoolLock::PoolLock() {
  pthread_rwlockattr_t attr;
  int rc = pthread_rwlockattr_init(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_rwlockattr_init");
#if defined(__GLIBC__)
  // The default prefers readers: queries that overlap one another would keep writers out for good.
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
  rc = pthread_rwlock_init(&rw_, &attr);
  pthread_rwlockattr_destroy(&attr);
  if (rc == ENOMEM || rc == EAGAIN) throw std::bad_alloc();
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_rwlock_init");
}

PoolLock::~PoolLock() { pthread_rwlock_destroy(&rw_); }

// The pthread calls below cannot fail on an initialized lock used as with_pool() uses it
// (no recursion: PoolGuard refuses it first), so their results are not checked. No spinning
// before a thread sleeps: 100 try-locks first made contended calls slower, not faster, in
// tests/bench/bench_lock.cpp (docs/services.md#threading).
void PoolLock::lock() noexcept { pthread_rwlock_wrlock(&rw_); }

void PoolLock::unlock() noexcept { pthread_rwlock_unlock(&rw_); }

void PoolLock::lock_shared() noexcept { pthread_rwlock_rdlock(&rw_); }

void PoolLock::unlock_shared() noexcept { pthread_rwlock_unlock(&rw_); }

Status PoolGuard::acquire(::kvpool* pool, bool shared) {
  if (util::in_user_callback()) {
    return Status::unsupported(
        "called from inside a kvpool callback (a kvpool_allocator or custom storage backend callback) on a "
        "thread-safe pool; callbacks must not call kvpool, and a thread-safe pool refuses such a call rather "
        "than wait for a lock that the waiting call may hold");
  }
  if (t_held == pool) {
    return Status::unsupported("called on a thread-safe pool by a thread inside another call on the same pool "
                               "(the pool's lock is not reentrant)");
  }
  if (shared) {
    pool->lock->lock_shared();
  } else {
    pool->lock->lock();
  }
  lock_ = pool->lock.get();
  shared_ = shared;
  outer_ = t_held;
  t_held = pool;
  return Status::ok();
}

PoolGuard::~PoolGuard() {
  if (lock_ == nullptr) return;
  t_held = outer_;
  if (shared_) {
    lock_->unlock_shared();
  } else {
    lock_->unlock();
  }
}

}  // namespace kvp::capi
