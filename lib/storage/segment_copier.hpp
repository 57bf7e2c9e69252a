// A second thread for one page's checked copy: a stored page whose payload is already in
// memory (a page-cache mapping of its file, a staged value) is copied into its host page
// by the reading thread and this one together, segment by segment (payload_hash.hpp's
// 1 MiB segments, each copied with streaming stores and hashed as it goes), and the
// payload checksum is joined from the segments' digests in order. Backups use it the
// other way: a staged page is gathered by both threads, and a streamed one is hashed by
// the copier while the backup thread writes it out.
//
// Why: on this project's 2-core VM one thread copies an 8 MiB page out of the page cache
// at ~14 GB/s, the rate of the kernel's copy in a plain read(); two threads copy it in
// 54 % of that time (bench_storage_file's tier rows; docs/performance.md). With version 1
// of the page format (one XXH3-64 stream over the payload) only the copy could be shared.
//
// How the two threads share a page: the calling thread posts the page and starts on
// segment 0 (or on its own work first); both take the next segment from a shared counter
// until none is left, so a copier that wakes late, or not at all on a busy machine, only
// takes fewer segments. The calling thread then waits for the copier to leave the page
// (spinning briefly: it is in its last segment), or withdraws the page if the copier never
// took it. The copier is kept off the posting thread's CPU (its allowed CPUs are the
// creating thread's, less that one), so that the kernel does not wake it behind the poster.
#pragma once

#include <sched.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "host/host_geometry.hpp"

namespace kvp::storage {

// Payloads of at least this many bytes (two segments) are shared with a SegmentCopier;
// smaller ones have nothing to share.
constexpr uint64_t kSegmentCopyFrom = uint64_t(2) << 20;

// What the two threads do with each segment of a page's payload.
enum class SegmentWork {
  kScatter,  // copy it from the payload in memory into the host page (a prefetch)
  kGather,   // copy it from the host page into a payload buffer (a staged backup)
  kHash,     // only hash it in the host page (a streamed backup, while this thread writes)
};

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
  // thread, and returns the payload checksum (PayloadHash's value for those bytes): post()
  // then finish(). Throws std::bad_alloc as post() does; nothing was copied then.
  uint64_t copy(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload) {
    post(SegmentWork::kScatter, g, host, page, const_cast<uint8_t*>(payload));
    return finish();
  }
  // The same the other way: host page `page` into `payload`.
  uint64_t gather(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint8_t* payload) {
    post(SegmentWork::kGather, g, const_cast<uint8_t*>(host), page, payload);
    return finish();
  }

  // Posts a page to the copier's thread, which starts on its first segment; this thread
  // may do other work (kHash: write the page out) before finish(). kHash only reads the
  // host page and takes no payload (null). One page at a time, from one calling thread.
  // Throws std::bad_alloc only when a page has more segments than any before and their
  // digests find no room; nothing was posted then.
  void post(SegmentWork work, const host::HostGeometry& g, uint8_t* host, int64_t page, uint8_t* payload);
  // Takes the posted page's segments the copier has not, waits until it left the page
  // (or withdraws the page if it never took it), and returns the payload checksum. Both
  // threads' streaming stores are fenced before the return; the copier no longer touches
  // the page or the payload.
  uint64_t finish();
  // Between post() and finish(): returns once segment `segment` (its bytes and digest) is
  // done, doing segments itself while it would otherwise wait (a backup that writes a
  // gathered page out segment by segment, in order, while the copier gathers ahead).
  void wait_segment(size_t segment);
  // Between post() and finish(): whether segment `segment` is done (wait_segment would not wait).
  bool segment_done(size_t segment) const;

  // Segments the copier's thread did of the last page (tests, benchmarks).
  size_t last_copier_segments() const;
  // The CPUs the copier's thread may run on (tests): post() keeps it off the CPU the calling
  // thread runs on, where the machine allows another (segment_copier.cpp says why).
  bool copier_cpus(cpu_set_t* out) const;

  // Whether this process may run on a second CPU (sched_getaffinity).
  static bool worthwhile();

  struct Shared;  // segment_copier.cpp

 private:
  std::unique_ptr<Shared> shared_;
};

}  // namespace kvp::storage
