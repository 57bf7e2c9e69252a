// Physical KV buffers of every pool variant (SGLANG_SEMANTICS §1.6–§1.12):
// allocation, descriptors, and the data operations behind buffers.h.
//
// Row addressing: a token slot s is row s of each per-layer buffer (swa window
// layers: row mapping[s]; nsa indexer: page s / page_size, entry s % page_size).
// Callers (capi/) have checked handles and NULL/length pairs; this layer checks
// layers, slot ranges, dtypes and byte counts, and writes nothing on error.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "host/host_geometry.hpp"
#include "kvpool/buffers.h"
#include "plan/plan.hpp"
#include "pool/kv_device.hpp"
#include "util/status.hpp"

namespace kvp::pool {

class KvBuffers {
 public:
  // `swa_mapping` (swa only) is the allocator's full-to-window mapping, host memory, length max_total_tokens + 1.
  static Status make(backend::Backend* backend, const config::Config& c, const plan::Plan& p,
                     const int64_t* swa_mapping, std::unique_ptr<KvBuffers>* out);
  ~KvBuffers();

  Status describe(int32_t kind, int32_t layer, kvpool_buffer* out) const;
  Status set_kv(int32_t layer, const int64_t* slots, size_t n, const void* k, size_t k_bytes, const void* v,
                size_t v_bytes, int32_t src_dtype, float k_scale, float v_scale);
  Status set_mla_kv(int32_t layer, const int64_t* slots, size_t n, const void* nope, size_t nope_bytes,
                    const void* rope, size_t rope_bytes, int32_t src_dtype);
  Status set_label(int32_t layer, const int64_t* slots, size_t n, const void* labels, size_t labels_bytes);
  Status set_indexer(int32_t layer, const int64_t* slots, size_t n, const void* keys, size_t keys_bytes,
                     const float* scales, size_t scales_len);
  Status get_kv(int32_t layer, const int64_t* slots, size_t n, void* k, size_t k_bytes, void* v, size_t v_bytes,
                int32_t dst_dtype) const;
  Status move_kv(const int64_t* dst, const int64_t* src, size_t n);
  Status host_copy_bytes(size_t n, size_t* bytes) const;
  Status copy_to_host(const int64_t* slots, size_t n, void* host, size_t host_bytes) const;
  Status load_from_host(const int64_t* slots, size_t n, const void* host, size_t host_bytes);

  // device.h: the same operations on device arrays, enqueued on `stream`
  // (CUDA pools). Everything the host can see is checked first and nothing is
  // enqueued on error; slot values are checked by the kernels (pool fault).
  Status set_kv_async(int32_t layer, const int64_t* slots, size_t n, const void* k, size_t k_bytes, const void* v,
                      size_t v_bytes, int32_t src_dtype, float k_scale, float v_scale, void* stream,
                      const dev::FaultSink& fault);
  Status set_mla_kv_async(int32_t layer, const int64_t* slots, size_t n, const void* nope, size_t nope_bytes,
                          const void* rope, size_t rope_bytes, int32_t src_dtype, void* stream,
                          const dev::FaultSink& fault);
  Status get_kv_async(int32_t layer, const int64_t* slots, size_t n, void* k, size_t k_bytes, void* v,
                      size_t v_bytes, int32_t dst_dtype, void* stream, const dev::FaultSink& fault) const;
  Status move_kv_async(const int64_t* dst, const int64_t* src, size_t n, void* stream, const dev::FaultSink& fault);

  // The rows the host tier copies (lib/host/): one part per kind of row, with each tiered
  // layer's device buffer; `*layers` = number of tiered layers (kv_tier_parts.cpp).
  // `window_layers` (swa pools): the sliding-window layers instead, whose rows are window
  // slots (the swa host tier keeps them in a second host pool).
  Status tier_parts(std::vector<host::TierPart>* parts, uint32_t* layers, bool window_layers = false) const;

  // Bytes of every buffer this object owns.
  uint64_t bytes() const;

  struct Impl;

 private:
  explicit KvBuffers(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvp::pool
