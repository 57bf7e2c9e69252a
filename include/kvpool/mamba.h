/**
 * @file mamba.h
 * @brief Recurrent-state slots of hybrid linear-attention models and the hybrid request table.
 *
 * A hybrid_linear pool holds, per mamba layer, a conv state and a temporal (SSM)
 * state for each of `plan.mamba_slots` slots plus a reserved slot 0. Allocation
 * zeroes the states. Each request row maps to one state slot (and, with
 * `pool.mamba_extra_buffer`, to two ping-pong slots that snapshot the state).
 *
 * All functions return #KVPOOL_ERR_UNSUPPORTED on pools of other variants.
 * Thread safety: one thread at a time, or any thread with pool.thread_safe (pool.h).
 */
#ifndef KVPOOL_MAMBA_H
#define KVPOOL_MAMBA_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Free state slots.
 * @param[in]  pool  A live hybrid_linear pool.
 * @param[out] slots Receives the count.
 * @return #KVPOOL_OK, #KVPOOL_ERR_UNSUPPORTED or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_mamba_available(const kvpool *pool, size_t *slots);

/**
 * @brief Allocate state slots from the front of the free list and zero their states.
 * @param[in]  pool      A live hybrid_linear pool.
 * @param[out] slots     Receives the slot ids (never 0).
 * @param[in]  slots_len Number of slots.
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY (nothing changes); others as above.
 */
KVPOOL_API kvpool_status kvpool_mamba_alloc(kvpool *pool, int32_t *slots, size_t slots_len);

/**
 * @brief Return state slots to the back of the free list.
 *
 * Refuses slots the prefix tree, a request row (kvreq_free_hybrid() frees those) or a
 * live kvseq request (from kvseq_begin on: "mamba slot N belongs to a kvseq request") holds.
 *
 * @param[in] pool      A live hybrid_linear pool.
 * @param[in] slots     Allocated slots, each once.
 * @param[in] slots_len Number of slots.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (nothing freed).
 */
KVPOOL_API kvpool_status kvpool_mamba_free(kvpool *pool, const int32_t *slots, size_t slots_len);

/**
 * @brief Copy every layer's conv and temporal state from @p src to @p dst.
 * @param[in] pool A live hybrid_linear pool.
 * @param[in] src  An allocated slot.
 * @param[in] dst  An allocated slot, not the state slot of a live kvseq request (from
 *                 kvseq_begin on, row or not).
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (nothing copied; for a kvseq
 *         request's state: "dst N belongs to a kvseq request").
 */
KVPOOL_API kvpool_status kvpool_mamba_copy(kvpool *pool, int32_t src, int32_t dst);

/**
 * @brief Allocate one slot and copy @p src into it.
 *
 * The target is always a free slot, so no live state is overwritten; @p src may be
 * any allocated slot (a kvseq request's state included: it is only read).
 *
 * @param[in]  pool A live hybrid_linear pool.
 * @param[in]  src  An allocated slot.
 * @param[out] dst  Receives the new slot.
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_mamba_fork(kvpool *pool, int32_t src, int32_t *dst);

/**
 * @brief Write one layer's state of one slot (conv then temporal, in their configured dtypes).
 * @param[in] pool       A live hybrid_linear pool.
 * @param[in] layer      Global id of a mamba layer.
 * @param[in] slot       An allocated slot.
 * @param[in] conv       Conv state bytes (`prod(conv_shape)` elements).
 * @param[in] conv_bytes Bytes of @p conv.
 * @param[in] ssm        Temporal state bytes (`prod(ssm_shape)` elements).
 * @param[in] ssm_bytes  Bytes of @p ssm.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_mamba_write(kvpool *pool, int32_t layer, int32_t slot, const void *conv,
                                            size_t conv_bytes, const void *ssm, size_t ssm_bytes);

/**
 * @brief Read one layer's state of one slot.
 * @param[in]  pool       A live hybrid_linear pool.
 * @param[in]  layer      Global id of a mamba layer.
 * @param[in]  slot       A slot in [0, mamba_slots].
 * @param[out] conv       Receives the conv state.
 * @param[in]  conv_bytes Bytes of @p conv.
 * @param[out] ssm        Receives the temporal state.
 * @param[in]  ssm_bytes  Bytes of @p ssm.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_mamba_read(const kvpool *pool, int32_t layer, int32_t slot, void *conv,
                                           size_t conv_bytes, void *ssm, size_t ssm_bytes);

/**
 * @brief Allocate request rows together with their state slots (SGLang's HybridReqToTokenPool.alloc).
 *
 * For request i, `reuse[i]` is a state slot it already holds (a prefix hit or an
 * earlier chunk of a chunked prefill) or -1 to allocate a fresh, zeroed one. With
 * `pool.mamba_extra_buffer` each request without ping-pong slots also gets two.
 * Capacity for rows and every new slot is checked first; on shortage nothing changes.
 *
 * @param[in]  pool      A live hybrid_linear pool.
 * @param[in]  reuse     Slot to keep per request, or -1.
 * @param[in]  reuse_len Batch size.
 * @param[out] rows      Receives the rows.
 * @param[in]  rows_len  Must equal the batch size.
 * @param[out] slots     Receives each row's state slot.
 * @param[in]  slots_len Must equal the batch size.
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_alloc_hybrid(kvpool *pool, const int32_t *reuse, size_t reuse_len, int32_t *rows,
                                            size_t rows_len, int32_t *slots, size_t slots_len);

/**
 * @brief Free hybrid request rows, and optionally their state slots.
 * @param[in] pool       A live hybrid_linear pool.
 * @param[in] rows       Allocated rows.
 * @param[in] rows_len   Number of rows.
 * @param[in] free_state Nonzero: also free each row's state slot (and ping-pong slots).
 * @param[in] keep       With ping-pong slots: index (0 or 1) of the one to keep, or -1 for none.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (nothing freed).
 */
KVPOOL_API kvpool_status kvreq_free_hybrid(kvpool *pool, const int32_t *rows, size_t rows_len, int32_t free_state,
                                           int32_t keep);

/**
 * @brief The state slot and ping-pong slots of an allocated hybrid row.
 * @param[in]  pool          A live hybrid_linear pool.
 * @param[in]  row           An allocated row.
 * @param[out] slot          Receives the state slot (-1 if none).
 * @param[out] ping_pong     Receives the two ping-pong slots (-1 without extra buffers).
 * @param[in]  ping_pong_len Must be 2.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvreq_mamba_slots(const kvpool *pool, int32_t row, int32_t *slot, int32_t *ping_pong,
                                           size_t ping_pong_len);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_MAMBA_H */
