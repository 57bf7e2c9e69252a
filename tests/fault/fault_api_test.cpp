// Failure injection into the lower-level families: kvalloc (extend / decode /
// free / free groups / backup / restore), radix (match / insert / lock / unlock /
// evict) and kvreq (alloc / write / write_batch / free).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "../unit/test_util.hpp"
#include "fault_driver.hpp"

namespace {

using kvfault::Out;
using kvfault::Twin;

// Requests grown by kvalloc_extend / kvalloc_decode, freed whole or in free groups,
// with backup / restore around some steps. Returns nothing; the Twin checks each call.
void kvalloc_workload(Twin& t, int page, unsigned seed, int steps) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int64_t>> saved_;
  std::vector<std::vector<int64_t>> reqs;  // slots per live request (same in both pools)
  bool snapshot = false;
  uint64_t token = 0;
  for (int step = 0; step < steps && t.ok(); ++step) {
    const int op = static_cast<int>(rng() % 12);
    if (op < 4) {  // extend a batch: new requests and grown ones
      std::vector<int64_t> pre, seq, last;
      std::vector<size_t> who;
      const size_t batch = 1 + rng() % 3;
      for (size_t b = 0; b < batch; ++b) {
        size_t i = reqs.size();
        if (!reqs.empty() && rng() % 2 == 0) i = rng() % reqs.size();
        if (std::find(who.begin(), who.end(), i) != who.end()) continue;
        if (i == reqs.size()) reqs.emplace_back();
        who.push_back(i);
        pre.push_back(static_cast<int64_t>(reqs[i].size()));
        seq.push_back(pre.back() + 1 + static_cast<int64_t>(rng() % (2 * page + 3)));
        last.push_back(reqs[i].empty() ? -1 : reqs[i].back());
      }
      size_t total = 0;
      for (size_t b = 0; b < pre.size(); ++b) total += static_cast<size_t>(seq[b] - pre[b]);
      Out out;
      const kvpool_status st = t.call(
          "kvalloc_extend", total,
          [&](kvpool* p, Out& o) {
            return kvalloc_extend(p, pre.data(), pre.size(), seq.data(), seq.size(), last.data(), last.size(), o.data(),
                                  o.size());
          },
          &out);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      if (st == KVPOOL_OK) {
        size_t o = 0;
        for (size_t b = 0; b < who.size(); ++b) {
          for (int64_t k = pre[b]; k < seq[b]; ++k) reqs[who[b]].push_back(out[o++]);
        }
      }
      while (!reqs.empty() && reqs.back().empty()) reqs.pop_back();
    } else if (op < 7 && !reqs.empty()) {  // decode every request
      std::vector<int64_t> seq, last;
      for (const auto& r : reqs) {
        seq.push_back(static_cast<int64_t>(r.size()) + 1);
        last.push_back(r.back());
      }
      Out out;
      const kvpool_status st = t.call(
          "kvalloc_decode", reqs.size(),
          [&](kvpool* p, Out& o) { return kvalloc_decode(p, seq.data(), seq.size(), last.data(), last.size(), o.data(), o.size()); },
          &out);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      if (st == KVPOOL_OK) {
        for (size_t i = 0; i < reqs.size(); ++i) reqs[i].push_back(out[i]);
      }
    } else if (op < 10 && !reqs.empty()) {  // free one or several requests, maybe in a group
      const bool group = rng() % 2 == 0 && !snapshot;
      if (group) {
        EXPECT_EQ(t.call("kvalloc_free_group_begin", 0, [&](kvpool* p, Out&) { return kvalloc_free_group_begin(p); }), KVPOOL_OK);
      }
      const size_t n = group ? 1 + rng() % reqs.size() : 1;
      for (size_t k = 0; k < n && !reqs.empty(); ++k) {
        const size_t i = rng() % reqs.size();
        const std::vector<int64_t> slots = reqs[i];
        EXPECT_EQ(t.call("kvalloc_free", 0, [&](kvpool* p, Out&) { return kvalloc_free(p, slots.data(), slots.size()); }),
                  KVPOOL_OK);
        reqs.erase(reqs.begin() + static_cast<long>(i));
      }
      if (group) {
        EXPECT_EQ(t.call("kvalloc_free_group_end", 0, [&](kvpool* p, Out&) { return kvalloc_free_group_end(p); }), KVPOOL_OK);
      }
    } else if (op == 10 && !snapshot) {
      Out out;
      EXPECT_EQ(t.call(
                    "kvalloc_backup", 1,
                    [&](kvpool* p, Out& o) {
                      uint64_t tok = 0;
                      const kvpool_status s = kvalloc_backup(p, &tok);
                      o[0] = static_cast<int64_t>(tok);
                      return s;
                    },
                    &out),
                KVPOOL_OK);
      token = static_cast<uint64_t>(out[0]);
      snapshot = true;
      // Remember the requests to restore them too.
      saved_ = reqs;
    } else if (op == 11 && snapshot) {
      EXPECT_EQ(t.call("kvalloc_restore", 0, [&](kvpool* p, Out&) { return kvalloc_restore(p, token); }), KVPOOL_OK);
      reqs = saved_;
      snapshot = false;
    }
  }
  // Free everything left.
  for (const auto& slots : reqs) {
    EXPECT_EQ(t.call("kvalloc_free", 0, [&](kvpool* p, Out&) { return kvalloc_free(p, slots.data(), slots.size()); }),
              KVPOOL_OK);
  }
}

TEST(FaultApi, KvallocPage1) {
  Twin t(kvtest::mha_config(1, 64, "none", 8, 512), "kvalloc page 1");
  kvalloc_workload(t, 1, 1, 300);
  t.sum.print();
}

TEST(FaultApi, KvallocPage16) {
  Twin t(kvtest::mha_config(16, 16 * 24, "none", 8, 512), "kvalloc page 16");
  kvalloc_workload(t, 16, 2, 300);
  t.sum.print();
}

// radix_match / insert / lock / unlock / evict with slots from kvalloc_alloc.
void radix_workload(Twin& t, int page, unsigned seed, int steps) {
  std::mt19937 rng(seed);
  std::vector<uint64_t> locked;
  for (int step = 0; step < steps && t.ok(); ++step) {
    const int op = static_cast<int>(rng() % 10);
    std::vector<int32_t> key;
    const int family = static_cast<int>(rng() % 3);
    const int len = page * (1 + static_cast<int>(rng() % 4));
    for (int i = 0; i < len; ++i) key.push_back(family * 100 + (i < page * 2 ? i : static_cast<int>(rng() % 3)));
    if (op < 3) {  // match
      Out out;
      t.call(
          "radix_match", key.size() + 2,
          [&](kvpool* p, Out& o) {
            size_t matched = 0;
            uint64_t node = 0;
            const kvpool_status s = radix_match(p, key.data(), key.size(), nullptr, o.data() + 2, key.size(), &matched, &node);
            o[0] = static_cast<int64_t>(matched);
            o[1] = static_cast<int64_t>(node);
            return s;
          },
          &out);
      if (out[1] != 0 && rng() % 2 == 0) {
        const uint64_t node = static_cast<uint64_t>(out[1]);
        if (t.call("radix_lock", 0, [&](kvpool* p, Out&) { return radix_lock(p, node); }) == KVPOOL_OK) locked.push_back(node);
      }
    } else if (op < 6) {  // allocate and insert; free the duplicates
      Out slots;
      const kvpool_status st = t.call("kvalloc_alloc", key.size(), [&](kvpool* p, Out& o) { return kvalloc_alloc(p, o.data(), o.size()); }, &slots);
      if (st != KVPOOL_OK) {
        t.call("radix_evict", 1, [&](kvpool* p, Out& o) {
          size_t ev = 0;
          const kvpool_status s = radix_evict(p, key.size(), &ev);
          o[0] = static_cast<int64_t>(ev);
          return s;
        });
        continue;
      }
      Out out;
      EXPECT_EQ(t.call(
                    "radix_insert", 2,
                    [&](kvpool* p, Out& o) {
                      size_t prefix = 0;
                      uint64_t node = 0;
                      const kvpool_status s = radix_insert(p, key.data(), key.size(), slots.data(), slots.size(), nullptr,
                                                           static_cast<int32_t>(step % 3), &prefix, &node);
                      o[0] = static_cast<int64_t>(prefix);
                      o[1] = static_cast<int64_t>(node);
                      return s;
                    },
                    &out),
                KVPOOL_OK);
      if (out[0] > 0) {
        const size_t dup = static_cast<size_t>(out[0]);
        EXPECT_EQ(t.call("kvalloc_free", 0, [&](kvpool* p, Out&) { return kvalloc_free(p, slots.data(), dup); }), KVPOOL_OK);
      }
    } else if (op < 8 && !locked.empty()) {
      const uint64_t node = locked.back();
      locked.pop_back();
      EXPECT_EQ(t.call("radix_unlock", 0, [&](kvpool* p, Out&) { return radix_unlock(p, node); }), KVPOOL_OK);
    } else {
      const size_t want = static_cast<size_t>(page * (1 + static_cast<int>(rng() % 4)));
      t.call("radix_evict", 1, [&](kvpool* p, Out& o) {
        size_t ev = 0;
        const kvpool_status s = radix_evict(p, want, &ev);
        o[0] = static_cast<int64_t>(ev);
        return s;
      });
    }
  }
  for (uint64_t node : locked) {
    EXPECT_EQ(t.call("radix_unlock", 0, [&](kvpool* p, Out&) { return radix_unlock(p, node); }), KVPOOL_OK);
  }
}

TEST(FaultApi, RadixPage1) {
  Twin t(kvtest::mha_config(1, 96, "none", 8, 512), "radix page 1");
  radix_workload(t, 1, 5, 300);
  t.sum.print();
}

TEST(FaultApi, RadixPage4) {
  Twin t(kvtest::mha_config(4, 4 * 24, "none", 8, 512), "radix page 4");
  radix_workload(t, 4, 6, 300);
  t.sum.print();
}

TEST(FaultApi, RadixPage4EventsLfu) {
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 96, "max_running_requests": 8, "max_context_len": 512},
      "prefix_cache": {"kind": "radix", "eviction": "lfu", "events": true}})";
  Twin t(json, "radix page 4 lfu with KV events");
  radix_workload(t, 4, 7, 300);
  // Drain the events: both pools must have queued the same ones.
  Out out;
  std::vector<radix_event> ev(4096);
  std::vector<int32_t> tok(16384);
  const kvpool_status st = t.call(
      "radix_take_events", 2,
      [&](kvpool* p, Out& o) {
        size_t n_ev = 0, n_tok = 0;
        const kvpool_status s = radix_take_events(p, ev.data(), ev.size(), &n_ev, tok.data(), tok.size(), &n_tok);
        o[0] = static_cast<int64_t>(n_ev);
        o[1] = static_cast<int64_t>(n_tok);
        return s;
      },
      &out);
  EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error();
  EXPECT_GT(out[0], 0);
  t.sum.print();
}

// kvreq_alloc / write / write_batch / last_loc / free / clear.
TEST(FaultApi, Kvreq) {
  Twin t(kvtest::mha_config(1, 64, "none", 8, 32), "kvreq");
  std::mt19937 rng(9);
  std::vector<int32_t> rows;
  for (int step = 0; step < 300 && t.ok(); ++step) {
    const int op = static_cast<int>(rng() % 6);
    if (op < 2) {
      const size_t n = 1 + rng() % 3;
      Out out;
      const kvpool_status st = t.call(
          "kvreq_alloc", n,
          [&](kvpool* p, Out& o) {
            int32_t r[3] = {0, 0, 0};
            const kvpool_status s = kvreq_alloc(p, r, n);
            for (size_t i = 0; i < n; ++i) o[i] = r[i];
            return s;
          },
          &out);
      if (st == KVPOOL_OK) {
        for (int64_t r : out) rows.push_back(static_cast<int32_t>(r));
      }
    } else if (op < 4 && !rows.empty()) {
      const int32_t row = rows[rng() % rows.size()];
      std::vector<int64_t> slots(1 + rng() % 8);
      for (auto& s : slots) s = 1 + static_cast<int64_t>(rng() % 60);
      const size_t start = rng() % 16;
      EXPECT_EQ(t.call("kvreq_write", 0, [&](kvpool* p, Out&) { return kvreq_write(p, row, start, slots.data(), slots.size()); }),
                KVPOOL_OK);
    } else if (op == 4 && !rows.empty()) {
      const std::vector<int32_t> batch(rows.begin(), rows.begin() + static_cast<long>(1 + rng() % rows.size()));
      std::vector<int64_t> pre, seq, pslots, eslots;
      for (size_t i = 0; i < batch.size(); ++i) {
        pre.push_back(static_cast<int64_t>(rng() % 4));
        seq.push_back(pre.back() + 1 + static_cast<int64_t>(rng() % 4));
        for (int64_t k = 0; k < pre.back(); ++k) pslots.push_back(1 + static_cast<int64_t>(rng() % 60));
        for (int64_t k = pre.back(); k < seq.back(); ++k) eslots.push_back(1 + static_cast<int64_t>(rng() % 60));
      }
      EXPECT_EQ(t.call("kvreq_write_batch", 0,
                       [&](kvpool* p, Out&) {
                         return kvreq_write_batch(p, batch.data(), batch.size(), pre.data(), pre.size(), seq.data(),
                                                  seq.size(), pslots.data(), pslots.size(), eslots.data(), eslots.size());
                       }),
                KVPOOL_OK);
      t.call("kvreq_last_loc", batch.size(), [&](kvpool* p, Out& o) {
        return kvreq_last_loc(p, batch.data(), batch.size(), pre.data(), pre.size(), o.data(), o.size());
      });
    } else if (!rows.empty()) {
      const size_t i = rng() % rows.size();
      const int32_t row = rows[i];
      EXPECT_EQ(t.call("kvreq_free", 0, [&](kvpool* p, Out&) { return kvreq_free(p, &row, 1); }), KVPOOL_OK);
      rows.erase(rows.begin() + static_cast<long>(i));
    }
    t.opts.rows = rows;
    t.opts.row_len = 32;
  }
  EXPECT_EQ(t.call("kvreq_clear", 0, [&](kvpool* p, Out&) { return kvreq_clear(p); }), KVPOOL_OK);
  t.sum.print();
}

}  // namespace
