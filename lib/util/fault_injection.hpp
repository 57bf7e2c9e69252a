// Test-only failure injection for device work: the n-th device allocation, kernel
// launch or host<->device copy of the CUDA backend fails, before anything happens on
// the device (issue 9; docs/reliability.md).
//
// Only builds configured with -DKVPOOL_FAULT_INJECTION=ON count; everywhere else
// device_call() is an inline no-op that the compiler removes. In those builds the
// environment variable KVPOOL_FAULT_DEVICE_CALL selects the call: "<n>" or "<n>/<tag>".
// Counting restarts whenever its value changes, so a test makes every n fail in turn
// by setting "<n>/<trial>" before each attempt. Host allocations are injected by the
// tests themselves (tests/fault replaces operator new and malloc in the test program).
#pragma once

#include "util/status.hpp"

namespace kvp::inject {

#ifdef KVPOOL_FAULT_INJECTION
// Counts one device allocation, launch or copy named `what`; a CUDA-error Status for the
// selected one ("<what>: injected failure ..."), OK otherwise.
Status device_call(const char* what);
#else
inline Status device_call(const char*) { return Status::ok(); }
#endif

}  // namespace kvp::inject

// Returns from the enclosing function when the injection selects this device call.
#define KVP_INJECTION_POINT(what) KVPOOL_RETURN_IF_ERROR(::kvp::inject::device_call(what))
