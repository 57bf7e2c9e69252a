// Builds without CUDA: no CUDA pool exists, so the device table writer is never made.
#include "req/table_writes.hpp"

namespace kvp::req {

Status make_device_table_writes(RequestTable*, backend::DeviceFault*, int, std::unique_ptr<TableWrites>*) {
  return Status::unsupported("this build of kvpool has no CUDA backend (KVPOOL_WITH_CUDA=OFF)");
}

}  // namespace kvp::req
