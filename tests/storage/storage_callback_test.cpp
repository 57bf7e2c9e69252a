// The storage tier over an engine's own backend (kvstore_backend, kvpool_create_with_storage):
// an in-test backend (a mutex-protected map of key -> bytes, with switches to fail puts,
// answer misses and damage values) driven through the real pool on CPU: two pools sharing
// one backend object, damaged values never loaded, failures counted, destroy called once
// per pool after the storage threads stopped, bad tables and mismatched configurations
// refused without calling anything, kvstore_clear, and kvpool_check after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "../support/storage_requests.hpp"
#include "../unit/test_util.hpp"

namespace {

using kvtest::expect_consistent;

// The engine's backend. Every callback checks the keys it is given and counts itself.
struct MapBackend {
  enum class PutMode { kStore, kError, kNoResult, kMissResult };
  enum class GetMode { kRead, kMiss, kError, kCorrupt, kAllMissing };

  std::mutex mu;
  std::map<std::string, std::vector<uint8_t>> values;
  std::atomic<PutMode> put_mode{PutMode::kStore};
  std::atomic<GetMode> get_mode{GetMode::kRead};
  std::atomic<int32_t> clear_result{KVSTORE_OK};

  std::atomic<int> puts{0}, gets{0}, exists_calls{0}, clears{0}, destroys{0};
  std::atomic<int> in_flight{0}, in_flight_at_destroy{-1};
  std::atomic<size_t> max_batch{0};
  std::atomic<bool> bad_key{false};

  int calls() const { return puts + gets + exists_calls + clears + destroys; }
};

// A key as storage.h promises it: 1..120 characters of [0-9a-z-].
bool valid_key(const char* k) {
  size_t n = 0;
  for (; k[n] != '\0'; ++n) {
    const char c = k[n];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-')) return false;
  }
  return n >= 1 && n <= 120;
}

// Counts a callback in flight and checks its batch.
class Call {
 public:
  Call(MapBackend* b, const char* const* keys, size_t n) : b_(b) {
    ++b_->in_flight;
    size_t seen = b_->max_batch.load();
    while (n > seen && !b_->max_batch.compare_exchange_weak(seen, n)) {
    }
    for (size_t i = 0; i < n; ++i) {
      if (!valid_key(keys[i])) b_->bad_key = true;
    }
  }
  ~Call() { --b_->in_flight; }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  MapBackend* b_;
};

void cb_put(void* user, const char* const* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
            int32_t* results) {
  auto* b = static_cast<MapBackend*>(user);
  Call call(b, keys, n);
  ++b->puts;
  const MapBackend::PutMode mode = b->put_mode;
  std::lock_guard<std::mutex> lk(b->mu);
  for (size_t i = 0; i < n; ++i) {
    switch (mode) {
      case MapBackend::PutMode::kStore:
        b->values.emplace(keys[i], std::vector<uint8_t>(values[i], values[i] + sizes[i]));  // write-once
        results[i] = KVSTORE_OK;
        break;
      case MapBackend::PutMode::kError: results[i] = KVSTORE_ERROR; break;
      case MapBackend::PutMode::kNoResult: break;  // kvpool counts an unwritten result as an error
      case MapBackend::PutMode::kMissResult: results[i] = KVSTORE_MISS; break;  // no put result: an error
    }
  }
}

void cb_get(void* user, const char* const* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
            int32_t* results) {
  auto* b = static_cast<MapBackend*>(user);
  Call call(b, keys, n);
  ++b->gets;
  const MapBackend::GetMode mode = b->get_mode;
  std::lock_guard<std::mutex> lk(b->mu);
  for (size_t i = 0; i < n; ++i) {
    const auto it = b->values.find(keys[i]);
    if (it == b->values.end() || mode == MapBackend::GetMode::kMiss || mode == MapBackend::GetMode::kAllMissing) {
      results[i] = KVSTORE_MISS;
      continue;
    }
    if (mode == MapBackend::GetMode::kError) {
      results[i] = KVSTORE_ERROR;
      continue;
    }
    const std::vector<uint8_t>& v = it->second;
    std::copy(v.begin(), v.begin() + static_cast<long>(std::min(v.size(), capacity[i])), dst[i]);
    if (mode == MapBackend::GetMode::kCorrupt && v.size() > 200) dst[i][200] ^= 0x5a;  // one payload byte
    sizes[i] = v.size();
    results[i] = KVSTORE_OK;
  }
}

size_t cb_exists_prefix(void* user, const char* const* keys, size_t n) {
  auto* b = static_cast<MapBackend*>(user);
  Call call(b, keys, n);
  ++b->exists_calls;
  if (b->get_mode == MapBackend::GetMode::kAllMissing) return 0;
  std::lock_guard<std::mutex> lk(b->mu);
  size_t found = 0;
  while (found < n && b->values.count(keys[found]) != 0) ++found;
  return found;
}

int32_t cb_clear(void* user) {
  auto* b = static_cast<MapBackend*>(user);
  ++b->clears;
  const int32_t result = b->clear_result;
  if (result == KVSTORE_OK) {
    std::lock_guard<std::mutex> lk(b->mu);
    b->values.clear();
  }
  return result;
}

void cb_destroy(void* user) {
  auto* b = static_cast<MapBackend*>(user);
  b->in_flight_at_destroy = b->in_flight.load();
  ++b->destroys;
}

kvstore_backend table_for(MapBackend* b, bool with_clear = true, bool with_destroy = true) {
  kvstore_backend t{};
  t.struct_size = sizeof(kvstore_backend);
  t.user = b;
  t.put = cb_put;
  t.get = cb_get;
  t.exists_prefix = cb_exists_prefix;
  t.clear = with_clear ? cb_clear : nullptr;
  t.destroy = with_destroy ? cb_destroy : nullptr;
  return t;
}

// mha f32, 2 layers x 2 heads x 8, page 4, a host tier and `storage` (the custom backend by default).
std::string custom_config(const std::string& storage = R"({"backend": "custom", "prefetch_threshold_tokens": 8})") {
  return R"({"model": {"name": "tiny", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 8, "max_context_len": 128},
      "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 4, "headroom_bytes": 0}, "storage": )" +
         storage + "}";
}

// A pool over the backend table, destroyed at the end of the scope (or by reset()).
class CustomPool {
 public:
  explicit CustomPool(const kvstore_backend& table, const std::string& json = custom_config()) {
    const kvpool_status st = kvpool_create_with_storage(json.data(), json.size(), &table, &pool_);
    EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  }
  ~CustomPool() { reset(); }
  CustomPool(const CustomPool&) = delete;
  CustomPool& operator=(const CustomPool&) = delete;
  void reset() {
    kvpool_destroy(pool_);
    pool_ = nullptr;
  }
  operator kvpool*() const { return pool_; }

 private:
  kvpool* pool_ = nullptr;
};

std::vector<int32_t> tokens_from(int32_t first, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = first + static_cast<int32_t>(i) * 3;
  return t;
}

bool contains(const char* text, const char* part) { return std::string(text).find(part) != std::string::npos; }

TEST(StorageCallback, SecondPoolWithTheSameBackendLoadsWhatTheFirstStored) {
  MapBackend b;
  const kvstore_backend table = table_for(&b);
  auto a = std::make_unique<CustomPool>(table);
  auto second = std::make_unique<CustomPool>(table);
  EXPECT_EQ(b.calls(), 0) << "creating a pool calls nothing";
  const std::vector<int32_t> prompt = tokens_from(11, 41);  // 10 whole pages and one token
  kvtest::serve_request(*a, prompt);
  const kvstore_stats sa = kvtest::storage_stats(*a);
  EXPECT_EQ(sa.backups, 1u);
  EXPECT_EQ(sa.backup_pages, 10u);
  EXPECT_EQ(sa.backup_pages_failed, 0u);
  EXPECT_EQ(sa.store_puts, 10u);
  EXPECT_EQ(sa.store_put_errors, 0u);
  EXPECT_EQ(sa.store_put_bytes, sa.backup_bytes);
  EXPECT_GT(sa.store_put_bytes, 10u * 4 * 2 * 2 * 2 * 8 * 4) << "pages with their headers";
  EXPECT_EQ(b.values.size(), 10u);
  EXPECT_GE(b.puts.load(), 1);
  EXPECT_FALSE(b.bad_key) << "keys are 1..120 characters of [0-9a-z-]";
  EXPECT_LE(b.max_batch.load(), 128u);

  // The second pool has never seen the prompt: the shared backend holds all 10 pages.
  EXPECT_EQ(kvtest::prefetch_to_end(*second, prompt), 40u);
  const kvstore_stats sb = kvtest::storage_stats(*second);
  EXPECT_EQ(sb.prefetch_hit_tokens, 40u);
  EXPECT_EQ(sb.prefetch_loaded_tokens, 40u);
  EXPECT_EQ(sb.store_gets, 10u);
  EXPECT_EQ(sb.store_get_hits, 10u);
  EXPECT_EQ(sb.store_get_misses, 0u);
  EXPECT_EQ(sb.prefetch_bytes, sa.backup_bytes);
  EXPECT_EQ(sb.pages_corrupt, 0u);
  const kvseq_info info = kvtest::begin_and_check_kv(*second, prompt);
  EXPECT_EQ(info.prefix_hit, 40u);
  EXPECT_EQ(info.host_hit, 40u);
  EXPECT_EQ(info.storage_hit, 40u);
  EXPECT_EQ(kvtest::storage_stats(*second).storage_hit_tokens, 40u);
  // The loaded pages are backed up again: the same keys, nothing new is stored.
  ASSERT_EQ(kvstore_flush(*second), KVPOOL_OK);
  EXPECT_EQ(b.values.size(), 10u);
  EXPECT_FALSE(b.bad_key);

  // destroy: once per pool, when that pool is destroyed, with no callback running.
  EXPECT_EQ(b.destroys, 0);
  a.reset();
  EXPECT_EQ(b.destroys, 1);
  EXPECT_EQ(b.in_flight_at_destroy, 0);
  const int calls = b.calls();
  second.reset();
  EXPECT_EQ(b.destroys, 2);
  EXPECT_EQ(b.in_flight_at_destroy, 0);
  EXPECT_EQ(b.calls(), calls + 1) << "only destroy";
}

TEST(StorageCallback, DamagedMissingAndFailedValuesAreNeverLoaded) {
  MapBackend b;
  const kvstore_backend table = table_for(&b);
  const std::vector<int32_t> prompt = tokens_from(3, 40);
  {
    CustomPool a(table);
    kvtest::serve_request(a, prompt);
  }
  ASSERT_EQ(b.values.size(), 10u);
  {  // a damaged value: rejected by its checksum, the prefetch stops there
    b.get_mode = MapBackend::GetMode::kCorrupt;
    CustomPool p(table);
    EXPECT_EQ(kvtest::prefetch_to_end(p, prompt), 0u);
    const kvstore_stats s = kvtest::storage_stats(p);
    EXPECT_EQ(s.pages_corrupt, 1u);
    EXPECT_EQ(s.store_get_hits, s.store_gets) << "the backend read it; kvpool rejected it";
    EXPECT_EQ(s.prefetch_loaded_tokens, 0u);
    EXPECT_EQ(kvtest::begin_and_check_kv(p, prompt).prefix_hit, 0u);
  }
  {  // listed by exists_prefix, then a miss on get: a read failure
    b.get_mode = MapBackend::GetMode::kMiss;
    CustomPool p(table);
    EXPECT_EQ(kvtest::prefetch_to_end(p, prompt), 0u);
    const kvstore_stats s = kvtest::storage_stats(p);
    EXPECT_EQ(s.read_failures, 1u);
    EXPECT_GE(s.store_get_misses, 1u);
    EXPECT_EQ(s.store_get_hits, 0u);
    EXPECT_EQ(kvtest::begin_and_check_kv(p, prompt).prefix_hit, 0u);
  }
  {  // errors on get
    b.get_mode = MapBackend::GetMode::kError;
    CustomPool p(table);
    EXPECT_EQ(kvtest::prefetch_to_end(p, prompt), 0u);
    const kvstore_stats s = kvtest::storage_stats(p);
    EXPECT_EQ(s.read_failures, 1u);
    EXPECT_GE(s.store_get_errors, 1u);
    EXPECT_EQ(s.store_get_misses, 0u);
  }
  {  // nothing there: the prefetch is revoked before reading
    b.get_mode = MapBackend::GetMode::kAllMissing;
    CustomPool p(table);
    const int gets = b.gets;
    EXPECT_EQ(kvtest::prefetch_to_end(p, prompt), 0u);
    EXPECT_EQ(kvtest::storage_stats(p).prefetches_revoked, 1u);
    EXPECT_EQ(kvtest::storage_stats(p).store_gets, 0u);
    EXPECT_EQ(b.gets, gets);
  }
  {  // intact again: loaded
    b.get_mode = MapBackend::GetMode::kRead;
    CustomPool p(table);
    EXPECT_EQ(kvtest::prefetch_to_end(p, prompt), 40u);
    EXPECT_EQ(kvtest::begin_and_check_kv(p, prompt).storage_hit, 36u);  // whole pages of the 39 tokens kvseq_begin matches
  }
  EXPECT_EQ(b.destroys, 6);
  EXPECT_FALSE(b.bad_key);
}

TEST(StorageCallback, FailedPutsAreCounted) {
  MapBackend b;
  const kvstore_backend table = table_for(&b);
  CustomPool a(table);
  uint64_t failed = 0;
  int32_t first = 100;
  for (const MapBackend::PutMode mode :
       {MapBackend::PutMode::kError, MapBackend::PutMode::kNoResult, MapBackend::PutMode::kMissResult}) {
    b.put_mode = mode;
    kvtest::serve_request(a, tokens_from(first, 16));  // 4 pages, one batch
    first += 1000;
    failed += 4;
    const kvstore_stats s = kvtest::storage_stats(a);
    EXPECT_EQ(s.store_put_errors, failed);
    EXPECT_EQ(s.backup_pages_failed, failed);
    EXPECT_EQ(s.store_puts, 0u);
    EXPECT_EQ(s.backup_pages, 0u);
    EXPECT_EQ(s.backup_bytes, 0u);
    EXPECT_TRUE(b.values.empty());
  }
  b.put_mode = MapBackend::PutMode::kStore;
  kvtest::serve_request(a, tokens_from(first, 16));
  const kvstore_stats s = kvtest::storage_stats(a);
  EXPECT_EQ(s.store_puts, 4u);
  EXPECT_EQ(s.backup_pages, 4u);
  EXPECT_EQ(s.store_put_errors, failed);
  EXPECT_EQ(b.values.size(), 4u);
  expect_consistent(a);
}

TEST(StorageCallback, ClearCallsTheCallbackOrIsUnsupported) {
  MapBackend b;
  {
    CustomPool a(table_for(&b));
    kvtest::serve_request(a, tokens_from(2, 40));
    ASSERT_EQ(b.values.size(), 10u);
    b.clear_result = KVSTORE_ERROR;
    EXPECT_EQ(kvstore_clear(a), KVPOOL_ERR_IO);
    EXPECT_TRUE(contains(kvpool_last_error(), "clear callback failed")) << kvpool_last_error();
    EXPECT_EQ(b.values.size(), 10u);
    b.clear_result = KVSTORE_OK;
    EXPECT_EQ(kvstore_clear(a), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(b.clears, 2);
    EXPECT_TRUE(b.values.empty());
    expect_consistent(a);
  }
  {
    CustomPool p(table_for(&b, /*with_clear=*/false));
    EXPECT_EQ(kvstore_clear(p), KVPOOL_ERR_UNSUPPORTED);
    EXPECT_TRUE(contains(kvpool_last_error(), "no clear callback")) << kvpool_last_error();
    EXPECT_EQ(b.clears, 2);
    EXPECT_EQ(kvtest::prefetch_to_end(p, tokens_from(2, 40)), 0u);
    expect_consistent(p);
  }
  EXPECT_EQ(b.destroys, 2);
  {  // destroy is optional
    CustomPool p(table_for(&b, true, /*with_destroy=*/false));
    kvtest::serve_request(p, tokens_from(5, 8));
  }
  EXPECT_EQ(b.destroys, 2);
}

TEST(StorageCallback, BadTablesAreRefusedAndCallNothing) {
  MapBackend b;
  const std::string json = custom_config();
  const auto refused = [&](const kvstore_backend* t, const char* message) {
    kvpool* pool = nullptr;
    EXPECT_EQ(kvpool_create_with_storage(json.data(), json.size(), t, &pool), KVPOOL_ERR_INVALID_ARGUMENT) << message;
    EXPECT_TRUE(contains(kvpool_last_error(), message)) << kvpool_last_error();
    EXPECT_EQ(pool, nullptr);
  };
  refused(nullptr, "kvpool_create_with_storage: backend is NULL");
  kvstore_backend t = table_for(&b);
  t.struct_size = sizeof(kvstore_backend) - 1;
  refused(&t, "backend->struct_size is");
  t.struct_size = 0;
  refused(&t, "expected at least");
  t = table_for(&b);
  t.put = nullptr;
  refused(&t, "backend->put is NULL");
  t = table_for(&b);
  t.get = nullptr;
  refused(&t, "backend->get is NULL");
  t = table_for(&b);
  t.exists_prefix = nullptr;
  t.put = nullptr;
  refused(&t, "backend->put and ->exists_prefix are NULL");
  t = table_for(&b);
  EXPECT_EQ(kvpool_create_with_storage(json.data(), json.size(), &t, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvpool* pool = nullptr;
  EXPECT_EQ(kvpool_create_with_storage(nullptr, 0, &t, &pool), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pool, nullptr);
  EXPECT_EQ(b.calls(), 0) << "no callback, not even destroy";
  // A later version's bigger table is accepted (only the fields this one knows are read).
  struct {
    kvstore_backend known;
    void* later;
  } bigger = {table_for(&b), nullptr};
  bigger.known.struct_size = sizeof(bigger);
  ASSERT_EQ(kvpool_create_with_storage(json.data(), json.size(), &bigger.known, &pool), KVPOOL_OK)
      << kvpool_last_error();
  expect_consistent(pool);
  kvpool_destroy(pool);
  EXPECT_EQ(b.destroys, 1);
}

TEST(StorageCallback, ConfigurationMustMatchTheCall) {
  MapBackend b;
  const kvstore_backend table = table_for(&b);
  kvpool* pool = nullptr;
  // backend "custom" without a table.
  const std::string custom = custom_config();
  EXPECT_EQ(kvpool_create(custom.data(), custom.size(), &pool), KVPOOL_ERR_CONFIG);
  EXPECT_TRUE(contains(kvpool_last_error(), "kvpool_create_with_storage")) << kvpool_last_error();
  EXPECT_EQ(pool, nullptr);
  EXPECT_EQ(kvpool_create_with_allocator(custom.data(), custom.size(), nullptr, &pool), KVPOOL_ERR_CONFIG);
  // ... but it plans (the backend plays no part in the plan).
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  EXPECT_EQ(kvpool_plan(custom.data(), custom.size(), &plan), KVPOOL_OK) << kvpool_last_error();
  // A table with another backend, or no storage section.
  const std::string file = custom_config(R"({"backend": "file", "path": "/tmp/kvpool-never-created"})");
  EXPECT_EQ(kvpool_create_with_storage(file.data(), file.size(), &table, &pool), KVPOOL_ERR_CONFIG);
  EXPECT_TRUE(contains(kvpool_last_error(), "got \"file\", expected \"custom\"")) << kvpool_last_error();
  const std::string plain = kvtest::mha_config(4, 64);
  EXPECT_EQ(kvpool_create_with_storage(plain.data(), plain.size(), &table, &pool), KVPOOL_ERR_CONFIG);
  EXPECT_TRUE(contains(kvpool_last_error(), "$.storage: missing")) << kvpool_last_error();
  // "custom" takes no path or servers.
  const std::string with_path = custom_config(R"({"backend": "custom", "path": "/tmp/x"})");
  EXPECT_EQ(kvpool_create_with_storage(with_path.data(), with_path.size(), &table, &pool), KVPOOL_ERR_CONFIG);
  EXPECT_TRUE(contains(kvpool_last_error(), "$.storage.path: given for backend \"custom\"")) << kvpool_last_error();
  const std::string with_servers = custom_config(R"({"backend": "custom", "servers": ["localhost:11211"]})");
  EXPECT_EQ(kvpool_create_with_storage(with_servers.data(), with_servers.size(), &table, &pool), KVPOOL_ERR_CONFIG);
  // Malformed JSON with a good table: a config error, nothing called.
  EXPECT_EQ(kvpool_create_with_storage("{", 1, &table, &pool), KVPOOL_ERR_CONFIG);
  EXPECT_EQ(pool, nullptr);
  EXPECT_EQ(b.calls(), 0) << "no callback, not even destroy";
}

}  // namespace
