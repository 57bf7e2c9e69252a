// Pool handle lifecycle: create, create from file, destroy in any order, bad handles.
#include <gtest/gtest.h>

#include <thread>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

#include "test_util.hpp"

namespace {

const std::string kConfig = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16},
    "pool": {"kv_dtype": "f32", "page_size": 4, "max_total_tokens": 4096, "max_running_requests": 16,
             "max_context_len": 1024}})";

std::string temp_file(const std::string& contents) {
  char path[] = "/tmp/kvpool_test_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
  close(fd);
  return path;
}

TEST(Pool, CreateAndDestroy) {
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create(kConfig.data(), kConfig.size(), &pool), KVPOOL_OK) << kvpool_last_error();
  ASSERT_NE(pool, nullptr);
  EXPECT_STREQ(kvpool_backend(pool), "cpu");
  kvpool_plan_info from_pool = KVPOOL_PLAN_INFO_INIT, from_json;
  ASSERT_EQ(kvpool_get_plan(pool, &from_pool), KVPOOL_OK);
  ASSERT_EQ(kvtest::plan(kConfig, &from_json), KVPOOL_OK);
  EXPECT_EQ(std::memcmp(&from_pool, &from_json, sizeof(from_pool)), 0) << "the pool keeps the plan it was made with";
  EXPECT_EQ(from_pool.max_total_tokens, 4096u);
  kvpool_destroy(pool);
}

TEST(Pool, HostCacheSectionAllocatesTheHostTier) {
  // 4096 device tokens, ratio 2: 2 * 4096 / 4 + 1 pages; headroom 0 so that any machine can hold it.
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16},
      "pool": {"kv_dtype": "f32", "page_size": 4, "max_total_tokens": 4096, "max_running_requests": 16,
               "max_context_len": 1024},
      "host_cache": {"ratio": 2.0, "layout": "page_first", "headroom_bytes": 0}})";
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_OK) << kvpool_last_error();
  size_t n = 0;
  EXPECT_EQ(kvalloc_available(pool, &n), KVPOOL_OK);
  EXPECT_EQ(n, 4096u) << "the device pool is unchanged by the host tier";
  kvpool_destroy(pool);
}

TEST(Pool, HostCacheLargerThanFreeMemoryLessHeadroomIsRefused) {
  const std::string base = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16},
      "pool": {"kv_dtype": "f32", "page_size": 4, "max_total_tokens": 4096, "max_running_requests": 16,
               "max_context_len": 1024}, "host_cache": )";
  // A petabyte-scale tier, and a small tier under a headroom larger than any machine's memory.
  for (const std::string host : {R"({"size_bytes": 4503599627370496, "headroom_bytes": 0})",
                                 R"({"ratio": 2.0, "headroom_bytes": 4503599627370496})"}) {
    SCOPED_TRACE(host);
    const std::string json = base + host + "}";
    kvpool* pool = reinterpret_cast<kvpool*>(0x1);
    EXPECT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_ERR_HOST_MEMORY);
    EXPECT_EQ(pool, nullptr);
    const std::string error = kvpool_last_error();
    EXPECT_NE(error.find("host_cache needs"), std::string::npos) << error;
    EXPECT_NE(error.find("are free after the"), std::string::npos) << error;
  }
  // A tier no larger than the device pool is a configuration error.
  const std::string small = base + R"({"size_bytes": 4096, "headroom_bytes": 0})" + "}";
  kvpool* pool = nullptr;
  EXPECT_EQ(kvpool_create(small.data(), small.size(), &pool), KVPOOL_ERR_CONFIG);
  EXPECT_NE(std::string(kvpool_last_error()).find("device pool's 4096 tokens"), std::string::npos)
      << kvpool_last_error();
}

TEST(Pool, DestroyIsNullSafeAndIdempotent) {
  kvpool_destroy(nullptr);
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create(kConfig.data(), kConfig.size(), &pool), KVPOOL_OK);
  kvpool_destroy(pool);
  kvpool_destroy(pool);  // a finalizer running after an explicit close: ignored
  EXPECT_EQ(kvpool_backend(pool), nullptr);
  EXPECT_NE(std::string(kvpool_last_error()).find("not a live kvpool handle"), std::string::npos);
}

TEST(Pool, HandleJustUsedIsRejectedOnceDestroyedElsewhere) {
  // The live-handle check remembers a thread's last live pool; a destroy (here from
  // another thread) must still be seen on the next call.
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create(kConfig.data(), kConfig.size(), &pool), KVPOOL_OK);
  size_t n = 0;
  ASSERT_EQ(kvalloc_available(pool, &n), KVPOOL_OK);
  ASSERT_EQ(kvalloc_available(pool, &n), KVPOOL_OK);  // answered from the remembered check
  std::thread([pool] { kvpool_destroy(pool); }).join();
  EXPECT_EQ(kvalloc_available(pool, &n), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kvpool_last_error()).find("not a live kvpool handle"), std::string::npos);
}

TEST(Pool, ForeignAndDestroyedHandlesAreRejected) {
  int not_a_pool = 42;
  kvpool* foreign = reinterpret_cast<kvpool*>(&not_a_pool);
  EXPECT_EQ(kvpool_backend(foreign), nullptr);
  kvpool_plan_info p = KVPOOL_PLAN_INFO_INIT;
  EXPECT_EQ(kvpool_get_plan(foreign, &p), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_get_plan(nullptr, &p), KVPOOL_ERR_INVALID_ARGUMENT);
  kvpool_destroy(foreign);  // ignored, not freed
  EXPECT_EQ(not_a_pool, 42);

  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create(kConfig.data(), kConfig.size(), &pool), KVPOOL_OK);
  EXPECT_EQ(kvpool_get_plan(pool, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvpool_plan_info small = KVPOOL_PLAN_INFO_INIT;
  small.struct_size = 4;
  EXPECT_EQ(kvpool_get_plan(pool, &small), KVPOOL_ERR_INVALID_ARGUMENT);
  kvpool_destroy(pool);
  EXPECT_EQ(kvpool_get_plan(pool, &p), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(Pool, ManyPoolsAreIndependent) {
  kvpool* a = nullptr;
  kvpool* b = nullptr;
  ASSERT_EQ(kvpool_create(kConfig.data(), kConfig.size(), &a), KVPOOL_OK);
  ASSERT_EQ(kvpool_create(kConfig.data(), kConfig.size(), &b), KVPOOL_OK);
  EXPECT_NE(a, b);
  kvpool_destroy(a);  // destruction order does not matter
  EXPECT_STREQ(kvpool_backend(b), "cpu");
  kvpool_destroy(b);
}

TEST(Pool, CreateFailuresLeaveOutNull) {
  kvpool* pool = reinterpret_cast<kvpool*>(0x1);
  const std::string bad = R"({"model": {"num_layers": 0}, "pool": {}})";
  EXPECT_EQ(kvpool_create(bad.data(), bad.size(), &pool), KVPOOL_ERR_CONFIG);
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(std::string(kvpool_last_error()).find("$.model.num_layers: got 0"), std::string::npos)
      << kvpool_last_error();
  pool = reinterpret_cast<kvpool*>(0x1);
  EXPECT_EQ(kvpool_create(nullptr, 5, &pool), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(pool, nullptr);
  EXPECT_EQ(kvpool_create(kConfig.data(), kConfig.size(), nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(Pool, CreateFromFile) {
  const std::string good = temp_file(kConfig);
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create_from_file(good.c_str(), &pool), KVPOOL_OK) << kvpool_last_error();
  EXPECT_STREQ(kvpool_backend(pool), "cpu");
  kvpool_destroy(pool);
  std::remove(good.c_str());

  const std::string bad = temp_file(R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16}, "pool": {"page_size": 5}})");
  EXPECT_EQ(kvpool_create_from_file(bad.c_str(), &pool), KVPOOL_ERR_CONFIG);
  EXPECT_EQ(pool, nullptr);
  const std::string message = kvpool_last_error();
  EXPECT_EQ(message.rfind(bad + ": ", 0), 0u) << "the message starts with the file: " << message;
  EXPECT_NE(message.find("$.pool.page_size: got 5"), std::string::npos) << message;
  std::remove(bad.c_str());

  EXPECT_EQ(kvpool_create_from_file("/nonexistent/kvpool.json", &pool), KVPOOL_ERR_IO);
  EXPECT_NE(std::string(kvpool_last_error()).find("/nonexistent/kvpool.json"), std::string::npos);
  EXPECT_EQ(kvpool_create_from_file(nullptr, &pool), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvpool_create_from_file(good.c_str(), nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
}

TEST(Pool, CudaDeviceWithoutGpuIsAClearError) {
  if (kvpool_cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present; covered by the gpu tests";
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 16},
      "pool": {"device": "cuda:0", "max_total_tokens": 1024, "max_running_requests": 4, "max_context_len": 64}})";
  kvpool* pool = nullptr;
  kvpool_status st = kvpool_create(json.data(), json.size(), &pool);
  EXPECT_TRUE(st == KVPOOL_ERR_CUDA || st == KVPOOL_ERR_UNSUPPORTED) << kvpool_status_string(st);
  EXPECT_EQ(pool, nullptr);
  EXPECT_NE(std::string(kvpool_last_error()).find("cuda:0"), std::string::npos) << kvpool_last_error();
  // Planning needs no device unless mem_fraction asks for its memory.
  kvpool_plan_info p;
  EXPECT_EQ(kvtest::plan(json, &p), KVPOOL_OK);
  EXPECT_EQ(kvpool_cuda_device_count(), 0);
}

}  // namespace
