// Where the host tier (L2) keeps each byte (SGLANG_SEMANTICS §1.16): the parts of
// a token that are copied between the device KV buffers and host memory, and the
// host buffer's layout. Pure arithmetic, shared by the CPU copies
// (host_transfer_cpu.cpp) and the CUDA kernels (cuda/host_transfer.cu).
//
// The host buffer is one allocation: part 0's region, then part 1's, ... Each
// token part (K values, V values, fp4 K/V scales, double_sparse labels, the
// mla/nsa latent row) is laid out in its region by the layout; page parts (the nsa
// indexer: one row per page) are always [layer][host page][row].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvp::host {

// SGLang's host layouts. For MHA K (V alike), L tiered layers, S host tokens,
// page size P, H heads of D values:
//   layer_first        [L][S][H*D]
//   page_first         [S][L][H*D]
//   page_first_direct  [S/P][L][P][H*D]
//   page_head          [S/P][H][P][L][D]   (mha-like values only)
enum class HostLayout : int32_t { kLayerFirst, kPageFirst, kPageFirstDirect, kPageHead };

// "layer_first", ... ; false for other names (page_first_kv_split, an Ascend NPU layout, is not one).
bool parse_host_layout(const std::string& name, HostLayout* out);
const char* host_layout_name(HostLayout layout);

// One kind of row the tier copies, in every tiered layer.
struct TierPart {
  std::vector<uint8_t*> device_base;  // per tiered layer: the device buffer (row r at base + r * device_stride)
  uint64_t device_stride = 0;         // bytes between device rows
  uint64_t item_bytes = 0;            // bytes copied per row and layer
  bool per_page = false;              // a row per page (nsa indexer: device row = slot / P), else per token
  uint32_t heads = 0;                 // page_head: the item is `heads` equal pieces (0: not split)
  uint64_t device_rows = 0;           // rows of each device buffer (per_page: pages)
};

// The host buffer's geometry: sizes and byte offsets.
struct HostGeometry {
  HostLayout layout = HostLayout::kLayerFirst;
  uint64_t page_size = 1;   // P (the device pool's)
  uint64_t pages = 0;       // host pages; host tokens = pages * P
  uint32_t layers = 0;      // tiered layers (hybrid_linear: the full-attention ones)
  std::vector<TierPart> parts;
  std::vector<uint64_t> region;  // byte offset of each part's region
  uint64_t bytes = 0;            // whole buffer

  uint64_t tokens() const { return pages * page_size; }
  // Host bytes of one token (all layers, all token parts; page parts spread over the page).
  uint64_t bytes_per_token() const;

  // Byte offset of host token `t` (page parts: host page `t`), tiered layer `l`, of part `p`,
  // piece `h` of a page_head split item (0 otherwise). The piece / item is contiguous there.
  uint64_t offset(size_t p, uint64_t t, uint32_t l, uint32_t h = 0) const;
  // Bytes from a token's item (or piece) to the next token's within a page, same layer and
  // part: offset(p, t + 1, l, h) - offset(p, t, l, h) when t and t + 1 share a page.
  uint64_t token_stride(size_t p) const;
  // Bytes contiguous at offset(): the item, or one piece of it under page_head.
  uint64_t piece_bytes(size_t p) const;
  uint32_t pieces(size_t p) const;  // 1, or heads under page_head for split parts
  // Device pages every part has rows for: device page ids a transfer accepts are below this.
  uint64_t device_pages() const;
  // Bytes of part `p` that one page of one layer keeps contiguous on both sides (host and
  // device): the whole page's rows where both store them back to back (layer_first and
  // page_first_direct over unpadded device rows), else one row or head piece. What one
  // copy-engine operation moves at most without merging pages.
  uint64_t page_run_bytes(size_t p) const;
};

// Fills region[] and bytes from parts, pages, page_size and layout; an error message
// (empty on success) when the layout cannot hold a part (page_head of an item that is
// not whole heads, e.g. mla or fp4 scales).
std::string finish_geometry(HostGeometry* g);

}  // namespace kvp::host
