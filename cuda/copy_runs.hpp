// The copy engines' side of a host-tier transfer: pieces gathered into as few DMA
// operations as their addresses allow, then enqueued in one batch call.
//
// A piece that continues the last run on both sides extends it (a layer_first or
// page_first_direct page of one layer is one run of 64 token rows). Pieces that are
// only strided alike are not made into 2D operations: the copy engines moved 2 KiB
// rows at 21-22 GB/s that way (page_first, H100; docs/performance.md), less than half
// of what the copy kernel does, and the driver checks a 2D operation's last row for a
// whole pitch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvp::host {

class CopyRuns {
 public:
  void clear() { runs_.clear(); }
  bool empty() const { return runs_.empty(); }
  size_t size() const { return runs_.size(); }

  // A contiguous piece of `bytes`, copied src -> dst.
  void add(uint8_t* dst, const uint8_t* src, size_t bytes) {
    if (!runs_.empty() && runs_.back().dst + runs_.back().bytes == dst && runs_.back().src + runs_.back().bytes == src) {
      runs_.back().bytes += bytes;  // contiguous on both sides
      return;
    }
    runs_.push_back(Run{dst, src, bytes});
  }

  // Enqueues every run on `stream` (cudaMemcpyBatchAsync), after the work already there.
  cudaError_t enqueue(cudaStream_t stream);

 private:
  struct Run {
    uint8_t* dst;
    const uint8_t* src;
    size_t bytes;
  };
  std::vector<Run> runs_;
  // The batch call's arrays, kept between calls.
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
};

}  // namespace kvp::host
