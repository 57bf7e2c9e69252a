// Builds without CUDA: device.h KV jobs only exist for CUDA pools, which such
// a build cannot create, so these are never reached; they fail cleanly if they are.
#include "pool/kv_device.hpp"

namespace kvp::pool::dev {
namespace {
Status no_cuda() { return Status::unsupported("this kvpool was built without CUDA"); }
}  // namespace

Status encode_rows(const RowJob&, void*, const FaultSink&) { return no_cuda(); }
Status decode_rows(const RowJob&, void*, const FaultSink&) { return no_cuda(); }
Status encode_nsa(const NsaJob&, void*, const FaultSink&) { return no_cuda(); }
Status decode_nsa(const NsaJob&, void*, const FaultSink&) { return no_cuda(); }
Status move_rows(const MoveJob&, void*, const FaultSink&) { return no_cuda(); }

}  // namespace kvp::pool::dev
