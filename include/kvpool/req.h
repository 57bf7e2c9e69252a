/**
 * @file req.h
 * @brief Request rows (kvreq_*): the request-to-token table.
 *
 * The table has `plan.req_rows` rows of `plan.max_context_len` int32 slot ids.
 * Row r, column i holds the KV slot of token i of the request that owns row r.
 * Row 0 is reserved (padded and dummy requests may point at it) and is never
 * handed out. Rows are handed out from the front of a free list and returned
 * to its back (FIFO reuse). In `disaggregation_mode` "decode" the table has
 * extra pre-allocated rows (see plan.h), handed out like any other row.
 *
 * Every array argument is followed by its own length; lengths that must agree
 * are checked and a mismatch is #KVPOOL_ERR_INVALID_ARGUMENT. Slot ids are
 * int64_t in the API and stored as int32 in the table.
 *
 * Thread safety: a pool is used by one thread at a time, or by any thread with
 * pool.thread_safe (pool.h).
 */
#ifndef KVPOOL_REQ_H
#define KVPOOL_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Number of request rows that can be allocated now.
 * @param[in]  pool A live pool.
 * @param[out] rows Receives the count.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_available(const kvpool *pool, size_t *rows);

/**
 * @brief Allocate request rows from the front of the free list.
 * @param[in]  pool     A live pool.
 * @param[out] rows     Receives @p rows_len row ids (never 0).
 * @param[in]  rows_len Number of rows wanted (0 is allowed and does nothing).
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY if fewer rows are free (nothing changes);
 *         #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_alloc(kvpool *pool, int32_t *rows, size_t rows_len);

/**
 * @brief Return rows to the back of the free list.
 * @param[in] pool     A live pool.
 * @param[in] rows     Rows to free; each must be allocated and appear once.
 * @param[in] rows_len Number of rows.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (row 0, out of range, not
 *         allocated, listed twice); on error nothing is freed.
 */
KVPOOL_API kvpool_status kvreq_free(kvpool *pool, const int32_t *rows, size_t rows_len);

/**
 * @brief Write slot ids into columns [start, start + slots_len) of an allocated row.
 * @param[in] pool      A live pool.
 * @param[in] row       An allocated row.
 * @param[in] start     First column.
 * @param[in] slots     Slot ids, each in [0, size + page_size).
 * @param[in] slots_len Number of slots.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (row not allocated, columns
 *         past max_context_len, slot out of range).
 */
KVPOOL_API kvpool_status kvreq_write(kvpool *pool, int32_t row, size_t start, const int64_t *slots, size_t slots_len);

/**
 * @brief Read columns [start, start + slots_len) of an allocated row.
 * @param[in]  pool      A live pool.
 * @param[in]  row       An allocated row.
 * @param[in]  start     First column.
 * @param[out] slots     Receives the slot ids.
 * @param[in]  slots_len Number of columns to read.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_read(const kvpool *pool, int32_t row, size_t start, int64_t *slots, size_t slots_len);

/**
 * @brief Free every row (the table contents are kept, as SGLang does).
 * @param[in] pool A live pool.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_clear(kvpool *pool);

/**
 * @brief Write a batch's prefix and newly allocated slots into its rows in one call
 *        (SGLang's write_cache_indices).
 *
 * For request i: `row[0 : prefix_lens[i]]` = its share of @p prefix_slots and
 * `row[prefix_lens[i] : seq_lens[i]]` = its share of @p extend_slots. Shares are
 * consecutive in batch order (offsets are exclusive prefix sums of the lengths).
 *
 * @param[in] pool             A live pool.
 * @param[in] rows             Allocated rows, one per request.
 * @param[in] rows_len         Batch size.
 * @param[in] prefix_lens      Prefix length per request.
 * @param[in] prefix_lens_len  Must equal @p rows_len.
 * @param[in] seq_lens         New total length per request (>= prefix length, <= max_context_len).
 * @param[in] seq_lens_len     Must equal @p rows_len.
 * @param[in] prefix_slots     All prefixes' slots, concatenated.
 * @param[in] prefix_slots_len Must equal the sum of @p prefix_lens.
 * @param[in] extend_slots     All new slots, concatenated (the output of kvalloc_extend()).
 * @param[in] extend_slots_len Must equal the sum of `seq_lens - prefix_lens`.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT; on error no row is written.
 */
KVPOOL_API kvpool_status kvreq_write_batch(kvpool *pool, const int32_t *rows, size_t rows_len,
                                           const int64_t *prefix_lens, size_t prefix_lens_len,
                                           const int64_t *seq_lens, size_t seq_lens_len,
                                           const int64_t *prefix_slots, size_t prefix_slots_len,
                                           const int64_t *extend_slots, size_t extend_slots_len);

/**
 * @brief The slot of each request's last prefix token, or -1 for an empty prefix.
 *
 * `last_locs[i] = row[rows[i]][prefix_lens[i] - 1]`, or -1 when prefix_lens[i] is 0;
 * the input kvalloc_extend() needs.
 *
 * @param[in]  pool            A live pool.
 * @param[in]  rows            Allocated rows.
 * @param[in]  rows_len        Batch size.
 * @param[in]  prefix_lens     Prefix length per request (<= max_context_len).
 * @param[in]  prefix_lens_len Must equal @p rows_len.
 * @param[out] last_locs       Receives one slot per request.
 * @param[in]  last_locs_len   Must equal @p rows_len.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_last_loc(const kvpool *pool, const int32_t *rows, size_t rows_len,
                                        const int64_t *prefix_lens, size_t prefix_lens_len, int64_t *last_locs,
                                        size_t last_locs_len);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_REQ_H */
