// Between a host-tier page and a stored page's payload (page_format.hpp): the
// payload holds, for each row kind of the tier (HostGeometry::parts, in order),
// for each tiered layer, the page's rows in token order (a per-page row kind: its
// one row), each row whole as the device holds it (page_head pieces joined). The
// host layout decides only where the bytes are read from or written to.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "host/host_geometry.hpp"

namespace kvp::storage {

// Payload bytes of one page of this tier.
uint64_t page_payload_bytes(const host::HostGeometry& g);
// Whether the host layout holds a page's rows of a layer in more than one run (a piece per
// token, or per head: page_first, page_head), rather than one run per row kind and layer
// (layer_first, page_first_direct).
bool has_short_runs(const host::HostGeometry& g);

class PayloadHash;
class Xxh3Stream;

// Copies host page `page` of the host buffer at `host` into `payload` (page_payload_bytes
// long) and returns the payload checksum (payload_hash.hpp, page_format.hpp), computed
// run by run while each run is still in cache: one pass over the bytes, not two.
// scatter_page_hashed() is the inverse: writes `payload` into host page `page`, through
// copy_hashed() (the page's stores are ordered before the return).
uint64_t gather_page_hashed(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload);
uint64_t scatter_page_hashed(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload);

// A checked read's copy into a host page: memcpy(dst, src, bytes), and `hash` updated with
// the bytes, in pieces of kCopyHashPieceBytes, each hashed right after its copy, while it
// is in L1: the check then costs a fraction of the copy, where hashing a finished buffer
// reads it from memory a second time. The stores stream (the host page is not read back
// here), which spares the read-for-ownership of its lines; call util::stream_fence()
// before another thread may read dst.
constexpr size_t kCopyHashPieceBytes = size_t(4) << 10;
void copy_hashed(uint8_t* dst, const uint8_t* src, size_t bytes, PayloadHash* hash);
void copy_hashed(uint8_t* dst, const uint8_t* src, size_t bytes, Xxh3Stream* hash);

// Part of scatter_page_hashed(): payload bytes [begin, end) of `payload` (the whole
// payload; the range is read at payload + begin) into host page `page`, through
// copy_hashed() with `hash` (one segment's XXH3-64: segment_copier.hpp). No fence.
void scatter_payload_range(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload,
                           uint64_t begin, uint64_t end, Xxh3Stream* hash);
// The other way: payload bytes [begin, end) of host page `page` into `payload` (the whole
// payload buffer; written at payload + begin), hashed as gather_page_hashed() hashes.
void gather_payload_range(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload,
                          uint64_t begin, uint64_t end, Xxh3Stream* hash);
// Payload bytes [begin, end) of host page `page` hashed in payload order, nothing copied.
void hash_payload_range(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint64_t begin, uint64_t end,
                        Xxh3Stream* hash);

// A piece of a page's payload as spans of host memory (the streamed path, page_stream.hpp).
struct PayloadChunk {
  uint64_t offset = 0;  // in the payload
  uint64_t bytes = 0;   // sum of the spans' lengths
  const iovec* spans = nullptr;
  int count = 0;
};
// Visits host page `page`'s payload in order as consecutive chunks of at most
// `max_bytes` bytes and `max_spans` spans (<= kMaxChunkSpans), each span a
// contiguous piece of the host buffer at `host`. Stops when `fn` returns false;
// returns false then.
constexpr int kMaxChunkSpans = 1024;  // IOV_MAX on Linux
class ChunkVisitor {
 public:
  virtual ~ChunkVisitor() = default;
  virtual bool visit(const PayloadChunk& chunk) = 0;
};
bool for_each_payload_chunk(const host::HostGeometry& g, uint8_t* host, int64_t page, uint64_t max_bytes,
                            int max_spans, ChunkVisitor& fn);

}  // namespace kvp::storage
