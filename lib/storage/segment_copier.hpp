// A second thread for one page's checked copy: a stored page whose payload is already in
// memory (a page-cache mapping of its file, a staged value) is copied into its host page
// by the reading thread and this one together, segment by segment (payload_hash.hpp's
// 1 MiB segments, each copied with streaming stores and hashed as it goes), and the
// payload checksum is joined from the segments' digests in order.
//
// Why: on this project's 2-core VM one thread copies an 8 MiB page out of the page cache
// at ~14 GB/s, the rate of the kernel's copy in a plain read(); two threads copy it in
// 54 % of that time (bench_storage_file's tier rows; docs/performance.md). With version 1
// of the page format (one XXH3-64 stream over the payload) only the copy could be shared.
//
// How the two threads share a page: the reading thread posts the page and starts on
// segment 0; both take the next segment from a shared counter until none is left, so a
// copier that wakes late, or not at all on a busy machine, only takes fewer segments. The
// reading thread then waits for the copier to leave the page (spinning briefly: it is in
// its last segment), or withdraws the page if the copier never took it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "host/host_geometry.hpp"

namespace kvp::storage {

// Payloads of at least this many bytes (two segments) are shared with a SegmentCopier;
// smaller ones have nothing to share.
constexpr uint64_t kSegmentCopyFrom = uint64_t(2) << 20;

class SegmentCopier {
 public:
  // Starts the thread; throws std::system_error (no thread) or std::bad_alloc.
  SegmentCopier();
  // Stops and joins the thread.
  ~SegmentCopier();
  SegmentCopier(const SegmentCopier&) = delete;
  SegmentCopier& operator=(const SegmentCopier&) = delete;

  // Copies `payload` (the whole payload of a stored page, page_payload_bytes(g) bytes)
  // into host page `page` of the buffer at `host`, sharing its segments with the copier's
  // thread, and returns the payload checksum (PayloadHash's value for those bytes). Both
  // threads' streaming stores are fenced before the return, and the copier no longer
  // touches the page or `payload`. One calling thread at a time. Throws std::bad_alloc
  // only when a page has more segments than any before and their digests find no room;
  // nothing was copied then.
  uint64_t copy(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload);

  // Segments the copier's thread copied during the last copy() (tests, benchmarks).
  size_t last_copier_segments() const;

  // Whether this process may run on a second CPU (sched_getaffinity).
  static bool worthwhile();

  struct Shared;  // segment_copier.cpp

 private:
  std::unique_ptr<Shared> shared_;
};

}  // namespace kvp::storage
