// extern "C" entry points of device.h for the allocator and the request table
// (the KV calls are in device_kv_api.cpp). On CUDA pools the arrays are
// device memory and the work is enqueued on the caller's stream; on CPU pools
// the same calls run at once through the host allocator and request table,
// with the same results (the reference the CUDA engine is tested against).
#include <string>
#include <vector>

#include "alloc/device_kernels.hpp"
#include "capi/api_util.hpp"
#include "capi/device_alloc_api.hpp"
#include "capi/device_mirror.hpp"
#include "capi/device_util.hpp"
#include "kvpool/device.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::count_alloc_call;
using kvp::capi::on_device;
using kvp::capi::with_pool;

namespace {

// Allocator calls: a token or paged allocator, and on CUDA a device free list.
// The device lists are brought up to date first when kvseq_* / radix_* changed the host mirror.
Status need_device_allocator(kvpool* p) {
  if (p->swa) return Status::unsupported("the swa allocator has no stream-ordered allocation (its lists live on the host)");
  if (on_device(p) && !p->device_pages) {
    return Status::unsupported("stream-ordered allocation needs the free list in device memory: create the pool with "
                               "\"pool\": {\"free_list\": \"device\"}");
  }
  KVPOOL_RETURN_IF_ERROR(kvp::capi::device_fault_status(p));
  return kvp::capi::use_device_list(p);
}

// CPU pools: the host copy of a length array must equal the "device" one.
Status same_lengths(const int64_t* host, const int64_t* other, size_t n, const char* name) {
  for (size_t i = 0; i < n; ++i) {
    if (host[i] != other[i]) {
      return Status::invalid(std::string(name) + "[" + std::to_string(i) + "] is " + std::to_string(other[i]) +
                             " but " + name + "_host[" + std::to_string(i) + "] is " + std::to_string(host[i]));
    }
  }
  return Status::ok();
}

Status check_new_pages(const int64_t* new_pages, size_t new_pages_len, uint64_t pages) {
  if (new_pages != nullptr && new_pages_len < pages) {
    return Status::invalid("new_pages holds " + std::to_string(new_pages_len) + " ids, the batch takes " +
                           std::to_string(pages) + " pages");
  }
  return Status::ok();
}

// CPU pools: the pages an extend took, in free-list order, read off its slots:
// each token that starts a page at or after the end of the prefix's last page.
void extend_new_pages(const int64_t* pre, const int64_t* seq, size_t batch, int64_t P, const int64_t* slots,
                      int64_t* new_pages) {
  size_t o = 0, k = 0;
  for (size_t i = 0; i < batch; ++i) {
    const int64_t pre_end = (pre[i] + P - 1) / P * P;
    for (int64_t t = pre[i]; t < seq[i]; ++t, ++o) {
      if (t >= pre_end && (t - pre_end) % P == 0) new_pages[k++] = slots[o] / P;
    }
  }
}

kvp::devk::TableView table_view(const kvpool* p) {
  kvp::devk::TableView t;
  t.table = p->requests->memory().as<int32_t>();
  t.rows = p->requests->rows();
  t.context = p->requests->max_context_len();
  t.slot_limit = p->swa ? static_cast<int64_t>(p->plan.max_total_tokens) + 1 : p->paged->slot_limit();
  t.fault = p->device_fault->record();
  t.host_flag = p->device_fault->host_flag();
  t.device = p->backend->device_id();
  return t;
}

// CPU pools: kvreq_write_batch without prefix slots writes only the extend part.
Status write_extend_part(kvpool* p, const int32_t* rows, const int64_t* pre, const int64_t* seq, size_t batch,
                         const int64_t* extend_slots, size_t extend_len) {
  uint64_t total = 0;
  for (size_t i = 0; i < batch; ++i) {
    const std::string who = "request " + std::to_string(i) + ": ";
    if (pre[i] < 0 || seq[i] < pre[i]) {
      return Status::invalid(who + "needs 0 <= prefix length <= sequence length, got " + std::to_string(pre[i]) +
                             " and " + std::to_string(seq[i]));
    }
    const Status st = p->requests->check_columns(rows[i], 0, static_cast<size_t>(seq[i]));
    if (!st.is_ok()) return Status::invalid(who + st.message());
    total += static_cast<uint64_t>(seq[i] - pre[i]);
  }
  if (total != extend_len) {
    return Status::invalid("extend_slots holds " + std::to_string(extend_len) + " slots, the batch extends by " +
                           std::to_string(total));
  }
  KVPOOL_RETURN_IF_ERROR(p->requests->check_slots(extend_slots, extend_len));
  size_t e = 0;
  for (size_t i = 0; i < batch; ++i) {
    const size_t ext = static_cast<size_t>(seq[i] - pre[i]);
    KVPOOL_RETURN_IF_ERROR(p->requests->write(rows[i], static_cast<size_t>(pre[i]), extend_slots + e, ext));
    e += ext;
  }
  return Status::ok();
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvpool_synchronize(kvpool* pool, void* stream) {
  return with_pool("kvpool_synchronize", pool, [&](kvpool* p) -> Status {
    if (!on_device(p)) return Status::ok();
    return p->device_fault->status_after_sync(stream);
  });
}

KVPOOL_API kvpool_status kvalloc_extend_pages(const kvpool* pool, const int64_t* prefix_lens_host,
                                              const int64_t* seq_lens_host, size_t batch, size_t* pages) {
  return with_pool("kvalloc_extend_pages", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens_host, batch, "prefix_lens_host"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens_host, batch, "seq_lens_host"));
    KVPOOL_RETURN_IF_ERROR(check_out(pages, "pages"));
    if (p->swa) return Status::unsupported("the swa allocator has no pages (allocate with kvalloc_alloc)");
    kvp::alloc::ExtendNeed need;
    KVPOOL_RETURN_IF_ERROR(kvp::alloc::extend_need(prefix_lens_host, seq_lens_host, batch, p->paged->page_size(), &need));
    *pages = static_cast<size_t>(need.pages);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_extend_async(kvpool* pool, const int64_t* prefix_lens_host,
                                              const int64_t* seq_lens_host, size_t batch, const int64_t* prefix_lens,
                                              const int64_t* seq_lens, const int64_t* last_locs, int64_t* slots,
                                              size_t slots_len, int64_t* new_pages, size_t new_pages_len,
                                              void* stream) {
  return with_pool("kvalloc_extend_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens_host, batch, "prefix_lens_host"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens_host, batch, "seq_lens_host"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens, batch, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, batch, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, batch, "last_locs"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(new_pages, new_pages_len, "new_pages"));
    KVPOOL_RETURN_IF_ERROR(need_device_allocator(p));
    const int64_t P = p->paged->page_size();
    kvp::alloc::ExtendNeed need;
    KVPOOL_RETURN_IF_ERROR(kvp::alloc::extend_need(prefix_lens_host, seq_lens_host, batch, P, &need));
    if (need.tokens != slots_len) {
      return Status::invalid("slots has length " + std::to_string(slots_len) + ", the batch extends by " +
                             std::to_string(need.tokens));
    }
    KVPOOL_RETURN_IF_ERROR(check_new_pages(new_pages, new_pages_len, need.pages));
    if (on_device(p)) {
      return count_alloc_call(p, true, p->device_pages->extend_async(need, batch, prefix_lens, seq_lens, last_locs,
                                                                     slots, new_pages, stream));
    }
    KVPOOL_RETURN_IF_ERROR(same_lengths(prefix_lens_host, prefix_lens, batch, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(same_lengths(seq_lens_host, seq_lens, batch, "seq_lens"));
    const kvp::alloc::ExtendRequest r{prefix_lens, seq_lens, last_locs, batch};
    KVPOOL_RETURN_IF_ERROR(count_alloc_call(p, true, p->paged->extend(r, slots, slots_len)));
    if (new_pages != nullptr) extend_new_pages(prefix_lens, seq_lens, batch, P, slots, new_pages);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_decode_async(kvpool* pool, const int64_t* seq_lens_host, size_t batch,
                                              const int64_t* seq_lens, const int64_t* last_locs, int64_t* slots,
                                              int64_t* new_pages, size_t new_pages_len, void* stream) {
  return with_pool("kvalloc_decode_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens_host, batch, "seq_lens_host"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, batch, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, batch, "last_locs"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, batch, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(new_pages, new_pages_len, "new_pages"));
    KVPOOL_RETURN_IF_ERROR(need_device_allocator(p));
    const int64_t P = p->paged->page_size();
    uint64_t pages = 0, sum_seq = 0;
    KVPOOL_RETURN_IF_ERROR(kvp::alloc::decode_need(seq_lens_host, batch, P, &pages, &sum_seq));
    KVPOOL_RETURN_IF_ERROR(check_new_pages(new_pages, new_pages_len, pages));
    if (on_device(p)) {
      return count_alloc_call(p, true, p->device_pages->decode_async(pages, sum_seq, batch, seq_lens, last_locs, slots,
                                                                     new_pages, stream));
    }
    KVPOOL_RETURN_IF_ERROR(same_lengths(seq_lens_host, seq_lens, batch, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(count_alloc_call(p, true, p->paged->decode(seq_lens, last_locs, batch, slots)));
    if (new_pages != nullptr) {
      size_t k = 0;
      for (size_t i = 0; i < batch; ++i) {
        if (P == 1 || seq_lens[i] % P == 1) new_pages[k++] = slots[i] / P;
      }
    }
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_decode_graph_async(kvpool* pool, size_t batch, const int64_t* seq_lens,
                                                    const int64_t* last_locs, int64_t* slots, void* stream) {
  return with_pool("kvalloc_decode_graph_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, batch, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, batch, "last_locs"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, batch, "slots"));
    KVPOOL_RETURN_IF_ERROR(need_device_allocator(p));
    if (on_device(p)) {
      return count_alloc_call(p, true, p->device_pages->decode_graph_async(batch, seq_lens, last_locs, slots, stream));
    }
    return count_alloc_call(p, true, p->paged->decode(seq_lens, last_locs, batch, slots));
  });
}

KVPOOL_API kvpool_status kvalloc_decode_watermark(const kvpool* pool, const int64_t* seq_lens_host, size_t batch,
                                                  size_t* steps) {
  return with_pool("kvalloc_decode_watermark", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens_host, batch, "seq_lens_host"));
    KVPOOL_RETURN_IF_ERROR(check_out(steps, "steps"));
    if (p->swa) return Status::unsupported("the swa allocator has no pages (no graph decode)");
    if (on_device(p) && !p->device_pages) {
      return Status::unsupported("a graph decode needs the free list in device memory (\"free_list\": \"device\")");
    }
    uint64_t n = 0;
    KVPOOL_RETURN_IF_ERROR(kvp::alloc::decode_watermark(seq_lens_host, batch, p->paged->page_size(),
                                                        kvp::capi::available_pages(p), &n));
    *steps = static_cast<size_t>(n);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvalloc_decode_graph_advance(kvpool* pool, const int64_t* seq_lens_host, size_t batch,
                                                      size_t steps) {
  return with_pool("kvalloc_decode_graph_advance", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens_host, batch, "seq_lens_host"));
    KVPOOL_RETURN_IF_ERROR(need_device_allocator(p));
    if (on_device(p)) return p->device_pages->graph_advance(seq_lens_host, batch, steps);
    uint64_t pages = 0;  // CPU pools allocated at the call: only the arguments are checked
    return kvp::alloc::decode_steps_pages(seq_lens_host, batch, p->paged->page_size(), steps, &pages);
  });
}

KVPOOL_API kvpool_status kvalloc_alloc_async(kvpool* pool, int64_t* slots, size_t slots_len, void* stream) {
  return with_pool("kvalloc_alloc_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(need_device_allocator(p));
    if (on_device(p)) return count_alloc_call(p, true, p->device_pages->alloc_async(slots, slots_len, stream));
    return count_alloc_call(p, true, p->paged->alloc(slots_len, slots));
  });
}

KVPOOL_API kvpool_status kvalloc_free_pages_async(kvpool* pool, const int64_t* pages, size_t pages_len, void* stream) {
  return with_pool("kvalloc_free_pages_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(pages, pages_len, "pages"));
    KVPOOL_RETURN_IF_ERROR(need_device_allocator(p));
    if (on_device(p)) return count_alloc_call(p, false, p->device_pages->free_pages_async(pages, pages_len, stream));
    return count_alloc_call(p, false, p->paged->pages().give_back(pages, pages_len, false));
  });
}

KVPOOL_API kvpool_status kvreq_write_batch_async(kvpool* pool, const int32_t* rows, const int64_t* prefix_lens,
                                                 const int64_t* seq_lens, size_t batch, const int64_t* prefix_slots,
                                                 size_t prefix_slots_len, const int64_t* extend_slots,
                                                 size_t extend_slots_len, void* stream) {
  return with_pool("kvreq_write_batch_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(rows, batch, "rows"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens, batch, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, batch, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_slots, prefix_slots_len, "prefix_slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(extend_slots, extend_slots_len, "extend_slots"));
    if (on_device(p)) {
      KVPOOL_RETURN_IF_ERROR(kvp::capi::device_fault_status(p));
      const kvp::devk::WriteBatchArgs a{rows,
                                        prefix_lens,
                                        seq_lens,
                                        static_cast<int64_t>(batch),
                                        prefix_slots,
                                        static_cast<int64_t>(prefix_slots_len),
                                        extend_slots,
                                        static_cast<int64_t>(extend_slots_len)};
      return kvp::devk::write_batch(table_view(p), a, stream);
    }
    if (prefix_slots == nullptr) {
      return write_extend_part(p, rows, prefix_lens, seq_lens, batch, extend_slots, extend_slots_len);
    }
    return p->requests->write_batch(rows, prefix_lens, seq_lens, batch, prefix_slots, prefix_slots_len, extend_slots,
                                    extend_slots_len);
  });
}

KVPOOL_API kvpool_status kvreq_last_loc_async(const kvpool* pool, const int32_t* rows, const int64_t* prefix_lens,
                                              size_t batch, int64_t* last_locs, void* stream) {
  return with_pool("kvreq_last_loc_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(rows, batch, "rows"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens, batch, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, batch, "last_locs"));
    if (on_device(p)) {
      KVPOOL_RETURN_IF_ERROR(kvp::capi::device_fault_status(p));
      return kvp::devk::last_loc(table_view(p), rows, prefix_lens, static_cast<int64_t>(batch), last_locs, stream);
    }
    return p->requests->last_loc(rows, prefix_lens, batch, last_locs);
  });
}

}  // extern "C"
