// What the library needs to know about devices before any pool exists:
// how many CUDA devices there are and how much memory a device has.
// The CUDA implementations live in cuda/device_probe.cu; builds without CUDA
// link backend/cuda_stub.cpp instead.
#pragma once

#include <cstdint>

#include "util/status.hpp"

namespace kvp::backend {

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// 0 without CUDA, without a driver or without devices; never fails.
int cuda_device_count();

// OK if CUDA device `index` can be used; otherwise why not (KVPOOL_ERR_CUDA
// with the CUDA error text, or KVPOOL_ERR_UNSUPPORTED in a build without CUDA).
Status cuda_check_device(int index);

// Free/total memory of CUDA device `index`.
Status cuda_memory(int index, MemoryInfo* out);

// Available/total physical memory of the host (from /proc/meminfo).
Status host_memory(MemoryInfo* out);

}  // namespace kvp::backend
