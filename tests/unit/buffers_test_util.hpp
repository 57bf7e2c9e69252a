// Helpers of the buffer tests (buffers_*_test.cpp): pools from small JSON
// configs, descriptors, whole-pool byte snapshots and poisoning (CPU pools,
// so descriptor pointers are host memory).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kvpool/kvpool.h"

namespace kvbt {

struct Destroy {
  void operator()(kvpool* p) const { kvpool_destroy(p); }
};
using Pool = std::unique_ptr<kvpool, Destroy>;

inline Pool create(const std::string& json) {
  kvpool* p = nullptr;
  const kvpool_status st = kvpool_create(json.data(), json.size(), &p);
  EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  return Pool(p);
}

// `{"model": {...}, "pool": {...}}` from the inner parts.
inline std::string config(const std::string& model, const std::string& pool) {
  return R"({"model": {)" + model + R"(}, "pool": {)" + pool + "}}";
}

// mha: 4 layers, 2 heads x 16 (32 values per row), page_size 4, 256 tokens -> 260 rows.
inline std::string mha(const std::string& dtype, const std::string& extra_model = "") {
  return config(R"("num_layers": 4, "kv_heads": 2, "head_dim": 16)" + extra_model,
                R"("kv_dtype": ")" + dtype +
                    R"(", "page_size": 4, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)");
}

// mla: 2 layers, row 32 + 16 = 48 values, page_size 4, 256 tokens.
inline std::string mla(const std::string& dtype) {
  return config(R"("num_layers": 2, "attention": "mla", "kv_lora_rank": 32, "qk_rope_head_dim": 16)",
                R"("kv_dtype": ")" + dtype +
                    R"(", "page_size": 4, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)");
}

// nsa: 2 layers, row 256 + 16, page_size 64, 256 tokens -> 320 rows, 5 indexer pages.
inline std::string nsa(const std::string& dtype) {
  return config(R"("num_layers": 2, "attention": "nsa", "kv_lora_rank": 256, "qk_rope_head_dim": 16)",
                R"("kv_dtype": ")" + dtype +
                    R"(", "page_size": 64, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)");
}

inline kvpool_plan_info plan_of(kvpool* p) {
  kvpool_plan_info info = KVPOOL_PLAN_INFO_INIT;
  EXPECT_EQ(kvpool_get_plan(p, &info), KVPOOL_OK);
  return info;
}

inline kvpool_buffer describe(const kvpool* p, int32_t kind, int32_t layer) {
  kvpool_buffer b = KVPOOL_BUFFER_INIT;
  EXPECT_EQ(kvpool_get_buffer(p, kind, layer, &b), KVPOOL_OK) << kvpool_last_error();
  return b;
}

inline uint8_t* bytes_of(const kvpool_buffer& b) { return static_cast<uint8_t*>(b.data); }

// Elements per row of the first dimension (the row stride).
inline int64_t row_stride(const kvpool_buffer& b) { return b.strides[0]; }

inline size_t elem_size(int32_t dtype) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32:
    case KVPOOL_DTYPE_I32: return 4;
    case KVPOOL_DTYPE_F16:
    case KVPOOL_DTYPE_BF16: return 2;
    case KVPOOL_DTYPE_I64: return 8;
    default: return 1;
  }
}

// Bytes of row `row` of a (CPU) buffer, `len` bytes from its start.
inline std::vector<uint8_t> row_bytes(const kvpool_buffer& b, int64_t row, size_t len) {
  const uint8_t* p = bytes_of(b) + static_cast<size_t>(row * row_stride(b)) * elem_size(b.dtype);
  return std::vector<uint8_t>(p, p + len);
}

// Every distinct KV buffer (not views) of every layer in [0, num_layers).
inline std::vector<kvpool_buffer> all_buffers(const kvpool* p, int num_layers) {
  std::vector<kvpool_buffer> out;
  for (int layer = 0; layer < num_layers; ++layer) {
    for (int32_t kind : {KVPOOL_BUFFER_K, KVPOOL_BUFFER_V, KVPOOL_BUFFER_K_SCALE, KVPOOL_BUFFER_V_SCALE,
                         KVPOOL_BUFFER_INDEXER, KVPOOL_BUFFER_LABEL}) {
      kvpool_buffer b = KVPOOL_BUFFER_INIT;
      if (kvpool_get_buffer(p, kind, layer, &b) != KVPOOL_OK) continue;
      bool seen = false;
      for (const kvpool_buffer& o : out) seen = seen || o.data == b.data;
      if (!seen) out.push_back(b);
    }
  }
  return out;
}

// All bytes of all KV buffers, concatenated.
inline std::vector<uint8_t> snapshot(const kvpool* p, int num_layers) {
  std::vector<uint8_t> all;
  for (const kvpool_buffer& b : all_buffers(p, num_layers)) all.insert(all.end(), bytes_of(b), bytes_of(b) + b.bytes);
  return all;
}

// Fills every KV buffer with a non-zero pattern, so that a stray write shows.
inline void poison(kvpool* p, int num_layers) {
  uint32_t x = 0x9e3779b9u;
  for (const kvpool_buffer& b : all_buffers(p, num_layers)) {
    for (uint64_t i = 0; i < b.bytes; ++i) {
      x = x * 1664525u + 1013904223u;
      bytes_of(b)[i] = static_cast<uint8_t>(x >> 24);
    }
  }
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 / f16 encodings of values that are exact in them (test inputs only).
inline uint16_t exact_bf16(float f) { return static_cast<uint16_t>(f32_bits(f) >> 16); }

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Values that every stored dtype holds exactly, fp4 included: in each block of
// 16 consecutive values, value 0 is +-6 x 2^e and the others are +-{0, 0.5, 1,
// 1.5, 2, 3, 4, 6} x 2^e, e in [-2, 2] (so the fp4 block scale is exactly 2^e).
inline std::vector<float> exact_values(size_t n, uint32_t seed) {
  static const float kSet[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const size_t block = i / 16;
    const int e = static_cast<int>((block + seed) % 5) - 2;
    const float unit = e >= 0 ? static_cast<float>(1 << e) : 1.0f / static_cast<float>(1 << -e);
    const float mag = (i % 16 == 0 ? 6.0f : kSet[(x >> 24) % 8]) * unit;
    v[i] = ((x >> 16) & 1u) != 0 ? -mag : mag;
  }
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = exact_bf16(v[i]);
  return out;
}

}  // namespace kvbt
