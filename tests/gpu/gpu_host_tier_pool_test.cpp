// The host tier end to end on CUDA pools: the same random request workload (shared
// prefixes, chunked prefill, decode, finish, abort, retract, device and host pressure)
// on a CPU pool, a CUDA pool with the host free list and one with the device free
// list, in lockstep. After every step each pool waits for its copies (kvhost_poll with
// wait) so that the in-flight locks cannot change eviction order, and then every slot
// returned, the host-tier counters, kvpool_check and the KV bytes of each request's
// matched prefix (loaded back from the host or not) must agree.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "gpu_test_env.hpp"
#include "kvpool/kvpool.h"

namespace {


std::string config(const char* device, const char* policy, const char* layout) {
  const std::string io = std::string(layout) == "page_first_direct" ? "direct" : "kernel";
  return std::string(R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {)") + device +
         R"("kv_dtype": "f32", "page_size": 4, "max_total_tokens": 96, "max_running_requests": 8,
         "max_context_len": 64}, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 3, "headroom_bytes": 0,
         "write_policy": ")" + policy + R"(", "layout": ")" + layout + R"(", "io_backend": ")" + io + R"("}})";
}

struct PoolDeleter {
  void operator()(kvpool* p) const { kvpool_destroy(p); }
};
using PoolPtr = std::unique_ptr<kvpool, PoolDeleter>;

PoolPtr make(const std::string& json) {
  kvpool* p = nullptr;
  EXPECT_EQ(kvpool_create(json.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  return PoolPtr(p);
}

using kvtest::prefix_tags;

void write_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags) {
  kvtest::write_tier_kv(pool, slots, tags);
}

void expect_kv(kvpool* pool, const std::vector<int64_t>& slots, const std::vector<uint64_t>& tags, const char* lane) {
  kvtest::expect_tier_kv(pool, slots, tags, std::string(lane) + ":");
}

struct Case {
  const char* policy;
  const char* layout;
};

class GpuHostTierPool : public ::testing::TestWithParam<Case> {};

TEST_P(GpuHostTierPool, CudaPoolsMatchTheCpuPoolStepByStep) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const Case c = GetParam();
  const char* names[3] = {"cpu", "cuda host list", "cuda device list"};
  PoolPtr pools[3] = {make(config("", c.policy, c.layout)), make(config(R"("device": "cuda:0", )", c.policy, c.layout)),
                      make(config(R"("device": "cuda:0", "free_list": "device", )", c.policy, c.layout))};
  for (auto& p : pools) ASSERT_NE(p, nullptr);
  std::mt19937 rng(77);
  std::vector<std::vector<int32_t>> prefixes;
  for (int g = 0; g < 4; ++g) {
    std::vector<int32_t> t;
    for (int i = 0; i < 12 + 4 * g; ++i) t.push_back(10000 * (g + 1) + i);
    prefixes.push_back(t);
  }
  struct Live {
    uint64_t id[3];
    std::vector<int32_t> tokens;
    size_t computed;
  };
  std::vector<Live> live;
  uint64_t host_hits = 0;
  for (int step = 0; step < 300; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (live.size() < 4 && op < 4) {
      std::vector<int32_t> t = prefixes[rng() % prefixes.size()];
      const size_t tail = 1 + rng() % 12;
      for (size_t i = 0; i < tail; ++i) t.push_back(static_cast<int32_t>(rng() % 50));
      Live r{{0, 0, 0}, t, 0};
      std::vector<int64_t> first;
      for (int k = 0; k < 3; ++k) {
        size_t cached = 0;
        ASSERT_EQ(kvseq_begin(pools[k].get(), t.data(), t.size(), nullptr, &r.id[k], &cached), KVPOOL_OK) << names[k] << ": " << kvpool_last_error();
        kvseq_info info = KVSEQ_INFO_INIT;
        ASSERT_EQ(kvseq_get_info(pools[k].get(), r.id[k], &info), KVPOOL_OK);
        std::vector<int64_t> held(t.size());
        size_t n = 0;
        ASSERT_EQ(kvseq_get_slots(pools[k].get(), r.id[k], held.data(), held.size(), &n), KVPOOL_OK);
        held.resize(n);
        ASSERT_EQ(kvhost_poll(pools[k].get(), 1, nullptr), KVPOOL_OK) << kvpool_last_error();  // the load has landed
        expect_kv(pools[k].get(), held, prefix_tags(t, n), names[k]);
        if (k == 0) {
          first = held;
          host_hits += info.host_hit;
          r.computed = n;
        } else {
          ASSERT_EQ(held, first) << names[k] << " step " << step;
        }
      }
      live.push_back(r);
    } else if (!live.empty() && op < 7) {
      Live& r = live[rng() % live.size()];
      if (r.computed < r.tokens.size()) {
        const size_t chunk = std::min(r.tokens.size() - r.computed, static_cast<size_t>(1 + rng() % 16));
        const int64_t len = static_cast<int64_t>(chunk);
        std::vector<int64_t> first;
        bool full = false;
        for (int k = 0; k < 3; ++k) {
          std::vector<int64_t> out(chunk);
          const kvpool_status st = kvseq_extend(pools[k].get(), &r.id[k], 1, &len, 1, out.data(), out.size());
          if (k == 0) full = st == KVPOOL_ERR_OUT_OF_MEMORY;
          ASSERT_EQ(st, full ? KVPOOL_ERR_OUT_OF_MEMORY : KVPOOL_OK) << names[k] << ": " << kvpool_last_error();
          if (full) continue;
          const std::vector<uint64_t> tags = prefix_tags(r.tokens, r.computed + chunk);
          write_kv(pools[k].get(), out, std::vector<uint64_t>(tags.begin() + static_cast<long>(r.computed), tags.end()));
          if (k == 0) first = out;
          else ASSERT_EQ(out, first) << names[k] << " step " << step;
        }
        if (!full) r.computed += chunk;
      }
    } else if (!live.empty()) {
      const size_t i = rng() % live.size();
      const int how = static_cast<int>(rng() % 5);
      for (int k = 0; k < 3; ++k) {
        if (how == 0) ASSERT_EQ(kvseq_abort(pools[k].get(), live[i].id[k]), KVPOOL_OK);
        else ASSERT_EQ(kvseq_finish(pools[k].get(), live[i].id[k], live[i].computed), KVPOOL_OK) << kvpool_last_error();
      }
      live.erase(live.begin() + static_cast<long>(i));
    }
    const size_t host_evict = rng() % 8 == 0 ? 1 + rng() % 16 : 0;
    kvhost_stats first = KVHOST_STATS_INIT;
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(kvhost_poll(pools[k].get(), 1, nullptr), KVPOOL_OK) << names[k] << ": " << kvpool_last_error();
      if (host_evict > 0) {
        size_t freed = 0;
        ASSERT_EQ(kvhost_evict(pools[k].get(), host_evict, &freed), KVPOOL_OK);
      }
      char report[4096];
      ASSERT_EQ(kvpool_check(pools[k].get(), report, sizeof report), KVPOOL_OK) << names[k] << " step " << step << ":\n" << report;
      kvhost_stats s = KVHOST_STATS_INIT;
      ASSERT_EQ(kvhost_get_stats(pools[k].get(), &s), KVPOOL_OK);
      if (k == 0) {
        first = s;
        continue;
      }
      EXPECT_EQ(s.used_tokens, first.used_tokens) << names[k] << " step " << step;
      EXPECT_EQ(s.host_only_tokens, first.host_only_tokens) << names[k];
      EXPECT_EQ(s.backup_tokens, first.backup_tokens) << names[k];
      EXPECT_EQ(s.load_tokens, first.load_tokens) << names[k];
      EXPECT_EQ(s.bytes_to_host, first.bytes_to_host) << names[k];
      EXPECT_EQ(s.copies_in_flight, 0u) << names[k];
    }
  }
  EXPECT_GT(host_hits, 0u) << "the workload must load prefixes back from the host";
}

// Copies left in flight: no step waits for them. Requests are aborted and retracted while
// their prefixes' loads and backups are still running; each begin's loaded prefix is read
// after kvhost_wait_layer() made the (legacy default) compute stream wait for its layers;
// kvpool_check holds after every step (in-flight nodes are locked, not leaked), and once
// everything is finished and polled, nothing is left in flight or locked.
TEST(GpuHostTierInFlight, AbortAndRetractWhileCopiesRun) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  PoolPtr pool = make(config(R"("device": "cuda:0", )", "write_through", "page_first"));
  ASSERT_NE(pool, nullptr);
  std::mt19937 rng(99);
  struct Live {
    uint64_t id;
    std::vector<int32_t> tokens;
    size_t computed;
  };
  std::vector<Live> live;
  uint64_t host_hits = 0;
  for (int step = 0; step < 600; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (live.size() < 4 && op < 4) {
      std::vector<int32_t> t;
      const int g = static_cast<int>(rng() % 4);
      for (int i = 0; i < 12 + 4 * g; ++i) t.push_back(10000 * (g + 1) + i);
      const size_t tail = 1 + rng() % 12;
      for (size_t i = 0; i < tail; ++i) t.push_back(static_cast<int32_t>(rng() % 50));
      int32_t set = 0;
      ASSERT_EQ(kvhost_next_load_set(pool.get(), &set), KVPOOL_OK);
      uint64_t id = 0;
      size_t cached = 0;
      ASSERT_EQ(kvseq_begin(pool.get(), t.data(), t.size(), nullptr, &id, &cached), KVPOOL_OK) << kvpool_last_error();
      kvseq_info info = KVSEQ_INFO_INIT;
      ASSERT_EQ(kvseq_get_info(pool.get(), id, &info), KVPOOL_OK);
      host_hits += info.host_hit;
      for (int layer = 0; layer < 2; ++layer) ASSERT_EQ(kvhost_wait_layer(pool.get(), set, layer, nullptr), KVPOOL_OK);
      std::vector<int64_t> held(t.size());
      size_t n = 0;
      ASSERT_EQ(kvseq_get_slots(pool.get(), id, held.data(), held.size(), &n), KVPOOL_OK);
      held.resize(n);
      expect_kv(pool.get(), held, prefix_tags(t, n), "in flight");
      live.push_back({id, t, n});
    } else if (!live.empty() && op < 7) {
      Live& r = live[rng() % live.size()];
      if (r.computed < r.tokens.size()) {
        const size_t chunk = std::min(r.tokens.size() - r.computed, static_cast<size_t>(1 + rng() % 16));
        const int64_t len = static_cast<int64_t>(chunk);
        std::vector<int64_t> out(chunk);
        const kvpool_status st = kvseq_extend(pool.get(), &r.id, 1, &len, 1, out.data(), out.size());
        if (st == KVPOOL_ERR_OUT_OF_MEMORY) continue;
        ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
        const std::vector<uint64_t> tags = prefix_tags(r.tokens, r.computed + chunk);
        write_kv(pool.get(), out, std::vector<uint64_t>(tags.begin() + static_cast<long>(r.computed), tags.end()));
        r.computed += chunk;
      }
    } else if (!live.empty()) {
      const size_t i = rng() % live.size();
      const int how = static_cast<int>(rng() % 3);
      if (how == 1) {
        size_t cached = 0;
        ASSERT_EQ(kvseq_retract(pool.get(), live[i].id, &cached), KVPOOL_OK) << kvpool_last_error();
        live[i].computed = cached;
      } else {
        if (how == 0) ASSERT_EQ(kvseq_abort(pool.get(), live[i].id), KVPOOL_OK);
        else ASSERT_EQ(kvseq_finish(pool.get(), live[i].id, live[i].computed), KVPOOL_OK) << kvpool_last_error();
        live.erase(live.begin() + static_cast<long>(i));
      }
    }
    char report[4096];
    ASSERT_EQ(kvpool_check(pool.get(), report, sizeof report), KVPOOL_OK) << "step " << step << ":\n" << report;
  }
  for (const Live& r : live) ASSERT_EQ(kvseq_finish(pool.get(), r.id, r.computed), KVPOOL_OK);
  ASSERT_EQ(kvhost_poll(pool.get(), 1, nullptr), KVPOOL_OK);
  kvhost_stats s = KVHOST_STATS_INIT;
  ASSERT_EQ(kvhost_get_stats(pool.get(), &s), KVPOOL_OK);
  EXPECT_EQ(s.copies_in_flight, 0u);
  size_t evictable = 0, protected_len = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool.get(), &evictable, &protected_len, &total), KVPOOL_OK);
  EXPECT_EQ(protected_len, 0u) << "every lock of a copy in flight was released";
  EXPECT_GT(host_hits, 0u);
  char report[4096];
  EXPECT_EQ(kvpool_check(pool.get(), report, sizeof report), KVPOOL_OK) << report;
}

INSTANTIATE_TEST_SUITE_P(Policies, GpuHostTierPool,
                         ::testing::Values(Case{"write_through", "layer_first"}, Case{"write_through", "page_first"},
                                           Case{"write_back", "page_first_direct"}, Case{"write_through", "page_head"},
                                           Case{"write_through_selective", "layer_first"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.policy) + "_" + info.param.layout;
                         });

}  // namespace
