// extern "C" entry points of alloc.h.
#include <cstring>
#include <vector>

#include "capi/api_util.hpp"
#include "capi/device_alloc_api.hpp"
#include "kvpool/alloc.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

// Counts the outcome of an allocator call for kvpool_get_stats().
Status counted(kvpool* pool, bool is_alloc, const Status& st) {
  kvp::Counters& c = pool->counters;
  if (st.is_ok()) {
    ++(is_alloc ? c.alloc_calls : c.free_calls);
    if (is_alloc) pool->direct_allocations = true;
  } else if (st.code() == KVPOOL_ERR_OUT_OF_MEMORY) {
    ++c.alloc_failures;
  } else if (st.code() == KVPOOL_ERR_INVALID_ARGUMENT) {
    ++c.rejected_calls;
  }
  return st;
}

Status need_swa(const kvpool* pool) {
  if (!pool->swa) return Status::unsupported("the pool's allocator is not swa (attention is not \"swa\")");
  return Status::ok();
}

Status need_paged(const kvpool* pool, const char* alternative) {
  if (!pool->paged) return Status::unsupported(std::string("the swa allocator has no such operation; ") + alternative);
  return Status::ok();
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvalloc_get_kind(const kvpool* pool, int32_t* kind) {
  return with_pool<Access::kShared>("kvalloc_get_kind", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(kind, "kind"));
    *kind = p->swa ? KVALLOC_SWA : (p->paged->page_size() == 1 ? KVALLOC_TOKEN : KVALLOC_PAGED);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_available(const kvpool* pool, size_t* tokens) {
  return with_pool<Access::kSharedOnHostList>("kvalloc_available", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(tokens, "tokens"));
    KVPOOL_RETURN_IF_ERROR(need_paged(p, "use kvalloc_swa_available"));
    if (p->device_pages) return kvp::capi::device_available(p, tokens);
    *tokens = p->paged->available_tokens();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_swa_available(const kvpool* pool, size_t* full, size_t* swa) {
  return with_pool<Access::kShared>("kvalloc_swa_available", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(full, "full"));
    KVPOOL_RETURN_IF_ERROR(check_out(swa, "swa"));
    KVPOOL_RETURN_IF_ERROR(need_swa(p));
    *full = p->swa->full().available();
    *swa = p->swa->swa().available();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_alloc(kvpool* pool, int64_t* slots, size_t slots_len) {
  return with_pool("kvalloc_alloc", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    if (p->swa) return counted(p, true, p->swa->alloc(slots_len, slots));
    if (p->device_pages) return counted(p, true, kvp::capi::device_alloc(p, slots, slots_len));
    return counted(p, true, p->paged->alloc(slots_len, slots));
  });
}

KVPOOL_API kvpool_status kvalloc_free(kvpool* pool, const int64_t* slots, size_t slots_len) {
  return with_pool("kvalloc_free", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    if (p->swa) return counted(p, false, p->swa->free(slots, slots_len));
    if (p->device_pages) return counted(p, false, kvp::capi::device_free(p, slots, slots_len));
    return counted(p, false, p->paged->free(slots, slots_len));
  });
}

KVPOOL_API kvpool_status kvalloc_extend(kvpool* pool, const int64_t* prefix_lens, size_t prefix_lens_len,
                                        const int64_t* seq_lens, size_t seq_lens_len, const int64_t* last_locs,
                                        size_t last_locs_len, int64_t* slots, size_t slots_len) {
  return with_pool("kvalloc_extend", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens, prefix_lens_len, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, seq_lens_len, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, last_locs_len, "last_locs"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(seq_lens_len, prefix_lens_len, "seq_lens", "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(last_locs_len, prefix_lens_len, "last_locs", "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(need_paged(p, "allocate with kvalloc_alloc"));
    kvp::alloc::ExtendRequest r{prefix_lens, seq_lens, last_locs, prefix_lens_len};
    if (p->device_pages) return counted(p, true, kvp::capi::device_extend(p, r, slots, slots_len));
    return counted(p, true, p->paged->extend(r, slots, slots_len));
  });
}

KVPOOL_API kvpool_status kvalloc_decode(kvpool* pool, const int64_t* seq_lens, size_t seq_lens_len,
                                        const int64_t* last_locs, size_t last_locs_len, int64_t* slots,
                                        size_t slots_len) {
  return with_pool("kvalloc_decode", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, seq_lens_len, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, last_locs_len, "last_locs"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(last_locs_len, seq_lens_len, "last_locs", "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(slots_len, seq_lens_len, "slots", "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(need_paged(p, "allocate with kvalloc_alloc"));
    if (p->device_pages) return counted(p, true, kvp::capi::device_decode(p, seq_lens, last_locs, seq_lens_len, slots));
    return counted(p, true, p->paged->decode(seq_lens, last_locs, seq_lens_len, slots));
  });
}

KVPOOL_API kvpool_status kvalloc_free_swa(kvpool* pool, const int64_t* slots, size_t slots_len) {
  return with_pool("kvalloc_free_swa", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(need_swa(p));
    return counted(p, false, p->swa->free_swa(slots, slots_len));
  });
}

KVPOOL_API kvpool_status kvalloc_translate_swa(const kvpool* pool, const int64_t* slots, size_t slots_len,
                                               int64_t* out, size_t out_len) {
  return with_pool<Access::kShared>("kvalloc_translate_swa", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(out, out_len, "out"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(out_len, slots_len, "out", "slots"));
    KVPOOL_RETURN_IF_ERROR(need_swa(p));
    return p->swa->translate(slots, slots_len, out);
  });
}

KVPOOL_API kvpool_status kvalloc_free_group_begin(kvpool* pool) {
  return with_pool("kvalloc_free_group_begin", pool, [&](kvpool* p) -> Status {
    if (p->device_pages) return kvp::capi::device_list_unsupported("a free group");
    return p->swa ? p->swa->group_begin() : p->paged->pages().group_begin();
  });
}

KVPOOL_API kvpool_status kvalloc_free_group_end(kvpool* pool) {
  return with_pool("kvalloc_free_group_end", pool, [&](kvpool* p) -> Status {
    if (p->device_pages) return kvp::capi::device_list_unsupported("a free group");
    return p->swa ? p->swa->group_end() : p->paged->pages().group_end();
  });
}

KVPOOL_API kvpool_status kvalloc_backup(kvpool* pool, uint64_t* token) {
  return with_pool("kvalloc_backup", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(token, "token"));
    if (p->device_pages) return kvp::capi::device_list_unsupported("kvalloc_backup");
    const bool in_group = p->swa ? p->swa->full().in_group() : p->paged->pages().in_group();
    if (in_group) return Status::invalid("cannot take a snapshot inside a free group");
    if (p->swa) {
      p->swa->backup();
    } else {
      p->paged->pages().backup();
    }
    p->backup_token = p->next_backup_token++;
    *token = p->backup_token;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_restore(kvpool* pool, uint64_t token) {
  return with_pool("kvalloc_restore", pool, [&](kvpool* p) -> Status {
    if (p->device_pages) return kvp::capi::device_list_unsupported("kvalloc_restore");
    if (p->backup_token == 0 || token != p->backup_token) {
      return Status::invalid("token " + std::to_string(token) +
                             " is not the active snapshot (it was replaced, cleared, or never taken)");
    }
    const bool in_group = p->swa ? p->swa->full().in_group() : p->paged->pages().in_group();
    if (in_group) return Status::invalid("cannot restore inside a free group; end the group first");
    if (p->swa) {
      p->swa->restore();
    } else {
      p->paged->pages().restore();
    }
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_merge_and_sort(kvpool* pool) {
  return with_pool("kvalloc_merge_and_sort", pool, [&](kvpool* p) -> Status {
    if (p->device_pages) return kvp::capi::device_merge_and_sort(p);
    if (p->swa) {
      p->swa->merge_and_sort();
    } else {
      p->paged->pages().merge_and_sort();
    }
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_clear(kvpool* pool) {
  return with_pool("kvalloc_clear", pool, [&](kvpool* p) -> Status {
    if (p->device_pages) return kvp::capi::device_clear(p);
    if (p->device_fault) {  // a fault of the KV kernels
      const bool faulted = p->device_fault->raised();
      KVPOOL_RETURN_IF_ERROR(p->device_fault->clear());
      if (faulted) ++p->metric_counters.device_faults_cleared;
    }
    if (p->swa) {
      p->swa->clear();
    } else {
      p->paged->pages().clear();
    }
    p->backup_token = 0;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_free_list(const kvpool* pool, int32_t list, int64_t* ids, size_t ids_cap,
                                           size_t* ids_len) {
  return with_pool<Access::kSharedOnHostList>("kvalloc_free_list", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(ids, ids_cap, "ids"));
    KVPOOL_RETURN_IF_ERROR(check_out(ids_len, "ids_len"));
    std::vector<int64_t> v;
    const bool device_list = p->device_pages && (list == KVALLOC_LIST_FREE || list == KVALLOC_LIST_RELEASE);
    if (device_list) KVPOOL_RETURN_IF_ERROR(kvp::capi::device_free_list(p, list, &v));
    switch (device_list ? -1 : list) {
      case -1: break;  // read from the device above
      case KVALLOC_LIST_FREE: v = p->swa ? p->swa->full().free_list() : p->paged->pages().free_list(); break;
      case KVALLOC_LIST_RELEASE: v = p->swa ? p->swa->full().release_list() : p->paged->pages().release_list(); break;
      case KVALLOC_LIST_SWA_FREE:
        KVPOOL_RETURN_IF_ERROR(need_swa(p));
        v = p->swa->swa().free_list();
        break;
      case KVALLOC_LIST_SWA_RELEASE:
        KVPOOL_RETURN_IF_ERROR(need_swa(p));
        v = p->swa->swa().release_list();
        break;
      default: return Status::invalid("list " + std::to_string(list) + " is not a kvalloc_list value");
    }
    *ids_len = v.size();
    if (v.size() > ids_cap) {
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL,
                    "the list has " + std::to_string(v.size()) + " ids, ids_cap is " + std::to_string(ids_cap));
    }
    if (!v.empty()) std::memcpy(ids, v.data(), v.size() * sizeof(int64_t));
    return Status::ok();
  });
}

}  // extern "C"
