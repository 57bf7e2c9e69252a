// Device-side half of the fault facility (lib/backend/device_fault.hpp): every
// stream-ordered kernel of a pool starts with `if (kvp_faulted(rec)) return;`
// and reports bad input with kvp_raise() instead of corrupting the pool.
#pragma once

#include <cstdint>

#include "backend/device_fault.hpp"

// True once any kernel of the pool raised a fault (the record lives in device memory: an L2 hit).
__device__ __forceinline__ bool kvp_faulted(const kvp::backend::FaultRecord* rec) {
  return *reinterpret_cast<const volatile int32_t*>(&rec->code) != 0;
}

// Records the first fault (later ones are dropped) and sets the host flag.
// `code` is claimed first so that concurrent raisers never mix their fields;
// the system fence orders the record before the flag the host polls.
// Out of line: a kernel checks its input at many places and a good launch raises
// nothing, so one call instruction per check keeps the code its path fetches small.
__device__ __noinline__ inline void kvp_raise(kvp::backend::FaultRecord* rec, int* host_flag, int32_t code,
                                              int32_t op, int64_t index, int64_t value, int64_t detail) {
  if (atomicCAS(reinterpret_cast<int*>(&rec->code), 0, static_cast<int>(code)) != 0) return;
  rec->op = op;
  rec->index = index;
  rec->value = value;
  rec->detail = detail;
  __threadfence_system();
  *reinterpret_cast<volatile int*>(host_flag) = 1;
}

// The same without a second number (detail = 0).
__device__ __noinline__ inline void kvp_raise(kvp::backend::FaultRecord* rec, int* host_flag, int32_t code, int32_t op,
                                          int64_t index, int64_t value) {
  kvp_raise(rec, host_flag, code, op, index, value, 0);
}
