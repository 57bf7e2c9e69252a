// extern "C" entry points of seq.h.
#include <cstddef>
#include <cstring>

#include "capi/api_util.hpp"
#include "capi/device_mirror.hpp"
#include "capi/device_alloc_api.hpp"
#include "kvpool/device.h"
#include "kvpool/seq.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

// The pool has kvseq at all (queries of a request's own state need nothing else).
Status has_seqs(const kvpool* pool) {
  if (!pool->seqs) {
    return Status::unsupported("kvseq does not support attention \"" +
                               std::string(kvp::config::attention_name(pool->config.model.attention)) +
                               "\" with pool.mamba_extra_buffer");
  }
  return Status::ok();
}

// kvseq keeps slot ids on the host: with a device free list a call that may allocate or
// free runs on the list's host mirror, brought up to date first (capi/device_mirror.hpp).
Status need_seqs(kvpool* pool) {
  KVPOOL_RETURN_IF_ERROR(has_seqs(pool));
  return kvp::capi::use_host_list(pool);
}

// Allocation results count in kvpool_get_stats() like the kvalloc_* calls they make.
Status counted(kvpool* pool, const Status& st) {
  if (st.is_ok()) {
    ++pool->counters.alloc_calls;
  } else if (st.code() == KVPOOL_ERR_OUT_OF_MEMORY) {
    ++pool->counters.alloc_failures;
  }
  return st;
}

// Host tier: the copies that earlier calls' inserts noted start once this call has
// succeeded (PrefixCache::tick: never fails, so the call's result stands and a failed
// call changes nothing). Its own inserts wait for the next call: their KV is written by
// the forward pass the engine issues after it.
// The swa and hybrid_linear tiers unlock the nodes of landed copies first, so that the
// call plans with what is evictable now.
template <class Body>
Status ticked(kvpool* pool, Body&& body) {
  if (pool->swa_cache && pool->swa_cache->host_tier()) KVPOOL_RETURN_IF_ERROR(pool->swa_cache->release_landed());
  if (pool->mamba_cache && pool->mamba_cache->host_tier()) KVPOOL_RETURN_IF_ERROR(pool->mamba_cache->release_landed());
  kvp::cache::PrefixCache* tier = pool->cache && pool->cache->host_tier() ? pool->cache.get() : nullptr;
  const size_t noted = tier != nullptr ? tier->pending_inserts() : 0;
  const Status st = body();
  if (st.is_ok() && tier != nullptr && tier->tier_busy()) tier->tick(noted);
  return st;
}

// kvpool_metrics_text's prefix hits, by the tier each hit token came from.
void count_lookup(kvpool* pool, uint64_t seq, size_t tokens_len) {
  kvp::MetricCounters& m = pool->metric_counters;
  ++m.lookups;
  m.lookup_tokens += tokens_len;
  if (const kvp::seq::Request* r = pool->seqs->find(seq)) {
    m.device_hit_tokens += r->prefix_hit - r->host_hit;
    m.host_hit_tokens += r->host_hit - r->storage_hit;
    m.storage_hit_tokens += r->storage_hit;
  }
}

// The arguments of kvseq_extend and kvseq_extend_async (slots: host or device memory).
Status check_extend_args(const uint64_t* seqs, size_t seqs_len, const int64_t* chunk_lens, size_t chunk_lens_len,
                         const int64_t* slots, size_t slots_len) {
  KVPOOL_RETURN_IF_ERROR(check_array(seqs, seqs_len, "seqs"));
  KVPOOL_RETURN_IF_ERROR(check_array(chunk_lens, chunk_lens_len, "chunk_lens"));
  KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
  return check_same_length(chunk_lens_len, seqs_len, "chunk_lens", "seqs");
}

// The arguments of kvseq_decode and kvseq_decode_async.
Status check_decode_args(const uint64_t* seqs, size_t seqs_len, const int32_t* tokens, size_t tokens_len,
                         const int64_t* slots, size_t slots_len) {
  KVPOOL_RETURN_IF_ERROR(check_array(seqs, seqs_len, "seqs"));
  KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
  KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
  KVPOOL_RETURN_IF_ERROR(check_same_length(tokens_len, seqs_len, "tokens", "seqs"));
  return check_same_length(slots_len, seqs_len, "slots", "seqs");
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvseq_begin(kvpool* pool, const int32_t* tokens, size_t tokens_len, const char* extra_key,
                                     uint64_t* seq, size_t* cached) {
  return with_pool("kvseq_begin", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_out(seq, "seq"));
    KVPOOL_RETURN_IF_ERROR(check_out(cached, "cached"));
    KVPOOL_RETURN_IF_ERROR(
        ticked(p, [&] { return p->seqs->begin(tokens, tokens_len, extra_key == nullptr ? "" : extra_key, seq, cached); }));
    count_lookup(p, *seq, tokens_len);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvseq_extend(kvpool* pool, const uint64_t* seqs, size_t seqs_len, const int64_t* chunk_lens,
                                      size_t chunk_lens_len, int64_t* slots, size_t slots_len) {
  return with_pool("kvseq_extend", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    KVPOOL_RETURN_IF_ERROR(check_extend_args(seqs, seqs_len, chunk_lens, chunk_lens_len, slots, slots_len));
    return ticked(p, [&] { return counted(p, p->seqs->extend(seqs, chunk_lens, seqs_len, slots, slots_len)); });
  });
}

KVPOOL_API kvpool_status kvseq_decode(kvpool* pool, const uint64_t* seqs, size_t seqs_len, const int32_t* tokens,
                                      size_t tokens_len, int64_t* slots, size_t slots_len) {
  return with_pool("kvseq_decode", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    KVPOOL_RETURN_IF_ERROR(check_decode_args(seqs, seqs_len, tokens, tokens_len, slots, slots_len));
    return ticked(p, [&] { return counted(p, p->seqs->decode(seqs, tokens, seqs_len, slots)); });
  });
}

KVPOOL_API kvpool_status kvseq_extend_async(kvpool* pool, const uint64_t* seqs, size_t seqs_len,
                                            const int64_t* chunk_lens, size_t chunk_lens_len, int64_t* slots,
                                            size_t slots_len, void* stream) {
  return with_pool("kvseq_extend_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    KVPOOL_RETURN_IF_ERROR(check_extend_args(seqs, seqs_len, chunk_lens, chunk_lens_len, slots, slots_len));
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_fault_status(p));
    return ticked(p, [&] { return counted(p, p->seqs->extend_async(seqs, chunk_lens, seqs_len, slots, slots_len, stream)); });
  });
}

KVPOOL_API kvpool_status kvseq_decode_async(kvpool* pool, const uint64_t* seqs, size_t seqs_len, const int32_t* tokens,
                                            size_t tokens_len, int64_t* slots, size_t slots_len, void* stream) {
  return with_pool("kvseq_decode_async", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    KVPOOL_RETURN_IF_ERROR(check_decode_args(seqs, seqs_len, tokens, tokens_len, slots, slots_len));
    KVPOOL_RETURN_IF_ERROR(kvp::capi::device_fault_status(p));
    return ticked(p, [&] { return counted(p, p->seqs->decode_async(seqs, tokens, seqs_len, slots, stream)); });
  });
}

KVPOOL_API kvpool_status kvseq_finish(kvpool* pool, uint64_t seq, size_t committed) {
  return with_pool("kvseq_finish", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    return ticked(p, [&] { return p->seqs->finish(seq, committed); });
  });
}

KVPOOL_API kvpool_status kvseq_abort(kvpool* pool, uint64_t seq) {
  return with_pool("kvseq_abort", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    return ticked(p, [&] { return p->seqs->abort(seq); });
  });
}

KVPOOL_API kvpool_status kvseq_retract(kvpool* pool, uint64_t seq, size_t* cached) {
  return with_pool("kvseq_retract", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_seqs(p));
    KVPOOL_RETURN_IF_ERROR(check_out(cached, "cached"));
    return ticked(p, [&] { return p->seqs->retract(seq, cached); });
  });
}

KVPOOL_API kvpool_status kvseq_get_info(const kvpool* pool, uint64_t seq, kvseq_info* out) {
  return with_pool<Access::kShared>("kvseq_get_info", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_seqs(p));  // the request's own state: no list needed
    KVPOOL_RETURN_IF_ERROR(check_out(out, "out"));
    // host_hit came later: callers built before it pass the size without it.
    const size_t before_host_hit = offsetof(kvseq_info, host_hit);
    if (out->struct_size < before_host_hit) {
      return Status::invalid("out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                             std::to_string(before_host_hit) + " (use KVSEQ_INFO_INIT)");
    }
    const kvp::seq::Request* r = p->seqs->find(seq);
    if (r == nullptr) return Status::invalid("request " + std::to_string(seq) + " does not exist");
    out->row = r->row;
    out->tokens = r->tokens.size();
    out->computed = r->slots.size();
    out->cached = r->cached;
    out->prefix_hit = r->prefix_hit;
    if (out->struct_size >= offsetof(kvseq_info, host_hit) + sizeof(out->host_hit)) out->host_hit = r->host_hit;
    if (out->struct_size >= sizeof(kvseq_info)) out->storage_hit = r->storage_hit;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvseq_get_slots(const kvpool* pool, uint64_t seq, int64_t* slots, size_t slots_cap,
                                         size_t* slots_len) {
  return with_pool<Access::kShared>("kvseq_get_slots", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_seqs(p));  // the request's own state: no list needed
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_cap, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_out(slots_len, "slots_len"));
    const kvp::seq::Request* r = p->seqs->find(seq);
    if (r == nullptr) return Status::invalid("request " + std::to_string(seq) + " does not exist");
    *slots_len = r->slots.size();
    if (r->slots.size() > slots_cap) {
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the request has " + std::to_string(r->slots.size()) +
                                                     " slots, slots_cap is " + std::to_string(slots_cap));
    }
    if (!r->slots.empty()) std::memcpy(slots, r->slots.data(), r->slots.size() * sizeof(int64_t));
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvseq_accounting(const kvpool* pool, size_t* available, size_t* evictable,
                                          size_t* protected_len, size_t* uncached, size_t* capacity) {
  return with_pool<Access::kSharedOnHostList>("kvseq_accounting", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_seqs(p));
    KVPOOL_RETURN_IF_ERROR(kvp::capi::refresh_host_list(p));  // reads the free count, changes nothing
    for (auto [ptr, name] : {std::pair<size_t*, const char*>{available, "available"}, {evictable, "evictable"},
                             {protected_len, "protected_len"}, {uncached, "uncached"}, {capacity, "capacity"}}) {
      KVPOOL_RETURN_IF_ERROR(check_out(ptr, name));
    }
    p->seqs->accounting(available, evictable, protected_len, uncached, capacity);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvseq_mamba_slot(const kvpool* pool, uint64_t seq, int32_t* slot) {
  return with_pool<Access::kShared>("kvseq_mamba_slot", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(kvp::capi::need_mamba(p));
    KVPOOL_RETURN_IF_ERROR(has_seqs(p));  // the request's own state: no list needed
    KVPOOL_RETURN_IF_ERROR(check_out(slot, "slot"));
    const kvp::seq::Request* r = p->seqs->find(seq);
    if (r == nullptr) return Status::invalid("request " + std::to_string(seq) + " does not exist");
    *slot = r->state;
    return Status::ok();
  });
}

}  // extern "C"
