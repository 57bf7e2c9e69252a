// kvpool_create_with_allocator: every buffer of the pool comes from the
// caller's callbacks and goes back through them; failures are clean.
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

// Counts what kvpool asks for; fails on request.
struct Ledger {
  std::map<void*, size_t> live;
  size_t calls = 0, bytes = 0;
  std::vector<size_t> sizes;  // of every call, in order
  int fail_at = -1;       // this call returns NULL
  bool misalign = false;  // hand out 256-byte aligned + 16
};

void* ledger_alloc(void* ctx, size_t bytes, int32_t device_type, int32_t device_id) {
  auto* l = static_cast<Ledger*>(ctx);
  EXPECT_EQ(device_type, KVPOOL_DEVICE_CPU);
  EXPECT_EQ(device_id, 0);
  l->sizes.push_back(bytes);
  if (static_cast<int>(l->calls++) == l->fail_at) return nullptr;
  char* p = static_cast<char*>(std::aligned_alloc(256, (bytes + 16 + 255) / 256 * 256));
  if (l->misalign) p += 16;
  l->live[p] = bytes;
  l->bytes += bytes;
  return p;
}

void ledger_free(void* ctx, void* p, size_t bytes, int32_t, int32_t) {
  auto* l = static_cast<Ledger*>(ctx);
  ASSERT_EQ(l->live.count(p), 1u) << "freed a pointer kvpool never got";
  EXPECT_EQ(l->live[p], bytes);
  l->live.erase(p);
  std::free(l->misalign ? static_cast<char*>(p) - 16 : p);
}

kvpool_allocator callbacks(Ledger* l) {
  kvpool_allocator a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.ctx = l;
  a.alloc = ledger_alloc;
  a.free = ledger_free;
  return a;
}

const std::string kJson = kvtest::mha_config(4, 256);

TEST(PoolAllocator, EveryBufferComesFromTheCallbacksAndGoesBack) {
  Ledger l;
  const kvpool_allocator a = callbacks(&l);
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create_with_allocator(kJson.data(), kJson.size(), &a, &pool), KVPOOL_OK) << kvpool_last_error();
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  ASSERT_EQ(kvpool_get_plan(pool, &plan), KVPOOL_OK);
  EXPECT_GE(l.bytes, plan.kv_memory_bytes);  // at least the KV buffers came from the callback
  EXPECT_FALSE(l.live.empty());
  // The pool works on that memory, which kvpool zero-filled.
  int64_t slots[4];
  ASSERT_EQ(kvalloc_alloc(pool, slots, 4), KVPOOL_OK);
  kvpool_buffer k = KVPOOL_BUFFER_INIT;
  ASSERT_EQ(kvpool_get_buffer(pool, KVPOOL_BUFFER_K, 0, &k), KVPOOL_OK);
  EXPECT_EQ(l.live.count(k.data), 1u) << "the K buffer is not callback memory";
  kvpool_destroy(pool);
  EXPECT_TRUE(l.live.empty()) << l.live.size() << " allocations not given back";
}

TEST(PoolAllocator, FailuresLeakNothingAndNameTheCause) {
  for (int fail_at : {0, 1, 2}) {
    Ledger l;
    l.fail_at = fail_at;
    const kvpool_allocator a = callbacks(&l);
    kvpool* pool = reinterpret_cast<kvpool*>(&l);
    EXPECT_EQ(kvpool_create_with_allocator(kJson.data(), kJson.size(), &a, &pool), KVPOOL_ERR_HOST_MEMORY);
    EXPECT_EQ(pool, nullptr);
    EXPECT_NE(std::string(kvpool_last_error()).find("returned NULL"), std::string::npos) << kvpool_last_error();
    EXPECT_TRUE(l.live.empty());
  }
  Ledger m;
  m.misalign = true;
  const kvpool_allocator a = callbacks(&m);
  kvpool* pool = nullptr;
  EXPECT_EQ(kvpool_create_with_allocator(kJson.data(), kJson.size(), &a, &pool), KVPOOL_ERR_HOST_MEMORY);
  EXPECT_NE(std::string(kvpool_last_error()).find("256-byte"), std::string::npos) << kvpool_last_error();
  EXPECT_TRUE(m.live.empty());
}

TEST(PoolAllocator, TheHostTierComesFromTheCallbacksToo) {
  // 2 layers x K and V of 2 heads x 8 f32: 256 bytes per token; 256 device tokens x ratio 2 -> 129 pages of 4.
  std::string json = kJson;
  json.replace(json.size() - 2, 2, R"(}, "host_cache": {"ratio": 2.0, "headroom_bytes": 0}})");
  const size_t host_bytes = 516 * 256;
  Ledger l;
  const kvpool_allocator a = callbacks(&l);  // its alloc expects device type KVPOOL_DEVICE_CPU for a CPU pool
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create_with_allocator(json.data(), json.size(), &a, &pool), KVPOOL_OK) << kvpool_last_error();
  size_t host_call = l.sizes.size();
  for (size_t i = 0; i < l.sizes.size(); ++i) {
    if (l.sizes[i] == host_bytes) host_call = i;
  }
  ASSERT_LT(host_call, l.sizes.size()) << "no allocation of the host tier's " << host_bytes << " bytes";
  kvpool_destroy(pool);
  EXPECT_TRUE(l.live.empty());
  // The tier's allocation failing fails the pool, which gives everything back.
  Ledger f;
  f.fail_at = static_cast<int>(host_call);
  const kvpool_allocator b = callbacks(&f);
  EXPECT_EQ(kvpool_create_with_allocator(json.data(), json.size(), &b, &pool), KVPOOL_ERR_HOST_MEMORY);
  EXPECT_NE(std::string(kvpool_last_error()).find("host-tier memory"), std::string::npos) << kvpool_last_error();
  EXPECT_TRUE(f.live.empty());
}

TEST(PoolAllocator, BadCallbackStructsAreRejected) {
  Ledger l;
  kvpool_allocator a = callbacks(&l);
  kvpool* pool = nullptr;
  a.struct_size = 8;
  EXPECT_EQ(kvpool_create_with_allocator(kJson.data(), kJson.size(), &a, &pool), KVPOOL_ERR_INVALID_ARGUMENT);
  a = callbacks(&l);
  a.free = nullptr;
  EXPECT_EQ(kvpool_create_with_allocator(kJson.data(), kJson.size(), &a, &pool), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(l.calls, 0u);
  // NULL allocator: the default one.
  ASSERT_EQ(kvpool_create_with_allocator(kJson.data(), kJson.size(), nullptr, &pool), KVPOOL_OK);
  kvpool_destroy(pool);
}

}  // namespace
