// The C boundary: thread-local error detail and the exception guard that every
// extern "C" entry point runs its body in.
#pragma once

#include <cerrno>
#include <exception>
#include <new>
#include <string>
#include <system_error>

#include "kvpool/status.h"
#include "util/status.hpp"

namespace kvp::capi {

// Records `message` as this thread's last error and returns `code`.
kvpool_status fail(kvpool_status code, const std::string& message);

// Records a failed Status (no-op for OK) and returns its code.
kvpool_status report(const Status& status);

// Records function + what + detail as the last error without throwing: when memory
// runs out for the message, it keeps the function name (or nothing). For the catch
// handlers of guarded(), where a throwing message would terminate the process.
kvpool_status fail_noexcept(kvpool_status code, const char* function, const char* what,
                            const char* detail = "") noexcept;

// Runs `body` (returning Status) so that no exception escapes into C callers.
template <class Body>
kvpool_status guarded(const char* function, Body&& body) noexcept {
  try {
    const Status status = body();
    // Memory shortages reported as a status (a failed calloc, a failed parse) name the call too.
    if (status.code() == KVPOOL_ERR_HOST_MEMORY) return fail(status.code(), std::string(function) + ": " + status.message());
    return report(status);
  } catch (const std::bad_alloc&) {
    return fail_noexcept(KVPOOL_ERR_HOST_MEMORY, function, ": out of host memory");
  } catch (const std::system_error& e) {
    // std::thread reports a thread it could not start (the storage tier's, started on
    // first use) as EAGAIN: the process is out of memory or threads, not a library bug.
    const int code = e.code().value();
    if (code == EAGAIN || code == ENOMEM) {
      return fail_noexcept(KVPOOL_ERR_HOST_MEMORY, function, ": out of host resources: ", e.what());
    }
    return fail_noexcept(KVPOOL_ERR_INTERNAL, function, ": unexpected exception: ", e.what());
  } catch (const std::exception& e) {
    return fail_noexcept(KVPOOL_ERR_INTERNAL, function, ": unexpected exception: ", e.what());
  } catch (...) {
    return fail_noexcept(KVPOOL_ERR_INTERNAL, function, ": unexpected non-standard exception");
  }
}

}  // namespace kvp::capi
