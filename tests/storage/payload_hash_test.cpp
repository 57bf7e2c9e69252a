// The storage checksum (storage/payload_hash.hpp): every build this CPU runs gives, for the
// same bytes however they are split into updates, the value of its definition computed
// here with libxxhash (XXH3-64 of the 1 MiB segments' XXH3-64s), so files written on one
// machine are checked on another; segments hashed apart and joined give it too. And the
// page-cache mapping the file backend reads from (storage/resident_mapping.hpp).
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/payload_hash.hpp"
#include "storage/resident_mapping.hpp"
#include "temp_dir.hpp"

namespace {

using kvp::storage::kPayloadSegmentBytes;
using kvp::storage::PayloadHash;
namespace detail = kvp::storage::payload_hash_detail;

// The payload checksum by its definition, with libxxhash alone.
uint64_t reference_checksum(const uint8_t* bytes, size_t n) {
  std::vector<uint8_t> digests;
  for (size_t at = 0; at < n; at += kPayloadSegmentBytes) {
    const uint64_t d = XXH3_64bits(bytes + at, std::min<size_t>(kPayloadSegmentBytes, n - at));
    for (int b = 0; b < 8; ++b) digests.push_back(uint8_t(d >> (8 * b)));  // little-endian
  }
  return XXH3_64bits(digests.data(), digests.size());
}

std::vector<const detail::Impl*> runnable_impls() {
  std::vector<const detail::Impl*> impls{detail::generic_impl()};
  if (const detail::Impl* impl = detail::avx2_impl()) impls.push_back(impl);
  if (const detail::Impl* impl = detail::avx512_impl()) impls.push_back(impl);
  return impls;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) b = uint8_t(rng());
  return bytes;
}

TEST(PayloadHash, EveryBuildIsXxh3ForEveryLengthUpTo2049) {
  const std::vector<uint8_t> bytes = random_bytes(2049, 1);
  for (const detail::Impl* impl : runnable_impls()) {
    SCOPED_TRACE(impl->name);
    for (size_t n = 0; n <= bytes.size(); ++n) {
      const uint64_t expect = XXH3_64bits(bytes.data(), n);
      ASSERT_EQ(impl->once(bytes.data(), n), expect) << n;
      kvp::storage::Xxh3Stream stream(impl);
      stream.update(bytes.data(), n / 3);
      stream.update(bytes.data() + n / 3, n - n / 3);
      ASSERT_EQ(stream.digest(), expect) << n;
    }
  }
}

TEST(PayloadHash, EveryBuildGivesTheSegmentedChecksumOfShortPayloads) {
  const std::vector<uint8_t> bytes = random_bytes(2049, 1);
  for (const detail::Impl* impl : runnable_impls()) {
    SCOPED_TRACE(impl->name);
    for (size_t n = 0; n <= bytes.size(); n += 7) {
      const uint64_t expect = reference_checksum(bytes.data(), n);
      PayloadHash hash(impl);
      hash.update(bytes.data(), n / 3);
      hash.update(bytes.data() + n / 3, n - n / 3);
      ASSERT_EQ(hash.digest(), expect) << n;
    }
  }
  // No segments: the XXH3-64 of nothing. One short segment: the XXH3-64 of its digest.
  EXPECT_EQ(PayloadHash::of(bytes.data(), 0), XXH3_64bits(nullptr, 0));
  const uint64_t one = XXH3_64bits(bytes.data(), 100);
  EXPECT_EQ(PayloadHash::of(bytes.data(), 100), XXH3_64bits(&one, 8));
}

TEST(PayloadHash, EveryBuildGivesTheSegmentedChecksumOverLargeBuffersInRandomPieces) {
  const std::vector<uint8_t> bytes = random_bytes(3 * kPayloadSegmentBytes + 4096, 2);
  std::mt19937 rng(3);
  const size_t S = kPayloadSegmentBytes;
  for (const detail::Impl* impl : runnable_impls()) {
    SCOPED_TRACE(impl->name);
    for (const size_t n : {size_t(4096), S - 1, S, S + 1, S + 13, 2 * S, bytes.size()}) {
      const uint64_t expect = reference_checksum(bytes.data(), n);
      PayloadHash hash(impl);
      for (size_t at = 0; at < n;) {
        const size_t piece = std::min<size_t>(n - at, rng() % 70000);
        hash.update(bytes.data() + at, piece);
        at += piece;
      }
      EXPECT_EQ(hash.digest(), expect) << n;
      EXPECT_EQ(hash.digest(), expect) << "digest() leaves the stream as it was";
      hash.reset();  // reusable: a fresh stream after reset
      hash.update(bytes.data(), n);
      EXPECT_EQ(hash.digest(), expect) << n;
      EXPECT_EQ(hash.at_segment_boundary(), n % S == 0) << n;
    }
    // One flipped bit anywhere changes the value, in the first, a middle or the last segment.
    std::vector<uint8_t> flipped(bytes.begin(), bytes.begin() + 2 * S + 8192);
    const uint64_t intact = PayloadHash::of(flipped.data(), flipped.size());
    for (const size_t at : {size_t(0), size_t(63), S - 1, S, 2 * S + 8191}) {
      flipped[at] ^= 0x20;
      EXPECT_NE(PayloadHash::of(flipped.data(), flipped.size()), intact) << at;
      flipped[at] ^= 0x20;
    }
    // Two whole segments swapped: each digest is the same, their order is not.
    std::vector<uint8_t> swapped(flipped);
    std::swap_ranges(swapped.begin(), swapped.begin() + S, swapped.begin() + S);
    EXPECT_NE(PayloadHash::of(swapped.data(), swapped.size()), intact);
  }
}

TEST(PayloadHash, SegmentsHashedApartAndJoinedInOrderGiveTheSameChecksum) {
  const size_t S = kPayloadSegmentBytes;
  const std::vector<uint8_t> bytes = random_bytes(3 * S + 777, 6);
  std::vector<uint64_t> digests;
  for (size_t at = 0; at < bytes.size(); at += S) {
    digests.push_back(PayloadHash::xxh3(bytes.data() + at, std::min(S, bytes.size() - at)));
  }
  PayloadHash joined;
  joined.add_segment_digests(digests.data(), digests.size());
  EXPECT_EQ(joined.digest(), reference_checksum(bytes.data(), bytes.size()));
  // Streamed up to a segment's end, then the rest joined.
  PayloadHash mixed;
  mixed.update(bytes.data(), 2 * S);
  ASSERT_TRUE(mixed.at_segment_boundary());
  mixed.add_segment_digests(digests.data() + 2, digests.size() - 2);
  EXPECT_EQ(mixed.digest(), joined.digest());
}

TEST(PayloadHash, TheProcessUsesTheWidestBuildThisCpuRuns) {
  const std::string name = PayloadHash::implementation();
  const detail::Impl* widest = detail::avx512_impl() != nullptr ? detail::avx512_impl()
                               : detail::avx2_impl() != nullptr ? detail::avx2_impl()
                                                                 : detail::generic_impl();
  EXPECT_EQ(name, widest->name);
  const std::vector<uint8_t> bytes = random_bytes(100000, 4);
  EXPECT_EQ(PayloadHash::of(bytes.data(), bytes.size()), reference_checksum(bytes.data(), bytes.size()));
  EXPECT_EQ(PayloadHash::xxh3(bytes.data(), bytes.size()), XXH3_64bits(bytes.data(), bytes.size()));
}

// A file of `n` random bytes, written and synced (its pages clean in the page cache).
std::vector<uint8_t> write_file(const std::string& path, size_t n) {
  const std::vector<uint8_t> bytes = random_bytes(n, 5);
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, bytes.data(), n), ssize_t(n));
  EXPECT_EQ(::fsync(fd), 0);
  ::close(fd);
  return bytes;
}

TEST(ResidentMapping, MapsACachedFileAndRefusesOneWhosePagesWereDropped) {
  kvtest::TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.path() + "/value";
  const std::vector<uint8_t> bytes = write_file(path, (2 << 20) + 100);
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  {
    kvp::storage::ResidentMapping mapping;
    const uint8_t* data = mapping.map(fd, bytes.size());
    ASSERT_NE(data, nullptr) << "a file just written is in the page cache";
    EXPECT_EQ(std::memcmp(data, bytes.data(), bytes.size()), 0);
    EXPECT_EQ(mapping.map(fd, 0), nullptr) << "nothing to map";
    EXPECT_EQ(mapping.data(), nullptr);
  }
  struct statfs fs {};
  ASSERT_EQ(::fstatfs(fd, &fs), 0);
  if (fs.f_type == TMPFS_MAGIC) {
    ::close(fd);
    GTEST_SKIP() << "tmpfs keeps every page resident";
  }
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  kvp::storage::ResidentMapping mapping;
  EXPECT_EQ(mapping.map(fd, bytes.size()), nullptr) << "pages not in the cache: read() must do the I/O";
  ::close(fd);
}

}  // namespace
