// The storage tier on CUDA pools: a pool's pages reach storage only after its device ->
// host copies have landed (asynchronous here, unlike on CPU pools), with copies in flight
// while requests come and go; a second CUDA pool (and a CPU pool) prefetches them, loads
// them back layer by layer and reads the same KV bytes. kvpool_check after every step.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "gpu_test_env.hpp"
#include "kvpool/kvpool.h"

namespace {

struct PoolDeleter {
  void operator()(kvpool* p) const { kvpool_destroy(p); }
};
using PoolPtr = std::unique_ptr<kvpool, PoolDeleter>;

std::string config(const char* device, const std::string& dir) {
  return std::string(R"({"model": {"name": "tiny", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {)") + device +
         R"("kv_dtype": "f32", "page_size": 4, "max_total_tokens": 96, "max_running_requests": 8,
         "max_context_len": 64}, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 3, "headroom_bytes": 0,
         "layout": "page_first"}, "storage": {"backend": "file", "path": ")" + dir +
         R"(", "prefetch_threshold_tokens": 8}})";
}

PoolPtr make(const std::string& json) {
  kvpool* p = nullptr;
  EXPECT_EQ(kvpool_create(json.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  return PoolPtr(p);
}

void expect_consistent(kvpool* pool, const char* where) {
  char report[4096];
  ASSERT_EQ(kvpool_check(pool, report, sizeof report), KVPOOL_OK) << where << ":\n" << report;
}

std::vector<int32_t> prompt(int32_t group, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = 1000 * group + static_cast<int32_t>(i);
  return t;
}

TEST(GpuStorageTier, PagesStoredAfterAsyncCopiesLoadIntoOtherPools) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  char tmpl[] = "/tmp/kvpool-gpu-storage-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  PoolPtr writer = make(config(R"("device": "cuda:0", )", dir));
  ASSERT_NE(writer, nullptr);
  // Eight prompts of 40 tokens (10 pages each) through a 96-token device pool: device
  // eviction under way, copies in flight while the next requests run.
  for (int32_t g = 1; g <= 8; ++g) {
    const std::vector<int32_t> t = prompt(g, 41);
    uint64_t seq = 0;
    size_t cached = 0;
    ASSERT_EQ(kvseq_begin(writer.get(), t.data(), t.size(), nullptr, &seq, &cached), KVPOOL_OK) << kvpool_last_error();
    const int64_t chunk = static_cast<int64_t>(t.size() - cached);
    std::vector<int64_t> slots(static_cast<size_t>(chunk));
    ASSERT_EQ(kvseq_extend(writer.get(), &seq, 1, &chunk, 1, slots.data(), slots.size()), KVPOOL_OK)
        << kvpool_last_error();
    const std::vector<uint64_t> tags = kvtest::prefix_tags(t, t.size());
    kvtest::write_tier_kv(writer.get(), slots, std::vector<uint64_t>(tags.begin() + static_cast<long>(cached), tags.end()));
    ASSERT_EQ(kvseq_finish(writer.get(), seq, t.size()), KVPOOL_OK) << kvpool_last_error();
    expect_consistent(writer.get(), "writer");
    // Every other prompt the queued backups are written: the host tier (73 pages) never
    // fills with pages still pinned by backups, so every page reaches storage.
    if (g % 2 == 0) {
      ASSERT_EQ(kvstore_flush(writer.get()), KVPOOL_OK) << kvpool_last_error();
    }
  }
  ASSERT_EQ(kvstore_flush(writer.get()), KVPOOL_OK) << kvpool_last_error();
  kvstore_stats ws = KVSTORE_STATS_INIT;
  ASSERT_EQ(kvstore_get_stats(writer.get(), &ws), KVPOOL_OK);
  EXPECT_EQ(ws.backup_pages, 80u) << "every page of the eight prompts, once its host copy landed";
  EXPECT_EQ(ws.backup_pages_failed, 0u);
  expect_consistent(writer.get(), "writer after flush");

  // A CUDA pool with the device free list and a CPU pool read them back.
  for (const char* device : {R"("device": "cuda:0", "free_list": "device", )", ""}) {
    PoolPtr reader = make(config(device, dir));
    ASSERT_NE(reader, nullptr);
    for (int32_t g : {3, 8}) {
      const std::vector<int32_t> t = prompt(g, 41);
      uint64_t id = 0;
      ASSERT_EQ(kvstore_prefetch(reader.get(), t.data(), t.size(), nullptr, &id, nullptr), KVPOOL_OK)
          << kvpool_last_error();
      ASSERT_NE(id, 0u);
      kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
      do {
        ASSERT_EQ(kvstore_prefetch_poll(reader.get(), id, &info), KVPOOL_OK);
      } while (!info.done);
      uint64_t inserted = 0;
      ASSERT_EQ(kvstore_prefetch_end(reader.get(), id, &inserted), KVPOOL_OK);
      EXPECT_EQ(inserted, 40u);
      int32_t set = 0;
      ASSERT_EQ(kvhost_next_load_set(reader.get(), &set), KVPOOL_OK);
      uint64_t seq = 0;
      size_t cached = 0;
      ASSERT_EQ(kvseq_begin(reader.get(), t.data(), t.size(), nullptr, &seq, &cached), KVPOOL_OK) << kvpool_last_error();
      for (int layer = 0; layer < 2; ++layer) ASSERT_EQ(kvhost_wait_layer(reader.get(), set, layer, nullptr), KVPOOL_OK);
      kvseq_info si = KVSEQ_INFO_INIT;
      ASSERT_EQ(kvseq_get_info(reader.get(), seq, &si), KVPOOL_OK);
      EXPECT_EQ(si.storage_hit, 40u);
      std::vector<int64_t> held(t.size());
      size_t n = 0;
      ASSERT_EQ(kvseq_get_slots(reader.get(), seq, held.data(), held.size(), &n), KVPOOL_OK);
      ASSERT_EQ(n, 40u);
      held.resize(n);
      kvtest::expect_tier_kv(reader.get(), held, kvtest::prefix_tags(t, n), "reader");
      ASSERT_EQ(kvseq_abort(reader.get(), seq), KVPOOL_OK);
      expect_consistent(reader.get(), "reader");
    }
  }
  ASSERT_EQ(kvstore_clear(writer.get()), KVPOOL_OK);
  rmdir(dir.c_str());
}

}  // namespace
