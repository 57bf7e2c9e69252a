// Failure injection into the buffer calls on CPU pools: kvpool_set_kv /
// kvpool_get_kv (raw and converting), kvpool_set_mla_kv, kvpool_move_kv and the
// host copies (kvpool_host_copy_bytes / copy_to_host / load_from_host). The
// picture adds every buffer's bytes (read through kvpool_get_buffer), so a
// failed write must leave the KV data itself unchanged too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fault_driver.hpp"
#include "kvpool/buffers.h"

namespace {

using kvfault::Out;
using kvfault::Twin;

// A hash of every buffer of every held layer (K, V, scales), CPU pools only.
std::string buffer_bytes(kvpool* p, int layers) {
  uint64_t h = 1469598103934665603ull;
  for (int layer = 0; layer < layers; ++layer) {
    for (int32_t kind : {KVPOOL_BUFFER_K, KVPOOL_BUFFER_V, KVPOOL_BUFFER_K_SCALE, KVPOOL_BUFFER_V_SCALE}) {
      kvpool_buffer b = KVPOOL_BUFFER_INIT;
      if (kvpool_get_buffer(p, kind, layer, &b) != KVPOOL_OK || b.data == nullptr) continue;
      const auto* d = static_cast<const unsigned char*>(b.data);
      for (uint64_t i = 0; i < b.bytes; ++i) h = (h ^ d[i]) * 1099511628211ull;
    }
  }
  return "buffers: " + std::to_string(h) + "\n";
}

// `n` values of `dtype` (f32 / f16 / bf16 from small floats; other dtypes as random bytes).
std::vector<unsigned char> values(std::mt19937& rng, size_t n, int32_t dtype) {
  std::vector<unsigned char> out;
  for (size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(static_cast<int>(rng() % 64) - 32) / 8.0f;
    uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    if (dtype == KVPOOL_DTYPE_F32) {
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<unsigned char>(bits >> (8 * b)));
    } else if (dtype == KVPOOL_DTYPE_BF16) {
      out.push_back(static_cast<unsigned char>(bits >> 16));
      out.push_back(static_cast<unsigned char>(bits >> 24));
    } else if (dtype == KVPOOL_DTYPE_F16) {  // small multiples of 1/8 are exact in f16
      const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
      const float a = f < 0 ? -f : f;
      uint16_t half = 0;
      if (a != 0.0f) {
        int e = 0;
        const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
        half = static_cast<uint16_t>(((e - 1 + 15) << 10) | (static_cast<uint16_t>((m * 2.0f - 1.0f) * 1024.0f) & 0x3ff));
      }
      half |= sign;
      out.push_back(static_cast<unsigned char>(half));
      out.push_back(static_cast<unsigned char>(half >> 8));
    } else {
      out.push_back(static_cast<unsigned char>(rng() % 0x7e));  // fp8 bytes, never NaN
    }
  }
  return out;
}

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32: return 4;
    case KVPOOL_DTYPE_F16:
    case KVPOOL_DTYPE_BF16: return 2;
    default: return 1;
  }
}

struct Shape {
  int layers;        // layers 0..layers-1
  size_t elements;   // values per row
  bool mla;          // one row (k only)
  size_t lora;       // mla: nope values (the rest is rope)
  int32_t stored;    // the pool's kv dtype as a kvpool_dtype
  int64_t slots;     // valid slots are [0, slots)
};

// Random writes, reads, moves and host round trips; a few wrong arguments among them.
void buffers_workload(Twin& t, const Shape& s, unsigned seed, int steps) {
  std::mt19937 rng(seed);
  t.extra = [&s](kvpool* p) { return buffer_bytes(p, s.layers); };
  const int32_t wide[] = {KVPOOL_DTYPE_F32, KVPOOL_DTYPE_F16, KVPOOL_DTYPE_BF16};
  auto some_slots = [&](size_t n) {
    std::vector<int64_t> slots;
    for (size_t i = 0; i < n; ++i) slots.push_back(static_cast<int64_t>(rng() % static_cast<unsigned>(s.slots)));
    return slots;
  };
  for (int step = 0; step < steps && t.ok(); ++step) {
    const int op = static_cast<int>(rng() % 10);
    const int32_t layer = static_cast<int32_t>(rng() % static_cast<unsigned>(s.layers));
    const size_t n = 1 + rng() % 6;
    std::vector<int64_t> slots = some_slots(n);
    if (rng() % 12 == 0) slots.back() = s.slots + 1000;  // out of range: refused, nothing written
    if (op < 4) {
      // The pool's own dtype as stored (raw) unless fp4; else a converting write.
      const bool raw = s.stored != KVPOOL_DTYPE_FP4_E2M1 && rng() % 3 == 0;
      const int32_t dt = raw ? s.stored : wide[rng() % 3];
      const std::vector<unsigned char> k = values(rng, n * s.elements, dt);
      const std::vector<unsigned char> v = s.mla ? std::vector<unsigned char>{} : values(rng, n * s.elements, dt);
      const float scale = rng() % 4 == 0 ? 2.0f : 1.0f;
      t.call("kvpool_set_kv", 0, [&](kvpool* p, Out&) {
        return kvpool_set_kv(p, layer, slots.data(), n, k.data(), k.size(), s.mla ? nullptr : v.data(), v.size(), dt,
                             scale, scale);
      });
    } else if (op < 5 && s.mla) {
      const int32_t dt = wide[rng() % 3];
      const std::vector<unsigned char> nope = values(rng, n * s.lora, dt), rope = values(rng, n * (s.elements - s.lora), dt);
      t.call("kvpool_set_mla_kv", 0, [&](kvpool* p, Out&) {
        return kvpool_set_mla_kv(p, layer, slots.data(), n, nope.data(), nope.size(), rope.data(), rope.size(), dt);
      });
    } else if (op < 7) {
      const int32_t dt = wide[rng() % 3];
      const size_t bytes = n * s.elements * dtype_size(dt);
      std::vector<unsigned char> k(bytes), v(s.mla ? 0 : bytes);  // allocated before arming
      t.call("kvpool_get_kv", 2 * bytes / 8 + 2, [&](kvpool* p, Out& o) {  // the values land in the outputs
        const kvpool_status r =
            kvpool_get_kv(p, layer, slots.data(), n, k.data(), k.size(), s.mla ? nullptr : v.data(), v.size(), dt);
        if (r == KVPOOL_OK) {
          std::memcpy(o.data(), k.data(), bytes / 8 * 8);
          if (!s.mla) std::memcpy(o.data() + bytes / 8, v.data(), bytes / 8 * 8);
        }
        return r;
      });
    } else if (op < 8) {
      const std::vector<int64_t> src = some_slots(n);
      t.call("kvpool_move_kv", 0, [&](kvpool* p, Out&) { return kvpool_move_kv(p, slots.data(), n, src.data(), n); });
    } else {  // retract to the host and load back at other slots
      Out size;
      ASSERT_EQ(t.call(
                    "kvpool_host_copy_bytes", 1,
                    [&](kvpool* p, Out& o) {
                      size_t b = 0;
                      const kvpool_status r = kvpool_host_copy_bytes(p, n, &b);
                      o[0] = static_cast<int64_t>(b);
                      return r;
                    },
                    &size),
                KVPOOL_OK)
          << kvpool_last_error();
      const size_t bytes = static_cast<size_t>(size[0]);
      std::vector<unsigned char> host(bytes), mine(bytes);  // the reference's copy is loaded back
      t.call("kvpool_copy_to_host", bytes / 8 + 1, [&](kvpool* p, Out& o) {
        std::vector<unsigned char>& into = p == t.b() ? host : mine;
        const kvpool_status r = kvpool_copy_to_host(p, slots.data(), n, into.data(), bytes);
        if (r == KVPOOL_OK) std::memcpy(o.data(), into.data(), bytes / 8 * 8);
        return r;
      });
      const std::vector<int64_t> dst = some_slots(n);
      t.call("kvpool_load_from_host", 0,
             [&](kvpool* p, Out&) { return kvpool_load_from_host(p, dst.data(), n, host.data(), bytes); });
    }
  }
  t.extra = nullptr;
}

const char* const kModel = R"("num_layers": 2, "kv_heads": 2, "head_dim": 8)";
const char* const kMlaModel = R"("num_layers": 2, "attention": "mla", "kv_lora_rank": 16, "qk_rope_head_dim": 16)";

std::string config(const char* model, const char* dtype) {
  return std::string(R"({"model": {)") + model + R"(}, "pool": {"kv_dtype": ")" + dtype +
         R"(", "page_size": 4, "max_total_tokens": 32, "max_running_requests": 4, "max_context_len": 32}})";
}

TEST(FaultBuffers, MhaF16) {
  Twin t(config(kModel, "f16"), "buffer calls, mha f16");
  buffers_workload(t, Shape{2, 16, false, 0, KVPOOL_DTYPE_F16, 36}, 21, 200);
  t.sum.print();
}

TEST(FaultBuffers, MhaFp4) {  // block scales in their own buffers
  Twin t(config(kModel, "fp4_e2m1"), "buffer calls, mha fp4_e2m1");
  buffers_workload(t, Shape{2, 16, false, 0, KVPOOL_DTYPE_FP4_E2M1, 36}, 22, 200);
  t.sum.print();
}

TEST(FaultBuffers, MlaFp8) {
  Twin t(config(kMlaModel, "fp8_e4m3"), "buffer calls, mla fp8_e4m3");
  buffers_workload(t, Shape{2, 32, true, 16, KVPOOL_DTYPE_FP8_E4M3, 36}, 23, 200);
  t.sum.print();
}

}  // namespace
