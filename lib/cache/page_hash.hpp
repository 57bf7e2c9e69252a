// The page-hash chain of KV events (SGLANG_SEMANTICS §3.11): a page's digest is
// SHA-256 over the previous page's 32 raw digest bytes (omitted for a page
// directly under the root) followed by each token as a 4-byte little-endian
// unsigned integer. The event id is the digest's first 8 bytes read
// big-endian as a two's-complement int64.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cache/sha256.hpp"

namespace kvp::cache {

using Digest = Sha256::Digest;

Digest page_digest(const Digest* parent, const int32_t* tokens, size_t n);
// The digests of `pages` consecutive pages of `page` tokens, each chained to the one
// before: out[p] = page_digest(p > 0 ? &out[p - 1] : parent, tokens + p * page, page).
void page_digest_chain(const Digest* parent, const int32_t* tokens, size_t page, size_t pages, Digest* out);
int64_t event_id(const Digest& digest);

}  // namespace kvp::cache
