/**
 * @file check.h
 * @brief Self-check and statistics of a pool.
 *
 * kvpool_check() verifies the ownership invariant of every allocator in the
 * pool: each slot, page, request row and state slot is exactly one of free,
 * pending (deferred or in an open free group), held, or reserved, so that
 * `free + pending + held + reserved == capacity` per pool.
 */
#ifndef KVPOOL_CHECK_H
#define KVPOOL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Verify the ownership and accounting invariants.
 * @param[in]  pool       A live pool.
 * @param[out] report     Receives a NUL-terminated report (may be NULL when @p report_cap is 0).
 *                        OK: a one-line summary. Failure: every leaked or double-owned
 *                        slot, page, row or state slot, one per line (truncated to fit).
 * @param[in]  report_cap Capacity of @p report in bytes.
 * @return #KVPOOL_OK when every invariant holds; #KVPOOL_ERR_CHECK_FAILED otherwise
 *         (kvpool_last_error() holds the first lines of the report);
 *         #KVPOOL_ERR_INVALID_ARGUMENT.
 *
 * Cost: linear in the pool's pages, rows and state slots. Changes nothing.
 */
KVPOOL_API kvpool_status kvpool_check(const kvpool *pool, char *report, size_t report_cap);

/** @brief Counters and sizes of a pool (see kvpool_stats()). */
typedef struct kvpool_stats {
  /** In: sizeof(kvpool_stats) as the caller was compiled. */
  uint32_t struct_size;
  /** A ::kvalloc_kind value. */
  int32_t alloc_kind;
  /** Usable token slots of the (full) pool. */
  uint64_t token_capacity;
  /** Free tokens (free + deferred pages x page_size). */
  uint64_t token_available;
  /** Tokens in pages handed out and not freed. */
  uint64_t token_held;
  /** Tokens freed inside an open free group (not yet available). */
  uint64_t token_pending;
  /** swa: usable window slots (0 otherwise). */
  uint64_t swa_capacity;
  /** swa: free window slots. */
  uint64_t swa_available;
  /** swa: window slots handed out. */
  uint64_t swa_held;
  /** Request rows that can be handed out (excludes row 0). */
  uint64_t req_capacity;
  /** Free request rows. */
  uint64_t req_available;
  /** Mamba state slots (excludes slot 0; 0 unless hybrid_linear). */
  uint64_t mamba_capacity;
  /** Free mamba state slots. */
  uint64_t mamba_available;
  /** Bytes of the KV buffers (all pools, padding and side buffers included). */
  uint64_t kv_bytes;
  /** Bytes of the request table. */
  uint64_t req_table_bytes;
  /** Bytes of the mamba states. */
  uint64_t mamba_bytes;
  /** Successful allocation calls (alloc, extend, decode). */
  uint64_t alloc_calls;
  /** Successful free calls. */
  uint64_t free_calls;
  /** Allocation calls that returned #KVPOOL_ERR_OUT_OF_MEMORY. */
  uint64_t alloc_failures;
  /** Calls rejected with #KVPOOL_ERR_INVALID_ARGUMENT by the allocators (double frees and the like). */
  uint64_t rejected_calls;
} kvpool_stats;

/** @brief Initializer for a ::kvpool_stats whose struct_size is set. */
#define KVPOOL_STATS_INIT { (uint32_t)sizeof(kvpool_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * @brief Snapshot of availability, sizes and counters.
 * @param[in]     pool A live pool.
 * @param[in,out] out  Its struct_size must be set; receives the statistics.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_get_stats(const kvpool *pool, kvpool_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_CHECK_H */
