/**
 * @file seq.h
 * @brief The request API (kvseq_*): prefix reuse and KV slots of running requests,
 *        with slot ownership enforced by the library.
 *
 * A request goes through begin → extend (one or more prefill chunks) → decode
 * (one token per step) → finish, or abort / retract at any point. The library
 * keeps each request's tokens, request-table row, slots and tree lock, so a
 * caller cannot leak or double-free a slot:
 * - begin matches the longest cached prefix (at most `len - 1` tokens: one token
 *   must be computed) and locks it;
 * - extend allocates the row and the new slots, evicting unlocked cached prefixes
 *   when short, writes the table, and then hands the computed whole pages of the
 *   prompt to the prefix tree (SGLang's cache_unfinished_req), so concurrent
 *   requests can reuse them;
 * - decode appends one token per request and gives it a slot;
 * - finish inserts the committed tokens into the tree, frees duplicates, the
 *   unaligned tail and any over-allocation, frees the row and unlocks;
 * - abort releases everything without inserting; retract does the same but keeps
 *   the request (its tokens) so it can be extended again from its cached prefix.
 *
 * #KVPOOL_ERR_OUT_OF_MEMORY from extend or decode is recoverable: nothing changed
 * (no eviction happens unless it is sure to make the allocation succeed).
 * Requests work with every prefix-cache kind; without a radix tree nothing is shared.
 *
 * CUDA pools: the bookkeeping and the slot numbers are the host's (the same as on
 * a CPU pool); extend and decode write the whole batch's request-table entries with
 * one kernel on the legacy default stream and return without waiting for it (order
 * work on non-blocking streams after it; kvseq_extend_async() and kvseq_decode_async()
 * in device.h take a stream and also write the slots to a device array). Both free
 * lists work; with `"free_list": "device"` the calls run on the list's host mirror.
 *
 * hybrid_linear pools: each request also owns a mamba state slot
 * (kvseq_mamba_slot()). begin copies the state of the matched prefix into it
 * (copy-on-write; the match stops at the deepest cached node with a state) or
 * zeroes it, and can return #KVPOOL_ERR_OUT_OF_MEMORY (no state slot free or
 * evictable; nothing changed). The next extend of a request caches the tokens
 * computed so far with a fork of its state (skipped while no state slot is free
 * or evictable); finish with every computed token committed hands the slot to
 * the tree with the tokens; otherwise it is freed.
 * `pool.mamba_extra_buffer` is not supported (#KVPOOL_ERR_UNSUPPORTED).
 *
 * swa pools: window slots of a request's tokens that left its sliding window are
 * freed (the full slots stay) at its next extend or decode; the next extend then
 * caches the tokens computed so far, and finish the committed ones, with SGLang's
 * swa insert (tombstones for tokens without window slots).
 *
 * On both, unlike plain pools, the chunk being allocated is cached only at the
 * request's next extend or at finish (a mamba state exists only once the engine
 * computed the chunk; swa first frees the window slots that left the window, so
 * little window KV stays locked); see docs/prefix_cache.md.
 * Thread safety: one thread at a time per pool, or any thread with pool.thread_safe (pool.h).
 */
#ifndef KVPOOL_SEQ_H
#define KVPOOL_SEQ_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief State and lengths of a request (see kvseq_get_info()). */
typedef struct kvseq_info {
  /** In: sizeof(kvseq_info) as the caller was compiled. */
  uint32_t struct_size;
  /** Request-table row, or -1 before the first extend and after retract. */
  int32_t row;
  /** Tokens known: the prompt plus decoded tokens. */
  uint64_t tokens;
  /** Tokens whose KV slots are allocated (cached prefix + computed). */
  uint64_t computed;
  /** Leading tokens whose slots the prefix tree owns (page-aligned). */
  uint64_t cached;
  /** Prefix tokens found in the tree at begin (or at the last retract). */
  uint64_t prefix_hit;
  /** Of prefix_hit, tokens loaded back from the host tier (host.h); 0 without one.
   *  Written only when struct_size covers it (callers built before it was added pass less). */
  uint64_t host_hit;
  /** Of host_hit, tokens that a storage prefetch (storage.h) brought into the host tier
   *  and that this request loaded first; 0 without a storage tier. Written only when
   *  struct_size covers it. */
  uint64_t storage_hit;
} kvseq_info;

/** @brief Initializer for a ::kvseq_info whose struct_size is set. */
#define KVSEQ_INFO_INIT { (uint32_t)sizeof(kvseq_info), 0, 0, 0, 0, 0, 0, 0 }

/**
 * @brief Start a request: match its longest cached prefix and lock it.
 * @param[in]  pool       A live pool.
 * @param[in]  tokens     The prompt's token ids (at least one).
 * @param[in]  tokens_len Number of tokens (at most max_context_len).
 * @param[in]  extra_key  Namespace of the prefix cache (LoRA id, cache salt), or NULL.
 * @param[out] seq        Receives the request's id (never 0).
 * @param[out] cached     Receives the number of prompt tokens found in the cache.
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY (hybrid_linear: no state slot; nothing
 *         changed); #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_begin(kvpool *pool, const int32_t *tokens, size_t tokens_len, const char *extra_key,
                                     uint64_t *seq, size_t *cached);

/**
 * @brief Compute the next prompt chunk of each request of a batch.
 *
 * Request i gets `chunk_lens[i]` more prompt tokens (at most what remains of its prompt).
 * All-or-nothing for the whole batch.
 *
 * @param[in]  pool           A live pool.
 * @param[in]  seqs           Request ids (each once).
 * @param[in]  seqs_len       Batch size.
 * @param[in]  chunk_lens     Tokens to compute per request (>= 1).
 * @param[in]  chunk_lens_len Must equal @p seqs_len.
 * @param[out] slots          Receives the new tokens' slots, request-major.
 * @param[in]  slots_len      Must equal the sum of @p chunk_lens.
 * @return #KVPOOL_OK; #KVPOOL_ERR_OUT_OF_MEMORY (rows or slots short even after eviction;
 *         nothing changed); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_extend(kvpool *pool, const uint64_t *seqs, size_t seqs_len, const int64_t *chunk_lens,
                                      size_t chunk_lens_len, int64_t *slots, size_t slots_len);

/**
 * @brief Append one token to each request and give it a slot (a decode step).
 * @param[in]  pool       A live pool.
 * @param[in]  seqs       Request ids whose prompt is fully computed (each once).
 * @param[in]  seqs_len   Batch size.
 * @param[in]  tokens     The token appended to each request (its KV is computed now).
 * @param[in]  tokens_len Must equal @p seqs_len.
 * @param[out] slots      Receives one slot per request.
 * @param[in]  slots_len  Must equal @p seqs_len.
 * @return As kvseq_extend().
 */
KVPOOL_API kvpool_status kvseq_decode(kvpool *pool, const uint64_t *seqs, size_t seqs_len, const int32_t *tokens,
                                      size_t tokens_len, int64_t *slots, size_t slots_len);

/**
 * @brief Finish a request: cache its first @p committed tokens, release the rest, forget it.
 * @param[in] pool      A live pool.
 * @param[in] seq       A request id.
 * @param[in] committed Tokens whose KV is valid (at most the computed length).
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_finish(kvpool *pool, uint64_t seq, size_t committed);

/**
 * @brief Abort a request: release its slots and row without caching anything, unlock, forget it.
 * @param[in] pool A live pool.
 * @param[in] seq  A request id.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_abort(kvpool *pool, uint64_t seq);

/**
 * @brief Retract a request under memory pressure: release as abort does, keep its tokens,
 *        and match its prefix again so a later kvseq_extend recomputes only what is not cached.
 * @param[in]  pool   A live pool.
 * @param[in]  seq    A request id.
 * @param[out] cached Receives the tokens found in the cache now.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_retract(kvpool *pool, uint64_t seq, size_t *cached);

/**
 * @brief Lengths and row of a request.
 * @param[in]     pool A live pool.
 * @param[in]     seq  A request id.
 * @param[in,out] out  Its struct_size must be set; receives the information.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_get_info(const kvpool *pool, uint64_t seq, kvseq_info *out);

/**
 * @brief The slots of a request's computed tokens, in token order.
 * @param[in]  pool      A live pool.
 * @param[in]  seq       A request id.
 * @param[out] slots     Receives the slots.
 * @param[in]  slots_cap Capacity of @p slots.
 * @param[out] slots_len Receives the number of slots (also on #KVPOOL_ERR_BUFFER_TOO_SMALL).
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_get_slots(const kvpool *pool, uint64_t seq, int64_t *slots, size_t slots_cap,
                                         size_t *slots_len);

/**
 * @brief SGLang's scheduler accounting (§1.19): available + evictable + protected + uncached,
 *        which equals the token capacity whenever only kvseq_* allocate slots.
 * @param[in]  pool      A live pool.
 * @param[out] available Receives the allocator's free tokens.
 * @param[out] evictable Receives the tree's unlocked tokens (0 without a tree).
 * @param[out] protected_len Receives the tree's locked tokens.
 * @param[out] uncached  Receives the tokens held by requests and not owned by the tree (whole pages).
 * @param[out] capacity  Receives the token capacity.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_accounting(const kvpool *pool, size_t *available, size_t *evictable,
                                          size_t *protected_len, size_t *uncached, size_t *capacity);

/**
 * @brief The mamba state slot a request owns (hybrid_linear pools).
 *
 * The slot holds the recurrent state after the request's last computed token; the
 * engine reads and updates it while computing the request. It stays valid until the
 * request finishes, aborts or is retracted (a retracted request gets a new one).
 *
 * @param[in]  pool A live hybrid_linear pool.
 * @param[in]  seq  A request id.
 * @param[out] slot Receives the state slot.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (not hybrid_linear); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvseq_mamba_slot(const kvpool *pool, uint64_t seq, int32_t *slot);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_SEQ_H */
