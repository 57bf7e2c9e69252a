// The allocation hook of alloc_injection.hpp. Linked into the fault test
// executable only: its definitions of operator new / delete (and, without a
// sanitizer, of malloc and friends) interpose over those of libstdc++ and glibc
// for every shared object of the process, libkvpool.so included.
//
// Under AddressSanitizer (and the other malloc-owning sanitizers) the sanitizer
// runtime must keep malloc, so only operator new / delete are replaced there and
// forward to malloc / free; allocations that go straight to malloc or calloc
// (cJSON, the CPU backend's pool buffers) are then not counted. ASan's leak
// checker still sees everything.
#include "alloc_injection.hpp"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVFAULT_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define KVFAULT_SANITIZER 1
#endif
#endif
#ifndef KVFAULT_SANITIZER
#define KVFAULT_SANITIZER 0
#endif

#if !KVFAULT_SANITIZER
// glibc's own entry points, which malloc() and friends would call.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}
#endif

namespace {

// Plain thread_local integers in the executable: static TLS, no allocation on access.
thread_local bool t_armed = false;
thread_local bool t_fired = false;
thread_local uint64_t t_target = 0;
thread_local uint64_t t_count = 0;
thread_local bool t_sticky = false;
thread_local int64_t t_live = 0;
thread_local int t_unarmed = 0;  // Unarmed scopes (and print_stack) on this thread

// arm_other_threads(): process-wide, read by every thread on each allocation. Each arming
// starts a new epoch; a thread that sees a new epoch starts its own count from zero.
std::atomic<bool> g_others_armed{false};
std::atomic<uint64_t> g_others_epoch{0};
std::atomic<uint64_t> g_others_target{0};
std::atomic<bool> g_others_sticky{false};
std::atomic<bool> g_others_fired{false};
std::atomic<bool> g_others_new_only{false};
thread_local bool t_arms_others = false;  // this thread armed the others: not counted
thread_local uint64_t t_others_epoch = 0;
thread_local uint64_t t_others_count = 0;

// KVFAULT_TRACE=1 in the environment: print the stack of each injected failure
// (to find the allocation behind a violation). Read once, before arming.
bool trace_enabled() {
  static const bool on = std::getenv("KVFAULT_TRACE") != nullptr;
  return on;
}

void print_stack() noexcept {
  ++t_unarmed;  // backtrace() may allocate
  void* frames[32];
  const int n = backtrace(frames, 32);
  const char header[] = "[kvfault] injected allocation failure at:\n";
  (void)!write(2, header, sizeof(header) - 1);
  backtrace_symbols_fd(frames, n, 2);
  --t_unarmed;
}

// arm_other_threads(): counts one allocation of a thread other than the arming one.
bool other_thread_should_fail(bool from_new) noexcept {
  if (t_arms_others || (!from_new && g_others_new_only.load(std::memory_order_relaxed))) return false;
  const uint64_t epoch = g_others_epoch.load(std::memory_order_acquire);
  if (t_others_epoch != epoch) {
    t_others_epoch = epoch;
    t_others_count = 0;
  }
  const uint64_t target = g_others_target.load(std::memory_order_relaxed);
  if (++t_others_count == target || (g_others_sticky.load(std::memory_order_relaxed) && t_others_count > target)) {
    if (trace_enabled()) print_stack();
    g_others_fired.store(true, std::memory_order_relaxed);
    return true;
  }
  return false;
}

// Counts one allocation attempt (`from_new`: by operator new); true if this one must fail.
inline bool should_fail(bool from_new = false) noexcept {
  if (t_unarmed > 0) return false;
  if (g_others_armed.load(std::memory_order_acquire) && other_thread_should_fail(from_new)) return true;
  if (!t_armed) return false;
  if (++t_count == t_target || (t_sticky && t_count > t_target)) {
    if (!t_fired && trace_enabled()) print_stack();
    t_fired = true;
    return true;
  }
  return false;
}

inline void* raw_malloc(size_t n) noexcept {
#if KVFAULT_SANITIZER
  return std::malloc(n);
#else
  return __libc_malloc(n);
#endif
}

inline void* raw_memalign(size_t align, size_t n) noexcept {
#if KVFAULT_SANITIZER
  void* p = nullptr;
  return posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n) == 0 ? p : nullptr;
#else
  return __libc_memalign(align, n);
#endif
}

inline void raw_free(void* p) noexcept {
#if KVFAULT_SANITIZER
  std::free(p);
#else
  __libc_free(p);
#endif
}

inline void* counted(void* p) noexcept {
  if (p != nullptr) ++t_live;
  return p;
}

inline void release(void* p) noexcept {
  if (p == nullptr) return;
  --t_live;
  raw_free(p);
}

void* new_impl(size_t n) noexcept {
  if (should_fail(true)) return nullptr;
  return counted(raw_malloc(n == 0 ? 1 : n));
}

void* new_aligned_impl(size_t n, std::align_val_t a) noexcept {
  if (should_fail(true)) return nullptr;
  return counted(raw_memalign(static_cast<size_t>(a), n == 0 ? 1 : n));
}

}  // namespace

namespace kvfault {

void arm(uint64_t n) {
  (void)trace_enabled();
  t_count = 0;
  t_target = n;
  t_fired = false;
  t_sticky = false;
  t_armed = true;
}

void arm_sticky(uint64_t n) {
  arm(n);
  t_sticky = true;
}

bool disarm() {
  t_armed = false;
  return t_fired;
}

void arm_other_threads(uint64_t n, bool sticky, bool new_only) {
  (void)trace_enabled();
  t_arms_others = true;
  g_others_target.store(n, std::memory_order_relaxed);
  g_others_sticky.store(sticky, std::memory_order_relaxed);
  g_others_new_only.store(new_only, std::memory_order_relaxed);
  g_others_fired.store(false, std::memory_order_relaxed);
  g_others_epoch.fetch_add(1, std::memory_order_release);
  g_others_armed.store(true, std::memory_order_release);
}

bool disarm_other_threads() {
  g_others_armed.store(false, std::memory_order_release);
  t_arms_others = false;
  return g_others_fired.load(std::memory_order_relaxed);
}

Unarmed::Unarmed() { ++t_unarmed; }
Unarmed::~Unarmed() { --t_unarmed; }

uint64_t armed_count() { return t_count; }

int64_t live_allocations() { return t_live; }

bool counts_malloc() { return !KVFAULT_SANITIZER; }

}  // namespace kvfault

// ---- operator new / delete -------------------------------------------------

void* operator new(size_t n) {
  void* p = new_impl(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) {
  void* p = new_impl(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return new_impl(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return new_impl(n); }
void* operator new(size_t n, std::align_val_t a) {
  void* p = new_aligned_impl(n, a);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n, std::align_val_t a) {
  void* p = new_aligned_impl(n, a);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return new_aligned_impl(n, a); }
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept { return new_aligned_impl(n, a); }

void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }

// ---- the C allocation functions (not under a sanitizer) ---------------------

#if !KVFAULT_SANITIZER
extern "C" {

void* malloc(size_t n) {
  if (should_fail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return counted(__libc_malloc(n));
}

void* calloc(size_t count, size_t size) {
  if (should_fail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return counted(__libc_calloc(count, size));
}

void* realloc(void* p, size_t n) {
  if (p == nullptr) return malloc(n);
  if (n == 0) {
    release(p);
    return nullptr;
  }
  if (should_fail()) {
    errno = ENOMEM;
    return nullptr;  // p stays valid, as with a real failure
  }
  return __libc_realloc(p, n);  // one block in, one block out: live count unchanged
}

void free(void* p) { release(p); }

int posix_memalign(void** out, size_t align, size_t n) {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  if (should_fail()) return ENOMEM;
  void* p = counted(__libc_memalign(align, n));
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* aligned_alloc(size_t align, size_t n) {
  if (should_fail()) {
    errno = ENOMEM;
    return nullptr;
  }
  return counted(__libc_memalign(align, n));
}

void* memalign(size_t align, size_t n) { return aligned_alloc(align, n); }

}  // extern "C"
#endif
