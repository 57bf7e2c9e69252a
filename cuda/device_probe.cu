// Device probe for CUDA builds. With static cudart the library loads on
// machines without a driver; every query then reports "no device".
#include <cuda_runtime.h>

#include <string>

#include "backend/device.hpp"

namespace kvp::backend {
namespace {

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

}  // namespace

int cuda_device_count() {
  int count = 0;  // cudaGetDeviceCount leaves it untouched on error (no driver)
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return count;
}

Status cuda_check_device(int index) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return Status::cuda("device cuda:" + std::to_string(index) + ": no usable CUDA device (" + cuda_text(e) + ")");
  }
  if (index >= count) {
    return Status::cuda("device cuda:" + std::to_string(index) + ": only " + std::to_string(count) +
                        " CUDA device(s) visible");
  }
  return Status::ok();
}

Status cuda_memory(int index, MemoryInfo* out) {
  KVPOOL_RETURN_IF_ERROR(cuda_check_device(index));
  int previous = 0;
  cudaGetDevice(&previous);
  cudaError_t e = cudaSetDevice(index);
  size_t free_bytes = 0, total_bytes = 0;
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    return Status::cuda("device cuda:" + std::to_string(index) + ": cudaMemGetInfo failed (" + cuda_text(e) + ")");
  }
  out->free_bytes = free_bytes;
  out->total_bytes = total_bytes;
  return Status::ok();
}

}  // namespace kvp::backend
