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

// Copies host page `page` of the host buffer at `host` into `payload` (page_payload_bytes
// long) and returns the payload's XXH3-64 (page_format.hpp's payload checksum), computed
// run by run while each run is still in cache: one pass over the bytes, not two.
// scatter_page_hashed() is the inverse: writes `payload` into host page `page`.
uint64_t gather_page_hashed(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload);
uint64_t scatter_page_hashed(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload);

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
