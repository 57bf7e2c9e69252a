/**
 * @file buffers.h
 * @brief Physical KV buffers: descriptors and data movement (set, get, move, host copy).
 *
 * A pool owns per-layer buffers shaped by its variant (docs/buffers.md):
 * - mha / double_sparse / hybrid_linear: K and V per layer, `[size + page_size, heads, head_dim]`;
 * - mla: one row per token and layer, `[size + page_size, 1, kv_lora_rank + qk_rope_head_dim]`;
 *   the value view is its first kv_lora_rank columns;
 * - nsa: as mla (fp8_e4m3: a packed byte row) plus a per-page indexer buffer;
 * - swa: full layers in the full pool, window layers in the window pool (slots are
 *   translated through the full-to-window mapping);
 * - hybrid_linear: KV only for full-attention layers (other layer ids are an error);
 * - double_sparse: plus a label buffer `[size + 1, heads, heavy_channels]`.
 *
 * Layer ids are global (as in the model); a pipeline stage holds `start_layer..end_layer`.
 * fp8 values are stored as bytes; fp4_e2m1 packs two values per byte (low nibble
 * first) with one fp8_e4m3 scale per 16 values in a separate scale buffer.
 *
 * Element data passes as bytes: `(pointer, byte length)`, rows contiguous,
 * in the dtype the call names. Every length is checked. Thread safety: one thread at a time,
 * or any thread with pool.thread_safe (pool.h).
 */
#ifndef KVPOOL_BUFFERS_H
#define KVPOOL_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Element types of buffers and of data passed in and out. */
typedef enum kvpool_dtype {
  KVPOOL_DTYPE_F32 = 0,      /**< IEEE float32 */
  KVPOOL_DTYPE_F16 = 1,      /**< IEEE float16 */
  KVPOOL_DTYPE_BF16 = 2,     /**< bfloat16 */
  KVPOOL_DTYPE_FP8_E4M3 = 3, /**< float8 e4m3fn (no infinities, 0x7f/0xff are NaN) */
  KVPOOL_DTYPE_FP8_E5M2 = 4, /**< float8 e5m2 */
  KVPOOL_DTYPE_FP4_E2M1 = 5, /**< float4 e2m1, two per byte (descriptor shapes count bytes) */
  KVPOOL_DTYPE_U8 = 6,       /**< raw bytes (packed rows, indexer) */
  KVPOOL_DTYPE_I32 = 7,      /**< int32 (request table) */
  KVPOOL_DTYPE_I64 = 8       /**< int64 */
} kvpool_dtype;

/** @brief Which buffer kvpool_get_buffer() describes. */
typedef enum kvpool_buffer_kind {
  KVPOOL_BUFFER_K = 0,           /**< keys of a layer (mla/nsa: the whole row) */
  KVPOOL_BUFFER_V = 1,           /**< values of a layer (mla/nsa: view of the first kv_lora_rank columns) */
  KVPOOL_BUFFER_K_SCALE = 2,     /**< fp4: block scales of K (mla/nsa: of the row) */
  KVPOOL_BUFFER_V_SCALE = 3,     /**< fp4: block scales of V */
  KVPOOL_BUFFER_INDEXER = 4,     /**< nsa: per-page indexer bytes */
  KVPOOL_BUFFER_LABEL = 5,       /**< double_sparse: labels */
  KVPOOL_BUFFER_REQ_TABLE = 6,   /**< the request-to-token table (layer ignored) */
  KVPOOL_BUFFER_MAMBA_CONV = 7,  /**< hybrid_linear: conv state of a mamba layer */
  KVPOOL_BUFFER_MAMBA_SSM = 8,   /**< hybrid_linear: temporal state of a mamba layer */
  KVPOOL_BUFFER_SWA_MAPPING = 9, /**< swa: full-to-window slot mapping, int64 (layer ignored) */
  KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM = 10, /**< hybrid_linear speculative: per-draft-token temporal states */
  KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV = 11 /**< hybrid_linear speculative: per-draft-token conv windows */
} kvpool_buffer_kind;

/** @brief DLPack device type of CPU memory. */
#define KVPOOL_DEVICE_CPU 1
/** @brief DLPack device type of CUDA device memory. */
#define KVPOOL_DEVICE_CUDA 2
/**
 * @brief DLPack device type of pinned (page-locked) host memory of a CUDA pool (kDLCUDAHost).
 *
 * The host tier of a CUDA pool asks the kvpool_allocator callbacks for memory of this
 * type: host memory the GPU can copy from and to directly (e.g. from cudaHostAlloc).
 */
#define KVPOOL_DEVICE_CUDA_HOST 3

/**
 * @brief Where a buffer lives and how it is laid out; maps 1:1 onto a DLPack DLTensor.
 *
 * Strides are in elements (DLPack convention). The memory belongs to the pool and
 * stays valid until the pool is destroyed.
 */
typedef struct kvpool_buffer {
  /** In: sizeof(kvpool_buffer) as the caller was compiled. */
  uint32_t struct_size;
  /** A ::kvpool_dtype value. */
  int32_t dtype;
  /** Base address (host or device pointer). */
  void *data;
  /** #KVPOOL_DEVICE_CPU or #KVPOOL_DEVICE_CUDA. */
  int32_t device_type;
  /** Device ordinal (0 for CPU). */
  int32_t device_id;
  /** Number of dimensions used in shape and strides (1..5). */
  int32_t ndim;
  /** Padding for alignment; always 0. */
  int32_t reserved;
  /** Extent of each dimension. */
  int64_t shape[5];
  /** Stride of each dimension, in elements. */
  int64_t strides[5];
  /** Bytes from data to the end of the buffer. */
  uint64_t bytes;
} kvpool_buffer;

/** @brief Initializer for a ::kvpool_buffer whose struct_size is set. */
#define KVPOOL_BUFFER_INIT { (uint32_t)sizeof(kvpool_buffer), 0, 0, 0, 0, 0, 0, {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, 0 }

/**
 * @brief Describe one buffer of the pool.
 * @param[in]     pool  A live pool.
 * @param[in]     kind  A ::kvpool_buffer_kind value.
 * @param[in]     layer Global layer id (ignored for the request table and the swa mapping).
 * @param[in,out] out   Its struct_size must be set; receives the descriptor.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED if the variant has no such buffer;
 *         #KVPOOL_ERR_INVALID_ARGUMENT (layer not held, NULL, struct_size too small).
 */
KVPOOL_API kvpool_status kvpool_get_buffer(const kvpool *pool, int32_t kind, int32_t layer, kvpool_buffer *out);

/**
 * @brief Write K and V rows of one layer at the given slots (SGLang's set_kv_buffer).
 *
 * @p k and @p v hold `slots_len x heads x head_dim` values of @p src_dtype. If
 * src_dtype differs from the pool's kv_dtype, each value is divided by its scale
 * and then cast (fp8: round to nearest even, e4m3 overflow gives NaN; fp4: block
 * quantisation). Pass 1.0 for no scaling. For mla (not nsa fp8) @p k is the whole row
 * and @p v must be NULL with length 0.
 *
 * @param[in] pool      A live pool.
 * @param[in] layer     Global layer id of an attention layer held by the pool.
 * @param[in] slots     Destination slots in [0, size + page_size) (swa: full-pool slots).
 * @param[in] slots_len Number of tokens.
 * @param[in] k         Key data.
 * @param[in] k_bytes   Bytes of @p k.
 * @param[in] v         Value data.
 * @param[in] v_bytes   Bytes of @p v.
 * @param[in] src_dtype f32, f16, bf16, or the pool's kv_dtype.
 * @param[in] k_scale   Divisor applied before a cast (> 0).
 * @param[in] v_scale   Divisor applied before a cast (> 0).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (nsa fp8: use kvpool_set_mla_kv());
 *         #KVPOOL_ERR_INVALID_ARGUMENT; on error nothing is written.
 */
KVPOOL_API kvpool_status kvpool_set_kv(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                       const void *k, size_t k_bytes, const void *v, size_t v_bytes,
                                       int32_t src_dtype, float k_scale, float v_scale);

/**
 * @brief mla/nsa: write the nope and rope parts of each row (SGLang's set_mla_kv_buffer).
 *
 * nsa with fp8_e4m3 stores the packed format: fp8 nope values, one fp32 scale per
 * 128 of them (amax / 448), bf16 rope values.
 *
 * @param[in] pool        A live pool with attention mla or nsa.
 * @param[in] layer       Global layer id.
 * @param[in] slots       Destination slots.
 * @param[in] slots_len   Number of tokens.
 * @param[in] nope        `slots_len x kv_lora_rank` values of @p src_dtype.
 * @param[in] nope_bytes  Bytes of @p nope.
 * @param[in] rope        `slots_len x qk_rope_head_dim` values of @p src_dtype.
 * @param[in] rope_bytes  Bytes of @p rope.
 * @param[in] src_dtype   f32, f16 or bf16 (or the pool's kv_dtype for whole-byte types).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED for other variants; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_set_mla_kv(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                           const void *nope, size_t nope_bytes, const void *rope, size_t rope_bytes,
                                           int32_t src_dtype);

/**
 * @brief double_sparse: write label rows `[heads, heavy_channels]` in the pool's kv_dtype.
 * @param[in] pool         A live pool with attention double_sparse.
 * @param[in] layer        Global layer id.
 * @param[in] slots        Destination slots in [0, size + 1).
 * @param[in] slots_len    Number of tokens.
 * @param[in] labels       Label data.
 * @param[in] labels_bytes Bytes of @p labels.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_set_label(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                          const void *labels, size_t labels_bytes);

/**
 * @brief nsa: write indexer keys (128 fp8 bytes per token) and their fp32 scales.
 * @param[in] pool        A live pool with attention nsa.
 * @param[in] layer       Global layer id.
 * @param[in] slots       Token slots; each lands in its page's indexer block.
 * @param[in] slots_len   Number of tokens.
 * @param[in] keys        `slots_len x 128` bytes.
 * @param[in] keys_bytes  Bytes of @p keys.
 * @param[in] scales      One scale per token.
 * @param[in] scales_len  Must equal @p slots_len.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_set_indexer(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                            const void *keys, size_t keys_bytes, const float *scales,
                                            size_t scales_len);

/**
 * @brief Gather K and V rows of one layer (mla/nsa: the whole row into @p k; @p v NULL).
 *
 * With @p dst_dtype equal to the stored dtype the bytes are copied as stored (fp4:
 * packed nibbles only); f32/f16/bf16 convert (fp8 without scaling, fp4 and the nsa
 * packed row dequantised).
 *
 * @param[in]  pool      A live pool.
 * @param[in]  layer     Global layer id.
 * @param[in]  slots     Source slots.
 * @param[in]  slots_len Number of tokens.
 * @param[out] k         Receives the keys.
 * @param[in]  k_bytes   Bytes of @p k.
 * @param[out] v         Receives the values.
 * @param[in]  v_bytes   Bytes of @p v.
 * @param[in]  dst_dtype Output dtype.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_get_kv(const kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                       void *k, size_t k_bytes, void *v, size_t v_bytes, int32_t dst_dtype);

/**
 * @brief For every layer: `row[dst[i]] = old row[src[i]]`, all sources read before any write.
 *
 * Overlapping source and destination sets are safe (speculative decoding compacts
 * accepted tokens with this). Covers K, V, scales and labels; not swa.
 *
 * @param[in] pool    A live pool.
 * @param[in] dst     Destination slots.
 * @param[in] dst_len Number of moves.
 * @param[in] src     Source slots.
 * @param[in] src_len Must equal @p dst_len.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED (swa); #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_move_kv(kvpool *pool, const int64_t *dst, size_t dst_len, const int64_t *src,
                                        size_t src_len);

/**
 * @brief Bytes kvpool_copy_to_host() needs for @p num_slots tokens.
 * @param[in]  pool      A live pool (mha-like or mla; not nsa, swa or double_sparse).
 * @param[in]  num_slots Number of tokens.
 * @param[out] bytes     Receives the size.
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_host_copy_bytes(const kvpool *pool, size_t num_slots, size_t *bytes);

/**
 * @brief Copy the KV of some slots into caller memory (retraction), in chunks of 8192 slots.
 *
 * Layout: for each held layer in order, K rows then V rows (mla: the rows), each
 * row as stored (including fp4 scales after the values).
 *
 * @param[in]  pool       A live pool.
 * @param[in]  slots      Source slots.
 * @param[in]  slots_len  Number of tokens.
 * @param[out] host       Receives the bytes.
 * @param[in]  host_bytes Must equal kvpool_host_copy_bytes(slots_len).
 * @return #KVPOOL_OK; #KVPOOL_ERR_UNSUPPORTED; #KVPOOL_ERR_INVALID_ARGUMENT.
 */
KVPOOL_API kvpool_status kvpool_copy_to_host(const kvpool *pool, const int64_t *slots, size_t slots_len, void *host,
                                             size_t host_bytes);

/**
 * @brief Scatter a kvpool_copy_to_host() copy back, possibly at other slots.
 * @param[in] pool       A live pool.
 * @param[in] slots      Destination slots (as many as were copied).
 * @param[in] slots_len  Number of tokens.
 * @param[in] host       The copy.
 * @param[in] host_bytes Must equal kvpool_host_copy_bytes(slots_len).
 * @return As kvpool_copy_to_host().
 */
KVPOOL_API kvpool_status kvpool_load_from_host(kvpool *pool, const int64_t *slots, size_t slots_len,
                                               const void *host, size_t host_bytes);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_BUFFERS_H */
