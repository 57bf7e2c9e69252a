/**
 * @file device.h
 * @brief Stream-ordered operations on device memory (the GPU fast path).
 *
 * The functions here take their array arguments as **device pointers** of the
 * pool's device and a CUDA stream as `void *` (`cudaStream_t`; NULL = the
 * legacy default stream). They enqueue their work on that stream and return
 * without waiting for it: nothing here synchronizes the device, except
 * kvpool_synchronize(), whose contract is to wait. Inputs must stay valid and
 * unchanged until the stream reaches the call; outputs are ready when it has.
 *
 * On a CPU pool the same functions take host pointers, ignore `stream` and run
 * at once, with the same results; this is how the CPU backend serves as the
 * reference that the CUDA backend is tested against (same slot numbers, same
 * bytes).
 *
 * **Allocation without a device-to-host copy.** The allocator functions need the
 * free-page list to live in device memory: create the pool with
 * `"pool": {"free_list": "device"}` (CUDA pools, token or paged allocator). The
 * host keeps only counters, so a capacity check uses the host-side lengths the
 * caller passes (`*_host` arguments, which must equal the device ones) and
 * costs O(batch) host work; one kernel then writes the slots and consumes the
 * free list. #KVPOOL_ERR_OUT_OF_MEMORY is decided on the host before anything
 * is enqueued and changes nothing.
 *
 * **Errors found on the device.** What only the device can see (a page freed
 * twice, a `last_loc` that does not match its prefix length, device lengths
 * that differ from the host ones, a slot out of range) cannot be reported by
 * the call that enqueued the work. The kernel then records the first problem
 * and marks the pool *faulted*; from then on every device operation of the pool
 * does nothing, and the next call on the pool (or kvpool_synchronize()) returns
 * #KVPOOL_ERR_DEVICE_FAULT with the problem in kvpool_last_error(). This is the
 * sticky-error model of CUDA itself: a bad input stops the pool instead of
 * corrupting it silently. kvalloc_clear() empties the allocator (every page
 * free again) and clears the fault; KV data and the request table are left as
 * they are. On a CPU pool the same checks run before anything changes and are
 * returned directly (#KVPOOL_ERR_INVALID_ARGUMENT), and nothing faults.
 *
 * Thread safety: a pool is used by one thread at a time (any thread with
 * pool.thread_safe, pool.h: the lock orders the enqueues); work on different
 * streams of one pool must be ordered by the caller (events), as for any
 * shared device buffer.
 */
#ifndef KVPOOL_DEVICE_H
#define KVPOOL_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Wait for `stream` and report device-side faults of the pool.
 *
 * The one call in this header that synchronizes: it waits until every
 * operation enqueued on `stream` has finished, then returns
 * #KVPOOL_ERR_DEVICE_FAULT if a device-side check failed (the message names the
 * call and the offending element), or a CUDA error.
 *
 * @param[in] pool   A live pool.
 * @param[in] stream `cudaStream_t` as `void *`; NULL is the legacy default stream. Ignored on CPU pools.
 * @return #KVPOOL_OK, #KVPOOL_ERR_DEVICE_FAULT, #KVPOOL_ERR_CUDA or #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_synchronize(kvpool *pool, void *stream);

/**
 * @brief Allocate the new slots of a prefill batch on the device (SGLang's alloc_extend).
 *
 * Same result as kvalloc_extend() for the same inputs: request i grows from
 * `prefix_lens[i]` to `seq_lens[i]` tokens; its new tokens fill the last partial
 * page of the prefix (`last_locs[i] + 1, ...`), then take whole new pages from
 * the front of the free list in request order. One kernel launch.
 *
 * @param[in]  pool             A pool with `free_list` "device" (or a CPU pool).
 * @param[in]  prefix_lens_host Host copy of the prefix lengths (capacity check).
 * @param[in]  seq_lens_host    Host copy of the new lengths (capacity check).
 * @param[in]  batch            Number of requests; every array below has this length.
 * @param[in]  prefix_lens      Device: prefix lengths (must equal the host copy).
 * @param[in]  seq_lens         Device: new lengths (must equal the host copy).
 * @param[in]  last_locs        Device: slot of token prefix-1, or -1 for an empty prefix.
 * @param[out] slots            Device: receives the new slots, request-major.
 * @param[in]  slots_len        Must equal the sum of `seq_lens - prefix_lens`.
 * @param[out] new_pages        Device, optional (NULL): receives the ids of the pages taken
 *                              from the free list, in order; pass them to kvalloc_free_pages_async()
 *                              to give the batch's new pages back.
 * @param[in]  new_pages_len    Capacity of `new_pages` (0 when NULL); must be at least the number
 *                              of pages taken (kvalloc_extend_pages() computes it).
 * @param[in]  stream           `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (enqueued); #KVPOOL_ERR_OUT_OF_MEMORY (nothing changed);
 *         #KVPOOL_ERR_INVALID_ARGUMENT; #KVPOOL_ERR_UNSUPPORTED for a host free list on CUDA or swa;
 *         #KVPOOL_ERR_DEVICE_FAULT if the pool is faulted.
 */
KVPOOL_API kvpool_status kvalloc_extend_async(kvpool *pool, const int64_t *prefix_lens_host,
                                              const int64_t *seq_lens_host, size_t batch,
                                              const int64_t *prefix_lens, const int64_t *seq_lens,
                                              const int64_t *last_locs, int64_t *slots, size_t slots_len,
                                              int64_t *new_pages, size_t new_pages_len, void *stream);

/**
 * @brief Number of free-list pages an extend batch takes (host-side arithmetic only).
 * @param[in]  pool             A live pool with a token or paged allocator.
 * @param[in]  prefix_lens_host Prefix lengths.
 * @param[in]  seq_lens_host    New lengths.
 * @param[in]  batch            Number of requests.
 * @param[out] pages            Receives the page count (tokens for page size 1).
 * @return #KVPOOL_OK, #KVPOOL_ERR_INVALID_ARGUMENT, or #KVPOOL_ERR_UNSUPPORTED for swa pools.
 */
KVPOOL_API kvpool_status kvalloc_extend_pages(const kvpool *pool, const int64_t *prefix_lens_host,
                                              const int64_t *seq_lens_host, size_t batch, size_t *pages);

/**
 * @brief Allocate one decode slot per request on the device (SGLang's alloc_decode).
 *
 * Same result as kvalloc_decode(): a request whose new token starts a page
 * (`seq % page_size == 1`) gets the first slot of the next free page (request
 * order), the others `last_locs[i] + 1`. One kernel launch.
 *
 * @param[in]  pool          A pool with `free_list` "device" (or a CPU pool).
 * @param[in]  seq_lens_host Host copy of the lengths including the new token (capacity check).
 * @param[in]  batch         Number of requests; every array below has this length.
 * @param[in]  seq_lens      Device: lengths including the new token.
 * @param[in]  last_locs     Device: slot of token seq-2 (-1 when seq is 1).
 * @param[out] slots         Device: one slot per request.
 * @param[out] new_pages     Device, optional (NULL): ids of the pages taken, in order.
 * @param[in]  new_pages_len Capacity of `new_pages` (0 when NULL).
 * @param[in]  stream        `cudaStream_t` as `void *`.
 * @return As kvalloc_extend_async().
 */
KVPOOL_API kvpool_status kvalloc_decode_async(kvpool *pool, const int64_t *seq_lens_host, size_t batch,
                                              const int64_t *seq_lens, const int64_t *last_locs, int64_t *slots,
                                              int64_t *new_pages, size_t new_pages_len, void *stream);

/**
 * @brief Allocate `slots_len` slots on the device (SGLang's alloc(n)).
 *
 * Page size 1: the first `slots_len` free slots. Paged: `slots_len` must be a
 * multiple of the page size; whole pages in free-list order, each as its
 * consecutive slots.
 *
 * @param[in]  pool      A pool with `free_list` "device" (or a CPU pool).
 * @param[out] slots     Device: receives the slots.
 * @param[in]  slots_len Number of slots.
 * @param[in]  stream    `cudaStream_t` as `void *`.
 * @return As kvalloc_extend_async().
 */
KVPOOL_API kvpool_status kvalloc_alloc_async(kvpool *pool, int64_t *slots, size_t slots_len, void *stream);

/**
 * @brief Give pages back on the device, with the allocator's order (no device sync).
 *
 * Page size 1: pages are slots, appended to the back of the free list. Paged:
 * the pages go, sorted, to the front of the free list (SGLang's free()), or to
 * the release list when the pool defers frees (`need_sort`). The pages must be
 * distinct and allocated; the device checks this and faults the pool (nothing
 * freed) otherwise.
 *
 * @param[in] pool      A pool with `free_list` "device" (or a CPU pool).
 * @param[in] pages     Device: page ids (slot / page_size), e.g. the `new_pages` of an extend.
 * @param[in] pages_len Number of pages.
 * @param[in] stream    `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (enqueued); #KVPOOL_ERR_INVALID_ARGUMENT; #KVPOOL_ERR_UNSUPPORTED;
 *         #KVPOOL_ERR_DEVICE_FAULT if the pool is faulted.
 */
KVPOOL_API kvpool_status kvalloc_free_pages_async(kvpool *pool, const int64_t *pages, size_t pages_len,
                                                  void *stream);

/**
 * @brief Write a batch's new slots into the request table on the device.
 *
 * Row `rows[i]` receives, at columns `prefix_lens[i] .. seq_lens[i]-1`, the
 * request's part of `extend_slots` (request-major, as kvalloc_extend_async()
 * produces them). When `prefix_slots` is not NULL, columns `0 .. prefix_lens[i]-1`
 * also receive the request's part of `prefix_slots` (request-major). Rows and
 * lengths are checked on the device (fault on error). One kernel launch.
 *
 * @param[in] pool              A live pool.
 * @param[in] rows              Device: request-table rows.
 * @param[in] prefix_lens       Device: prefix lengths.
 * @param[in] seq_lens          Device: new lengths.
 * @param[in] batch             Number of requests.
 * @param[in] prefix_slots      Device, optional: the prefixes' slots, or NULL.
 * @param[in] prefix_slots_len  Sum of the prefix lengths (0 when `prefix_slots` is NULL).
 * @param[in] extend_slots      Device: the new slots.
 * @param[in] extend_slots_len  Sum of `seq_lens - prefix_lens`.
 * @param[in] stream            `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (enqueued), #KVPOOL_ERR_INVALID_ARGUMENT, #KVPOOL_ERR_DEVICE_FAULT.
 */
KVPOOL_API kvpool_status kvreq_write_batch_async(kvpool *pool, const int32_t *rows, const int64_t *prefix_lens,
                                                 const int64_t *seq_lens, size_t batch, const int64_t *prefix_slots,
                                                 size_t prefix_slots_len, const int64_t *extend_slots,
                                                 size_t extend_slots_len, void *stream);

/**
 * @brief Slot of each request's last prefix token, read from the table on the device.
 *
 * `last_locs[i]` = table[rows[i]][prefix_lens[i] - 1], or -1 when the prefix is empty.
 *
 * @param[in]  pool        A live pool.
 * @param[in]  rows        Device: request-table rows.
 * @param[in]  prefix_lens Device: prefix lengths.
 * @param[in]  batch       Number of requests.
 * @param[out] last_locs   Device: receives one slot per request.
 * @param[in]  stream      `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (enqueued), #KVPOOL_ERR_INVALID_ARGUMENT, #KVPOOL_ERR_DEVICE_FAULT.
 */
KVPOOL_API kvpool_status kvreq_last_loc_async(const kvpool *pool, const int32_t *rows, const int64_t *prefix_lens,
                                              size_t batch, int64_t *last_locs, void *stream);

/**
 * @brief Write K and V rows of one layer at device slots (one kernel for K and V).
 *
 * The device counterpart of kvpool_set_kv(): `k` and `v` are device arrays of
 * `slots_len` rows in `src_dtype` (f32, f16, bf16, or the pool's own kv_dtype);
 * values are divided by `k_scale` / `v_scale` and stored in the pool's
 * kv_dtype (fp8 rounding and fp4 block packing as on the CPU). mla and
 * double_sparse pass the whole row in `k` and NULL for `v`.
 *
 * @param[in] pool      A live pool (not nsa fp8: use kvpool_set_mla_kv_async()).
 * @param[in] layer     Global layer id held by this pool.
 * @param[in] slots     Device: destination slots (< the slot limit; checked on the device).
 * @param[in] slots_len Number of rows.
 * @param[in] k         Device: K rows.
 * @param[in] k_bytes   Bytes of `k`.
 * @param[in] v         Device: V rows, or NULL for mla/double_sparse.
 * @param[in] v_bytes   Bytes of `v`.
 * @param[in] src_dtype A `kvpool_dtype` value.
 * @param[in] k_scale   Divisor for K (> 0).
 * @param[in] v_scale   Divisor for V (> 0).
 * @param[in] stream    `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (enqueued), #KVPOOL_ERR_INVALID_ARGUMENT, #KVPOOL_ERR_DEVICE_FAULT.
 */
KVPOOL_API kvpool_status kvpool_set_kv_async(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                             const void *k, size_t k_bytes, const void *v, size_t v_bytes,
                                             int32_t src_dtype, float k_scale, float v_scale, void *stream);

/**
 * @brief Write MLA rows (nope + rope into one row) of one layer at device slots.
 *
 * The device counterpart of kvpool_set_mla_kv(), including nsa's packed fp8 rows.
 *
 * @param[in] pool       A live mla or nsa pool.
 * @param[in] layer      Global layer id.
 * @param[in] slots      Device: destination slots.
 * @param[in] slots_len  Number of rows.
 * @param[in] nope       Device: `slots_len x kv_lora_rank` values.
 * @param[in] nope_bytes Bytes of `nope`.
 * @param[in] rope       Device: `slots_len x qk_rope_head_dim` values.
 * @param[in] rope_bytes Bytes of `rope`.
 * @param[in] src_dtype  f32, f16 or bf16 (or the pool's kv_dtype for mla).
 * @param[in] stream     `cudaStream_t` as `void *`.
 * @return As kvpool_set_kv_async().
 */
KVPOOL_API kvpool_status kvpool_set_mla_kv_async(kvpool *pool, int32_t layer, const int64_t *slots,
                                                 size_t slots_len, const void *nope, size_t nope_bytes,
                                                 const void *rope, size_t rope_bytes, int32_t src_dtype,
                                                 void *stream);

/**
 * @brief Gather K and V rows of one layer from device slots into device arrays.
 *
 * The device counterpart of kvpool_get_kv() (same formats and conversions).
 *
 * @param[in]  pool      A live pool.
 * @param[in]  layer     Global layer id.
 * @param[in]  slots     Device: source slots.
 * @param[in]  slots_len Number of rows.
 * @param[out] k         Device: receives K rows (mla: whole rows).
 * @param[in]  k_bytes   Bytes of `k`.
 * @param[out] v         Device: receives V rows, or NULL for mla.
 * @param[in]  v_bytes   Bytes of `v`.
 * @param[in]  dst_dtype Output format (f32, f16, bf16 or the pool's kv_dtype).
 * @param[in]  stream    `cudaStream_t` as `void *`.
 * @return As kvpool_set_kv_async().
 */
KVPOOL_API kvpool_status kvpool_get_kv_async(const kvpool *pool, int32_t layer, const int64_t *slots,
                                             size_t slots_len, void *k, size_t k_bytes, void *v, size_t v_bytes,
                                             int32_t dst_dtype, void *stream);

/**
 * @brief Copy every layer's rows from device slots `src` to device slots `dst` (gather, then scatter).
 *
 * The device counterpart of kvpool_move_kv(): all of `src` is read before any of
 * `dst` is written, so overlapping sets move correctly.
 *
 * @param[in] pool    A live pool.
 * @param[in] dst     Device: destination slots.
 * @param[in] dst_len Number of slots.
 * @param[in] src     Device: source slots.
 * @param[in] src_len Must equal `dst_len`.
 * @param[in] stream  `cudaStream_t` as `void *`.
 * @return As kvpool_set_kv_async().
 */
KVPOOL_API kvpool_status kvpool_move_kv_async(kvpool *pool, const int64_t *dst, size_t dst_len,
                                              const int64_t *src, size_t src_len, void *stream);

/**
 * @brief Allocate mamba state slots; their zeroing is enqueued on `stream`.
 *
 * The slot ids come from the host-side list of state slots (as kvpool_mamba_alloc(),
 * same ids), so `slots` is **host** memory; zeroing every layer's conv and ssm state
 * of the new slots is one kernel per 128 slots on `stream`, with no device sync.
 *
 * @param[in]  pool      A live hybrid_linear pool.
 * @param[out] slots     Host: receives the slot ids.
 * @param[in]  slots_len Number of slots.
 * @param[in]  stream    `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (ids returned, zeroing enqueued); #KVPOOL_ERR_OUT_OF_MEMORY (nothing
 *         changed); #KVPOOL_ERR_UNSUPPORTED (no mamba states); #KVPOOL_ERR_DEVICE_FAULT.
 */
KVPOOL_API kvpool_status kvpool_mamba_alloc_async(kvpool *pool, int32_t *slots, size_t slots_len, void *stream);

/**
 * @brief Fork a mamba state: a new slot (host id) whose states become a copy of `src`'s, copied on `stream`.
 * @param[in]  pool   A live hybrid_linear pool.
 * @param[in]  src    An allocated state slot (checked on the host).
 * @param[out] dst    Host: receives the new slot.
 * @param[in]  stream `cudaStream_t` as `void *`.
 * @return As kvpool_mamba_alloc_async(); #KVPOOL_ERR_INVALID_ARGUMENT for a bad `src`.
 */
KVPOOL_API kvpool_status kvpool_mamba_fork_async(kvpool *pool, int32_t src, int32_t *dst, void *stream);

/**
 * @brief Copy mamba states slot to slot (every layer, conv and ssm) for a batch, on `stream`.
 *
 * `dst[i]` receives `src[i]`'s states (SGLang's copy_from with index tensors).
 * Both arrays are device memory on a CUDA pool, where slot ranges are checked
 * on the device (fault); a CPU pool also checks that every slot is allocated and
 * that no destination is the state slot of a live kvseq request (refused, nothing copied).
 * Destinations must be distinct and must not be sources of the same call.
 *
 * @param[in] pool    A live hybrid_linear pool.
 * @param[in] src     Device: source slots.
 * @param[in] src_len Number of copies.
 * @param[in] dst     Device: destination slots.
 * @param[in] dst_len Must equal `src_len`.
 * @param[in] stream  `cudaStream_t` as `void *`.
 * @return #KVPOOL_OK (enqueued), #KVPOOL_ERR_INVALID_ARGUMENT, #KVPOOL_ERR_UNSUPPORTED,
 *         #KVPOOL_ERR_DEVICE_FAULT.
 */
KVPOOL_API kvpool_status kvpool_mamba_copy_async(kvpool *pool, const int32_t *src, size_t src_len,
                                                 const int32_t *dst, size_t dst_len, void *stream);

/**
 * @brief A decode allocation that a CUDA graph can capture once and replay for many steps.
 *
 * kvalloc_decode_async() takes the free-list position and the page count from the host
 * when it is called, so a captured copy would replay them unchanged. This call reads
 * everything when the kernel runs: the free-list position from the pool's device
 * cursor (which every device allocator call keeps current), the lengths and
 * `last_locs` from device memory, and it counts the new pages and checks the capacity
 * on the device. A step that needs more pages than are free faults the pool (sticky,
 * #KVPOOL_ERR_DEVICE_FAULT at the next call, with a message naming the watermark) and
 * allocates nothing. Same slots as kvalloc_decode_async() for the same lengths.
 *
 * The host counters do not move when the kernel runs: after running the step (eagerly
 * or as graph replays), and before any other allocator call on the pool, call
 * kvalloc_decode_graph_advance() with the number of steps that ran. Before replaying,
 * kvalloc_decode_watermark() says how many steps fit. Neither synchronizes.
 * Not available with need_sort (disaggregation) pools. On a CPU pool the call is
 * kvalloc_decode() on host arrays, at once (advance then only checks its arguments).
 *
 * @param[in]  pool      A pool with `free_list` "device" (or a CPU pool).
 * @param[in]  batch     Number of requests.
 * @param[in]  seq_lens  Device: lengths including the new token, read when the step runs.
 * @param[in]  last_locs Device: slot of token seq-2 (-1 when seq is 1), read when the step runs.
 * @param[out] slots     Device: one slot per request.
 * @param[in]  stream    `cudaStream_t` as `void *` (the capturing stream).
 * @return #KVPOOL_OK (enqueued or captured); #KVPOOL_ERR_INVALID_ARGUMENT; #KVPOOL_ERR_UNSUPPORTED
 *         (host free list on CUDA, swa, need_sort); #KVPOOL_ERR_DEVICE_FAULT if the pool is faulted.
 */
KVPOOL_API kvpool_status kvalloc_decode_graph_async(kvpool *pool, size_t batch, const int64_t *seq_lens,
                                                    const int64_t *last_locs, int64_t *slots, void *stream);

/**
 * @brief How many consecutive decode steps fit in the free list (a graph's watermark).
 *
 * Step k gives every request one more token (lengths `seq_lens_host[i] + k`); a step
 * takes a page for each request whose new length starts one. Host arithmetic on the
 * host's counters, no synchronization.
 *
 * @param[in]  pool          A pool with a token or paged allocator.
 * @param[in]  seq_lens_host Lengths at the first step (including its new token, >= 1).
 * @param[in]  batch         Number of requests (>= 1).
 * @param[out] steps         Receives the number of steps that fit.
 * @return #KVPOOL_OK, #KVPOOL_ERR_INVALID_ARGUMENT, #KVPOOL_ERR_UNSUPPORTED (swa; host free list on CUDA).
 */
KVPOOL_API kvpool_status kvalloc_decode_watermark(const kvpool *pool, const int64_t *seq_lens_host, size_t batch,
                                                  size_t *steps);

/**
 * @brief Record that `steps` decode steps of kvalloc_decode_graph_async() ran.
 *
 * The host counters advance exactly as the device cursor did (the pages those steps
 * took, from `seq_lens_host` at the first of them). No synchronization. Steps that take
 * more pages than the host counts free are refused (#KVPOOL_ERR_INVALID_ARGUMENT, nothing
 * changes); a replay past the watermark has faulted the pool, which then answers
 * #KVPOOL_ERR_DEVICE_FAULT (with the step's message) until kvalloc_clear().
 *
 * @param[in] pool          The pool of the graph.
 * @param[in] seq_lens_host Lengths at the first step that ran (including its new token).
 * @param[in] batch         Number of requests.
 * @param[in] steps         Steps that ran since the last advance.
 * @return #KVPOOL_OK, #KVPOOL_ERR_INVALID_ARGUMENT, #KVPOOL_ERR_UNSUPPORTED, #KVPOOL_ERR_DEVICE_FAULT.
 */
KVPOOL_API kvpool_status kvalloc_decode_graph_advance(kvpool *pool, const int64_t *seq_lens_host, size_t batch,
                                                      size_t steps);

/**
 * @brief kvseq_extend() with the request-table writes enqueued on a stream and the new
 *        slots written to a device array.
 *
 * The request bookkeeping is the host's (ids, tokens, prefix matches, the tree), so
 * `seqs` and `chunk_lens` are host arrays and the new slots are decided on the host
 * exactly as kvseq_extend() decides them. The whole batch's table writes (new rows'
 * cached prefixes, every request's new slots) and the copy of the slots into `slots`
 * are one upload and one kernel on `stream`, whatever the batch size; nothing waits
 * for the device. Works with both free lists (`"free_list": "device"` runs on the
 * list's host mirror, see docs/cuda.md). On a CPU pool `slots` is host memory and
 * the call is kvseq_extend().
 *
 * @param[in]  pool           A live pool with kvseq support.
 * @param[in]  seqs           Host: request ids (each once).
 * @param[in]  seqs_len       Batch size.
 * @param[in]  chunk_lens     Host: tokens to compute per request (>= 1).
 * @param[in]  chunk_lens_len Must equal @p seqs_len.
 * @param[out] slots          Device: receives the new tokens' slots, request-major.
 * @param[in]  slots_len      Must equal the sum of @p chunk_lens.
 * @param[in]  stream         `cudaStream_t` as `void *`.
 * @return As kvseq_extend(), plus #KVPOOL_ERR_CUDA (nothing changed) and
 *         #KVPOOL_ERR_DEVICE_FAULT if the pool is faulted.
 */
KVPOOL_API kvpool_status kvseq_extend_async(kvpool *pool, const uint64_t *seqs, size_t seqs_len,
                                            const int64_t *chunk_lens, size_t chunk_lens_len, int64_t *slots,
                                            size_t slots_len, void *stream);

/**
 * @brief kvseq_decode() with the request-table writes enqueued on a stream and the new
 *        slots written to a device array.
 *
 * One upload and one kernel on `stream` for the whole batch; nothing waits for the
 * device. On a CPU pool `slots` is host memory and the call is kvseq_decode().
 *
 * @param[in]  pool       A live pool with kvseq support.
 * @param[in]  seqs       Host: request ids whose prompt is fully computed (each once).
 * @param[in]  seqs_len   Batch size.
 * @param[in]  tokens     Host: the token appended to each request.
 * @param[in]  tokens_len Must equal @p seqs_len.
 * @param[out] slots      Device: receives one slot per request.
 * @param[in]  slots_len  Must equal @p seqs_len.
 * @param[in]  stream     `cudaStream_t` as `void *`.
 * @return As kvseq_extend_async().
 */
KVPOOL_API kvpool_status kvseq_decode_async(kvpool *pool, const uint64_t *seqs, size_t seqs_len,
                                            const int32_t *tokens, size_t tokens_len, int64_t *slots,
                                            size_t slots_len, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_DEVICE_H */
