// CopyRuns (copy_runs.hpp): the batch call.
#include "copy_runs.hpp"

namespace kvp::host {

cudaError_t CopyRuns::enqueue(cudaStream_t stream) {
  if (runs_.empty()) return cudaSuccess;
  dsts_.resize(runs_.size());
  srcs_.resize(runs_.size());
  sizes_.resize(runs_.size());
  for (size_t k = 0; k < runs_.size(); ++k) {
    dsts_[k] = runs_[k].dst;
    srcs_[k] = runs_[k].src;
    sizes_[k] = runs_[k].bytes;
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // the source is written by earlier work on the stream
  size_t attr_index = 0;
  return cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), runs_.size(), &attr, &attr_index, 1, stream);
}

}  // namespace kvp::host
