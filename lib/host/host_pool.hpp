// The host tier's memory and its page allocator (SGLANG_SEMANTICS §1.16).
//
// Sizing follows SGLang: host tokens = device tokens × ratio, or size_bytes / bytes
// per token; then pages = tokens / P + 1. The tier must hold more tokens than the
// device pool, and may not take more than the free host memory less a headroom
// (host_cache.headroom_bytes, default 10 GiB). CUDA pools get pinned memory (through
// the allocator callbacks when the pool has them: device type KVPOOL_DEVICE_CUDA_HOST),
// CPU pools plain memory.
//
// Pages are handed out whole; a free of a page that is not held (double free,
// out of range) is refused and changes nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "host/host_geometry.hpp"
#include "util/status.hpp"

namespace kvp::host {

class HostPool {
 public:
  // `device_tokens`: the device pool's token capacity (plan.max_total_tokens).
  // `available_bytes`: free host memory (backend::host_memory(); a parameter so tests can pass any value).
  static Status make(backend::Backend* backend, const config::HostCacheConfig& cfg, uint64_t device_tokens,
                     HostGeometry geometry, uint64_t available_bytes, std::unique_ptr<HostPool>* out);
  ~HostPool();

  const HostGeometry& geometry() const { return g_; }
  uint64_t page_size() const { return g_.page_size; }
  uint64_t pages() const { return g_.pages; }
  uint64_t tokens() const { return g_.tokens(); }
  uint8_t* data() const { return data_; }
  bool pinned() const { return pinned_; }

  size_t free_pages() const { return free_.size(); }
  size_t held_pages() const { return static_cast<size_t>(g_.pages) - free_.size(); }
  // `n` pages (ids in [0, pages)) into `out`, all or none: KVPOOL_ERR_OUT_OF_MEMORY when fewer are free.
  Status alloc(size_t n, int64_t* out);
  // Gives pages back; every one must be held and listed once, else nothing changes.
  Status free(const int64_t* pages, size_t n);
  bool is_held(int64_t page) const;
  // Every page free again.
  void clear();
  // Free list and held bitmap agree; returns the problems found.
  size_t check(std::string* report, size_t max_lines) const;

 private:
  HostPool() = default;
  backend::Backend* backend_ = nullptr;
  HostGeometry g_;
  uint8_t* data_ = nullptr;
  bool pinned_ = false;
  std::vector<int64_t> free_;   // taken from the back
  std::vector<uint8_t> held_;   // per page
};

}  // namespace kvp::host
