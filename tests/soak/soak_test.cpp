// Soak: the randomized kvseq workload (tests/unit/seq_test_util.hpp) for many steps on
// every pool family that has kvseq, with kvpool_check, the accounting identity and the
// "a failed call changed nothing" picture after every step.
//
// KVPOOL_SOAK_STEPS sets the steps per workload (default 20,000: the CI run). The
// recorded long run (docs/reliability.md) is KVPOOL_SOAK_STEPS=1000000.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "seq_test_util.hpp"

namespace {

using kvtest::Pool;

int soak_steps() {
  const char* env = std::getenv("KVPOOL_SOAK_STEPS");
  if (env == nullptr || *env == '\0') return 20000;
  const long n = std::strtol(env, nullptr, 10);
  return n > 0 ? static_cast<int>(n) : 20000;
}

std::string mha_radix(int page, int64_t tokens) {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": 12, "max_context_len": 512}, "prefix_cache": {"kind": "radix"}})";
}

std::string mla_radix(int page, int64_t tokens) {
  return R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 32, "qk_rope_head_dim": 16},
      "pool": {"kv_dtype": "bf16", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": 12, "max_context_len": 512}, "prefix_cache": {"kind": "radix", "eviction": "lfu"}})";
}

// Runs the workload, requires every operation kind to have happened, prints the counts.
void soak(kvpool* pool, unsigned seed, size_t max_live, int shared, int own, const std::string& label,
          int64_t max_chunk = 0) {
  const int steps = soak_steps();
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, int> seen = kvtest::random_workload(pool, seed, steps, max_live, shared, own, label, max_chunk);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(::testing::Test::HasFailure()) << label;
  for (const char* op : {"begin", "extend", "extend-oom", "decode", "finish", "abort", "end"}) {
    EXPECT_GT(seen[op], 0) << op << " never happened in " << label;
  }
  std::string counts;
  for (const auto& [op, n] : seen) counts += op + "=" + std::to_string(n) + " ";
  std::printf("soak %s: %d steps in %.1f s (%.1f us/step): %s\n", label.c_str(), steps, secs, 1e6 * secs / steps,
              counts.c_str());
}

TEST(Soak, MhaTokenRadix) {
  Pool pool(mha_radix(1, 96));
  soak(pool, 1, 12, 40, 8, "mha page 1", 7);
}

TEST(Soak, MhaPagedRadix) {
  Pool pool(mha_radix(16, 48 * 16));
  soak(pool, 2, 12, 64, 40, "mha page 16", 24);
}

TEST(Soak, MlaPagedRadixLfu) {
  Pool pool(mla_radix(4, 160));
  soak(pool, 3, 12, 40, 12, "mla page 4", 9);
}

TEST(Soak, SwaRadix) {
  Pool pool(kvtest::swa_radix_config(160, 64, 4, 8, 512));
  soak(pool, 4, 9, 40, 6, "swa window 4", 5);
}

TEST(Soak, HybridLinearRadix) {
  Pool pool(kvtest::hybrid_radix_config(128, 20, 4, 512));
  soak(pool, 5, 8, 40, 6, "hybrid_linear", 5);
}

}  // namespace
