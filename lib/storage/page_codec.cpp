#include "storage/page_codec.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>

#include "storage/payload_hash.hpp"
#include "util/stream_copy.hpp"

namespace kvp::storage {
namespace {

// Visits the page's contiguous host pieces that hold payload bytes [begin, end), in payload
// order: fn(host offset, payload offset, bytes), each piece clipped to the range.
// Consecutive tokens whose pieces follow each other on the host (layer_first,
// page_first_direct) are one run, so those layouts copy a layer's page at once. A layer
// wholly outside the range is skipped without visiting its tokens.
template <class Fn>
void for_each_run_in(const host::HostGeometry& g, int64_t page, uint64_t begin, uint64_t end, Fn&& fn) {
  const uint64_t P = g.page_size, first = static_cast<uint64_t>(page) * P;
  uint64_t off = 0;  // payload offset of the next piece
  const auto visit = [&](uint64_t at, uint64_t bytes) {
    const uint64_t lo = std::max(off, begin), hi = std::min(off + bytes, end);
    if (lo < hi) fn(at + (lo - off), lo, hi - lo);
    off += bytes;
  };
  for (size_t p = 0; p < g.parts.size() && off < end; ++p) {
    const host::TierPart& part = g.parts[p];
    const uint64_t layer_bytes = (part.per_page ? 1 : P) * part.item_bytes;
    for (uint32_t l = 0; l < g.layers && off < end; ++l) {
      if (off + layer_bytes <= begin) {
        off += layer_bytes;
        continue;
      }
      if (part.per_page) {
        visit(g.offset(p, static_cast<uint64_t>(page), l), part.item_bytes);
        continue;
      }
      const uint32_t pieces = g.pieces(p);
      const uint64_t piece = g.piece_bytes(p);
      if (pieces == 1 && g.token_stride(p) == piece) {
        visit(g.offset(p, first, l), P * piece);
        continue;
      }
      for (uint64_t t = first; t < first + P; ++t) {
        for (uint32_t h = 0; h < pieces; ++h) visit(g.offset(p, t, l, h), piece);
      }
    }
  }
}

// Every piece of the page: fn(host offset, bytes).
template <class Fn>
void for_each_run(const host::HostGeometry& g, int64_t page, Fn&& fn) {
  for_each_run_in(g, page, 0, UINT64_MAX, [&](uint64_t at, uint64_t, uint64_t bytes) { fn(at, bytes); });
}

template <class Hash>
void copy_hashed_with(uint8_t* dst, const uint8_t* src, size_t bytes, Hash* hash) {
  for (size_t at = 0; at < bytes; at += kCopyHashPieceBytes) {
    const size_t n = bytes - at < kCopyHashPieceBytes ? bytes - at : kCopyHashPieceBytes;
    util::copy_streaming(dst + at, src + at, n);
    hash->update(src + at, n);
  }
}

}  // namespace

bool has_short_runs(const host::HostGeometry& g) {
  for (size_t p = 0; p < g.parts.size(); ++p) {
    if (!g.parts[p].per_page && !(g.pieces(p) == 1 && g.token_stride(p) == g.piece_bytes(p))) return true;
  }
  return false;
}

uint64_t page_payload_bytes(const host::HostGeometry& g) {
  uint64_t bytes = 0;
  for (const host::TierPart& part : g.parts) bytes += (part.per_page ? 1 : g.page_size) * part.item_bytes * g.layers;
  return bytes;
}

namespace {

// gather_page_hashed: runs are hashed in pieces of at most 256 KiB right after they are
// copied, so the hash reads them from L2 rather than from memory.
constexpr uint64_t kHashPiece = 256 << 10;
// gather_payload_range: runs up to this long are prefetched a run ahead.
constexpr uint64_t kPrefetchRunBytes = 16 << 10;

}  // namespace

uint64_t gather_page_hashed(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload) {
  PayloadHash hash;
  uint64_t done = 0;
  for_each_run(g, page, [&](uint64_t at, uint64_t bytes) {
    for (uint64_t off = 0; off < bytes; off += kHashPiece) {
      const uint64_t n = bytes - off < kHashPiece ? bytes - off : kHashPiece;
      std::memcpy(payload + done, host + at + off, n);
      hash.update(payload + done, n);
      done += n;
    }
  });
  return hash.digest();
}

uint64_t scatter_page_hashed(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload) {
  PayloadHash hash;
  const uint8_t* from = payload;
  for_each_run(g, page, [&](uint64_t at, uint64_t bytes) {
    copy_hashed(host + at, from, size_t(bytes), &hash);
    from += bytes;
  });
  util::stream_fence();  // the page's streamed stores before whoever reads it next
  return hash.digest();
}

void copy_hashed(uint8_t* dst, const uint8_t* src, size_t bytes, PayloadHash* hash) {
  copy_hashed_with(dst, src, bytes, hash);
}

void copy_hashed(uint8_t* dst, const uint8_t* src, size_t bytes, Xxh3Stream* hash) {
  copy_hashed_with(dst, src, bytes, hash);
}

void gather_payload_range(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload,
                          uint64_t begin, uint64_t end, Xxh3Stream* hash) {
  // Short runs (page_first: 2 KiB a token and layer, 128 KiB apart) each start a stream the
  // hardware prefetchers have not seen: each run's lines are asked for while the run before
  // it is copied (page_first's two-thread gather of 8 MiB: 660 -> 480 us on the project's VM).
  // Each piece is hashed right after its copy, from L1 (hashing 64 KiB of copied runs at a
  // time was slower: 620 us).
  const uint8_t* pending_src = nullptr;
  uint8_t* pending_dst = nullptr;
  uint64_t pending_bytes = 0;
  const auto copy_pending = [&] {
    for (uint64_t done = 0; done < pending_bytes; done += kHashPiece) {  // as gather_page_hashed: hashed from cache
      const uint64_t n = pending_bytes - done < kHashPiece ? pending_bytes - done : kHashPiece;
      std::memcpy(pending_dst + done, pending_src + done, n);
      hash->update(pending_dst + done, n);
    }
  };
  for_each_run_in(g, page, begin, end, [&](uint64_t at, uint64_t off, uint64_t bytes) {
    if (bytes <= kPrefetchRunBytes) {
      for (uint64_t line = 0; line < bytes; line += 64) __builtin_prefetch(host + at + line);
    }
    copy_pending();
    pending_src = host + at;
    pending_dst = payload + off;
    pending_bytes = bytes;
  });
  copy_pending();
}

void hash_payload_range(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint64_t begin, uint64_t end,
                        Xxh3Stream* hash) {
  for_each_run_in(g, page, begin, end, [&](uint64_t at, uint64_t, uint64_t bytes) { hash->update(host + at, bytes); });
}

void scatter_payload_range(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload,
                           uint64_t begin, uint64_t end, Xxh3Stream* hash) {
  for_each_run_in(g, page, begin, end, [&](uint64_t at, uint64_t off, uint64_t bytes) {
    copy_hashed_with(host + at, payload + off, size_t(bytes), hash);
  });
}

bool for_each_payload_chunk(const host::HostGeometry& g, uint8_t* host, int64_t page, uint64_t max_bytes,
                            int max_spans, ChunkVisitor& fn) {
  if (max_spans > kMaxChunkSpans) max_spans = kMaxChunkSpans;
  if (max_spans < 1) max_spans = 1;
  if (max_bytes < 1) max_bytes = 1;
  iovec spans[kMaxChunkSpans];
  PayloadChunk chunk;
  chunk.spans = spans;
  bool going = true;
  const auto flush = [&] {
    if (chunk.count > 0) going = fn.visit(chunk);
    chunk.offset += chunk.bytes;
    chunk.bytes = 0;
    chunk.count = 0;
  };
  for_each_run(g, page, [&](uint64_t at, uint64_t bytes) {
    while (going && bytes > 0) {
      const uint64_t room = max_bytes - chunk.bytes, n = bytes < room ? bytes : room;
      spans[chunk.count++] = iovec{host + at, size_t(n)};
      chunk.bytes += n;
      at += n;
      bytes -= n;
      if (chunk.bytes == max_bytes || chunk.count == max_spans) flush();
    }
  });
  if (going) flush();
  return going;
}

}  // namespace kvp::storage
