// Failure injection for host allocations, for the tests in tests/fault/ only.
//
// alloc_injection.cpp (linked into the test executable, never into the library)
// replaces the global operator new / new[] and, unless a sanitizer owns malloc,
// also malloc / calloc / realloc / posix_memalign / aligned_alloc / memalign.
// Because the executable's definitions interpose over the references of every
// shared object, allocations made inside libkvpool.so, libstdc++ and cJSON are
// counted as well. Counting happens only while armed, and only on the thread
// that armed (the state is thread_local), except for arm_other_threads(), which
// targets the threads that a call starts or wakes (the storage tier's).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvfault {

// Makes the n-th (1-based) host allocation of this thread fail, and only that
// one: operator new throws std::bad_alloc (nothrow forms return nullptr), the
// C allocation functions return nullptr.
void arm(uint64_t n);

// As arm(n), but the n-th allocation and every later one fail (a lasting shortage:
// exercises the error paths, which must not need memory themselves).
void arm_sticky(uint64_t n);

// Stops counting; returns whether the n-th allocation was reached (and failed).
bool disarm();

// The library's own threads (the storage tier's backup, prefetch and hasher threads):
// every thread but the calling one fails its own n-th (1-based) host allocation counted
// from this call on (each thread counts its own, so a thread that allocates in the same
// order each time fails at the same place); with `sticky`, that one and every later one.
// The calling thread is not counted: it drives the pool while its threads fail. With
// `new_only`, only operator new is counted (C libraries that abort() when malloc fails,
// such as libmemcached and hiredis opening a connection, keep their memory).
void arm_other_threads(uint64_t n, bool sticky = false, bool new_only = false);

// Stops arm_other_threads(); returns whether any thread reached its n-th allocation.
bool disarm_other_threads();

// While one lives, allocations of the current thread are neither counted nor failed: a
// test's own code that runs on a library thread (a custom storage backend's callbacks).
class Unarmed {
 public:
  Unarmed();
  ~Unarmed();
  Unarmed(const Unarmed&) = delete;
  Unarmed& operator=(const Unarmed&) = delete;
};

// Allocations seen by the current (or last) armed window of this thread.
uint64_t armed_count();

// Live allocations made on this thread minus those freed on it, counted at all
// times (armed or not) by every allocation function the hook replaces. Two
// readings around a call tell whether it left memory behind.
int64_t live_allocations();

// True when malloc and friends are interposed (false under ASan / TSan / MSan,
// where only operator new is counted).
bool counts_malloc();

}  // namespace kvfault
