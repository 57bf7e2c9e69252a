#include "host/host_geometry.hpp"

namespace kvp::host {

bool parse_host_layout(const std::string& name, HostLayout* out) {
  static const std::pair<const char*, HostLayout> kNames[] = {{"layer_first", HostLayout::kLayerFirst},
                                                              {"page_first", HostLayout::kPageFirst},
                                                              {"page_first_direct", HostLayout::kPageFirstDirect},
                                                              {"page_head", HostLayout::kPageHead}};
  for (const auto& [n, l] : kNames) {
    if (name == n) {
      *out = l;
      return true;
    }
  }
  return false;
}

const char* host_layout_name(HostLayout layout) {
  switch (layout) {
    case HostLayout::kLayerFirst: return "layer_first";
    case HostLayout::kPageFirst: return "page_first";
    case HostLayout::kPageFirstDirect: return "page_first_direct";
    case HostLayout::kPageHead: return "page_head";
  }
  return "?";
}

uint32_t HostGeometry::pieces(size_t p) const {
  const TierPart& part = parts[p];
  return layout == HostLayout::kPageHead && !part.per_page && part.heads > 1 ? part.heads : 1;
}

uint64_t HostGeometry::piece_bytes(size_t p) const { return parts[p].item_bytes / pieces(p); }

uint64_t HostGeometry::device_pages() const {
  uint64_t limit = UINT64_MAX;
  for (const TierPart& part : parts) {
    const uint64_t pages_of_part = part.per_page ? part.device_rows : part.device_rows / page_size;
    if (pages_of_part < limit) limit = pages_of_part;
  }
  return parts.empty() ? 0 : limit;
}

uint64_t HostGeometry::page_run_bytes(size_t p) const {
  const TierPart& part = parts[p];
  if (part.per_page) return part.item_bytes;  // one row per page
  const bool host_dense = pieces(p) == 1 && token_stride(p) == part.item_bytes;
  const bool device_dense = part.device_stride == part.item_bytes;
  return host_dense && device_dense ? page_size * part.item_bytes : piece_bytes(p);
}

uint64_t HostGeometry::token_stride(size_t p) const {
  const uint64_t item = parts[p].item_bytes;
  switch (layout) {
    case HostLayout::kLayerFirst:
    case HostLayout::kPageFirstDirect: return item;
    case HostLayout::kPageFirst: return item * layers;
    case HostLayout::kPageHead: return piece_bytes(p) * layers;
  }
  return item;
}

uint64_t HostGeometry::bytes_per_token() const {
  uint64_t b = 0;
  for (const TierPart& part : parts) b += part.per_page ? (part.item_bytes + page_size - 1) / page_size : part.item_bytes;
  return b * layers;
}

uint64_t HostGeometry::offset(size_t p, uint64_t t, uint32_t l, uint32_t h) const {
  const TierPart& part = parts[p];
  const uint64_t item = part.item_bytes, L = layers, P = page_size;
  const uint64_t base = region[p];
  if (part.per_page) return base + (static_cast<uint64_t>(l) * pages + t) * item;  // t is a host page
  switch (layout) {
    case HostLayout::kLayerFirst: return base + (static_cast<uint64_t>(l) * tokens() + t) * item;
    case HostLayout::kPageFirst: return base + (t * L + l) * item;
    case HostLayout::kPageFirstDirect: return base + ((t / P) * L + l) * P * item + (t % P) * item;
    case HostLayout::kPageHead: {
      const uint64_t H = pieces(p), piece = item / H;
      return base + (t / P) * P * L * item + h * P * L * piece + (t % P) * L * piece + l * piece;
    }
  }
  return base;
}

std::string finish_geometry(HostGeometry* g) {
  g->region.assign(g->parts.size(), 0);
  uint64_t at = 0;
  for (size_t p = 0; p < g->parts.size(); ++p) {
    const TierPart& part = g->parts[p];
    if (g->layout == HostLayout::kPageHead && !part.per_page && (part.heads == 0 || part.item_bytes % part.heads != 0)) {
      return "host_cache.layout \"page_head\" splits rows by head; this pool's rows of " +
             std::to_string(part.item_bytes) + " bytes are not whole heads (page_head is for mha-like pools without "
             "fp4 scales or labels)";
    }
    g->region[p] = at;
    const uint64_t rows = part.per_page ? g->pages : g->tokens();
    at += rows * part.item_bytes * g->layers;
    at = (at + 255) / 256 * 256;  // each region 256-byte aligned: wide copies stay aligned
  }
  g->bytes = at;
  return {};
}

}  // namespace kvp::host
