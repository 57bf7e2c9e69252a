// Host-allocation failures on the storage tier's own threads (tests/fault's hook,
// kvfault::arm_other_threads): each backup and each prefetch runs with its thread's 1st,
// 2nd, ... allocation failing (with KVFAULT_STICKY=1, that one and every later one),
// until a job reaches no injected failure. An exception that escaped a storage thread
// would end the process (std::terminate); here every such job must end as a failure
// counted in kvstore_stats, kvstore_flush and the prefetch's poll must still come back,
// kvpool_check must pass, and the next jobs must work and load the prompt's own KV.
// The file backend (streamed pages), a custom backend (kvstore_backend: staged batches),
// whose callbacks keep their own allocations out of the injection, and, where the servers
// and client libraries are found, memcached and redis (operator new only: Store::server).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../fault/alloc_injection.hpp"
#include "../fault/fault_driver.hpp"
#include "../support/server_process.hpp"
#include "../support/storage_requests.hpp"
#include "../support/temp_dir.hpp"

namespace {

constexpr size_t kPage = 4;
constexpr size_t kPromptPages = 10;
// Rounds beyond any job's allocation count: a round that keeps failing means a job that
// never finishes its allocations, i.e. a bug in the test or the hook.
constexpr uint64_t kMaxRounds = 5000;

// mha f32, 2 layers x 2 heads x 8, page 4, a host tier, and `storage`.
std::string config(const std::string& storage) {
  return R"({"model": {"name": "tiny", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 8, "max_context_len": 128},
      "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 4, "headroom_bytes": 0}, "storage": )" +
         storage + "}";
}

// Round n's prompt: kPromptPages whole pages and one token, its own in every round.
std::vector<int32_t> prompt_of(uint64_t n) {
  return kvtest::tokens_from(static_cast<int32_t>(1000 + n * 100), kPromptPages * kPage + 1);
}

// A custom backend (kvstore_backend): a map of key -> bytes shared by the pools made over it.
// Its callbacks run on the storage threads; their own allocations are the test's, not the
// library's, so they run kvfault::Unarmed (and a C callback must not throw anyway).
struct MapBackend {
  std::mutex mu;
  std::map<std::string, std::vector<uint8_t>> values;

  static void put(void* user, const char* const* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
                  int32_t* results) {
    const kvfault::Unarmed unarmed;
    auto* b = static_cast<MapBackend*>(user);
    std::lock_guard<std::mutex> lk(b->mu);
    for (size_t i = 0; i < n; ++i) {
      b->values.emplace(keys[i], std::vector<uint8_t>(values[i], values[i] + sizes[i]));
      results[i] = KVSTORE_OK;
    }
  }
  static void get(void* user, const char* const* keys, uint8_t* const* dst, const size_t* capacity, size_t n,
                  size_t* sizes, int32_t* results) {
    const kvfault::Unarmed unarmed;
    auto* b = static_cast<MapBackend*>(user);
    std::lock_guard<std::mutex> lk(b->mu);
    for (size_t i = 0; i < n; ++i) {
      const auto it = b->values.find(keys[i]);
      if (it == b->values.end()) {
        results[i] = KVSTORE_MISS;
        continue;
      }
      std::copy(it->second.begin(), it->second.begin() + static_cast<long>(std::min(it->second.size(), capacity[i])),
                dst[i]);
      sizes[i] = it->second.size();
      results[i] = KVSTORE_OK;
    }
  }
  static size_t exists_prefix(void* user, const char* const* keys, size_t n) {
    const kvfault::Unarmed unarmed;
    auto* b = static_cast<MapBackend*>(user);
    std::lock_guard<std::mutex> lk(b->mu);
    size_t found = 0;
    while (found < n && b->values.count(keys[found]) != 0) ++found;
    return found;
  }

  kvstore_backend table() {
    kvstore_backend t{};
    t.struct_size = sizeof(kvstore_backend);
    t.user = this;
    t.put = put;
    t.get = get;
    t.exists_prefix = exists_prefix;
    return t;
  }
};

// Makes the pools of one backend: all of them share its store.
class Store {
 public:
  static std::unique_ptr<Store> file() {
    auto s = std::make_unique<Store>();
    s->json_ = config(R"({"backend": "file", "path": ")" + s->dir_.path() + R"(", "prefetch_threshold_tokens": 4})");
    return s;
  }
#ifdef KVPOOL_TEST_SERVERS
  // memcached or redis-server, a child process of the test (tests/support/server_process.hpp).
  static std::unique_ptr<Store> server(const std::string& backend) {
    auto s = std::make_unique<Store>();
    std::string error;
    s->server_ = backend == "memcached" ? kvtest::ServerProcess::memcached(&error) : kvtest::ServerProcess::redis(&error);
    EXPECT_NE(s->server_, nullptr) << error;
    if (s->server_ == nullptr) return nullptr;
    s->json_ = config(R"({"backend": ")" + backend + R"(", "servers": [")" + s->server_->address() +
                      R"("], "timeout_ms": 1000, "prefetch_threshold_tokens": 4})");
    // Their client libraries abort() when malloc fails while they open a connection
    // (libmemcached 1.0 in memcached_server_add, hiredis 0.14 in redisConnect): only
    // operator new fails here, which is kvpool's own code.
    s->new_only_ = true;
    return s;
  }
#endif
  static std::unique_ptr<Store> custom() {
    auto s = std::make_unique<Store>();
    s->json_ = config(R"({"backend": "custom", "prefetch_threshold_tokens": 4})");
    s->custom_ = true;
    return s;
  }

  std::shared_ptr<kvpool> pool() {
    kvpool* p = nullptr;
    kvpool_status st = KVPOOL_OK;
    if (custom_) {
      const kvstore_backend t = map_.table();
      st = kvpool_create_with_storage(json_.data(), json_.size(), &t, &p);
    } else {
      st = kvpool_create(json_.data(), json_.size(), &p);
    }
    EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    return std::shared_ptr<kvpool>(p, kvpool_destroy);
  }

  // Makes the storage threads' n-th allocation fail (kvfault::arm_other_threads).
  void arm(uint64_t n) const { kvfault::arm_other_threads(n, kvfault::sticky(), new_only_); }

 private:
  kvtest::TempDir dir_;
#ifdef KVPOOL_TEST_SERVERS
  std::unique_ptr<kvtest::ServerProcess> server_;
#endif
  MapBackend map_;
  std::string json_;
  bool custom_ = false;
  bool new_only_ = false;  // count operator new only
};

// Warnings on (kvpool/log.h) while a test runs, so that the storage threads build their
// messages (report_backend, the failed jobs') under the injection too; counted only.
class WarningsOn {
 public:
  WarningsOn() { EXPECT_EQ(kvpool_set_log_callback(count, &warnings_, KVPOOL_LOG_WARN), KVPOOL_OK); }
  ~WarningsOn() { kvpool_set_log_callback(nullptr, nullptr, KVPOOL_LOG_WARN); }
  WarningsOn(const WarningsOn&) = delete;
  WarningsOn& operator=(const WarningsOn&) = delete;
  uint64_t warnings() const { return warnings_.load(); }

 private:
  static void count(void* user, kvpool_log_level, const char*) { ++*static_cast<std::atomic<uint64_t>*>(user); }
  std::atomic<uint64_t> warnings_{0};
};

// The failure counters of a prefetch: read failures and rejected pages.
uint64_t prefetch_failures(const kvstore_stats& s) {
  return s.read_failures + s.pages_corrupt + s.pages_truncated + s.pages_foreign;
}

// Backups of pool `a`: round n serves its own prompt with the backup thread's n-th
// allocation failing; kvstore_flush waits for the backup. Every page of the job is then
// counted once, stored or failed; nothing stays queued; a round that reached no failure
// stored every page. Then a second pool loads what `a` stores without injection.
void backups_under_injection(Store& store) {
  const WarningsOn log;
  const std::shared_ptr<kvpool> a = store.pool();
  ASSERT_NE(a, nullptr);
  uint64_t n = 1, failed = 0;
  for (; n <= kMaxRounds; ++n) {
    const std::vector<int32_t> prompt = prompt_of(n);
    const kvstore_stats before = kvtest::storage_stats(a.get());
    store.arm(n);
    kvtest::serve_request(a.get(), prompt);  // the backup, kvstore_flush, kvpool_check
    const bool fired = kvfault::disarm_other_threads();
    const kvstore_stats after = kvtest::storage_stats(a.get());
    const uint64_t pages = (after.backup_tokens - before.backup_tokens) / kPage;
    const uint64_t stored = after.backup_pages - before.backup_pages;
    ASSERT_EQ(pages, kPromptPages) << "allocation " << n;
    ASSERT_EQ(stored + after.backup_pages_failed - before.backup_pages_failed, pages)
        << "allocation " << n << ": every page of the backup is counted once, stored or failed";
    ASSERT_EQ(after.backups_queued, 0u) << "allocation " << n;
    if (!fired) {
      ASSERT_EQ(stored, pages) << "allocation " << n << " was not reached, yet pages failed";
      break;
    }
    failed += stored < pages ? 1 : 0;
  }
  ASSERT_LE(n, kMaxRounds);
  EXPECT_GT(failed, 0u) << "no injected failure made a backup fail";
  std::printf("[fault]%s backups: %llu allocations on the backup thread, %llu of them failed a backup, %llu warnings\n",
              kvfault::sticky() ? "[sticky]" : "", static_cast<unsigned long long>(n - 1),
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(log.warnings()));

  // The tier works on: a new backup is stored whole, and another pool loads its KV.
  const std::vector<int32_t> prompt = prompt_of(kMaxRounds + 1);
  kvtest::serve_request(a.get(), prompt);
  const std::shared_ptr<kvpool> b = store.pool();
  EXPECT_EQ(kvtest::prefetch_to_end(b.get(), prompt), kPromptPages * kPage);
  EXPECT_EQ(kvtest::begin_and_check_kv(b.get(), prompt).storage_hit, kPromptPages * kPage);
}

// Waits (at most 10 s) until prefetch `id` is done; kvpool_check on the way.
bool wait_done(kvpool* pool, uint64_t id) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
  for (;;) {
    EXPECT_EQ(kvstore_prefetch_poll(pool, id, &info), KVPOOL_OK) << kvpool_last_error();
    kvtest::expect_checked(pool, "while a prefetch runs");
    if (info.done || std::chrono::steady_clock::now() >= until) return info.done != 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Prefetches of pool `b`: round n, pool `a` stores its own prompt (no injection), then
// `b` prefetches it with the prefetch thread's n-th allocation failing. The prefetch must
// end; what it loaded is a prefix of the stored pages, each holding the prompt's own KV;
// a prefetch that loaded less than it found counted one failure; a round that reached no
// failure loaded everything. Rounds go on until one reaches no failure: the last is the
// prefetch that works again on the same pool.
void prefetches_under_injection(Store& store) {
  const WarningsOn log;
  const std::shared_ptr<kvpool> a = store.pool(), b = store.pool();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  uint64_t n = 1, failed = 0;
  for (; n <= kMaxRounds; ++n) {
    const std::vector<int32_t> prompt = prompt_of(n);
    kvtest::serve_request(a.get(), prompt);
    ASSERT_EQ(kvstore_flush(b.get()), KVPOOL_OK) << kvpool_last_error();  // b's own backups: before the window
    const kvstore_stats before = kvtest::storage_stats(b.get());
    // Armed before the prefetch is queued (the prefetch thread may start on it at once); the
    // calls of this thread are not counted.
    store.arm(n);
    uint64_t id = 0;
    int32_t skipped = -1;
    const kvpool_status st = kvstore_prefetch(b.get(), prompt.data(), prompt.size(), nullptr, &id, &skipped);
    const bool done = st == KVPOOL_OK && id != 0 && wait_done(b.get(), id);
    const bool fired = kvfault::disarm_other_threads();
    ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    ASSERT_NE(id, 0u) << "round " << n << ": the prefetch was skipped (" << skipped << ")";
    ASSERT_TRUE(done) << "allocation " << n << ": the prefetch did not end within 10 s";
    uint64_t inserted = 0;
    ASSERT_EQ(kvstore_prefetch_end(b.get(), id, &inserted), KVPOOL_OK) << kvpool_last_error();
    const kvstore_stats after = kvtest::storage_stats(b.get());
    const uint64_t hit = after.prefetch_hit_tokens - before.prefetch_hit_tokens;
    const uint64_t loaded = after.prefetch_loaded_tokens - before.prefetch_loaded_tokens;
    const uint64_t failures = prefetch_failures(after) - prefetch_failures(before);
    EXPECT_EQ(after.prefetches_running, 0u) << "allocation " << n;
    EXPECT_LE(loaded, hit) << "allocation " << n;
    EXPECT_EQ(inserted, loaded) << "allocation " << n << ": the pool never had the prompt";
    // A backend that could not ask about a key counts it missing (a shorter hit, no failure).
    EXPECT_LE(failures, 1u) << "allocation " << n;
    if (loaded < hit) {
      EXPECT_EQ(failures, 1u) << "allocation " << n << ": a prefetch that stopped early counts its failure";
    }
    kvtest::expect_checked(b.get(), "after the prefetch ended");
    // Whatever landed holds the prompt's own KV, and a request finds it (from 10 tokens on:
    // fewer are not loaded back, host.h's kvhost_load_back threshold).
    const kvseq_info info = kvtest::begin_and_check_kv(b.get(), prompt);
    EXPECT_EQ(info.storage_hit, loaded >= 10 ? loaded : 0) << "allocation " << n;
    if (::testing::Test::HasFailure()) return;
    if (!fired) {
      EXPECT_EQ(loaded, kPromptPages * kPage) << "allocation " << n << " was not reached, yet pages were not loaded";
      break;
    }
    failed += loaded < kPromptPages * kPage ? 1 : 0;
  }
  ASSERT_LE(n, kMaxRounds);
  EXPECT_GT(failed, 0u) << "no injected failure made a prefetch fail";
  std::printf("[fault]%s prefetches: %llu allocations on the prefetch thread, %llu of them failed a prefetch, %llu warnings\n",
              kvfault::sticky() ? "[sticky]" : "", static_cast<unsigned long long>(n - 1),
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(log.warnings()));
}

TEST(StorageThreadFaults, FileBackups) { backups_under_injection(*Store::file()); }
TEST(StorageThreadFaults, FilePrefetches) { prefetches_under_injection(*Store::file()); }
TEST(StorageThreadFaults, CustomBackups) { backups_under_injection(*Store::custom()); }
TEST(StorageThreadFaults, CustomPrefetches) { prefetches_under_injection(*Store::custom()); }

#ifdef KVPOOL_TEST_SERVERS
// The network backends (kvpool's allocations in them; see Store::server).
class StorageThreadFaultsServers : public ::testing::TestWithParam<const char*> {};

TEST_P(StorageThreadFaultsServers, Backups) {
  const std::unique_ptr<Store> store = Store::server(GetParam());
  ASSERT_NE(store, nullptr);
  backups_under_injection(*store);
}

TEST_P(StorageThreadFaultsServers, Prefetches) {
  const std::unique_ptr<Store> store = Store::server(GetParam());
  ASSERT_NE(store, nullptr);
  prefetches_under_injection(*store);
}

INSTANTIATE_TEST_SUITE_P(Servers, StorageThreadFaultsServers, ::testing::Values("memcached", "redis"),
                         [](const auto& info) { return std::string(info.param); });
#endif

}  // namespace
