#include "storage/payload_hash.hpp"

#include <cstring>

namespace kvp::storage {
namespace payload_hash_detail {

#if defined(KVPOOL_X86_PAYLOAD_HASH)
const Impl* avx2_build();
const Impl* avx512_build();

// __builtin_cpu_supports also checks that the OS saves the wider registers.
const Impl* avx2_impl() { return __builtin_cpu_supports("avx2") ? avx2_build() : nullptr; }
const Impl* avx512_impl() { return __builtin_cpu_supports("avx512f") ? avx512_build() : nullptr; }
#else
const Impl* avx2_impl() { return nullptr; }
const Impl* avx512_impl() { return nullptr; }
#endif

}  // namespace payload_hash_detail

const payload_hash_detail::Impl* PayloadHash::best() {
  using namespace payload_hash_detail;
  static const Impl* const chosen = [] {
    if (const Impl* impl = avx512_impl()) return impl;
    if (const Impl* impl = avx2_impl()) return impl;
    return generic_impl();
  }();
  return chosen;
}

Xxh3Stream::Xxh3Stream() : Xxh3Stream(PayloadHash::best()) {}

void PayloadHash::add_digest_to(Xxh3Stream* digests, uint64_t digest) {
  unsigned char le[8];
  std::memcpy(le, &digest, sizeof(le));  // x86-64 and aarch64 Linux: little-endian, as the format says
  digests->update(le, sizeof(le));
}

void PayloadHash::update(const void* data, size_t n) {
  const unsigned char* at = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const size_t room = size_t(kPayloadSegmentBytes - open_bytes_), take = n < room ? n : room;
    segment_.update(at, take);
    open_bytes_ += take;
    at += take;
    n -= take;
    if (open_bytes_ == kPayloadSegmentBytes) {  // a segment ends: its digest joins, the next one opens
      add_digest(segment_.digest());
      segment_.reset();
      open_bytes_ = 0;
    }
  }
}

uint64_t PayloadHash::digest() const {
  if (open_bytes_ == 0) return digests_.digest();
  Xxh3Stream digests = digests_;  // the stream goes on after digest(): join the open segment to a copy
  add_digest_to(&digests, segment_.digest());
  return digests.digest();
}

void PayloadHash::add_segment_digests(const uint64_t* digests, size_t n) {
  for (size_t i = 0; i < n; ++i) add_digest(digests[i]);
}

uint64_t PayloadHash::of(const void* data, size_t n) {
  const unsigned char* at = static_cast<const unsigned char*>(data);
  PayloadHash hash;
  for (; n >= kPayloadSegmentBytes; n -= kPayloadSegmentBytes, at += kPayloadSegmentBytes) {
    hash.add_digest(xxh3(at, kPayloadSegmentBytes));
  }
  hash.update(at, n);
  return hash.digest();
}

}  // namespace kvp::storage
