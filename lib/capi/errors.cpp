#include "capi/errors.hpp"

#include <cstring>

#include "util/log.hpp"

namespace kvp::capi {
namespace {
// One message per thread; valid until this thread's next failing call.
thread_local std::string t_last_error;

// How loud a failed call is in the log (kvpool/log.h): errors for bugs and broken
// hardware, warnings for the host's troubles, debug for the rest (a caller's mistake, or
// recoverable: out of pool memory, a buffer to enlarge).
kvpool_log_level failure_level(kvpool_status code) {
  switch (code) {
    case KVPOOL_ERR_INTERNAL:
    case KVPOOL_ERR_CUDA:
    case KVPOOL_ERR_DEVICE_FAULT:
      return KVPOOL_LOG_ERROR;
    case KVPOOL_ERR_HOST_MEMORY:
    case KVPOOL_ERR_IO:
      return KVPOOL_LOG_WARN;
    default:
      return KVPOOL_LOG_DEBUG;
  }
}

// "failed call (invalid argument): kvalloc_free: slot 7 is not allocated".
void log_failure(kvpool_status code) noexcept {
  KVPOOL_LOG(failure_level(code), std::string("failed call (") + kvpool_status_string(code) + "): " + t_last_error);
}
}  // namespace

kvpool_status fail(kvpool_status code, const std::string& message) {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();  // no memory for the message: keep the status
  }
  log_failure(code);
  return code;
}

kvpool_status fail_noexcept(kvpool_status code, const char* function, const char* what, const char* detail) noexcept {
  try {
    t_last_error.assign(function);
    t_last_error.append(what);
    t_last_error.append(detail);
  } catch (...) {
    try {
      t_last_error.assign(function);  // short names fit the string's own buffer
    } catch (...) {
      t_last_error.clear();
    }
  }
  log_failure(code);
  return code;
}

kvpool_status report(const Status& status) {
  if (status.is_ok()) return KVPOOL_OK;
  return fail(status.code(), status.message());
}

}  // namespace kvp::capi

extern "C" {

KVPOOL_API const char* kvpool_status_string(kvpool_status status) {
  // C callers may pass any int (the documented "unknown status" case). Loading such a
  // value as the enum type is undefined in C++ (UBSan: "not a valid value for type"),
  // so the switch reads the argument's representation as an int.
  static_assert(sizeof(kvpool_status) == sizeof(int), "kvpool_status is int-sized");
  int code = 0;
  std::memcpy(&code, &status, sizeof(code));
  switch (code) {
    case KVPOOL_OK: return "ok";
    case KVPOOL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case KVPOOL_ERR_CONFIG: return "configuration error";
    case KVPOOL_ERR_OUT_OF_MEMORY: return "out of pool memory (recoverable)";
    case KVPOOL_ERR_CUDA: return "CUDA error";
    case KVPOOL_ERR_UNSUPPORTED: return "unsupported";
    case KVPOOL_ERR_INTERNAL: return "internal error";
    case KVPOOL_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case KVPOOL_ERR_IO: return "I/O error";
    case KVPOOL_ERR_HOST_MEMORY: return "out of host memory";
    case KVPOOL_ERR_CHECK_FAILED: return "self-check failed";
    case KVPOOL_ERR_DEVICE_FAULT: return "device-side fault";
  }
  return "unknown status";
}

KVPOOL_API const char* kvpool_last_error(void) { return kvp::capi::t_last_error.c_str(); }

}  // extern "C"
