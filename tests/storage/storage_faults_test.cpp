// The storage tier under server faults, through the C API, against real memcached and
// redis-server processes (tests/support/server_process.hpp): a server killed, restarted
// and stopped (SIGSTOP: it accepts but never answers) while two pools use it. No call
// crashes or blocks the caller for long, lost pages are misses only, every fault shows in
// the counters, kvpool_check() holds throughout, and the store serves again once the
// server is back.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "../support/server_process.hpp"
#include "../support/storage_requests.hpp"
#include "../unit/test_util.hpp"

namespace {

using kvtest::expect_consistent;
using kvtest::Pool;
using kvtest::ServerProcess;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string config(const std::string& backend, const std::string& server) {
  const std::string extra = backend == "memcached" ? R"(, "retry_timeout_s": 0.3)" : "";
  return R"({"model": {"name": "tiny", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 8, "max_context_len": 128},
      "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 4, "headroom_bytes": 0},
      "storage": {"backend": ")" + backend + R"(", "servers": [")" + server + R"("], "timeout_ms": 150)" + extra +
         R"(, "prefetch_threshold_tokens": 8}})";
}

std::vector<int32_t> prompt(int32_t first) {
  std::vector<int32_t> t(41);
  for (size_t i = 0; i < t.size(); ++i) t[i] = first + static_cast<int32_t>(i) * 7;
  return t;
}

// The kvseq calls of a request never wait for storage; the flush after them is bounded
// by the backend's timeouts. Returns the seconds the kvseq calls took.
double serve(kvpool* pool, const std::vector<int32_t>& p) {
  const double took = kvtest::serve_request(pool, p, nullptr, false);
  const auto flush_start = Clock::now();
  EXPECT_EQ(kvstore_flush(pool), KVPOOL_OK) << kvpool_last_error();
  EXPECT_LT(seconds_since(flush_start), 5.0) << "flush is bounded by the timeouts";
  return took;
}

// The prefetch calls return at once (asserted), whatever the server does.
uint64_t fetch(kvpool* pool, const std::vector<int32_t>& p) {
  uint64_t id = 0;
  const auto start = Clock::now();
  EXPECT_EQ(kvstore_prefetch(pool, p.data(), p.size(), nullptr, &id, nullptr), KVPOOL_OK) << kvpool_last_error();
  EXPECT_LT(seconds_since(start), 0.1) << "kvstore_prefetch does no I/O";
  if (id == 0) return 0;
  kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
  do {
    const auto poll_start = Clock::now();
    EXPECT_EQ(kvstore_prefetch_poll(pool, id, &info), KVPOOL_OK);
    EXPECT_LT(seconds_since(poll_start), 0.1);
    if (!info.done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  } while (!info.done && seconds_since(start) < 10);
  EXPECT_TRUE(info.done) << "the prefetch ends within the timeouts";
  uint64_t inserted = 0;
  EXPECT_EQ(kvstore_prefetch_end(pool, id, &inserted), KVPOOL_OK) << kvpool_last_error();
  expect_consistent(pool);
  return inserted;
}

uint64_t begin_storage_hit(kvpool* pool, const std::vector<int32_t>& p) {
  return kvtest::begin_and_check_kv(pool, p).storage_hit;
}

class StorageFaults : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string error;
    server_ = std::string(GetParam()) == "memcached" ? ServerProcess::memcached(&error) : ServerProcess::redis(&error);
    ASSERT_NE(server_, nullptr) << error;
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_P(StorageFaults, KilledRestartedAndStoppedServer) {
  Pool a(config(GetParam(), server_->address()));
  Pool b(config(GetParam(), server_->address()));
  ASSERT_NE(a.get(), nullptr);
  ASSERT_NE(b.get(), nullptr);

  // Healthy: b finds what a stored.
  serve(a, prompt(100));
  EXPECT_EQ(fetch(b, prompt(100)), 40u);
  EXPECT_EQ(begin_storage_hit(b, prompt(100)), 40u);

  // Killed: a's backups fail and are counted, b's prefetches find nothing; nothing crashes.
  server_->kill();
  EXPECT_LT(serve(a, prompt(200)), 0.5);
  EXPECT_GT(kvtest::storage_stats(a).backup_pages_failed, 0u);
  EXPECT_EQ(fetch(b, prompt(200)), 0u);
  EXPECT_EQ(begin_storage_hit(b, prompt(200)), 0u);
  const kvstore_stats down = kvtest::storage_stats(b);
  EXPECT_GT(down.store_server_errors + down.store_timeouts + down.prefetches_revoked, 0u);

  // Restarted (empty): once the backend tries it again, pages flow again.
  std::string error;
  ASSERT_TRUE(server_->restart(&error)) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past memcached's retry and redis' back-off
  serve(a, prompt(300));
  serve(a, prompt(310));  // a second job, well after the retry window
  EXPECT_EQ(fetch(b, prompt(310)), 40u);
  EXPECT_EQ(begin_storage_hit(b, prompt(310)), 40u);

  // Stopped (accepts, never answers): calls return, timeouts are counted, misses only.
  server_->pause();
  EXPECT_LT(serve(a, prompt(400)), 0.5) << "kvseq calls never wait for storage";
  EXPECT_EQ(fetch(b, prompt(400)), 0u);
  const kvstore_stats stopped = kvtest::storage_stats(a);
  EXPECT_GT(stopped.store_timeouts + stopped.backup_pages_failed, 0u);
  server_->resume();
  expect_consistent(a);
  expect_consistent(b);
}

INSTANTIATE_TEST_SUITE_P(Servers, StorageFaults, ::testing::Values("memcached", "redis"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
