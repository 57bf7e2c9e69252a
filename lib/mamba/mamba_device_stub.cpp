// Builds without CUDA: the stream-ordered mamba jobs only run on CUDA pools,
// which such a build cannot create; they fail cleanly if reached.
#include "mamba/mamba_device.hpp"

namespace kvp::mamba::dev {
namespace {
Status no_cuda() { return Status::unsupported("this kvpool was built without CUDA"); }
}  // namespace

Status zero_slots(const States&, const int32_t*, size_t, void*) { return no_cuda(); }
Status copy_slot(const States&, int32_t, int32_t, void*) { return no_cuda(); }
Status copy_slots(const States&, const int32_t*, const int32_t*, size_t, void*, const pool::dev::FaultSink&) {
  return no_cuda();
}

}  // namespace kvp::mamba::dev
