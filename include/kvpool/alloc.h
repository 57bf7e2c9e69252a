/**
 * @file alloc.h
 * @brief Slot and page allocators (kvalloc_*), with SGLang's exact semantics.
 *
 * The configuration chooses the allocator:
 * - **token** (page_size 1, not swa): slots are handed out from the front of a
 *   free list and returned to its back (FIFO reuse);
 * - **paged** (page_size > 1): page-granular; freeing any slot of a page frees
 *   the whole page; freed pages are put, sorted, at the front of the free list
 *   (recently freed pages are reused first);
 * - **swa** (attention "swa"): a full pool and a sliding-window pool; public
 *   slot ids are full-pool ids, each mapped to a window slot.
 *
 * Slot 0 (page 0) is reserved padding and never handed out; usable slots are
 * `1 .. plan.max_total_tokens + page_size - 1` as whole pages `1 .. num_pages`.
 *
 * Guarantees: capacity is checked before anything changes, so
 * #KVPOOL_ERR_OUT_OF_MEMORY leaves the allocator exactly as it was. A bitmap of
 * owned pages catches double frees, frees of never-allocated or reserved slots
 * and out-of-range ids (#KVPOOL_ERR_INVALID_ARGUMENT, nothing freed). In
 * `disaggregation_mode` prefill/decode frees are deferred to a release list and
 * merged into the free list, sorted, when an allocation needs them (`need_sort`).
 *
 * Every array argument is followed by its own length; lengths that must agree
 * are checked. Thread safety: a pool is used by one thread at a time, or by any
 * thread when its configuration sets pool.thread_safe (pool.h).
 */
#ifndef KVPOOL_ALLOC_H
#define KVPOOL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Which allocator a pool uses. */
typedef enum kvalloc_kind {
  KVALLOC_TOKEN = 0, /**< page_size 1: FIFO slot reuse */
  KVALLOC_PAGED = 1, /**< page_size > 1: page-granular, recently freed first */
  KVALLOC_SWA = 2    /**< full + sliding-window pools (page_size 1) */
} kvalloc_kind;

/** @brief Which internal list kvalloc_free_list() reports. */
typedef enum kvalloc_list {
  KVALLOC_LIST_FREE = 0,        /**< the free list, front first (pages; slots for page_size 1) */
  KVALLOC_LIST_RELEASE = 1,     /**< deferred frees waiting for merge-and-sort (need_sort) */
  KVALLOC_LIST_SWA_FREE = 2,    /**< the sliding-window pool's free list (swa only) */
  KVALLOC_LIST_SWA_RELEASE = 3  /**< the sliding-window pool's deferred frees (swa only) */
} kvalloc_list;

/**
 * @brief The allocator kind of a pool.
 * @param[in]  pool A live pool.
 * @param[out] kind Receives a ::kvalloc_kind value.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_get_kind(const kvpool *pool, int32_t *kind);

/**
 * @brief Free tokens: (free pages + deferred pages) x page_size.
 * @param[in]  pool   A live pool whose allocator is not swa.
 * @param[out] tokens Receives the count.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED for swa (use kvalloc_swa_available());
 *         #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_available(const kvpool *pool, size_t *tokens);

/**
 * @brief Free slots of both pools of a swa allocator.
 * @param[in]  pool A live pool with the swa allocator.
 * @param[out] full Receives the full pool's free slots.
 * @param[out] swa  Receives the sliding-window pool's free slots.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED for other allocators; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_swa_available(const kvpool *pool, size_t *full, size_t *swa);

/**
 * @brief Allocate slots from the front of the free list.
 *
 * Paged: @p slots_len must be a multiple of page_size; whole pages are taken
 * and expanded to their slots in page order. swa: one slot from each pool per
 * token, recorded in the full-to-window mapping; the full ids are returned.
 *
 * @param[in]  pool      A live pool.
 * @param[out] slots     Receives @p slots_len slot ids.
 * @param[in]  slots_len Number of slots (0 is allowed).
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY (nothing changes); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_alloc(kvpool *pool, int64_t *slots, size_t slots_len);

/**
 * @brief Free slots (paged: the whole pages they lie in; swa: also their window slots).
 *
 * Inside a free group the pages only become available at kvalloc_free_group_end().
 *
 * @param[in] pool      A live pool.
 * @param[in] slots     Slots to free. Paged: several slots of one page free it once.
 *                      Token and swa: each slot once.
 * @param[in] slots_len Number of slots (0 is a no-op).
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (reserved, out of range, not
 *         allocated, freed twice); on error nothing is freed.
 */
KVPOOL_API kvpool_status kvalloc_free(kvpool *pool, const int64_t *slots, size_t slots_len);

/**
 * @brief Allocate the new slots of a prefill batch (SGLang's alloc_extend).
 *
 * Request i has prefix_lens[i] tokens with slots and grows to seq_lens[i]. Its
 * new tokens first fill the prefix's last partial page (slots last_locs[i]+1, ...),
 * then take whole new pages, then a trailing partial page. New pages come from
 * the front of the free list in request order. Output is request-major.
 * With page_size 1 this is a plain allocation of the sum of the extends.
 *
 * @param[in]  pool            A live pool (token or paged allocator).
 * @param[in]  prefix_lens     Tokens already allocated per request (>= 0).
 * @param[in]  prefix_lens_len Batch size.
 * @param[in]  seq_lens        New total per request (>= prefix length).
 * @param[in]  seq_lens_len    Must equal the batch size.
 * @param[in]  last_locs       Slot of token prefix-1, or -1 for an empty prefix;
 *                             `(last_loc + 1) % page_size` must equal `prefix % page_size`.
 * @param[in]  last_locs_len   Must equal the batch size.
 * @param[out] slots           Receives the new slots.
 * @param[in]  slots_len       Must equal the sum of `seq_lens - prefix_lens`.
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY (free list untouched);
 *         #KVPOOL_ERR_UNSUPPORTED for swa; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_extend(kvpool *pool, const int64_t *prefix_lens, size_t prefix_lens_len,
                                        const int64_t *seq_lens, size_t seq_lens_len, const int64_t *last_locs,
                                        size_t last_locs_len, int64_t *slots, size_t slots_len);

/**
 * @brief Allocate one decode slot per request (SGLang's alloc_decode).
 *
 * seq_lens[i] is the length after adding the token. A request whose new token
 * starts a page (`seq % page_size == 1`) gets the first slot of the next free
 * page (request order); the others get last_locs[i] + 1.
 *
 * @param[in]  pool          A live pool (token or paged allocator).
 * @param[in]  seq_lens      Lengths including the new token (>= 1).
 * @param[in]  seq_lens_len  Batch size.
 * @param[in]  last_locs     Slot of token seq-2 (-1 when seq is 1);
 *                           `(last_loc + 2) % page_size` must equal `seq % page_size`.
 * @param[in]  last_locs_len Must equal the batch size.
 * @param[out] slots         Receives one slot per request.
 * @param[in]  slots_len     Must equal the batch size.
 * @return As kvalloc_extend().
 */
KVPOOL_API kvpool_status kvalloc_decode(kvpool *pool, const int64_t *seq_lens, size_t seq_lens_len,
                                        const int64_t *last_locs, size_t last_locs_len, int64_t *slots,
                                        size_t slots_len);

/**
 * @brief swa: free the window slots of tokens that slid out of the window (their full slots stay).
 * @param[in] pool      A live pool with the swa allocator.
 * @param[in] slots     Allocated full-pool slots; those without a window slot are skipped.
 * @param[in] slots_len Number of slots.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_free_swa(kvpool *pool, const int64_t *slots, size_t slots_len);

/**
 * @brief swa: the window slot of each full slot (0 = none).
 * @param[in]  pool      A live pool with the swa allocator.
 * @param[in]  slots     Full-pool slots in [0, size + 1).
 * @param[in]  slots_len Number of slots.
 * @param[out] out       Receives the window slots.
 * @param[in]  out_len   Must equal @p slots_len.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_translate_swa(const kvpool *pool, const int64_t *slots, size_t slots_len,
                                               int64_t *out, size_t out_len);

/**
 * @brief Start a free group: later frees are collected and become available together.
 * @param[in] pool A live pool.
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT if a group is already open.
 */
KVPOOL_API kvpool_status kvalloc_free_group_begin(kvpool *pool);

/**
 * @brief End the free group and free everything collected in it (an empty group changes nothing).
 * @param[in] pool A live pool.
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT if no group is open.
 */
KVPOOL_API kvpool_status kvalloc_free_group_end(kvpool *pool);

/**
 * @brief Snapshot the allocator so that kvalloc_restore() can revert later allocations and frees.
 *
 * O(1): later changes are logged and undone on restore. One snapshot is active
 * at a time; a new backup replaces the previous one. Not allowed inside a free group.
 *
 * @param[in]  pool  A live pool.
 * @param[out] token Receives the snapshot's id.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_backup(kvpool *pool, uint64_t *token);

/**
 * @brief Revert every allocation and free since kvalloc_backup() returned @p token.
 *
 * The snapshot stays active (restoring twice is the same as once). swa: window
 * mappings written since the backup are reverted too (no stale entries).
 *
 * @param[in] pool  A live pool.
 * @param[in] token The id from the latest kvalloc_backup().
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT for an unknown or replaced
 *         token, or inside a free group.
 */
KVPOOL_API kvpool_status kvalloc_restore(kvpool *pool, uint64_t token);

/**
 * @brief Merge the deferred frees into the free list and sort it ascending (need_sort mode).
 * @param[in] pool A live pool.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_merge_and_sort(kvpool *pool);

/**
 * @brief Make every slot free again: full free list, no deferred frees, no open group, no snapshot.
 * @param[in] pool A live pool.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_clear(kvpool *pool);

/**
 * @brief Copy one of the allocator's internal lists, front first (for tests and debugging).
 * @param[in]  pool    A live pool.
 * @param[in]  list    A ::kvalloc_list value.
 * @param[out] ids     Receives the page ids (slot ids for page_size 1).
 * @param[in]  ids_cap Capacity of @p ids.
 * @param[out] ids_len Receives the list's length, also on #KVPOOL_ERR_BUFFER_TOO_SMALL.
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL; #KVPOOL_ERR_UNSUPPORTED (swa lists
 *         of a non-swa pool); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvalloc_free_list(const kvpool *pool, int32_t list, int64_t *ids, size_t ids_cap,
                                           size_t *ids_len);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_ALLOC_H */
