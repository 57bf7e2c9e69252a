// extern "C" entry points of host.h: the host tier (L2) of the radix cache.
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "capi/api_util.hpp"
#include "capi/radix_util.hpp"
#include "kvpool/host.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::key_of;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

// hybrid_linear pools tier the mamba radix tree (cache/mamba_cache_tier.cpp).
bool hybrid_tier(const kvpool* pool) { return pool->mamba_cache && pool->mamba_cache->host_tier(); }
// swa pools tier the swa radix tree (cache/swa_cache_tier.cpp): two host pools, two transfers.
bool swa_tier(const kvpool* pool) { return pool->swa_cache && pool->swa_cache->host_tier(); }

// The full-attention layers' transfer (swa: the window layers have a second one).
kvp::host::HostTransfer* transfer_of(const kvpool* pool) {
  if (swa_tier(pool)) return pool->swa_cache->host_transfer();
  return hybrid_tier(pool) ? pool->mamba_cache->host_transfer() : pool->cache->host_transfer();
}

Status has_tier(const kvpool* pool) {
  if (hybrid_tier(pool) || swa_tier(pool)) return Status::ok();
  if (!pool->cache || !pool->cache->host_tier()) {
    return Status::unsupported("the pool has no host tier (no host_cache section in its configuration)");
  }
  return Status::ok();
}

// Tree calls need the host copy of the free list current (pool.free_list "device").
Status need_tier(kvpool* pool) {
  KVPOOL_RETURN_IF_ERROR(has_tier(pool));
  return kvp::capi::need_host_free_list(pool);
}

Status check_set(int32_t set) {
  if (set < 0 || set >= kvp::host::kLoadSets) {
    return Status::invalid("load set " + std::to_string(set) + " is out of range, expected 0.." +
                           std::to_string(kvp::host::kLoadSets - 1));
  }
  return Status::ok();
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvhost_get_stats(const kvpool* pool, kvhost_stats* out) {
  return with_pool<Access::kShared>("kvhost_get_stats", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_out(out, "out"));
    // load_evicted_tokens came later: callers built before it pass the size without it.
    const size_t before_load_evicted = offsetof(kvhost_stats, load_evicted_tokens);
    if (out->struct_size < before_load_evicted) {
      return Status::invalid("out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                             std::to_string(before_load_evicted) + " (use KVHOST_STATS_INIT)");
    }
    const bool hybrid = hybrid_tier(p), swa = swa_tier(p);
    const kvp::cache::HostTierStats& s = swa      ? p->swa_cache->tier_stats()
                                         : hybrid ? p->mamba_cache->tier_stats()
                                                  : p->cache->tier_stats();
    uint64_t window_to_host = 0, window_to_device = 0;
    if (swa) {
      // Tokens of the full-layer pool; the window pool holds as many (docs/host-tier.md).
      const kvp::cache::SwaCache& c = *p->swa_cache;
      out->capacity_tokens = c.host_pool()->tokens();
      out->used_tokens = c.tree().host_size();
      out->host_only_tokens = c.tree().host_only_size();
      out->copies_in_flight = c.copies_in_flight();
      window_to_host = c.host_window_transfer()->bytes_to_host();
      window_to_device = c.host_window_transfer()->bytes_to_device();
    } else if (hybrid) {
      const kvp::cache::MambaCache& c = *p->mamba_cache;
      out->capacity_tokens = c.host_pool()->tokens();
      out->used_tokens = c.tree().host_size();
      out->host_only_tokens = c.tree().host_only_size();
      out->copies_in_flight = c.copies_in_flight();
    } else {
      const kvp::cache::PrefixCache& c = *p->cache;
      out->capacity_tokens = c.host_pool()->tokens();
      out->used_tokens = c.tree().host_size();
      out->host_only_tokens = c.tree().host_only_size();
      out->copies_in_flight = c.copies_in_flight();
    }
    out->backups = s.backups;
    out->backup_tokens = s.backup_tokens;
    out->backups_skipped = s.backups_skipped;
    out->backup_errors = s.backup_errors;
    out->loads = s.loads;
    out->load_tokens = s.load_tokens;
    out->loads_refused = s.loads_refused;
    out->host_evicted_tokens = s.host_evicted_tokens;
    out->bytes_to_host = transfer_of(p)->bytes_to_host() + window_to_host;
    out->bytes_to_device = transfer_of(p)->bytes_to_device() + window_to_device;
    if (out->struct_size >= sizeof(kvhost_stats)) out->load_evicted_tokens = s.load_evicted_tokens;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvhost_poll(kvpool* pool, int32_t wait, size_t* completed) {
  return with_pool("kvhost_poll", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));  // unlocks only: no free list involved
    size_t done = 0;
    if (swa_tier(p)) {
      KVPOOL_RETURN_IF_ERROR(p->swa_cache->poll(wait != 0, &done));
    } else if (hybrid_tier(p)) {
      KVPOOL_RETURN_IF_ERROR(p->mamba_cache->poll(wait != 0, &done));
    } else {
      KVPOOL_RETURN_IF_ERROR(p->cache->poll(wait != 0, &done));
    }
    if (completed != nullptr) *completed = done;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvhost_set_stream(kvpool* pool, void* stream) {
  return with_pool("kvhost_set_stream", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));
    if (swa_tier(p)) KVPOOL_RETURN_IF_ERROR(p->swa_cache->host_window_transfer()->set_compute_stream(stream));
    return transfer_of(p)->set_compute_stream(stream);
  });
}

KVPOOL_API kvpool_status kvhost_next_load_set(kvpool* pool, int32_t* set) {
  return with_pool("kvhost_next_load_set", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_out(set, "set"));
    *set = swa_tier(p)      ? p->swa_cache->advance_load_set()
           : hybrid_tier(p) ? p->mamba_cache->advance_load_set()
                            : p->cache->advance_load_set();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvhost_load_set(const kvpool* pool, int32_t* set) {
  return with_pool<Access::kShared>("kvhost_load_set", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_out(set, "set"));
    *set = swa_tier(p)      ? p->swa_cache->load_set()
           : hybrid_tier(p) ? p->mamba_cache->load_set()
                            : p->cache->load_set();
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvhost_wait_layer(kvpool* pool, int32_t set, int32_t layer, void* stream) {
  return with_pool("kvhost_wait_layer", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_set(set));
    const int32_t first = p->config.parallel.start_layer, last = p->config.parallel.end_layer;
    if (layer < first || layer > last) {
      return Status::invalid("layer " + std::to_string(layer) + " is not held by this pool (layers " + std::to_string(first) +
                             ".." + std::to_string(last) + ")");
    }
    uint32_t tiered = static_cast<uint32_t>(layer - first);
    if (p->config.model.attention == kvp::config::Attention::kHybridLinear) {
      // The tier holds the full-attention layers only, in order: a mamba layer reads no
      // loaded KV, so there is nothing to wait for.
      const std::vector<bool>& full = p->config.model.layer_is_full;
      if (!full[static_cast<size_t>(layer)]) return Status::ok();
      tiered = static_cast<uint32_t>(std::count(full.begin() + first, full.begin() + layer, true));
    }
    if (swa_tier(p)) {
      // Full layers in the first pool, window layers in the second, each in layer order.
      const std::vector<bool>& full = p->config.model.layer_is_full;
      const bool is_full = full[static_cast<size_t>(layer)];
      tiered = static_cast<uint32_t>(std::count(full.begin() + first, full.begin() + layer, is_full));
      if (!is_full) return p->swa_cache->host_window_transfer()->wait_layer(set, tiered, stream);
    }
    return transfer_of(p)->wait_layer(set, tiered, stream);
  });
}

KVPOOL_API kvpool_status kvhost_match(kvpool* pool, const int32_t* tokens, size_t tokens_len, const char* extra_key,
                                      int64_t* slots, size_t slots_cap, size_t* matched, size_t* host_matched,
                                      uint64_t* node, uint64_t* host_node) {
  return with_pool("kvhost_match", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_cap, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_out(matched, "matched"));
    KVPOOL_RETURN_IF_ERROR(check_out(host_matched, "host_matched"));
    KVPOOL_RETURN_IF_ERROR(check_out(node, "node"));
    KVPOOL_RETURN_IF_ERROR(check_out(host_node, "host_node"));
    const std::string key = key_of(extra_key);
    if (swa_tier(p)) {
      KVPOOL_RETURN_IF_ERROR(p->swa_cache->release_landed());  // polls without blocking, as every tier call
      // The usable device prefix (no tombstone, or `window` live tokens ending it), and the
      // tokens up to the deepest host-only node where a loaded-back match would be usable.
      size_t usable = 0;
      p->swa_cache->tree().cached_prefix(tokens, tokens_len, key, &usable);
      if (usable > slots_cap) {
        *matched = usable;
        return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the match has " + std::to_string(usable) +
                                                       " device slots, slots_cap is " + std::to_string(slots_cap));
      }
      kvp::cache::SwaMatch m = p->swa_cache->match(tokens, tokens_len, key);
      if (!m.slots.empty()) std::memcpy(slots, m.slots.data(), m.slots.size() * sizeof(int64_t));
      *matched = m.slots.size();
      *host_matched = m.host_tokens;
      *node = m.node;
      *host_node = m.host_node != 0 ? m.host_node : m.node;
      return Status::ok();
    }
    if (hybrid_tier(p)) {
      KVPOOL_RETURN_IF_ERROR(p->mamba_cache->release_landed());
      // The usable device prefix (up to the deepest device node with a mamba state), and
      // the tokens up to the deepest host-only node with one (docs/host-tier.md).
      size_t usable = 0;
      p->mamba_cache->tree().cached_prefix(tokens, tokens_len, key, &usable);
      if (usable > slots_cap) {
        *matched = usable;
        return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the match has " + std::to_string(usable) +
                                                       " device slots, slots_cap is " + std::to_string(slots_cap));
      }
      kvp::cache::MambaMatch m;
      KVPOOL_RETURN_IF_ERROR(p->mamba_cache->match(tokens, tokens_len, key, -1, &m));
      if (!m.slots.empty()) std::memcpy(slots, m.slots.data(), m.slots.size() * sizeof(int64_t));
      *matched = m.slots.size();
      *host_matched = m.host_tokens;
      *node = m.node;
      *host_node = m.host_node != 0 ? m.host_node : m.node;
      return Status::ok();
    }
    size_t done = 0;
    KVPOOL_RETURN_IF_ERROR(p->cache->release_landed(&done));
    const size_t would_match = p->cache->tree().cached_prefix(tokens, tokens_len, key);
    if (would_match > slots_cap) {
      *matched = would_match;
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the match has " + std::to_string(would_match) +
                                                     " device slots, slots_cap is " + std::to_string(slots_cap));
    }
    kvp::cache::MatchResult m = p->cache->match(tokens, tokens_len, key);
    if (!m.slots.empty()) std::memcpy(slots, m.slots.data(), m.slots.size() * sizeof(int64_t));
    *matched = m.slots.size();
    *host_matched = m.host_tokens;
    *node = m.last_node;
    *host_node = m.last_host_node;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvhost_load_back(kvpool* pool, uint64_t host_node, int64_t* slots, size_t slots_cap,
                                          size_t* loaded, uint64_t* node) {
  return with_pool("kvhost_load_back", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(need_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_array(slots, slots_cap, "slots"));
    KVPOOL_RETURN_IF_ERROR(check_out(loaded, "loaded"));
    KVPOOL_RETURN_IF_ERROR(check_out(node, "node"));
    if (swa_tier(p)) {
      kvp::cache::SwaRadixTree& tree = p->swa_cache->tree();
      if (!tree.is_live(host_node)) return Status::invalid("node handle " + std::to_string(host_node) + " is stale or unknown");
      size_t tokens = 0;
      KVPOOL_RETURN_IF_ERROR(tree.host_chain_tokens(host_node, &tokens));
      if (tokens > slots_cap) {
        *loaded = tokens;
        return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the host chain has " + std::to_string(tokens) + " tokens, slots_cap is " +
                                                       std::to_string(slots_cap));
      }
      std::vector<int64_t> out;
      size_t n = 0;
      KVPOOL_RETURN_IF_ERROR(p->swa_cache->load_back(host_node, &out, &n));
      if (n > 0) std::memcpy(slots, out.data(), n * sizeof(int64_t));
      *loaded = n;
      // The loaded chain's end (a device node now), else the chain's parent: radix_match
      // tells how much of it is usable.
      *node = n > 0 ? host_node : tree.device_ancestor(host_node);
      return Status::ok();
    }
    if (hybrid_tier(p)) {
      kvp::cache::MambaRadixTree& tree = p->mamba_cache->tree();
      if (!tree.is_live(host_node)) return Status::invalid("node handle " + std::to_string(host_node) + " is stale or unknown");
      if (!tree.tier_node(host_node).has_state && host_node != tree.root()) {
        return Status::invalid("node handle " + std::to_string(host_node) +
                               " has no mamba state: a match can only end at a node with one (use kvhost_match's host_node)");
      }
      std::vector<kvp::cache::NodeHandle> chain;
      std::vector<int64_t> host_slots;
      size_t tokens = 0;
      KVPOOL_RETURN_IF_ERROR(tree.host_chain(host_node, &chain, &tokens, &host_slots));
      if (tokens > slots_cap) {
        *loaded = tokens;
        return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the host chain has " + std::to_string(tokens) + " tokens, slots_cap is " +
                                                       std::to_string(slots_cap));
      }
      std::vector<int64_t> out;
      size_t n = 0;
      KVPOOL_RETURN_IF_ERROR(p->mamba_cache->load_back(host_node, &out, &n));
      if (n > 0) std::memcpy(slots, out.data(), n * sizeof(int64_t));
      *loaded = n;
      // The node a request can continue from: host_node once loaded, else the deepest
      // device node with a state above it (what radix_match returns).
      *node = tree.usable_ancestor(host_node);
      return Status::ok();
    }
    kvp::cache::RadixTree& tree = p->cache->tree();
    if (!tree.is_live(host_node)) return Status::invalid("node handle " + std::to_string(host_node) + " is stale or unknown");
    // The size first, so that a small buffer changes nothing.
    std::vector<kvp::cache::NodeHandle> chain;
    std::vector<int64_t> pages;
    size_t tokens = 0;
    kvp::cache::NodeHandle device_node = 0;
    KVPOOL_RETURN_IF_ERROR(tree.host_chain(host_node, &chain, &tokens, &pages, &device_node));
    if (tokens > slots_cap) {
      *loaded = tokens;
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the host chain has " + std::to_string(tokens) + " tokens, slots_cap is " +
                                                     std::to_string(slots_cap));
    }
    std::vector<int64_t> out;
    kvp::cache::NodeHandle last = 0;
    size_t n = 0;
    KVPOOL_RETURN_IF_ERROR(p->cache->load_back(host_node, &out, &n, &last));
    if (n > 0) std::memcpy(slots, out.data(), n * sizeof(int64_t));
    *loaded = n;
    *node = last;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvhost_evict(kvpool* pool, size_t tokens, size_t* evicted) {
  return with_pool("kvhost_evict", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));  // host pages only
    KVPOOL_RETURN_IF_ERROR(check_out(evicted, "evicted"));
    if (swa_tier(p)) return p->swa_cache->evict_host(tokens, evicted);
    if (hybrid_tier(p)) return p->mamba_cache->evict_host(tokens, evicted);
    size_t done = 0;
    KVPOOL_RETURN_IF_ERROR(p->cache->release_landed(&done));  // landed loads unlock host-only leaves
    return p->cache->evict_host(tokens, evicted);
  });
}

KVPOOL_API kvpool_status kvhost_node_state(const kvpool* pool, uint64_t node, int32_t* on_device, int32_t* on_host,
                                           size_t* tokens) {
  return with_pool<Access::kShared>("kvhost_node_state", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_tier(p));
    KVPOOL_RETURN_IF_ERROR(check_out(on_device, "on_device"));
    KVPOOL_RETURN_IF_ERROR(check_out(on_host, "on_host"));
    if (swa_tier(p)) {
      const kvp::cache::SwaRadixTree& tree = p->swa_cache->tree();
      if (!tree.is_live(node)) return Status::invalid("node handle " + std::to_string(node) + " is stale or unknown");
      const kvp::cache::SwaTierNode info = tree.tier_node(node);
      *on_device = info.on_device ? 1 : 0;
      *on_host = info.on_host ? 1 : 0;
      if (tokens != nullptr) *tokens = info.tokens;
      return Status::ok();
    }
    if (hybrid_tier(p)) {
      const kvp::cache::MambaRadixTree& tree = p->mamba_cache->tree();
      if (!tree.is_live(node)) return Status::invalid("node handle " + std::to_string(node) + " is stale or unknown");
      const kvp::cache::MambaTierNode info = tree.tier_node(node);
      *on_device = info.on_device ? 1 : 0;
      *on_host = info.on_host ? 1 : 0;
      if (tokens != nullptr) *tokens = info.tokens;
      return Status::ok();
    }
    if (!p->cache->tree().is_live(node)) return Status::invalid("node handle " + std::to_string(node) + " is stale or unknown");
    const kvp::cache::TierNodeInfo info = p->cache->tree().tier_node(node);
    *on_device = info.on_device ? 1 : 0;
    *on_host = info.on_host ? 1 : 0;
    if (tokens != nullptr) *tokens = info.tokens;
    return Status::ok();
  });
}

}  // extern "C"
