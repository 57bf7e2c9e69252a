// Device probe for builds without CUDA (KVPOOL_WITH_CUDA=OFF).
#include "backend/backend.hpp"
#include "backend/device.hpp"

namespace kvp::backend {

int cuda_device_count() { return 0; }

Status cuda_check_device(int index) {
  return Status::unsupported("device cuda:" + std::to_string(index) +
                             ": this build of kvpool has no CUDA backend (configured with KVPOOL_WITH_CUDA=OFF)");
}

Status cuda_memory(int index, MemoryInfo*) { return cuda_check_device(index); }

Status make_cuda_backend(int device, std::unique_ptr<Backend>*) { return cuda_check_device(device); }

}  // namespace kvp::backend
