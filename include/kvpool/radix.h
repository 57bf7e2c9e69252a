/**
 * @file radix.h
 * @brief The radix prefix cache (radix_*) and the KV-event page hash.
 *
 * When `prefix_cache.kind` is "radix" (the default) every pool has a radix tree
 * of cached prefixes. Tree nodes own the KV slots of their tokens: radix_insert()
 * transfers ownership of the new part to the tree, radix_evict() returns whole
 * unlocked leaves to the allocator, and locked nodes (and their ancestors) are
 * never evicted.
 *
 * Pools of attention hybrid_linear (without `pool.mamba_extra_buffer`) have
 * SGLang's MambaRadixCache: a node may also own a mamba state slot, the state
 * after its last token; a node without one is a tombstone whose KV is reusable
 * only up to a deeper node with a state. Matches stop at the deepest node with
 * a state (radix_match_mamba() also copies it into the caller's slot), sequences
 * are cached with radix_insert_mamba(), and radix_evict_mamba() frees states.
 *
 * Pools of attention swa have SGLang's SWARadixCache: a node's tokens have
 * full-pool slots and, unless it is a tombstone, window slots. A match is usable
 * if no tombstone is on its path or at least `sliding_window` live tokens end it;
 * locks protect window KV only within the window; radix_insert_swa() is SGLang's
 * insert (the tree frees the caller's duplicates and revives tombstones), and
 * radix_evict_swa() can drop window KV only (tombstoning). On these pools
 * radix_sizes() reports full-pool tokens, radix_state_sizes() the second resource,
 * and KV events (prefix_cache.events) come one per token (page size 1): a node's full
 * KV stored or removed, its host copy made or dropped; losing window KV or a mamba
 * state (tombstoning) is no event.
 *
 * Keys are token ids (int32) in a namespace (`extra_key`: a LoRA id or cache
 * salt; NULL or "" is the default namespace). With page_size P, only whole
 * pages are matched and inserted. Node handles are opaque 64-bit values; a
 * handle of an evicted node is detected and rejected.
 *
 * Mixing these calls with kvseq_* on the same pool is allowed but then the
 * caller shares responsibility for ownership; kvseq_* alone cannot leak.
 * Thread safety: one thread at a time per pool, or any thread with
 * pool.thread_safe (pool.h). radix_page_hash() is pure.
 */
#ifndef KVPOOL_RADIX_H
#define KVPOOL_RADIX_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Kind of a KV event. */
typedef enum radix_event_type {
  RADIX_EVENT_BLOCK_STORED = 0,       /**< a page entered the tree (its device copy) */
  RADIX_EVENT_BLOCK_REMOVED = 1,      /**< a page's device copy left the tree (evicted) */
  RADIX_EVENT_ALL_BLOCKS_CLEARED = 2, /**< the tree was reset */
  RADIX_EVENT_HOST_STORED = 3,        /**< host tier: a page got its host copy (block_hash only) */
  RADIX_EVENT_HOST_REMOVED = 4        /**< host tier: a page's host copy was dropped (block_hash only) */
} radix_event_type;

/** @brief One KV event; the page's tokens are in a separate token array. */
typedef struct radix_event {
  /** A ::radix_event_type value. */
  int32_t type;
  /** Nonzero if parent_hash is set (BlockStored of a page that has a previous page). */
  int32_t has_parent;
  /** The page's hash id (first 8 digest bytes, big-endian, as int64). */
  int64_t block_hash;
  /** The previous page's hash id, if has_parent. */
  int64_t parent_hash;
  /** BlockStored: offset of the page's tokens in the token array. */
  uint64_t token_offset;
  /** BlockStored: number of tokens (the page size). */
  uint64_t token_count;
} radix_event;

/**
 * @brief Longest cached prefix of @p tokens (whole pages), and the node where it ends.
 *
 * Splits a node matched part-way and makes the matched path most recently used.
 *
 * @param[in]  pool       A live pool with a radix cache.
 * @param[in]  tokens     Token ids.
 * @param[in]  tokens_len Number of tokens.
 * @param[in]  extra_key  Namespace (NUL-terminated), or NULL for the default one.
 * @param[out] slots      Receives the cached slots of the matched tokens.
 * @param[in]  slots_cap  Capacity of @p slots (tokens_len always suffices).
 * @param[out] matched    Receives the number of matched tokens.
 * @param[out] node       Receives the last matched node (the root if nothing matched).
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL (*matched tells the need; nothing else
 *         is written); #KVPOOL_ERR_UNSUPPORTED (no radix cache); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_match(kvpool *pool, const int32_t *tokens, size_t tokens_len, const char *extra_key,
                                     int64_t *slots, size_t slots_cap, size_t *matched, uint64_t *node);

/**
 * @brief Insert a page-aligned key with its slots; the tree takes the slots of the new part.
 *
 * On success the caller still owns `slots[0, *prefix_len)` (tokens the tree had
 * already; free them unless they are the tree's own slots) and the tree owns the rest.
 * Slots handed over must be allocated, not owned by the tree already, and (page_size > 1)
 * fill whole pages in order.
 *
 * @param[in]  pool       A live pool with a radix cache.
 * @param[in]  tokens     Token ids; tokens_len must be a multiple of page_size.
 * @param[in]  tokens_len Number of tokens.
 * @param[in]  slots      One slot per token.
 * @param[in]  slots_len  Must equal @p tokens_len.
 * @param[in]  extra_key  Namespace, or NULL.
 * @param[in]  priority   Priority for the "priority" eviction policy (higher stays longer).
 * @param[out] prefix_len Receives the number of leading tokens already cached.
 * @param[out] node       Receives the node of the last token (NULL allowed).
 * On swa pools the caller likewise keeps `slots[0, *prefix_len)` and tombstones
 * are not revived (see radix_insert_swa(); with a host tier, host-only nodes on the path
 * take the caller's slots as their device copy and *prefix_len ends before the first of
 * them); on hybrid_linear pools it is
 * #KVPOOL_ERR_UNSUPPORTED (every sequence needs a state: radix_insert_mamba()).
 *
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (nothing changes).
 */
KVPOOL_API kvpool_status radix_insert(kvpool *pool, const int32_t *tokens, size_t tokens_len, const int64_t *slots,
                                      size_t slots_len, const char *extra_key, int32_t priority, size_t *prefix_len,
                                      uint64_t *node);

/**
 * @brief Protect a node and its ancestors from eviction (counted: lock n times, unlock n times).
 * @param[in] pool A live pool with a radix cache.
 * @param[in] node A live node handle.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (stale handle).
 */
KVPOOL_API kvpool_status radix_lock(kvpool *pool, uint64_t node);

/**
 * @brief Release one lock taken with radix_lock().
 * @param[in] pool A live pool with a radix cache.
 * @param[in] node A live, locked node handle.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (stale or not locked).
 */
KVPOOL_API kvpool_status radix_unlock(kvpool *pool, uint64_t node);

/**
 * @brief Evict whole unlocked leaves in policy order until @p tokens are freed or none are left.
 * @param[in]  pool    A live pool with a radix cache.
 * @param[in]  tokens  Tokens wanted back.
 * @param[out] evicted Receives the tokens freed (may exceed @p tokens: whole nodes).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_evict(kvpool *pool, size_t tokens, size_t *evicted);

/**
 * @brief Tokens in the tree: unlocked (evictable), locked (protected) and their sum.
 * @param[in]  pool          A live pool with a radix cache.
 * @param[out] evictable     Receives the evictable tokens.
 * @param[out] protected_len Receives the protected tokens.
 * @param[out] total         Receives the total.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_sizes(const kvpool *pool, size_t *evictable, size_t *protected_len, size_t *total);

/**
 * @brief Empty the tree, returning every slot it owns to the allocator; emits AllBlocksCleared.
 *
 * Refused while a kvseq request is active or a node is locked.
 *
 * @param[in] pool A live pool with a radix cache.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_reset(kvpool *pool);

/**
 * @brief Drain the queued KV events (needs `prefix_cache.events`).
 *
 * Events are removed from the queue only on success. Either buffer too small →
 * #KVPOOL_ERR_BUFFER_TOO_SMALL with the needed lengths in *events_len / *tokens_len.
 *
 * @param[in]  pool       A live pool with a radix cache.
 * @param[out] events     Receives the events in order.
 * @param[in]  events_cap Capacity of @p events.
 * @param[out] events_len Receives the number of events.
 * @param[out] tokens     Receives the tokens of BlockStored events.
 * @param[in]  tokens_cap Capacity of @p tokens.
 * @param[out] tokens_len Receives the number of tokens.
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_take_events(kvpool *pool, radix_event *events, size_t events_cap, size_t *events_len,
                                           int32_t *tokens, size_t tokens_cap, size_t *tokens_len);

/**
 * @brief The page hash of KV events: SHA-256 over the parent page's 32 digest bytes
 *        (none for a first page) and each token as 4-byte little-endian unsigned.
 *
 * Routers in any language call this to compute the ids kvpool's events carry.
 *
 * @param[in]  tokens        The page's token ids.
 * @param[in]  tokens_len    Number of tokens.
 * @param[in]  parent        The parent page's digest, or NULL for a first page.
 * @param[in]  parent_len    32, or 0 when @p parent is NULL.
 * @param[out] digest        Receives the 32-byte digest.
 * @param[in]  digest_len    Must be 32.
 * @param[out] event_id      Receives the id (first 8 digest bytes big-endian, as int64); may be NULL.
 * @return #KVPOOL_OK or #KVPOOL_ERR_INVALID_ARGUMENT.
 *
 * Thread safety: safe from any thread.
 */
KVPOOL_API kvpool_status radix_page_hash(const int32_t *tokens, size_t tokens_len, const uint8_t *parent,
                                         size_t parent_len, uint8_t *digest, size_t digest_len, int64_t *event_id);

/**
 * @brief Match on a hybrid_linear pool: the longest prefix that ends at a node with a
 *        cached mamba state, that state's slot, and optionally a copy of it (copy-on-write).
 *
 * Tokens matched past the deepest node with a state are not returned (a request could
 * not continue from there). The state slot stays the tree's: a request continues
 * from its own copy, which @p cow_slot receives.
 *
 * @param[in]  pool       A live hybrid_linear pool with a radix cache.
 * @param[in]  tokens     Token ids.
 * @param[in]  tokens_len Number of tokens.
 * @param[in]  extra_key  Namespace, or NULL.
 * @param[in]  cow_slot   A mamba slot the caller allocated (kvpool_mamba_alloc()) that receives
 *                        the node's state if one matched, or -1 for no copy. Neither the tree's
 *                        nor the state slot of a live kvseq request (from kvseq_begin on).
 * @param[out] slots      Receives the cached slots of the usable prefix.
 * @param[in]  slots_cap  Capacity of @p slots (tokens_len always suffices).
 * @param[out] matched    Receives the number of usable tokens.
 * @param[out] node       Receives the node where they end (the root if none).
 * @param[out] mamba_slot Receives the node's state slot, owned by the tree (-1 at the root).
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL (*matched tells the need; nothing else
 *         changes); #KVPOOL_ERR_UNSUPPORTED (not a hybrid_linear pool with a radix cache);
 *         #KVPOOL_ERR_INVALID_ARGUMENT (nothing changes; e.g. @p cow_slot not allocated, the
 *         tree's, or a kvseq request's: "cow_slot N belongs to a kvseq request").
 */
KVPOOL_API kvpool_status radix_match_mamba(kvpool *pool, const int32_t *tokens, size_t tokens_len,
                                           const char *extra_key, int32_t cow_slot, int64_t *slots, size_t slots_cap,
                                           size_t *matched, uint64_t *node, int32_t *mamba_slot);

/**
 * @brief Cache a sequence and the mamba state after its last token (hybrid_linear pools).
 *
 * As radix_insert(): the caller keeps `slots[0, *prefix_len)` (tokens cached already),
 * the tree takes the rest. The tree takes @p mamba_slot too unless the sequence's end
 * node already has a state (*mamba_exist = 1: the caller keeps and frees its slot);
 * an end node that is a tombstone is revived with it.
 *
 * @param[in]  pool        A live hybrid_linear pool with a radix cache.
 * @param[in]  tokens      Token ids (at least one).
 * @param[in]  tokens_len  Number of tokens.
 * @param[in]  slots       One allocated slot per token.
 * @param[in]  slots_len   Must equal @p tokens_len.
 * @param[in]  extra_key   Namespace, or NULL.
 * @param[in]  mamba_slot  An allocated state slot that no request row, no live kvseq request
 *                         (from kvseq_begin on, row or not) and not the tree holds.
 * @param[out] prefix_len  Receives the number of leading tokens already cached.
 * @param[out] mamba_exist Receives 1 if the tree kept its own state (the caller keeps @p mamba_slot), else 0.
 * @param[out] node        Receives the node of the last token (NULL allowed).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (nothing changes;
 *         a kvseq request's state: "mamba_slot N belongs to a kvseq request").
 */
KVPOOL_API kvpool_status radix_insert_mamba(kvpool *pool, const int32_t *tokens, size_t tokens_len,
                                            const int64_t *slots, size_t slots_len, const char *extra_key,
                                            int32_t mamba_slot, size_t *prefix_len, int32_t *mamba_exist,
                                            uint64_t *node);

/**
 * @brief Free cached mamba states, least recently used first (hybrid_linear pools).
 *
 * An unlocked internal node loses its state and becomes a tombstone (its KV stays);
 * an unlocked leaf is evicted entirely, with the childless tombstones above it.
 *
 * @param[in]  pool    A live hybrid_linear pool with a radix cache.
 * @param[in]  states  States wanted back.
 * @param[out] evicted Receives the states freed (fewer if no more are unlocked).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_evict_mamba(kvpool *pool, size_t states, size_t *evicted);

/**
 * @brief SGLang's SWARadixCache insert (swa pools): the tree frees the caller's duplicates itself.
 *
 * `slots[0, prev_prefix_len)` are the tree's own slots the caller got from a match.
 * Of the rest, slots of tokens the tree has already are freed (full and window slot),
 * a tombstone not locked by anyone is revived with the caller's slots (its old full
 * slots are freed), and the uncached tail is taken. After the call the caller owns none
 * of `slots[prev_prefix_len, tokens_len)`. Tokens before @p swa_evicted_len have no
 * window slot any more (freed with kvalloc_free_swa() when they left the window): they
 * never revive a tombstone, and if new they are cached as a tombstone above the new
 * leaf, or freed when no new token after them has a window slot. With a host tier, a
 * host-only node on the path takes the caller's slots as its device copy (a tombstone for
 * tokens before @p swa_evicted_len, live after), and *prefix_len ends before the first
 * such node; when no token from there on has a window slot the caller's slots from there
 * are freed and the nodes stay host-only.
 *
 * @param[in]  pool            A live swa pool with a radix cache.
 * @param[in]  tokens          Token ids.
 * @param[in]  tokens_len      Number of tokens.
 * @param[in]  slots           One slot per token.
 * @param[in]  slots_len       Must equal @p tokens_len.
 * @param[in]  extra_key       Namespace, or NULL.
 * @param[in]  prev_prefix_len Leading tokens whose slots came from the tree (at most what it holds).
 * @param[in]  swa_evicted_len Leading tokens without window slots (at most @p tokens_len).
 * @param[out] prefix_len      Receives the number of leading tokens already cached.
 * @param[out] node            Receives the node of the last cached token (NULL allowed).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT (nothing changes).
 */
KVPOOL_API kvpool_status radix_insert_swa(kvpool *pool, const int32_t *tokens, size_t tokens_len, const int64_t *slots,
                                          size_t slots_len, const char *extra_key, size_t prev_prefix_len,
                                          size_t swa_evicted_len, size_t *prefix_len, uint64_t *node);

/**
 * @brief Evict on a swa pool: full KV first, then window KV only.
 *
 * Phase 1 evicts least recently used unlocked leaves (full and window slots) until
 * @p tokens full slots are freed. Phase 2 runs only while fewer than @p swa_tokens
 * window slots were freed: least recently used window-unlocked nodes become
 * tombstones (internal nodes: window slots freed, full slots kept) or are evicted (leaves).
 *
 * @param[in]  pool        A live swa pool with a radix cache.
 * @param[in]  tokens      Full slots wanted back.
 * @param[in]  swa_tokens  Window slots wanted back.
 * @param[out] evicted     Receives the full slots freed.
 * @param[out] swa_evicted Receives the window slots freed.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_evict_swa(kvpool *pool, size_t tokens, size_t swa_tokens, size_t *evicted,
                                         size_t *swa_evicted);

/**
 * @brief The tree's second resource: mamba state slots (hybrid_linear) or window tokens (swa),
 *        unlocked (evictable) and locked (protected).
 * @param[in]  pool          A live hybrid_linear or swa pool with a radix cache.
 * @param[out] evictable     Receives the unlocked states / window tokens.
 * @param[out] protected_len Receives the locked states / window tokens.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (other pools); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status radix_state_sizes(const kvpool *pool, size_t *evictable, size_t *protected_len);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_RADIX_H */
