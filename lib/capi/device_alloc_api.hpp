// The host-array kvalloc_* calls (alloc.h) and kvpool_check / kvpool_get_stats
// on a pool with `pool.free_list` "device": they go through the device
// engine (alloc/device_pages.hpp) synchronously, with the CPU allocator's
// checks and messages, so that both kinds of call see one allocator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capi/pool_handle.hpp"

namespace kvp::capi {

// KVPOOL_ERR_DEVICE_FAULT when a kernel of the pool faulted, else OK.
Status device_fault_status(const ::kvpool* p);
// KVPOOL_ERR_UNSUPPORTED: `what` is not available with a device free list.
Status device_list_unsupported(const char* what);

Status device_alloc(::kvpool* p, int64_t* slots, size_t n);
Status device_free(::kvpool* p, const int64_t* slots, size_t n);
Status device_extend(::kvpool* p, const alloc::ExtendRequest& r, int64_t* slots, size_t slots_len);
Status device_decode(::kvpool* p, const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t* slots);
Status device_available(const ::kvpool* p, size_t* tokens);
Status device_merge_and_sort(::kvpool* p);
// Empties the allocator and forgets a device fault (the recovery path).
Status device_clear(::kvpool* p);
// KVALLOC_LIST_FREE or KVALLOC_LIST_RELEASE, front first.
Status device_free_list(const ::kvpool* p, int32_t list, std::vector<int64_t>* out);
// Ownership check of the device lists; adds the problems found to *problems.
Status device_check(const ::kvpool* p, std::string* report, size_t max_lines, size_t* problems);

// Counts an allocator call's outcome for kvpool_get_stats() (as alloc_api.cpp does).
Status count_alloc_call(::kvpool* p, bool is_alloc, const Status& st);

}  // namespace kvp::capi
