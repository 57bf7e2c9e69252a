// The storage tier (L3) through the C API (storage.h, seq.h, host.h) on CPU pools with
// the file backend: backups after host copies land, prefetches into the host tier that
// kvseq_begin then loads back with the KV bytes intact, two pools sharing one store,
// namespaces and other models kept apart, damaged pages never loaded, the policies,
// bad input, and kvpool_check after every step.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "../support/storage_requests.hpp"
#include "../support/temp_dir.hpp"
#include "../unit/test_util.hpp"

namespace {

using kvtest::expect_consistent;
using kvtest::Pool;

using kvtest::TempDir;

// mha f32, 2 layers x 2 heads x 8, page 4, a host tier and a file store in `dir`.
std::string storage_config(const std::string& dir, const char* policy = "best_effort", int threshold = 8,
                           const char* layout = "layer_first", const char* model_name = "tiny",
                           int64_t device_tokens = 64) {
  return R"({"model": {"name": ")" + std::string(model_name) +
         R"(", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": 4,
      "max_total_tokens": )" + std::to_string(device_tokens) +
         R"(, "max_running_requests": 8, "max_context_len": 128}, "prefix_cache": {"kind": "radix"},
      "host_cache": {"ratio": 4, "headroom_bytes": 0, "layout": ")" + layout + R"(", "io_backend": ")" +
         (std::string(layout) == "page_first_direct" ? "direct" : "kernel") +
         R"("}, "storage": {"backend": "file", "path": ")" + dir + R"(", "prefetch_policy": ")" + policy +
         R"(", "prefetch_threshold_tokens": )" + std::to_string(threshold) + "}}";
}

std::vector<int32_t> tokens_from(int32_t first, size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = first + static_cast<int32_t>(i) * 3;
  return t;
}

TEST(StorageTier, SecondPoolLoadsWhatTheFirstStored) {
  TempDir dir;
  Pool a(storage_config(dir.path()));
  Pool b(storage_config(dir.path()));
  const std::vector<int32_t> prompt = tokens_from(11, 41);  // 10 whole pages and one token
  kvtest::serve_request(a, prompt);
  const kvstore_stats sa = kvtest::storage_stats(a);
  EXPECT_EQ(sa.backups, 1u);
  EXPECT_EQ(sa.backup_tokens, 40u);
  EXPECT_EQ(sa.backup_pages, 10u);
  EXPECT_EQ(sa.store_puts, 10u);
  EXPECT_EQ(sa.backup_pages_failed, 0u);
  EXPECT_EQ(sa.backups_queued, 0u);
  EXPECT_EQ(dir.files().size(), 10u);

  // Pool b has never seen the prompt: storage holds all 10 pages.
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt), 40u);
  const kvstore_stats sb = kvtest::storage_stats(b);
  EXPECT_EQ(sb.prefetches, 1u);
  EXPECT_EQ(sb.prefetch_tokens, 40u);
  EXPECT_EQ(sb.prefetch_hit_tokens, 40u);
  EXPECT_EQ(sb.prefetch_loaded_tokens, 40u);
  EXPECT_EQ(sb.prefetch_inserted_tokens, 40u);
  EXPECT_EQ(sb.prefetches_running, 0u);
  kvhost_stats h = KVHOST_STATS_INIT;
  ASSERT_EQ(kvhost_get_stats(b, &h), KVPOOL_OK);
  EXPECT_EQ(h.host_only_tokens, 40u);
  const kvseq_info info = kvtest::begin_and_check_kv(b, prompt);
  EXPECT_EQ(info.prefix_hit, 40u);
  EXPECT_EQ(info.host_hit, 40u);
  EXPECT_EQ(info.storage_hit, 40u);
  EXPECT_EQ(kvtest::storage_stats(b).storage_hit_tokens, 40u);
  // A second request loads from the device: no storage hit again.
  const kvseq_info again = kvtest::begin_and_check_kv(b, prompt);
  EXPECT_EQ(again.prefix_hit, 40u);
  EXPECT_EQ(again.host_hit, 0u);
  EXPECT_EQ(again.storage_hit, 0u);
  // Storing the same pages again (pool b backs up what it loaded) writes nothing new.
  ASSERT_EQ(kvstore_flush(b), KVPOOL_OK);
  EXPECT_EQ(dir.files().size(), 10u);
}

// Two processes, as two engine instances: a forked child creates its own pool, serves a
// prompt and flushes its backups to the shared directory, then exits; the parent's pool,
// created before the child ran, prefetches the prompt and loads the child's KV.
TEST(StorageTier, TwoProcessesShareOneStore) {
  TempDir dir;
  Pool parent(storage_config(dir.path()));
  const std::vector<int32_t> prompt = tokens_from(21, 41);
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child reports through its exit status only (gtest's assertions belong to the parent).
    kvpool* pool = nullptr;
    const std::string json = storage_config(dir.path());
    if (kvpool_create(json.data(), json.size(), &pool) != KVPOOL_OK) _exit(2);
    kvtest::serve_request(pool, prompt);
    kvstore_stats s = KVSTORE_STATS_INIT;
    const bool stored = kvstore_get_stats(pool, &s) == KVPOOL_OK && s.backup_pages == 10;
    kvpool_destroy(pool);
    _exit(stored && !::testing::Test::HasFailure() ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child could not serve and store the prompt";
  EXPECT_EQ(dir.files().size(), 10u);
  EXPECT_EQ(kvtest::prefetch_to_end(parent, prompt), 40u);
  const kvseq_info info = kvtest::begin_and_check_kv(parent, prompt);
  EXPECT_EQ(info.storage_hit, 40u);
}

TEST(StorageTier, PrefetchContinuesPastTheCachedPrefixAcrossLayouts) {
  TempDir dir;
  Pool a(storage_config(dir.path(), "best_effort", 8, "page_first"));
  Pool b(storage_config(dir.path(), "best_effort", 8, "page_head"));
  const std::vector<int32_t> prompt = tokens_from(5, 48);
  kvtest::serve_request(a, prompt);
  // b has the first 16 tokens itself; the prefetch asks for the other 32 only, and the
  // pages written from a page_first host tier load into a page_head one.
  kvtest::serve_request(b, std::vector<int32_t>(prompt.begin(), prompt.begin() + 16));
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt), 32u);
  EXPECT_EQ(kvtest::storage_stats(b).prefetch_tokens, 32u);
  const kvseq_info info = kvtest::begin_and_check_kv(b, prompt);
  EXPECT_EQ(info.prefix_hit, 44u);  // kvseq_begin matches all but the last token: whole pages of 47
  EXPECT_EQ(info.host_hit, 28u);
  EXPECT_EQ(info.storage_hit, 28u);
}

TEST(StorageTier, ModelsAndNamespacesDoNotShare) {
  TempDir dir;
  Pool a(storage_config(dir.path()));
  Pool other_model(storage_config(dir.path(), "best_effort", 8, "layer_first", "tiny-v2"));
  const std::vector<int32_t> prompt = tokens_from(7, 40);
  kvtest::serve_request(a, prompt, "lora-1");
  int32_t skipped = -1;
  // Another model: its keys differ, nothing is found, the prefetch is revoked.
  EXPECT_EQ(kvtest::prefetch_to_end(other_model, prompt, "lora-1", &skipped), 0u);
  EXPECT_EQ(skipped, KVSTORE_SKIP_NONE);
  EXPECT_EQ(kvtest::storage_stats(other_model).prefetches_revoked, 1u);
  EXPECT_EQ(kvtest::storage_stats(other_model).prefetch_hit_tokens, 0u);
  // The same model in another namespace: nothing either.
  Pool b(storage_config(dir.path()));
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt, "lora-2"), 0u);
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt, nullptr), 0u);
  EXPECT_EQ(kvtest::storage_stats(b).prefetches_revoked, 2u);
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt, "lora-1"), 40u);
  EXPECT_EQ(kvtest::begin_and_check_kv(b, prompt, "lora-1").storage_hit, 36u);
}

TEST(StorageTier, DamagedPagesAreNeverLoaded) {
  TempDir dir;
  Pool a(storage_config(dir.path()));
  const std::vector<int32_t> prompt = tokens_from(3, 40);
  kvtest::serve_request(a, prompt);
  // Damage every stored page in one byte of its payload: each read is rejected.
  for (const std::string& f : dir.files()) {
    const std::string path = dir.path() + "/" + f;
    FILE* fp = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(fp, nullptr);
    std::fseek(fp, 200, SEEK_SET);
    const int c = std::fgetc(fp);
    std::fseek(fp, 200, SEEK_SET);
    std::fputc(c ^ 0x5a, fp);
    std::fclose(fp);
  }
  Pool b(storage_config(dir.path()));
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt), 0u);
  const kvstore_stats s = kvtest::storage_stats(b);
  EXPECT_EQ(s.pages_corrupt, 1u) << "the prefetch stops at the first bad page";
  EXPECT_EQ(s.prefetch_loaded_tokens, 0u);
  EXPECT_EQ(kvtest::begin_and_check_kv(b, prompt).prefix_hit, 0u);
}

TEST(StorageTier, TruncatedPagesAreNeverLoaded) {
  TempDir dir;
  Pool a(storage_config(dir.path()));
  const std::vector<int32_t> prompt = tokens_from(5, 40);
  kvtest::serve_request(a, prompt);
  // Cut every stored page short by one byte of its payload: each read ends early.
  for (const std::string& f : dir.files()) {
    const std::string path = dir.path() + "/" + f;
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    ASSERT_EQ(truncate(path.c_str(), st.st_size - 1), 0);
  }
  Pool b(storage_config(dir.path()));
  EXPECT_EQ(kvtest::prefetch_to_end(b, prompt), 0u);
  const kvstore_stats s = kvtest::storage_stats(b);
  EXPECT_EQ(s.pages_truncated, 1u) << "the prefetch stops at the first bad page";
  EXPECT_EQ(s.pages_corrupt, 0u);
  EXPECT_EQ(s.prefetch_loaded_tokens, 0u);
  EXPECT_EQ(kvtest::begin_and_check_kv(b, prompt).prefix_hit, 0u);
}

TEST(StorageTier, SkipsAndBadInput) {
  TempDir dir;
  Pool b(storage_config(dir.path(), "wait_complete", 16));
  const std::vector<int32_t> prompt = tokens_from(1, 40);
  uint64_t id = 99;
  int32_t skipped = -1;
  // Below the threshold (12 tokens of whole pages < 16).
  ASSERT_EQ(kvstore_prefetch(b, prompt.data(), 13, nullptr, &id, &skipped), KVPOOL_OK);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(skipped, KVSTORE_SKIP_BELOW_THRESHOLD);
  EXPECT_EQ(kvtest::storage_stats(b).prefetches_skipped, 1u);
  // Bad input changes nothing.
  EXPECT_EQ(kvstore_prefetch(b, nullptr, 4, nullptr, &id, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvstore_prefetch(b, prompt.data(), prompt.size(), nullptr, nullptr, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
  EXPECT_EQ(kvstore_prefetch_poll(b, 12345, &info), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("prefetch 12345 is unknown or ended"), std::string::npos)
      << kvpool_last_error();
  EXPECT_EQ(kvstore_prefetch_end(b, 12345, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvstore_prefetch_info small = KVSTORE_PREFETCH_INFO_INIT;
  small.struct_size = 8;
  EXPECT_EQ(kvstore_prefetch_poll(b, 1, &small), KVPOOL_ERR_INVALID_ARGUMENT);
  kvstore_stats s = KVSTORE_STATS_INIT;
  s.struct_size = 4;
  EXPECT_EQ(kvstore_get_stats(b, &s), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvstore_get_stats(nullptr, &s), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvstore_flush(nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  expect_consistent(b);
  // wait_complete: a prefetch of pages nobody stored is revoked, and ready once done.
  ASSERT_EQ(kvstore_prefetch(b, prompt.data(), prompt.size(), nullptr, &id, &skipped), KVPOOL_OK);
  ASSERT_NE(id, 0u);
  do {
    ASSERT_EQ(kvstore_prefetch_poll(b, id, &info), KVPOOL_OK);
    EXPECT_EQ(info.ready, info.done) << "wait_complete is ready only when done";
  } while (!info.done);
  EXPECT_EQ(info.revoked, 1);
  EXPECT_EQ(info.asked_tokens, 40u);
  EXPECT_EQ(info.loaded_tokens, 0u);
  ASSERT_EQ(kvstore_prefetch_end(b, id, nullptr), KVPOOL_OK);
  EXPECT_EQ(kvstore_prefetch_end(b, id, nullptr), KVPOOL_ERR_INVALID_ARGUMENT) << "ended twice";
  expect_consistent(b);
  // Pools without the tier.
  Pool plain(kvtest::mha_config(4, 64));
  EXPECT_EQ(kvstore_prefetch(plain, prompt.data(), prompt.size(), nullptr, &id, nullptr), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvstore_get_stats(plain, &s), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvstore_flush(plain), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_EQ(kvstore_clear(plain), KVPOOL_ERR_UNSUPPORTED);
}

TEST(StorageTier, EndingEarlyKeepsWhatLandedAndAccountsForTheRest) {
  TempDir dir;
  Pool a(storage_config(dir.path(), "best_effort", 4, "layer_first", "tiny", 256));
  const std::vector<int32_t> prompt = tokens_from(9, 120);
  kvtest::serve_request(a, prompt);
  Pool b(storage_config(dir.path(), "best_effort", 4, "layer_first", "tiny", 256));
  uint64_t id = 0;
  ASSERT_EQ(kvstore_prefetch(b, prompt.data(), prompt.size(), nullptr, &id, nullptr), KVPOOL_OK);
  ASSERT_NE(id, 0u);
  // best_effort: ready at once; end it right away, whatever landed.
  kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
  ASSERT_EQ(kvstore_prefetch_poll(b, id, &info), KVPOOL_OK);
  EXPECT_EQ(info.ready, 1);
  uint64_t inserted = 0;
  ASSERT_EQ(kvstore_prefetch_end(b, id, &inserted), KVPOOL_OK);
  EXPECT_EQ(inserted % 4, 0u);
  EXPECT_LE(inserted, 120u);
  expect_consistent(b);
  ASSERT_EQ(kvstore_flush(b), KVPOOL_OK);  // the storage thread lets go of the rest
  kvhost_stats h = KVHOST_STATS_INIT;
  ASSERT_EQ(kvhost_get_stats(b, &h), KVPOOL_OK);
  EXPECT_EQ(h.host_only_tokens, inserted);
  expect_consistent(b);
  const kvseq_info got = kvtest::begin_and_check_kv(b, prompt);
  EXPECT_EQ(got.storage_hit, inserted == 120 ? 116u : inserted);
}

TEST(StorageTier, ClearRemovesThePages) {
  TempDir dir;
  Pool a(storage_config(dir.path()));
  kvtest::serve_request(a, tokens_from(2, 40));
  EXPECT_EQ(dir.files().size(), 10u);
  ASSERT_EQ(kvstore_clear(a), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(dir.files().size(), 0u);
  Pool b(storage_config(dir.path()));
  EXPECT_EQ(kvtest::prefetch_to_end(b, tokens_from(2, 40)), 0u);
}

}  // namespace
