// The two copies of a device free list (pool.free_list "device").
//
// kvseq_* and radix_* keep their slot ids on the host, so they run on an exact
// host mirror of the device allocator (`pool->paged`, the same algorithm the
// kernels implement); the stream-ordered device.h calls and the host-array
// kvalloc_* calls run on the device lists. Each side brings itself up to date
// only when it is next used, so a request path that uses only kvseq_* / radix_*
// never touches device memory for allocation, and device calls never wait for
// the host. Switching sides copies the lists once: host to device is an upload,
// device to host a download (one synchronization). docs/cuda.md says why.
#pragma once

#include "capi/pool_handle.hpp"

namespace kvp::capi {

// Before kvseq_* / radix_* calls that may allocate or free: the host mirror is current,
// and marked as the side that changes.
Status use_host_list(::kvpool* p);
// Before a call that only reads the host mirror (kvseq_accounting): current, not marked,
// so that the next device call has nothing to upload.
Status refresh_host_list(::kvpool* p);
// Before a device free-list call: the device lists are current, and marked as the side that changes.
Status use_device_list(::kvpool* p);
// Before reading both (kvpool_check): the two copies are equal.
Status sync_lists(::kvpool* p);
// Free pages of the current copy (statistics).
size_t available_pages(const ::kvpool* p);
size_t held_pages(const ::kvpool* p);

}  // namespace kvp::capi
