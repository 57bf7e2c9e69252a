#include "cache/page_hash.hpp"

namespace kvp::cache {

Digest page_digest(const Digest* parent, const int32_t* tokens, size_t n) {
  Sha256 h;
  if (parent != nullptr) h.update(parent->data(), parent->size());
  uint8_t le[4];
  for (size_t i = 0; i < n; ++i) {
    const uint32_t t = static_cast<uint32_t>(tokens[i]);
    le[0] = static_cast<uint8_t>(t);
    le[1] = static_cast<uint8_t>(t >> 8);
    le[2] = static_cast<uint8_t>(t >> 16);
    le[3] = static_cast<uint8_t>(t >> 24);
    h.update(le, 4);
  }
  return h.finish();
}

int64_t event_id(const Digest& d) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[static_cast<size_t>(i)];
  return static_cast<int64_t>(v);
}

}  // namespace kvp::cache
