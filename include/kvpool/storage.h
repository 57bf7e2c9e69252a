/**
 * @file storage.h
 * @brief The storage tier (L3) below the host tier: kvstore_*.
 *
 * With a `storage` section (and a `host_cache` one) a pool backs up the host tier's
 * pages to a store that outlives the process and can be shared by many pools: a
 * directory (`file`), memcached servers, redis, or the engine's own backend (`custom`, a
 * ::kvstore_backend given to kvpool_create_with_storage()). Pages are named by the SHA-256
 * page-hash chain of their tokens inside a namespace: the fingerprint of the model, dtype,
 * page size, layer range, tensor-parallel shard and extra key, so pools of different models never
 * read each other's pages. Every page is stored with a header and checksums and is loaded
 * only when all of them pass.
 *
 * Backups: once a page's host copy has landed it is queued for storage and written by a
 * background thread (batches of 128 pages); its host page stays pinned until then.
 * Prefetches (SGLang's flow): when a request arrives, kvstore_prefetch() looks up how far
 * its prompt continues past what the device and host tiers hold and, past the threshold
 * (`prefetch_threshold_tokens`, default 256), reads those pages into the host tier on a
 * background thread. The engine asks kvstore_prefetch_poll() whether the request may go on
 * (`ready`, by the prefetch policy: `best_effort` always, `wait_complete` when all pages
 * landed, `timeout` when they landed or the time is up), then kvstore_prefetch_end() puts
 * what landed into the tree as host-only nodes, and kvseq_begin() loads them back like any
 * host hit (kvseq_info::storage_hit counts them). No call waits for storage I/O except
 * kvstore_flush() and kvstore_clear(), which say so.
 *
 * Pools without `storage` answer #KVPOOL_ERR_UNSUPPORTED. docs/storage.md has the details.
 * Thread safety: one thread at a time per pool, or any thread with pool.thread_safe
 * (pool.h); the tier's own threads are internal and never take the pool's lock.
 */
#ifndef KVPOOL_STORAGE_H
#define KVPOOL_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Counters of the storage tier and its backend (kvstore_get_stats()); monotonic unless noted. */
typedef struct kvstore_stats {
  /** In: sizeof(kvstore_stats) as the caller was compiled. */
  uint32_t struct_size;
  /** Backup jobs handed to the storage thread, and their tokens. */
  uint64_t backups;
  /** Tokens of those jobs. */
  uint64_t backup_tokens;
  /** Pages the backend stored (or already held). */
  uint64_t backup_pages;
  /** Pages not stored: a batch failed (the rest of its job is skipped). */
  uint64_t backup_pages_failed;
  /** Bytes written to the backend (headers included). */
  uint64_t backup_bytes;
  /** Now: backup jobs queued or running. */
  uint64_t backups_queued;
  /** Prefetches started. */
  uint64_t prefetches;
  /** kvstore_prefetch() calls that started nothing (see ::kvstore_skip). */
  uint64_t prefetches_skipped;
  /** Prefetches that found fewer stored tokens than the threshold (read nothing). */
  uint64_t prefetches_revoked;
  /** Now: prefetches started and not ended. */
  uint64_t prefetches_running;
  /** Tokens asked for by started prefetches. */
  uint64_t prefetch_tokens;
  /** Tokens found in storage (consecutive from each prefetch's start). */
  uint64_t prefetch_hit_tokens;
  /** Tokens read, checked and written to the host tier. */
  uint64_t prefetch_loaded_tokens;
  /** Bytes read from the backend. */
  uint64_t prefetch_bytes;
  /** Tokens that became host-only nodes at kvstore_prefetch_end(). */
  uint64_t prefetch_inserted_tokens;
  /** Tokens read but not kept (the tree had them by then, or lost the prefix above them). */
  uint64_t prefetch_dropped_tokens;
  /** Tokens loaded back to the device that a prefetch had brought (kvseq_info::storage_hit summed). */
  uint64_t storage_hit_tokens;
  /** Read pages rejected: damaged (checksum, magic, length). */
  uint64_t pages_corrupt;
  /** Read pages rejected: shorter than a page. */
  uint64_t pages_truncated;
  /** Read pages rejected: written by another model, format version or under another key. */
  uint64_t pages_foreign;
  /** Pages the backend failed to read (an error, or gone since the lookup). */
  uint64_t read_failures;
  /** Backend: values stored, their bytes, and puts skipped because the key existed. */
  uint64_t store_puts;
  /** Backend: bytes of the values stored. */
  uint64_t store_put_bytes;
  /** Backend: puts skipped because the key already held the page. */
  uint64_t store_put_existing;
  /** Backend: puts that failed. */
  uint64_t store_put_errors;
  /** Backend: values asked for. */
  uint64_t store_gets;
  /** Backend: values read whole. */
  uint64_t store_get_hits;
  /** Backend: values not there. */
  uint64_t store_get_misses;
  /** Backend: reads that failed. */
  uint64_t store_get_errors;
  /** Backend: operations that waited a whole timeout for a server. */
  uint64_t store_timeouts;
  /** Backend: connection or protocol errors. */
  uint64_t store_server_errors;
  /** Backend: file system errors (full disk, I/O errors). */
  uint64_t store_io_errors;
  /** Backend: split values with a part missing or damaged (memcached), read as misses. */
  uint64_t store_partial_values;
  /** Backend: values it removed to stay within its size bound (file `max_bytes`). */
  uint64_t store_evicted;
  /** Backend: times a server was taken out of rotation after failures (memcached). */
  uint64_t store_servers_ejected;
} kvstore_stats;

/** @brief Initializer for a ::kvstore_stats whose struct_size is set. */
#define KVSTORE_STATS_INIT { (uint32_t)sizeof(kvstore_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/** @brief Why kvstore_prefetch() started nothing. */
typedef enum kvstore_skip {
  /** A prefetch started. */
  KVSTORE_SKIP_NONE = 0,
  /** The part past the cached prefix is shorter than the prefetch threshold. */
  KVSTORE_SKIP_BELOW_THRESHOLD = 1,
  /** The cached prefix has no host copy yet, so nothing can hang below it. */
  KVSTORE_SKIP_NOT_BACKED_UP = 2,
  /** Running prefetches hold as many host tokens as they may (80 % of host minus device). */
  KVSTORE_SKIP_CAPACITY = 3,
  /** The host tier has no room (its pages are held by nodes in use). */
  KVSTORE_SKIP_HOST_FULL = 4
} kvstore_skip;

/** @brief Where a prefetch stands (kvstore_prefetch_poll()). */
typedef struct kvstore_prefetch_info {
  /** In: sizeof(kvstore_prefetch_info) as the caller was compiled. */
  uint32_t struct_size;
  /** 1 when nothing more will land (all read, stopped at a missing or bad page, or revoked). */
  int32_t done;
  /** 1 when storage held fewer tokens than the threshold: nothing was read. */
  int32_t revoked;
  /** 1 when the prefetch policy lets the request go on now. */
  int32_t ready;
  /** 1 once hit_tokens is known. */
  int32_t searched;
  /** Tokens asked for (past the cached prefix, whole pages). */
  uint64_t asked_tokens;
  /** Tokens found in storage, consecutive from the start. */
  uint64_t hit_tokens;
  /** Tokens already in the host tier, checked. */
  uint64_t loaded_tokens;
} kvstore_prefetch_info;

/** @brief Initializer for a ::kvstore_prefetch_info whose struct_size is set. */
#define KVSTORE_PREFETCH_INFO_INIT { (uint32_t)sizeof(kvstore_prefetch_info), 0, 0, 0, 0, 0, 0, 0 }

/** @brief The outcome of one key of a batch, written by a ::kvstore_backend callback. */
typedef enum kvstore_result {
  /** put: the value is stored (or the key already held it); get: the value was read whole. */
  KVSTORE_OK = 0,
  /** get: no value under the key (never stored, or evicted). Not a valid put result. */
  KVSTORE_MISS = 1,
  /** The backend failed for this key (I/O error, server down, timeout). */
  KVSTORE_ERROR = 2
} kvstore_result;

/**
 * @brief An engine's own storage backend: a table of callbacks (kvpool_create_with_storage()).
 *
 * The backend stores opaque byte values under short keys; kvpool puts a header and
 * checksums around each page, so the backend knows nothing of pages or models and every
 * check happens above it. The contract:
 *
 * - **Keys** are NUL-terminated strings of 1 to 120 characters of `[0-9a-z-]`. They are
 *   valid only during the call (copy them to keep them).
 * - **Values** are opaque bytes that a get must return byte-exact: the same length and
 *   bytes that were put. A damaged value is not loaded (kvstore_stats::pages_corrupt
 *   counts it), but a backend must not rely on that.
 * - **Write once**: a key always names the same bytes (it is a hash of the page's tokens
 *   and the model), so a put of a key that already exists may skip the write and report
 *   #KVSTORE_OK. Values may be evicted at any time; a get then reports #KVSTORE_MISS.
 * - **Batches**: each callback handles `n` keys (at most 128) and reports every key in
 *   `results` (a ::kvstore_result; any other value, or a result left unwritten, counts as
 *   #KVSTORE_ERROR). The failure of one key must not hide the results of the others.
 * - **Threads**: the callbacks run on the pool's storage threads (a backup thread and a
 *   prefetch thread, possibly at the same time), `clear` on the thread that calls
 *   kvstore_clear(), while the storage threads may be running. Pools created with the
 *   same `user` call it from all their threads. Every callback must be thread-safe.
 * - **No re-entry**: a callback must never call kvpool (any kvpool_*, kvseq_*, kvstore_*
 *   ... function) and must not throw (C++) or longjmp out. On a pool with
 *   pool.thread_safe such a call fails at once with #KVPOOL_ERR_UNSUPPORTED (it could
 *   otherwise wait forever for the pool's lock).
 * - **Bounded**: a callback must not block forever; bound every wait on a server by a
 *   timeout and report #KVSTORE_ERROR (or #KVSTORE_MISS for a get) when it expires.
 *   kvstore_flush() and kvpool_destroy() wait for the running callbacks.
 *
 * The table is copied by kvpool_create_with_storage(); `user` and the functions must stay
 * valid until `destroy` is called (or, without `destroy`, until kvpool_destroy() returns).
 */
typedef struct kvstore_backend {
  /** Set to sizeof(kvstore_backend): lets later versions add fields. */
  uint32_t struct_size;
  /** Passed back to every callback unchanged. */
  void *user;
  /**
   * Required. Stores `values[i]` (`sizes[i]` bytes) under `keys[i]` for i < n and sets
   * `results[i]` to #KVSTORE_OK or #KVSTORE_ERROR. The value bytes are valid only during
   * the call.
   */
  void (*put)(void *user, const char *const *keys, const uint8_t *const *values, const size_t *sizes, size_t n,
              int32_t *results);
  /**
   * Required. Reads the value of `keys[i]` into `dst[i]`, which has room for `capacity[i]`
   * bytes, for i < n: `results[i]` = #KVSTORE_OK with `sizes[i]` = the value's full length
   * (when that exceeds `capacity[i]`, copy only `capacity[i]` bytes; kvpool rejects the
   * value), #KVSTORE_MISS when the key holds no value, or #KVSTORE_ERROR.
   */
  void (*get)(void *user, const char *const *keys, uint8_t *const *dst, const size_t *capacity, size_t n,
              size_t *sizes, int32_t *results);
  /**
   * Required. How many of `keys[0..n)` exist, counted from the start up to the first that
   * does not (a key that cannot be asked about counts as missing). A result above `n` is
   * taken as `n`.
   */
  size_t (*exists_prefix)(void *user, const char *const *keys, size_t n);
  /**
   * Optional (NULL: kvstore_clear() answers #KVPOOL_ERR_UNSUPPORTED). Removes every value
   * the backend holds for kvpool; returns #KVSTORE_OK, or #KVSTORE_ERROR when it failed.
   */
  int32_t (*clear)(void *user);
  /**
   * Optional. Called exactly once per pool created with this table, by kvpool_destroy()
   * after the pool's storage threads have stopped (no other callback of that pool runs
   * during or after it). Never called when kvpool_create_with_storage() fails.
   */
  void (*destroy)(void *user);
} kvstore_backend;

/**
 * @brief Create a pool whose storage tier is the caller's backend.
 *
 * The configuration's `storage` section must say `"backend": "custom"` (and takes no
 * `path` or `servers`); its prefetch settings apply as for the built-in backends. A
 * configuration with backend `custom` given to kvpool_create() fails with
 * #KVPOOL_ERR_CONFIG. No callback is called during creation.
 *
 * There is no call yet that takes both a ::kvpool_allocator and a backend: this one and
 * kvpool_create_with_allocator() are exclusive for now.
 *
 * @param[in]  json     The configuration text; it need not be NUL-terminated.
 * @param[in]  json_len Length of @p json in bytes.
 * @param[in]  backend  The callbacks (copied; see ::kvstore_backend for how long they
 *                      must stay valid).
 * @param[out] out      Receives the new handle; set to NULL on failure.
 * @return As kvpool_create(); #KVPOOL_ERR_INVALID_ARGUMENT when @p backend is NULL, its
 *         struct_size is too small or a required callback is NULL; #KVPOOL_ERR_CONFIG
 *         when the configuration has no `storage` section or names another backend.
 *
 * Ownership: the caller owns @p *out and releases it with kvpool_destroy(), which calls
 * `backend->destroy` (when set) once the pool no longer uses the backend. On failure
 * nothing was called and `user` stays the caller's.
 * Thread safety: safe from any thread; the new pool is then used as kvpool_create() says.
 */
KVPOOL_API kvpool_status kvpool_create_with_storage(const char *json, size_t json_len, const kvstore_backend *backend,
                                                    kvpool **out);

/**
 * @brief Counters of the storage tier and its backend.
 * @param[in]     pool A pool with a storage tier.
 * @param[in,out] out  Filled; its struct_size must be set (::KVSTORE_STATS_INIT).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (no storage tier); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvstore_get_stats(const kvpool *pool, kvstore_stats *out);

/**
 * @brief Start reading the stored continuation of a prompt into the host tier.
 *
 * Matches the prompt (as kvseq_begin() would, without locking), and when the part past
 * the cached prefix reaches the threshold, allocates host pages for it and hands the
 * reads to the storage thread. Returns at once.
 *
 * @param[in]  pool       A pool with a storage tier.
 * @param[in]  tokens     The prompt's token ids.
 * @param[in]  tokens_len Number of tokens (only whole pages are fetched).
 * @param[in]  extra_key  Namespace of the prefix cache, or NULL.
 * @param[out] id         The prefetch's id, or 0 when nothing started.
 * @param[out] skipped    Optional: a ::kvstore_skip saying why nothing started.
 * @return #KVPOOL_OK (also when nothing started); #KVPOOL_ERR_UNSUPPORTED;
 *         #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvstore_prefetch(kvpool *pool, const int32_t *tokens, size_t tokens_len,
                                          const char *extra_key, uint64_t *id, int32_t *skipped);

/**
 * @brief Where a prefetch stands, without waiting.
 * @param[in]     pool A pool with a storage tier.
 * @param[in]     id   A prefetch not yet ended.
 * @param[in,out] out  Filled; its struct_size must be set (::KVSTORE_PREFETCH_INFO_INIT).
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT (unknown or ended id).
 */
KVPOOL_API kvpool_status kvstore_prefetch_poll(const kvpool *pool, uint64_t id, kvstore_prefetch_info *out);

/**
 * @brief End a prefetch: what landed becomes host-only nodes of the tree.
 *
 * Ends it whatever its state (ask kvstore_prefetch_poll() for `ready` first, as the
 * policy wants); pages still being read are released by the storage thread when it is
 * done with them. Then kvseq_begin() (or kvhost_match() and kvhost_load_back()) finds the
 * tokens as a host hit.
 *
 * @param[in]  pool            A pool with a storage tier.
 * @param[in]  id              A prefetch not yet ended.
 * @param[out] inserted_tokens Optional: tokens added to the tree.
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT (unknown or ended id);
 *         #KVPOOL_ERR_HOST_MEMORY (nothing changed: the prefetch still runs and may be ended again).
 */
KVPOOL_API kvpool_status kvstore_prefetch_end(kvpool *pool, uint64_t id, uint64_t *inserted_tokens);

/**
 * @brief Wait until every queued backup has been written (blocks on storage I/O).
 *
 * For a service that stops and wants its pages in storage first; tests.
 * @param[in] pool A pool with a storage tier.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED.
 */
KVPOOL_API kvpool_status kvstore_flush(kvpool *pool);

/**
 * @brief Remove every page the backend holds (blocks on storage I/O).
 *
 * The file backend removes its page files, memcached flushes its servers, redis deletes
 * kvpool's keys, a custom backend (kvpool_create_with_storage()) calls its `clear`
 * callback. Other pools sharing the store lose their pages too. The pool's own
 * trees are unchanged.
 * @param[in] pool A pool with a storage tier.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (no storage tier, or a custom backend
 *         without a `clear` callback); #KVPOOL_ERR_IO when the backend failed.
 */
KVPOOL_API kvpool_status kvstore_clear(kvpool *pool);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_STORAGE_H */
