/**
 * @file pool.h
 * @brief Creating and destroying a pool: the one owning kvpool handle.
 *
 * A ::kvpool is made from one JSON document (see docs/config.md) and owns
 * every buffer, table and cache it describes. Component handles that later
 * families hand out are borrowed from it and stay valid until it is destroyed.
 *
 * Threads: a pool is used by one thread at a time (the caller serializes its calls),
 * unless its configuration sets `"pool": {"thread_safe": true}`: then every call on it,
 * of every family, may come from any thread at any time. The calls that change the pool
 * then run one at a time under the pool's lock, and the read-only queries (statistics,
 * accounting, sizes, kvpool_check()) share it. A kvpool call from inside a callback
 * that kvpool runs (kvpool_allocator, kvstore_backend) fails on such a pool with
 * #KVPOOL_ERR_UNSUPPORTED. See docs/services.md, "Threading".
 */
#ifndef KVPOOL_POOL_H
#define KVPOOL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Opaque pool handle; create with kvpool_create(), release with kvpool_destroy(). */
typedef struct kvpool kvpool;

/**
 * @brief Create a pool from a JSON configuration held in memory.
 * @param[in]  json     The configuration text; it need not be NUL-terminated.
 * @param[in]  json_len Length of @p json in bytes.
 * @param[out] out      Receives the new handle; set to NULL on failure.
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT if @p json or @p out is NULL;
 *         #KVPOOL_ERR_CONFIG for malformed JSON or invalid values (the message
 *         names the JSON path, the value and what was expected);
 *         #KVPOOL_ERR_CUDA or #KVPOOL_ERR_UNSUPPORTED if the configured device
 *         cannot be used; #KVPOOL_ERR_HOST_MEMORY if memory runs out.
 *
 * Ownership: the caller owns @p *out and releases it with kvpool_destroy().
 * The library keeps no pointer to @p json.
 * Thread safety: safe from any thread; the new pool is then used by one thread at a time,
 * or by any number with pool.thread_safe (see the file's description).
 */
KVPOOL_API kvpool_status kvpool_create(const char *json, size_t json_len, kvpool **out);

/**
 * @brief Memory callbacks for engines that own the device (or host) memory.
 *
 * With kvpool_create_with_allocator(), every buffer of the pool (KV buffers,
 * request table, mamba states, the device free list) comes from `alloc` and goes
 * back through `free`, instead of cudaMalloc/cudaFree (CUDA pools) or the
 * system allocator (CPU pools). Small internal staging buffers still use the
 * runtime directly.
 *
 * The host tier (`host_cache`) is allocated through the same callbacks, with
 * `device_type` #KVPOOL_DEVICE_CUDA_HOST for CUDA pools (the memory must be pinned,
 * e.g. cudaHostAlloc, so the GPU can copy to and from it) and #KVPOOL_DEVICE_CPU for
 * CPU pools; `device_id` is the pool's device. kvpool does not zero-fill that memory.
 */
typedef struct kvpool_allocator {
  /** Set to sizeof(kvpool_allocator): lets later versions add fields. */
  size_t struct_size;
  /** Passed back to both callbacks unchanged. */
  void *ctx;
  /**
   * Returns @p bytes of memory of the device (`device_type` is #KVPOOL_DEVICE_CPU,
   * #KVPOOL_DEVICE_CUDA or #KVPOOL_DEVICE_CUDA_HOST, `device_id` the CUDA ordinal or 0),
   * aligned to at least 256 bytes, or NULL on failure. kvpool zero-fills it, except
   * the host tier's memory.
   */
  void *(*alloc)(void *ctx, size_t bytes, int32_t device_type, int32_t device_id);
  /** Releases a pointer `alloc` returned, with the same size and device. */
  void (*free)(void *ctx, void *ptr, size_t bytes, int32_t device_type, int32_t device_id);
} kvpool_allocator;

/**
 * @brief Create a pool whose memory comes from the caller's allocator.
 * @param[in]  json      The configuration text; it need not be NUL-terminated.
 * @param[in]  json_len  Length of @p json in bytes.
 * @param[in]  allocator Callbacks (copied; must stay callable until kvpool_destroy()),
 *                       or NULL for the default allocator (then this is kvpool_create()).
 * @param[out] out       Receives the new handle; set to NULL on failure.
 * @return As kvpool_create(); #KVPOOL_ERR_INVALID_ARGUMENT for a struct_size
 *         that is too small or a NULL callback; #KVPOOL_ERR_CUDA (CUDA pool) or
 *         #KVPOOL_ERR_HOST_MEMORY (CPU pool) when `alloc` returns NULL or memory
 *         that is not 256-byte aligned.
 */
KVPOOL_API kvpool_status kvpool_create_with_allocator(const char *json, size_t json_len,
                                                      const kvpool_allocator *allocator, kvpool **out);

/**
 * @brief Create a pool from a JSON configuration file.
 * @param[in]  path Path of the file (NUL-terminated).
 * @param[out] out  Receives the new handle; set to NULL on failure.
 * @return As kvpool_create(), plus #KVPOOL_ERR_IO if the file cannot be read.
 *
 * Ownership and thread safety: as kvpool_create().
 */
KVPOOL_API kvpool_status kvpool_create_from_file(const char *path, kvpool **out);

/**
 * @brief Destroy a pool and everything it owns.
 * @param[in] pool A handle from kvpool_create(), or NULL (then nothing happens).
 *
 * A handle that is not live (already destroyed, or never made by kvpool) is
 * detected and ignored, so finalizers of garbage-collected bindings may call
 * this in any order and more than once.
 * Thread safety: must not run concurrently with other calls on the same pool, with
 * or without pool.thread_safe (it takes no lock: the caller ends every other use first).
 */
KVPOOL_API void kvpool_destroy(kvpool *pool);

/**
 * @brief Name of the backend a pool runs on.
 * @param[in] pool A live pool handle.
 * @return "cpu" or "cuda" (static strings); NULL if @p pool is NULL or not a
 *         live handle (kvpool_last_error() then says why).
 *
 * Thread safety: safe while no other thread destroys @p pool.
 */
KVPOOL_API const char *kvpool_backend(const kvpool *pool);

/**
 * @brief Number of CUDA devices this process can use.
 * @return 0 when the library was built without CUDA, when no driver is
 *         installed, or when no device is visible; otherwise the device count.
 *
 * Never fails and never initialises a device context beyond the runtime's own probe.
 * Thread safety: safe from any thread.
 */
KVPOOL_API int kvpool_cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_POOL_H */
