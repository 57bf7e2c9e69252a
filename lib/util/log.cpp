#include "util/log.hpp"

#include <atomic>
#include <mutex>
#include <shared_mutex>

#include "util/callback_scope.hpp"

namespace kvp::log {
namespace {

constexpr int32_t kOff = -1;

struct Sink {
  std::shared_mutex mutex;  // shared: a callback running; exclusive: set_callback()
  kvpool_log_callback callback = nullptr;
  void* user_data = nullptr;
};

// Leaked on purpose: pools may be destroyed (and log) from static destructors or from
// finalizer threads of garbage-collected runtimes after main() returns.
Sink& sink() {
  static Sink* s = new Sink();
  return *s;
}

// The most verbose level delivered, kOff without a callback: read before anything else.
std::atomic<int32_t> g_level{kOff};

// Set while this thread runs the callback: its own kvpool calls log nothing (a message
// would re-enter the callback, and set_callback would wait for itself).
thread_local bool t_in_callback = false;

}  // namespace

bool enabled(kvpool_log_level level) noexcept {
  return static_cast<int32_t>(level) <= g_level.load(std::memory_order_relaxed) && !t_in_callback;
}

void write(kvpool_log_level level, const std::string& message) noexcept {
  if (t_in_callback) return;
  Sink& s = sink();
  std::shared_lock<std::shared_mutex> lock(s.mutex);
  // Checked again under the lock: the callback may have been cleared since enabled().
  if (s.callback == nullptr || static_cast<int32_t>(level) > g_level.load(std::memory_order_relaxed)) return;
  t_in_callback = true;
  {
    // A call the callback makes into a thread-safe pool fails cleanly instead of waiting for
    // a lock that this thread, or one waiting for this storage thread, holds.
    const util::UserCallbackScope user_code;
    s.callback(s.user_data, level, message.c_str());
  }
  t_in_callback = false;
}

Status set_callback(kvpool_log_callback callback, void* user_data, int32_t value) {
  if (t_in_callback) {
    return Status::invalid("kvpool_set_log_callback: called from inside a log callback");
  }
  if (callback != nullptr && (value < KVPOOL_LOG_ERROR || value > KVPOOL_LOG_DEBUG)) {
    return Status::invalid("kvpool_set_log_callback: level " + std::to_string(value) +
                           " is not a kvpool_log_level, expected 0 (KVPOOL_LOG_ERROR) to 3 (KVPOOL_LOG_DEBUG)");
  }
  Sink& s = sink();
  std::unique_lock<std::shared_mutex> lock(s.mutex);  // waits for every running callback
  s.callback = callback;
  s.user_data = callback != nullptr ? user_data : nullptr;
  g_level.store(callback != nullptr ? value : kOff, std::memory_order_relaxed);
  return Status::ok();
}

}  // namespace kvp::log
