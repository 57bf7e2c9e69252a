// Sizing: bytes per token and capacities, computed by hand here from the model
// shapes (docs/config.md "Sizing"; SGLang's model-runner arithmetic).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.hpp"

namespace {

const uint64_t GiB = uint64_t(1) << 30;

kvpool_plan_info must_plan(const std::string& json) {
  kvpool_plan_info p;
  std::string error;
  EXPECT_EQ(kvtest::plan(json, &p, &error), KVPOOL_OK) << error << "\n" << json;
  return p;
}

TEST(Plan, Llama31_8B_MhaBf16) {
  // 32 layers, 8 KV heads of 128, bf16: K and V per layer.
  const uint64_t cell = 32 * 8 * 128 * 2 /*K,V*/ * 2 /*bytes*/;
  ASSERT_EQ(cell, 131072u);  // 128 KiB per token (MODELS.md)
  const uint64_t budget = 50 * GiB;
  kvpool_plan_info p = must_plan(R"({"model": {"num_layers": 32, "kv_heads": 8, "head_dim": 128},
      "pool": {"kv_dtype": "bf16", "page_size": 16, "memory_bytes": 53687091200, "max_context_len": 131076}})");
  const uint64_t tokens = budget / cell / 16 * 16;
  EXPECT_EQ(p.kv_bytes_per_token, cell);
  EXPECT_EQ(p.full_bytes_per_token, cell);
  EXPECT_EQ(p.swa_bytes_per_token, 0u);
  EXPECT_EQ(p.max_total_tokens, tokens);
  EXPECT_EQ(p.max_total_tokens, 409600u);
  EXPECT_EQ(p.num_pages, tokens / 16);
  EXPECT_EQ(p.kv_heads_per_rank, 8u);
  // Default running requests: min(max(int(tokens / context_len * 512), 2048), 4096).
  const uint64_t by_tokens = static_cast<uint64_t>(double(tokens) / 131076 * 512);
  EXPECT_EQ(p.max_running_requests, std::min<uint64_t>(std::max<uint64_t>(by_tokens, 2048), 4096));
  EXPECT_EQ(p.req_rows, p.max_running_requests + 1);  // + reserved row 0
  EXPECT_EQ(p.kv_memory_bytes, (tokens + 16) * cell);  // + the padding page
  EXPECT_EQ(p.req_table_bytes, uint64_t(p.req_rows) * 131076 * 4);
  EXPECT_EQ(p.total_memory_bytes, p.kv_memory_bytes + p.req_table_bytes);
}

TEST(Plan, MaxTotalTokensOnlyLowersTheBudget) {
  const std::string model = R"("model": {"num_layers": 32, "kv_heads": 8, "head_dim": 128})";
  kvpool_plan_info low = must_plan("{" + model + R"(, "pool": {"page_size": 16, "memory_bytes": 53687091200,
      "max_total_tokens": 1000, "max_running_requests": 8, "max_context_len": 4096}})");
  EXPECT_EQ(low.max_total_tokens, 992u);  // rounded down to whole pages
  kvpool_plan_info high = must_plan("{" + model + R"(, "pool": {"page_size": 16, "memory_bytes": 53687091200,
      "max_total_tokens": 100000000, "max_running_requests": 8, "max_context_len": 4096}})");
  EXPECT_EQ(high.max_total_tokens, 409600u);
}

TEST(Plan, DeepSeekV3_MlaBf16) {
  // 61 layers, one row of kv_lora_rank 512 + rope 64 per token and layer.
  const uint64_t cell = 61 * (512 + 64) * 2;
  ASSERT_EQ(cell, 70272u);
  kvpool_plan_info p = must_plan(R"({"model": {"num_layers": 61, "attention": "mla", "kv_lora_rank": 512,
      "qk_rope_head_dim": 64}, "pool": {"page_size": 64, "memory_bytes": 42949672960,
      "max_running_requests": 128, "max_context_len": 163844}})");
  const uint64_t tokens = 40 * GiB / cell / 64 * 64;
  EXPECT_EQ(p.kv_bytes_per_token, cell);
  EXPECT_EQ(p.max_total_tokens, tokens);
  EXPECT_EQ(p.num_pages, tokens / 64);
  EXPECT_EQ(p.kv_heads_per_rank, 0u);
  EXPECT_EQ(p.kv_memory_bytes, (tokens + 64) * cell);
}

TEST(Plan, MlaFp8AndFp4) {
  const std::string model = R"("model": {"num_layers": 61, "attention": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64})";
  auto with_dtype = [&](const char* dtype) {
    return must_plan("{" + model + R"(, "pool": {"kv_dtype": ")" + dtype +
                     R"(", "max_total_tokens": 1024, "max_running_requests": 4, "max_context_len": 256}})");
  };
  EXPECT_EQ(with_dtype("fp8_e4m3").kv_bytes_per_token, 61u * 576);
  EXPECT_EQ(with_dtype("f32").kv_bytes_per_token, 61u * 576 * 4);
  // fp4: two values per byte plus one uint8 scale per 16 values.
  EXPECT_EQ(with_dtype("fp4_e2m1").kv_bytes_per_token, 61u * (576 / 2 + 576 / 16));
}

TEST(Plan, NsaAddsIndexerBytes) {
  const std::string model = R"("model": {"num_layers": 61, "attention": "nsa", "kv_lora_rank": 512, "qk_rope_head_dim": 64})";
  const std::string pool = R"("pool": {"page_size": 64, "max_total_tokens": 6400, "max_running_requests": 4, "max_context_len": 256, "kv_dtype": )";
  // bf16: MLA row + indexer (128 fp8 key bytes + one fp32 scale) = 78,324 B (MODELS.md, DeepSeek-V3.2).
  kvpool_plan_info bf16 = must_plan("{" + model + "," + pool + "\"bf16\"}}");
  EXPECT_EQ(bf16.kv_bytes_per_token, 61u * ((512 + 64) * 2 + 128 + 4));
  EXPECT_EQ(bf16.kv_bytes_per_token, 78324u);
  // fp8_e4m3: packed row = 512 fp8 + 4 fp32 scales + 64 bf16 rope = 656 bytes.
  kvpool_plan_info fp8 = must_plan("{" + model + "," + pool + "\"fp8_e4m3\"}}");
  EXPECT_EQ(fp8.kv_bytes_per_token, 61u * (512 + 512 / 128 * 4 + 64 * 2 + 128 + 4));
  // Indexer buffer is per page: ((size + page + 1) / page) pages of page * 132 bytes.
  const uint64_t rows = 6400 + 64;
  EXPECT_EQ(fp8.kv_memory_bytes, 61u * (rows * 656 + (rows + 1) / 64 * 64 * 132));
}

TEST(Plan, Llama4StyleSwaSplitsByRatio) {
  // 48 layers: every 4th is global (12 full), 36 chunked/sliding; 8 KV heads of 128 over tp 8.
  kvpool_plan_info p = must_plan(R"({"model": {"num_layers": 48, "attention": "swa", "kv_heads": 8, "head_dim": 128,
      "sliding_window": 8192, "swa_layer_pattern": "SSSF"},
      "pool": {"memory_bytes": 42949672960, "swa_full_tokens_ratio": 0.8, "max_running_requests": 64,
               "max_context_len": 1048580}, "parallel": {"tp_size": 8}})");
  const uint64_t per_layer = 2 * 1 * 128 * 2;  // one head per rank
  EXPECT_EQ(p.kv_heads_per_rank, 1u);
  EXPECT_EQ(p.kv_bytes_per_token, 48 * per_layer);  // cell size counts every layer before the split
  EXPECT_EQ(p.full_bytes_per_token, 12 * per_layer);
  EXPECT_EQ(p.swa_bytes_per_token, 36 * per_layer);
  const uint64_t all_layer_tokens = (40 * GiB / (48 * per_layer)) * 48;
  const uint64_t full = static_cast<uint64_t>(double(all_layer_tokens) / (0.8 * 36 + 12));
  const uint64_t swa = static_cast<uint64_t>(double(full) * 0.8);
  EXPECT_EQ(p.max_total_tokens, full);
  EXPECT_EQ(p.swa_tokens, swa);
  EXPECT_EQ(full, 2056030u);
  EXPECT_EQ(swa, 1644824u);
  EXPECT_EQ(p.kv_memory_bytes, (full + 1) * 12 * per_layer + (swa + 1) * 36 * per_layer);
}

TEST(Plan, Qwen3NextStyleHybridCountsFullLayersAndMambaState) {
  // 48 layers, full attention at 3, 7, ..., 47 (12 layers), 2 KV heads of 256; 36 Gated-DeltaNet layers.
  const uint64_t cell = 12 * 2 * 256 * 2 * 2;
  ASSERT_EQ(cell, 24576u);  // 24 KiB (MODELS.md)
  const uint64_t state = 36 * (8192 * 3 * 2 /*bf16 conv*/ + 32 * 128 * 128 * 4 /*f32 ssm*/);
  const std::string model = R"("model": {"num_layers": 48, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 256,
      "full_attention_layers": [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47],
      "mamba": {"conv_shape": [8192, 3], "ssm_shape": [32, 128, 128], "conv_dtype": "bf16", "ssm_dtype": "f32"}})";
  kvpool_plan_info p = must_plan("{" + model + R"(, "pool": {"memory_bytes": 42949672960,
      "mamba_full_memory_ratio": 0.9, "max_running_requests": 48, "max_context_len": 262148}})");
  EXPECT_EQ(p.kv_bytes_per_token, cell);
  EXPECT_EQ(p.mamba_layers, 36u);
  EXPECT_EQ(p.mamba_state_bytes, state);
  // mamba_mem / kv_mem = 0.9 over the budget.
  const long double budget = 40.0L * GiB;
  const long double mamba_mem = budget * 0.9L / 1.9L;
  EXPECT_EQ(p.mamba_slots, static_cast<uint64_t>(std::floor(mamba_mem / state)));
  EXPECT_EQ(p.mamba_slots, 263u);
  EXPECT_EQ(p.max_total_tokens, static_cast<uint64_t>(std::floor((budget - mamba_mem) / cell)));
  EXPECT_EQ(p.mamba_memory_bytes, (p.mamba_slots + 1) * state);  // + padding slot

  // With a token capacity instead of a budget, mamba memory = ratio x KV memory.
  kvpool_plan_info t = must_plan("{" + model + R"(, "pool": {"max_total_tokens": 100000,
      "max_running_requests": 4, "max_context_len": 4096}})");
  EXPECT_EQ(t.mamba_slots, static_cast<uint64_t>(std::floor(100000.0L * cell * 0.9L / state)));

  // Running requests are capped by mamba slots: 5 per request with the radix cache, 1 without.
  kvpool_plan_info d = must_plan("{" + model + R"(, "pool": {"memory_bytes": 42949672960, "max_context_len": 262148}})");
  EXPECT_EQ(d.max_running_requests, 263u / 5);
  kvpool_plan_info fixed = must_plan("{" + model + R"(, "pool": {"memory_bytes": 42949672960, "mamba_cache_size": 40,
      "max_running_requests": 40, "max_context_len": 4096}, "prefix_cache": {"kind": "none"}})");
  EXPECT_EQ(fixed.mamba_slots, 40u);
  EXPECT_EQ(fixed.max_total_tokens, static_cast<uint64_t>((40 * GiB - 40 * state) / cell));
  kvpool_plan_info info;
  std::string error;
  EXPECT_EQ(kvtest::plan("{" + model + R"(, "pool": {"memory_bytes": 42949672960, "max_running_requests": 64,
      "max_context_len": 4096}})", &info, &error), KVPOOL_ERR_CONFIG);
  EXPECT_NE(error.find("$.pool.max_running_requests: got 64, expected at most 52"), std::string::npos) << error;
}

TEST(Plan, Fp8AndFp4Mha) {
  const std::string model = R"("model": {"num_layers": 32, "kv_heads": 8, "head_dim": 128})";
  auto with_dtype = [&](const char* dtype) {
    return must_plan("{" + model + R"(, "pool": {"kv_dtype": ")" + dtype +
                     R"(", "max_total_tokens": 1024, "max_running_requests": 4, "max_context_len": 256}})");
  };
  EXPECT_EQ(with_dtype("fp8_e4m3").kv_bytes_per_token, 32u * 2 * 1024);
  EXPECT_EQ(with_dtype("fp8_e5m2").kv_bytes_per_token, 32u * 2 * 1024);
  EXPECT_EQ(with_dtype("f16").kv_bytes_per_token, 32u * 2 * 1024 * 2);
  EXPECT_EQ(with_dtype("fp4_e2m1").kv_bytes_per_token, 32u * 2 * (1024 / 2 + 1024 / 16));
}

TEST(Plan, DoubleSparseAddsLabels) {
  kvpool_plan_info p = must_plan(R"({"model": {"num_layers": 4, "attention": "double_sparse", "kv_heads": 8,
      "head_dim": 128, "heavy_channels": 16}, "pool": {"page_size": 4, "max_total_tokens": 1024,
      "max_running_requests": 4, "max_context_len": 256}})");
  const uint64_t row = 8 * 128 * 2, label = 8 * 16 * 2;
  EXPECT_EQ(p.kv_bytes_per_token, 4 * (2 * row + label));
  EXPECT_EQ(p.kv_memory_bytes, 4 * ((1024 + 4) * 2 * row + (1024 + 1) * label));  // labels: size + 1 rows
}

TEST(Plan, TensorAndPipelineParallelShards) {
  const std::string model = R"("model": {"num_layers": 32, "kv_heads": 8, "head_dim": 128})";
  const std::string pool = R"("pool": {"max_total_tokens": 1024, "max_running_requests": 4, "max_context_len": 256})";
  EXPECT_EQ(must_plan("{" + model + "," + pool + R"(, "parallel": {"tp_size": 4}})").kv_heads_per_rank, 2u);
  // More ranks than heads: each rank keeps one replicated head.
  EXPECT_EQ(must_plan("{" + model + "," + pool + R"(, "parallel": {"tp_size": 16}})").kv_heads_per_rank, 1u);
  kvpool_plan_info stage = must_plan("{" + model + "," + pool + R"(, "parallel": {"start_layer": 8, "end_layer": 23}})");
  EXPECT_EQ(stage.num_layers, 16u);
  EXPECT_EQ(stage.kv_bytes_per_token, 16u * 8 * 128 * 2 * 2);
}

TEST(Plan, PdDecodePreAllocatesRows) {
  const std::string model = R"("model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16})";
  auto rows = [&](int requests, const char* mode) {
    return must_plan("{" + model + R"(, "pool": {"max_total_tokens": 1024, "max_context_len": 64,
        "disaggregation_mode": ")" + mode + R"(", "max_running_requests": )" + std::to_string(requests) + "}}")
        .req_rows;
  };
  EXPECT_EQ(rows(16, "decode"), 16u + 1 + 32);
  EXPECT_EQ(rows(32, "decode"), 32u + 1 + 64);
  EXPECT_EQ(rows(33, "decode"), 33u + 1);  // no pre-allocation above 32 requests
  EXPECT_EQ(rows(16, "prefill"), 16u + 1);
  EXPECT_EQ(rows(16, "none"), 16u + 1);
}

TEST(Plan, TooSmallBudgetIsAConfigError) {
  kvpool_plan_info p;
  std::string error;
  EXPECT_EQ(kvtest::plan(R"({"model": {"num_layers": 32, "kv_heads": 8, "head_dim": 128},
      "pool": {"page_size": 16, "memory_bytes": 1000000, "max_context_len": 256}})", &p, &error), KVPOOL_ERR_CONFIG);
  EXPECT_NE(error.find("not enough memory"), std::string::npos) << error;
  EXPECT_NE(error.find("131072 bytes per token"), std::string::npos) << error;
}

TEST(Plan, MemFractionUsesHostMemoryOnCpu) {
  kvpool_plan_info p = must_plan(R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16},
      "pool": {"mem_fraction": 1.0, "max_running_requests": 4, "max_context_len": 64}})");
  // With fraction 1 the budget is the host's available memory: positive, and below its total.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t total_kib = 0;
  while (meminfo >> key) {
    if (key == "MemTotal:") meminfo >> total_kib;
  }
  EXPECT_GT(p.max_total_tokens, 0u);
  EXPECT_LE(p.max_total_tokens * p.kv_bytes_per_token, total_kib * 1024);
}

TEST(Plan, EveryExampleConfigPlans) {
  DIR* dir = opendir(KVPOOL_EXAMPLE_CONFIG_DIR);
  ASSERT_NE(dir, nullptr);
  int count = 0;
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.size() < 5 || name.substr(name.size() - 5) != ".json") continue;
    std::ifstream file(std::string(KVPOOL_EXAMPLE_CONFIG_DIR) + "/" + name);
    std::stringstream text;
    text << file.rdbuf();
    kvpool_plan_info p;
    std::string error;
    EXPECT_EQ(kvtest::plan(text.str(), &p, &error), KVPOOL_OK) << name << ": " << error;
    EXPECT_GT(p.max_total_tokens, 0u) << name;
    ++count;
  }
  closedir(dir);
  EXPECT_GE(count, 5);
}

}  // namespace
