// Builds without CUDA: a CUDA pool cannot exist, so neither can its host transfers
// (cuda/host_transfer.cu implements make_cuda_transfer where CUDA is built).
#include "host/host_transfer.hpp"

namespace kvp::host {

Status make_cuda_transfer(const HostPool*, int, const CudaTransferOptions&, std::unique_ptr<HostTransfer>*) {
  return Status::unsupported("host_cache transfers for CUDA pools need a build with CUDA (KVPOOL_WITH_CUDA)");
}

}  // namespace kvp::host
