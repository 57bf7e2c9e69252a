// KV contents the host-tier tests write and check: the pools are mha f32, 2 layers of
// 2 heads x 8 values. A token's row is derived from a tag, so a row read back names the
// token it was written for; prefix_tags() makes a token's tag depend on its whole
// prefix, as a model's KV does, so a matched prefix holds exactly its own rows.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvpool/kvpool.h"

namespace kvtest {

constexpr int kTierLayers = 2;
constexpr size_t kTierRow = 2 * 8;  // f32 values of one token in one layer (K or V)

// K of the token tagged `tag` in `layer`; its V is the row of tag + 7.
inline std::vector<float> tier_row(int layer, uint64_t tag) {
  std::vector<float> r(kTierRow);
  for (size_t e = 0; e < kTierRow; ++e) r[e] = static_cast<float>((tag * 131 + static_cast<uint64_t>(layer) * 17 + e) % 1000003);
  return r;
}

// Tags of the first n tokens of `t`: an FNV-1a hash of each token's prefix.
inline std::vector<uint64_t> prefix_tags(const std::vector<int32_t>& t, size_t n) {
  std::vector<uint64_t> tags(n);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<uint64_t>(t[i])) * 1099511628211ull;
    tags[i] = h % 100003;
  }
  return tags;
}

inline void write_tier_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  for (int layer = 0; layer < kTierLayers; ++layer) {
    std::vector<float> k, v;
    for (uint64_t t : tags) {
      const std::vector<float> rk = tier_row(layer, t), rv = tier_row(layer, t + 7);
      k.insert(k.end(), rk.begin(), rk.end());
      v.insert(v.end(), rv.begin(), rv.end());
    }
    ASSERT_EQ(kvpool_set_kv(pool, layer, slots.data(), slots.size(), k.data(), k.size() * 4, v.data(), v.size() * 4,
                            KVPOOL_DTYPE_F32, 1.0f, 1.0f),
              KVPOOL_OK)
        << kvpool_last_error();
  }
}

// The rows of `slots` hold what write_tier_kv wrote for `tags`; `who` names the pool in failures.
inline void expect_tier_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags,
                           const std::string& who = "") {
  for (int layer = 0; layer < kTierLayers; ++layer) {
    std::vector<float> k(slots.size() * kTierRow), v(slots.size() * kTierRow);
    ASSERT_EQ(kvpool_get_kv(pool, layer, slots.data(), slots.size(), k.data(), k.size() * 4, v.data(), v.size() * 4,
                            KVPOOL_DTYPE_F32),
              KVPOOL_OK)
        << kvpool_last_error();
    for (size_t i = 0; i < slots.size(); ++i) {
      const auto row = [&](const std::vector<float>& all) {
        return std::vector<float>(all.begin() + static_cast<long>(i * kTierRow), all.begin() + static_cast<long>((i + 1) * kTierRow));
      };
      ASSERT_EQ(row(k), tier_row(layer, tags[i])) << who << " K of token " << i << " (slot " << slots[i] << ", layer " << layer << ")";
      ASSERT_EQ(row(v), tier_row(layer, tags[i] + 7)) << who << " V of token " << i << " (slot " << slots[i] << ")";
    }
  }
}

}  // namespace kvtest
