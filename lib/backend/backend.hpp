// The small interface between the pool logic and the memory it runs on.
// Policy (which slots, which rows, which order) is computed once, in the
// layers above; a backend only allocates memory and moves bytes. The CPU
// backend is complete; the CUDA backend implements the same operations with
// kernels and must give identical bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kvpool/pool.h"
#include "util/status.hpp"

namespace kvp::backend {

// A batch of row copies: dst row `dst_rows[i]` (or i when dst_rows is NULL)
// receives `row_bytes` bytes from src row `src_rows[i]` (or i). Rows are
// addressed as base + row * stride. Every row index has been range-checked,
// the index arrays are host memory, and no destination row overlaps a source
// row (callers that move rows in place gather into scratch first). When
// dst_rows names a row more than once, the last copy into it wins, on every
// backend (the CPU loop's natural result; CUDA drops the earlier copies).
struct RowCopy {
  void* dst;
  size_t dst_stride;
  const int64_t* dst_rows;  // NULL: rows 0..n-1
  const void* src;
  size_t src_stride;
  const int64_t* src_rows;  // NULL: rows 0..n-1
  size_t row_bytes;
  size_t n;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int device_type() const = 0;  // KVPOOL_DEVICE_CPU or KVPOOL_DEVICE_CUDA
  virtual int device_id() const = 0;
  virtual const char* name() const = 0;

  // Zero-filled memory of the backend's device.
  virtual Status allocate(size_t bytes, void** out) = 0;
  virtual void deallocate(void* p) noexcept = 0;
  // Host memory for the host tier (lib/host/host_pool.hpp), 256-byte aligned and not
  // zero-filled (a tier of many GiB is not touched up front): plain memory on the CPU
  // backend, pinned (page-locked, mapped for every device) on CUDA, so the copy engines
  // and kernels can reach it directly.
  virtual Status allocate_host(size_t bytes, void** out) = 0;
  virtual void deallocate_host(void* p) noexcept = 0;
  virtual Status zero(void* dst, size_t bytes) = 0;
  // Zeroes n rows of row_bytes, `stride` bytes apart (a mamba state's row in every layer).
  virtual Status zero_rows(void* dst, size_t stride, size_t row_bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) KVPOOL_RETURN_IF_ERROR(zero(static_cast<char*>(dst) + i * stride, row_bytes));
    return Status::ok();
  }
  virtual Status copy_rows(const RowCopy& copy) = 0;  // device to device
  // Host rows into device rows: `copy.src` is host memory read as rows
  // 0..n-1 (src_rows must be NULL); `copy.dst` is device memory.
  virtual Status scatter_from_host(const RowCopy& copy) = 0;
  // Device rows into host rows: `copy.dst` is host memory written as rows
  // 0..n-1 (dst_rows must be NULL); `copy.src` is device memory.
  virtual Status gather_to_host(const RowCopy& copy) = 0;
  virtual Status to_host(void* host, const void* device, size_t bytes) = 0;
  virtual Status from_host(void* device, const void* host, size_t bytes) = 0;
};

// Owns one allocation of a backend (RAII).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& o) noexcept { *this = std::move(o); }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    reset();
    backend_ = o.backend_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.backend_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
    return *this;
  }
  ~DeviceMemory() { reset(); }

  static Status make(Backend* backend, size_t bytes, DeviceMemory* out) {
    void* p = nullptr;
    KVPOOL_RETURN_IF_ERROR(backend->allocate(bytes, &p));
    out->reset();
    out->backend_ = backend;
    out->data_ = p;
    out->bytes_ = bytes;
    return Status::ok();
  }
  void reset() noexcept {
    if (backend_ != nullptr && data_ != nullptr) backend_->deallocate(data_);
    backend_ = nullptr;
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data() const { return data_; }
  template <class T>
  T* as() const { return static_cast<T*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
// `inner`, except that allocate/deallocate go through the caller's callbacks
// (kvpool_create_with_allocator); memory is zero-filled by `inner`.
std::unique_ptr<Backend> with_allocator(std::unique_ptr<Backend> inner, const kvpool_allocator& callbacks);
// CUDA device `device` (cuda/cuda_backend.cu); KVPOOL_ERR_UNSUPPORTED in builds without CUDA.
Status make_cuda_backend(int device, std::unique_ptr<Backend>* out);

}  // namespace kvp::backend
