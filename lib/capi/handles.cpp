#include "capi/handles.hpp"

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
  return true;
}

bool is_live_handle(const void* handle, HandleKind kind) {
  if (handle == nullptr) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.find(handle);
  return it != r.live.end() && it->second == kind;
}

}  // namespace kvp::capi
