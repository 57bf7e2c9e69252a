// extern "C" entry points of radix.h.
#include <cstring>

#include "cache/page_hash.hpp"
#include "capi/api_util.hpp"
#include "capi/radix_util.hpp"
#include "kvpool/radix.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::check_same_length;
using kvp::capi::key_of;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

Status has_cache(const kvpool* pool) {
  if (!pool->cache && !pool->mamba_cache && !pool->swa_cache) {
    return Status::unsupported("the pool has no radix prefix cache (prefix_cache.kind is not \"radix\", or a "
                               "hybrid_linear pool uses pool.mamba_extra_buffer)");
  }
  return Status::ok();
}

Status need_cache(kvpool* pool) {
  KVPOOL_RETURN_IF_ERROR(kvp::capi::need_host_free_list(pool));
  return has_cache(pool);
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status radix_match(kvpool* pool, const int32_t* tokens, size_t tokens_len, const char* extra_key,
                                     int64_t* slots, size_t slots_cap, size_t* matched, uint64_t* node) {
  return with_pool("radix_match", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_cap, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_out(matched, "matched"));
    KVPOOL_RETURN_IF_ERROR(check_out(node, "node"));
    const std::string key = key_of(extra_key);
    if (!p->cache) return kvp::capi::radix_match_two_level(p, tokens, tokens_len, key, -1, slots, slots_cap, matched, node, nullptr);
    // A match never exceeds the aligned key, so the pre-walk is needed only for small buffers.
    const size_t aligned = tokens_len - tokens_len % static_cast<size_t>(p->cache->page_size());
    const size_t would_match = slots_cap >= aligned ? 0 : p->cache->tree().cached_prefix(tokens, aligned, key);
    if (would_match > slots_cap) {
      *matched = would_match;
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the match has " + std::to_string(would_match) +
                                                     " slots, slots_cap is " + std::to_string(slots_cap));
    }
    if (slots_cap >= aligned) {  // straight into the caller's buffer: no copy, no allocation
      kvp::cache::NodeHandle last = 0;
      *matched = p->cache->tree().match_into(tokens, tokens_len, key, slots, &last);
      *node = last;
      return Status::ok();
    }
    kvp::cache::MatchResult m = p->cache->match(tokens, tokens_len, key);
    if (!m.slots.empty()) std::memcpy(slots, m.slots.data(), m.slots.size() * sizeof(int64_t));
    *matched = m.slots.size();
    *node = m.last_node;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status radix_insert(kvpool* pool, const int32_t* tokens, size_t tokens_len, const int64_t* slots,
                                      size_t slots_len, const char* extra_key, int32_t priority, size_t* prefix_len,
                                      uint64_t* node) {
  return with_pool("radix_insert", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_len, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_same_length(slots_len, tokens_len, "slots", "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_out(prefix_len, "prefix_len"));
    kvp::cache::NodeHandle last = 0;
    if (p->mamba_cache) {
      return Status::unsupported("a hybrid_linear pool caches a mamba state with every sequence: use radix_insert_mamba");
    }
    if (p->swa_cache) {
      KVPOOL_RETURN_IF_ERROR(p->swa_cache->insert_keep_prefix(tokens, tokens_len, slots, key_of(extra_key), prefix_len, &last));
    } else {
      KVPOOL_RETURN_IF_ERROR(p->cache->insert(tokens, tokens_len, slots, key_of(extra_key), priority, prefix_len, &last));
      // Host tier: engines that drive the tree insert after their forward pass wrote the KV,
      // so this insert's copies (and any noted earlier) start now (never fails).
      if (p->cache->host_tier()) p->cache->tick(p->cache->pending_inserts());
    }
    if (node != nullptr) *node = last;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status radix_lock(kvpool* pool, uint64_t node) {
  return with_pool("radix_lock", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    if (p->mamba_cache) return p->mamba_cache->tree().lock(node);
    if (p->swa_cache) return p->swa_cache->lock(node);
    return p->cache->tree().lock(node);
  });
}

KVPOOL_API kvpool_status radix_unlock(kvpool* pool, uint64_t node) {
  return with_pool("radix_unlock", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    if (p->mamba_cache) return p->mamba_cache->tree().unlock(node);
    if (p->swa_cache) return p->swa_cache->unlock(node);
    return p->cache->tree().unlock(node);
  });
}

KVPOOL_API kvpool_status radix_evict(kvpool* pool, size_t tokens, size_t* evicted) {
  return with_pool("radix_evict", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_out(evicted, "evicted"));
    if (p->mamba_cache) return p->mamba_cache->evict(tokens, evicted);
    size_t window_evicted = 0;
    if (p->swa_cache) return p->swa_cache->evict(tokens, 0, evicted, &window_evicted);
    return p->cache->evict(tokens, evicted);
  });
}

KVPOOL_API kvpool_status radix_sizes(const kvpool* pool, size_t* evictable, size_t* protected_len, size_t* total) {
  return with_pool<Access::kShared>("radix_sizes", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_cache(p));  // the tree's counters: no list needed
    KVPOOL_RETURN_IF_ERROR(check_out(evictable, "evictable"));
    KVPOOL_RETURN_IF_ERROR(check_out(protected_len, "protected_len"));
    KVPOOL_RETURN_IF_ERROR(check_out(total, "total"));
    kvp::capi::tree_sizes(p, evictable, protected_len, total);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status radix_reset(kvpool* pool) {
  return with_pool("radix_reset", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    if (p->seqs && p->seqs->active() > 0) {
      return Status::invalid(std::to_string(p->seqs->active()) + " requests are active; finish or abort them first");
    }
    // Host-tier copies in flight lock their nodes: they land first (CUDA pools).
    if (p->swa_cache && p->swa_cache->host_tier()) KVPOOL_RETURN_IF_ERROR(p->swa_cache->release_landed(true));
    if (p->mamba_cache && p->mamba_cache->host_tier()) KVPOOL_RETURN_IF_ERROR(p->mamba_cache->release_landed(true));
    if (p->cache && p->cache->host_tier()) KVPOOL_RETURN_IF_ERROR(p->cache->land_copies());
    size_t evictable = 0, locked = 0, total = 0;
    kvp::capi::tree_sizes(p, &evictable, &locked, &total);
    // A lock on a host-only node protects no device tokens, so the sizes alone miss it.
    const size_t held = p->cache ? p->cache->tree().held_locks() : 0;
    if (locked > 0 || held > 0) return Status::invalid("locked nodes exist; unlock them first");
    if (p->mamba_cache) return p->mamba_cache->reset();
    if (p->swa_cache) return p->swa_cache->reset();
    return p->cache->reset();
  });
}

KVPOOL_API kvpool_status radix_take_events(kvpool* pool, radix_event* events, size_t events_cap, size_t* events_len,
                                           int32_t* tokens, size_t tokens_cap, size_t* tokens_len) {
  return with_pool("radix_take_events", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_cache(p));
    KVPOOL_RETURN_IF_ERROR(check_array(events, events_cap, "events"));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_cap, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_out(events_len, "events_len"));
    KVPOOL_RETURN_IF_ERROR(check_out(tokens_len, "tokens_len"));
    // Copied straight from the tree's queue (tokens in one block), and drained only once
    // they fit: a caller whose buffers are too small loses nothing.
    const auto drain = [&](auto& tree) -> Status {
      const std::vector<kvp::cache::KvEvent>& queued = tree.queued_events();
      const std::vector<int32_t>& queued_tokens = tree.queued_event_tokens();
      *events_len = queued.size();
      *tokens_len = queued_tokens.size();
      if (queued.size() > events_cap || queued_tokens.size() > tokens_cap) {
        return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "need room for " + std::to_string(*events_len) + " events and " +
                                                       std::to_string(*tokens_len) + " tokens");
      }
      for (size_t i = 0; i < queued.size(); ++i) {
        const auto& e = queued[i];
        events[i] = radix_event{static_cast<int32_t>(e.type), e.has_parent ? 1 : 0, e.block_hash, e.parent_hash,
                                e.token_offset, e.token_count};
      }
      if (!queued_tokens.empty()) std::memcpy(tokens, queued_tokens.data(), queued_tokens.size() * sizeof(int32_t));
      tree.clear_events();
      return Status::ok();
    };
    if (p->swa_cache) return drain(p->swa_cache->tree());
    if (p->mamba_cache) return drain(p->mamba_cache->tree());
    if (!p->cache) {
      *events_len = *tokens_len = 0;
      return Status::ok();
    }
    return drain(p->cache->tree());
  });
}

KVPOOL_API kvpool_status radix_page_hash(const int32_t* tokens, size_t tokens_len, const uint8_t* parent,
                                         size_t parent_len, uint8_t* digest, size_t digest_len, int64_t* event_id) {
  return kvp::capi::guarded("radix_page_hash", [&]() -> Status {
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    if ((parent == nullptr) != (parent_len == 0) || (parent != nullptr && parent_len != 32)) {
      return Status::invalid("radix_page_hash: parent must be NULL with length 0, or 32 bytes (got length " +
                             std::to_string(parent_len) + ")");
    }
    if (digest == nullptr || digest_len != 32) return Status::invalid("radix_page_hash: digest must hold 32 bytes");
    kvp::cache::Digest prev{};
    if (parent != nullptr) std::memcpy(prev.data(), parent, 32);
    const kvp::cache::Digest d = kvp::cache::page_digest(parent != nullptr ? &prev : nullptr, tokens, tokens_len);
    std::memcpy(digest, d.data(), 32);
    if (event_id != nullptr) *event_id = kvp::cache::event_id(d);
    return Status::ok();
  });
}

}  // extern "C"
