// The library's diagnostics (kvpool/log.h): one process-wide callback, off by default.
//
// Call sites go through KVPOOL_LOG, which evaluates its message (formatting, string
// building) only when a callback is set and the level passes: with logging off a log
// site costs one relaxed atomic load.
#pragma once

#include <cstdint>
#include <string>

#include "kvpool/log.h"
#include "util/status.hpp"

namespace kvp::log {

// True when a callback is set that takes `level` (the gate in front of every message).
bool enabled(kvpool_log_level level) noexcept;

// Delivers `message` to the callback if it takes `level`. Runs the callback under a shared
// lock, so that set_callback() returns only once no thread is inside the previous one; a
// message logged from inside the callback (a kvpool call it makes) is dropped.
void write(kvpool_log_level level, const std::string& message) noexcept;

// kvpool_set_log_callback(): refused from inside a callback (it would wait for itself).
// `level` is the int the caller passed (any value: it is checked here).
Status set_callback(kvpool_log_callback callback, void* user_data, int32_t level);

}  // namespace kvp::log

// Logs the std::string expression `message` at `level`; `message` is evaluated only when
// the level is enabled, and a failure to build it (no memory) drops the message.
#define KVPOOL_LOG(level, message)                             \
  do {                                                         \
    if (::kvp::log::enabled(level)) {                          \
      try {                                                    \
        ::kvp::log::write((level), (message));                 \
      } catch (...) {                                          \
      }                                                        \
    }                                                          \
  } while (0)
