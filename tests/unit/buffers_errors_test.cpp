// Bad input to every function of buffers.h: the precise status, a message
// naming the function, and no change anywhere (buffers are poisoned first and
// compared byte for byte; output arguments keep their contents).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "buffers_test_util.hpp"

namespace {

using kvbt::create;
using kvbt::Pool;

constexpr int kLayers = 4;

// Runs `call` on a poisoned pool; expects `code` and unchanged buffers.
void expect_rejected(kvpool* pool, kvpool_status code, const std::function<kvpool_status()>& call,
                     const std::string& what, const char* function = nullptr) {
  SCOPED_TRACE(what);
  kvbt::poison(pool, kLayers);
  const std::vector<uint8_t> before = kvbt::snapshot(pool, kLayers);
  EXPECT_EQ(call(), code) << kvpool_last_error();
  if (function != nullptr) {
    EXPECT_EQ(std::string(kvpool_last_error()).rfind(std::string(function) + ": ", 0), 0u) << kvpool_last_error();
  }
  EXPECT_TRUE(kvbt::snapshot(pool, kLayers) == before) << "the buffers changed";
}

kvpool* foreign() {
  static int not_a_pool = 42;
  return reinterpret_cast<kvpool*>(&not_a_pool);
}

// A handle that was live and is destroyed now. Use it at once: a pool created
// later may get the same address.
kvpool* destroyed() {
  const std::string json = kvbt::mha("f32");
  kvpool* p = nullptr;
  EXPECT_EQ(kvpool_create(json.data(), json.size(), &p), KVPOOL_OK);
  kvpool_destroy(p);
  return p;
}

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(BufferErrors, SetKv) {
  Pool pool = create(kvbt::mha("fp8_e4m3"));
  kvpool* p = pool.get();
  const std::vector<int64_t> slots = {1, 2};
  const std::vector<float> k(64, 1.0f), v(64, 1.0f);
  const size_t nb = 256;
  auto set = [&](kvpool* target, int32_t layer, const int64_t* s, size_t n, const void* kp, size_t kb, const void* vp,
                 size_t vb, int32_t dtype, float ks, float vs) {
    return [=] { return kvpool_set_kv(target, layer, s, n, kp, kb, vp, vb, dtype, ks, vs); };
  };
  const int32_t F = KVPOOL_DTYPE_F32;
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  expect_rejected(p, I, set(nullptr, 0, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "NULL pool");
  expect_rejected(p, I, set(foreign(), 0, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "foreign pool");
  expect_rejected(p, I, set(destroyed(), 0, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "destroyed pool");
  expect_rejected(p, I, set(p, 0, nullptr, 2, k.data(), nb, v.data(), nb, F, 1, 1), "NULL slots", "kvpool_set_kv");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nullptr, nb, v.data(), nb, F, 1, 1), "NULL k");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, k.data(), nb, nullptr, nb, F, 1, 1), "NULL v");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, k.data(), nb - 1, v.data(), nb, F, 1, 1), "short k");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, k.data(), nb, v.data(), nb + 4, F, 1, 1), "long v");
  expect_rejected(p, I, set(p, 0, slots.data(), 1, k.data(), nb, v.data(), nb, F, 1, 1), "k for 2 slots, 1 slot");
  const std::vector<int64_t> past = {1, 260}, negative = {-1, 1};
  expect_rejected(p, I, set(p, 0, past.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "slot size + page_size");
  expect_rejected(p, I, set(p, 0, negative.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "negative slot");
  expect_rejected(p, I, set(p, 4, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "layer past the end");
  expect_rejected(p, I, set(p, -1, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1), "negative layer");
  for (int32_t dtype : {int32_t(KVPOOL_DTYPE_U8), int32_t(KVPOOL_DTYPE_I32), int32_t(KVPOOL_DTYPE_I64),
                        int32_t(KVPOOL_DTYPE_FP8_E5M2), int32_t(KVPOOL_DTYPE_FP4_E2M1), 99, -1}) {
    expect_rejected(p, I, set(p, 0, slots.data(), 2, k.data(), nb, v.data(), nb, dtype, 1, 1),
                    "src_dtype " + std::to_string(dtype));
  }
  for (float bad : {0.0f, -1.0f, kNan, kInf}) {
    expect_rejected(p, I, set(p, 0, slots.data(), 2, k.data(), nb, v.data(), nb, F, bad, 1), "k_scale");
    expect_rejected(p, I, set(p, 0, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, bad), "v_scale");
  }
  // Accepted: the same call with valid arguments, so the rejections above were about the argument.
  EXPECT_EQ(set(p, 0, slots.data(), 2, k.data(), nb, v.data(), nb, F, 1, 1)(), KVPOOL_OK) << kvpool_last_error();

  Pool fp4 = create(kvbt::mha("fp4_e2m1"));
  std::vector<uint8_t> packed(32);
  expect_rejected(fp4.get(), I, set(fp4.get(), 0, slots.data(), 2, packed.data(), 32, packed.data(), 32,
                                    KVPOOL_DTYPE_FP4_E2M1, 1, 1),
                  "fp4 as stored");

  Pool mla = create(kvbt::mla("f32"));
  const std::vector<float> row(96, 1.0f);
  expect_rejected(mla.get(), I, set(mla.get(), 0, slots.data(), 2, row.data(), 384, row.data(), 384, F, 1, 1),
                  "mla with v");
  expect_rejected(mla.get(), I, set(mla.get(), 0, slots.data(), 2, row.data(), 384, nullptr, 4, F, 1, 1),
                  "mla with v_bytes");
  expect_rejected(mla.get(), I, set(mla.get(), 0, slots.data(), 2, row.data(), 380, nullptr, 0, F, 1, 1),
                  "mla short row");

  Pool nsa = create(kvbt::nsa("fp8_e4m3"));
  const std::vector<float> nrow(2 * 272, 1.0f);
  expect_rejected(nsa.get(), KVPOOL_ERR_UNSUPPORTED,
                  set(nsa.get(), 0, slots.data(), 2, nrow.data(), nrow.size() * 4, nullptr, 0, F, 1, 1),
                  "nsa packed rows");
}

TEST(BufferErrors, SetMlaKv) {
  Pool pool = create(kvbt::mla("bf16"));
  kvpool* p = pool.get();
  const std::vector<int64_t> slots = {1, 2};
  const std::vector<float> nope(64, 1.0f), rope(32, 1.0f);
  const int32_t F = KVPOOL_DTYPE_F32;
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  auto set = [&](kvpool* target, int32_t layer, const int64_t* s, size_t n, const void* np, size_t nb, const void* rp,
                 size_t rb, int32_t dtype) {
    return [=] { return kvpool_set_mla_kv(target, layer, s, n, np, nb, rp, rb, dtype); };
  };
  expect_rejected(p, I, set(nullptr, 0, slots.data(), 2, nope.data(), 256, rope.data(), 128, F), "NULL pool");
  expect_rejected(p, I, set(foreign(), 0, slots.data(), 2, nope.data(), 256, rope.data(), 128, F), "foreign");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nullptr, 256, rope.data(), 128, F), "NULL nope",
                  "kvpool_set_mla_kv");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nope.data(), 256, nullptr, 128, F), "NULL rope");
  expect_rejected(p, I, set(p, 0, nullptr, 2, nope.data(), 256, rope.data(), 128, F), "NULL slots");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nope.data(), 252, rope.data(), 128, F), "short nope");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nope.data(), 256, rope.data(), 132, F), "long rope");
  const std::vector<int64_t> past = {1, 260};
  expect_rejected(p, I, set(p, 0, past.data(), 2, nope.data(), 256, rope.data(), 128, F), "slot out of range");
  expect_rejected(p, I, set(p, 2, slots.data(), 2, nope.data(), 256, rope.data(), 128, F), "layer");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nope.data(), 64, rope.data(), 32, KVPOOL_DTYPE_FP8_E4M3),
                  "fp8 into bf16");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nope.data(), 256, rope.data(), 128, KVPOOL_DTYPE_I32), "i32");
  EXPECT_EQ(set(p, 0, slots.data(), 2, nope.data(), 256, rope.data(), 128, F)(), KVPOOL_OK);

  Pool nsa = create(kvbt::nsa("fp8_e4m3"));
  std::vector<uint8_t> raw(2 * 272);
  expect_rejected(nsa.get(), I, set(nsa.get(), 0, slots.data(), 2, raw.data(), 512, raw.data(), 32,
                                    KVPOOL_DTYPE_FP8_E4M3),
                  "packed rows need float input");
  Pool mha = create(kvbt::mha("f32"));
  expect_rejected(mha.get(), KVPOOL_ERR_UNSUPPORTED,
                  set(mha.get(), 0, slots.data(), 2, nope.data(), 256, rope.data(), 128, F), "mha");
}

TEST(BufferErrors, SetLabel) {
  const std::string json = kvbt::config(
      R"("num_layers": 2, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16, "heavy_channels": 4)",
      R"("kv_dtype": "f16", "page_size": 1, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)");
  Pool pool = create(json);
  kvpool* p = pool.get();
  const std::vector<int64_t> slots = {1, 2};
  const std::vector<uint16_t> labels(16, 0x3c00);
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  auto set = [&](kvpool* target, int32_t layer, const int64_t* s, size_t n, const void* l, size_t lb) {
    return [=] { return kvpool_set_label(target, layer, s, n, l, lb); };
  };
  expect_rejected(p, I, set(nullptr, 0, slots.data(), 2, labels.data(), 32), "NULL pool");
  expect_rejected(p, I, set(foreign(), 0, slots.data(), 2, labels.data(), 32), "foreign");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nullptr, 32), "NULL labels", "kvpool_set_label");
  expect_rejected(p, I, set(p, 0, nullptr, 2, labels.data(), 32), "NULL slots");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, labels.data(), 30), "short labels");
  const std::vector<int64_t> past = {1, 257};
  expect_rejected(p, I, set(p, 0, past.data(), 2, labels.data(), 32), "slot size + 1");
  expect_rejected(p, I, set(p, 2, slots.data(), 2, labels.data(), 32), "layer");
  EXPECT_EQ(set(p, 1, slots.data(), 2, labels.data(), 32)(), KVPOOL_OK);
  Pool mha = create(kvbt::mha("f16"));
  expect_rejected(mha.get(), KVPOOL_ERR_UNSUPPORTED, set(mha.get(), 0, slots.data(), 2, labels.data(), 32), "mha");
}

TEST(BufferErrors, SetIndexer) {
  Pool pool = create(kvbt::nsa("bf16"));
  kvpool* p = pool.get();
  const std::vector<int64_t> slots = {1, 2};
  const std::vector<uint8_t> keys(256, 7);
  const std::vector<float> scales = {1.0f, 2.0f};
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  auto set = [&](kvpool* target, int32_t layer, const int64_t* s, size_t n, const void* k, size_t kb, const float* sc,
                 size_t sl) { return [=] { return kvpool_set_indexer(target, layer, s, n, k, kb, sc, sl); }; };
  expect_rejected(p, I, set(nullptr, 0, slots.data(), 2, keys.data(), 256, scales.data(), 2), "NULL pool");
  expect_rejected(p, I, set(foreign(), 0, slots.data(), 2, keys.data(), 256, scales.data(), 2), "foreign");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, nullptr, 256, scales.data(), 2), "NULL keys", "kvpool_set_indexer");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, keys.data(), 256, nullptr, 2), "NULL scales");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, keys.data(), 255, scales.data(), 2), "short keys");
  expect_rejected(p, I, set(p, 0, slots.data(), 2, keys.data(), 256, scales.data(), 1), "one scale");
  const std::vector<int64_t> past = {1, 320};
  expect_rejected(p, I, set(p, 0, past.data(), 2, keys.data(), 256, scales.data(), 2), "slot out of range");
  expect_rejected(p, I, set(p, 2, slots.data(), 2, keys.data(), 256, scales.data(), 2), "layer");
  EXPECT_EQ(set(p, 0, slots.data(), 2, keys.data(), 256, scales.data(), 2)(), KVPOOL_OK);
}

TEST(BufferErrors, GetKvWritesNothing) {
  Pool pool = create(kvbt::mha("f16"));
  kvpool* p = pool.get();
  const std::vector<int64_t> slots = {1, 2};
  std::vector<uint8_t> k(256, 0xee), v(256, 0xee);
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  auto get = [&](const kvpool* target, int32_t layer, const int64_t* s, size_t n, size_t kb, size_t vb, int32_t dtype,
                 bool null_v = false) {
    return [=, &k, &v] {
      return kvpool_get_kv(target, layer, s, n, k.data(), kb, null_v ? nullptr : v.data(), vb, dtype);
    };
  };
  const int32_t F = KVPOOL_DTYPE_F32;
  auto check = [&](kvpool_status code, const std::function<kvpool_status()>& call, const std::string& what,
                   const char* fn = nullptr) {
    expect_rejected(p, code, call, what, fn);
    EXPECT_EQ(k, std::vector<uint8_t>(256, 0xee)) << what;
    EXPECT_EQ(v, std::vector<uint8_t>(256, 0xee)) << what;
  };
  check(I, get(nullptr, 0, slots.data(), 2, 256, 256, F), "NULL pool");
  check(I, get(foreign(), 0, slots.data(), 2, 256, 256, F), "foreign");
  check(I, get(p, 0, nullptr, 2, 256, 256, F), "NULL slots", "kvpool_get_kv");
  check(I, get(p, 0, slots.data(), 2, 256, 256, F, true), "NULL v");
  check(I, get(p, 0, slots.data(), 2, 252, 256, F), "short k");
  check(I, get(p, 0, slots.data(), 2, 256, 128, F), "short v");
  const std::vector<int64_t> past = {1, 260};
  check(I, get(p, 0, past.data(), 2, 256, 256, F), "slot out of range");
  check(I, get(p, 4, slots.data(), 2, 256, 256, F), "layer");
  for (int32_t dtype : {int32_t(KVPOOL_DTYPE_U8), int32_t(KVPOOL_DTYPE_FP8_E4M3), int32_t(KVPOOL_DTYPE_I64), 42}) {
    check(I, get(p, 0, slots.data(), 2, 128, 128, dtype), "dst_dtype " + std::to_string(dtype));
  }
  EXPECT_EQ(get(p, 0, slots.data(), 2, 256, 256, F)(), KVPOOL_OK);

  Pool mla = create(kvbt::mla("f32"));
  std::vector<float> row(96);
  std::vector<float> extra(96);
  expect_rejected(mla.get(), I,
                  [&] {
                    return kvpool_get_kv(mla.get(), 0, slots.data(), 2, row.data(), 384, extra.data(), 384,
                                         KVPOOL_DTYPE_F32);
                  },
                  "mla with v");
}

TEST(BufferErrors, MoveKv) {
  Pool pool = create(kvbt::mha("bf16"));
  kvpool* p = pool.get();
  const std::vector<int64_t> dst = {1, 2}, src = {3, 4};
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  auto move = [&](kvpool* target, const int64_t* d, size_t dl, const int64_t* s, size_t sl) {
    return [=] { return kvpool_move_kv(target, d, dl, s, sl); };
  };
  expect_rejected(p, I, move(nullptr, dst.data(), 2, src.data(), 2), "NULL pool");
  expect_rejected(p, I, move(foreign(), dst.data(), 2, src.data(), 2), "foreign");
  expect_rejected(p, I, move(p, dst.data(), 2, src.data(), 1), "lengths differ", "kvpool_move_kv");
  expect_rejected(p, I, move(p, nullptr, 2, src.data(), 2), "NULL dst");
  expect_rejected(p, I, move(p, dst.data(), 2, nullptr, 2), "NULL src");
  const std::vector<int64_t> past = {3, 260}, negative = {1, -2};
  expect_rejected(p, I, move(p, dst.data(), 2, past.data(), 2), "src out of range");
  expect_rejected(p, I, move(p, negative.data(), 2, src.data(), 2), "dst out of range");
  EXPECT_EQ(move(p, dst.data(), 2, src.data(), 2)(), KVPOOL_OK);

  // double_sparse with page_size 4: labels have size + 1 rows, so moves stay below that.
  Pool ds = create(kvbt::config(
      R"("num_layers": 2, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16, "heavy_channels": 4)",
      R"("kv_dtype": "f16", "page_size": 4, "max_total_tokens": 256, "max_running_requests": 4, "max_context_len": 64)"));
  const std::vector<int64_t> high = {257};
  expect_rejected(ds.get(), I, move(ds.get(), high.data(), 1, src.data(), 1), "label rows");
}

TEST(BufferErrors, HostCopies) {
  Pool pool = create(kvbt::mha("f32"));
  kvpool* p = pool.get();
  size_t bytes = 0;
  ASSERT_EQ(kvpool_host_copy_bytes(p, 2, &bytes), KVPOOL_OK);
  ASSERT_EQ(bytes, 2u * 4 * 2 * 128);
  EXPECT_EQ(kvpool_host_copy_bytes(nullptr, 2, &bytes), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_host_copy_bytes(foreign(), 2, &bytes), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_host_copy_bytes(p, 2, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  size_t untouched = 77;
  EXPECT_EQ(kvpool_host_copy_bytes(p, SIZE_MAX / 2, &untouched), KVPOOL_ERR_INVALID_ARGUMENT) << "overflow";
  EXPECT_EQ(untouched, 77u);

  const std::vector<int64_t> slots = {1, 2};
  std::vector<uint8_t> host(bytes, 0xee);
  const auto I = KVPOOL_ERR_INVALID_ARGUMENT;
  auto to_host = [&](const kvpool* target, const int64_t* s, size_t n, size_t hb, bool null_host = false) {
    return [=, &host] { return kvpool_copy_to_host(target, s, n, null_host ? nullptr : host.data(), hb); };
  };
  auto check = [&](const std::function<kvpool_status()>& call, const std::string& what, const char* fn = nullptr) {
    expect_rejected(p, I, call, what, fn);
    EXPECT_EQ(host, std::vector<uint8_t>(bytes, 0xee)) << what;
  };
  check(to_host(nullptr, slots.data(), 2, bytes), "NULL pool");
  check(to_host(foreign(), slots.data(), 2, bytes), "foreign");
  check(to_host(p, slots.data(), 2, bytes - 1), "short host", "kvpool_copy_to_host");
  check(to_host(p, slots.data(), 2, bytes, true), "NULL host");
  check(to_host(p, nullptr, 2, bytes), "NULL slots");
  const std::vector<int64_t> past = {1, 260};
  check(to_host(p, past.data(), 2, bytes), "slot out of range");

  auto load = [&](kvpool* target, const int64_t* s, size_t n, size_t hb, bool null_host = false) {
    return [=, &host] { return kvpool_load_from_host(target, s, n, null_host ? nullptr : host.data(), hb); };
  };
  expect_rejected(p, I, load(nullptr, slots.data(), 2, bytes), "load NULL pool");
  expect_rejected(p, I, load(foreign(), slots.data(), 2, bytes), "load foreign");
  expect_rejected(p, I, load(p, slots.data(), 2, bytes + 1), "load long host", "kvpool_load_from_host");
  expect_rejected(p, I, load(p, slots.data(), 2, bytes, true), "load NULL host");
  expect_rejected(p, I, load(p, nullptr, 2, bytes), "load NULL slots");
  expect_rejected(p, I, load(p, past.data(), 2, bytes), "load slot out of range");
  EXPECT_EQ(load(p, slots.data(), 2, bytes)(), KVPOOL_OK);
}

TEST(BufferErrors, GetBuffer) {
  Pool pool = create(kvbt::mha("f32"));
  kvpool_buffer b = KVPOOL_BUFFER_INIT;
  EXPECT_EQ(kvpool_get_buffer(nullptr, KVPOOL_BUFFER_K, 0, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_buffer(foreign(), KVPOOL_BUFFER_K, 0, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_buffer(destroyed(), KVPOOL_BUFFER_K, 0, &b), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_K, 0, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(kvpool_last_error()).rfind("kvpool_get_buffer: ", 0), 0u) << kvpool_last_error();
  kvpool_buffer small = KVPOOL_BUFFER_INIT;
  small.struct_size = sizeof(kvpool_buffer) - 8;
  small.ndim = 77;
  EXPECT_EQ(kvpool_get_buffer(pool.get(), KVPOOL_BUFFER_K, 0, &small), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(small.ndim, 77) << "nothing written";
  EXPECT_EQ(small.data, nullptr);
}

}  // namespace
