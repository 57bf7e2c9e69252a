// Host-tier copies of CPU pools (host_transfer_cpu.cpp) for every pool variant and
// every layout it accepts: KV written through the buffer operations behind buffers.h
// (set_kv / set_mla_kv / set_label / set_indexer) is backed up from some device pages
// to host pages, lands where the host geometry says, and after the device rows are
// overwritten, loading the host pages into other device pages gives back exactly the
// bytes that were written. Bad inputs are refused with nothing copied.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc/swa_allocator.hpp"
#include "backend/backend.hpp"
#include "config/config.hpp"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
#include "plan/plan.hpp"
#include "pool/kv_buffers.hpp"

namespace kvp::host {
namespace {

std::string config_json(const std::string& model, const std::string& pool) {
  return R"({"model": {)" + model + R"(}, "pool": {"device": "cpu", )" + pool + "}}";
}

struct Variant {
  std::string name;
  std::string json;
  bool page_head;  // accepted by page_head (mha-like values only)
};

const std::string kSmall = R"("max_running_requests": 4, "max_context_len": 64)";

std::vector<Variant> variants() {
  return {
      {"mha bf16", config_json(R"("num_layers": 3, "kv_heads": 2, "head_dim": 16)",
                               R"("kv_dtype": "bf16", "page_size": 4, "max_total_tokens": 64, )" + kSmall),
       true},
      {"mha f32 P1 pipeline stage",
       config_json(R"("num_layers": 6, "kv_heads": 4, "head_dim": 8)",
                   R"("kv_dtype": "f32", "page_size": 1, "max_total_tokens": 64, )" + kSmall +
                       R"(}, "parallel": {"tp_size": 2, "tp_rank": 1, "start_layer": 2, "end_layer": 4)"),
       true},
      {"mha fp4", config_json(R"("num_layers": 2, "kv_heads": 2, "head_dim": 16)",
                              R"("kv_dtype": "fp4_e2m1", "page_size": 4, "max_total_tokens": 64, )" + kSmall),
       false},
      {"mla bf16", config_json(R"("num_layers": 2, "attention": "mla", "kv_lora_rank": 32, "qk_rope_head_dim": 16)",
                               R"("kv_dtype": "bf16", "page_size": 4, "max_total_tokens": 64, )" + kSmall),
       false},
      {"nsa bf16", config_json(R"("num_layers": 2, "attention": "nsa", "kv_lora_rank": 256, "qk_rope_head_dim": 16)",
                               R"("kv_dtype": "bf16", "page_size": 64, "max_total_tokens": 512, )" + kSmall),
       false},
      {"nsa fp8_e4m3",
       config_json(R"("num_layers": 2, "attention": "nsa", "kv_lora_rank": 256, "qk_rope_head_dim": 16)",
                   R"("kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": 512, )" + kSmall),
       false},
      {"double_sparse f16",
       config_json(R"("num_layers": 2, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16, "heavy_channels": 4)",
                   R"("kv_dtype": "f16", "page_size": 1, "max_total_tokens": 64, )" + kSmall),
       false},
      {"double_sparse f32 P4",
       config_json(R"("num_layers": 2, "attention": "double_sparse", "kv_heads": 2, "head_dim": 16, "heavy_channels": 4)",
                   R"("kv_dtype": "f32", "page_size": 4, "max_total_tokens": 64, )" + kSmall),
       false},
      {"swa f32", config_json(R"("num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 16, "sliding_window": 8,
                                 "swa_layer_pattern": "SF")",
                              R"("kv_dtype": "f32", "page_size": 1, "max_total_tokens": 64, )" + kSmall),
       true},
      {"hybrid_linear f32",
       config_json(R"("num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 16,
                      "full_attention_layers": [1, 3],
                      "mamba": {"conv_shape": [8, 3], "ssm_shape": [2, 4, 4]})",
                   R"("kv_dtype": "f32", "page_size": 1, "max_total_tokens": 64, "mamba_cache_size": 24, )" + kSmall),
       true},
  };
}

const HostLayout kLayouts[] = {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                               HostLayout::kPageHead};

// A CPU pool's KV buffers with a host tier of ratio 2 and its transfer engine.
struct Tier {
  config::Config c;
  plan::Plan p;
  std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend();
  std::unique_ptr<alloc::SwaAllocator> swa;
  std::unique_ptr<pool::KvBuffers> kv;
  std::unique_ptr<HostPool> host;
  std::unique_ptr<HostTransfer> transfer;
  std::vector<int> tiered;  // global ids of the tiered layers

  Status make(const std::string& json, HostLayout layout) {
    KVPOOL_RETURN_IF_ERROR(config::parse_config(json.data(), json.size(), &c));
    KVPOOL_RETURN_IF_ERROR(plan::compute_plan(c, nullptr, &p));
    const int64_t* mapping = nullptr;
    if (c.model.attention == config::Attention::kSWA) {
      swa = std::make_unique<alloc::SwaAllocator>(static_cast<int64_t>(p.max_total_tokens),
                                                  static_cast<int64_t>(p.swa_tokens), false);
      mapping = swa->mapping_data();
    }
    KVPOOL_RETURN_IF_ERROR(pool::KvBuffers::make(backend.get(), c, p, mapping, &kv));
    HostGeometry g;
    g.layout = layout;
    g.page_size = p.page_size;
    KVPOOL_RETURN_IF_ERROR(kv->tier_parts(&g.parts, &g.layers));
    config::HostCacheConfig hc;
    hc.enabled = true;
    hc.ratio = 2.0;
    hc.headroom_bytes = 0;
    KVPOOL_RETURN_IF_ERROR(HostPool::make(backend.get(), hc, p.max_total_tokens, g, uint64_t(1) << 40, &host));
    transfer = make_cpu_transfer(host.get());
    for (int l = c.parallel.start_layer; l <= c.parallel.end_layer; ++l) {
      const bool mixed = c.model.attention == config::Attention::kSWA ||
                         c.model.attention == config::Attention::kHybridLinear;
      if (!mixed || c.model.layer_is_full[static_cast<size_t>(l)]) tiered.push_back(l);
    }
    return Status::ok();
  }

  bool latent() const {
    return c.model.attention == config::Attention::kMLA || c.model.attention == config::Attention::kNSA;
  }
  uint64_t P() const { return p.page_size; }
  std::vector<int64_t> slots_of(const std::vector<int64_t>& pages) const {
    std::vector<int64_t> s;
    for (int64_t pg : pages) {
      for (uint64_t j = 0; j < P(); ++j) s.push_back(pg * static_cast<int64_t>(P()) + static_cast<int64_t>(j));
    }
    return s;
  }

  // Random values into every tiered layer of `pages`: KV (and labels / indexer).
  void write(const std::vector<int64_t>& pages, std::mt19937* rng) {
    const std::vector<int64_t> slots = slots_of(pages);
    const size_t n = slots.size();
    std::uniform_real_distribution<float> value(-4.0f, 4.0f);
    const auto randoms = [&](size_t count) {
      std::vector<float> v(count);
      for (float& x : v) x = value(*rng);
      return v;
    };
    for (int layer : tiered) {
      if (latent()) {
        const std::vector<float> nope = randoms(n * static_cast<size_t>(c.model.kv_lora_rank));
        const std::vector<float> rope = randoms(n * static_cast<size_t>(c.model.qk_rope_head_dim));
        ASSERT_TRUE(kv->set_mla_kv(layer, slots.data(), n, nope.data(), nope.size() * 4, rope.data(), rope.size() * 4,
                                   KVPOOL_DTYPE_F32)
                        .is_ok());
      } else {
        const size_t row = static_cast<size_t>(p.kv_heads_per_rank) * static_cast<size_t>(c.model.head_dim);
        const std::vector<float> k = randoms(n * row), v = randoms(n * row);
        const Status st =
            kv->set_kv(layer, slots.data(), n, k.data(), k.size() * 4, v.data(), v.size() * 4, KVPOOL_DTYPE_F32, 1, 1);
        ASSERT_TRUE(st.is_ok()) << st.message();
      }
      if (c.model.attention == config::Attention::kDoubleSparse) {
        kvpool_buffer b = KVPOOL_BUFFER_INIT;
        ASSERT_TRUE(kv->describe(KVPOOL_BUFFER_LABEL, layer, &b).is_ok());
        const size_t row = static_cast<size_t>(b.bytes / static_cast<uint64_t>(b.shape[0]));
        std::vector<uint8_t> labels(n * row);
        for (uint8_t& x : labels) x = static_cast<uint8_t>((*rng)());
        ASSERT_TRUE(kv->set_label(layer, slots.data(), n, labels.data(), labels.size()).is_ok());
      }
      if (c.model.attention == config::Attention::kNSA) {
        const size_t dim = static_cast<size_t>(c.model.index_head_dim);
        std::vector<uint8_t> keys(n * dim);
        for (uint8_t& x : keys) x = static_cast<uint8_t>((*rng)());
        const std::vector<float> scales = randoms(n);
        ASSERT_TRUE(kv->set_indexer(layer, slots.data(), n, keys.data(), keys.size(), scales.data(), n).is_ok());
      }
    }
  }

  // What the pool holds for `pages`, per tiered layer: get_kv as f32, then the raw rows of
  // labels (per slot) or the indexer (per page) read through describe().
  std::vector<std::vector<uint8_t>> read(const std::vector<int64_t>& pages) const {
    const std::vector<int64_t> slots = slots_of(pages);
    const size_t n = slots.size();
    std::vector<std::vector<uint8_t>> out;
    for (int layer : tiered) {
      std::vector<uint8_t> bytes;
      const size_t row = latent() ? static_cast<size_t>(c.model.kv_lora_rank + c.model.qk_rope_head_dim)
                                  : static_cast<size_t>(p.kv_heads_per_rank) * static_cast<size_t>(c.model.head_dim);
      std::vector<float> k(n * row), v(latent() ? 0 : n * row);
      const Status st = kv->get_kv(layer, slots.data(), n, k.data(), k.size() * 4, latent() ? nullptr : v.data(),
                                   v.size() * 4, KVPOOL_DTYPE_F32);
      EXPECT_TRUE(st.is_ok()) << st.message();
      const auto append = [&](const void* data, size_t len) {
        const auto* b = static_cast<const uint8_t*>(data);
        bytes.insert(bytes.end(), b, b + len);
      };
      append(k.data(), k.size() * 4);
      append(v.data(), v.size() * 4);
      const auto rows = [&](int32_t kind, const std::vector<int64_t>& ids) {
        kvpool_buffer b = KVPOOL_BUFFER_INIT;
        EXPECT_TRUE(kv->describe(kind, layer, &b).is_ok());
        const uint64_t row_bytes = b.bytes / static_cast<uint64_t>(b.shape[0]);
        for (int64_t id : ids) append(static_cast<const uint8_t*>(b.data) + id * row_bytes, row_bytes);
      };
      if (c.model.attention == config::Attention::kDoubleSparse) rows(KVPOOL_BUFFER_LABEL, slots);
      if (c.model.attention == config::Attention::kNSA) rows(KVPOOL_BUFFER_INDEXER, pages);
      out.push_back(std::move(bytes));
    }
    return out;
  }

  // Bytes one page moves: every part of every tiered layer.
  uint64_t page_bytes() const {
    const HostGeometry& g = host->geometry();
    uint64_t b = 0;
    for (const TierPart& part : g.parts) b += (part.per_page ? 1 : g.page_size) * part.item_bytes * g.layers;
    return b;
  }

  // Every (part, token, layer, piece) of host page `h` equals the device row it came from.
  void expect_host_matches_device(int64_t device_page, int64_t host_page) const {
    const HostGeometry& g = host->geometry();
    for (size_t p = 0; p < g.parts.size(); ++p) {
      const TierPart& part = g.parts[p];
      for (uint32_t l = 0; l < g.layers; ++l) {
        if (part.per_page) {
          ASSERT_EQ(std::memcmp(host->data() + g.offset(p, static_cast<uint64_t>(host_page), l),
                                part.device_base[l] + static_cast<uint64_t>(device_page) * part.device_stride,
                                part.item_bytes),
                    0)
              << "page part " << p << " layer " << l;
          continue;
        }
        for (uint64_t j = 0; j < g.page_size; ++j) {
          for (uint32_t h = 0; h < g.pieces(p); ++h) {
            const uint64_t t = static_cast<uint64_t>(host_page) * g.page_size + j;
            const uint64_t row = static_cast<uint64_t>(device_page) * g.page_size + j;
            ASSERT_EQ(std::memcmp(host->data() + g.offset(p, t, l, h),
                                  part.device_base[l] + row * part.device_stride + h * g.piece_bytes(p),
                                  g.piece_bytes(p)),
                      0)
                << "part " << p << " token " << j << " layer " << l << " piece " << h;
          }
        }
      }
    }
  }
};

// Backs up `src` pages to `host_pages`, overwrites `src`, loads into `dst`, compares.
void round_trip(Tier* s, const std::vector<int64_t>& src, const std::vector<int64_t>& host_pages,
                const std::vector<int64_t>& dst, std::mt19937* rng) {
  s->write(src, rng);
  const std::vector<std::vector<uint8_t>> written = s->read(src);
  const uint64_t to_host = s->transfer->bytes_to_host(), to_device = s->transfer->bytes_to_device();
  uint64_t ticket = 0;
  ASSERT_TRUE(s->transfer->backup(src.data(), host_pages.data(), src.size(), &ticket).is_ok());
  EXPECT_TRUE(s->transfer->finished(ticket));
  EXPECT_TRUE(s->transfer->wait(ticket).is_ok());
  EXPECT_EQ(s->transfer->bytes_to_host() - to_host, src.size() * s->page_bytes());
  for (size_t i = 0; i < src.size(); ++i) s->expect_host_matches_device(src[i], host_pages[i]);

  s->write(src, rng);  // the device copy is gone
  ASSERT_NE(s->read(src), written) << "the overwrite changed the source rows";
  uint64_t load_ticket = 0;
  ASSERT_TRUE(s->transfer->load(host_pages.data(), dst.data(), dst.size(), 1, &load_ticket).is_ok());
  EXPECT_GT(load_ticket, ticket);
  EXPECT_TRUE(s->transfer->finished(load_ticket));
  for (uint32_t l = 0; l < s->host->geometry().layers; ++l) EXPECT_TRUE(s->transfer->wait_layer(1, l, nullptr).is_ok());
  EXPECT_EQ(s->transfer->bytes_to_device() - to_device, dst.size() * s->page_bytes());
  EXPECT_EQ(s->read(dst), written) << "the loaded pages hold what was written";
}

TEST(HostTransferCpu, RoundTripsEveryVariantAndLayout) {
  std::mt19937 rng(12);
  for (const Variant& v : variants()) {
    for (const HostLayout layout : kLayouts) {
      SCOPED_TRACE(v.name + ", " + host_layout_name(layout));
      Tier s;
      const Status st = s.make(v.json, layout);
      if (layout == HostLayout::kPageHead && !v.page_head) {
        EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG) << st.message();
        EXPECT_NE(st.message().find("page_head"), std::string::npos) << st.message();
        continue;
      }
      ASSERT_TRUE(st.is_ok()) << st.message();
      ASSERT_GE(s.host->geometry().device_pages(), 4u);
      const int64_t last = static_cast<int64_t>(s.host->geometry().device_pages()) - 1;
      // Consecutive pages both sides (coalesced copies), then scattered ones.
      round_trip(&s, {1, 2}, {3, 4}, {last - 1, last}, &rng);
      const int64_t top = static_cast<int64_t>(s.host->pages()) - 1;
      round_trip(&s, {last, 1, 2}, {top, 0, 2}, {3, last - 1, 0}, &rng);
    }
  }
}

TEST(HostTransferCpu, TieredLayersAreTheFullAttentionOnes) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    Tier s;
    ASSERT_TRUE(s.make(v.json, HostLayout::kLayerFirst).is_ok());
    EXPECT_EQ(s.host->geometry().layers, s.tiered.size());
  }
  Tier swa;
  ASSERT_TRUE(swa.make(variants()[8].json, HostLayout::kLayerFirst).is_ok());
  EXPECT_EQ(swa.tiered, (std::vector<int>{1, 3})) << "swa window layers are not tiered";
  Tier hybrid;
  ASSERT_TRUE(hybrid.make(variants()[9].json, HostLayout::kLayerFirst).is_ok());
  EXPECT_EQ(hybrid.tiered, (std::vector<int>{1, 3}));
}

TEST(HostTransferCpu, DoubleSparseLastPageHasNoLabelsAndIsNotTiered) {
  // Labels have size + 1 = 65 rows, K/V 68: 16 whole label pages of 4 against 17 K/V pages.
  Tier s;
  ASSERT_TRUE(s.make(variants()[7].json, HostLayout::kLayerFirst).is_ok());
  EXPECT_EQ(s.host->geometry().device_pages(), 16u);
  const int64_t last = 16, host_page = 0;
  uint64_t ticket = 0;
  const Status st = s.transfer->backup(&last, &host_page, 1, &ticket);
  EXPECT_EQ(st.code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("device_pages[0] = 16 is out of range [0, 16)"), std::string::npos) << st.message();
}

TEST(HostTransferCpu, WindowLayersAreLeftAlone) {
  Tier s;
  ASSERT_TRUE(s.make(variants()[8].json, HostLayout::kPageFirst).is_ok());
  kvpool_buffer window = KVPOOL_BUFFER_INIT;
  ASSERT_TRUE(s.kv->describe(KVPOOL_BUFFER_K, 0, &window).is_ok());
  std::memset(window.data, 0x3C, window.bytes);
  std::mt19937 rng(5);
  round_trip(&s, {1, 2}, {0, 1}, {5, 6}, &rng);
  for (uint64_t i = 0; i < window.bytes; ++i) ASSERT_EQ(static_cast<uint8_t*>(window.data)[i], 0x3C);
}

// A snapshot of everything a transfer could write.
struct Snapshot {
  std::vector<uint8_t> host, device;
  static Snapshot of(const Tier& s) {
    Snapshot out;
    out.host.assign(s.host->data(), s.host->data() + s.host->geometry().bytes);
    const HostGeometry& g = s.host->geometry();
    for (const TierPart& part : g.parts) {
      for (uint8_t* base : part.device_base) {
        out.device.insert(out.device.end(), base, base + part.device_rows * part.device_stride);
      }
    }
    return out;
  }
  bool operator==(const Snapshot& o) const { return host == o.host && device == o.device; }
};

TEST(HostTransferCpu, BadInputsAreRefusedWithNothingCopied) {
  for (const size_t variant : {size_t(0), size_t(4)}) {  // mha P 4, nsa (a page part) P 64
    Tier s;
    ASSERT_TRUE(s.make(variants()[variant].json, HostLayout::kLayerFirst).is_ok());
    std::mt19937 rng(9);
    s.write({1, 2, 3}, &rng);
    std::memset(s.host->data(), 0x77, s.host->geometry().bytes);
    const Snapshot before = Snapshot::of(s);
    const int64_t dev_limit = static_cast<int64_t>(s.host->geometry().device_pages());
    const int64_t host_limit = static_cast<int64_t>(s.host->pages());
    EXPECT_EQ(dev_limit, static_cast<int64_t>((s.p.max_total_tokens + s.P()) / s.P()));
    struct Case {
      std::vector<int64_t> device, host;
      int set;
      std::string message;
    };
    const Case cases[] = {
        {{1, 2, dev_limit}, {0, 1, 2}, 0, "device_pages[2] = " + std::to_string(dev_limit) + " is out of range"},
        {{1, -1}, {0, 1}, 0, "device_pages[1] = -1 is out of range"},
        {{1, 2}, {0, host_limit}, 0, "host_pages[1] = " + std::to_string(host_limit) + " is out of range [0, " +
                                         std::to_string(host_limit) + ")"},
        {{1, 2}, {-3, 0}, 0, "host_pages[0] = -3"},
        {{1, 2}, {0, 1}, 3, "load set 3 is out of range [0, 3)"},
        {{1, 2}, {0, 1}, -1, "load set -1"},
    };
    uint64_t ticket = 99;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.message);
      if (c.set == 0) {
        const Status st = s.transfer->backup(c.device.data(), c.host.data(), c.device.size(), &ticket);
        EXPECT_EQ(st.code(), KVPOOL_ERR_INVALID_ARGUMENT);
        EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
      }
      const Status st = s.transfer->load(c.host.data(), c.device.data(), c.device.size(), c.set, &ticket);
      EXPECT_EQ(st.code(), KVPOOL_ERR_INVALID_ARGUMENT);
      EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
      EXPECT_TRUE(Snapshot::of(s) == before) << "nothing copied";
      EXPECT_EQ(ticket, 99u) << "no ticket issued";
    }
    const int64_t one = 1;
    EXPECT_EQ(s.transfer->backup(&one, &one, 1, nullptr).code(), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(s.transfer->backup(nullptr, &one, 1, &ticket).code(), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(s.transfer->load(&one, nullptr, 1, 0, &ticket).code(), KVPOOL_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(Snapshot::of(s) == before);
    EXPECT_EQ(s.transfer->bytes_to_host(), 0u);
    EXPECT_EQ(s.transfer->bytes_to_device(), 0u);
    // Empty work is fine and still gets a ticket.
    EXPECT_TRUE(s.transfer->backup(nullptr, nullptr, 0, &ticket).is_ok());
    EXPECT_TRUE(s.transfer->finished(ticket));
    EXPECT_TRUE(Snapshot::of(s) == before);
  }
}

TEST(HostTransferCpu, WaitLayerChecksSetAndLayer) {
  Tier s;
  ASSERT_TRUE(s.make(variants()[0].json, HostLayout::kPageFirst).is_ok());
  const uint32_t layers = s.host->geometry().layers;
  ASSERT_EQ(layers, 3u);
  for (int set = 0; set < kLoadSets; ++set) {
    for (uint32_t l = 0; l < layers; ++l) EXPECT_TRUE(s.transfer->wait_layer(set, l, nullptr).is_ok());
  }
  Status st = s.transfer->wait_layer(0, layers, nullptr);
  EXPECT_EQ(st.code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(st.message().find("layer 3 is not a tiered layer"), std::string::npos) << st.message();
  EXPECT_EQ(s.transfer->wait_layer(kLoadSets, 0, nullptr).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(s.transfer->wait_layer(-1, 0, nullptr).code(), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(s.transfer->set_compute_stream(nullptr).is_ok());
  EXPECT_TRUE(s.transfer->finished(12345)) << "unknown tickets count as finished";
}

}  // namespace
}  // namespace kvp::host
