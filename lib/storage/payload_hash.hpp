// The storage tier's payload checksum (page format version 2): the payload is cut into
// consecutive segments of kPayloadSegmentBytes (1 MiB; the last one may be shorter, an
// empty payload has none), each segment is hashed with XXH3-64, and the checksum is the
// XXH3-64 of those digests, 8 bytes each, little-endian, in payload order. The value is
// the same however the bytes were split into update() calls, and segments can be hashed
// on different threads and joined in order (add_segment_digests): one page is checked by
// two threads at once (segment_copier.hpp). Version 1 hashed the whole payload as one
// XXH3-64 stream, which only one thread can compute.
//
// Every XXH3-64 here is computed with the widest vector unit this CPU has. Why not
// libxxhash's own functions: Debian's shared library is built for baseline x86-64
// (SSE2), and checking a page read from the page cache then costs almost as much as
// reading it (bench_storage_file's tier rows). The same algorithm compiled for AVX2 or
// AVX-512 hashes a piece that was just copied at cache speed, so a checked read runs
// close to a plain read. The value is the same on every CPU (XXH3 is defined without
// reference to a vector width), so files stay readable across machines.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvp::storage {

namespace payload_hash_detail {

// Room for libxxhash's XXH3_state_t (576 bytes in 0.8.x, 64-byte aligned); each
// implementation checks that its state fits.
constexpr size_t kStateBytes = 640;

// One implementation of the streaming hash, over an opaque state of kStateBytes.
struct Impl {
  const char* name;
  void (*reset)(void* state);
  void (*update)(void* state, const void* data, size_t n);
  uint64_t (*digest)(const void* state);
  uint64_t (*once)(const void* data, size_t n);
};

// The portable build (always there), and the x86-64 builds (NULL where not compiled or
// not supported by this CPU).
const Impl* generic_impl();
const Impl* avx2_impl();
const Impl* avx512_impl();

}  // namespace payload_hash_detail

// Bytes of one payload segment (see the top of this file).
constexpr uint64_t kPayloadSegmentBytes = uint64_t(1) << 20;

// A streaming XXH3-64 of one byte stream (a payload segment, or anything else). Not
// thread-safe; cheap to construct (no allocation).
class Xxh3Stream {
 public:
  Xxh3Stream();
  // With a given implementation (tests compare them).
  explicit Xxh3Stream(const payload_hash_detail::Impl* impl) : impl_(impl) { impl_->reset(state_); }

  void reset() { impl_->reset(state_); }
  void update(const void* data, size_t n) { impl_->update(state_, data, n); }
  uint64_t digest() const { return impl_->digest(state_); }

 private:
  friend class PayloadHash;
  alignas(64) unsigned char state_[payload_hash_detail::kStateBytes];
  const payload_hash_detail::Impl* impl_;
};

// A streaming payload checksum (the segmented XXH3-64 above). Not thread-safe; cheap to
// construct (no allocation).
class PayloadHash {
 public:
  PayloadHash() : PayloadHash(best()) {}
  // With a given implementation (tests compare them).
  explicit PayloadHash(const payload_hash_detail::Impl* impl) : segment_(impl), digests_(impl) {}

  void reset() {
    segment_.reset();
    digests_.reset();
    open_bytes_ = 0;
  }
  void update(const void* data, size_t n);
  uint64_t digest() const;

  // Joins the digests (xxh3() of each) of `n` whole segments hashed elsewhere, the next
  // ones in payload order. Only where a segment ends: the bytes given so far are a whole
  // number of segments (at_segment_boundary()).
  void add_segment_digests(const uint64_t* digests, size_t n);
  bool at_segment_boundary() const { return open_bytes_ == 0; }

  // The payload checksum of one buffer.
  static uint64_t of(const void* data, size_t n);
  // Plain XXH3-64 of one buffer (a segment's digest; the page header's checksum).
  static uint64_t xxh3(const void* data, size_t n) { return best()->once(data, n); }
  // The implementation this process uses: "avx512", "avx2" or "generic".
  static const char* implementation() { return best()->name; }
  // The widest implementation this CPU runs, chosen once.
  static const payload_hash_detail::Impl* best();

 private:
  void add_digest(uint64_t digest) { add_digest_to(&digests_, digest); }
  static void add_digest_to(Xxh3Stream* digests, uint64_t digest);

  Xxh3Stream segment_;   // the open segment
  Xxh3Stream digests_;   // the closed segments' digests
  uint64_t open_bytes_ = 0;  // bytes of the open segment, < kPayloadSegmentBytes
};

}  // namespace kvp::storage
