/**
 * @file plan.h
 * @brief Sizing: bytes per token and token capacity of a configuration.
 *
 * kvpool_plan() does the start-up arithmetic of SGLang's model runner
 * (see docs/config.md, "Sizing") without allocating anything, so a
 * configuration can be checked and sized before a pool is created.
 */
#ifndef KVPOOL_PLAN_H
#define KVPOOL_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief The sizing of one configuration (one rank's shard).
 *
 * Set @ref struct_size to `sizeof(kvpool_plan_info)` before the call
 * (#KVPOOL_PLAN_INFO_INIT does it); fields are only ever appended, and the
 * library never writes past @ref struct_size.
 */
typedef struct kvpool_plan_info {
  /** In: sizeof(kvpool_plan_info) as the caller was compiled. */
  uint32_t struct_size;
  /** Tokens per page. */
  uint32_t page_size;
  /** SGLang's "cell size": KV bytes one token costs across the attention layers that grow with
   *  context (all local layers for mha/mla/nsa/double_sparse/swa, full-attention layers only for hybrid_linear). */
  uint64_t kv_bytes_per_token;
  /** Bytes one token costs in the full-attention pool. */
  uint64_t full_bytes_per_token;
  /** Bytes one token costs in the sliding-window pool (0 unless the variant is swa). */
  uint64_t swa_bytes_per_token;
  /** Usable token slots of the (full) pool, a multiple of page_size; slot 0 / page 0 come on top. */
  uint64_t max_total_tokens;
  /** Usable token slots of the sliding-window pool (0 unless the variant is swa). */
  uint64_t swa_tokens;
  /** Usable pages of the (full) pool: max_total_tokens / page_size. */
  uint64_t num_pages;
  /** Requests that may run at once (request-table rows handed out). */
  uint32_t max_running_requests;
  /** Columns of the request table. */
  uint32_t max_context_len;
  /** Rows of the request table, including the reserved row 0 and the PD-decode pre-allocated rows. */
  uint32_t req_rows;
  /** Layers held by this pipeline stage. */
  uint32_t num_layers;
  /** KV heads stored per tensor-parallel rank (0 for mla/nsa). */
  uint32_t kv_heads_per_rank;
  /** Layers with a recurrent (mamba) state; 0 unless the variant is hybrid_linear. */
  uint32_t mamba_layers;
  /** Bytes of one mamba state slot (conv + temporal state of all mamba layers). */
  uint64_t mamba_state_bytes;
  /** Mamba state slots (0 unless the variant is hybrid_linear). */
  uint64_t mamba_slots;
  /** Bytes of all KV buffers, including the padding page and indexer, label or scale buffers. */
  uint64_t kv_memory_bytes;
  /** Bytes of the request-to-token table. */
  uint64_t req_table_bytes;
  /** Bytes of the mamba state pool, including its padding slot. */
  uint64_t mamba_memory_bytes;
  /** kv_memory_bytes + req_table_bytes + mamba_memory_bytes. */
  uint64_t total_memory_bytes;
} kvpool_plan_info;

/** @brief Initializer for a ::kvpool_plan_info whose struct_size is set. */
#define KVPOOL_PLAN_INFO_INIT { (uint32_t)sizeof(kvpool_plan_info), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * @brief Validate a configuration and compute its sizing without allocating it.
 * @param[in]     json     The configuration text; it need not be NUL-terminated.
 * @param[in]     json_len Length of @p json in bytes.
 * @param[in,out] out      Its struct_size must be set; receives the plan.
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT if a pointer is NULL or
 *         struct_size is too small; #KVPOOL_ERR_CONFIG as kvpool_create();
 *         #KVPOOL_ERR_CUDA if `mem_fraction` needs a device that cannot be queried.
 *         On failure @p out is left unchanged.
 *
 * Thread safety: safe from any thread.
 */
KVPOOL_API kvpool_status kvpool_plan(const char *json, size_t json_len, kvpool_plan_info *out);

/**
 * @brief The plan a live pool was created with.
 * @param[in]     pool A live pool handle.
 * @param[in,out] out  Its struct_size must be set; receives the plan.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT (NULL or foreign handle,
 *         NULL @p out, struct_size too small); on failure @p out is unchanged.
 *
 * Thread safety: safe while no other thread destroys @p pool.
 */
KVPOOL_API kvpool_status kvpool_get_plan(const kvpool *pool, kvpool_plan_info *out);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_PLAN_H */
