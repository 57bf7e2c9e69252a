// Names of the storage tier's pages (SGLANG_SEMANTICS §5.4). A page is found by
// the SHA-256 page-hash chain kvpool already computes for KV events (page k's
// digest covers page k-1's digest and page k's tokens, so a key names the whole
// prefix up to and including that page), inside a namespace: the fingerprint of
// everything that decides what the page's bytes mean. Two pools share pages
// exactly when their fingerprints agree; another model, dtype, page size,
// layer range or tensor-parallel shard never reads them.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "cache/page_hash.hpp"
#include "config/config.hpp"
#include "host/host_geometry.hpp"

namespace kvp::storage {

struct Fingerprint {
  std::array<uint8_t, 16> bytes{};
  bool operator==(const Fingerprint& o) const { return bytes == o.bytes; }
  bool operator!=(const Fingerprint& o) const { return !(*this == o); }
  std::string hex() const;  // 32 lowercase hex digits
};

// The canonical text a fingerprint is computed from: the page format version,
// the model's name and attention kind, the tiered layers (global ids), the KV
// dtype, the page size, the bytes of each row kind the tier copies, and the
// tensor-parallel shard (rank and size; mla and nsa: none, since every rank holds
// the same latent rows, so all ranks share one copy as SGLang's MLA backends do).
// The host layout is not part of it: stored pages are layout independent.
std::string model_identity(const config::Config& config, const host::HostGeometry& geometry);

// The first 16 bytes of SHA-256(identity).
Fingerprint fingerprint_of(const std::string& identity);

// "kvp1-<fingerprint hex>-<digest hex>": 102 characters of [0-9a-z-] (within
// memcached's 250-byte key limit and a file name's 255).
std::string page_key(const Fingerprint& fingerprint, const cache::Digest& digest);
constexpr size_t kPageKeyLength = 5 + 32 + 1 + 64;

}  // namespace kvp::storage
