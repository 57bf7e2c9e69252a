// DeviceFault in builds without CUDA (KVPOOL_WITH_CUDA=OFF): no CUDA pool can
// exist, so make() refuses and the other members are never reached.
#include "backend/device_fault.hpp"

namespace kvp::backend {

Status DeviceFault::make(int device, std::unique_ptr<DeviceFault>*) {
  return Status::unsupported("device cuda:" + std::to_string(device) +
                             ": this build of kvpool has no CUDA backend (configured with KVPOOL_WITH_CUDA=OFF)");
}

DeviceFault::~DeviceFault() = default;

Status DeviceFault::status(const char*) const { return Status::ok(); }

Status DeviceFault::status_after_sync(void*) const { return Status::ok(); }

Status DeviceFault::clear() { return Status::ok(); }

}  // namespace kvp::backend
