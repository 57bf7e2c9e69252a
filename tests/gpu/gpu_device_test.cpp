// Device selection on a real GPU.
#include <string>

#include "gpu_test_env.hpp"

namespace {

std::string config(const std::string& device, const std::string& capacity) {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16}, "pool": {"device": ")" + device +
         R"(", "page_size": 16, )" + capacity + R"(, "max_running_requests": 4, "max_context_len": 256}})";
}

TEST(GpuDevice, PoolOnCudaReportsCudaBackend) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const std::string json = config("cuda:0", R"("max_total_tokens": 4096)");
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_OK) << kvpool_last_error();
  EXPECT_STREQ(kvpool_backend(pool), "cuda");
  kvpool_destroy(pool);
}

TEST(GpuDevice, MissingDeviceIndexIsACudaError) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const std::string json = config("cuda:" + std::to_string(kvpool_cuda_device_count()), R"("max_total_tokens": 4096)");
  kvpool* pool = nullptr;
  EXPECT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_ERR_CUDA);
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(std::string(kvpool_last_error()).find("CUDA device(s) visible"), std::string::npos) << kvpool_last_error();
}

TEST(GpuDevice, MemFractionUsesDeviceMemory) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  const std::string json = config("cuda:0", R"("mem_fraction": 0.5)");
  kvpool_plan_info p = KVPOOL_PLAN_INFO_INIT;
  ASSERT_EQ(kvpool_plan(json.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error();
  // 0.5 of an H100/H200 leaves tens of GiB: far more than 1 GiB of tokens at 256 bytes each.
  EXPECT_GT(p.max_total_tokens * p.kv_bytes_per_token, uint64_t(1) << 30);
  EXPECT_LT(p.max_total_tokens * p.kv_bytes_per_token, uint64_t(200) << 30);
}

}  // namespace
