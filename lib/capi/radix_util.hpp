// Helpers of the radix_* entry points shared by the plain tree (radix_api.cpp)
// and the mamba and swa trees (radix_hybrid_api.cpp).
#pragma once

#include <cstring>
#include <string>

#include "capi/device_mirror.hpp"
#include "capi/pool_handle.hpp"

namespace kvp::capi {

// The radix trees keep slot ids on the host: with a device free list they run on its
// host mirror, brought up to date first (capi/device_mirror.hpp).
inline Status need_host_free_list(::kvpool* pool) { return use_host_list(pool); }

// The namespace of a radix key: NULL is the default ("").
inline std::string key_of(const char* extra_key) { return extra_key == nullptr ? std::string() : std::string(extra_key); }

// Full-KV tokens of the pool's tree: unlocked, locked, and their sum.
inline void tree_sizes(const ::kvpool* p, size_t* evictable, size_t* protected_len, size_t* total) {
  if (p->mamba_cache) {
    *evictable = p->mamba_cache->tree().full_evictable_size();
    *protected_len = p->mamba_cache->tree().full_protected_size();
    *total = *evictable + *protected_len;
  } else if (p->swa_cache) {
    *evictable = p->swa_cache->tree().full_evictable_size();
    *protected_len = p->swa_cache->tree().full_protected_size();
    *total = *evictable + *protected_len;
  } else {
    *evictable = p->cache->tree().evictable_size();
    *protected_len = p->cache->tree().protected_size();
    *total = p->cache->tree().total_size();
  }
}

// radix_match (and radix_match_mamba) on a mamba or swa tree: the usable
// prefix. A buffer too small is reported from a walk that changes nothing.
inline Status radix_match_two_level(::kvpool* p, const int32_t* tokens, size_t n, const std::string& key,
                                    int32_t cow_slot, int64_t* slots, size_t slots_cap, size_t* matched,
                                    uint64_t* node, int32_t* state) {
  size_t usable = 0;
  if (slots_cap < n) {
    if (p->mamba_cache) {
      p->mamba_cache->tree().cached_prefix(tokens, n, key, &usable);
    } else {
      p->swa_cache->tree().cached_prefix(tokens, n, key, &usable);
    }
    if (usable > slots_cap) {
      *matched = usable;
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL,
                    "the match has " + std::to_string(usable) + " slots, slots_cap is " + std::to_string(slots_cap));
    }
  }
  std::vector<int64_t> found;
  if (p->mamba_cache) {
    cache::MambaMatch m;
    KVPOOL_RETURN_IF_ERROR(p->mamba_cache->match(tokens, n, key, cow_slot, &m));
    found = std::move(m.slots);
    *node = m.node;
    if (state != nullptr) *state = m.mamba_slot;
  } else {
    cache::SwaMatch m = p->swa_cache->match(tokens, n, key);
    found = std::move(m.slots);
    *node = m.node;
  }
  if (!found.empty()) std::memcpy(slots, found.data(), found.size() * sizeof(int64_t));
  *matched = found.size();
  return Status::ok();
}

}  // namespace kvp::capi
