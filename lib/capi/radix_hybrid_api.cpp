// extern "C" entry points of radix.h for the mamba (hybrid_linear) and swa trees.
#include "capi/api_util.hpp"
#include "capi/radix_util.hpp"
#include "kvpool/radix.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::key_of;
using kvp::capi::refuse_request_state;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

Status need_mamba_cache(kvpool* pool) {
  KVPOOL_RETURN_IF_ERROR(kvp::capi::need_host_free_list(pool));
  if (!pool->mamba_cache) {
    return Status::unsupported("the pool has no mamba radix cache (attention is not \"hybrid_linear\", "
                               "prefix_cache.kind is not \"radix\", or pool.mamba_extra_buffer is set)");
  }
  return Status::ok();
}

Status need_swa_cache(kvpool* pool) {
  if (!pool->swa_cache) {
    return Status::unsupported("the pool has no swa radix cache (attention is not \"swa\" or prefix_cache.kind is not \"radix\")");
  }
  return Status::ok();
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status radix_match_mamba(kvpool* pool, const int32_t* tokens, size_t tokens_len,
                                           const char* extra_key, int32_t cow_slot, int64_t* slots, size_t slots_cap,
                                           size_t* matched, uint64_t* node, int32_t* mamba_slot) {
  return with_pool("radix_match_mamba", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_cap, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_out(matched, "matched"));
    KVPOOL_RETURN_IF_ERROR(check_out(node, "node"));
    KVPOOL_RETURN_IF_ERROR(check_out(mamba_slot, "mamba_slot"));
    if (cow_slot < -1) return Status::invalid("cow_slot is " + std::to_string(cow_slot) + ", expected a mamba slot or -1");
    if (cow_slot >= 0) {
      KVPOOL_RETURN_IF_ERROR(refuse_request_state(p, cow_slot, "cow_slot", "the copy would overwrite its state"));
    }
    return kvp::capi::radix_match_two_level(p, tokens, tokens_len, key_of(extra_key), cow_slot, slots, slots_cap,
                                            matched, node, mamba_slot);
  });
}

KVPOOL_API kvpool_status radix_insert_mamba(kvpool* pool, const int32_t* tokens, size_t tokens_len,
                                            const int64_t* slots, size_t slots_len, const char* extra_key,
                                            int32_t mamba_slot, size_t* prefix_len, int32_t* mamba_exist,
                                            uint64_t* node) {
  return with_pool("radix_insert_mamba", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(slots_len, tokens_len, "slots", "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_out(prefix_len, "prefix_len"));
    KVPOOL_RETURN_IF_ERROR(check_out(mamba_exist, "mamba_exist"));
    KVPOOL_RETURN_IF_ERROR(refuse_request_state(p, mamba_slot, "mamba_slot", "kvseq_finish hands it to the tree"));
    kvp::cache::NodeHandle last = 0;
    bool exist = false;
    KVPOOL_RETURN_IF_ERROR(
        p->mamba_cache->insert(tokens, tokens_len, slots, mamba_slot, key_of(extra_key), prefix_len, &exist, &last));
    *mamba_exist = exist ? 1 : 0;
    if (node != nullptr) *node = last;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status radix_evict_mamba(kvpool* pool, size_t states, size_t* evicted) {
  return with_pool("radix_evict_mamba", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_mamba_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_out(evicted, "evicted"));
    return p->mamba_cache->evict_mamba(states, evicted);
  });
}

KVPOOL_API kvpool_status radix_insert_swa(kvpool* pool, const int32_t* tokens, size_t tokens_len, const int64_t* slots,
                                          size_t slots_len, const char* extra_key, size_t prev_prefix_len,
                                          size_t swa_evicted_len, size_t* prefix_len, uint64_t* node) {
  return with_pool("radix_insert_swa", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_swa_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(slots_len, tokens_len, "slots", "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_out(prefix_len, "prefix_len"));
    kvp::cache::NodeHandle last = 0;
    KVPOOL_RETURN_IF_ERROR(p->swa_cache->insert(tokens, tokens_len, slots, key_of(extra_key), prev_prefix_len,
                                                swa_evicted_len, prefix_len, &last));
    if (node != nullptr) *node = last;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status radix_evict_swa(kvpool* pool, size_t tokens, size_t swa_tokens, size_t* evicted,
                                         size_t* swa_evicted) {
  return with_pool("radix_evict_swa", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_swa_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_out(evicted, "evicted"));
    KVPOOL_RETURN_IF_ERROR(check_out(swa_evicted, "swa_evicted"));
    return p->swa_cache->evict(tokens, swa_tokens, evicted, swa_evicted);
  });
}

KVPOOL_API kvpool_status radix_state_sizes(const kvpool* pool, size_t* evictable, size_t* protected_len) {
  return with_pool<Access::kShared>("radix_state_sizes", pool, [&](const kvpool* p) -> Status {
    if (!p->mamba_cache && !p->swa_cache) {
      return Status::unsupported("the pool has no mamba or swa radix cache (only hybrid_linear and swa pools have one)");
    }
    KVPOOL_RETURN_IF_ERROR(check_out(evictable, "evictable"));
    KVPOOL_RETURN_IF_ERROR(check_out(protected_len, "protected_len"));
    if (p->mamba_cache) {
      *evictable = p->mamba_cache->tree().mamba_evictable_size();
      *protected_len = p->mamba_cache->tree().mamba_protected_size();
    } else {
      *evictable = p->swa_cache->tree().swa_evictable_size();
      *protected_len = p->swa_cache->tree().swa_protected_size();
    }
    return Status::ok();
  });
}

}  // extern "C"
