// Host-array allocator calls on a pool whose free list lives on the device
// (see device_alloc_api.hpp). The argument checks are the CPU allocator's
// (`p->paged` keeps the geometry and checks, and is the host mirror of the lists
// that kvseq_* / radix_* use: capi/device_mirror.hpp).
#include "capi/device_alloc_api.hpp"

#include "capi/device_mirror.hpp"
#include "kvpool/alloc.h"

namespace kvp::capi {

Status device_fault_status(const ::kvpool* p) {
  if (!p->device_fault) return Status::ok();
  return p->device_fault->status("the pool");
}

Status device_list_unsupported(const char* what) {
  return Status::unsupported(std::string(what) +
                             " is not supported with pool.free_list \"device\" (the free list lives in device "
                             "memory); use pool.free_list \"host\"");
}

Status count_alloc_call(::kvpool* p, bool is_alloc, const Status& st) {
  Counters& c = p->counters;
  if (st.is_ok()) {
    ++(is_alloc ? c.alloc_calls : c.free_calls);
    if (is_alloc) p->direct_allocations = true;
  } else if (st.code() == KVPOOL_ERR_OUT_OF_MEMORY) {
    ++c.alloc_failures;
  } else if (st.code() == KVPOOL_ERR_INVALID_ARGUMENT) {
    ++c.rejected_calls;
  }
  return st;
}

Status device_alloc(::kvpool* p, int64_t* slots, size_t n) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  KVPOOL_RETURN_IF_ERROR(use_device_list(p));
  return p->device_pages->alloc_host(slots, n);
}

Status device_free(::kvpool* p, const int64_t* slots, size_t n) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  KVPOOL_RETURN_IF_ERROR(use_device_list(p));
  return p->device_pages->free_host(*p->paged, slots, n);
}

Status device_extend(::kvpool* p, const alloc::ExtendRequest& r, int64_t* slots, size_t slots_len) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  KVPOOL_RETURN_IF_ERROR(use_device_list(p));
  size_t needed = 0;
  KVPOOL_RETURN_IF_ERROR(p->paged->check_extend(r, slots_len, &needed));
  return p->device_pages->extend_host(r, slots, slots_len);
}

Status device_decode(::kvpool* p, const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t* slots) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  KVPOOL_RETURN_IF_ERROR(use_device_list(p));
  return p->device_pages->decode_host(seq_lens, last_locs, batch, slots);
}

Status device_available(const ::kvpool* p, size_t* tokens) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  *tokens = available_pages(p) * static_cast<size_t>(p->device_pages->page_size());
  return Status::ok();
}

Status device_merge_and_sort(::kvpool* p) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  KVPOOL_RETURN_IF_ERROR(use_device_list(p));
  return p->device_pages->merge_host();
}

Status device_clear(::kvpool* p) {
  const bool faulted = p->device_fault->raised();
  KVPOOL_RETURN_IF_ERROR(p->device_fault->clear());  // waits for the device, then forgets the fault
  if (faulted) ++p->metric_counters.device_faults_cleared;
  KVPOOL_RETURN_IF_ERROR(p->device_pages->clear());
  p->paged->pages().clear();  // the host mirror: both lists are 1..N again
  p->list_home = ListHome::kBoth;
  return Status::ok();
}

Status device_free_list(const ::kvpool* p, int32_t list, std::vector<int64_t>* out) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  if (p->list_home == ListHome::kHost) {  // the mirror is ahead: it is the list
    *out = list == KVALLOC_LIST_RELEASE ? p->paged->pages().release_list() : p->paged->pages().free_list();
    return Status::ok();
  }
  return p->device_pages->list(list == KVALLOC_LIST_RELEASE, out);
}

Status device_check(const ::kvpool* p, std::string* report, size_t max_lines, size_t* problems) {
  KVPOOL_RETURN_IF_ERROR(device_fault_status(p));
  size_t found = 0;
  KVPOOL_RETURN_IF_ERROR(p->device_pages->check(report, max_lines, &found));
  *problems += found;
  return Status::ok();
}

}  // namespace kvp::capi
