// kvseq_extend_async / kvseq_decode_async on CPU pools: the same random workload on
// two pools of each kvseq kind, one through the host-array calls and one through the
// stream-ordered forms (host memory and a NULL stream on a CPU pool), gives the same
// statuses, slots and pool pictures after every step; bad arguments change nothing.
// CUDA pools are compared in tests/gpu/gpu_seq_parity_test.cpp.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "kvpool/device.h"
#include "seq_test_util.hpp"

namespace {

using kvtest::Slots;
using kvtest::Tokens;

struct Kind {
  const char* name;
  std::string json;
};

class SeqAsync : public ::testing::TestWithParam<int> {};

std::vector<Kind> kinds() {
  return {{"mha page 1", kvtest::mha_config(1, 512, "none", 8, 256)},
          {"mha page 4", kvtest::mha_config(4, 512, "none", 8, 256)},
          {"hybrid_linear", kvtest::hybrid_radix_config(512, 40)},
          {"swa", kvtest::swa_radix_config(256, 256)}};
}

TEST_P(SeqAsync, StreamOrderedFormsMatchHostArrayCalls) {
  const Kind kind = kinds()[static_cast<size_t>(GetParam())];
  kvtest::Pool sync(kind.json), async(kind.json);
  std::mt19937_64 rng(static_cast<uint64_t>(GetParam()) + 7);
  auto rand = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const Tokens shared = kvtest::range(1000, 24);
  std::vector<uint64_t> live;
  for (int step = 0; step < 300; ++step) {
    const int64_t op = rand(0, 9);
    if (op < 3 || live.empty()) {
      Tokens t(shared.begin(), shared.begin() + rand(0, 24));
      const Tokens tail = kvtest::range(static_cast<int32_t>(rand(0, 100000)), static_cast<int32_t>(rand(1, 40)));
      t.insert(t.end(), tail.begin(), tail.end());
      uint64_t a = 0, b = 0;
      size_t ca = 0, cb = 0;
      ASSERT_EQ(kvseq_begin(sync, t.data(), t.size(), nullptr, &a, &ca), kvseq_begin(async, t.data(), t.size(), nullptr, &b, &cb));
      ASSERT_EQ(a, b);
      ASSERT_EQ(ca, cb);
      if (a != 0) live.push_back(a);
    } else if (op < 6) {
      std::vector<uint64_t> ids;
      std::vector<int64_t> chunks;
      size_t total = 0;
      for (uint64_t id : live) {
        kvseq_info i = KVSEQ_INFO_INIT;
        ASSERT_EQ(kvseq_get_info(sync, id, &i), KVPOOL_OK);
        if (i.computed == i.tokens || rand(0, 1) == 0) continue;
        ids.push_back(id);
        chunks.push_back(rand(1, static_cast<int64_t>(i.tokens - i.computed)));
        total += static_cast<size_t>(chunks.back());
      }
      if (ids.empty()) continue;
      Slots a(total, -7), b(total, -7);
      const kvpool_status sa = kvseq_extend(sync, ids.data(), ids.size(), chunks.data(), chunks.size(), a.data(), total);
      const kvpool_status sb =
          kvseq_extend_async(async, ids.data(), ids.size(), chunks.data(), chunks.size(), b.data(), total, nullptr);
      ASSERT_EQ(sa, sb) << kind.name << " step " << step << ": " << kvpool_last_error();
      if (sa == KVPOOL_OK) {
        ASSERT_EQ(a, b) << kind.name << " step " << step;
      }
    } else if (op < 8) {
      std::vector<uint64_t> ids;
      for (uint64_t id : live) {
        kvseq_info i = KVSEQ_INFO_INIT;
        ASSERT_EQ(kvseq_get_info(sync, id, &i), KVPOOL_OK);
        if (i.row >= 0 && i.computed == i.tokens && i.tokens < 200) ids.push_back(id);
      }
      if (ids.empty()) continue;
      std::vector<int32_t> tokens(ids.size());
      for (auto& t : tokens) t = static_cast<int32_t>(rand(0, 100000));
      Slots a(ids.size(), -7), b(ids.size(), -7);
      const kvpool_status sa = kvseq_decode(sync, ids.data(), ids.size(), tokens.data(), tokens.size(), a.data(), a.size());
      const kvpool_status sb =
          kvseq_decode_async(async, ids.data(), ids.size(), tokens.data(), tokens.size(), b.data(), b.size(), nullptr);
      ASSERT_EQ(sa, sb) << kind.name << " step " << step << ": " << kvpool_last_error();
      if (sa == KVPOOL_OK) {
        ASSERT_EQ(a, b) << kind.name << " step " << step;
      }
    } else {
      const size_t k = static_cast<size_t>(rand(0, static_cast<int64_t>(live.size()) - 1));
      kvseq_info i = KVSEQ_INFO_INIT;
      ASSERT_EQ(kvseq_get_info(sync, live[k], &i), KVPOOL_OK);
      ASSERT_EQ(kvseq_finish(sync, live[k], i.computed), kvseq_finish(async, live[k], i.computed));
      live.erase(live.begin() + static_cast<long>(k));
    }
    ASSERT_EQ(kvtest::pool_state(sync, live), kvtest::pool_state(async, live)) << kind.name << " step " << step;
    kvtest::expect_consistent(async);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKind, SeqAsync, ::testing::Values(0, 1, 2, 3));

TEST(SeqAsyncArgs, BadArgumentsChangeNothing) {
  kvtest::Pool pool(kvtest::mha_config(4, 256, "none", 8));
  const Tokens t = kvtest::range(1, 10);
  const uint64_t id = kvtest::seq_begin(pool, t);
  const std::vector<uint64_t> ids{id};
  const std::string before = kvtest::pool_state(pool, ids);
  const std::vector<int64_t> chunk{10}, two{5, 5};
  Slots out(10, -7);
  EXPECT_EQ(kvseq_extend_async(pool, ids.data(), 1, chunk.data(), 1, out.data(), 9, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_extend_async(pool, ids.data(), 1, two.data(), 2, out.data(), 10, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_extend_async(pool, ids.data(), 1, chunk.data(), 1, nullptr, 10, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_extend_async(nullptr, ids.data(), 1, chunk.data(), 1, out.data(), 10, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  const std::vector<int32_t> tok{5};
  EXPECT_EQ(kvseq_decode_async(pool, ids.data(), 1, tok.data(), 1, out.data(), 2, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  // Not computed yet: decode is refused.
  EXPECT_EQ(kvseq_decode_async(pool, ids.data(), 1, tok.data(), 1, out.data(), 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, Slots(10, -7));
  EXPECT_EQ(kvtest::pool_state(pool, ids), before);
  kvtest::expect_consistent(pool);
}

}  // namespace
