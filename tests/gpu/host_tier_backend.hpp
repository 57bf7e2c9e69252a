// A Backend that only allocates host memory, for host pools made outside a kvpool
// pool (gpu_host_tier_test.cpp, the --host-tier benchmark): pinned for the CUDA
// transfer, plain for the CPU reference.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

#include "backend/backend.hpp"
#include "kvpool/buffers.h"

namespace kvp::test {

class TierBackend final : public backend::Backend {
 public:
  explicit TierBackend(bool pinned) : pinned_(pinned) {}
  int device_type() const override { return pinned_ ? KVPOOL_DEVICE_CUDA : KVPOOL_DEVICE_CPU; }
  int device_id() const override { return 0; }
  const char* name() const override { return pinned_ ? "test-pinned" : "test-host"; }
  Status allocate(size_t, void**) override { return Status::unsupported("host-only test backend"); }
  void deallocate(void*) noexcept override {}
  Status allocate_host(size_t bytes, void** out) override {
    if (pinned_) {
      const cudaError_t e = cudaHostAlloc(out, bytes, cudaHostAllocPortable);
      return e == cudaSuccess ? Status::ok() : Status::cuda(std::string("cudaHostAlloc: ") + cudaGetErrorString(e));
    }
    *out = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    return *out != nullptr ? Status::ok() : Status::out_of_memory("aligned_alloc");
  }
  void deallocate_host(void* p) noexcept override {
    if (pinned_) {
      cudaFreeHost(p);
    } else {
      std::free(p);
    }
  }
  Status zero(void*, size_t) override { return Status::unsupported("host-only test backend"); }
  Status copy_rows(const backend::RowCopy&) override { return Status::unsupported("host-only test backend"); }
  Status scatter_from_host(const backend::RowCopy&) override { return Status::unsupported("host-only test backend"); }
  Status gather_to_host(const backend::RowCopy&) override { return Status::unsupported("host-only test backend"); }
  Status to_host(void*, const void*, size_t) override { return Status::unsupported("host-only test backend"); }
  Status from_host(void*, const void*, size_t) override { return Status::unsupported("host-only test backend"); }

 private:
  bool pinned_;
};

}  // namespace kvp::test
