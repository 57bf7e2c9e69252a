// kvpool_metrics_text (metrics.h): the text is valid Prometheus exposition (checked by
// exposition_check.hpp, itself tested on broken texts), and after real workloads every value
// equals what the stats APIs say: a plain pool with prefix hits and evictions (radix_evict
// and kvseq's own), host and storage tiers with the file backend (backups, a prefetch by a
// second pool, a storage hit), swa and hybrid_linear pools. Bad input fails precisely and
// changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../support/storage_requests.hpp"
#include "../support/temp_dir.hpp"
#include "../unit/seq_test_util.hpp"
#include "../unit/test_util.hpp"
#include "exposition_check.hpp"

namespace {

using kvtest::Exposition;
using kvtest::parse_exposition;
using kvtest::Pool;

// The pool's text, sized by a first call (which must report BUFFER_TOO_SMALL and the length).
std::string metrics_text(const kvpool* pool) {
  size_t len = 0;
  EXPECT_EQ(kvpool_metrics_text(pool, nullptr, 0, &len), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(len, 0u);
  std::vector<char> buf(len + 256);
  size_t got = 0;
  EXPECT_EQ(kvpool_metrics_text(pool, buf.data(), buf.size(), &got), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(std::strlen(buf.data()), got);
  return std::string(buf.data(), got);
}

Exposition metrics(const kvpool* pool) {
  const std::string text = metrics_text(pool);
  Exposition e = parse_exposition(text);
  EXPECT_EQ(e.error, "") << text;
  return e;
}

double d(uint64_t v) { return static_cast<double>(v); }

kvpool_stats pool_stats(const kvpool* pool) {
  kvpool_stats s = KVPOOL_STATS_INIT;
  EXPECT_EQ(kvpool_get_stats(pool, &s), KVPOOL_OK) << kvpool_last_error();
  return s;
}

using kvtest::host_stats;

// The families every pool has, equal to kvpool_get_stats().
void expect_pool_figures(const kvpool* pool, const Exposition& m) {
  const kvpool_stats s = pool_stats(pool);
  EXPECT_EQ(m.at(R"(kvpool_capacity_tokens{tier="device"})"), d(s.token_capacity));
  EXPECT_EQ(m.at(R"(kvpool_used_tokens{tier="device"})"), d(s.token_held));
  EXPECT_EQ(m.at("kvpool_capacity_request_rows"), d(s.req_capacity));
  EXPECT_EQ(m.at("kvpool_used_request_rows"), d(s.req_capacity - s.req_available));
  EXPECT_EQ(m.at(R"(kvpool_memory_bytes{kind="kv"})"), d(s.kv_bytes));
  EXPECT_EQ(m.at(R"(kvpool_memory_bytes{kind="request_table"})"), d(s.req_table_bytes));
  EXPECT_EQ(m.at("kvpool_alloc_calls_total"), d(s.alloc_calls));
  EXPECT_EQ(m.at("kvpool_alloc_failures_total"), d(s.alloc_failures));
  EXPECT_EQ(m.at("kvpool_free_calls_total"), d(s.free_calls));
  EXPECT_EQ(m.at("kvpool_rejected_calls_total"), d(s.rejected_calls));
  size_t evictable = 0, locked = 0, total = 0;
  if (radix_sizes(pool, &evictable, &locked, &total) == KVPOOL_OK) {
    EXPECT_EQ(m.at(R"(kvpool_evictable_tokens{tier="device"})"), d(evictable));
    EXPECT_EQ(m.at(R"(kvpool_protected_tokens{tier="device"})"), d(locked));
  }
}

TEST(ExpositionCheck, RejectsBrokenTexts) {
  const std::string good = "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_x_total{a=\"b\"} 3\n";
  EXPECT_EQ(parse_exposition(good).error, "");
  EXPECT_EQ(parse_exposition(good).at(R"(kvpool_x_total{a="b"})"), 3);
  const char* broken[] = {
      "kvpool_x_total 3\n",                                                                 // no TYPE
      "# HELP kvpool_x Things.\n# TYPE kvpool_x counter\nkvpool_x 3\n",                     // counter without _total
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total gauge\nkvpool_x_total 3\n",     // gauge with _total
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_x_total abc\n", // not a number
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_x_total{1a=\"b\"} 3\n",  // label name
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_x_total{a=b} 3\n",       // unquoted
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_x_total 3\nkvpool_x_total 4\n",  // twice
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_x_total 3",     // no final newline
      "# HELP kvpool_x_total Things.\n# TYPE kvpool_x_total counter\nkvpool_y_total 3\n",   // other family
      "# TYPE kvpool_x_total counter\nkvpool_x_total 3\n",                                  // no HELP
  };
  for (const char* text : broken) EXPECT_NE(parse_exposition(text).error, "") << text;
}

// A plain mha pool (page 4, 64 tokens, radix cache): prefix hits, evictions by radix_evict
// and by kvseq_extend making room, one request running.
TEST(Metrics, PlainPoolAfterAWorkload) {
  Pool pool(kvtest::mha_config(4, 64, "none", 8, 64));
  const Exposition fresh = metrics(pool);
  EXPECT_EQ(fresh.at(R"(kvpool_prefix_hit_tokens_total{tier="device"})"), 0);
  EXPECT_EQ(fresh.at(R"(kvpool_evicted_tokens_total{tier="device"})"), 0);
  expect_pool_figures(pool, fresh);

  uint64_t lookups = 0, lookup_tokens = 0, hits = 0, evicted_total = 0;
  // Request i shares its first 12 tokens with request 0, then has 4 of its own.
  for (int32_t i = 0; i < 3; ++i) {
    std::vector<int32_t> prompt = kvtest::range(100, 12);
    const std::vector<int32_t> own = kvtest::range(1000 * (i + 1), 4);
    prompt.insert(prompt.end(), own.begin(), own.end());
    uint64_t seq = 0;
    size_t cached = 0;
    ASSERT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(cached, i == 0 ? 0u : 12u);
    ++lookups;
    lookup_tokens += prompt.size();
    hits += cached;
    const int64_t chunk = static_cast<int64_t>(prompt.size() - cached);
    std::vector<int64_t> slots(static_cast<size_t>(chunk));
    ASSERT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(kvseq_finish(pool, seq, prompt.size()), KVPOOL_OK) << kvpool_last_error();
  }
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, 4, &evicted), KVPOOL_OK);
  EXPECT_GE(evicted, 4u);
  evicted_total += evicted;
  Exposition m = metrics(pool);
  expect_pool_figures(pool, m);
  EXPECT_EQ(m.at("kvpool_prefix_lookups_total"), d(lookups));
  EXPECT_EQ(m.at("kvpool_prefix_lookup_tokens_total"), d(lookup_tokens));
  EXPECT_EQ(m.at(R"(kvpool_prefix_hit_tokens_total{tier="device"})"), d(hits));
  EXPECT_EQ(m.at(R"(kvpool_evicted_tokens_total{tier="device"})"), d(evicted_total));
  EXPECT_EQ(m.at("kvpool_running_requests"), 0);

  // A 60-token request: its extend evicts unlocked cached tokens to make room.
  size_t evictable = 0, locked = 0, before = 0, after = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &locked, &before), KVPOOL_OK);
  const std::vector<int32_t> big = kvtest::range(5000, 60);
  uint64_t seq = 0;
  size_t cached = 0;
  ASSERT_EQ(kvseq_begin(pool, big.data(), big.size(), nullptr, &seq, &cached), KVPOOL_OK);
  ASSERT_EQ(cached, 0u);
  const int64_t chunk = 60;
  std::vector<int64_t> slots(60);
  ASSERT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
  kvseq_info info = KVSEQ_INFO_INIT;
  ASSERT_EQ(kvseq_get_info(pool, seq, &info), KVPOOL_OK);
  ASSERT_EQ(radix_sizes(pool, &evictable, &locked, &after), KVPOOL_OK);
  const uint64_t evicted_by_extend = before + info.cached - after;  // the tree lost these, gained its cached pages
  EXPECT_GT(evicted_by_extend, 0u);
  evicted_total += evicted_by_extend;
  m = metrics(pool);
  expect_pool_figures(pool, m);
  EXPECT_EQ(m.at(R"(kvpool_evicted_tokens_total{tier="device"})"), d(evicted_total));
  EXPECT_EQ(m.at("kvpool_running_requests"), 1);
  EXPECT_GT(m.at(R"(kvpool_protected_tokens{tier="device"})"), 0) << "the running request locks its cached pages";
  EXPECT_EQ(m.at("kvpool_prefix_lookups_total"), d(lookups + 1));
  ASSERT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);

  // What a pool without tiers, on the CPU, does not have.
  EXPECT_FALSE(m.has(R"(kvpool_capacity_tokens{tier="host"})"));
  EXPECT_FALSE(m.has(R"(kvpool_prefix_hit_tokens_total{tier="host"})"));
  for (const char* family : {"kvpool_host_only_tokens", "kvpool_transfers_total", "kvpool_storage_errors_total",
                             "kvpool_device_faults_total", "kvpool_window_capacity_tokens", "kvpool_mamba_capacity_states"}) {
    EXPECT_FALSE(m.has_family(family)) << family;
  }
  // Counters and gauges as their names say.
  EXPECT_EQ(m.types.at("kvpool_evicted_tokens_total"), "counter");
  EXPECT_EQ(m.types.at("kvpool_used_tokens"), "gauge");
}

// Without a prefix cache: the pool's families, no cache ones.
TEST(Metrics, PoolWithoutPrefixCache) {
  Pool pool(R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 4, "max_context_len": 64},
      "prefix_cache": {"kind": "none"}})");
  std::vector<int64_t> slots(8);
  ASSERT_EQ(kvalloc_alloc(pool, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
  const Exposition m = metrics(pool);
  expect_pool_figures(pool, m);
  EXPECT_EQ(m.at(R"(kvpool_used_tokens{tier="device"})"), 8);
  EXPECT_FALSE(m.has_family("kvpool_evictable_tokens"));
  EXPECT_FALSE(m.has_family("kvpool_evicted_tokens_total"));
  EXPECT_FALSE(m.has_family("kvpool_prefix_hit_tokens_total"));
}

// mha f32, 2 layers x 2 heads x 8, page 4, a host tier (4x the device) and a file store.
std::string tier_config(const std::string& dir) {
  return R"({"model": {"name": "tiny", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 64, "max_running_requests": 8, "max_context_len": 128},
      "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 4, "headroom_bytes": 0},
      "storage": {"backend": "file", "path": ")" + dir + R"(", "prefetch_threshold_tokens": 8}})";
}

// The host and storage families equal kvhost_get_stats() and kvstore_get_stats().
void expect_tier_figures(const kvpool* pool, const Exposition& m) {
  const kvhost_stats h = kvtest::host_stats_now(pool);
  kvstore_stats s = KVSTORE_STATS_INIT;
  ASSERT_EQ(kvstore_get_stats(pool, &s), KVPOOL_OK);
  const double page = 4;
  EXPECT_EQ(m.at(R"(kvpool_capacity_tokens{tier="host"})"), d(h.capacity_tokens));
  EXPECT_EQ(m.at(R"(kvpool_used_tokens{tier="host"})"), d(h.used_tokens));
  EXPECT_EQ(m.at("kvpool_host_only_tokens"), d(h.host_only_tokens));
  EXPECT_EQ(m.at("kvpool_host_copies_in_flight"), d(h.copies_in_flight));
  EXPECT_EQ(m.at(R"(kvpool_evicted_tokens_total{tier="host"})"), d(h.host_evicted_tokens));
  EXPECT_EQ(m.at(R"(kvpool_transfers_total{direction="device_to_host"})"), d(h.backups));
  EXPECT_EQ(m.at(R"(kvpool_transfers_total{direction="host_to_device"})"), d(h.loads));
  EXPECT_EQ(m.at(R"(kvpool_transfers_total{direction="host_to_storage"})"), d(s.backups));
  EXPECT_EQ(m.at(R"(kvpool_transfers_total{direction="storage_to_host"})"), d(s.prefetches));
  EXPECT_EQ(m.at(R"(kvpool_transfer_tokens_total{direction="device_to_host"})"), d(h.backup_tokens));
  EXPECT_EQ(m.at(R"(kvpool_transfer_tokens_total{direction="host_to_device"})"), d(h.load_tokens));
  EXPECT_EQ(m.at(R"(kvpool_transfer_tokens_total{direction="host_to_storage"})"), d(s.backup_pages) * page);
  EXPECT_EQ(m.at(R"(kvpool_transfer_tokens_total{direction="storage_to_host"})"), d(s.prefetch_loaded_tokens));
  EXPECT_EQ(m.at(R"(kvpool_transfer_bytes_total{direction="device_to_host"})"), d(h.bytes_to_host));
  EXPECT_EQ(m.at(R"(kvpool_transfer_bytes_total{direction="host_to_device"})"), d(h.bytes_to_device));
  EXPECT_EQ(m.at(R"(kvpool_transfer_bytes_total{direction="host_to_storage"})"), d(s.backup_bytes));
  EXPECT_EQ(m.at(R"(kvpool_transfer_bytes_total{direction="storage_to_host"})"), d(s.prefetch_bytes));
  EXPECT_EQ(m.at("kvpool_host_backup_errors_total"), d(h.backup_errors));
  EXPECT_EQ(m.at("kvpool_host_backups_skipped_total"), d(h.backups_skipped));
  EXPECT_EQ(m.at("kvpool_host_loads_refused_total"), d(h.loads_refused));
  EXPECT_EQ(m.at(R"(kvpool_prefix_hit_tokens_total{tier="storage"})"), d(s.storage_hit_tokens));
  EXPECT_EQ(m.at("kvpool_storage_backups_queued"), d(s.backups_queued));
  EXPECT_EQ(m.at("kvpool_storage_prefetches_running"), d(s.prefetches_running));
  EXPECT_EQ(m.at("kvpool_storage_prefetches_skipped_total"), d(s.prefetches_skipped));
  EXPECT_EQ(m.at("kvpool_storage_prefetches_revoked_total"), d(s.prefetches_revoked));
  EXPECT_EQ(m.at(R"(kvpool_storage_operation_errors_total{operation="put"})"), d(s.store_put_errors));
  EXPECT_EQ(m.at(R"(kvpool_storage_operation_errors_total{operation="get"})"), d(s.store_get_errors));
  EXPECT_EQ(m.at(R"(kvpool_storage_errors_total{kind="timeout"})"), d(s.store_timeouts));
  EXPECT_EQ(m.at(R"(kvpool_storage_errors_total{kind="server"})"), d(s.store_server_errors));
  EXPECT_EQ(m.at(R"(kvpool_storage_errors_total{kind="io"})"), d(s.store_io_errors));
  EXPECT_EQ(m.at("kvpool_storage_servers_ejected_total"), d(s.store_servers_ejected));
  EXPECT_EQ(m.at(R"(kvpool_storage_failed_pages_total{direction="host_to_storage"})"), d(s.backup_pages_failed));
  EXPECT_EQ(m.at(R"(kvpool_storage_failed_pages_total{direction="storage_to_host"})"), d(s.read_failures));
  EXPECT_EQ(m.at(R"(kvpool_storage_rejected_pages_total{reason="corrupt"})"), d(s.pages_corrupt));
  EXPECT_EQ(m.at(R"(kvpool_storage_rejected_pages_total{reason="truncated"})"), d(s.pages_truncated));
  EXPECT_EQ(m.at(R"(kvpool_storage_rejected_pages_total{reason="foreign"})"), d(s.pages_foreign));
  EXPECT_EQ(m.at("kvpool_storage_partial_values_total"), d(s.store_partial_values));
  EXPECT_EQ(m.at("kvpool_storage_evicted_values_total"), d(s.store_evicted));
}

// Pool a stores a prompt's pages; pool b (the same directory) prefetches them and a request
// loads them back: backups, prefetch, load-back and a storage hit, on both pools' metrics.
TEST(Metrics, HostAndStorageTiersAfterAWorkload) {
  kvtest::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  Pool a(tier_config(dir.path()));
  Pool b(tier_config(dir.path()));
  const std::vector<int32_t> prompt = kvtest::range(7, 40);
  kvtest::serve_request(a, prompt);  // flushed: every page stored
  Exposition ma = metrics(a);
  expect_pool_figures(a, ma);
  expect_tier_figures(a, ma);
  EXPECT_GT(ma.at(R"(kvpool_transfers_total{direction="device_to_host"})"), 0);
  EXPECT_GT(ma.at(R"(kvpool_transfer_bytes_total{direction="host_to_storage"})"), 0);

  EXPECT_GT(kvtest::prefetch_to_end(b, prompt), 0u);
  const kvseq_info info = kvtest::begin_and_check_kv(b, prompt);
  ASSERT_GT(info.storage_hit, 0u);
  Exposition mb = metrics(b);
  expect_pool_figures(b, mb);
  expect_tier_figures(b, mb);
  EXPECT_EQ(mb.at(R"(kvpool_prefix_hit_tokens_total{tier="storage"})"), d(info.storage_hit));
  EXPECT_EQ(mb.at(R"(kvpool_prefix_hit_tokens_total{tier="host"})"), d(info.host_hit - info.storage_hit));
  EXPECT_EQ(mb.at(R"(kvpool_prefix_hit_tokens_total{tier="device"})"), d(info.prefix_hit - info.host_hit));
  EXPECT_GT(mb.at(R"(kvpool_transfer_tokens_total{direction="storage_to_host"})"), 0);
  EXPECT_GT(mb.at(R"(kvpool_transfer_tokens_total{direction="host_to_device"})"), 0);

  // Host eviction shows up as such.
  size_t freed = 0;
  ASSERT_EQ(radix_evict(b, 64, &freed), KVPOOL_OK);
  ASSERT_EQ(kvhost_evict(b, 1000, &freed), KVPOOL_OK);
  EXPECT_GT(freed, 0u);
  mb = metrics(b);
  expect_tier_figures(b, mb);
  EXPECT_GE(mb.at(R"(kvpool_evicted_tokens_total{tier="host"})"), d(freed));
}

// swa and hybrid_linear pools: their second resource (window tokens, mamba states).
TEST(Metrics, SwaAndHybridPools) {
  Pool swa(kvtest::swa_radix_config(64, 32));
  Exposition m = metrics(swa);
  expect_pool_figures(swa, m);
  kvpool_stats s = pool_stats(swa);
  EXPECT_EQ(m.at("kvpool_window_capacity_tokens"), d(s.swa_capacity));
  EXPECT_EQ(m.at("kvpool_window_used_tokens"), d(s.swa_held));
  size_t evictable = 0, locked = 0;
  ASSERT_EQ(radix_state_sizes(swa, &evictable, &locked), KVPOOL_OK);
  EXPECT_EQ(m.at("kvpool_window_evictable_tokens"), d(evictable));
  EXPECT_EQ(m.at("kvpool_window_protected_tokens"), d(locked));
  EXPECT_TRUE(m.has("kvpool_window_evicted_tokens_total"));

  Pool hybrid(kvtest::hybrid_radix_config(64, 10));
  m = metrics(hybrid);
  expect_pool_figures(hybrid, m);
  s = pool_stats(hybrid);
  EXPECT_EQ(m.at("kvpool_mamba_capacity_states"), d(s.mamba_capacity));
  EXPECT_EQ(m.at("kvpool_mamba_used_states"), d(s.mamba_capacity - s.mamba_available));
  EXPECT_EQ(m.at(R"(kvpool_memory_bytes{kind="mamba"})"), d(s.mamba_bytes));
  EXPECT_TRUE(m.has("kvpool_mamba_evicted_states_total"));
  EXPECT_FALSE(m.has_family("kvpool_window_capacity_tokens"));
}

TEST(Metrics, BadInputFailsAndChangesNothing) {
  Pool pool(kvtest::mha_config(4, 64));
  char buf[64];
  size_t len = 0;
  EXPECT_EQ(kvpool_metrics_text(nullptr, buf, sizeof buf, &len), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("kvpool_metrics_text: pool is NULL or not a live kvpool handle"),
            std::string::npos)
      << kvpool_last_error();
  int not_a_pool = 0;
  EXPECT_EQ(kvpool_metrics_text(reinterpret_cast<const kvpool*>(&not_a_pool), buf, sizeof buf, &len),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_metrics_text(pool, buf, sizeof buf, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("text_len is NULL"), std::string::npos) << kvpool_last_error();
  EXPECT_EQ(kvpool_metrics_text(pool, nullptr, 10, &len), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("text is NULL but text_cap is 10"), std::string::npos);

  const std::string before = metrics_text(pool);
  // Too small, by one byte (no room for the NUL): the needed length, and the buffer untouched.
  std::vector<char> small(before.size(), 'x');
  len = 0;
  EXPECT_EQ(kvpool_metrics_text(pool, small.data(), small.size(), &len), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, before.size());
  EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](char c) { return c == 'x'; }));
  EXPECT_NE(std::string(kvpool_last_error()).find("text_cap is " + std::to_string(before.size())), std::string::npos)
      << kvpool_last_error();
  // Exactly enough.
  std::vector<char> exact(before.size() + 1, 'x');
  EXPECT_EQ(kvpool_metrics_text(pool, exact.data(), exact.size(), &len), KVPOOL_OK);
  EXPECT_EQ(std::string(exact.data()), before);
  // Reads changed nothing: not the text, not the stats, and the pool is consistent.
  EXPECT_EQ(metrics_text(pool), before);
  kvtest::expect_checked(pool, "after failed metrics calls");
  kvpool* destroyed = nullptr;
  const std::string json = kvtest::mha_config(1, 16);
  ASSERT_EQ(kvpool_create(json.data(), json.size(), &destroyed), KVPOOL_OK);
  kvpool_destroy(destroyed);
  EXPECT_EQ(kvpool_metrics_text(destroyed, buf, sizeof buf, &len), KVPOOL_ERR_INVALID_ARGUMENT);
}

}  // namespace
