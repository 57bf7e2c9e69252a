// extern "C" entry points of req.h and the hybrid-row part of mamba.h.
#include "capi/api_util.hpp"
#include "kvpool/mamba.h"
#include "kvpool/req.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::need_mamba;
using kvp::capi::Access;
using kvp::capi::with_pool;

extern "C" {

KVPOOL_API kvpool_status kvreq_available(const kvpool* pool, size_t* rows) {
  return with_pool<Access::kShared>("kvreq_available", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(rows, "rows"));
    *rows = p->requests->available();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvreq_alloc(kvpool* pool, int32_t* rows, size_t rows_len) {
  return with_pool("kvreq_alloc", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(rows, rows_len, "rows"));
    return p->requests->alloc(rows, rows_len);
  });
}

KVPOOL_API kvpool_status kvreq_free(kvpool* pool, const int32_t* rows, size_t rows_len) {
  return with_pool("kvreq_free", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(rows, rows_len, "rows"));
    if (p->mamba) {
      // A hybrid row still holding a state slot must go through kvreq_free_hybrid.
      for (size_t i = 0; i < rows_len; ++i) {
        if (rows[i] > 0 && rows[i] < p->requests->rows() && p->mamba->slot_of_row(rows[i]) >= 0) {
          return Status::invalid("row " + std::to_string(rows[i]) +
                                 " holds a mamba slot; free it with kvreq_free_hybrid");
        }
      }
    }
    return p->requests->free(rows, rows_len);
  });
}

KVPOOL_API kvpool_status kvreq_write(kvpool* pool, int32_t row, size_t start, const int64_t* slots, size_t slots_len) {
  return with_pool("kvreq_write", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    return p->requests->write(row, start, slots, slots_len);
  });
}

KVPOOL_API kvpool_status kvreq_read(const kvpool* pool, int32_t row, size_t start, int64_t* slots, size_t slots_len) {
  return with_pool("kvreq_read", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    return p->requests->read(row, start, slots, slots_len);
  });
}

KVPOOL_API kvpool_status kvreq_clear(kvpool* pool) {
  return with_pool("kvreq_clear", pool, [&](kvpool* p) -> Status {
    p->requests->clear();
    if (p->mamba) p->mamba->clear();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvreq_write_batch(kvpool* pool, const int32_t* rows, size_t rows_len,
                                           const int64_t* prefix_lens, size_t prefix_lens_len,
                                           const int64_t* seq_lens, size_t seq_lens_len,
                                           const int64_t* prefix_slots, size_t prefix_slots_len,
                                           const int64_t* extend_slots, size_t extend_slots_len) {
  return with_pool("kvreq_write_batch", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(rows, rows_len, "rows"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens, prefix_lens_len, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(seq_lens, seq_lens_len, "seq_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_slots, prefix_slots_len, "prefix_slots"));
    KVPOOL_RETURN_IF_ERROR(check_array(extend_slots, extend_slots_len, "extend_slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(prefix_lens_len, rows_len, "prefix_lens", "rows"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(seq_lens_len, rows_len, "seq_lens", "rows"));
    return p->requests->write_batch(rows, prefix_lens, seq_lens, rows_len, prefix_slots, prefix_slots_len,
                                    extend_slots, extend_slots_len);
  });
}

KVPOOL_API kvpool_status kvreq_last_loc(const kvpool* pool, const int32_t* rows, size_t rows_len,
                                        const int64_t* prefix_lens, size_t prefix_lens_len, int64_t* last_locs,
                                        size_t last_locs_len) {
  return with_pool("kvreq_last_loc", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(rows, rows_len, "rows"));
    KVPOOL_RETURN_IF_ERROR(check_array(prefix_lens, prefix_lens_len, "prefix_lens"));
    KVPOOL_RETURN_IF_ERROR(check_array(last_locs, last_locs_len, "last_locs"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(prefix_lens_len, rows_len, "prefix_lens", "rows"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(last_locs_len, rows_len, "last_locs", "rows"));
    return p->requests->last_loc(rows, prefix_lens, rows_len, last_locs);
  });
}

KVPOOL_API kvpool_status kvreq_alloc_hybrid(kvpool* pool, const int32_t* reuse, size_t reuse_len, int32_t* rows,
                                            size_t rows_len, int32_t* slots, size_t slots_len) {
  return with_pool("kvreq_alloc_hybrid", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(reuse, reuse_len, "reuse"));
    KVPOOL_RETURN_IF_ERROR(check_array(rows, rows_len, "rows"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(rows_len, reuse_len, "rows", "reuse"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(slots_len, reuse_len, "slots", "reuse"));
    // Check both capacities before taking anything.
    size_t new_slots = 0;
    KVPOOL_RETURN_IF_ERROR(p->mamba->check_reuse(reuse, reuse_len, &new_slots));
    if (reuse_len > p->requests->available()) {
      return Status::out_of_memory("need " + std::to_string(reuse_len) + " rows, " +
                                   std::to_string(p->requests->available()) + " available");
    }
    KVPOOL_RETURN_IF_ERROR(p->requests->alloc(rows, rows_len));
    p->direct_allocations = true;  // state slots held outside kvseq: kvpool_check cannot attribute them
    return p->mamba->attach(rows, reuse, reuse_len, slots);
  });
}

KVPOOL_API kvpool_status kvreq_free_hybrid(kvpool* pool, const int32_t* rows, size_t rows_len, int32_t free_state,
                                           int32_t keep) {
  return with_pool("kvreq_free_hybrid", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_array(rows, rows_len, "rows"));
    KVPOOL_RETURN_IF_ERROR(p->requests->check_free(rows, rows_len));
    KVPOOL_RETURN_IF_ERROR(p->mamba->check_detach(rows, rows_len, free_state != 0, keep));
    KVPOOL_RETURN_IF_ERROR(p->mamba->detach(rows, rows_len, free_state != 0, keep));
    return p->requests->free(rows, rows_len);
  });
}

KVPOOL_API kvpool_status kvreq_mamba_slots(const kvpool* pool, int32_t row, int32_t* slot, int32_t* ping_pong,
                                           size_t ping_pong_len) {
  return with_pool<Access::kShared>("kvreq_mamba_slots", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(check_out(slot, "slot"));
    KVPOOL_RETURN_IF_ERROR(check_array(ping_pong, ping_pong_len, "ping_pong"));
    if (ping_pong_len != 2) return Status::invalid("ping_pong has length " + std::to_string(ping_pong_len) + ", expected 2");
    KVPOOL_RETURN_IF_ERROR(p->requests->check_row(row));
    *slot = p->mamba->slot_of_row(row);
    const auto pp = p->mamba->ping_pong_of_row(row);
    ping_pong[0] = pp[0];
    ping_pong[1] = pp[1];
    return Status::ok();
  });
}

}  // extern "C"
