// The CPU backend: host memory and memcpy. Complete, and the reference the
// CUDA backend is compared with.
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "backend/backend.hpp"
#include "kvpool/buffers.h"
#include "util/stream_copy.hpp"

namespace kvp::backend {
namespace {

class CpuBackend final : public Backend {
 public:
  int device_type() const override { return KVPOOL_DEVICE_CPU; }
  int device_id() const override { return 0; }
  const char* name() const override { return "cpu"; }

  Status allocate(size_t bytes, void** out) override {
    void* p = bytes >= kHugeMinBytes ? map_huge(bytes) : nullptr;
    // calloc: large pools get lazily zeroed pages from the kernel.
    if (p == nullptr) p = std::calloc(bytes == 0 ? 1 : bytes, 1);
    if (p == nullptr) {
      return Status(KVPOOL_ERR_HOST_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    }
    *out = p;
    return Status::ok();
  }
  void deallocate(void* p) noexcept override {
    {
      std::lock_guard<std::mutex> lock(mapped_mutex_);
      const auto it = mapped_.find(p);
      if (it != mapped_.end()) {
        munmap(p, it->second);
        mapped_.erase(it);
        return;
      }
    }
    std::free(p);
  }
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
    // Large batches (set_kv / get_kv of thousands of rows, move_kv) stream
    // their stores and prefetch the source rows 8 ahead, random ones and
    // contiguous ones alike: into L2 for rows of 2 KiB and more, into L1 for
    // shorter ones. On the 2-core Xeon VM, get_kv of 8192 random rows as
    // stored (bench_set_kv, alternating rounds, load 2-3): 2 KiB rows 1.01 of
    // memcpy with L1 prefetches, 1.21-1.29 with L2 ones; 1 KiB rows 0.69-0.78
    // with L1 ones, 0.64-0.68 with L2 ones. 16 ahead was slower for 1 KiB
    // rows either way. The rows never overlap (RowCopy's contract), so
    // memcpy semantics are enough.
    if (c.n * c.row_bytes >= util::kStreamMinBytes) {
      constexpr size_t ahead = 8;
      const size_t prefetch_bytes = util::prefetch_bytes(c.row_bytes);
      const bool to_l1 = c.row_bytes < 2048;
      for (size_t i = 0; i < c.n; ++i) {
        const size_t d = c.dst_rows != nullptr ? static_cast<size_t>(c.dst_rows[i]) : i;
        const size_t s = c.src_rows != nullptr ? static_cast<size_t>(c.src_rows[i]) : i;
        if (i + ahead < c.n) {
          const size_t next = c.src_rows != nullptr ? static_cast<size_t>(c.src_rows[i + ahead]) : i + ahead;
          if (to_l1) {
            util::prefetch_row_l1(src + next * c.src_stride, prefetch_bytes);
          } else {
            util::prefetch_row(src + next * c.src_stride, prefetch_bytes);
          }
        }
        util::copy_streaming(dst + d * c.dst_stride, src + s * c.src_stride, c.row_bytes);
      }
      util::stream_fence();
      return Status::ok();
    }
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

 private:
  // Buffers from this size up are mapped on 2 MiB boundaries and asked to use
  // transparent huge pages: a KV write or read touches rows at random slots of
  // a buffer of hundreds of MiB, and with 4 KiB pages nearly every row costs a
  // TLB miss and page walk (random gathers ran 2-4x slower than with huge
  // pages on the 2-core VM). Pages are still zero-filled lazily by the kernel;
  // where THP is off ("never") madvise is a no-op and the buffer is ordinary.
  static constexpr size_t kHugeMinBytes = size_t{8} << 20;
  static constexpr size_t kHugePage = size_t{2} << 20;

  void* map_huge(size_t bytes) {
    const size_t len = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    if (len < bytes) return nullptr;
    // Over-map by one huge page, then trim both ends to a 2 MiB-aligned range.
    void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const uintptr_t end = start + len + kHugePage;
    if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
    void* p = reinterpret_cast<void*>(aligned);
#if defined(MADV_HUGEPAGE)
    madvise(p, len, MADV_HUGEPAGE);  // advice only: failure leaves ordinary pages
#endif
    try {
      std::lock_guard<std::mutex> lock(mapped_mutex_);
      mapped_.emplace(p, len);
    } catch (...) {
      munmap(p, len);
      return nullptr;
    }
    return p;
  }

  std::mutex mapped_mutex_;
  std::unordered_map<void*, size_t> mapped_;  // map_huge's buffers and their lengths
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kvp::backend
