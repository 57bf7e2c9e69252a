// The CPU backend: host memory and memcpy. Complete, and the reference the
// CUDA backend is compared with.
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend.hpp"
#include "kvpool/buffers.h"

namespace kvp::backend {
namespace {

class CpuBackend final : public Backend {
 public:
  int device_type() const override { return KVPOOL_DEVICE_CPU; }
  int device_id() const override { return 0; }
  const char* name() const override { return "cpu"; }

  Status allocate(size_t bytes, void** out) override {
    // calloc: large pools get lazily zeroed pages from the kernel.
    void* p = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (p == nullptr) {
      return Status(KVPOOL_ERR_HOST_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    }
    *out = p;
    return Status::ok();
  }
  void deallocate(void* p) noexcept override { std::free(p); }
  Status allocate_host(size_t bytes, void** out) override {
    // aligned_alloc wants a multiple of the alignment; the pages stay untouched until used.
    const size_t rounded = (bytes == 0 ? 1 : bytes + 255) / 256 * 256;
    if (rounded < bytes) {
      return Status(KVPOOL_ERR_HOST_MEMORY, "host tier allocation of " + std::to_string(bytes) + " bytes overflows");
    }
    void* p = std::aligned_alloc(256, rounded);
    if (p == nullptr) {
      return Status(KVPOOL_ERR_HOST_MEMORY,
                    "cannot allocate " + std::to_string(bytes) + " bytes of host memory for the host tier");
    }
    *out = p;
    return Status::ok();
  }
  void deallocate_host(void* p) noexcept override { std::free(p); }
  Status zero(void* dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::ok();
  }
  Status copy_rows(const RowCopy& c) override {
    auto* dst = static_cast<char*>(c.dst);
    const auto* src = static_cast<const char*>(c.src);
    for (size_t i = 0; i < c.n; ++i) {
      const size_t d = c.dst_rows != nullptr ? static_cast<size_t>(c.dst_rows[i]) : i;
      const size_t s = c.src_rows != nullptr ? static_cast<size_t>(c.src_rows[i]) : i;
      std::memmove(dst + d * c.dst_stride, src + s * c.src_stride, c.row_bytes);
    }
    return Status::ok();
  }
  // Host and "device" memory are the same here.
  Status scatter_from_host(const RowCopy& c) override { return copy_rows(c); }
  Status gather_to_host(const RowCopy& c) override { return copy_rows(c); }
  Status to_host(void* host, const void* device, size_t bytes) override {
    std::memcpy(host, device, bytes);
    return Status::ok();
  }
  Status from_host(void* device, const void* host, size_t bytes) override {
    std::memcpy(device, host, bytes);
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kvp::backend
