#include "storage/page_codec.hpp"

#include <cstring>

namespace kvp::storage {
namespace {

// Visits the page's contiguous host pieces in payload order: fn(host offset, bytes).
// Consecutive tokens whose pieces follow each other on the host (layer_first,
// page_first_direct) are one run, so those layouts copy a layer's page at once.
template <class Fn>
void for_each_run(const host::HostGeometry& g, int64_t page, Fn&& fn) {
  const uint64_t P = g.page_size, first = static_cast<uint64_t>(page) * P;
  for (size_t p = 0; p < g.parts.size(); ++p) {
    const host::TierPart& part = g.parts[p];
    for (uint32_t l = 0; l < g.layers; ++l) {
      if (part.per_page) {
        fn(g.offset(p, static_cast<uint64_t>(page), l), part.item_bytes);
        continue;
      }
      const uint32_t pieces = g.pieces(p);
      const uint64_t piece = g.piece_bytes(p);
      if (pieces == 1 && g.token_stride(p) == piece) {
        fn(g.offset(p, first, l), P * piece);
        continue;
      }
      for (uint64_t t = first; t < first + P; ++t) {
        for (uint32_t h = 0; h < pieces; ++h) fn(g.offset(p, t, l, h), piece);
      }
    }
  }
}

}  // namespace

uint64_t page_payload_bytes(const host::HostGeometry& g) {
  uint64_t bytes = 0;
  for (const host::TierPart& part : g.parts) bytes += (part.per_page ? 1 : g.page_size) * part.item_bytes * g.layers;
  return bytes;
}

void gather_page(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload) {
  for_each_run(g, page, [&](uint64_t at, uint64_t bytes) {
    std::memcpy(payload, host + at, bytes);
    payload += bytes;
  });
}

void scatter_page(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload) {
  for_each_run(g, page, [&](uint64_t at, uint64_t bytes) {
    std::memcpy(host + at, payload, bytes);
    payload += bytes;
  });
}

}  // namespace kvp::storage
