// What the headers promise about threads, exercised from many threads at once:
// pools used by different threads concurrently (one thread per pool), the live-handle
// registry under create/destroy churn, the per-thread last error, the calls documented
// "safe from any thread", and one pool handed between threads under the caller's lock.
// Label `threads`; scripts/sanitize.sh runs it under ThreadSanitizer, and so will the
// tests of later threaded code (host and storage tiers).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pool_state.hpp"
#include "seq_test_util.hpp"

namespace {

constexpr int kThreads = 4;

std::string mha_radix(int page) {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(48 * page) +
         R"(, "max_running_requests": 12, "max_context_len": 512}, "prefix_cache": {"kind": "radix"}})";
}

// Runs `body(thread_index)` on kThreads threads started together.
template <class Body>
void on_threads(Body body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      body(t);
    });
  }
  for (auto& th : threads) th.join();
}

// Each thread owns pools of its own (every family with kvseq) and drives the random
// kvseq workload on them; the library's shared state (handle registry, error slots,
// statics) must be race-free.
TEST(Threads, PoolsOfTheirOwnOnEveryThread) {
  on_threads([](int t) {
    const std::string configs[] = {mha_radix(1 + 15 * (t % 2)), kvtest::swa_radix_config(160, 64, 4, 8, 512),
                                   kvtest::hybrid_radix_config(128, 20, 4, 512)};
    for (const std::string& json : configs) {
      kvtest::Pool pool(json);
      std::map<std::string, int> seen =
          kvtest::random_workload(pool, 100u + static_cast<unsigned>(t), 400, 8, 40, 6, "thread " + std::to_string(t), 5);
      EXPECT_EQ(seen["end"], 1) << json;
    }
  });
}

// Creating and destroying pools on several threads while others check theirs: every
// destroyed handle is rejected afterwards, wherever it was destroyed.
TEST(Threads, HandleRegistryUnderChurn) {
  std::mutex mutex;
  std::vector<kvpool*> destroyed;
  on_threads([&](int t) {
    for (int i = 0; i < 50; ++i) {
      kvpool* pool = nullptr;
      const std::string json = mha_radix(1 << ((i + t) % 4));
      ASSERT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_OK) << kvpool_last_error();
      char report[256];
      EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << report;
      kvpool_destroy(pool);
      std::lock_guard<std::mutex> lock(mutex);
      destroyed.push_back(pool);
    }
  });
  // Addresses may be reused by a later pool; none is live now.
  for (kvpool* stale : destroyed) {
    kvpool_stats stats = KVPOOL_STATS_INIT;
    EXPECT_EQ(kvpool_get_stats(stale, &stats), KVPOOL_ERR_INVALID_ARGUMENT);
  }
}

// kvpool_last_error() belongs to the calling thread: each thread sees only its own message.
TEST(Threads, LastErrorIsPerThread) {
  on_threads([](int t) {
    const std::string bad = "{\"model\": " + std::to_string(t) + "}";
    for (int i = 0; i < 200; ++i) {
      kvpool* pool = nullptr;
      ASSERT_EQ(kvpool_create(bad.data(), bad.size(), &pool), KVPOOL_ERR_CONFIG);
      const std::string message = kvpool_last_error();
      EXPECT_NE(message.find(std::to_string(t)), std::string::npos) << "thread " << t << " read: " << message;
    }
  });
}

// The calls documented "safe from any thread": plan, page hash, status strings, versions.
TEST(Threads, StatelessCallsFromAnyThread) {
  const std::string json = mha_radix(16);
  kvpool_plan_info first = KVPOOL_PLAN_INFO_INIT;
  ASSERT_EQ(kvpool_plan(json.data(), json.size(), &first), KVPOOL_OK);
  const std::vector<int32_t> tokens = kvtest::range(7, 64);
  uint8_t expected[32];
  ASSERT_EQ(radix_page_hash(tokens.data(), tokens.size(), nullptr, 0, expected, sizeof(expected), nullptr), KVPOOL_OK) << kvpool_last_error();
  on_threads([&](int) {
    for (int i = 0; i < 200; ++i) {
      kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
      ASSERT_EQ(kvpool_plan(json.data(), json.size(), &plan), KVPOOL_OK);
      EXPECT_EQ(plan.kv_bytes_per_token, first.kv_bytes_per_token);
      uint8_t hash[32];
      ASSERT_EQ(radix_page_hash(tokens.data(), tokens.size(), nullptr, 0, hash, sizeof(hash), nullptr), KVPOOL_OK);
      EXPECT_EQ(std::memcmp(hash, expected, sizeof(hash)), 0);
      EXPECT_STREQ(kvpool_status_string(KVPOOL_ERR_CONFIG), "configuration error");
      EXPECT_GT(kvpool_version(), 0u);
    }
  });
}

// One pool used by every thread in turn under the caller's mutex (the documented
// contract): the library must keep no per-thread state about a pool.
TEST(Threads, OnePoolHandedBetweenThreadsUnderALock) {
  kvtest::Pool pool(mha_radix(4));
  std::mutex mutex;
  std::vector<uint64_t> live;
  on_threads([&](int t) {
    for (int i = 0; i < 100; ++i) {
      std::lock_guard<std::mutex> lock(mutex);
      const std::vector<int32_t> prompt = kvtest::range(1000 * (i % 3), 8 + t);
      if (live.size() < 6) {
        uint64_t seq = 0;
        size_t cached = 0;
        if (kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached) == KVPOOL_OK) {
          const int64_t chunk = static_cast<int64_t>(prompt.size() - cached);
          if (kvtest::seq_extend(pool, {seq}, {chunk}) == KVPOOL_OK) {
            live.push_back(seq);
          } else {
            EXPECT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
          }
        }
      } else {
        const uint64_t seq = live.back();
        live.pop_back();
        const kvseq_info info = kvtest::seq_info(pool, seq);
        EXPECT_EQ(kvseq_finish(pool, seq, info.computed), KVPOOL_OK) << kvpool_last_error();
      }
      ASSERT_TRUE(kvtest::accounting_holds(pool, "thread " + std::to_string(t)));
    }
  });
  for (uint64_t seq : live) EXPECT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
  EXPECT_TRUE(kvtest::accounting_holds(pool, "end"));
}

}  // namespace
