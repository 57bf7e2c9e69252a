// A backend whose allocations come from the caller (kvpool_create_with_allocator):
// engines that own the device memory (a caching allocator, a memory pool of
// their framework) hand it to kvpool through two callbacks. Everything except
// allocate/deallocate is forwarded to the real backend of the device.
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "kvpool/buffers.h"
#include "util/callback_scope.hpp"

namespace kvp::backend {
namespace {

class CallbackBackend final : public Backend {
 public:
  CallbackBackend(std::unique_ptr<Backend> inner, const kvpool_allocator& cb) : inner_(std::move(inner)), cb_(cb) {}

  // The caller's callbacks, as user code (util/callback_scope.hpp): a call into a
  // thread-safe pool from inside them is refused, not a deadlock on the lock this call holds.
  void* call_alloc(size_t bytes, int32_t type, int32_t id) {
    util::UserCallbackScope scope;
    return cb_.alloc(cb_.ctx, bytes, type, id);
  }
  void call_free(void* p, size_t bytes, int32_t type, int32_t id) noexcept {
    util::UserCallbackScope scope;
    cb_.free(cb_.ctx, p, bytes, type, id);
  }

  int device_type() const override { return inner_->device_type(); }
  int device_id() const override { return inner_->device_id(); }
  const char* name() const override { return inner_->name(); }

  Status allocate(size_t bytes, void** out) override {
    sizes_.reserve(sizes_.size() + 1);  // before the callback: recording p below must not throw
    void* p = call_alloc( bytes, device_type(), device_id());
    const bool device = device_type() == KVPOOL_DEVICE_CUDA;
    const auto fail = [&](const std::string& why) {
      const std::string m = "the allocator callback " + why + " for " + std::to_string(bytes) + " bytes";
      return device ? Status::cuda(m) : Status(KVPOOL_ERR_HOST_MEMORY, m);
    };
    if (p == nullptr) return fail("returned NULL");
    if (reinterpret_cast<uintptr_t>(p) % 256 != 0) {
      call_free(p, bytes, device_type(), device_id());
      return fail("returned memory that is not 256-byte aligned");
    }
    const Status st = inner_->zero(p, bytes);
    if (!st.is_ok()) {
      call_free(p, bytes, device_type(), device_id());
      return st;
    }
    sizes_.emplace_back(p, bytes);
    *out = p;
    return Status::ok();
  }
  void deallocate(void* p) noexcept override {
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i].first != p) continue;
      call_free(p, sizes_[i].second, device_type(), device_id());
      sizes_[i] = sizes_.back();
      sizes_.pop_back();
      return;
    }
  }
  // The host tier: pinned memory of a CUDA pool (DLPack's kDLCUDAHost) or plain memory of a
  // CPU pool. Not zero-filled: a tier of many GiB would be touched up front for nothing.
  Status allocate_host(size_t bytes, void** out) override {
    const int32_t type = host_type();
    host_sizes_.reserve(host_sizes_.size() + 1);  // before the callback: recording p below must not throw
    void* p = call_alloc( bytes, type, device_id());
    const auto fail = [&](const std::string& why) {
      return Status(KVPOOL_ERR_HOST_MEMORY, "the allocator callback " + why + " for " + std::to_string(bytes) +
                                                " bytes of host-tier memory (device_type " + std::to_string(type) +
                                                ")");
    };
    if (p == nullptr) return fail("returned NULL");
    if (reinterpret_cast<uintptr_t>(p) % 256 != 0) {
      call_free(p, bytes, type, device_id());
      return fail("returned memory that is not 256-byte aligned");
    }
    host_sizes_.emplace_back(p, bytes);
    *out = p;
    return Status::ok();
  }
  void deallocate_host(void* p) noexcept override {
    for (size_t i = 0; i < host_sizes_.size(); ++i) {
      if (host_sizes_[i].first != p) continue;
      call_free(p, host_sizes_[i].second, host_type(), device_id());
      host_sizes_[i] = host_sizes_.back();
      host_sizes_.pop_back();
      return;
    }
  }
  Status zero(void* dst, size_t bytes) override { return inner_->zero(dst, bytes); }
  Status zero_rows(void* dst, size_t stride, size_t row_bytes, size_t n) override {
    return inner_->zero_rows(dst, stride, row_bytes, n);
  }
  Status copy_rows(const RowCopy& c) override { return inner_->copy_rows(c); }
  Status scatter_from_host(const RowCopy& c) override { return inner_->scatter_from_host(c); }
  Status gather_to_host(const RowCopy& c) override { return inner_->gather_to_host(c); }
  Status to_host(void* host, const void* device, size_t bytes) override { return inner_->to_host(host, device, bytes); }
  Status from_host(void* device, const void* host, size_t bytes) override {
    return inner_->from_host(device, host, bytes);
  }

 private:
  int32_t host_type() const { return device_type() == KVPOOL_DEVICE_CUDA ? KVPOOL_DEVICE_CUDA_HOST : KVPOOL_DEVICE_CPU; }

  std::unique_ptr<Backend> inner_;
  kvpool_allocator cb_;
  // The callback's free needs the size; a pool holds a few dozen allocations.
  std::vector<std::pair<void*, size_t>> sizes_;
  std::vector<std::pair<void*, size_t>> host_sizes_;  // allocate_host's
};

}  // namespace

std::unique_ptr<Backend> with_allocator(std::unique_ptr<Backend> inner, const kvpool_allocator& callbacks) {
  return std::make_unique<CallbackBackend>(std::move(inner), callbacks);
}

}  // namespace kvp::backend
