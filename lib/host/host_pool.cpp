// HostPool: sizing, memory and the page allocator of the host tier (host_pool.hpp).
#include "host/host_pool.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kvpool/buffers.h"

namespace kvp::host {
namespace {

// "12.35 GB" (decimal, as SGLang prints its host-memory message) or "10.00 GiB"; exact bytes are printed too.
std::string gb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}
std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / double(uint64_t(1) << 30));
  return buf;
}

// Host tokens before rounding to pages: size_bytes / bytes per token, else device tokens × ratio.
uint64_t requested_tokens(const config::HostCacheConfig& cfg, uint64_t device_tokens, uint64_t per_token) {
  if (cfg.size_bytes > 0) return static_cast<uint64_t>(cfg.size_bytes) / per_token;
  // SGLang: int(device_pool.size * ratio). The config caps ratio at 1000, so this fits easily.
  return static_cast<uint64_t>(std::floor(static_cast<double>(device_tokens) * cfg.ratio));
}

}  // namespace

Status HostPool::make(backend::Backend* backend, const config::HostCacheConfig& cfg, uint64_t device_tokens,
                      HostGeometry geometry, uint64_t available_bytes, std::unique_ptr<HostPool>* out) {
  HostGeometry& g = geometry;
  if (g.page_size == 0) return Status::internal("host_cache: page size 0");
  const uint64_t per_token = g.bytes_per_token();
  if (per_token == 0) return Status::internal("host_cache: the pool has no tiered rows (0 bytes per token)");
  const uint64_t tokens = requested_tokens(cfg, device_tokens, per_token);
  // SGLang always adds a page: page_num = size // page_size + 1.
  g.pages = tokens / g.page_size + 1;
  if (g.tokens() <= device_tokens) {
    return Status::config("$.host_cache: the host tier would hold " + std::to_string(g.tokens()) +
                          " tokens, expected more than the device pool's " + std::to_string(device_tokens) +
                          " tokens (raise ratio or size_bytes; a host tier no larger than the device pool "
                          "cannot keep anything the device has evicted)");
  }
  const std::string bad_layout = finish_geometry(&g);
  if (!bad_layout.empty()) return Status::config("$.host_cache.layout: " + bad_layout);
  const uint64_t headroom = static_cast<uint64_t>(cfg.headroom_bytes);
  const uint64_t allowed = available_bytes > headroom ? available_bytes - headroom : 0;
  if (g.bytes > allowed) {
    return Status(KVPOOL_ERR_HOST_MEMORY,
                  "host_cache needs " + std::to_string(g.bytes) + " bytes (" + gb(g.bytes) + ", " +
                      std::to_string(g.tokens()) + " tokens of " + std::to_string(per_token) + " bytes) but only " +
                      std::to_string(allowed) + " are free after the " + gib(headroom) + " headroom (" +
                      std::to_string(available_bytes) + " bytes free, headroom_bytes " + std::to_string(headroom) +
                      "); reduce host_cache.ratio or size_bytes, or lower headroom_bytes");
  }
  if (g.bytes > SIZE_MAX) {
    return Status(KVPOOL_ERR_HOST_MEMORY, "host_cache: " + std::to_string(g.bytes) + " bytes do not fit in size_t");
  }
  std::unique_ptr<HostPool> pool(new HostPool());
  // Bookkeeping first: the big allocation is the last thing that can fail.
  pool->free_.reserve(static_cast<size_t>(g.pages));
  pool->held_.assign(static_cast<size_t>(g.pages), 0);
  void* data = nullptr;
  KVPOOL_RETURN_IF_ERROR(backend->allocate_host(static_cast<size_t>(g.bytes), &data));
  pool->backend_ = backend;
  pool->data_ = static_cast<uint8_t*>(data);
  pool->pinned_ = backend->device_type() != KVPOOL_DEVICE_CPU;
  pool->g_ = std::move(g);
  pool->clear();
  *out = std::move(pool);
  return Status::ok();
}

HostPool::~HostPool() {
  if (data_ != nullptr) backend_->deallocate_host(data_);
}

Status HostPool::alloc(size_t n, int64_t* out) {
  if (n > free_.size()) {
    return Status::out_of_memory("host_cache: " + std::to_string(n) + " pages requested, " +
                                 std::to_string(free_.size()) + " free of " + std::to_string(g_.pages));
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t page = free_.back();
    free_.pop_back();
    held_[static_cast<size_t>(page)] = 1;
    out[i] = page;
  }
  return Status::ok();
}

Status HostPool::free(const int64_t* pages, size_t n) {
  // Check everything before changing anything. A page seen earlier in this call is
  // marked 2 in held_ (a duplicate), and the marks are undone before returning.
  constexpr uint8_t kSeen = 2;
  // The first offender and why; its message is built only then (no allocation when all is well).
  const char* why = nullptr;
  bool out_of_range = false;
  size_t marked = 0;
  for (; marked < n; ++marked) {
    const int64_t p = pages[marked];
    if (p < 0 || static_cast<uint64_t>(p) >= g_.pages) {
      why = "is out of range";
      out_of_range = true;
      break;
    }
    uint8_t& h = held_[static_cast<size_t>(p)];
    if (h == kSeen) {
      why = "is listed twice";
      break;
    }
    if (h == 0) {
      why = "is not held (already free)";
      break;
    }
    h = kSeen;
  }
  if (why != nullptr) {
    for (size_t i = 0; i < marked; ++i) held_[static_cast<size_t>(pages[i])] = 1;
    const std::string range = out_of_range ? " [0, " + std::to_string(g_.pages) + ")" : "";
    return Status::invalid("host page pages[" + std::to_string(marked) + "] = " + std::to_string(pages[marked]) + " " +
                           why + range);
  }
  // free_ has capacity for every page, so these push_backs cannot throw.
  for (size_t i = 0; i < n; ++i) {
    held_[static_cast<size_t>(pages[i])] = 0;
    free_.push_back(pages[i]);
  }
  return Status::ok();
}

bool HostPool::is_held(int64_t page) const {
  return page >= 0 && static_cast<uint64_t>(page) < g_.pages && held_[static_cast<size_t>(page)] != 0;
}

void HostPool::clear() {
  free_.clear();
  // Pages in descending order so that alloc(), which pops the back, hands out 0, 1, 2, ... first.
  for (uint64_t p = g_.pages; p-- > 0;) free_.push_back(static_cast<int64_t>(p));
  held_.assign(static_cast<size_t>(g_.pages), 0);
}

size_t HostPool::check(std::string* report, size_t max_lines) const {
  size_t problems = 0;
  const auto note = [&](const std::string& line) {
    if (report != nullptr && problems < max_lines) *report += "host_cache: " + line + "\n";
    ++problems;
  };
  if (held_.size() != g_.pages) {
    note("held bitmap has " + std::to_string(held_.size()) + " entries for " + std::to_string(g_.pages) + " pages");
    return problems;
  }
  // Every free-list entry must be a page in range, not held and listed once.
  std::vector<uint8_t> listed(held_.size(), 0);
  for (size_t i = 0; i < free_.size(); ++i) {
    const int64_t p = free_[i];
    if (p < 0 || static_cast<uint64_t>(p) >= g_.pages) {
      note("free list entry " + std::to_string(i) + " = " + std::to_string(p) + " is out of range");
      continue;
    }
    if (held_[static_cast<size_t>(p)] != 0) note("page " + std::to_string(p) + " is both free and held");
    if (listed[static_cast<size_t>(p)]++ != 0) note("page " + std::to_string(p) + " is on the free list twice");
  }
  // And every page is either held or on the free list.
  for (size_t p = 0; p < held_.size(); ++p) {
    if (held_[p] > 1) note("page " + std::to_string(p) + " has held mark " + std::to_string(held_[p]));
    if (held_[p] == 0 && listed[p] == 0) note("page " + std::to_string(p) + " is neither held nor free (leaked)");
  }
  return problems;
}

}  // namespace kvp::host
