// The C boundary: thread-local error detail and the exception guard that every
// extern "C" entry point runs its body in.
#pragma once

#include <exception>
#include <new>
#include <string>

#include "kvpool/status.h"
#include "util/status.hpp"

namespace kvp::capi {

// Records `message` as this thread's last error and returns `code`.
kvpool_status fail(kvpool_status code, const std::string& message);

// Records a failed Status (no-op for OK) and returns its code.
kvpool_status report(const Status& status);

// Runs `body` (returning Status) so that no exception escapes into C callers.
template <class Body>
kvpool_status guarded(const char* function, Body&& body) noexcept {
  try {
    const Status status = body();
    // Memory shortages reported as a status (a failed calloc, a failed parse) name the call too.
    if (status.code() == KVPOOL_ERR_HOST_MEMORY) return fail(status.code(), std::string(function) + ": " + status.message());
    return report(status);
  } catch (const std::bad_alloc&) {
    return fail(KVPOOL_ERR_HOST_MEMORY, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(KVPOOL_ERR_INTERNAL, std::string(function) + ": unexpected exception: " + e.what());
  } catch (...) {
    return fail(KVPOOL_ERR_INTERNAL, std::string(function) + ": unexpected non-standard exception");
  }
}

}  // namespace kvp::capi
