// extern "C" entry points of storage.h: the storage tier (L3) below the host tier.
#include "capi/api_util.hpp"
#include "capi/radix_util.hpp"
#include "kvpool/storage.h"

using kvp::Status;
using kvp::capi::check_array;
using kvp::capi::check_out;
using kvp::capi::key_of;
using kvp::capi::Access;
using kvp::capi::with_pool;

namespace {

Status has_storage(const kvpool* pool) {
  if (!pool->cache || pool->cache->storage() == nullptr) {
    return Status::unsupported("the pool has no storage tier (no storage section in its configuration)");
  }
  return Status::ok();
}

template <class T>
Status check_struct(const T* out, const char* init) {
  if (out->struct_size < sizeof(T)) {
    return Status::invalid("out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                           std::to_string(sizeof(T)) + " (use " + init + ")");
  }
  return Status::ok();
}

static_assert(int32_t(kvp::cache::PrefetchSkip::kHostFull) == KVSTORE_SKIP_HOST_FULL &&
                  int32_t(kvp::cache::PrefetchSkip::kCapacity) == KVSTORE_SKIP_CAPACITY &&
                  int32_t(kvp::cache::PrefetchSkip::kNotBackedUp) == KVSTORE_SKIP_NOT_BACKED_UP &&
                  int32_t(kvp::cache::PrefetchSkip::kBelowThreshold) == KVSTORE_SKIP_BELOW_THRESHOLD,
              "PrefetchSkip mirrors kvstore_skip");

}  // namespace

extern "C" {

KVPOOL_API kvpool_status kvstore_get_stats(const kvpool* pool, kvstore_stats* out) {
  return with_pool<Access::kShared>("kvstore_get_stats", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_storage(p));
    KVPOOL_RETURN_IF_ERROR(check_out(out, "out"));
    KVPOOL_RETURN_IF_ERROR(check_struct(out, "KVSTORE_STATS_INIT"));
    const kvp::cache::PrefixCache& c = *p->cache;
    kvp::storage::StorageTier& tier = *c.storage();
    const kvp::cache::StorageCacheStats& cs = c.storage_stats();
    const kvp::storage::StorageTierStats ts = tier.stats();
    const kvp::storage::BlobStats bs = tier.store().stats();
    const uint64_t P = static_cast<uint64_t>(c.page_size());
    out->backups = cs.backup_jobs;
    out->backup_tokens = cs.backup_tokens;
    out->backup_pages = ts.backup_pages;
    out->backup_pages_failed = ts.backup_pages_failed;
    out->backup_bytes = ts.backup_bytes;
    out->backups_queued = tier.backups_queued();
    out->prefetches = cs.prefetches;
    out->prefetches_skipped = cs.prefetches_skipped;
    out->prefetches_revoked = ts.prefetches_revoked;
    out->prefetches_running = c.prefetches_running();
    out->prefetch_tokens = cs.prefetch_tokens;
    out->prefetch_hit_tokens = ts.prefetch_hit_pages * P;
    out->prefetch_loaded_tokens = ts.prefetch_pages * P;
    out->prefetch_bytes = ts.prefetch_bytes;
    out->prefetch_inserted_tokens = cs.prefetch_inserted_tokens;
    out->prefetch_dropped_tokens = cs.prefetch_dropped_tokens;
    out->storage_hit_tokens = cs.storage_hit_tokens;
    out->pages_corrupt = ts.pages_corrupt;
    out->pages_truncated = ts.pages_truncated;
    out->pages_foreign = ts.pages_foreign;
    out->read_failures = ts.read_failures;
    out->store_puts = bs.puts;
    out->store_put_bytes = bs.put_bytes;
    out->store_put_existing = bs.put_existing;
    out->store_put_errors = bs.put_errors;
    out->store_gets = bs.gets;
    out->store_get_hits = bs.get_hits;
    out->store_get_misses = bs.get_misses;
    out->store_get_errors = bs.get_errors;
    out->store_timeouts = bs.timeouts;
    out->store_server_errors = bs.server_errors;
    out->store_io_errors = bs.io_errors;
    out->store_partial_values = bs.partial_values;
    out->store_evicted = bs.evicted;
    out->store_servers_ejected = bs.servers_ejected;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvstore_prefetch(kvpool* pool, const int32_t* tokens, size_t tokens_len, const char* extra_key,
                                          uint64_t* id, int32_t* skipped) {
  return with_pool("kvstore_prefetch", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_storage(p));
    KVPOOL_RETURN_IF_ERROR(kvp::capi::need_host_free_list(p));
    KVPOOL_RETURN_IF_ERROR(check_array(tokens, tokens_len, "tokens"));
    KVPOOL_RETURN_IF_ERROR(check_out(id, "id"));
    kvp::cache::PrefetchSkip why = kvp::cache::PrefetchSkip::kNone;
    uint64_t started = 0;
    KVPOOL_RETURN_IF_ERROR(p->cache->prefetch(tokens, tokens_len, key_of(extra_key), &started, &why));
    *id = started;
    if (skipped != nullptr) *skipped = static_cast<int32_t>(why);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvstore_prefetch_poll(const kvpool* pool, uint64_t id, kvstore_prefetch_info* out) {
  return with_pool<Access::kShared>("kvstore_prefetch_poll", pool, [&](const kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_storage(p));
    KVPOOL_RETURN_IF_ERROR(check_out(out, "out"));
    KVPOOL_RETURN_IF_ERROR(check_struct(out, "KVSTORE_PREFETCH_INFO_INIT"));
    kvp::cache::PrefetchState s;
    KVPOOL_RETURN_IF_ERROR(p->cache->prefetch_state(id, &s));
    out->done = s.done;
    out->revoked = s.revoked;
    out->ready = s.ready;
    out->searched = s.searched;
    out->asked_tokens = s.asked_tokens;
    out->hit_tokens = s.hit_tokens;
    out->loaded_tokens = s.loaded_tokens;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvstore_prefetch_end(kvpool* pool, uint64_t id, uint64_t* inserted_tokens) {
  return with_pool("kvstore_prefetch_end", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_storage(p));
    size_t inserted = 0;
    KVPOOL_RETURN_IF_ERROR(p->cache->prefetch_end(id, &inserted));
    if (inserted_tokens != nullptr) *inserted_tokens = inserted;
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvstore_flush(kvpool* pool) {
  return with_pool("kvstore_flush", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_storage(p));
    size_t done = 0;
    KVPOOL_RETURN_IF_ERROR(p->cache->poll(true, &done));  // host copies landed: their backups are queued
    p->cache->storage()->wait_idle();
    return p->cache->release_landed(&done);  // unpins what the backups read
  });
}

KVPOOL_API kvpool_status kvstore_clear(kvpool* pool) {
  return with_pool("kvstore_clear", pool, [&](kvpool* p) -> Status {
    KVPOOL_RETURN_IF_ERROR(has_storage(p));
    const Status st = p->cache->storage()->store().clear();
    // UNSUPPORTED: a custom backend without a clear callback; every other failure is the backend's I/O.
    if (!st.is_ok()) return Status(st.code() == KVPOOL_ERR_UNSUPPORTED ? KVPOOL_ERR_UNSUPPORTED : KVPOOL_ERR_IO, st.message());
    return Status::ok();
  });
}

}  // extern "C"
