#include "capi/handles.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace kvp::capi {
namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<const void*, HandleKind> live;
};

// Leaked on purpose: handles may be destroyed from static destructors or
// finalizer threads of garbage-collected runtimes after main() returns.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Bumped by every unregister: a thread's last positive answer stays valid while it is
// unchanged, so repeated calls on one pool skip the lock and the lookup. (A handle being
// destroyed by another thread at that moment is a race with or without the cache.)
std::atomic<uint64_t> g_unregisters{0};

struct LastLive {
  const void* handle = nullptr;
  HandleKind kind{};
  uint64_t unregisters = 0;
};
thread_local LastLive t_last;

}  // namespace

void register_handle(const void* handle, HandleKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live[handle] = kind;
}

bool unregister_handle(const void* handle, HandleKind kind) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(handle);
  if (it == r.live.end() || it->second != kind) return false;
  r.live.erase(it);
  g_unregisters.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

bool is_live_handle(const void* handle, HandleKind kind) {
  if (handle == nullptr) return false;
  if (t_last.handle == handle && t_last.kind == kind &&
      t_last.unregisters == g_unregisters.load(std::memory_order_acquire)) {
    return true;
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(handle);
  if (it == r.live.end() || it->second != kind) return false;
  t_last = LastLive{handle, kind, g_unregisters.load(std::memory_order_acquire)};
  return true;
}

}  // namespace kvp::capi
