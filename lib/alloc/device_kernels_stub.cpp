// The device kernels' launchers in builds without CUDA (KVPOOL_WITH_CUDA=OFF).
// No pool with device memory can exist there, so none of these is reached;
// they fail cleanly instead of being left undefined.
#include "alloc/device_kernels.hpp"

namespace kvp::devk {
namespace {

Status no_cuda() { return Status::unsupported("this build of kvpool has no CUDA backend (KVPOOL_WITH_CUDA=OFF)"); }

}  // namespace

Status use_device(int) { return no_cuda(); }
Status extend(const PagesView&, RingPos, RingPos, const ExtendArgs&, void*) { return no_cuda(); }
Status decode(const PagesView&, RingPos, RingPos, const DecodeArgs&, void*) { return no_cuda(); }
Status alloc(const PagesView&, RingPos, RingPos, int64_t*, int64_t, void*) { return no_cuda(); }
Status decode_graph(const PagesView&, const int64_t*, const int64_t*, int64_t, int64_t*, void*) { return no_cuda(); }
Status free_pages(const PagesView&, const int64_t*, int64_t, int64_t*, int64_t, bool, RingPos, void*) { return no_cuda(); }
Status merge(const PagesView&, RingPos, RingPos, void*) { return no_cuda(); }
Status reset(const PagesView&, void*) { return no_cuda(); }
Status first_not_owned(const PagesView&, const int64_t*, int64_t, void*, int64_t* index) {
  *index = -1;
  return no_cuda();
}
Status write_batch(const TableView&, const WriteBatchArgs&, void*) { return no_cuda(); }
Status last_loc(const TableView&, const int32_t*, const int64_t*, int64_t, int64_t*, void*) { return no_cuda(); }

}  // namespace kvp::devk
