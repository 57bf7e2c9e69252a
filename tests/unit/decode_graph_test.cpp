// The graph decode calls (device.h) on CPU pools: kvalloc_decode_graph_async runs
// kvalloc_decode at once, kvalloc_decode_watermark is exact (the watermark's steps
// fit and one more does not), kvalloc_decode_graph_advance only checks its
// arguments, and bad input is refused. The CUDA behaviour (capture once, replay,
// fault past the watermark) is tested in tests/gpu/gpu_graph_test.cu.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kvpool/device.h"
#include "test_util.hpp"

namespace {

using kvtest::Pool;
using Slots = std::vector<int64_t>;

// Gives each request a first page: lengths `seq` (>= 1) then end at a slot of its own.
Slots own_last_slots(kvpool* pool, const Slots& seq) {
  Slots pre(seq.size(), 0), full(seq), last(seq.size(), -1);
  for (auto& s : full) s -= 1;  // tokens before the decode
  size_t total = 0;
  for (int64_t s : full) total += static_cast<size_t>(s);
  Slots out(total);
  EXPECT_EQ(kvalloc_extend(pool, pre.data(), pre.size(), full.data(), full.size(), last.data(), last.size(), out.data(),
                           out.size()),
            KVPOOL_OK)
      << kvpool_last_error();
  Slots lasts;
  size_t o = 0;
  for (int64_t s : full) {
    o += static_cast<size_t>(s);
    lasts.push_back(s == 0 ? -1 : out[o - 1]);
  }
  return lasts;
}

TEST(DecodeGraphOnCpu, StepsMatchDecodeAndTheWatermarkIsExact) {
  for (int page : {1, 16}) {
    Pool a(kvtest::mha_config(page, 1024)), b(kvtest::mha_config(page, 1024));
    std::mt19937_64 rng(static_cast<uint64_t>(page));
    Slots seq;
    for (int i = 0; i < 6; ++i) seq.push_back(static_cast<int64_t>(1 + rng() % 40));
    Slots last_a = own_last_slots(a, seq), last_b = own_last_slots(b, seq);
    ASSERT_EQ(last_a, last_b);
    size_t steps = 0;
    ASSERT_EQ(kvalloc_decode_watermark(a, seq.data(), seq.size(), &steps), KVPOOL_OK) << kvpool_last_error();
    ASSERT_GT(steps, 0u);
    const Slots seq0 = seq;
    for (size_t k = 0; k < steps; ++k) {
      Slots out_a(seq.size(), -7), out_b(seq.size(), -7);
      ASSERT_EQ(kvalloc_decode_graph_async(a, seq.size(), seq.data(), last_a.data(), out_a.data(), nullptr), KVPOOL_OK)
          << "page " << page << " step " << k << ": " << kvpool_last_error();
      ASSERT_EQ(kvalloc_decode(b, seq.data(), seq.size(), last_b.data(), last_b.size(), out_b.data(), out_b.size()),
                KVPOOL_OK);
      ASSERT_EQ(out_a, out_b) << "step " << k;
      last_a = out_a;
      last_b = out_b;
      for (auto& s : seq) ++s;
    }
    EXPECT_EQ(kvalloc_decode_graph_advance(a, seq0.data(), seq0.size(), steps), KVPOOL_OK);
    // The step after the watermark does not fit.
    Slots out(seq.size(), -7);
    EXPECT_EQ(kvalloc_decode_graph_async(a, seq.size(), seq.data(), last_a.data(), out.data(), nullptr),
              KVPOOL_ERR_OUT_OF_MEMORY)
        << "page " << page;
    size_t none = 7;
    ASSERT_EQ(kvalloc_decode_watermark(a, seq.data(), seq.size(), &none), KVPOOL_OK);
    EXPECT_EQ(none, 0u);
    kvtest::expect_consistent(a);
  }
}

TEST(DecodeGraphOnCpu, BadInputIsRefused) {
  Pool pool(kvtest::mha_config(16, 256));
  const Slots zero{0}, one{1};
  size_t steps = 0;
  EXPECT_EQ(kvalloc_decode_watermark(pool, one.data(), 0, &steps), KVPOOL_ERR_INVALID_ARGUMENT);  // empty batch
  EXPECT_EQ(kvalloc_decode_watermark(pool, zero.data(), 1, &steps), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_decode_watermark(pool, one.data(), 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_decode_watermark(nullptr, one.data(), 1, &steps), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_decode_graph_advance(pool, zero.data(), 1, 3), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_decode_graph_advance(pool, nullptr, 1, 3), KVPOOL_ERR_INVALID_ARGUMENT);
  Slots last{-1}, out{-7};
  EXPECT_EQ(kvalloc_decode_graph_async(pool, 1, nullptr, last.data(), out.data(), nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvalloc_decode_graph_async(pool, 1, zero.data(), last.data(), out.data(), nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out[0], -7);
  kvtest::expect_consistent(pool);
  Pool swa(kvtest::swa_config(64, 0.5));
  EXPECT_EQ(kvalloc_decode_watermark(swa, one.data(), 1, &steps), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvalloc_decode_graph_async(swa, 1, one.data(), last.data(), out.data(), nullptr), KVPOOL_ERR_UNSUPPORTED);
}

}  // namespace
