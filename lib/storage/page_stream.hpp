// A host-tier page to and from a stored page (page_format.hpp) through a backend's
// streamed calls (blob_store.hpp), without staging the page: the payload moves in
// chunks straight between the host page and the backend, and each chunk is hashed
// while it is in the CPU's cache, so that every byte comes from memory once.
//
// Writing: chunk by chunk, the payload's XXH3 is updated from the host spans (which
// pulls them into the cache), then the same spans are written; the header, which
// holds that checksum, is written last, at offset 0. The backend renames the value
// into place only after both, so a reader never sees a page without its header.
// The stored bytes are exactly those of seal_page().
//
// Reading: the header is read and checked first (check_page_header: magic, header
// checksum, version, fingerprint, key, lengths), then the payload chunk by chunk
// straight into the host page, each chunk hashed right after it landed. A checksum
// that differs, or a value that ends early, is a miss; the host page then holds
// garbage that its caller must not publish (the prefetch publishes a page only on
// kOk, and gives unpublished pages back to the host allocator).
#pragma once

#include <cstdint>

#include "cache/page_hash.hpp"
#include "host/host_geometry.hpp"
#include "storage/blob_store.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

namespace kvp::storage {

// Payload bytes per chunk (bench_storage_file's tier rows, this project's 2-core VM,
// ext4): a write of 8 MiB in 256 KiB pieces costs 20-25 % more than one write() (each
// piece pays the file system's per-call work), in 2-4 MiB pieces 5 %, and 2 MiB still
// stays in the last-level cache between the hash and the write. Reads are not
// sensitive to the size between 64 KiB and 1 MiB; 256 KiB stays in a core's L2.
constexpr uint64_t kWriteChunkBytes = uint64_t(2) << 20;
constexpr uint64_t kReadChunkBytes = uint64_t(256) << 10;

// Writes host page `page` (of the buffer at `host`, laid out by `g`) as the stored page
// of (fp, digest) through `writer`: kPageHeaderBytes + page_payload_bytes(g) bytes.
// False when a write failed.
bool write_stored_page(const host::HostGeometry& g, const uint8_t* host, int64_t page, const Fingerprint& fp,
                       const cache::Digest& digest, ValueWriter& writer);

// Reads the stored page of (fp, digest) from `reader` into host page `page`: kOk only
// when every check passed (the page's bytes are then in the host page). *read_error is
// set when the reader failed (an I/O error; the result is then kTruncated).
PageCheck read_stored_page(const host::HostGeometry& g, uint8_t* host, int64_t page, const Fingerprint& fp,
                           const cache::Digest& digest, ValueReader& reader, bool* read_error);

// The same as a producer / consumer for BlobStore::put_streamed / get_streamed.
class StoredPageProducer final : public ValueProducer {
 public:
  StoredPageProducer(const host::HostGeometry& g, const uint8_t* host, int64_t page, const Fingerprint& fp,
                     const cache::Digest& digest)
      : g_(g), host_(host), page_(page), fp_(fp), digest_(digest) {}
  bool produce(ValueWriter& writer) override { return write_stored_page(g_, host_, page_, fp_, digest_, writer); }

 private:
  const host::HostGeometry& g_;
  const uint8_t* host_;
  int64_t page_;
  Fingerprint fp_;        // copies (48 bytes): a caller may pass temporaries
  cache::Digest digest_;
};

class StoredPageConsumer final : public ValueConsumer {
 public:
  StoredPageConsumer(const host::HostGeometry& g, uint8_t* host, int64_t page, const Fingerprint& fp,
                     const cache::Digest& digest)
      : g_(g), host_(host), page_(page), fp_(fp), digest_(digest) {}
  void consume(ValueReader& reader) override {
    check_ = read_stored_page(g_, host_, page_, fp_, digest_, reader, &read_error_);
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
  PageCheck check_ = PageCheck::kTruncated;
  bool read_error_ = false;
};

}  // namespace kvp::storage
