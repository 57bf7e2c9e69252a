// Configuration validation: every bad document is rejected with KVPOOL_ERR_CONFIG
// and a message naming the JSON path, the value found and what was expected.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "test_util.hpp"

namespace {

const char* kModel = R"("model": {"num_layers": 4, "kv_heads": 2, "head_dim": 16})";
const char* kPool = R"("pool": {"max_total_tokens": 1024, "max_running_requests": 4, "max_context_len": 256})";

std::string doc(const std::string& model, const std::string& pool, const std::string& extra = "") {
  return "{" + model + "," + pool + (extra.empty() ? "" : "," + extra) + "}";
}

// Expects a config error whose message contains every fragment.
void expect_config_error(const std::string& json, std::initializer_list<const char*> fragments) {
  kvpool_plan_info out;
  std::string error;
  EXPECT_EQ(kvtest::plan(json, &out, &error), KVPOOL_ERR_CONFIG) << json;
  for (const char* f : fragments) EXPECT_NE(error.find(f), std::string::npos) << "missing '" << f << "' in: " << error;
}

TEST(Config, MinimalDocumentUsesDefaults) {
  kvpool_plan_info p;
  ASSERT_EQ(kvtest::plan(doc(kModel, kPool), &p), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(p.page_size, 1u);                 // default page size
  EXPECT_EQ(p.kv_bytes_per_token, 4u * 2 * 2 * 16 * 2);  // default attention mha, dtype bf16
  EXPECT_EQ(p.num_layers, 4u);
}

TEST(Config, MalformedJson) {
  expect_config_error("{\"model\": {", {"$: malformed JSON near byte"});
  expect_config_error("", {"$: malformed JSON"});
  expect_config_error("[1, 2]", {"$: got an array, expected a JSON object"});
  expect_config_error("42", {"$: got 42, expected a JSON object"});
}

TEST(Config, JsonNeedNotBeNulTerminated) {
  std::string json = doc(kModel, kPool);
  std::string padded = json + "garbage that is not JSON";
  kvpool_plan_info p = KVPOOL_PLAN_INFO_INIT;
  EXPECT_EQ(kvpool_plan(padded.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error();
}

TEST(Config, UnknownKeysAreErrors) {
  expect_config_error(doc(kModel, kPool, R"("prefix_cach": {})"), {"$.prefix_cach: unknown key", "prefix_cache"});
  expect_config_error(doc(R"("model": {"num_layers": 4, "kv_heads": 2, "head_dim": 16, "kv_head": 2})", kPool),
                      {"$.model.kv_head: unknown key"});
  expect_config_error(doc(kModel, R"("pool": {"max_total_tokens": 1024, "max_context_len": 256, "page": 4})"),
                      {"$.pool.page: unknown key"});
}

TEST(Config, DuplicateKeysAreErrors) {
  expect_config_error(
      doc(kModel, R"("pool": {"max_total_tokens": 1024, "max_total_tokens": 2048, "max_context_len": 256})"),
      {"$.pool.max_total_tokens: key given twice"});
}

TEST(Config, WrongTypesNameThePathAndTheValue) {
  expect_config_error(doc(R"("model": {"num_layers": "32", "kv_heads": 2, "head_dim": 16})", kPool),
                      {"$.model.num_layers: got \"32\"", "expected an integer in [1, 4096]"});
  expect_config_error(doc(R"("model": {"num_layers": 4.5, "kv_heads": 2, "head_dim": 16})", kPool),
                      {"$.model.num_layers: got 4.5"});
  expect_config_error(doc(kModel, kPool, R"("prefix_cache": {"events": "yes"})"),
                      {"$.prefix_cache.events: got \"yes\", expected true or false"});
  expect_config_error(doc(R"("model": 3)", kPool), {"$.model: got 3, expected an object"});
}

// pool.thread_safe (docs/services.md#threading): a boolean, false when absent.
TEST(Config, ThreadSafeIsABoolean) {
  const std::string base = R"("pool": {"max_total_tokens": 1024, "max_running_requests": 4, "max_context_len": 256)";
  for (const char* value : {"true", "false"}) {
    kvpool_plan_info p;
    EXPECT_EQ(kvtest::plan(doc(kModel, base + ", \"thread_safe\": " + value + "}"), &p), KVPOOL_OK)
        << value << ": " << kvpool_last_error();
  }
  expect_config_error(doc(kModel, base + R"(, "thread_safe": "yes"})"),
                      {"$.pool.thread_safe: got \"yes\", expected true or false"});
  expect_config_error(doc(kModel, base + R"(, "thread_safe": 1})"), {"$.pool.thread_safe: got 1, expected true or false"});
  expect_config_error(doc(kModel, base + R"(, "thread_safe": null})"), {"$.pool.thread_safe: got null", "true or false"});
  expect_config_error(doc(kModel, base + R"(, "thread_safe": true, "thread_safe": true})"),
                      {"$.pool.thread_safe: key given twice"});
}

TEST(Config, RequiredKeys) {
  expect_config_error("{" + std::string(kPool) + "}", {"$.model: missing, expected an object"});
  expect_config_error(doc(R"("model": {"kv_heads": 2, "head_dim": 16})", kPool), {"$.model.num_layers: missing"});
  expect_config_error(doc(R"("model": {"num_layers": 4, "head_dim": 16})", kPool), {"$.model.kv_heads: missing"});
  expect_config_error(doc(kModel, R"("pool": {"max_total_tokens": 1024})"), {"$.pool.max_context_len: missing"});
  expect_config_error(doc(kModel, R"("pool": {"max_context_len": 256})"),
                      {"$.pool: got no capacity", "max_total_tokens, memory_bytes or mem_fraction"});
}

TEST(Config, PageSizeMustBeAPowerOfTwo) {
  expect_config_error(doc(kModel, R"("pool": {"page_size": 12, "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.page_size: got 12, expected a power of two in [1, 4096]"});
  expect_config_error(doc(kModel, R"("pool": {"page_size": 0, "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.page_size: got 0"});
  expect_config_error(doc(kModel, R"("pool": {"page_size": 8192, "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.page_size: got 8192"});
}

TEST(Config, OutOfRangeValues) {
  expect_config_error(doc(kModel, R"("pool": {"mem_fraction": 1.5, "max_context_len": 256})"),
                      {"$.pool.mem_fraction: got 1.5, expected a number in (0, 1]"});
  expect_config_error(doc(kModel, R"("pool": {"mem_fraction": 0, "max_context_len": 256})"),
                      {"$.pool.mem_fraction: got 0"});
  expect_config_error(doc(kModel, R"("pool": {"max_total_tokens": -5, "max_context_len": 256})"),
                      {"$.pool.max_total_tokens: got -5"});
  expect_config_error(doc(kModel, R"("pool": {"page_size": 64, "max_total_tokens": 10, "max_context_len": 256})"),
                      {"$.pool.max_total_tokens: got 10, expected at least one page (64 tokens)"});
  expect_config_error(doc(kModel, kPool, R"("version": 2)"), {"$.version: got 2, expected an integer in [1, 1]"});
}

TEST(Config, ChoicesListTheAllowedValues) {
  expect_config_error(doc(kModel, R"("pool": {"kv_dtype": "fp16", "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.kv_dtype: got \"fp16\"", "\"bf16\"", "\"fp8_e4m3\"", "\"fp4_e2m1\""});
  expect_config_error(doc(R"("model": {"num_layers": 4, "attention": "gqa", "kv_heads": 2, "head_dim": 16})", kPool),
                      {"$.model.attention: got \"gqa\"", "\"hybrid_linear\""});
  expect_config_error(doc(kModel, kPool, R"("prefix_cache": {"eviction": "random"})"),
                      {"$.prefix_cache.eviction: got \"random\"", "\"priority\""});
  expect_config_error(doc(kModel, kPool, R"("prefix_cache": {"evict_rule": "lazy"})"),
                      {"$.prefix_cache.evict_rule: got \"lazy\"", "\"shortfall\"", "\"sglang\""});
  expect_config_error(doc(kModel, R"("pool": {"device": "gpu0", "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.device: got \"gpu0\", expected \"cpu\", \"cuda\" or \"cuda:N\""});
  expect_config_error(doc(kModel, R"("pool": {"device": "cuda:x", "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.device: got \"cuda:x\""});
}

TEST(Config, VariantSpecificKeys) {
  // mla without kv_lora_rank
  expect_config_error(doc(R"("model": {"num_layers": 4, "attention": "mla", "qk_rope_head_dim": 64})", kPool),
                      {"$.model.kv_lora_rank: missing"});
  // a key that the variant does not use
  expect_config_error(doc(R"("model": {"num_layers": 4, "kv_heads": 2, "head_dim": 16, "kv_lora_rank": 512})", kPool),
                      {"$.model.kv_lora_rank: not used by attention \"mha\""});
  expect_config_error(doc(kModel, R"("pool": {"swa_full_tokens_ratio": 0.5, "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.swa_full_tokens_ratio: only used with attention \"swa\""});
  // nsa rules
  expect_config_error(
      doc(R"("model": {"num_layers": 4, "attention": "nsa", "kv_lora_rank": 500, "qk_rope_head_dim": 64})",
          R"("pool": {"page_size": 64, "max_total_tokens": 1024, "max_context_len": 256})"),
      {"$.model.kv_lora_rank: got 500, expected a multiple of 128"});
  expect_config_error(
      doc(R"("model": {"num_layers": 4, "attention": "nsa", "kv_lora_rank": 512, "qk_rope_head_dim": 64})", kPool),
      {"$.pool.page_size: got 1, expected 64 for attention \"nsa\""});
  expect_config_error(
      doc(R"("model": {"num_layers": 4, "attention": "nsa", "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_head_dim": 64})",
          R"("pool": {"page_size": 64, "max_total_tokens": 1024, "max_context_len": 256})"),
      {"$.model.index_head_dim: got 64, expected 128"});
  // double sparse
  expect_config_error(
      doc(R"("model": {"num_layers": 4, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16, "heavy_channels": 32})",
          kPool),
      {"$.model.heavy_channels: got 32, expected at most head_dim (16)"});
}

TEST(Config, SwaLayers) {
  const std::string swa = R"("model": {"num_layers": 6, "attention": "swa", "kv_heads": 2, "head_dim": 16, "sliding_window": 8, )";
  expect_config_error(doc(swa + R"("swa_layers": [0, 1, 2, 1]})", kPool),
                      {"$.model.swa_layers[3]: got 1 again, expected each value once"});
  expect_config_error(doc(swa + R"("swa_layers": [0, 6]})", kPool),
                      {"$.model.swa_layers[1]: got 6, expected an integer in [0, 5]"});
  expect_config_error(doc(swa + R"("swa_layers": [0], "swa_layer_pattern": "SF"})", kPool),
                      {"got both of swa_layers and swa_layer_pattern"});
  expect_config_error(doc(swa + R"("swa_layer_pattern": "SXF"})", kPool),
                      {"$.model.swa_layer_pattern: got \"SXF\""});
  expect_config_error(doc(swa + R"("swa_layer_pattern": "S"})", kPool),
                      {"got 6 sliding-window layers of 6"});
  expect_config_error(doc(swa + R"("swa_layer_pattern": "SF"})",
                          R"("pool": {"page_size": 16, "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.page_size: got 16, expected 1 for attention \"swa\""});
  kvpool_plan_info p;
  ASSERT_EQ(kvtest::plan(doc(swa + R"("swa_layers": [0, 2, 4]})", kPool), &p), KVPOOL_OK) << kvpool_last_error();
  kvpool_plan_info q;
  ASSERT_EQ(kvtest::plan(doc(swa + R"("swa_layer_pattern": "SF"})", kPool), &q), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(p.max_total_tokens, q.max_total_tokens) << "list and pattern describe the same layers";
  EXPECT_EQ(p.swa_tokens, q.swa_tokens);
}

TEST(Config, HybridLinearNeedsMambaAndLayers) {
  const std::string base = R"("model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 16, )";
  const std::string mamba = R"("mamba": {"conv_shape": [64, 3], "ssm_shape": [4, 16, 16]})";
  expect_config_error(doc(base + mamba + "}", kPool), {"$.model.full_attention_layers: missing"});
  expect_config_error(doc(base + R"("full_attention_layers": [3]})", kPool), {"$.model.mamba: missing"});
  expect_config_error(doc(base + R"("full_attention_layers": [3, 3], )" + mamba + "}", kPool),
                      {"$.model.full_attention_layers[1]: got 3 again"});
  expect_config_error(doc(base + R"("full_attention_layers": [3], "mamba": {"conv_shape": [], "ssm_shape": [4]}})", kPool),
                      {"$.model.mamba.conv_shape: got 0 dimensions, expected 1 to 4 dimensions"});
  expect_config_error(
      doc(base + R"("full_attention_layers": [3], "mamba": {"conv_shape": [8], "ssm_shape": [4], "ssm_dtype": "fp8_e4m3"}})",
          kPool),
      {"$.model.mamba.ssm_dtype: got \"fp8_e4m3\""});
  expect_config_error(doc(base + R"("full_attention_layers": [3], "mamba": {"conv_shape": [8], "ssm_shape": [4], "conv": 1}})",
                          kPool),
                      {"$.model.mamba.conv: unknown key"});
}

TEST(Config, CrossSectionRules) {
  expect_config_error(doc(kModel, R"("pool": {"memory_bytes": 1000000, "mem_fraction": 0.5, "max_context_len": 256})"),
                      {"$.pool: got both memory_bytes and mem_fraction"});
  expect_config_error(doc(kModel, kPool, R"("parallel": {"tp_size": 3})"),
                      {"$.parallel.tp_size: got 3 with model.kv_heads 2, expected one to divide the other"});
  expect_config_error(doc(kModel, kPool, R"("parallel": {"tp_size": 2, "tp_rank": 2})"),
                      {"$.parallel.tp_rank: got 2, expected an integer in [0, 1]"});
  expect_config_error(doc(kModel, kPool, R"("parallel": {"start_layer": 2, "end_layer": 1})"),
                      {"$.parallel.end_layer: got 1, expected an integer in [2, 3]"});
  expect_config_error(doc(kModel, kPool, R"("storage": {"backend": "file", "path": "/tmp/x"})"),
                      {"$.storage: got a storage tier without $.host_cache"});
  expect_config_error(doc(kModel, kPool, R"("prefix_cache": {"kind": "chunk", "events": true})"),
                      {"$.prefix_cache: eviction, events and evict_rule need kind \"radix\""});
  expect_config_error(doc(kModel, kPool, R"("host_cache": {"layout": "page_first_direct"})"),
                      {"$.host_cache.layout: got \"page_first_direct\" with io_backend \"kernel\""});
  expect_config_error(doc(kModel, kPool, R"("host_cache": {"ratio": 0.5})"),
                      {"$.host_cache.ratio: got 0.5, expected a number in (1, 1000]"});
  expect_config_error(doc(kModel, kPool, R"("host_cache": {"layout": "page_first_kv_split"})"),
                      {"$.host_cache.layout: got \"page_first_kv_split\"", "Ascend NPUs", "does not support"});
  expect_config_error(doc(kModel, kPool, R"("host_cache": {"headroom_bytes": -1})"),
                      {"$.host_cache.headroom_bytes: got -1"});
  expect_config_error(doc(kModel, kPool, R"("host_cache": {"headroom_bytes": 1.5})"),
                      {"$.host_cache.headroom_bytes"});
  expect_config_error(doc(R"("model": {"num_layers": 4, "kv_heads": 1, "head_dim": 8})",
                          R"("pool": {"kv_dtype": "fp4_e2m1", "max_total_tokens": 1024, "max_context_len": 256})"),
                      {"$.pool.kv_dtype: got \"fp4_e2m1\"", "multiple of 16", "has 8 values"});
}

TEST(Config, StorageBackends) {
  const std::string host = R"("host_cache": {"ratio": 3.0}, )";
  const auto storage = [&](const std::string& body) { return doc(kModel, kPool, host + R"("storage": )" + body); };
  kvpool_plan_info p;
  std::string error;
  for (const char* ok : {R"({"backend": "file", "path": "/tmp/kv", "max_bytes": 1048576})",
                         R"({"backend": "file", "path": "/tmp/kv", "mapped_reads": false})",
                         R"({"backend": "memcached", "servers": ["127.0.0.1:11211", "cache-2:11212"], "replicas": 1,
                             "timeout_ms": 50, "retry_timeout_s": 0.5})",
                         R"({"backend": "redis", "servers": ["127.0.0.1:6379", "[::1]:6380"], "timeout_ms": 200})"}) {
    EXPECT_EQ(kvtest::plan(storage(ok), &p, &error), KVPOOL_OK) << ok << ": " << error;
  }
  expect_config_error(storage(R"({"backend": "s3", "path": "/tmp/kv"})"), {"$.storage.backend: got \"s3\""});
  expect_config_error(storage(R"({"backend": "file"})"), {"$.storage.path: missing"});
  expect_config_error(storage(R"({"backend": "file", "path": "/tmp/kv", "servers": ["a:1"]})"),
                      {"$.storage.servers: given for backend \"file\""});
  expect_config_error(storage(R"({"backend": "file", "path": "/tmp/kv", "max_bytes": -1})"),
                      {"$.storage.max_bytes: got -1"});
  expect_config_error(storage(R"({"backend": "file", "path": "/tmp/kv", "mapped_reads": 1})"),
                      {"$.storage.mapped_reads: got 1"});
  expect_config_error(storage(R"({"backend": "redis", "servers": ["a:1"], "mapped_reads": true})"),
                      {"$.storage.mapped_reads: given for backend \"redis\""});
  expect_config_error(storage(R"({"backend": "memcached"})"), {"$.storage.servers: missing"});
  expect_config_error(storage(R"({"backend": "memcached", "servers": []})"), {"$.storage.servers: got []"});
  expect_config_error(storage(R"({"backend": "memcached", "servers": ["localhost"]})"),
                      {"$.storage.servers[0]: got \"localhost\", expected \"host:port\""});
  expect_config_error(storage(R"({"backend": "memcached", "servers": ["a:1", "b:70000"]})"),
                      {"$.storage.servers[1]: got \"b:70000\""});
  expect_config_error(storage(R"({"backend": "memcached", "servers": ["a:1", 7]})"),
                      {"$.storage.servers[1]: got 7, expected a non-empty string"});
  expect_config_error(storage(R"({"backend": "memcached", "servers": ["a:1", "b:2"], "replicas": 2})"),
                      {"$.storage.replicas: got 2, expected an integer in [0, 1]"});
  expect_config_error(storage(R"({"backend": "memcached", "servers": ["a:1"], "path": "/tmp"})"),
                      {"$.storage.path: given for backend \"memcached\""});
  expect_config_error(storage(R"({"backend": "redis", "servers": ["a:1"], "replicas": 1})"),
                      {"$.storage.replicas: given for backend \"redis\""});
  expect_config_error(storage(R"({"backend": "redis", "servers": ["a:1"], "timeout_ms": 0})"),
                      {"$.storage.timeout_ms: got 0"});
  expect_config_error(storage(R"({"backend": "redis", "servers": ["a:1"], "db": 0})"), {"$.storage.db: unknown key"});
}

TEST(Config, AllSectionsAccepted) {
  const std::string json = doc(kModel, kPool,
                               R"("version": 1, "parallel": {"tp_size": 2, "tp_rank": 1, "start_layer": 0, "end_layer": 3},
      "prefix_cache": {"kind": "radix", "eviction": "priority", "events": true, "evict_rule": "sglang"},
      "host_cache": {"ratio": 3.0, "size_bytes": 0, "layout": "page_first_direct", "write_policy": "write_back", "io_backend": "direct",
                     "headroom_bytes": 0},
      "storage": {"backend": "file", "path": "/tmp/kv", "prefetch_policy": "timeout", "prefetch_threshold_tokens": 128,
                  "prefetch_timeout_base_s": 2.0, "prefetch_timeout_per_ki_token_s": 0.5})");
  kvpool_plan_info p;
  std::string error;
  EXPECT_EQ(kvtest::plan(json, &p, &error), KVPOOL_OK) << error;
  EXPECT_EQ(p.kv_heads_per_rank, 1u);
}

TEST(Config, NullAndBadArguments) {
  kvpool_plan_info p = KVPOOL_PLAN_INFO_INIT;
  EXPECT_EQ(kvpool_plan(nullptr, 10, &p), KVPOOL_ERR_INVALID_ARGUMENT);
  const std::string json = doc(kModel, kPool);
  EXPECT_EQ(kvpool_plan(json.data(), json.size(), nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvpool_plan_info small = KVPOOL_PLAN_INFO_INIT;
  small.struct_size = 8;
  EXPECT_EQ(kvpool_plan(json.data(), json.size(), &small), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("struct_size is 8"), std::string::npos) << kvpool_last_error();
}

TEST(Config, FailureLeavesOutputUntouched) {
  kvpool_plan_info p;
  std::memset(&p, 0xAB, sizeof(p));
  p.struct_size = sizeof(p);
  kvpool_plan_info before = p;
  const std::string bad = doc(kModel, R"("pool": {"page_size": 3, "max_total_tokens": 1024, "max_context_len": 256})");
  ASSERT_EQ(kvpool_plan(bad.data(), bad.size(), &p), KVPOOL_ERR_CONFIG);
  EXPECT_EQ(std::memcmp(&p, &before, sizeof(p)), 0);
}

}  // namespace
