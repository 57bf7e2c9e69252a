// kvpool_set_log_callback (log.h): off by default, levels filter, real events arrive (pool
// lifecycle, failed calls, the storage thread's backend failures), clearing stops them, a
// callback may call kvpool but not set the callback, and setting or clearing the callback
// while other threads log is safe: once it returns the previous callback never runs again.
// Run under ThreadSanitizer by scripts/sanitize.sh (label `threads`).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/storage_requests.hpp"
#include "../unit/seq_test_util.hpp"
#include "../unit/test_util.hpp"

namespace {

using kvtest::Pool;

// What a callback received.
struct Received {
  std::mutex mu;
  std::vector<std::pair<kvpool_log_level, std::string>> messages;
  std::vector<std::thread::id> threads;
  std::atomic<int> calls{0};

  static void callback(void* user, kvpool_log_level level, const char* message) {
    auto* r = static_cast<Received*>(user);
    ++r->calls;
    std::lock_guard<std::mutex> lock(r->mu);
    r->messages.emplace_back(level, message);
    r->threads.push_back(std::this_thread::get_id());
  }
  // The messages at `level` that contain `part`.
  size_t count(kvpool_log_level level, const std::string& part) {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& m : messages) n += m.first == level && m.second.find(part) != std::string::npos;
    return n;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return messages.size();
  }
};

// Clears the callback when a test ends, whatever happened.
struct ClearLog {
  ~ClearLog() { EXPECT_EQ(kvpool_set_log_callback(nullptr, nullptr, KVPOOL_LOG_ERROR), KVPOOL_OK); }
};

void fail_a_call(kvpool* pool) {
  const int64_t slot = 5;
  ASSERT_EQ(kvalloc_free(pool, &slot, 1), KVPOOL_ERR_INVALID_ARGUMENT);  // not allocated
}

TEST(Log, LevelsFilterAndRealEventsArrive) {
  ClearLog clear;
  Received info;
  ASSERT_EQ(kvpool_set_log_callback(&Received::callback, &info, KVPOOL_LOG_INFO), KVPOOL_OK);
  {
    Pool pool(kvtest::mha_config(4, 64));
    EXPECT_EQ(info.count(KVPOOL_LOG_INFO, "pool created: model \"\" (mha, 2 layers) on cpu, 64 tokens in pages of 4"), 1u);
    fail_a_call(pool);  // debug: not delivered at INFO
    EXPECT_EQ(info.count(KVPOOL_LOG_DEBUG, ""), 0u);
  }
  EXPECT_EQ(info.count(KVPOOL_LOG_INFO, "destroying pool"), 1u);

  Received debug;
  ASSERT_EQ(kvpool_set_log_callback(&Received::callback, &debug, KVPOOL_LOG_DEBUG), KVPOOL_OK);
  const size_t info_had = info.size();
  {
    Pool pool(kvtest::mha_config(4, 64));
    fail_a_call(pool);
    const std::string expected = std::string("failed call (invalid argument): ") + kvpool_last_error();
    EXPECT_EQ(debug.count(KVPOOL_LOG_DEBUG, expected), 1u) << expected;
  }
  EXPECT_EQ(info.size(), info_had) << "the replaced callback gets nothing more";
  EXPECT_EQ(debug.count(KVPOOL_LOG_INFO, "pool created"), 1u);

  Received warn;
  ASSERT_EQ(kvpool_set_log_callback(&Received::callback, &warn, KVPOOL_LOG_WARN), KVPOOL_OK);
  {
    Pool pool(kvtest::mha_config(4, 64));
    fail_a_call(pool);
    kvpool* none = nullptr;
    EXPECT_EQ(kvpool_create_from_file("/nonexistent/kvpool.json", &none), KVPOOL_ERR_IO);
  }
  EXPECT_EQ(warn.count(KVPOOL_LOG_WARN, "failed call (I/O error): cannot open \"/nonexistent/kvpool.json\""), 1u);
  EXPECT_EQ(warn.size(), 1u) << "neither info nor debug at WARN";

  // Cleared: nothing arrives.
  ASSERT_EQ(kvpool_set_log_callback(nullptr, nullptr, KVPOOL_LOG_DEBUG), KVPOOL_OK);
  {
    Pool pool(kvtest::mha_config(4, 64));
    fail_a_call(pool);
  }
  EXPECT_EQ(warn.size(), 1u);
  EXPECT_EQ(debug.count(KVPOOL_LOG_INFO, "pool created"), 1u);
}

TEST(Log, BadLevelIsRefusedAndKeepsTheCallback) {
  ClearLog clear;
  Received r;
  ASSERT_EQ(kvpool_set_log_callback(&Received::callback, &r, KVPOOL_LOG_DEBUG), KVPOOL_OK);
  Received other;
  EXPECT_EQ(kvpool_set_log_callback(&Received::callback, &other, static_cast<kvpool_log_level>(7)),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("level 7 is not a kvpool_log_level"), std::string::npos)
      << kvpool_last_error();
  EXPECT_EQ(kvpool_set_log_callback(&Received::callback, &other, static_cast<kvpool_log_level>(-1)),
            KVPOOL_ERR_INVALID_ARGUMENT);
  // The refusal itself was logged at debug to the callback that stayed.
  EXPECT_EQ(r.count(KVPOOL_LOG_DEBUG, "level 7 is not a kvpool_log_level"), 1u);
  EXPECT_EQ(other.size(), 0u);
  // Clearing takes any level.
  EXPECT_EQ(kvpool_set_log_callback(nullptr, nullptr, static_cast<kvpool_log_level>(99)), KVPOOL_OK);
}

// A callback that calls kvpool: other calls work (and log nothing), setting the callback is refused.
struct Reentrant {
  kvpool* pool = nullptr;
  std::atomic<int> calls{0};
  std::atomic<int> set_status{-1};
  std::atomic<int> free_status{-1};
  static void callback(void* user, kvpool_log_level, const char*) {
    auto* r = static_cast<Reentrant*>(user);
    if (r->calls++ > 0) return;
    r->set_status = kvpool_set_log_callback(nullptr, nullptr, KVPOOL_LOG_ERROR);
    const int64_t slot = 9;
    r->free_status = kvalloc_free(r->pool, &slot, 1);  // fails: not logged from inside the callback
  }
};

TEST(Log, CallbackMayCallKvpoolButNotSetTheCallback) {
  ClearLog clear;
  Reentrant r;  // outlives the pool, whose destroy still logs to it
  Pool pool(kvtest::mha_config(4, 64));
  r.pool = pool;
  ASSERT_EQ(kvpool_set_log_callback(&Reentrant::callback, &r, KVPOOL_LOG_DEBUG), KVPOOL_OK);
  fail_a_call(pool);
  EXPECT_EQ(r.calls.load(), 1) << "the callback's own failed calls are not logged";
  EXPECT_EQ(r.set_status.load(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(r.free_status.load(), KVPOOL_ERR_INVALID_ARGUMENT);
  fail_a_call(pool);
  EXPECT_EQ(r.calls.load(), 2) << "the callback is still set";
}

// A custom storage backend whose puts all fail: the storage thread logs the failures.
void failing_put(void*, const char* const*, const uint8_t* const*, const size_t*, size_t n, int32_t* results) {
  for (size_t i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
}
void missing_get(void*, const char* const*, uint8_t* const*, const size_t*, size_t n, size_t*, int32_t* results) {
  for (size_t i = 0; i < n; ++i) results[i] = KVSTORE_MISS;
}
size_t none_exist(void*, const char* const*, size_t) { return 0; }

TEST(Log, StorageThreadsLogBackendFailures) {
  ClearLog clear;
  Received r;
  ASSERT_EQ(kvpool_set_log_callback(&Received::callback, &r, KVPOOL_LOG_WARN), KVPOOL_OK);
  kvstore_backend table{};
  table.struct_size = sizeof table;
  table.put = failing_put;
  table.get = missing_get;
  table.exists_prefix = none_exist;
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 8, "max_context_len": 128},
      "host_cache": {"ratio": 4, "headroom_bytes": 0}, "storage": {"backend": "custom"}})";
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create_with_storage(json.data(), json.size(), &table, &pool), KVPOOL_OK) << kvpool_last_error();
  kvtest::serve_request(pool, kvtest::range(1, 32));  // flushed: the backup ran and failed
  kvstore_stats s = KVSTORE_STATS_INIT;
  ASSERT_EQ(kvstore_get_stats(pool, &s), KVPOOL_OK);
  ASSERT_GT(s.store_put_errors, 0u);
  EXPECT_GE(r.count(KVPOOL_LOG_WARN, "storage backend, storing pages: since the last report, " +
                                         std::to_string(s.store_put_errors) + " put errors"),
            1u);
  EXPECT_GE(r.count(KVPOOL_LOG_WARN, "pages not stored"), 1u);
  {
    std::lock_guard<std::mutex> lock(r.mu);
    bool other_thread = false;
    for (const auto& id : r.threads) other_thread = other_thread || id != std::this_thread::get_id();
    EXPECT_TRUE(other_thread) << "the warnings come from the pool's storage thread";
  }
  kvpool_destroy(pool);
}

// Threads fail calls (debug messages) and drive a storage tier whose thread logs its backend's
// failures, while the main thread sets, replaces and clears the callback: every message goes to a
// callback that is set, and once kvpool_set_log_callback has returned the previous one is never
// called again.
struct Generation {
  std::atomic<bool> retired{false};
  std::atomic<int> calls{0};
  std::atomic<int> after_retired{0};
  static void callback(void* user, kvpool_log_level, const char* message) {
    auto* g = static_cast<Generation*>(user);
    if (g->retired.load()) ++g->after_retired;
    ++g->calls;
    volatile size_t n = std::strlen(message);  // the message is readable during the call
    (void)n;
  }
};

TEST(Log, SettingWhileOtherThreadsLogIsSafe) {
  ClearLog clear;
  Pool pool(kvtest::mha_config(4, 64));
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        kvpool_stats s{};  // struct_size 0: refused, a debug message
        (void)kvpool_get_stats(nullptr, &s);
      }
    });
  }
  // And a pool whose storage thread logs its backend's failures meanwhile.
  kvstore_backend table{};
  table.struct_size = sizeof table;
  table.put = failing_put;
  table.get = missing_get;
  table.exists_prefix = none_exist;
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 8, "max_context_len": 128},
      "host_cache": {"ratio": 4, "headroom_bytes": 0}, "storage": {"backend": "custom"}})";
  kvpool* stored = nullptr;
  ASSERT_EQ(kvpool_create_with_storage(json.data(), json.size(), &table, &stored), KVPOOL_OK) << kvpool_last_error();
  threads.emplace_back([&] {
    for (int32_t i = 0; !stop.load(); ++i) {
      const std::vector<int32_t> prompt = kvtest::range(1 + 100 * (i % 1000), 32);
      uint64_t seq = 0;
      size_t cached = 0, done = 0;
      if (kvseq_begin(stored, prompt.data(), prompt.size(), nullptr, &seq, &cached) != KVPOOL_OK) continue;
      const int64_t chunk = static_cast<int64_t>(prompt.size() - cached);
      std::vector<int64_t> slots(static_cast<size_t>(chunk));
      if (kvseq_extend(stored, &seq, 1, &chunk, 1, slots.data(), slots.size()) != KVPOOL_OK) {
        (void)kvseq_abort(stored, seq);
        continue;
      }
      (void)kvseq_finish(stored, seq, prompt.size());
      (void)kvhost_poll(stored, 0, &done);
      (void)kvstore_flush(stored);
    }
  });
  std::vector<std::unique_ptr<Generation>> generations;
  for (int i = 0; i < 200; ++i) {
    generations.push_back(std::make_unique<Generation>());
    ASSERT_EQ(kvpool_set_log_callback(&Generation::callback, generations.back().get(), KVPOOL_LOG_DEBUG), KVPOOL_OK);
    if (generations.size() > 1) generations[generations.size() - 2]->retired = true;
    if (i % 10 == 9) {
      ASSERT_EQ(kvpool_set_log_callback(nullptr, nullptr, KVPOOL_LOG_DEBUG), KVPOOL_OK);
      generations.back()->retired = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // let the threads log to it
  }
  ASSERT_EQ(kvpool_set_log_callback(nullptr, nullptr, KVPOOL_LOG_DEBUG), KVPOOL_OK);
  generations.back()->retired = true;
  stop = true;
  for (auto& t : threads) t.join();
  kvstore_stats st = KVSTORE_STATS_INIT;
  ASSERT_EQ(kvstore_get_stats(stored, &st), KVPOOL_OK);
  EXPECT_GT(st.store_put_errors, 0u) << "the storage thread failed (and logged) meanwhile";
  kvpool_destroy(stored);
  int calls = 0;
  for (const auto& g : generations) {
    EXPECT_EQ(g->after_retired.load(), 0);
    calls += g->calls.load();
  }
  EXPECT_GT(calls, 0) << "the threads' failures were logged";
}

}  // namespace
