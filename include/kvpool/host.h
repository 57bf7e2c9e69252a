/**
 * @file host.h
 * @brief The host-memory tier (L2) of the radix cache: kvhost_*.
 *
 * With a `host_cache` section a pool keeps a second, larger KV store in host memory
 * (pinned on CUDA pools) and its radix tree becomes SGLang's hierarchical cache: a
 * node is device-only, device+host (backed up) or host-only (evicted from the device,
 * kept on the host). The write policy decides when device pages are copied to the
 * host: `write_through` when a node is created, `write_through_selective` on its second
 * hit, `write_back` only when it is evicted from the device. Device eviction keeps
 * backed-up nodes as host-only; kvhost_evict() removes host-only leaves; a host-only
 * prefix is brought back with kvhost_load_back() (and by kvseq_begin(), which reports
 * it in kvseq_info::host_hit).
 *
 * Copies run on their own streams on CUDA pools: a backup follows the KV writes already
 * on the compute stream (kvhost_set_stream()); a load-back copies layer by layer into
 * the current load set, and kvhost_wait_layer() makes a stream wait for one layer of it
 * (SGLang's LayerDoneCounter: three rotating sets, one per batch in flight). Nodes whose
 * copies are in flight stay locked until a poll sees them land; every kvseq_* call, device
 * eviction, load-back, kvhost_match() and kvhost_evict() polls without blocking, and
 * kvhost_poll() does it on demand. On CPU pools copies land inside the call. With
 * host_cache.io_backend "direct", loads of the layer_first and page_first_direct layouts
 * go through the copy engines, whose operations a thread of the pool enqueues (the call
 * returns at once; kvhost_wait_layer() works the same).
 *
 * hybrid_linear pools tier their full-attention KV; mamba states stay on the device, and a
 * match ends only at a node with a state (host_node: the deepest host-only one).
 *
 * swa pools tier the full-attention layers' rows of every token and the sliding-window
 * layers' rows of the last `sliding_window` tokens of each node; a load-back gives the
 * chain's last window of tokens window slots again (the rest comes back as window
 * tombstones), so a match can end there (host_node: the deepest such host-only node).
 *
 * Both copy on the tier's streams as above, their copies in flight locking the nodes
 * they read or write. host_cache.defer_completion makes a CPU pool report its copies
 * landed only a few polls later, so that an engine's handling of copies in flight can
 * be tested without a GPU.
 *
 * Pools without `host_cache` answer #KVPOOL_ERR_UNSUPPORTED. docs/host-tier.md has the
 * details. Thread safety: one thread at a time per pool, or any thread with
 * pool.thread_safe (pool.h).
 */
#ifndef KVPOOL_HOST_H
#define KVPOOL_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Sizes and counters of the host tier (kvhost_get_stats()). */
typedef struct kvhost_stats {
  /** In: sizeof(kvhost_stats) as the caller was compiled. */
  uint32_t struct_size;
  /** Host tokens the tier holds at most (whole pages). */
  uint64_t capacity_tokens;
  /** Host tokens held by tree nodes (device+host and host-only). */
  uint64_t used_tokens;
  /** Of those, tokens only on the host (evicted from the device). */
  uint64_t host_only_tokens;
  /** Copies started but not yet seen to land. */
  uint64_t copies_in_flight;
  /** Backups (device to host copies) started, and their tokens. */
  uint64_t backups;
  /** Tokens copied device to host. */
  uint64_t backup_tokens;
  /** Nodes left without a host copy because the host tier had no room. */
  uint64_t backups_skipped;
  /** Backups that failed to start (the node stays device-only). */
  uint64_t backup_errors;
  /** Load-backs (host to device copies) started. */
  uint64_t loads;
  /** Tokens copied host to device. */
  uint64_t load_tokens;
  /** Host hits not loaded: below the 10-token threshold or no device room. */
  uint64_t loads_refused;
  /** Host tokens freed by host eviction. */
  uint64_t host_evicted_tokens;
  /** Bytes copied device to host. */
  uint64_t bytes_to_host;
  /** Bytes copied host to device. */
  uint64_t bytes_to_device;
  /** Device tokens that load-backs (kvhost_load_back(), kvseq_begin()) evicted to make room
   *  for the tokens they load (also when the load is then refused: no room even so). Written
   *  only when struct_size covers it (callers built before it was added pass less). */
  uint64_t load_evicted_tokens;
} kvhost_stats;

/** @brief Initializer for a ::kvhost_stats whose struct_size is set. */
#define KVHOST_STATS_INIT { (uint32_t)sizeof(kvhost_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * @brief The host tier's sizes and counters.
 *
 * A read: it starts no copy. Copies that the last inserts asked for start at the next
 * kvseq_* / tree call or kvhost_poll(); call kvhost_poll() first for counters that include them.
 *
 * @param[in]  pool A live pool with a host tier.
 * @param[out] out  Receives the figures; out->struct_size must be set (#KVHOST_STATS_INIT). A
 *                  struct_size that ends before load_evicted_tokens (a caller built before that
 *                  field) gets the fields before it; the library never writes past struct_size.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (no host tier); #KVPOOL_ERR_INVALID_ARGUMENT (NULL
 *         @p out, or struct_size below offsetof(kvhost_stats, load_evicted_tokens)).
 */
KVPOOL_API kvpool_status kvhost_get_stats(const kvpool *pool, kvhost_stats *out);

/**
 * @brief Release the nodes of copies that have landed.
 * @param[in]  pool      A live pool with a host tier.
 * @param[in]  wait      Nonzero: block until every copy in flight has landed first.
 * @param[out] completed Receives the number of copies released (NULL allowed).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_CUDA (a copy failed).
 */
KVPOOL_API kvpool_status kvhost_poll(kvpool *pool, int32_t wait, size_t *completed);

/**
 * @brief Set the compute stream: backups wait for the work already on it, and
 *        kvhost_wait_layer() with a NULL stream makes it wait.
 * @param[in] pool   A live pool with a host tier.
 * @param[in] stream A cudaStream_t (NULL: the legacy default stream). CPU pools ignore it.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvhost_set_stream(kvpool *pool, void *stream);

/**
 * @brief Move load-backs to the next of the three load sets (call once per batch, before
 *        the batch's kvseq_begin() / kvhost_load_back() calls).
 * @param[in]  pool A live pool with a host tier.
 * @param[out] set  Receives the new current set (0, 1 or 2).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvhost_next_load_set(kvpool *pool, int32_t *set);

/**
 * @brief The load set that load-backs go to now.
 * @param[in]  pool A live pool with a host tier.
 * @param[out] set  Receives the set (0, 1 or 2).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvhost_load_set(const kvpool *pool, int32_t *set);

/**
 * @brief Make @p stream wait until @p layer of the loads of @p set has landed (the host
 *        does not block). The wait is for the loads enqueued before this call: @p stream
 *        must not be capturing a CUDA graph (a replay would not wait for later loads).
 * @param[in] pool   A live pool with a host tier.
 * @param[in] set    A load set (0, 1 or 2).
 * @param[in] layer  A global layer id the pool holds (hybrid_linear: a mamba layer
 *                   has nothing to wait for; swa: full and sliding-window layers alike).
 * @param[in] stream A cudaStream_t, or NULL for the compute stream. CPU pools: nothing to wait for.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT; #KVPOOL_ERR_CUDA.
 */
KVPOOL_API kvpool_status kvhost_wait_layer(kvpool *pool, int32_t set, int32_t layer, void *stream);

/**
 * @brief radix_match() that also reports the host-only part of the match.
 *
 * @param[in]  pool         A live pool with a host tier.
 * @param[in]  tokens       Token ids.
 * @param[in]  tokens_len   Number of tokens.
 * @param[in]  extra_key    Namespace, or NULL.
 * @param[out] slots        Receives the device slots of the device part.
 * @param[in]  slots_cap    Capacity of @p slots (tokens_len always suffices).
 * @param[out] matched      Receives the tokens matched on the device.
 * @param[out] host_matched Receives the tokens matched after them in host-only nodes.
 * @param[out] node         Receives the deepest matched device node (the root if none).
 * @param[out] host_node    Receives the deepest matched node with a host copy (the root if
 *                          none): pass it to kvhost_load_back(). hybrid_linear: the deepest
 *                          host-only node with a mamba state (@p node if none), and
 *                          @p host_matched counts the tokens down to it. swa: the deepest
 *                          host-only node where the match would be usable once loaded
 *                          (window rows on the host for its last window), @p node if none.
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL (nothing written but *matched);
 *         #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvhost_match(kvpool *pool, const int32_t *tokens, size_t tokens_len, const char *extra_key,
                                      int64_t *slots, size_t slots_cap, size_t *matched, size_t *host_matched,
                                      uint64_t *node, uint64_t *host_node);

/**
 * @brief Bring the host-only nodes that end at @p host_node back to the device.
 *
 * Fresh device pages are allocated (evicting unlocked device nodes if needed) and the
 * host pages are copied into them in the current load set; the nodes own the new slots
 * at once (the tree's, as after radix_insert()) and the last one stays locked until the
 * copy lands. Nothing is loaded (and *loaded is 0) for fewer than 10 tokens (SGLang's
 * threshold: recomputing is cheaper) or when the device cannot make room.
 *
 * @param[in]  pool      A live pool with a host tier.
 * @param[in]  host_node A node handle from kvhost_match() (a device node: nothing to load).
 * @param[out] slots     Receives the loaded tokens' device slots.
 * @param[in]  slots_cap Capacity of @p slots.
 * @param[out] loaded    Receives the number of tokens loaded.
 * @param[out] node      Receives the deepest device node of the path afterwards
 *                       (hybrid_linear: the deepest device node with a mamba state; swa:
 *                       @p host_node once loaded, radix_match() tells what is usable).
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL (*loaded tells the need, nothing
 *         changed); #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (stale handle);
 *         #KVPOOL_ERR_CUDA.
 */
KVPOOL_API kvpool_status kvhost_load_back(kvpool *pool, uint64_t host_node, int64_t *slots, size_t slots_cap,
                                          size_t *loaded, uint64_t *node);

/**
 * @brief Delete unlocked host-only leaves in policy order until @p tokens host tokens are freed.
 * @param[in]  pool    A live pool with a host tier.
 * @param[in]  tokens  Host tokens wanted back.
 * @param[out] evicted Receives the host tokens freed.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvhost_evict(kvpool *pool, size_t tokens, size_t *evicted);

/**
 * @brief Where a node's tokens live.
 * @param[in]  pool      A live pool with a host tier.
 * @param[in]  node      A live node handle.
 * @param[out] on_device Receives 1 if the node's KV is on the device, else 0.
 * @param[out] on_host   Receives 1 if it has a host copy, else 0.
 * @param[out] tokens    Receives the node's token count (NULL allowed).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (stale handle).
 */
KVPOOL_API kvpool_status kvhost_node_state(const kvpool *pool, uint64_t node, int32_t *on_device, int32_t *on_host,
                                           size_t *tokens);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_HOST_H */
