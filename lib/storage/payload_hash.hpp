// The storage tier's payload checksum: XXH3-64 (the value XXH3_64bits gives for the
// bytes hashed, however they were split into update() calls), computed with the widest
// vector unit this CPU has.
//
// Why not libxxhash's own functions: Debian's shared library is built for baseline
// x86-64 (SSE2), and checking a page read from the page cache then costs almost as much
// as reading it (bench_storage_file's tier rows). The same algorithm compiled for AVX2
// or AVX-512 hashes a piece that was just copied at cache speed, so a checked read runs
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

// A streaming payload checksum. Not thread-safe; cheap to construct (no allocation).
class PayloadHash {
 public:
  PayloadHash() : PayloadHash(best()) {}
  // With a given implementation (tests compare them).
  explicit PayloadHash(const payload_hash_detail::Impl* impl) : impl_(impl) { impl_->reset(state_); }

  void reset() { impl_->reset(state_); }
  void update(const void* data, size_t n) { impl_->update(state_, data, n); }
  uint64_t digest() const { return impl_->digest(state_); }

  // XXH3-64 of one buffer.
  static uint64_t of(const void* data, size_t n) { return best()->once(data, n); }
  // The implementation this process uses: "avx512", "avx2" or "generic".
  static const char* implementation() { return best()->name; }

 private:
  // The widest implementation this CPU runs, chosen once.
  static const payload_hash_detail::Impl* best();

  alignas(64) unsigned char state_[payload_hash_detail::kStateBytes];
  const payload_hash_detail::Impl* impl_;
};

}  // namespace kvp::storage
