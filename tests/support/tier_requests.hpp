// The randomized kvseq_* workload of the host-tier tests (mha pools: host_tier_test.cpp;
// hybrid_linear pools: host_tier_hybrid_test.cpp): prompts sharing prefixes, chunked
// prefill, decode, finish, abort and retract, under device pressure (eviction to the
// host) and host pressure (host eviction), kvpool_check after every step. Every slot a
// request holds after kvseq_begin or kvseq_retract has the KV of the token it stands for
// (host_tier_kv.hpp's rows), and a call that fails for want of memory leaves the pool, its
// tier and the live requests exactly as they were (tier_state()). A test may write and
// check more than the tiered layers' rows (a swa pool's window layers).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "host_tier_kv.hpp"
#include "kvpool/kvpool.h"

namespace kvtest {

struct TierRequests {
  unsigned seed = 0;
  size_t max_live = 4;                   // requests begun at once at most
  bool begin_may_fail = false;           // hybrid_linear: a begin may find no state slot
  std::vector<int32_t> layers;           // the tiered layers the KV is written to and read from
  // More pressure after each step, given the number of live requests (may be empty).
  std::function<void(std::mt19937&, size_t live)> pressure;
  // How a token's KV is written and a request's slots checked; empty: the rows of `layers`
  // (write_tier_kv, expect_tier_kv).
  using KvRows = std::function<void(const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags)>;
  KvRows write_kv, expect_kv;
  // CUDA pools: copies may be in flight between calls. A call first unlocks the nodes of
  // copies that landed meanwhile, which tier_state() sees, so only every other extend and
  // decode is compared with its picture, taken once the copies landed (settle()); the
  // others run with copies in flight.
  bool copies_in_flight = false;
  // Counts the steps after which copies were in flight (when not null).
  size_t* in_flight_steps = nullptr;
};

// Runs the workload on `pool` for 1200 steps, then finishes the live requests; adds the
// host hits of the requests' kvseq_begin to *host_hits. Stops at the first failed assertion.
inline void run_tier_requests(kvpool* pool, const TierRequests& w, uint64_t* host_hits) {
  const auto HasFatal = [] { return ::testing::Test::HasFatalFailure(); };
  std::mt19937 rng(w.seed);
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 4; ++g) prefixes.push_back(tokens_from(10000 * (g + 1), 12 + static_cast<size_t>(g) * 4));
  struct Live {
    uint64_t id;
    std::vector<int32_t> tokens;
    size_t computed;
  };
  std::vector<Live> live;
  const auto write_kv = [&](const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
    if (w.write_kv) {
      w.write_kv(slots, tags);
    } else {
      write_tier_kv(pool, slots, tags, w.layers);
    }
  };
  const auto expect_kv = [&](const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
    if (w.expect_kv) {
      w.expect_kv(slots, tags);
    } else {
      expect_tier_kv(pool, slots, tags, "", w.layers);
    }
  };
  // The pool, its tier and the live requests: a call that fails must leave them as they were.
  const auto picture = [&] { return tier_state(pool, ids_of(live)); };
  // The picture before a call of `step`, or "" for a call not compared (copies in flight).
  const auto watch = [&](int step) {
    if (!w.copies_in_flight) return picture();
    if (step % 2 != 0) return std::string();
    EXPECT_EQ(kvhost_poll(pool, 1, nullptr), KVPOOL_OK) << kvpool_last_error();
    return picture();
  };
  const auto expect_unchanged = [&](const std::string& before, int step, const char* what) {
    if (!before.empty()) {
      ASSERT_EQ(changed_by_failure(before, picture()), "") << "step " << step << " (" << what << ")";
    }
  };
  for (int step = 0; step < 1200; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (live.size() < w.max_live && op < 4) {  // begin
      std::vector<int32_t> t = prefixes[rng() % prefixes.size()];
      const size_t tail = 1 + rng() % 12;
      for (size_t i = 0; i < tail; ++i) t.push_back(static_cast<int32_t>(rng() % 50));
      uint64_t id = 0;
      size_t cached = 0;
      const std::string before = w.begin_may_fail ? watch(step) : std::string();
      const kvpool_status st = kvseq_begin(pool, t.data(), t.size(), nullptr, &id, &cached);
      if (w.begin_may_fail && st == KVPOOL_ERR_OUT_OF_MEMORY) {  // no state slot free or evictable
        expect_unchanged(before, step, "begin");
        if (HasFatal()) return;
        continue;
      }
      ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
      const Held held = held_by(pool, id, t.size());
      *host_hits += held.info.host_hit;
      ASSERT_EQ(held.slots.size(), cached);
      expect_kv(held.slots, prefix_tags(t, cached));
      live.push_back({id, t, cached});
    } else if (!live.empty() && op < 7) {  // extend a chunk, or decode once the prompt is done
      Live& r = live[rng() % live.size()];
      if (r.computed < r.tokens.size()) {
        const size_t chunk = std::min(r.tokens.size() - r.computed, static_cast<size_t>(1 + rng() % 16));
        int64_t c = static_cast<int64_t>(chunk);
        std::vector<int64_t> out(chunk);
        const std::string before = watch(step);
        const kvpool_status st = kvseq_extend(pool, &r.id, 1, &c, 1, out.data(), out.size());
        if (st == KVPOOL_ERR_OUT_OF_MEMORY) {  // full of locked requests (or rows): try later
          expect_unchanged(before, step, "extend");
          if (HasFatal()) return;
          continue;
        }
        ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
        const std::vector<uint64_t> tags = prefix_tags(r.tokens, r.computed + chunk);
        write_kv(out, std::vector<uint64_t>(tags.begin() + static_cast<long>(r.computed), tags.end()));
        r.computed += chunk;
      } else if (r.tokens.size() < 60) {
        int32_t tok = static_cast<int32_t>(rng() % 50);
        int64_t slot = 0;
        const std::string before = watch(step);
        const kvpool_status st = kvseq_decode(pool, &r.id, 1, &tok, 1, &slot, 1);
        if (st == KVPOOL_ERR_OUT_OF_MEMORY) {
          expect_unchanged(before, step, "decode");
          if (HasFatal()) return;
          continue;
        }
        ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
        r.tokens.push_back(tok);
        write_kv({slot}, {prefix_tags(r.tokens, r.tokens.size()).back()});
        ++r.computed;
      }
    } else if (!live.empty()) {  // finish (mostly), abort or retract
      const size_t i = rng() % live.size();
      Live& r = live[i];
      const int how = static_cast<int>(rng() % 6);
      if (how == 0) {
        ASSERT_EQ(kvseq_abort(pool, r.id), KVPOOL_OK);
      } else if (how == 1) {
        size_t cached = 0;
        ASSERT_EQ(kvseq_retract(pool, r.id, &cached), KVPOOL_OK) << kvpool_last_error();
        r.computed = cached;
        const std::vector<int64_t> held = held_by(pool, r.id, r.tokens.size()).slots;
        expect_kv(held, prefix_tags(r.tokens, held.size()));
        continue;
      } else {
        ASSERT_EQ(kvseq_finish(pool, r.id, r.computed), KVPOOL_OK) << kvpool_last_error();
      }
      live.erase(live.begin() + static_cast<long>(i));
    }
    if (rng() % 8 == 0) {  // host pressure now and then
      size_t freed = 0;
      ASSERT_EQ(kvhost_evict(pool, 1 + rng() % 16, &freed), KVPOOL_OK) << kvpool_last_error();
    }
    if (w.pressure) {
      w.pressure(rng, live.size());
      if (::testing::Test::HasFatalFailure()) return;
    }
    char report[4096];
    ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << "step " << step << ":\n" << report;
    if (w.in_flight_steps != nullptr && host_stats_now(pool).copies_in_flight > 0) ++*w.in_flight_steps;
  }
  for (const Live& r : live) ASSERT_EQ(kvseq_finish(pool, r.id, r.computed), KVPOOL_OK);
}

}  // namespace kvtest
