// extern "C" entry point of metrics.h: a pool's figures in the Prometheus text format.
// Every family is documented in docs/services.md ("Metrics"); the values are read from
// the same places as kvpool_get_stats(), radix_sizes(), kvhost_get_stats() and
// kvstore_get_stats() (tests/observe checks that they agree), and nothing is changed.
#include <cstring>

#include "capi/api_util.hpp"
#include "capi/device_mirror.hpp"
#include "capi/radix_util.hpp"
#include "kvpool/metrics.h"
#include "util/prometheus_text.hpp"

using kvp::Status;
using kvp::capi::check_out;
using kvp::capi::with_pool;
using kvp::metrics::TextWriter;
using kvp::metrics::Type;

namespace {

constexpr Type kCounter = Type::kCounter;
constexpr Type kGauge = Type::kGauge;

// The KV allocator (kvpool_stats' token_* and swa_*), request rows, mamba states and memory.
void write_pool(const kvpool* p, TextWriter* w) {
  uint64_t capacity = 0, used = 0;
  if (p->swa) {
    capacity = static_cast<uint64_t>(p->swa->full().num_ids());
    used = p->swa->full().held();
  } else {
    const uint64_t page = static_cast<uint64_t>(p->paged->page_size());
    capacity = static_cast<uint64_t>(p->paged->pages().num_ids()) * page;
    used = (p->device_pages ? kvp::capi::held_pages(p) : p->paged->pages().held()) * page;
  }
  w->family("kvpool_capacity_tokens", kGauge, "Token slots the tier holds at most.");
  w->sample(capacity, {{"tier", "device"}});
  if (p->cache && p->cache->host_tier()) w->sample(p->cache->host_pool()->tokens(), {{"tier", "host"}});
  w->family("kvpool_used_tokens", kGauge,
            "Token slots in use: device slots handed out (requests and prefix cache), host slots held by cache nodes.");
  w->sample(used, {{"tier", "device"}});
  if (p->cache && p->cache->host_tier()) w->sample(p->cache->tree().host_size(), {{"tier", "host"}});
  if (p->swa) {
    w->family("kvpool_window_capacity_tokens", kGauge, "swa pools: sliding-window token slots.");
    w->sample(static_cast<uint64_t>(p->swa->swa().num_ids()));
    w->family("kvpool_window_used_tokens", kGauge, "swa pools: sliding-window token slots handed out.");
    w->sample(p->swa->swa().held());
  }
  if (p->mamba) {
    const uint64_t states = static_cast<uint64_t>(p->mamba->ids().num_ids());
    w->family("kvpool_mamba_capacity_states", kGauge, "hybrid_linear pools: mamba state slots.");
    w->sample(states);
    w->family("kvpool_mamba_used_states", kGauge, "hybrid_linear pools: mamba state slots handed out.");
    w->sample(states - p->mamba->ids().available());
  }
  const uint64_t rows = static_cast<uint64_t>(p->requests->row_ids().num_ids());
  w->family("kvpool_capacity_request_rows", kGauge, "Request-table rows that can be handed out.");
  w->sample(rows);
  w->family("kvpool_used_request_rows", kGauge, "Request-table rows handed out.");
  w->sample(rows - p->requests->available());
  if (p->seqs) {
    w->family("kvpool_running_requests", kGauge, "Requests of the request API (kvseq) begun and not finished.");
    w->sample(p->seqs->active());
  }
  w->family("kvpool_memory_bytes", kGauge, "Memory the pool allocated, by what it holds.");
  w->sample(p->kv->bytes(), {{"kind", "kv"}});
  w->sample(p->requests->memory().bytes(), {{"kind", "request_table"}});
  if (p->mamba) w->sample(p->mamba->bytes(), {{"kind", "mamba"}});
  w->family("kvpool_alloc_calls_total", kCounter, "Successful allocation calls (kvalloc and kvseq extend/decode).");
  w->sample(p->counters.alloc_calls);
  w->family("kvpool_alloc_failures_total", kCounter, "Allocation calls that found too few free slots (out of pool memory).");
  w->sample(p->counters.alloc_failures);
  w->family("kvpool_free_calls_total", kCounter, "Successful free calls.");
  w->sample(p->counters.free_calls);
  w->family("kvpool_rejected_calls_total", kCounter, "Allocator calls rejected as invalid (double frees and the like).");
  w->sample(p->counters.rejected_calls);
}

// The radix prefix cache: what it holds, what was found in it, what it evicted.
void write_cache(const kvpool* p, TextWriter* w) {
  const bool tree = p->cache || p->mamba_cache || p->swa_cache;
  if (tree) {
    size_t evictable = 0, protected_len = 0, total = 0;
    kvp::capi::tree_sizes(p, &evictable, &protected_len, &total);
    w->family("kvpool_evictable_tokens", kGauge, "Device tokens of the prefix cache that no request locks.");
    w->sample(evictable, {{"tier", "device"}});
    w->family("kvpool_protected_tokens", kGauge, "Device tokens of the prefix cache locked by running requests.");
    w->sample(protected_len, {{"tier", "device"}});
    if (p->cache && p->cache->host_tier()) {
      w->family("kvpool_host_only_tokens", kGauge, "Cached tokens held only in the host tier (evicted from the device).");
      w->sample(p->cache->tree().host_only_size());
    }
    if (p->swa_cache) {
      w->family("kvpool_window_evictable_tokens", kGauge, "swa pools: cached sliding-window tokens no request locks.");
      w->sample(p->swa_cache->tree().swa_evictable_size());
      w->family("kvpool_window_protected_tokens", kGauge, "swa pools: cached sliding-window tokens locked by requests.");
      w->sample(p->swa_cache->tree().swa_protected_size());
    }
    if (p->mamba_cache) {
      w->family("kvpool_mamba_evictable_states", kGauge, "hybrid_linear pools: cached mamba states no request locks.");
      w->sample(p->mamba_cache->tree().mamba_evictable_size());
      w->family("kvpool_mamba_protected_states", kGauge, "hybrid_linear pools: cached mamba states locked by requests.");
      w->sample(p->mamba_cache->tree().mamba_protected_size());
    }
  }
  if (p->seqs) {
    const kvp::MetricCounters& m = p->metric_counters;
    w->family("kvpool_prefix_lookups_total", kCounter, "Requests begun (kvseq_begin), each looking up its prompt.");
    w->sample(m.lookups);
    w->family("kvpool_prefix_lookup_tokens_total", kCounter, "Prompt tokens of the requests begun.");
    w->sample(m.lookup_tokens);
    if (tree) {
      w->family("kvpool_prefix_hit_tokens_total", kCounter,
                "Prompt tokens found in the prefix cache at kvseq_begin, by the tier they came from.");
      w->sample(m.device_hit_tokens, {{"tier", "device"}});
      if (p->cache && p->cache->host_tier()) w->sample(m.host_hit_tokens, {{"tier", "host"}});
      if (p->cache && p->cache->storage() != nullptr) w->sample(m.storage_hit_tokens, {{"tier", "storage"}});
    }
  }
  if (!tree) return;
  uint64_t device_evicted = 0;
  if (p->cache) device_evicted = p->cache->evicted_tokens();
  if (p->mamba_cache) device_evicted = p->mamba_cache->evicted_tokens();
  if (p->swa_cache) device_evicted = p->swa_cache->evicted_tokens();
  w->family("kvpool_evicted_tokens_total", kCounter, "Cached tokens evicted, by the tier they left.");
  w->sample(device_evicted, {{"tier", "device"}});
  if (p->cache && p->cache->host_tier()) w->sample(p->cache->tier_stats().host_evicted_tokens, {{"tier", "host"}});
  if (p->swa_cache) {
    w->family("kvpool_window_evicted_tokens_total", kCounter, "swa pools: cached sliding-window tokens evicted.");
    w->sample(p->swa_cache->evicted_window_tokens());
  }
  if (p->mamba_cache) {
    w->family("kvpool_mamba_evicted_states_total", kCounter, "hybrid_linear pools: cached mamba states evicted.");
    w->sample(p->mamba_cache->evicted_states());
  }
}

// Copies between the tiers (kvhost_stats, kvstore_stats) and the host tier's own counters.
void write_transfers(const kvpool* p, TextWriter* w) {
  if (!p->cache || !p->cache->host_tier()) return;
  const kvp::cache::PrefixCache& c = *p->cache;
  const kvp::cache::HostTierStats& h = c.tier_stats();
  kvp::storage::StorageTier* tier = c.storage();
  kvp::storage::StorageTierStats ts;
  if (tier != nullptr) ts = tier->stats();
  const uint64_t page = static_cast<uint64_t>(c.page_size());
  w->family("kvpool_transfers_total", kCounter,
            "Copies between tiers started: host-tier backups and load-backs, storage backup jobs and prefetches.");
  w->sample(h.backups, {{"direction", "device_to_host"}});
  w->sample(h.loads, {{"direction", "host_to_device"}});
  if (tier != nullptr) {
    w->sample(c.storage_stats().backup_jobs, {{"direction", "host_to_storage"}});
    w->sample(c.storage_stats().prefetches, {{"direction", "storage_to_host"}});
  }
  w->family("kvpool_transfer_tokens_total", kCounter, "Tokens copied between tiers (storage: whole pages stored or read).");
  w->sample(h.backup_tokens, {{"direction", "device_to_host"}});
  w->sample(h.load_tokens, {{"direction", "host_to_device"}});
  if (tier != nullptr) {
    w->sample(ts.backup_pages * page, {{"direction", "host_to_storage"}});
    w->sample(ts.prefetch_pages * page, {{"direction", "storage_to_host"}});
  }
  w->family("kvpool_transfer_bytes_total", kCounter, "Bytes copied between tiers (storage: stored pages, headers included).");
  w->sample(c.host_transfer()->bytes_to_host(), {{"direction", "device_to_host"}});
  w->sample(c.host_transfer()->bytes_to_device(), {{"direction", "host_to_device"}});
  if (tier != nullptr) {
    w->sample(ts.backup_bytes, {{"direction", "host_to_storage"}});
    w->sample(ts.prefetch_bytes, {{"direction", "storage_to_host"}});
  }
  w->family("kvpool_host_copies_in_flight", kGauge, "Host-tier copies started and not yet seen to land.");
  w->sample(c.copies_in_flight());
  w->family("kvpool_host_backup_errors_total", kCounter, "Host-tier backups that failed to start (the node stays device-only).");
  w->sample(h.backup_errors);
  w->family("kvpool_host_backups_skipped_total", kCounter, "Nodes left without a host copy: the host tier had no room.");
  w->sample(h.backups_skipped);
  w->family("kvpool_host_loads_refused_total", kCounter,
            "Host hits not loaded back: below the 10-token threshold or no device room.");
  w->sample(h.loads_refused);
}

// The storage tier: its queues, prefetch outcomes, and the failures of the tier and its backend.
void write_storage(const kvpool* p, TextWriter* w) {
  if (!p->cache || p->cache->storage() == nullptr) return;
  const kvp::cache::PrefixCache& c = *p->cache;
  kvp::storage::StorageTier& tier = *c.storage();
  const kvp::storage::StorageTierStats ts = tier.stats();
  const kvp::storage::BlobStats bs = tier.store().stats();
  w->family("kvpool_storage_backups_queued", kGauge, "Storage backup jobs queued or running.");
  w->sample(tier.backups_queued());
  w->family("kvpool_storage_prefetches_running", kGauge, "Storage prefetches started and not ended.");
  w->sample(c.prefetches_running());
  w->family("kvpool_storage_prefetches_skipped_total", kCounter, "kvstore_prefetch calls that started nothing.");
  w->sample(c.storage_stats().prefetches_skipped);
  w->family("kvpool_storage_prefetches_revoked_total", kCounter,
            "Prefetches that found fewer stored tokens than the threshold (read nothing).");
  w->sample(ts.prefetches_revoked);
  w->family("kvpool_storage_operation_errors_total", kCounter, "Backend operations that failed, by operation (one per key).");
  w->sample(bs.put_errors, {{"operation", "put"}});
  w->sample(bs.get_errors, {{"operation", "get"}});
  w->family("kvpool_storage_errors_total", kCounter,
            "Backend failures by cause: waits that timed out, server (connection, protocol) errors, file system errors.");
  w->sample(bs.timeouts, {{"kind", "timeout"}});
  w->sample(bs.server_errors, {{"kind", "server"}});
  w->sample(bs.io_errors, {{"kind", "io"}});
  w->family("kvpool_storage_servers_ejected_total", kCounter, "Times a server was taken out of rotation after failures.");
  w->sample(bs.servers_ejected);
  w->family("kvpool_storage_failed_pages_total", kCounter,
            "Pages not stored (host_to_storage) or not read (storage_to_host) because the backend failed.");
  w->sample(ts.backup_pages_failed, {{"direction", "host_to_storage"}});
  w->sample(ts.read_failures, {{"direction", "storage_to_host"}});
  w->family("kvpool_storage_rejected_pages_total", kCounter,
            "Stored pages read but not loaded, by the check they failed (corrupt, truncated, foreign).");
  w->sample(ts.pages_corrupt, {{"reason", "corrupt"}});
  w->sample(ts.pages_truncated, {{"reason", "truncated"}});
  w->sample(ts.pages_foreign, {{"reason", "foreign"}});
  w->family("kvpool_storage_partial_values_total", kCounter,
            "Split values with a part missing or damaged (memcached), read as misses.");
  w->sample(bs.partial_values);
  w->family("kvpool_storage_evicted_values_total", kCounter, "Values the backend removed to stay within its size bound.");
  w->sample(bs.evicted);
}

// CUDA pools: faults that the stream-ordered calls' kernels raised (device.h).
void write_device(const kvpool* p, TextWriter* w) {
  if (!p->device_fault) return;
  w->family("kvpool_device_faults_total", kCounter,
            "Faults raised on the device by stream-ordered calls: those cleared by kvalloc_clear, plus one while raised.");
  w->sample(p->metric_counters.device_faults_cleared + (p->device_fault->raised() ? 1 : 0));
}

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvpool_metrics_text(const kvpool* pool, char* text, size_t text_cap, size_t* text_len) {
  // A reader: on a thread-safe pool it shares the lock with other queries.
  return with_pool<kvp::capi::Access::kShared>("kvpool_metrics_text", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(check_out(text_len, "text_len"));
    if (text == nullptr && text_cap > 0) return Status::invalid("text is NULL but text_cap is " + std::to_string(text_cap));
    TextWriter w;
    write_pool(p, &w);
    write_cache(p, &w);
    write_transfers(p, &w);
    write_storage(p, &w);
    write_device(p, &w);
    const std::string& out = w.text();
    *text_len = out.size();
    if (text_cap <= out.size()) {
      return Status(KVPOOL_ERR_BUFFER_TOO_SMALL, "the text has " + std::to_string(out.size()) +
                                                     " bytes and its NUL, text_cap is " + std::to_string(text_cap));
    }
    std::memcpy(text, out.data(), out.size());
    text[out.size()] = '\0';
    return Status::ok();
  });
}

}  // extern "C"
