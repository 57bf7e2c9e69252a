#include "storage/page_key.hpp"

#include <cstring>

#include "cache/sha256.hpp"
#include "config/dtype.hpp"

namespace kvp::storage {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

void append_hex(const uint8_t* bytes, size_t n, std::string* out) {
  for (size_t i = 0; i < n; ++i) {
    out->push_back(kHexDigits[bytes[i] >> 4]);
    out->push_back(kHexDigits[bytes[i] & 15]);
  }
}

}  // namespace

std::string Fingerprint::hex() const {
  std::string s;
  s.reserve(32);
  append_hex(bytes.data(), bytes.size(), &s);
  return s;
}

std::string model_identity(const config::Config& config, const host::HostGeometry& geometry) {
  const config::ModelConfig& m = config.model;
  const config::ParallelConfig& par = config.parallel;
  std::string id = "kvpool-page-format=1;model=" + m.name + ";attention=" + config::attention_name(m.attention);
  // The tiered layers by global id: the pool's range, and which of them hold full-attention KV.
  id += ";layers=" + std::to_string(par.start_layer) + "-" + std::to_string(par.end_layer) + ";full=";
  for (int l = par.start_layer; l <= par.end_layer && l < int(m.layer_is_full.size()); ++l) {
    id.push_back(m.layer_is_full[size_t(l)] ? '1' : '0');
  }
  id += ";tiered=" + std::to_string(geometry.layers);
  id += ";kv_dtype=" + std::string(config::dtype_name(config.pool.kv_dtype));
  id += ";page_size=" + std::to_string(geometry.page_size);
  id += ";rows=";
  for (const host::TierPart& part : geometry.parts) {
    id += std::to_string(part.item_bytes) + (part.per_page ? "/page," : ",");
  }
  const bool latent = m.attention == config::Attention::kMLA || m.attention == config::Attention::kNSA;
  id += latent ? ";tp=shared" : ";tp=" + std::to_string(par.tp_rank) + "/" + std::to_string(par.tp_size);
  return id;
}

Fingerprint fingerprint_of(const std::string& identity) {
  const cache::Digest d = cache::Sha256::of(identity.data(), identity.size());
  Fingerprint fp;
  std::memcpy(fp.bytes.data(), d.data(), fp.bytes.size());
  return fp;
}

std::string page_key(const Fingerprint& fingerprint, const cache::Digest& digest) {
  std::string key;
  key.reserve(kPageKeyLength);
  key = "kvp1-";
  append_hex(fingerprint.bytes.data(), fingerprint.bytes.size(), &key);
  key.push_back('-');
  append_hex(digest.data(), digest.size(), &key);
  return key;
}

}  // namespace kvp::storage
