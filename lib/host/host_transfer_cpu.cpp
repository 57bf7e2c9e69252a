// Host-tier transfers of CPU pools: the device buffers are host memory, so a backup or
// a load is a series of memcpy calls, done before the call returns. With deferred
// completion (host_cache.defer_completion) a copy is still reported in flight until it
// has been asked about kDeferredQueries times or waited for, as a GPU's copies would be,
// so that the code that handles copies in flight runs on CPU pools too.
#include <cstring>
#include <string>

#include "host/host_transfer.hpp"

namespace kvp::host {
namespace {

// Pending memcpy that grows while the next piece continues both its source and its
// destination, so contiguous runs (a page of one layer under layer_first or
// page_first_direct, consecutive pages under layer_first) become one call.
class Coalescer {
 public:
  void add(uint8_t* dst, const uint8_t* src, uint64_t len) {
    if (len_ > 0 && dst == dst_ + len_ && src == src_ + len_) {
      len_ += len;
      return;
    }
    flush();
    dst_ = dst;
    src_ = src;
    len_ = len;
  }
  void flush() {
    if (len_ > 0) std::memcpy(dst_, src_, static_cast<size_t>(len_));
    total_ += len_;
    len_ = 0;
  }
  uint64_t total() const { return total_; }

 private:
  uint8_t* dst_ = nullptr;
  const uint8_t* src_ = nullptr;
  uint64_t len_ = 0;
  uint64_t total_ = 0;
};

Status check_pages(const int64_t* pages, size_t n, uint64_t limit, const char* name) {
  if (n > 0 && pages == nullptr) return Status::invalid(std::string(name) + " is NULL with n = " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    if (pages[i] < 0 || static_cast<uint64_t>(pages[i]) >= limit) {
      return Status::invalid(std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(pages[i]) +
                             " is out of range [0, " + std::to_string(limit) + ")");
    }
  }
  return Status::ok();
}

// finished() answers false this many times for a deferred copy: with the polls at the
// start of every tier operation, a copy stays in flight through the next operation or two.
constexpr uint8_t kDeferredQueries = 4;

class CpuTransfer final : public HostTransfer {
 public:
  CpuTransfer(const HostPool* pool, bool defer)
      : pool_(pool), g_(pool->geometry()), device_pages_(g_.device_pages()), defer_(defer) {}

  // Nothing runs asynchronously on a CPU pool, so there is no stream to follow.
  Status set_compute_stream(void*) override { return Status::ok(); }

  Status backup(const int64_t* device_pages, const int64_t* host_pages, size_t n, uint64_t* ticket) override {
    KVPOOL_RETURN_IF_ERROR(check(device_pages, host_pages, n, ticket));
    to_host_ += copy(device_pages, host_pages, n, true);
    *ticket = issue();
    return Status::ok();
  }

  Status load(const int64_t* host_pages, const int64_t* device_pages, size_t n, int set, uint64_t* ticket) override {
    KVPOOL_RETURN_IF_ERROR(check_set(set));
    KVPOOL_RETURN_IF_ERROR(check(device_pages, host_pages, n, ticket));
    to_device_ += copy(device_pages, host_pages, n, false);
    *ticket = issue();
    return Status::ok();
  }

  // Every copy finished inside its call; deferred ones are reported so later, in order.
  bool finished(uint64_t ticket) override {
    if (ticket <= landed_ || ticket > last_ticket_) return true;
    if (last_ticket_ - ticket >= kRing || ++asked_[ticket % kRing] >= kDeferredQueries) landed_ = ticket;
    return ticket <= landed_;
  }
  Status wait(uint64_t ticket) override {
    if (ticket <= last_ticket_ && ticket > landed_) landed_ = ticket;
    return Status::ok();
  }

  Status wait_layer(int set, uint32_t layer, void*) override {
    KVPOOL_RETURN_IF_ERROR(check_set(set));
    if (layer >= g_.layers) {
      return Status::invalid("layer " + std::to_string(layer) + " is not a tiered layer (the host tier keeps " +
                             std::to_string(g_.layers) + ")");
    }
    return Status::ok();  // the load that set it already landed
  }

  uint64_t bytes_to_host() const override { return to_host_; }
  uint64_t bytes_to_device() const override { return to_device_; }

 private:
  static Status check_set(int set) {
    if (set < 0 || set >= kLoadSets) {
      return Status::invalid("load set " + std::to_string(set) + " is out of range [0, " + std::to_string(kLoadSets) +
                             ")");
    }
    return Status::ok();
  }

  Status check(const int64_t* device_pages, const int64_t* host_pages, size_t n, const uint64_t* ticket) const {
    if (ticket == nullptr) return Status::invalid("ticket is NULL");
    KVPOOL_RETURN_IF_ERROR(check_pages(device_pages, n, device_pages_, "device_pages"));
    return check_pages(host_pages, n, pool_->pages(), "host_pages");
  }

  // Copies every tiered layer of the pages one way; returns the bytes moved. Layers
  // are the outer loop, so a load lands layer by layer as on the CUDA path.
  uint64_t copy(const int64_t* device_pages, const int64_t* host_pages, size_t n, bool to_host) const {
    const uint64_t P = g_.page_size;
    uint8_t* const host = pool_->data();
    Coalescer c;
    for (uint32_t l = 0; l < g_.layers; ++l) {
      for (size_t p = 0; p < g_.parts.size(); ++p) {
        const TierPart& part = g_.parts[p];
        uint8_t* const device = part.device_base[l];
        const uint64_t piece = g_.piece_bytes(p), stride = part.device_stride, host_stride = g_.token_stride(p);
        // A page's tokens of one layer, part and piece: one block when both sides are dense.
        const bool dense = stride == piece && host_stride == piece;
        for (uint32_t h = 0; h < g_.pieces(p); ++h) {
          for (size_t i = 0; i < n; ++i) {
            const auto d = static_cast<uint64_t>(device_pages[i]), t = static_cast<uint64_t>(host_pages[i]);
            if (part.per_page) {  // one row per page: device row d, host page t
              move(&c, device + d * stride, host + g_.offset(p, t, l), part.item_bytes, to_host);
              continue;
            }
            uint8_t* dev = device + d * P * stride + h * piece;
            uint8_t* at = host + g_.offset(p, t * P, l, h);  // the page's first token; the rest follow by host_stride
            if (dense) {
              move(&c, dev, at, P * piece, to_host);
              continue;
            }
            for (uint64_t j = 0; j < P; ++j) move(&c, dev + j * stride, at + j * host_stride, piece, to_host);
          }
        }
      }
    }
    c.flush();
    return c.total();
  }

  static void move(Coalescer* c, uint8_t* device, uint8_t* host, uint64_t len, bool to_host) {
    if (to_host) {
      c->add(host, device, len);
    } else {
      c->add(device, host, len);
    }
  }

  uint64_t issue() {
    ++last_ticket_;
    if (!defer_) {
      landed_ = last_ticket_;
    } else {
      asked_[last_ticket_ % kRing] = 0;
    }
    return last_ticket_;
  }

  // Deferred copies: how often finished() was asked about each of the last kRing tickets
  // (older ones have landed).
  static constexpr uint64_t kRing = 64;
  const HostPool* pool_;
  const HostGeometry& g_;
  const uint64_t device_pages_;
  const bool defer_;
  uint8_t asked_[kRing] = {};
  uint64_t landed_ = 0;  // every ticket up to this one has landed
  uint64_t last_ticket_ = 0;
  uint64_t to_host_ = 0, to_device_ = 0;
};

}  // namespace

std::unique_ptr<HostTransfer> make_cpu_transfer(const HostPool* pool, bool defer_completion) {
  return std::make_unique<CpuTransfer>(pool, defer_completion);
}

}  // namespace kvp::host
