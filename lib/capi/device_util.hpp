// Helpers of the device.h entry points: whether a pool runs device work, and
// the preamble every stream-ordered call starts with (the sticky fault check).
#pragma once

#include "backend/device_fault.hpp"
#include "capi/pool_handle.hpp"
#include "kvpool/buffers.h"
#include "pool/kv_device.hpp"

namespace kvp::capi {

// True for CUDA pools: device.h arrays are device memory and work is enqueued.
// CPU pools run the host calls at once instead.
inline bool on_device(const ::kvpool* p) { return p->backend->device_type() == KVPOOL_DEVICE_CUDA; }

// Refuses work on a faulted pool (a plain load of the mapped flag, no sync)
// and fills in where the kernels of operation `op` report faults.
inline Status device_work(const ::kvpool* p, backend::FaultOp op, pool::dev::FaultSink* sink) {
  const backend::DeviceFault& f = *p->device_fault;
  if (f.raised()) return f.status("the pool");
  sink->record = f.record();
  sink->host_flag = f.host_flag();
  sink->op = op;
  return Status::ok();
}

}  // namespace kvp::capi
