// The storage tier's page names and page format (lib/storage/page_key.hpp,
// page_format.hpp): keys, fingerprints that separate models, and every check a
// stored page must pass before it is loaded.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <vector>

#include "config/config.hpp"
#include "host/host_geometry.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

namespace {

using kvp::cache::Digest;
using kvp::storage::check_page;
using kvp::storage::Fingerprint;
using kvp::storage::kPageHeaderBytes;
using kvp::storage::PageCheck;

kvp::config::Config llama_like() {
  kvp::config::Config c;
  c.model.name = "llama-3.1-8b";
  c.model.num_layers = 32;
  c.model.kv_heads = 8;
  c.model.head_dim = 128;
  c.model.layer_is_full.assign(32, true);
  c.parallel.end_layer = 31;
  c.pool.page_size = 64;
  return c;
}

kvp::host::HostGeometry geometry_of(uint64_t row_bytes, uint32_t layers, uint64_t page) {
  kvp::host::HostGeometry g;
  g.page_size = page;
  g.layers = layers;
  g.parts.resize(2);  // K and V
  for (auto& p : g.parts) p.item_bytes = row_bytes;
  return g;
}

Digest digest_of(uint8_t seed) {
  Digest d;
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(seed + i * 7);
  return d;
}

TEST(StorageKey, KeyIsNamespacedDigest) {
  const Fingerprint fp = kvp::storage::fingerprint_of("some model");
  const Digest d = digest_of(1);
  const std::string key = kvp::storage::page_key(fp, d);
  EXPECT_EQ(key.size(), kvp::storage::kPageKeyLength);
  EXPECT_EQ(key.substr(0, 5), "kvp1-");
  EXPECT_EQ(key.substr(5, 32), fp.hex());
  EXPECT_EQ(key[37], '-');
  EXPECT_EQ(key.substr(38, 4), "0108");  // digest bytes 0x01, 0x08
  for (char ch : key) EXPECT_TRUE((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || ch == '-') << key;
  EXPECT_NE(key, kvp::storage::page_key(fp, digest_of(2)));
}

TEST(StorageKey, FingerprintSeparatesWhatChangesThePagesBytes) {
  const kvp::config::Config base = llama_like();
  const kvp::host::HostGeometry g = geometry_of(8 * 128 * 2, 32, 64);
  const Fingerprint ref = kvp::storage::fingerprint_of(kvp::storage::model_identity(base, g));
  EXPECT_EQ(ref, kvp::storage::fingerprint_of(kvp::storage::model_identity(base, g)));  // deterministic

  std::vector<std::pair<const char*, Fingerprint>> variants;
  const auto add = [&](const char* what, const kvp::config::Config& c, const kvp::host::HostGeometry& geo) {
    variants.emplace_back(what, kvp::storage::fingerprint_of(kvp::storage::model_identity(c, geo)));
  };
  kvp::config::Config c = base;
  c.model.name = "llama-3.1-8b-instruct";
  add("model name", c, g);
  c = base;
  c.pool.kv_dtype = kvp::config::DType::kFP8E4M3;
  add("kv dtype", c, g);
  add("page size", base, geometry_of(8 * 128 * 2, 32, 16));
  add("row bytes", base, geometry_of(4 * 128 * 2, 32, 64));
  c = base;
  c.parallel.tp_size = 2;
  c.parallel.tp_rank = 1;
  add("tp shard", c, g);
  c = base;
  c.parallel.start_layer = 16;
  add("layer range (pipeline stage)", c, geometry_of(8 * 128 * 2, 16, 64));
  for (const auto& [what, fp] : variants) EXPECT_NE(fp, ref) << what;

  // The host layout does not matter: stored pages are layout independent.
  kvp::host::HostGeometry other = g;
  other.layout = kvp::host::HostLayout::kPageFirst;
  EXPECT_EQ(kvp::storage::fingerprint_of(kvp::storage::model_identity(base, other)), ref);
  // MLA latent rows are the same on every tensor-parallel rank: one namespace for all of them.
  kvp::config::Config mla = base;
  mla.model.attention = kvp::config::Attention::kMLA;
  kvp::config::Config mla_rank1 = mla;
  mla_rank1.parallel.tp_size = 2;
  mla_rank1.parallel.tp_rank = 1;
  EXPECT_EQ(kvp::storage::fingerprint_of(kvp::storage::model_identity(mla, g)),
            kvp::storage::fingerprint_of(kvp::storage::model_identity(mla_rank1, g)));
}

class StoredPage : public ::testing::Test {
 protected:
  static constexpr uint64_t kPayload = 4096 + 17;
  void SetUp() override {
    fp_ = kvp::storage::fingerprint_of("model A");
    digest_ = digest_of(9);
    page_.resize(kvp::storage::stored_page_bytes(kPayload));
    std::mt19937 rng(5);
    for (size_t i = kPageHeaderBytes; i < page_.size(); ++i) page_[i] = uint8_t(rng());
    kvp::storage::seal_page(page_.data(), kPayload, fp_, digest_);
  }
  PageCheck check(const std::vector<uint8_t>& p) const { return check_page(p.data(), p.size(), fp_, digest_, kPayload); }
  Fingerprint fp_;
  Digest digest_;
  std::vector<uint8_t> page_;
};

TEST_F(StoredPage, SealedPagePasses) {
  EXPECT_EQ(check(page_), PageCheck::kOk);
  EXPECT_EQ(std::memcmp(page_.data(), "KVPOOLPG", 8), 0);
}

TEST_F(StoredPage, EveryFlippedByteIsCaught) {
  // A flipped byte anywhere, header or payload, fails a check (the reserved field is covered by
  // the header checksum too).
  for (size_t i = 0; i < page_.size(); i += (i < kPageHeaderBytes ? 1 : 61)) {
    std::vector<uint8_t> bad = page_;
    bad[i] ^= 0x20;
    EXPECT_NE(check(bad), PageCheck::kOk) << "byte " << i;
  }
}

TEST_F(StoredPage, TruncatedAndExtendedPages) {
  for (size_t len : {size_t(0), size_t(10), kPageHeaderBytes - 1, kPageHeaderBytes, page_.size() - 1}) {
    std::vector<uint8_t> cut(page_.begin(), page_.begin() + long(len));
    EXPECT_EQ(check(cut), PageCheck::kTruncated) << len;
  }
  std::vector<uint8_t> longer = page_;
  longer.push_back(0);
  EXPECT_EQ(check(longer), PageCheck::kCorrupt);
}

TEST_F(StoredPage, ForeignVersionAndWrongKey) {
  const Fingerprint other = kvp::storage::fingerprint_of("model B");
  EXPECT_EQ(check_page(page_.data(), page_.size(), other, digest_, kPayload), PageCheck::kForeign);
  EXPECT_EQ(check_page(page_.data(), page_.size(), fp_, digest_of(10), kPayload), PageCheck::kWrongKey);
  EXPECT_EQ(check_page(page_.data(), page_.size(), fp_, digest_, kPayload + 1), PageCheck::kForeign);
  // Another format version with a valid header checksum: recognised as such, not loaded.
  std::vector<uint8_t> v3 = page_;
  v3[8] = 3;
  const uint64_t sum = XXH3_64bits(v3.data(), 88);
  std::memcpy(v3.data() + 88, &sum, 8);
  EXPECT_EQ(check(v3), PageCheck::kVersion);
  v3[8] = 2;  // back to this version with the version-3 checksum: corrupt
  EXPECT_EQ(check(v3), PageCheck::kCorrupt);
  // A page as version 1 wrote it (the payload checksum one XXH3-64 over the payload, the
  // header's as now): another version, never loaded, even though its checksums are right.
  std::vector<uint8_t> v1 = page_;
  v1[8] = 1;
  const uint64_t v1_payload_sum = XXH3_64bits(v1.data() + 96, kPayload);
  std::memcpy(v1.data() + 72, &v1_payload_sum, 8);
  const uint64_t v1_sum = XXH3_64bits(v1.data(), 88);
  std::memcpy(v1.data() + 88, &v1_sum, 8);
  EXPECT_EQ(check(v1), PageCheck::kVersion);
  EXPECT_EQ(page_[8], 2) << "this library writes version 2";
  for (const PageCheck c : {PageCheck::kOk, PageCheck::kTruncated, PageCheck::kCorrupt, PageCheck::kVersion,
                            PageCheck::kForeign, PageCheck::kWrongKey}) {
    EXPECT_STRNE(kvp::storage::page_check_name(c), "unknown");
  }
}

}  // namespace
