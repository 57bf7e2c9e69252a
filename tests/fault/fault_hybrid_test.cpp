// Failure injection into the calls of the two-resource prefix trees and their
// allocators, driven directly (not through kvseq): radix_match / insert / lock /
// unlock / evict on hybrid_linear and swa pools, radix_match_mamba /
// radix_insert_mamba / radix_evict_mamba, kvpool_mamba_alloc / free / fork /
// copy, radix_insert_swa / radix_evict_swa, kvalloc_free_swa / translate_swa,
// radix_reset on both trees; and the hybrid request rows (kvreq_alloc_hybrid /
// kvreq_free_hybrid / kvreq_mamba_slots), with and without pool.mamba_extra_buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include "../unit/seq_test_util.hpp"
#include "fault_driver.hpp"

namespace {

using kvfault::Out;
using kvfault::Twin;
using kvtest::Tokens;

// A key of one of four shared families, a random length of it, then own tokens.
Tokens random_key(std::mt19937& rng, int shared, int own) {
  Tokens key;
  const int family = static_cast<int>(rng() % 4), n_shared = static_cast<int>(rng() % static_cast<unsigned>(shared));
  for (int i = 0; i < n_shared; ++i) key.push_back(family * 1000 + i);
  const int n_own = 1 + static_cast<int>(rng() % static_cast<unsigned>(own));
  for (int i = 0; i < n_own; ++i) key.push_back(static_cast<int32_t>(rng() % 3) + 100000);
  return key;
}

kvpool_status alloc_slots(Twin& t, size_t n, Out* slots) {
  return t.call("kvalloc_alloc", n, [&](kvpool* p, Out& o) { return kvalloc_alloc(p, o.data(), o.size()); }, slots);
}

void free_slots(Twin& t, const int64_t* slots, size_t n) {
  if (n == 0) return;
  EXPECT_EQ(t.call("kvalloc_free", 0, [&](kvpool* p, Out&) { return kvalloc_free(p, slots, n); }), KVPOOL_OK);
}

void evict(Twin& t, size_t tokens) {
  t.call("radix_evict", 1, [&](kvpool* p, Out& o) {
    size_t ev = 0;
    const kvpool_status s = radix_evict(p, tokens, &ev);
    o[0] = static_cast<int64_t>(ev);
    return s;
  });
}

// radix_match, then maybe radix_lock on the node it ends at.
void match_and_lock(Twin& t, std::mt19937& rng, const Tokens& key, std::vector<uint64_t>* locked) {
  Out out;
  t.call(
      "radix_match", 2 + key.size(),
      [&](kvpool* p, Out& o) {
        size_t matched = 0;
        uint64_t node = 0;
        const kvpool_status s = radix_match(p, key.data(), key.size(), nullptr, o.data() + 2, key.size(), &matched, &node);
        o[0] = static_cast<int64_t>(matched);
        o[1] = static_cast<int64_t>(node);
        return s;
      },
      &out);
  if (out[0] > 0 && rng() % 2 == 0) {
    const uint64_t node = static_cast<uint64_t>(out[1]);
    if (t.call("radix_lock", 0, [&](kvpool* p, Out&) { return radix_lock(p, node); }) == KVPOOL_OK) locked->push_back(node);
  }
}

void unlock_all(Twin& t, std::vector<uint64_t>* locked) {
  for (uint64_t node : *locked) {
    EXPECT_EQ(t.call("radix_unlock", 0, [&](kvpool* p, Out&) { return radix_unlock(p, node); }), KVPOOL_OK);
  }
  locked->clear();
}

kvpool_status alloc_state(Twin& t, int32_t* state) {
  Out out;
  const kvpool_status st = t.call(
      "kvpool_mamba_alloc", 1,
      [&](kvpool* p, Out& o) {
        int32_t s = -1;
        const kvpool_status r = kvpool_mamba_alloc(p, &s, 1);
        o[0] = s;
        return r;
      },
      &out);
  *state = static_cast<int32_t>(out[0]);
  return st;
}

void free_state(Twin& t, int32_t state) {
  EXPECT_EQ(t.call("kvpool_mamba_free", 0, [&](kvpool* p, Out&) { return kvpool_mamba_free(p, &state, 1); }), KVPOOL_OK);
}

// Allocates slots and a state for a key and caches them with radix_insert_mamba;
// gives back what the tree did not take.
void insert_mamba(Twin& t, const Tokens& key) {
  Out slots;
  if (alloc_slots(t, key.size(), &slots) != KVPOOL_OK) {
    evict(t, key.size());
    return;
  }
  int32_t state = -1;
  if (alloc_state(t, &state) != KVPOOL_OK) {
    free_slots(t, slots.data(), slots.size());
    t.call("radix_evict_mamba", 0, [&](kvpool* p, Out&) {
      size_t ev = 0;
      return radix_evict_mamba(p, 2, &ev);
    });
    return;
  }
  Out out;
  const kvpool_status st = t.call(
      "radix_insert_mamba", 3,
      [&](kvpool* p, Out& o) {
        size_t prefix = 0;
        int32_t exist = -1;
        uint64_t node = 0;
        const kvpool_status s =
            radix_insert_mamba(p, key.data(), key.size(), slots.data(), slots.size(), nullptr, state, &prefix, &exist, &node);
        o[0] = static_cast<int64_t>(prefix);
        o[1] = exist;
        o[2] = static_cast<int64_t>(node);
        return s;
      },
      &out);
  EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error();
  free_slots(t, slots.data(), static_cast<size_t>(out[0]));  // the caller keeps the cached prefix's duplicates
  if (out[1] == 1) free_state(t, state);
}

// radix_match_mamba, copying the state into a fresh slot half of the time.
void match_mamba(Twin& t, std::mt19937& rng, const Tokens& key) {
  int32_t cow = -1;
  if (rng() % 2 == 0 && alloc_state(t, &cow) != KVPOOL_OK) cow = -1;
  t.call("radix_match_mamba", 3 + key.size(), [&](kvpool* p, Out& o) {
    size_t matched = 0;
    uint64_t node = 0;
    int32_t state = -2;
    const kvpool_status s =
        radix_match_mamba(p, key.data(), key.size(), nullptr, cow, o.data() + 3, key.size(), &matched, &node, &state);
    o[0] = static_cast<int64_t>(matched);
    o[1] = static_cast<int64_t>(node);
    o[2] = state;
    return s;
  });
  if (cow >= 0) free_state(t, cow);
}

// kvpool_mamba_fork / copy between two fresh states, both freed again.
void fork_and_copy(Twin& t) {
  int32_t src = -1;
  if (alloc_state(t, &src) != KVPOOL_OK) return;
  Out out;
  const kvpool_status st = t.call(
      "kvpool_mamba_fork", 1,
      [&](kvpool* p, Out& o) {
        int32_t dst = -1;
        const kvpool_status s = kvpool_mamba_fork(p, src, &dst);
        o[0] = dst;
        return s;
      },
      &out);
  if (st == KVPOOL_OK) {
    const int32_t dst = static_cast<int32_t>(out[0]);
    EXPECT_EQ(t.call("kvpool_mamba_copy", 0, [&](kvpool* p, Out&) { return kvpool_mamba_copy(p, dst, src); }), KVPOOL_OK);
    free_state(t, dst);
  }
  free_state(t, src);
}

// radix_reset: refused while a node is locked (changing nothing), else empties the tree.
void reset(Twin& t, const std::vector<uint64_t>& locked) {
  const kvpool_status st = t.call("radix_reset", 0, [&](kvpool* p, Out&) { return radix_reset(p); });
  EXPECT_EQ(st, locked.empty() ? KVPOOL_OK : KVPOOL_ERR_INVALID_ARGUMENT) << kvpool_last_error();
}

TEST(FaultHybrid, MambaRadixCalls) {
  Twin t(kvtest::hybrid_radix_config(96, 12, 2, 512), "radix / mamba calls, hybrid_linear");
  std::mt19937 rng(11);
  std::vector<uint64_t> locked;
  for (int step = 0; step < 300 && t.ok(); ++step) {
    const Tokens key = random_key(rng, 12, 6);
    const int op = static_cast<int>(rng() % 10);
    if (op < 3) {
      insert_mamba(t, key);
    } else if (op < 5) {
      match_mamba(t, rng, key);
    } else if (op < 6) {
      match_and_lock(t, rng, key, &locked);
    } else if (op < 7 && !locked.empty()) {
      unlock_all(t, &locked);
    } else if (op < 8) {
      const size_t states = 1 + rng() % 3;
      t.call("radix_evict_mamba", 1, [&](kvpool* p, Out& o) {
        size_t ev = 0;
        const kvpool_status s = radix_evict_mamba(p, states, &ev);
        o[0] = static_cast<int64_t>(ev);
        return s;
      });
    } else if (op < 9) {
      const size_t tokens = 1 + rng() % 8;
      evict(t, tokens);
    } else {
      fork_and_copy(t);
    }
    if (step == 100 || step == 200) {  // once with the locks held (refused), once without
      if (step == 200) unlock_all(t, &locked);
      reset(t, locked);
    }
  }
  unlock_all(t, &locked);
  reset(t, locked);
  t.sum.print();
}

// Allocates slots for a key, frees the window slots of a leading part as if it
// slid out of a request's window (checked with kvalloc_translate_swa), and
// caches it with radix_insert_swa, which takes all of it.
void insert_swa(Twin& t, std::mt19937& rng, const Tokens& key) {
  Out slots;
  if (alloc_slots(t, key.size(), &slots) != KVPOOL_OK) {
    t.call("radix_evict_swa", 2, [&](kvpool* p, Out& o) {
      size_t ev = 0, swa_ev = 0;
      const kvpool_status s = radix_evict_swa(p, key.size(), key.size(), &ev, &swa_ev);
      o[0] = static_cast<int64_t>(ev);
      o[1] = static_cast<int64_t>(swa_ev);
      return s;
    });
    return;
  }
  const size_t slid = rng() % key.size();
  if (slid > 0) {
    EXPECT_EQ(t.call("kvalloc_free_swa", 0, [&](kvpool* p, Out&) { return kvalloc_free_swa(p, slots.data(), slid); }), KVPOOL_OK);
  }
  t.call("kvalloc_translate_swa", slots.size(), [&](kvpool* p, Out& o) {
    return kvalloc_translate_swa(p, slots.data(), slots.size(), o.data(), o.size());
  });
  EXPECT_EQ(t.call("radix_insert_swa", 2,
                   [&](kvpool* p, Out& o) {
                     size_t prefix = 0;
                     uint64_t node = 0;
                     const kvpool_status s = radix_insert_swa(p, key.data(), key.size(), slots.data(), slots.size(),
                                                              nullptr, 0, slid, &prefix, &node);
                     o[0] = static_cast<int64_t>(prefix);
                     o[1] = static_cast<int64_t>(node);
                     return s;
                   }),
            KVPOOL_OK)
      << kvpool_last_error();
}

// radix_insert on a swa pool: the caller keeps the slots of the cached prefix.
void insert_keep_prefix(Twin& t, const Tokens& key) {
  Out slots;
  if (alloc_slots(t, key.size(), &slots) != KVPOOL_OK) {
    evict(t, key.size());
    return;
  }
  Out out;
  EXPECT_EQ(t.call(
                "radix_insert", 2,
                [&](kvpool* p, Out& o) {
                  size_t prefix = 0;
                  uint64_t node = 0;
                  const kvpool_status s =
                      radix_insert(p, key.data(), key.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node);
                  o[0] = static_cast<int64_t>(prefix);
                  o[1] = static_cast<int64_t>(node);
                  return s;
                },
                &out),
            KVPOOL_OK)
      << kvpool_last_error();
  free_slots(t, slots.data(), static_cast<size_t>(out[0]));
}

TEST(FaultHybrid, SwaRadixCalls) {
  Twin t(kvtest::swa_radix_config(96, 48, 4, 8, 512), "radix / swa calls, swa");
  std::mt19937 rng(12);
  std::vector<uint64_t> locked;
  for (int step = 0; step < 300 && t.ok(); ++step) {
    const Tokens key = random_key(rng, 12, 6);
    const int op = static_cast<int>(rng() % 10);
    if (op < 3) {
      insert_swa(t, rng, key);
    } else if (op < 4) {
      insert_keep_prefix(t, key);
    } else if (op < 6) {
      match_and_lock(t, rng, key, &locked);
    } else if (op < 7 && !locked.empty()) {
      unlock_all(t, &locked);
    } else if (op < 9) {
      const size_t full = rng() % 6, window = rng() % 10;
      t.call("radix_evict_swa", 2, [&](kvpool* p, Out& o) {
        size_t ev = 0, swa_ev = 0;
        const kvpool_status s = radix_evict_swa(p, full, window, &ev, &swa_ev);
        o[0] = static_cast<int64_t>(ev);
        o[1] = static_cast<int64_t>(swa_ev);
        return s;
      });
    } else {
      const size_t tokens = 1 + rng() % 8;
      evict(t, tokens);
    }
    if (step == 100 || step == 200) {  // once with the locks held (refused), once without
      if (step == 200) unlock_all(t, &locked);
      reset(t, locked);
    }
  }
  unlock_all(t, &locked);
  reset(t, locked);
  t.sum.print();
}

// The state slot and ping-pong slots of every live hybrid row, read with kvreq_mamba_slots.
std::string row_states(kvpool* p, const std::vector<int32_t>& rows) {
  std::string out = "hybrid rows:";
  for (int32_t row : rows) {
    int32_t slot = -9, pp[2] = {-9, -9};
    const kvpool_status st = kvreq_mamba_slots(p, row, &slot, pp, 2);
    out += " " + std::to_string(row) + ":" + std::to_string(st) + "/" + std::to_string(slot) + "/" +
           std::to_string(pp[0]) + "/" + std::to_string(pp[1]);
  }
  return out + "\n";
}

// kvreq_alloc_hybrid (fresh or reused states), kvreq_free_hybrid (with or without
// the states, keeping a ping-pong slot or not), kvreq_mamba_slots, and the
// kvpool_mamba_alloc / free of the states the caller holds between requests.
void hybrid_rows_workload(Twin& t, bool ping_pong, unsigned seed, int steps) {
  std::mt19937 rng(seed);
  std::vector<int32_t> rows;
  std::vector<int32_t> held;  // states the caller holds: kept past their row, or allocated directly
  // With ping-pong slots, states kept past their row keep their pair; they are only reused (freeing
  // such a state with kvpool_mamba_free would leave its pair allocated).
  std::vector<int32_t> kept;
  t.extra = [&rows](kvpool* p) { return row_states(p, rows); };
  for (int step = 0; step < steps && t.ok(); ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4) {
      const size_t batch = 1 + rng() % 3;
      std::vector<int32_t> reuse;
      std::vector<int32_t> pool_of = held;
      pool_of.insert(pool_of.end(), kept.begin(), kept.end());
      for (size_t i = 0; i < batch; ++i) {
        if (!pool_of.empty() && rng() % 2 == 0) {
          const size_t k = rng() % pool_of.size();
          reuse.push_back(pool_of[k]);
          pool_of.erase(pool_of.begin() + static_cast<long>(k));
        } else {
          reuse.push_back(-1);
        }
      }
      if (rng() % 16 == 0 && !rows.empty()) {  // a state a row holds: refused
        int32_t slot = -1, pp[2];
        if (kvreq_mamba_slots(t.b(), rows[0], &slot, pp, 2) == KVPOOL_OK) reuse[0] = slot;
      }
      Out out;
      const kvpool_status st = t.call(
          "kvreq_alloc_hybrid", 2 * batch,
          [&](kvpool* p, Out& o) {
            int32_t r[3] = {-1, -1, -1}, sl[3] = {-1, -1, -1};
            const kvpool_status s = kvreq_alloc_hybrid(p, reuse.data(), batch, r, batch, sl, batch);
            for (size_t i = 0; i < batch; ++i) {
              o[i] = r[i];
              o[batch + i] = sl[i];
            }
            return s;
          },
          &out);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY || st == KVPOOL_ERR_INVALID_ARGUMENT)
          << kvpool_last_error();
      if (st == KVPOOL_OK) {
        for (size_t i = 0; i < batch; ++i) {
          rows.push_back(static_cast<int32_t>(out[i]));
          held.erase(std::remove(held.begin(), held.end(), reuse[i]), held.end());
          kept.erase(std::remove(kept.begin(), kept.end(), reuse[i]), kept.end());
        }
      }
    } else if (op < 7 && !rows.empty()) {
      const size_t n = 1 + rng() % std::min<size_t>(2, rows.size());
      std::vector<int32_t> batch(rows.end() - static_cast<long>(n), rows.end());
      const int32_t free_state = rng() % 3 == 0 ? 0 : 1;
      const int32_t keep = ping_pong ? static_cast<int32_t>(rng() % 3) - 1 : -1;
      std::vector<std::array<int32_t, 3>> before;  // state, ping-pong 0, ping-pong 1 of each row
      for (int32_t row : batch) {
        Out s;
        t.call(
            "kvreq_mamba_slots", 3,
            [&](kvpool* p, Out& o) {
              int32_t slot = -1, pp[2] = {-1, -1};
              const kvpool_status r = kvreq_mamba_slots(p, row, &slot, pp, 2);
              o[0] = slot;
              o[1] = pp[0];
              o[2] = pp[1];
              return r;
            },
            &s);
        before.push_back({static_cast<int32_t>(s[0]), static_cast<int32_t>(s[1]), static_cast<int32_t>(s[2])});
      }
      const kvpool_status st = t.call("kvreq_free_hybrid", 0, [&](kvpool* p, Out&) {
        return kvreq_free_hybrid(p, batch.data(), batch.size(), free_state, keep);
      });
      EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error();
      if (st == KVPOOL_OK) {
        rows.resize(rows.size() - n);
        for (const auto& b : before) {
          if (free_state == 0) {
            (ping_pong ? kept : held).push_back(b[0]);  // its ping-pong slots stay with it
          } else if (ping_pong && keep >= 0) {
            held.push_back(b[1 + static_cast<size_t>(keep)]);
          }
        }
      }
    } else if (op < 8 && !rows.empty() && rng() % 4 == 0) {  // kvreq_free on a hybrid row: refused
      const int32_t row = rows.back();
      t.call("kvreq_free", 0, [&](kvpool* p, Out&) { return kvreq_free(p, &row, 1); });
    } else if (op < 9) {
      int32_t state = -1;
      if (alloc_state(t, &state) == KVPOOL_OK) held.push_back(state);
    } else if (!held.empty()) {
      const size_t k = rng() % held.size();
      free_state(t, held[k]);
      held.erase(held.begin() + static_cast<long>(k));
    }
  }
  while (!rows.empty()) {
    const int32_t row = rows.back();
    EXPECT_EQ(t.call("kvreq_free_hybrid", 0, [&](kvpool* p, Out&) { return kvreq_free_hybrid(p, &row, 1, 1, -1); }),
              KVPOOL_OK);
    rows.pop_back();
  }
  t.extra = nullptr;
}

// 4 layers (full attention at 3), 10 request rows, 20 state slots.
std::string hybrid_rows_config(bool extra_buffer) {
  return std::string(R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
      "conv_dtype": "f32", "ssm_dtype": "f32"}},
      "pool": {"kv_dtype": "f32", "max_total_tokens": 64, "max_running_requests": 10, "mamba_cache_size": 20,
               "max_context_len": 32, "mamba_extra_buffer": )") +
         (extra_buffer ? "true" : "false") + R"(}, "prefix_cache": {"kind": "none"}})";
}

TEST(FaultHybrid, HybridRows) {
  Twin t(hybrid_rows_config(false), "kvreq_*_hybrid, hybrid_linear");
  hybrid_rows_workload(t, false, 13, 300);
  t.sum.print();
}

TEST(FaultHybrid, HybridRowsExtraBuffer) {
  Twin t(hybrid_rows_config(true), "kvreq_*_hybrid, hybrid_linear with mamba_extra_buffer");
  hybrid_rows_workload(t, true, 14, 300);
  t.sum.print();
}

}  // namespace
