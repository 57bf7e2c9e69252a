// Helpers of the kvseq / radix tests of hybrid_linear and swa pools.
#pragma once

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "pool_state.hpp"
#include "test_util.hpp"

namespace kvtest {

using Tokens = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

// 4 layers, full attention at 3, mamba at 0..2 (conv 4x3 f32, ssm 2x4x4 f32), page_size 1.
// With the mamba radix cache the config allows at most states / 5 request rows (rows 0: that many).
inline std::string hybrid_radix_config(int64_t tokens, int states, int rows = 0, int context = 256,
                                       const char* kind = "radix") {
  if (rows == 0) rows = states / 5 > 0 ? states / 5 : 1;
  return R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
      "conv_dtype": "f32", "ssm_dtype": "f32"}},
      "pool": {"kv_dtype": "f32", "max_total_tokens": )" +
         std::to_string(tokens) + R"(, "max_running_requests": )" + std::to_string(rows) +
         R"(, "mamba_cache_size": )" + std::to_string(states) + R"(, "max_context_len": )" + std::to_string(context) +
         R"(}, "prefix_cache": {"kind": ")" + kind + R"("}})";
}

// 4 layers (pattern "SF": 2 window, 2 full), window `window`; `full` full slots and `swa` window
// slots (the plan splits max_total_tokens * 4 layers: full = total * 4 / (2 * ratio + 2)).
inline std::string swa_radix_config(int64_t full, int64_t swa, int window = 4, int rows = 8, int context = 256,
                                    const char* kind = "radix") {
  return R"({"model": {"num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 8, "sliding_window": )" +
         std::to_string(window) + R"(, "swa_layer_pattern": "SF"}, "pool": {"kv_dtype": "f32", "max_total_tokens": )" +
         std::to_string((full + swa) / 2) + R"(, "swa_full_tokens_ratio": )" + std::to_string(static_cast<double>(swa) / static_cast<double>(full)) +
         R"(, "max_running_requests": )" + std::to_string(rows) + R"(, "max_context_len": )" + std::to_string(context) +
         R"(}, "prefix_cache": {"kind": ")" + kind + R"("}})";
}

inline Tokens range(int32_t from, int32_t n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

inline uint64_t seq_begin(kvpool* pool, const Tokens& tokens, size_t* cached = nullptr) {
  uint64_t seq = 0;
  size_t hit = 0;
  EXPECT_EQ(kvseq_begin(pool, tokens.data(), tokens.size(), nullptr, &seq, &hit), KVPOOL_OK) << kvpool_last_error();
  if (cached != nullptr) *cached = hit;
  return seq;
}

inline kvpool_status seq_extend(kvpool* pool, std::vector<uint64_t> seqs, std::vector<int64_t> chunks, Slots* out = nullptr) {
  Slots slots(static_cast<size_t>(std::accumulate(chunks.begin(), chunks.end(), int64_t{0})), -1);
  const kvpool_status st = kvseq_extend(pool, seqs.data(), seqs.size(), chunks.data(), chunks.size(), slots.data(), slots.size());
  if (out != nullptr) *out = slots;
  return st;
}

inline kvpool_status seq_decode(kvpool* pool, std::vector<uint64_t> seqs, Tokens tokens, Slots* out = nullptr) {
  Slots slots(seqs.size(), -1);
  const kvpool_status st = kvseq_decode(pool, seqs.data(), seqs.size(), tokens.data(), tokens.size(), slots.data(), slots.size());
  if (out != nullptr) *out = slots;
  return st;
}

inline kvseq_info seq_info(kvpool* pool, uint64_t seq) {
  kvseq_info i = KVSEQ_INFO_INIT;
  EXPECT_EQ(kvseq_get_info(pool, seq, &i), KVPOOL_OK) << kvpool_last_error();
  return i;
}

inline Slots seq_slots(kvpool* pool, uint64_t seq) {
  Slots s(4096);
  size_t n = 0;
  EXPECT_EQ(kvseq_get_slots(pool, seq, s.data(), s.size(), &n), KVPOOL_OK);
  s.resize(n);
  return s;
}

struct TreeSizes {
  size_t evictable = 0, protected_len = 0, total = 0, state_evictable = 0, state_protected = 0;
  bool operator==(const TreeSizes& o) const {
    return evictable == o.evictable && protected_len == o.protected_len && total == o.total &&
           state_evictable == o.state_evictable && state_protected == o.state_protected;
  }
};

inline TreeSizes tree_sizes(kvpool* pool) {
  TreeSizes s;
  EXPECT_EQ(radix_sizes(pool, &s.evictable, &s.protected_len, &s.total), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(radix_state_sizes(pool, &s.state_evictable, &s.state_protected), KVPOOL_OK) << kvpool_last_error();
  return s;
}

// The §1.19 invariant and the ownership self-check; returns false (with a failure) if either breaks.
inline bool accounting_holds(kvpool* pool, const std::string& where = "") {
  size_t available = 0, evictable = 0, protected_len = 0, uncached = 0, capacity = 0;
  EXPECT_EQ(kvseq_accounting(pool, &available, &evictable, &protected_len, &uncached, &capacity), KVPOOL_OK);
  const bool sums = available + evictable + protected_len + uncached == capacity;
  EXPECT_TRUE(sums) << where << ": " << available << " + " << evictable << " + " << protected_len << " + " << uncached
                    << " != " << capacity;
  char report[4096];
  const kvpool_status st = kvpool_check(pool, report, sizeof(report));
  EXPECT_EQ(st, KVPOOL_OK) << where << "\n" << report;
  return sums && st == KVPOOL_OK;
}

// Thousands of random begin / extend / decode (retract on OOM) / finish / abort steps with
// many requests; after every step the accounting identity and kvpool_check must hold, and
// a begin, extend or decode that fails must leave the pool's public state as it was.
// `shared` and `own` bound the prompt parts shared by a few families and the request's own.
// `max_chunk` > 0 caps each prefill chunk, so prompts take several extends (and get cached
// while unfinished). Returns how often each operation happened (and "end" = 1 if all steps
// ran); also "extend-cached" (an extend cached a request's earlier chunks) and
// "hit-from-running" (a begin matched a prefix cached by a request still prefilling).
inline std::map<std::string, int> random_workload(kvpool* pool, unsigned seed, int steps, size_t max_live, int shared,
                                                  int own, const std::string& label, int64_t max_chunk = 0) {
  std::mt19937 rng(seed);
  std::vector<uint64_t> live;
  std::map<uint64_t, Tokens> prompts;
  std::map<std::string, int> seen;
  for (int step = 0; step < steps; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 3 && live.size() < max_live) {
      Tokens prompt;
      const int family = static_cast<int>(rng() % 4), n_shared = static_cast<int>(rng() % static_cast<unsigned>(shared));
      for (int i = 0; i < n_shared; ++i) prompt.push_back(family * 1000 + i);
      const int n_own = 1 + static_cast<int>(rng() % static_cast<unsigned>(own));
      for (int i = 0; i < n_own; ++i) prompt.push_back(static_cast<int32_t>(rng() % 3) + 100000);
      uint64_t seq = 0;
      size_t cached = 0;
      const std::string before = pool_state(pool, live);
      const kvpool_status st = kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      if (st != KVPOOL_OK) {
        EXPECT_EQ(first_difference(before, pool_state(pool, live)), "") << "failed begin";
      }
      if (st == KVPOOL_OK && cached > 0) {
        for (uint64_t other : live) {
          const kvseq_info i = seq_info(pool, other);
          const Tokens& p = prompts[other];
          if (i.computed < i.tokens && i.cached >= cached && p.size() >= cached &&
              std::equal(prompt.begin(), prompt.begin() + static_cast<long>(cached), p.begin())) {
            ++seen["hit-from-running"];
            break;
          }
        }
      }
      if (st == KVPOOL_OK) {
        live.push_back(seq);
        prompts[seq] = prompt;
      }
      ++seen[st == KVPOOL_OK ? "begin" : "begin-oom"];
    } else if (op < 6 && !live.empty()) {
      std::vector<uint64_t> batch;
      std::vector<int64_t> chunks;
      std::vector<uint64_t> cached_before;
      for (uint64_t s : live) {
        const kvseq_info i = seq_info(pool, s);
        if (i.computed < i.tokens && rng() % 2 == 0) {
          batch.push_back(s);
          int64_t chunk = 1 + static_cast<int64_t>(rng() % (i.tokens - i.computed));
          if (max_chunk > 0 && chunk > max_chunk) chunk = max_chunk;
          chunks.push_back(chunk);
          cached_before.push_back(i.cached);
        }
      }
      if (batch.empty()) continue;
      const std::string before = pool_state(pool, live);
      const kvpool_status st = seq_extend(pool, batch, chunks);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      if (st != KVPOOL_OK) {
        EXPECT_EQ(first_difference(before, pool_state(pool, live)), "") << "failed extend";
      }
      ++seen[st == KVPOOL_OK ? "extend" : "extend-oom"];
      for (size_t b = 0; b < batch.size(); ++b) {
        const kvseq_info i = seq_info(pool, batch[b]);
        if (st != KVPOOL_OK) {
          EXPECT_EQ(i.cached, cached_before[b]) << "out of memory changed what is cached";
        }
        if (st == KVPOOL_OK && i.cached > cached_before[b]) ++seen["extend-cached"];
      }
    } else if (op < 8 && !live.empty()) {
      std::vector<uint64_t> batch;
      for (uint64_t s : live) {
        const kvseq_info i = seq_info(pool, s);
        if (i.computed == i.tokens && i.row >= 0 && i.tokens < 500) batch.push_back(s);
      }
      if (batch.empty()) continue;
      Tokens toks(batch.size());
      for (auto& t : toks) t = static_cast<int32_t>(rng() % 2);
      const std::string before = pool_state(pool, live);
      const kvpool_status st = seq_decode(pool, batch, toks);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      if (st != KVPOOL_OK) {
        EXPECT_EQ(first_difference(before, pool_state(pool, live)), "") << "failed decode";
      }
      ++seen[st == KVPOOL_OK ? "decode" : "decode-oom"];
      if (st == KVPOOL_ERR_OUT_OF_MEMORY) {  // retract the newest, as a scheduler would
        size_t cached = 0;
        EXPECT_EQ(kvseq_retract(pool, batch.back(), &cached), KVPOOL_OK) << kvpool_last_error();
        ++seen["retract"];
      }
    } else if (!live.empty()) {
      const size_t k = rng() % live.size();
      const kvseq_info i = seq_info(pool, live[k]);
      if (rng() % 4 == 0) {
        EXPECT_EQ(kvseq_abort(pool, live[k]), KVPOOL_OK);
        ++seen["abort"];
      } else {
        EXPECT_EQ(kvseq_finish(pool, live[k], i.computed - (i.computed > 0 && rng() % 3 == 0 ? 1 : 0)), KVPOOL_OK)
            << kvpool_last_error();
        ++seen["finish"];
      }
      prompts.erase(live[k]);
      live.erase(live.begin() + static_cast<long>(k));
    }
    if (!accounting_holds(pool, label + " step " + std::to_string(step)) || ::testing::Test::HasFailure()) return seen;
  }
  for (uint64_t s : live) EXPECT_EQ(kvseq_abort(pool, s), KVPOOL_OK);
  if (accounting_holds(pool, label + " end")) seen["end"] = 1;
  return seen;
}

}  // namespace kvtest
