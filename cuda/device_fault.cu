// Host side of the fault facility on CUDA: the record in device memory, the
// flag in mapped pinned host memory, and turning them into a Status.
#include <cuda_runtime.h>

#include <string>

#include "backend/device_fault.hpp"
#include "util/fault_injection.hpp"

namespace kvp::backend {
namespace {

Status cuda_error(cudaError_t e, const std::string& what) {
  return Status::cuda(what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// The pool's device must be current for allocations, copies and syncs.
cudaError_t use_device(int device) {
  int current = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess && current == device) return cudaSuccess;
  return cudaSetDevice(device);
}

}  // namespace

Status DeviceFault::make(int device, std::unique_ptr<DeviceFault>* out) {
  std::unique_ptr<DeviceFault> f(new DeviceFault());
  f->device_ = device;
  cudaError_t e = use_device(device);
  if (e != cudaSuccess) return cuda_error(e, "cudaSetDevice");
  KVP_INJECTION_POINT("cudaMalloc (fault record)");
  e = cudaMalloc(reinterpret_cast<void**>(&f->record_), sizeof(FaultRecord));
  if (e != cudaSuccess) return cuda_error(e, "cudaMalloc (fault record)");
  e = cudaMemset(f->record_, 0, sizeof(FaultRecord));
  if (e != cudaSuccess) return cuda_error(e, "cudaMemset (fault record)");
  KVP_INJECTION_POINT("cudaHostAlloc (fault flag)");
  e = cudaHostAlloc(reinterpret_cast<void**>(&f->host_flag_), sizeof(int), cudaHostAllocMapped);
  if (e != cudaSuccess) return cuda_error(e, "cudaHostAlloc (fault flag)");
  *f->host_flag_ = 0;
  e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&f->device_flag_), f->host_flag_, 0);
  if (e != cudaSuccess) return cuda_error(e, "cudaHostGetDevicePointer (fault flag)");
  e = cudaDeviceSynchronize();  // the memset is done before any kernel reads the record
  if (e != cudaSuccess) return cuda_error(e, "cudaDeviceSynchronize");
  *out = std::move(f);
  return Status::ok();
}

DeviceFault::~DeviceFault() {
  use_device(device_);
  if (record_ != nullptr) cudaFree(record_);
  if (host_flag_ != nullptr) cudaFreeHost(host_flag_);
}

Status DeviceFault::status(const char* function) const {
  if (!raised()) return Status::ok();
  FaultRecord r{};
  cudaError_t e = use_device(device_);
  if (e == cudaSuccess) e = cudaMemcpy(&r, record_, sizeof(r), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_error(e, std::string(function) + ": reading the device fault record");
  return Status(KVPOOL_ERR_DEVICE_FAULT, describe_fault(r));
}

Status DeviceFault::status_after_sync(void* stream) const {
  cudaError_t e = use_device(device_);
  if (e == cudaSuccess) e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e != cudaSuccess) return cuda_error(e, "cudaStreamSynchronize");
  return status("kvpool_synchronize");
}

Status DeviceFault::clear() {
  cudaError_t e = use_device(device_);
  // Kernels still running could raise again after the reset: wait for the device first.
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemset(record_, 0, sizeof(FaultRecord));
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return cuda_error(e, "clearing the device fault record");
  *static_cast<volatile int*>(host_flag_) = 0;
  return Status::ok();
}

}  // namespace kvp::backend
