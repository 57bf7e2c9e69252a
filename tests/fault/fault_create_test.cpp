// Failure injection into pool creation: kvpool_create, kvpool_create_from_file,
// kvpool_plan for every example configuration (shrunk to a CPU pool of a few
// hundred tokens), and kvpool_create_with_allocator with callbacks that fail.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "fault_driver.hpp"

namespace {

using kvfault::Summary;

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The example configurations, each as written and as a small CPU pool with the
// same structure (layers, attention variant, layer patterns, dtypes, page size,
// tp, caches) and small sizes (128 tokens, head dims of 8..128, 4 rows of 256).
std::vector<std::pair<std::string, std::string>> example_configs() {
  std::vector<std::pair<std::string, std::string>> out;
  DIR* dir = opendir(KVPOOL_EXAMPLE_CONFIG_DIR);
  EXPECT_NE(dir, nullptr);
  if (dir == nullptr) return out;
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.substr(name.size() - 5) == ".json") names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) out.emplace_back(name, read_file(std::string(KVPOOL_EXAMPLE_CONFIG_DIR) + "/" + name));
  return out;
}

// Replaces every `"key": value` (value: a number, a string or a flat array) with
// `replacement` (plain string search: std::regex trips gcc 12's -Wmaybe-uninitialized
// under -fsanitize=address -O2).
std::string replace_field(std::string json, const std::string& key, const std::string& replacement) {
  const std::string quoted = "\"" + key + "\"";
  for (size_t at = json.find(quoted); at != std::string::npos; at = json.find(quoted, at + replacement.size())) {
    size_t v = json.find(':', at + quoted.size());
    if (v == std::string::npos) break;
    ++v;
    while (v < json.size() && json[v] == ' ') ++v;
    size_t end = v;
    if (json[v] == '"') {
      end = json.find('"', v + 1) + 1;
    } else if (json[v] == '[') {
      end = json.find(']', v) + 1;
    } else {
      while (end < json.size() && (std::isdigit(static_cast<unsigned char>(json[end])) != 0 || json[end] == '.')) ++end;
    }
    json.replace(at, end - at, replacement);
  }
  return json;
}

std::string shrink(std::string json) {
  json = replace_field(json, "device", R"("device": "cpu")");
  json = replace_field(json, "memory_bytes", R"("max_total_tokens": 128)");
  json = replace_field(json, "max_total_tokens", R"("max_total_tokens": 128)");
  json = replace_field(json, "max_running_requests", R"("max_running_requests": 4)");
  json = replace_field(json, "max_context_len", R"("max_context_len": 256)");
  json = replace_field(json, "conv_shape", R"("conv_shape": [8, 3])");
  json = replace_field(json, "ssm_shape", R"("ssm_shape": [2, 4, 4])");
  json = replace_field(json, "head_dim", R"("head_dim": 8)");
  json = replace_field(json, "kv_lora_rank", R"("kv_lora_rank": 128)");
  json = replace_field(json, "qk_rope_head_dim", R"("qk_rope_head_dim": 16)");
  json = replace_field(json, "mamba_full_memory_ratio", R"("mamba_cache_size": 24)");
  return json;
}

// Drives `call` (which creates into *out) with allocation 1, 2, ... failing; every
// failure must return no pool, a clear status naming `fn`, and leave no allocation behind.
template <class F>
void inject_create(const char* fn, const std::string& what, Summary& sum, F&& call) {
  kvfault::widen_last_error();
  ++sum.calls;
  for (uint64_t n = 1;; ++n) {
    kvpool* pool = reinterpret_cast<kvpool*>(0x1);
    const int64_t live_before = kvfault::live_allocations();
    kvfault::arm_for(n);
    const kvpool_status st = call(&pool);
    const bool fired = kvfault::disarm();
    const int64_t live_after = kvfault::live_allocations();
    if (!fired) {
      sum.max_allocs = std::max<uint64_t>(sum.max_allocs, n - 1);
      EXPECT_EQ(st, KVPOOL_OK) << what << ": " << kvpool_last_error();
      EXPECT_NE(pool, nullptr);
      char report[1024];
      EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << what << "\n" << report;
      kvpool_destroy(pool);
      EXPECT_EQ(kvfault::live_allocations(), live_before) << what << ": create + destroy leaked";
      return;
    }
    ++sum.injected;
    if (st == KVPOOL_OK) {  // recovered
      ++sum.recovered;
      kvpool_destroy(pool);
      EXPECT_EQ(kvfault::live_allocations(), live_before) << what << ": create + destroy leaked";
      return;
    }
    kvfault::expect_clean_failure(fn, st, KVPOOL_OK, n);
    EXPECT_EQ(pool, nullptr) << what << " with allocation " << n << " failing returned a pool";
    EXPECT_EQ(live_after, live_before) << what << " with allocation " << n << " failing leaked "
                                       << (live_after - live_before) << " allocations";
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(FaultCreate, EveryExampleConfig) {
  Summary create{"kvpool_create (8 example configs, shrunk to CPU)"};
  Summary from_file{"kvpool_create_from_file (8 example configs, shrunk to CPU)"};
  Summary plan{"kvpool_plan (8 example configs as written)"};
  char dir_template[] = "/tmp/kvpool-fault-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  for (const auto& [name, text] : example_configs()) {
    const std::string json = shrink(text);
    inject_create("kvpool_create", name, create,
                  [&](kvpool** out) { return kvpool_create(json.data(), json.size(), out); });
    const std::string path = std::string(dir_template) + "/" + name;
    {
      std::ofstream f(path);
      f << json;
    }
    inject_create("kvpool_create_from_file", name, from_file,
                  [&](kvpool** out) { return kvpool_create_from_file(path.c_str(), out); });
    std::remove(path.c_str());
    // kvpool_plan makes no pool: a failure must leave nothing behind and fill nothing.
    kvpool_plan_info ref = KVPOOL_PLAN_INFO_INIT;
    ASSERT_EQ(kvpool_plan(text.data(), text.size(), &ref), KVPOOL_OK) << name << ": " << kvpool_last_error();
    ++plan.calls;
    for (uint64_t n = 1;; ++n) {
      kvpool_plan_info info = KVPOOL_PLAN_INFO_INIT;
      const int64_t live_before = kvfault::live_allocations();
      kvfault::arm_for(n);
      const kvpool_status st = kvpool_plan(text.data(), text.size(), &info);
      const bool fired = kvfault::disarm();
      EXPECT_EQ(kvfault::live_allocations(), live_before) << name << ": kvpool_plan leaked (allocation " << n << ")";
      if (!fired || st == KVPOOL_OK) {
        EXPECT_EQ(st, KVPOOL_OK);
        EXPECT_EQ(info.max_total_tokens, ref.max_total_tokens) << name;
        EXPECT_EQ(info.total_memory_bytes, ref.total_memory_bytes) << name;
        if (fired) ++plan.injected, ++plan.recovered;
        plan.max_allocs = std::max<uint64_t>(plan.max_allocs, fired ? n : n - 1);
        break;
      }
      ++plan.injected;
      kvfault::expect_clean_failure("kvpool_plan", st, KVPOOL_OK, n);
      if (::testing::Test::HasFailure()) break;
    }
    if (::testing::Test::HasFailure()) break;
  }
  rmdir(dir_template);
  create.print();
  from_file.print();
  plan.print();
}

// Caller callbacks that fail their n-th allocation (every pool buffer goes through them).
struct CallbackState {
  uint64_t calls = 0, fail_at = 0;
  int64_t live = 0;
};

void* cb_alloc(void* ctx, size_t bytes, int32_t, int32_t) {
  auto* s = static_cast<CallbackState*>(ctx);
  if (++s->calls == s->fail_at) return nullptr;
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes == 0 ? 1 : bytes) != 0) return nullptr;
  ++s->live;
  return p;
}

void cb_free(void* ctx, void* p, size_t, int32_t, int32_t) {
  auto* s = static_cast<CallbackState*>(ctx);
  if (p != nullptr) --s->live;
  std::free(p);
}

TEST(FaultCreate, WithAllocatorCallbacks) {
  Summary sum{"kvpool_create_with_allocator (8 example configs; callback and host failures)"};
  uint64_t callback_failures = 0;
  kvfault::widen_last_error();
  for (const auto& [name, text] : example_configs()) {
    const std::string json = shrink(text);
    // 1. The callback fails its n-th buffer.
    for (uint64_t n = 1;; ++n) {
      CallbackState state;
      state.fail_at = n;
      const kvpool_allocator a = {sizeof(kvpool_allocator), &state, cb_alloc, cb_free};
      kvpool* pool = reinterpret_cast<kvpool*>(0x1);
      const int64_t live_before = kvfault::live_allocations();
      const kvpool_status st = kvpool_create_with_allocator(json.data(), json.size(), &a, &pool);
      ++sum.calls;
      if (state.calls < n) {  // never reached
        ASSERT_EQ(st, KVPOOL_OK) << name << ": " << kvpool_last_error();
        kvpool_destroy(pool);
        EXPECT_EQ(state.live, 0) << name;
        EXPECT_EQ(kvfault::live_allocations(), live_before) << name;
        break;
      }
      ++callback_failures;
      EXPECT_EQ(st, KVPOOL_ERR_HOST_MEMORY) << name << " callback " << n << ": " << kvpool_last_error();
      EXPECT_NE(std::string(kvpool_last_error()).size(), 0u);
      EXPECT_EQ(pool, nullptr) << name;
      EXPECT_EQ(state.live, 0) << name << " callback " << n << " failing: buffers not given back";
      EXPECT_EQ(kvfault::live_allocations(), live_before) << name << " callback " << n << " failing leaked";
      if (::testing::Test::HasFailure()) return;
    }
    // 2. Host allocations of the library fail while the callbacks work.
    CallbackState state;
    const kvpool_allocator a = {sizeof(kvpool_allocator), &state, cb_alloc, cb_free};
    inject_create("kvpool_create_with_allocator", name, sum, [&](kvpool** out) {
      return kvpool_create_with_allocator(json.data(), json.size(), &a, out);
    });
    EXPECT_EQ(state.live, 0) << name << ": buffers not given back";
    if (::testing::Test::HasFailure()) return;
  }
  sum.injected += callback_failures;
  sum.print();
  std::printf("[fault] ... of which %llu failures of the caller's alloc callback\n",
              static_cast<unsigned long long>(callback_failures));
}

}  // namespace
