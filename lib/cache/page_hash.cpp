#include "cache/page_hash.hpp"

#include <cstring>

namespace kvp::cache {

Digest page_digest(const Digest* parent, const int32_t* tokens, size_t n) {
  if (n <= 40) {  // parent digest + tokens fit one short message (a page of up to 40 tokens), padded in place
    uint8_t msg[Sha256::padded_size(32 + 4 * 40)];
    size_t len = 0;
    if (parent != nullptr) {
      std::memcpy(msg, parent->data(), parent->size());
      len = parent->size();
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(msg + len, tokens, 4 * n);  // the tokens' own bytes are the little-endian words
    len += 4 * n;
#else
    for (size_t i = 0; i < n; ++i, len += 4) {
      const uint32_t t = static_cast<uint32_t>(tokens[i]);
      msg[len] = static_cast<uint8_t>(t);
      msg[len + 1] = static_cast<uint8_t>(t >> 8);
      msg[len + 2] = static_cast<uint8_t>(t >> 16);
      msg[len + 3] = static_cast<uint8_t>(t >> 24);
    }
#endif
    return Sha256::of_buffer(msg, len, sizeof(msg));
  }
  Sha256 h;
  if (parent != nullptr) h.update(parent->data(), parent->size());
  // Tokens as 4-byte little-endian words, 64 at a time.
  uint8_t le[256];
  for (size_t i = 0; i < n;) {
    const size_t count = n - i < 64 ? n - i : 64;
    for (size_t j = 0; j < count; ++j) {
      const uint32_t t = static_cast<uint32_t>(tokens[i + j]);
      le[4 * j] = static_cast<uint8_t>(t);
      le[4 * j + 1] = static_cast<uint8_t>(t >> 8);
      le[4 * j + 2] = static_cast<uint8_t>(t >> 16);
      le[4 * j + 3] = static_cast<uint8_t>(t >> 24);
    }
    h.update(le, 4 * count);
    i += count;
  }
  return h.finish();
}

void page_digest_chain(const Digest* parent, const int32_t* tokens, size_t page, size_t pages, Digest* out) {
  if (pages == 0) return;
  size_t p = 0;
  if (parent == nullptr) {  // the first page under the root has no parent bytes
    out[0] = page_digest(nullptr, tokens, page);
    parent = &out[0];
    p = 1;
  }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // The tokens' own bytes are the little-endian words the message holds.
  Sha256::chain(*parent, reinterpret_cast<const uint8_t*>(tokens + p * page), 4 * page, pages - p, out + p);
#else
  for (; p < pages; ++p) {
    out[p] = page_digest(parent, tokens + p * page, page);
    parent = &out[p];
  }
#endif
}

int64_t event_id(const Digest& d) {
  uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && (defined(__GNUC__) || defined(__clang__))
  std::memcpy(&v, d.data(), sizeof(v));  // one load and a byte swap
  v = __builtin_bswap64(v);
#else
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[static_cast<size_t>(i)];
#endif
  return static_cast<int64_t>(v);
}

}  // namespace kvp::cache
