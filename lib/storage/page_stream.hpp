// A host-tier page to and from a stored page (page_format.hpp) through a backend's
// streamed calls (blob_store.hpp), without staging the page: the payload moves in
// chunks straight between the host page and the backend, and each chunk is hashed
// while it is in the CPU's cache, so that every byte comes from memory once.
//
// Writing: chunk by chunk, the payload checksum is updated from the host spans (which
// pulls them into the cache), then the same spans are written; the header, which
// holds that checksum, is written last, at offset 0. The backend renames the value
// into place only after both, so a reader never sees a page without its header.
// The stored bytes are exactly those of seal_page().
//
// Reading: the header is read and checked first (check_page_header: magic, header
// checksum, version, fingerprint, key, lengths), then the payload chunk by chunk
// straight into the host page, each chunk hashed right after it landed (measured on
// this project's 2-core AMD VM: the kernel's copy leaves the chunk out of the cache, so
// the hash reads it from memory again, a pass the write side does not pay). A checksum
// that differs, or a value that ends early, is a miss; the host page then holds
// garbage that its caller must not publish (the prefetch publishes a page only on
// kOk, and gives unpublished pages back to the host allocator).
//
// Reading with a PayloadHasher (below): the payload is read chunk by chunk as above,
// but hashed on the hasher's thread, which follows the reads in order: while the
// reading thread reads chunk i+1, the hasher hashes chunk i. On a machine with a core
// to spare, a page then takes about as long as reading it (plus one chunk's hash)
// instead of reading plus hashing it. The checks and their results are the same.
#pragma once

#include <cstdint>
#include <memory>

#include "cache/page_hash.hpp"
#include "host/host_geometry.hpp"
#include "storage/blob_store.hpp"
#include "storage/page_codec.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

namespace kvp::storage {

class SegmentCopier;  // segment_copier.hpp

// Payload bytes per chunk (bench_storage_file's tier rows, this project's 2-core VM,
// ext4): a write of 8 MiB in 256 KiB pieces costs 20-25 % more than one write() (each
// piece pays the file system's per-call work), in 2-4 MiB pieces 5 %, and 2 MiB still
// stays in the last-level cache between the hash and the write. Reads are not
// sensitive to the size between 64 KiB and 1 MiB; 256 KiB stays in a core's L2.
constexpr uint64_t kWriteChunkBytes = uint64_t(2) << 20;
constexpr uint64_t kReadChunkBytes = uint64_t(256) << 10;
// Payloads from this size on are hashed on a PayloadHasher's thread when one is given:
// a smaller one has too few chunks to overlap, and the hand-over costs more than it saves.
constexpr uint64_t kPipelinedReadFrom = 4 * kReadChunkBytes;
// Payloads from this size on, when no PayloadHasher that keeps up is given, are copied from a
// mapping of the value when its reader offers one (ValueReader::mapped: a file whose pages are
// all cached), through copy_hashed (page_codec.hpp: 4 KiB pieces, each hashed right after its
// copy). bench_storage_file's tier_read rows
// on this project's 2-core VM: a checked 8 MiB read at 84-96 % of a plain read() with 4 KiB
// pieces against ~70 % for read-then-hash; smaller payloads save too little to pay for the
// mapping's system calls.
constexpr uint64_t kMappedReadFrom = uint64_t(1) << 20;

// A thread that hashes a page's payload while read_stored_page() reads it, one page at a
// time, in payload order, following the reads; the reading thread hashes what the thread
// has not when it falls behind (page_stream.cpp says how they take turns). One reading
// thread uses a hasher at a time. The storage tier's prefetch thread owns one when
// StorageTier::set_pipelined_reads is on.
class PayloadHasher {
 public:
  // Starts the thread; throws std::system_error (no thread) or std::bad_alloc.
  PayloadHasher();
  // Stops and joins the thread.
  ~PayloadHasher();
  PayloadHasher(const PayloadHasher&) = delete;
  PayloadHasher& operator=(const PayloadHasher&) = delete;

  // read_stored_page's side, one page at a time. begin(): the page's chunks of
  // `chunk_bytes` (as for_each_payload_chunk visits them; may throw std::bad_alloc, then no
  // page is under way); returns how many. chunk(k): the k-th, to read into.
  size_t begin(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint64_t chunk_bytes);
  PayloadChunk chunk(size_t k) const;
  // Chunks [0, chunks) are in the host page: they may be hashed.
  void landed(size_t chunks);
  // Hashes what is left (all chunks must have landed) and returns the payload checksum;
  // the thread no longer reads the page.
  uint64_t finish();
  // Ends the page unhashed (a read failed); the thread no longer reads the page, so the
  // caller may give it away.
  void cancel();

  // Whether the next page should go through the thread: false for a few pages after one
  // of which the thread hashed less than 3/4 (a busy machine did not run it beside the
  // reads; each hand-over then costs more than it saves).
  bool keeping_up();

  // Whether this machine has a second core to hash on (sched_getaffinity).
  static bool worthwhile();

  struct Shared;  // page_stream.cpp

 private:
  // The reading thread hashes the backlog itself once this many chunks wait.
  static constexpr size_t kHelpAfterChunks = 3;
  // keeping_up(): a page of which the reading thread hashed more than 1/kLaggingShare makes
  // the next kSequentialPages pages go without the thread.
  static constexpr size_t kLaggingShare = 4, kSequentialPages = 8;
  std::unique_ptr<Shared> shared_;
};

// Writes host page `page` (of the buffer at `host`, laid out by `g`) as the stored page
// of (fp, digest) through `writer`: kPageHeaderBytes + page_payload_bytes(g) bytes.
// False when a write failed. With a `copier` (not null), a payload of at least
// kSegmentCopyFrom bytes is hashed on its thread while this one writes; and where the host
// layout scatters a page in short runs (has_short_runs: page_first, page_head) and a
// `staging` buffer of page_payload_bytes(g) is given, the copier gathers the page into it
// ahead of this thread, which writes it in contiguous pieces (a write of many short spans
// costs the kernel more than the copy). The bytes stored are the same.
bool write_stored_page(const host::HostGeometry& g, const uint8_t* host, int64_t page, const Fingerprint& fp,
                       const cache::Digest& digest, ValueWriter& writer, SegmentCopier* copier = nullptr,
                       uint8_t* staging = nullptr);

// Reads the stored page of (fp, digest) from `reader` into host page `page`: kOk only
// when every check passed (the page's bytes are then in the host page). *read_error is
// set when the reader failed (an I/O error; the result is then kTruncated). With a
// `hasher` (not null) a payload of at least kPipelinedReadFrom bytes is hashed on its
// thread while the rest is read; with a `copier` (not null) a payload of at least
// kSegmentCopyFrom bytes whose value the reader can map (ValueReader::mapped) is copied and
// hashed by this thread and the copier's together, before any other way is tried. The
// result is the same.
PageCheck read_stored_page(const host::HostGeometry& g, uint8_t* host, int64_t page, const Fingerprint& fp,
                           const cache::Digest& digest, ValueReader& reader, bool* read_error,
                           PayloadHasher* hasher = nullptr, SegmentCopier* copier = nullptr);

// The same as a producer / consumer for BlobStore::put_streamed / get_streamed.
class StoredPageProducer final : public ValueProducer {
 public:
  // `copier`, `staging`: optional (write_stored_page), kept by the caller beyond produce().
  StoredPageProducer(const host::HostGeometry& g, const uint8_t* host, int64_t page, const Fingerprint& fp,
                     const cache::Digest& digest, SegmentCopier* copier = nullptr, uint8_t* staging = nullptr)
      : g_(g), host_(host), page_(page), fp_(fp), digest_(digest), copier_(copier), staging_(staging) {}
  bool produce(ValueWriter& writer) override {
    return write_stored_page(g_, host_, page_, fp_, digest_, writer, copier_, staging_);
  }

 private:
  const host::HostGeometry& g_;
  const uint8_t* host_;
  int64_t page_;
  Fingerprint fp_;        // copies (48 bytes): a caller may pass temporaries
  cache::Digest digest_;
  SegmentCopier* copier_;
  uint8_t* staging_;
};

class StoredPageConsumer final : public ValueConsumer {
 public:
  // `hasher`, `copier`: optional (read_stored_page), kept by the caller beyond consume().
  StoredPageConsumer(const host::HostGeometry& g, uint8_t* host, int64_t page, const Fingerprint& fp,
                     const cache::Digest& digest, PayloadHasher* hasher = nullptr, SegmentCopier* copier = nullptr)
      : g_(g), host_(host), page_(page), fp_(fp), digest_(digest), hasher_(hasher), copier_(copier) {}
  void consume(ValueReader& reader) override {
    check_ = read_stored_page(g_, host_, page_, fp_, digest_, reader, &read_error_, hasher_, copier_);
  }
  // kTruncated until consume() ran.
  PageCheck check() const { return check_; }
  bool read_error() const { return read_error_; }

 private:
  const host::HostGeometry& g_;
  uint8_t* host_;
  int64_t page_;
  Fingerprint fp_;        // copies (48 bytes): a caller may pass temporaries
  cache::Digest digest_;
  PayloadHasher* hasher_;
  SegmentCopier* copier_;
  PageCheck check_ = PageCheck::kTruncated;
  bool read_error_ = false;
};

}  // namespace kvp::storage
