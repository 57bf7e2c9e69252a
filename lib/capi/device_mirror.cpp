#include "capi/device_mirror.hpp"

#include <vector>

#include "capi/device_alloc_api.hpp"

namespace kvp::capi {
namespace {

Status device_to_host(::kvpool* p) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  std::vector<int64_t> free, release;
  KVPOOL_RETURN_IF_ERROR(p->device_pages->list(false, &free));
  KVPOOL_RETURN_IF_ERROR(p->device_pages->list(true, &release));
  KVPOOL_RETURN_IF_ERROR(p->paged->pages().assign_lists(free, release));
  p->list_home = ListHome::kBoth;
  return Status::ok();
}

Status host_to_device(::kvpool* p) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  const alloc::IdAllocator& pages = p->paged->pages();
  KVPOOL_RETURN_IF_ERROR(p->device_pages->load(pages.free_list(), pages.release_list()));
  p->list_home = ListHome::kBoth;
  return Status::ok();
}

}  // namespace

Status use_host_list(::kvpool* p) {
  if (!p->device_pages) return Status::ok();
  if (p->list_home == ListHome::kDevice) KVPOOL_RETURN_IF_ERROR(device_to_host(p));
  p->list_home = ListHome::kHost;
  return Status::ok();
}

Status refresh_host_list(::kvpool* p) {
  if (!p->device_pages || p->list_home != ListHome::kDevice) return Status::ok();
  return device_to_host(p);
}

Status use_device_list(::kvpool* p) {
  if (!p->device_pages) return Status::ok();
  if (p->list_home == ListHome::kHost) KVPOOL_RETURN_IF_ERROR(host_to_device(p));
  p->list_home = ListHome::kDevice;
  return Status::ok();
}

Status sync_lists(::kvpool* p) {
  if (!p->device_pages) return Status::ok();
  if (p->list_home == ListHome::kHost) return host_to_device(p);
  if (p->list_home == ListHome::kDevice) return device_to_host(p);
  return Status::ok();
}

size_t available_pages(const ::kvpool* p) {
  if (p->device_pages && p->list_home != ListHome::kHost) return p->device_pages->available_pages();
  return p->paged->pages().available();
}

size_t held_pages(const ::kvpool* p) {
  if (p->device_pages && p->list_home != ListHome::kHost) return p->device_pages->held_pages();
  return p->paged->pages().held();
}

}  // namespace kvp::capi
