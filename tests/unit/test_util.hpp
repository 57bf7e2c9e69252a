// Small helpers shared by the unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvpool/kvpool.h"

namespace kvtest {

// Plans `json`; on failure returns the status and stores the message in *error.
inline kvpool_status plan(const std::string& json, kvpool_plan_info* out, std::string* error = nullptr) {
  kvpool_plan_info init = KVPOOL_PLAN_INFO_INIT;
  *out = init;
  kvpool_status st = kvpool_plan(json.data(), json.size(), out);
  if (error != nullptr) *error = st == KVPOOL_OK ? "" : kvpool_last_error();
  return st;
}

// A pool that is destroyed at the end of the scope.
class Pool {
 public:
  explicit Pool(const std::string& json) {
    const kvpool_status st = kvpool_create(json.data(), json.size(), &pool_);
    EXPECT_EQ(st, KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  }
  ~Pool() { kvpool_destroy(pool_); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  kvpool* get() const { return pool_; }
  operator kvpool*() const { return pool_; }

 private:
  kvpool* pool_ = nullptr;
};

// An mha pool of `tokens` slots: 2 layers x 2 heads x 8 dims, f32, on the CPU.
inline std::string mha_config(int page_size, int64_t tokens, const char* mode = "none", int requests = 8,
                              int context = 64) {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page_size) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": )" + std::to_string(requests) + R"(, "max_context_len": )" +
         std::to_string(context) + R"(, "disaggregation_mode": ")" + mode + R"("}})";
}

// A swa pool: 4 layers (pattern "SF"), full and window pools sized by `tokens` and `ratio`.
inline std::string swa_config(int64_t tokens, double ratio, const char* mode = "none") {
  return R"({"model": {"num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 8, "sliding_window": 4,
      "swa_layer_pattern": "SF"}, "pool": {"kv_dtype": "f32", "max_total_tokens": )" +
         std::to_string(tokens) + R"(, "swa_full_tokens_ratio": )" + std::to_string(ratio) +
         R"(, "max_running_requests": 8, "max_context_len": 64, "disaggregation_mode": ")" + mode + R"("}})";
}

inline std::vector<int64_t> free_list(kvpool* pool, int32_t list = KVALLOC_LIST_FREE) {
  size_t len = 0;
  std::vector<int64_t> ids(1 << 16);
  EXPECT_EQ(kvalloc_free_list(pool, list, ids.data(), ids.size(), &len), KVPOOL_OK) << kvpool_last_error();
  ids.resize(len);
  return ids;
}

inline size_t available(kvpool* pool) {
  size_t n = 0;
  EXPECT_EQ(kvalloc_available(pool, &n), KVPOOL_OK) << kvpool_last_error();
  return n;
}

inline std::vector<int64_t> alloc(kvpool* pool, size_t n, kvpool_status expect = KVPOOL_OK) {
  std::vector<int64_t> slots(n);
  EXPECT_EQ(kvalloc_alloc(pool, slots.data(), n), expect) << kvpool_last_error();
  return slots;
}

inline void free_slots(kvpool* pool, const std::vector<int64_t>& slots) {
  EXPECT_EQ(kvalloc_free(pool, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
}

// kvpool_check() must pass; prints its report otherwise.
inline void expect_consistent(kvpool* pool) {
  char report[4096];
  EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << report;
}

}  // namespace kvtest
