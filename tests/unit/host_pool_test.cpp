// The host tier's geometry (every byte of a part's region belongs to exactly one
// (token, layer, piece) under every layout), its sizing (SGLang's arithmetic, the
// larger-than-device rule, the free-memory headroom) and its page allocator (all or
// none, refused frees change nothing, check() agrees).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "host/host_geometry.hpp"
#include "host/host_pool.hpp"

namespace kvp::host {
namespace {

const HostLayout kLayouts[] = {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                               HostLayout::kPageHead};

TierPart part(uint64_t item_bytes, uint32_t heads, bool per_page = false) {
  TierPart p;
  p.item_bytes = item_bytes;
  p.device_stride = item_bytes;
  p.heads = heads;
  p.per_page = per_page;
  return p;
}

// Kinds of pools, as tier_parts() describes them.
struct Mix {
  const char* name;
  std::vector<TierPart> parts;
  bool splittable;  // page_head accepts it
};

std::vector<Mix> mixes() {
  return {
      {"mha K/V, 2 heads", {part(64, 2), part(64, 2)}, true},
      {"mha K/V, 1 head", {part(24, 1), part(24, 1)}, true},
      {"mha K/V, 4 heads, nsa-like page part", {part(32, 4), part(32, 4), part(40, 0, true)}, true},
      {"mha fp4 values + scales", {part(16, 2), part(16, 2), part(2, 0), part(2, 0)}, false},
      {"double_sparse K/V + labels", {part(64, 2), part(64, 2), part(16, 0)}, false},
      {"mla latent", {part(96, 0)}, false},
      {"nsa latent + indexer", {part(20, 0), part(4 * 36, 0, true)}, false},
  };
}

HostGeometry geometry(HostLayout layout, const std::vector<TierPart>& parts, uint64_t P, uint64_t pages,
                      uint32_t layers) {
  HostGeometry g;
  g.layout = layout;
  g.page_size = P;
  g.pages = pages;
  g.layers = layers;
  g.parts = parts;
  return g;
}

TEST(HostGeometry, EveryByteOfEveryRegionHasExactlyOneOwner) {
  for (const HostLayout layout : kLayouts) {
    for (const Mix& mix : mixes()) {
      for (const uint64_t P : {1u, 4u}) {
        for (const uint32_t L : {1u, 3u}) {
          SCOPED_TRACE(std::string(host_layout_name(layout)) + ", " + mix.name + ", P " + std::to_string(P) +
                       ", L " + std::to_string(L));
          HostGeometry g = geometry(layout, mix.parts, P, 5, L);
          const std::string error = finish_geometry(&g);
          if (layout == HostLayout::kPageHead && !mix.splittable) {
            EXPECT_NE(error.find("page_head"), std::string::npos) << error;
            continue;
          }
          ASSERT_EQ(error, "");
          std::vector<int> owner(g.bytes, -1);
          uint64_t end = 0;
          for (size_t p = 0; p < g.parts.size(); ++p) {
            const TierPart& tp = g.parts[p];
            const uint64_t rows = tp.per_page ? g.pages : g.tokens();
            const uint64_t region_bytes = rows * tp.item_bytes * L;
            EXPECT_EQ(g.region[p] % 256, 0u) << "regions are 256-byte aligned";
            EXPECT_GE(g.region[p], end) << "regions do not overlap";
            end = g.region[p] + region_bytes;
            ASSERT_LE(end, g.bytes);
            EXPECT_EQ(g.pieces(p) * g.piece_bytes(p), tp.item_bytes);
            if (layout == HostLayout::kPageHead && !tp.per_page && tp.heads > 1) {
              EXPECT_EQ(g.pieces(p), tp.heads);
            }
            for (uint64_t t = 0; t < rows; ++t) {
              for (uint32_t l = 0; l < L; ++l) {
                for (uint32_t h = 0; h < g.pieces(p); ++h) {
                  const uint64_t at = g.offset(p, t, l, h);
                  ASSERT_GE(at, g.region[p]);
                  ASSERT_LE(at + g.piece_bytes(p), g.region[p] + region_bytes)
                      << "part " << p << " token " << t << " layer " << l << " piece " << h;
                  for (uint64_t b = at; b < at + g.piece_bytes(p); ++b) {
                    ASSERT_EQ(owner[b], -1) << "byte " << b << " claimed twice (part " << p << " token " << t
                                            << " layer " << l << " piece " << h << ")";
                    owner[b] = static_cast<int>(p);
                  }
                }
              }
            }
            const auto covered = std::count(owner.begin() + static_cast<std::ptrdiff_t>(g.region[p]),
                                            owner.begin() + static_cast<std::ptrdiff_t>(g.region[p] + region_bytes),
                                            static_cast<int>(p));
            EXPECT_EQ(static_cast<uint64_t>(covered), region_bytes) << "part " << p << " covers its whole region";
          }
          EXPECT_EQ(g.bytes, (end + 255) / 256 * 256);
        }
      }
    }
  }
}

TEST(HostGeometry, LayoutsFollowSglangShapes) {
  // K of 2 layers, 4 pages of P = 2, 3 heads of 8 bytes: check one element per layout by its SGLang index.
  const uint64_t P = 2, L = 2, H = 3, D = 8, item = H * D, S = 8;
  const uint64_t t = 5, l = 1, h = 2;  // page 2, position 1
  const auto at = [&](HostLayout layout) {
    HostGeometry g = geometry(layout, {part(item, H)}, P, 4, L);
    EXPECT_EQ(finish_geometry(&g), "");
    return g.offset(0, t, l, h) + (layout == HostLayout::kPageHead ? 0 : h * D);
  };
  EXPECT_EQ(at(HostLayout::kLayerFirst), (l * S + t) * item + h * D);                       // [L][S][H*D]
  EXPECT_EQ(at(HostLayout::kPageFirst), (t * L + l) * item + h * D);                        // [S][L][H*D]
  EXPECT_EQ(at(HostLayout::kPageFirstDirect), (((t / P) * L + l) * P + t % P) * item + h * D);  // [S/P][L][P][H*D]
  EXPECT_EQ(at(HostLayout::kPageHead), ((((t / P) * H + h) * P + t % P) * L + l) * D);      // [S/P][H][P][L][D]
}

TEST(HostGeometry, PageHeadRefusesRowsThatAreNotWholeHeads) {
  for (const TierPart& bad : {part(30, 4), part(96, 0), part(2, 0)}) {
    HostGeometry g = geometry(HostLayout::kPageHead, {part(64, 2), bad}, 4, 3, 2);
    const std::string error = finish_geometry(&g);
    EXPECT_NE(error.find("page_head"), std::string::npos) << error;
    EXPECT_NE(error.find(std::to_string(bad.item_bytes) + " bytes"), std::string::npos) << error;
  }
  HostGeometry ok = geometry(HostLayout::kLayerFirst, {part(96, 0)}, 4, 3, 2);
  EXPECT_EQ(finish_geometry(&ok), "") << "other layouts take any row";
}

TEST(HostGeometry, DevicePagesIsTheSmallestPartLimit) {
  HostGeometry g = geometry(HostLayout::kLayerFirst, {part(8, 1), part(4, 0), part(40, 0, true)}, 4, 3, 1);
  g.parts[0].device_rows = 260;  // 65 pages
  g.parts[1].device_rows = 257;  // 64 whole pages
  g.parts[2].device_rows = 66;   // per page
  EXPECT_EQ(g.device_pages(), 64u);
  g.parts[2].device_rows = 10;
  EXPECT_EQ(g.device_pages(), 10u);
}

TEST(HostGeometry, PageRunsAreWholePagesOnlyWhereBothSidesAreDense) {
  // K of 8 heads x 128 bf16 (2 KiB rows), a page of 64, 32 layers; an nsa-like page part.
  const uint64_t P = 64, row = 2048;
  for (HostLayout layout : kLayouts) {
    HostGeometry g = geometry(layout, {part(row, 8), part(row, 8), part(8448, 0, true)}, P, 4, 32);
    ASSERT_EQ(finish_geometry(&g), "");
    const bool dense = layout == HostLayout::kLayerFirst || layout == HostLayout::kPageFirstDirect;
    const uint64_t expect = dense ? P * row : layout == HostLayout::kPageHead ? row / 8 : row;
    EXPECT_EQ(g.page_run_bytes(0), expect) << host_layout_name(layout);
    EXPECT_EQ(g.page_run_bytes(2), 8448u) << "a page part is one row per page";
    // The run must really be contiguous on the host: the page's next token follows the run's start.
    if (dense) {
      EXPECT_EQ(g.offset(0, 1, 5) - g.offset(0, 0, 5), row);
    }
    g.parts[1].device_stride = row + 512;  // padded device rows: a run is one row
    EXPECT_EQ(g.page_run_bytes(1), layout == HostLayout::kPageHead ? row / 8 : row) << host_layout_name(layout);
  }
}

// ---- sizing ----

class HostPoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend();

  // mha-like: K and V of 32 bytes, 2 layers -> 128 bytes per token; P = 4.
  static HostGeometry mha_geometry(HostLayout layout = HostLayout::kLayerFirst) {
    return geometry(layout, {part(32, 2), part(32, 2)}, 4, 0, 2);
  }
  static config::HostCacheConfig ratio(double r) {
    config::HostCacheConfig c;
    c.enabled = true;
    c.ratio = r;
    c.headroom_bytes = 0;
    return c;
  }
  Status make(const config::HostCacheConfig& c, uint64_t device_tokens, uint64_t available,
              std::unique_ptr<HostPool>* out, HostLayout layout = HostLayout::kLayerFirst) {
    return HostPool::make(backend.get(), c, device_tokens, mha_geometry(layout), available, out);
  }
};

constexpr uint64_t kPlenty = uint64_t(1) << 40;

TEST_F(HostPoolTest, RatioSizingAddsAPage) {
  std::unique_ptr<HostPool> pool;
  ASSERT_TRUE(make(ratio(2.0), 100, kPlenty, &pool).is_ok());
  EXPECT_EQ(pool->pages(), 200u / 4 + 1);  // SGLang: size // page_size + 1
  EXPECT_EQ(pool->tokens(), 204u);
  EXPECT_EQ(pool->geometry().bytes_per_token(), 128u);
  EXPECT_EQ(pool->geometry().bytes, 204u * 128);
  EXPECT_NE(pool->data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->data()) % 256, 0u);
  EXPECT_FALSE(pool->pinned());
  EXPECT_EQ(pool->free_pages(), 51u);
  EXPECT_EQ(pool->held_pages(), 0u);
  // int(device_tokens * ratio): 100 * 1.5 = 150 -> 37 + 1 pages.
  ASSERT_TRUE(make(ratio(1.5), 100, kPlenty, &pool).is_ok());
  EXPECT_EQ(pool->pages(), 38u);
}

TEST_F(HostPoolTest, SizeBytesOverridesRatio) {
  config::HostCacheConfig c = ratio(2.0);
  c.size_bytes = 1000 * 128 + 127;  // 1000 whole tokens
  std::unique_ptr<HostPool> pool;
  ASSERT_TRUE(make(c, 100, kPlenty, &pool).is_ok());
  EXPECT_EQ(pool->pages(), 1000u / 4 + 1);
  EXPECT_EQ(pool->tokens(), 1004u);
}

TEST_F(HostPoolTest, MustHoldMoreTokensThanTheDevicePool) {
  config::HostCacheConfig c = ratio(2.0);
  c.size_bytes = 10 * 128;  // 10 tokens -> 3 pages = 12 tokens, device 100
  std::unique_ptr<HostPool> pool;
  const Status st = make(c, 100, kPlenty, &pool);
  EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG);
  EXPECT_NE(st.message().find("12 tokens"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("100 tokens"), std::string::npos) << st.message();
  EXPECT_EQ(pool, nullptr);
  // Exactly the device size is refused too; one page more (SGLang's +1) passes.
  c.size_bytes = 100 * 128;  // 100 tokens -> 26 pages = 104 tokens with device 104
  EXPECT_EQ(make(c, 104, kPlenty, &pool).code(), KVPOOL_ERR_CONFIG);
  EXPECT_TRUE(make(c, 103, kPlenty, &pool).is_ok());
  EXPECT_EQ(pool->tokens(), 104u);
}

TEST_F(HostPoolTest, HeadroomRefusalNamesTheNumbers) {
  config::HostCacheConfig c = ratio(2.0);  // 204 tokens x 128 = 26112 bytes
  c.headroom_bytes = int64_t(10) << 30;
  const uint64_t need = 204 * 128;
  const uint64_t headroom = uint64_t(10) << 30;
  std::unique_ptr<HostPool> pool;
  Status st = make(c, 100, headroom + need - 1, &pool);
  EXPECT_EQ(st.code(), KVPOOL_ERR_HOST_MEMORY);
  EXPECT_NE(st.message().find("host_cache needs 26112 bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("only 26111 are free after the 10.00 GiB headroom"), std::string::npos) << st.message();
  EXPECT_EQ(pool, nullptr);
  EXPECT_TRUE(make(c, 100, headroom + need, &pool).is_ok()) << "exactly enough is enough";
  // Less free memory than the headroom: nothing is allowed.
  st = make(c, 100, headroom / 2, &pool);
  EXPECT_EQ(st.code(), KVPOOL_ERR_HOST_MEMORY);
  EXPECT_NE(st.message().find("only 0 are free"), std::string::npos) << st.message();
  // headroom_bytes 0: all free memory may be used.
  c.headroom_bytes = 0;
  EXPECT_TRUE(make(c, 100, need, &pool).is_ok());
  EXPECT_EQ(make(c, 100, need - 1, &pool).code(), KVPOOL_ERR_HOST_MEMORY);
}

TEST_F(HostPoolTest, PageHeadOfUnsplittableRowsIsAConfigError) {
  std::unique_ptr<HostPool> pool;
  HostGeometry g = geometry(HostLayout::kPageHead, {part(96, 0)}, 4, 0, 2);
  const Status st = HostPool::make(backend.get(), ratio(2.0), 100, g, kPlenty, &pool);
  EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG);
  EXPECT_NE(st.message().find("$.host_cache.layout"), std::string::npos) << st.message();
}

// ---- allocator ----

TEST_F(HostPoolTest, AllocIsAllOrNone) {
  std::unique_ptr<HostPool> pool;
  ASSERT_TRUE(make(ratio(2.0), 100, kPlenty, &pool).is_ok());  // 51 pages
  std::vector<int64_t> a(50, -1);
  ASSERT_TRUE(pool->alloc(50, a.data()).is_ok());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], static_cast<int64_t>(i)) << "pages in order from 0";
  for (int64_t p : a) EXPECT_TRUE(pool->is_held(p));
  std::vector<int64_t> b(2, -7);
  const Status st = pool->alloc(2, b.data());
  EXPECT_EQ(st.code(), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_NE(st.message().find("2 pages requested, 1 free"), std::string::npos) << st.message();
  EXPECT_EQ(b, std::vector<int64_t>(2, -7)) << "nothing written";
  EXPECT_EQ(pool->free_pages(), 1u);
  EXPECT_EQ(pool->held_pages(), 50u);
  ASSERT_TRUE(pool->alloc(1, b.data()).is_ok());
  EXPECT_EQ(b[0], 50);
  EXPECT_TRUE(pool->alloc(0, nullptr).is_ok());
  std::string report;
  EXPECT_EQ(pool->check(&report, 10), 0u) << report;
}

TEST_F(HostPoolTest, RefusedFreesChangeNothing) {
  std::unique_ptr<HostPool> pool;
  ASSERT_TRUE(make(ratio(2.0), 100, kPlenty, &pool).is_ok());
  std::vector<int64_t> held(6);
  ASSERT_TRUE(pool->alloc(held.size(), held.data()).is_ok());
  ASSERT_TRUE(pool->free(&held[5], 1).is_ok());  // page 5 now free
  const size_t free_before = pool->free_pages();
  struct Case {
    std::vector<int64_t> pages;
    std::string message;
  };
  const Case cases[] = {
      {{0, 1, 5}, "pages[2] = 5 is not held"},
      {{0, 2, 0}, "pages[2] = 0 is listed twice"},
      {{3, 51}, "pages[1] = 51 is out of range [0, 51)"},
      {{-1}, "pages[0] = -1 is out of range"},
      {{4, 3, 2, 3}, "pages[3] = 3 is listed twice"},
  };
  for (const Case& c : cases) {
    const Status st = pool->free(c.pages.data(), c.pages.size());
    EXPECT_EQ(st.code(), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
    EXPECT_EQ(pool->free_pages(), free_before);
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(pool->is_held(i)) << "page " << i << " still held";
    EXPECT_FALSE(pool->is_held(5));
    std::string report;
    EXPECT_EQ(pool->check(&report, 10), 0u) << report;
  }
  // The same pages, listed once each, are taken back.
  ASSERT_TRUE(pool->free(held.data(), 5).is_ok());
  EXPECT_EQ(pool->free_pages(), pool->pages());
  EXPECT_FALSE(pool->is_held(-1));
  EXPECT_FALSE(pool->is_held(1000));
}

TEST_F(HostPoolTest, FreedPagesAreReusedAndClearResets) {
  std::unique_ptr<HostPool> pool;
  ASSERT_TRUE(make(ratio(2.0), 100, kPlenty, &pool).is_ok());
  std::vector<int64_t> pages(pool->pages());
  ASSERT_TRUE(pool->alloc(pages.size(), pages.data()).is_ok());
  const int64_t back[] = {7, 3};
  ASSERT_TRUE(pool->free(back, 2).is_ok());
  int64_t again[2] = {-1, -1};
  ASSERT_TRUE(pool->alloc(2, again).is_ok());
  std::sort(again, again + 2);
  EXPECT_EQ(again[0], 3);
  EXPECT_EQ(again[1], 7);
  pool->clear();
  EXPECT_EQ(pool->free_pages(), pool->pages());
  EXPECT_EQ(pool->held_pages(), 0u);
  for (int64_t p = 0; p < static_cast<int64_t>(pool->pages()); ++p) EXPECT_FALSE(pool->is_held(p));
  std::string report;
  EXPECT_EQ(pool->check(&report, 10), 0u) << report;
  int64_t first = -1;
  ASSERT_TRUE(pool->alloc(1, &first).is_ok());
  EXPECT_EQ(first, 0);
}

// Memory from the backend goes back to it: a backend that counts.
class CountingBackend final : public backend::Backend {
 public:
  std::unique_ptr<backend::Backend> cpu = backend::make_cpu_backend();
  int live = 0;
  size_t last_bytes = 0;
  int device_type() const override { return cpu->device_type(); }
  int device_id() const override { return 0; }
  const char* name() const override { return "counting"; }
  Status allocate(size_t bytes, void** out) override { return cpu->allocate(bytes, out); }
  void deallocate(void* p) noexcept override { cpu->deallocate(p); }
  Status allocate_host(size_t bytes, void** out) override {
    last_bytes = bytes;
    KVPOOL_RETURN_IF_ERROR(cpu->allocate_host(bytes, out));
    ++live;
    return Status::ok();
  }
  void deallocate_host(void* p) noexcept override {
    --live;
    cpu->deallocate_host(p);
  }
  Status zero(void* d, size_t b) override { return cpu->zero(d, b); }
  Status copy_rows(const backend::RowCopy& c) override { return cpu->copy_rows(c); }
  Status scatter_from_host(const backend::RowCopy& c) override { return cpu->scatter_from_host(c); }
  Status gather_to_host(const backend::RowCopy& c) override { return cpu->gather_to_host(c); }
  Status to_host(void* h, const void* d, size_t b) override { return cpu->to_host(h, d, b); }
  Status from_host(void* d, const void* h, size_t b) override { return cpu->from_host(d, h, b); }
};

TEST(HostPoolMemory, ComesFromTheBackendAndGoesBack) {
  CountingBackend b;
  config::HostCacheConfig c;
  c.ratio = 2.0;
  c.headroom_bytes = 0;
  std::unique_ptr<HostPool> pool;
  ASSERT_TRUE(HostPool::make(&b, c, 100, geometry(HostLayout::kPageFirst, {part(32, 2)}, 4, 0, 3), kPlenty, &pool)
                  .is_ok());
  EXPECT_EQ(b.live, 1);
  EXPECT_EQ(b.last_bytes, pool->geometry().bytes);
  EXPECT_EQ(pool->geometry().bytes, (204u * 32 * 3 + 255) / 256 * 256) << "the region rounded up to 256 bytes";
  // Writable end to end (the tier's memory is not zero-filled, but it is all there).
  std::memset(pool->data(), 0x5A, pool->geometry().bytes);
  pool.reset();
  EXPECT_EQ(b.live, 0);
}

}  // namespace
}  // namespace kvp::host
