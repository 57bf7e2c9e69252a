// Host-tier pages streamed to and from stored pages (lib/storage/page_stream.hpp)
// and the file backend's streamed calls (put_streamed / get_streamed): the bytes are
// exactly seal_page()'s under every host layout, a page comes back into another host
// page intact, and a damaged, truncated, extended, foreign or unreadable value is
// never reported whole, wherever the damage falls relative to the read chunks; the
// same with the payload hashed on a PayloadHasher's thread beside the reads (and through
// StorageTier's prefetch thread, pipelined or not, and staged as for backends that do not
// stream: the payload checked as it is copied into its host page).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "../support/unstreamed_store.hpp"
#include "host/host_geometry.hpp"
#include "storage/file_store.hpp"
#include "storage/page_codec.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"
#include "storage/page_stream.hpp"
#include "storage/payload_hash.hpp"
#include "storage/segment_copier.hpp"
#include "storage/storage_tier.hpp"
#include "util/stream_copy.hpp"

namespace {

using kvp::cache::Digest;
using kvp::host::HostGeometry;
using kvp::host::HostLayout;
using kvp::storage::BlobResult;
using kvp::storage::BlobStore;
using kvp::storage::kPageHeaderBytes;
using kvp::storage::kPipelinedReadFrom;
using kvp::storage::kReadChunkBytes;
using kvp::storage::PayloadHasher;
using kvp::storage::PageCheck;

using kvtest::TempDir;

const kvp::storage::Fingerprint& fingerprint() {
  static const kvp::storage::Fingerprint fp = kvp::storage::fingerprint_of("page stream test model");
  return fp;
}

Digest digest_of(uint8_t seed) {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(seed * 29 + i);
  return d;
}

// K and V rows of 4 heads x 1025 bytes in 5 layers, page 64, 3 host pages: a payload of
// 2,624,000 bytes, so more than one write chunk (2 MiB) and a last read chunk (256 KiB)
// that is not whole.
HostGeometry geometry(HostLayout layout) {
  HostGeometry g;
  g.layout = layout;
  g.page_size = 64;
  g.layers = 5;
  g.pages = 3;
  g.parts.resize(2);
  for (auto& part : g.parts) {
    part.item_bytes = 4 * 1025;
    part.heads = 4;
  }
  EXPECT_EQ(kvp::host::finish_geometry(&g), "");
  return g;
}

std::vector<uint8_t> random_host(const HostGeometry& g, uint64_t seed) {
  std::vector<uint8_t> host(g.bytes);
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (auto& b : host) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = uint8_t(x);
  }
  return host;
}

// seal_page's bytes for host page `page`: the reference the streamed path must match.
std::vector<uint8_t> sealed(const HostGeometry& g, const std::vector<uint8_t>& host, int64_t page, const Digest& d) {
  const uint64_t payload = kvp::storage::page_payload_bytes(g);
  std::vector<uint8_t> out(kvp::storage::stored_page_bytes(payload));
  kvp::storage::gather_page_hashed(g, host.data(), page, out.data() + kPageHeaderBytes);
  kvp::storage::seal_page(out.data(), payload, fingerprint(), d);
  return out;
}

std::vector<uint8_t> payload_of(const HostGeometry& g, const std::vector<uint8_t>& host, int64_t page) {
  std::vector<uint8_t> out(kvp::storage::page_payload_bytes(g));
  kvp::storage::gather_page_hashed(g, host.data(), page, out.data());
  return out;
}

// A value in memory. Writes land at their offsets; reads report `size` as the value's
// length but return only the bytes that exist (a value cut short under the reader),
// and fail once `fail_reads_from` is reached.
class MemoryValue final : public kvp::storage::ValueWriter, public kvp::storage::ValueReader {
 public:
  explicit MemoryValue(std::vector<uint8_t> bytes = {}) : bytes_(std::move(bytes)), size_(bytes_.size()) {}
  bool write_at(uint64_t offset, const iovec* spans, int count) override {
    if (writes_left_ == 0) return false;
    --writes_left_;
    for (int i = 0; i < count; ++i) {
      if (offset + spans[i].iov_len > bytes_.size()) bytes_.resize(offset + spans[i].iov_len);
      std::memcpy(bytes_.data() + offset, spans[i].iov_base, spans[i].iov_len);
      offset += spans[i].iov_len;
    }
    size_ = bytes_.size();
    return true;
  }
  uint64_t size() const override { return size_; }
  // With offer_mapping(true), the bytes themselves (as a file reader maps a cached file).
  const uint8_t* mapped() override {
    ++mapped_calls_;
    return offer_mapping_ && bytes_.size() == size_ ? bytes_.data() : nullptr;
  }
  bool read_at(uint64_t offset, const iovec* spans, int count, size_t* got) override {
    ++read_calls_;
    *got = 0;
    if (offset >= throw_reads_from_) throw std::runtime_error("MemoryValue: a read that throws");
    if (offset >= fail_reads_from_) return false;
    for (int i = 0; i < count && offset < bytes_.size(); ++i) {
      const size_t n = std::min<size_t>(spans[i].iov_len, bytes_.size() - offset);
      std::memcpy(spans[i].iov_base, bytes_.data() + offset, n);
      offset += n;
      *got += n;
    }
    return true;
  }
  std::vector<uint8_t>& bytes() { return bytes_; }
  void claim_size(uint64_t size) { size_ = size; }
  void fail_writes_after(int n) { writes_left_ = n; }
  void fail_reads_from(uint64_t offset) { fail_reads_from_ = offset; }
  // A reader that throws (a custom backend's code, say) from this offset on.
  void throw_reads_from(uint64_t offset) { throw_reads_from_ = offset; }
  void offer_mapping(bool on) { offer_mapping_ = on; }
  int read_calls() const { return read_calls_; }
  int mapped_calls() const { return mapped_calls_; }

 private:
  std::vector<uint8_t> bytes_;
  uint64_t size_;
  int writes_left_ = 1 << 30;
  uint64_t fail_reads_from_ = UINT64_MAX;
  uint64_t throw_reads_from_ = UINT64_MAX;
  bool offer_mapping_ = false;
  int read_calls_ = 0, mapped_calls_ = 0;
};

PageCheck read_into(const HostGeometry& g, std::vector<uint8_t>* host, int64_t page, MemoryValue& value,
                    bool* read_error, const Digest& d = digest_of(1), PayloadHasher* hasher = nullptr) {
  return kvp::storage::read_stored_page(g, host->data(), page, fingerprint(), d, value, read_error, hasher);
}

TEST(PageStream, StoredBytesAreSealPagesUnderEveryLayoutAndComeBackWhole) {
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                                  HostLayout::kPageHead}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    const HostGeometry g = geometry(layout);
    std::vector<uint8_t> host = random_host(g, 1);
    MemoryValue value;
    ASSERT_TRUE(kvp::storage::write_stored_page(g, host.data(), 1, fingerprint(), digest_of(1), value));
    EXPECT_TRUE(value.bytes() == sealed(g, host, 1, digest_of(1))) << "the on-disk format is unchanged";
    bool read_error = true;
    ASSERT_EQ(read_into(g, &host, 2, value, &read_error), PageCheck::kOk);
    EXPECT_FALSE(read_error);
    EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 1));
  }
}

TEST(PageStream, AFlippedByteAtAnyChunkBoundaryIsCorrupt) {
  const HostGeometry g = geometry(HostLayout::kPageFirst);
  std::vector<uint8_t> host = random_host(g, 2);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  const uint64_t payload = kvp::storage::page_payload_bytes(g);
  for (const uint64_t at : {uint64_t(0), kReadChunkBytes - 1, kReadChunkBytes, 2 * kReadChunkBytes - 1,
                            kvp::storage::kWriteChunkBytes, payload - 1}) {
    MemoryValue value(good);
    value.bytes()[kPageHeaderBytes + at] ^= 0x10;
    bool read_error = false;
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error), PageCheck::kCorrupt) << "payload byte " << at;
    EXPECT_FALSE(read_error);
  }
  for (size_t at = 0; at < kPageHeaderBytes; at += 7) {  // the header: never passes
    MemoryValue value(good);
    value.bytes()[at] ^= 0x01;
    bool read_error = false;
    EXPECT_NE(read_into(g, &host, 2, value, &read_error), PageCheck::kOk) << "header byte " << at;
  }
}

TEST(PageStream, ShortLongForeignAndUnreadableValuesAreNotLoaded) {
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 3);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  bool read_error = false;
  // Truncated: in the header, at a chunk boundary, one byte past it, one byte short.
  for (const size_t len : {size_t(0), size_t(50), kPageHeaderBytes, size_t(kPageHeaderBytes + kReadChunkBytes),
                           size_t(kPageHeaderBytes + kReadChunkBytes + 1), good.size() - 1}) {
    MemoryValue value(std::vector<uint8_t>(good.begin(), good.begin() + long(len)));
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error), PageCheck::kTruncated) << len;
  }
  // Cut short under the reader: its length says whole, the reads come back short.
  for (const size_t len : {size_t(kPageHeaderBytes + kReadChunkBytes), good.size() - 1, size_t(60)}) {
    MemoryValue value(std::vector<uint8_t>(good.begin(), good.begin() + long(len)));
    value.claim_size(good.size());
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error), PageCheck::kTruncated) << len;
    EXPECT_FALSE(read_error);
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  MemoryValue extended(longer);
  EXPECT_EQ(read_into(g, &host, 2, extended, &read_error), PageCheck::kCorrupt) << "trailing bytes";
  MemoryValue other(good);
  EXPECT_EQ(read_into(g, &host, 2, other, &read_error, digest_of(2)), PageCheck::kWrongKey);
  const HostGeometry smaller = [] {
    HostGeometry s = geometry(HostLayout::kLayerFirst);
    s.layers = 4;
    kvp::host::finish_geometry(&s);
    return s;
  }();
  MemoryValue foreign(good);
  std::vector<uint8_t> small_host(smaller.bytes);
  EXPECT_EQ(kvp::storage::read_stored_page(smaller, small_host.data(), 0, fingerprint(), digest_of(1), foreign,
                                           &read_error),
            PageCheck::kForeign)
      << "a payload of another length";
  // A read error half way: reported, never kOk.
  MemoryValue failing(good);
  failing.fail_reads_from(kPageHeaderBytes + 3 * kReadChunkBytes);
  EXPECT_EQ(read_into(g, &host, 2, failing, &read_error), PageCheck::kTruncated);
  EXPECT_TRUE(read_error);
  // A write error: the page is not written whole, and write_stored_page says so.
  MemoryValue refusing;
  refusing.fail_writes_after(1);
  EXPECT_FALSE(kvp::storage::write_stored_page(g, host.data(), 0, fingerprint(), digest_of(1), refusing));
}

// ---- values the reader maps (a cached file): copied and hashed piece by piece ----

TEST(PageStreamMapped, PagesComeBackWholeUnderEveryLayoutFromTheMappingAlone) {
  ASSERT_GE(kvp::storage::page_payload_bytes(geometry(HostLayout::kLayerFirst)), kvp::storage::kMappedReadFrom);
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                                  HostLayout::kPageHead}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    const HostGeometry g = geometry(layout);
    std::vector<uint8_t> host = random_host(g, 21);
    MemoryValue value(sealed(g, host, 1, digest_of(1)));
    value.offer_mapping(true);
    bool read_error = true;
    ASSERT_EQ(read_into(g, &host, 2, value, &read_error), PageCheck::kOk);
    EXPECT_FALSE(read_error);
    EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 1));
    EXPECT_EQ(value.mapped_calls(), 1);
    EXPECT_EQ(value.read_calls(), 1) << "only the header is read; the payload comes from the mapping";
  }
}

// With a hasher that keeps up (a core to spare), reading beside it is faster than the
// mapping: the payload is read with read_at and the mapping is not asked for.
TEST(PageStreamMapped, AHasherThatKeepsUpIsPreferredToTheMapping) {
  PayloadHasher hasher;
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 24);
  MemoryValue value(sealed(g, host, 1, digest_of(1)));
  value.offer_mapping(true);
  ASSERT_TRUE(hasher.keeping_up());
  bool read_error = true;
  ASSERT_EQ(read_into(g, &host, 2, value, &read_error, digest_of(1), &hasher), PageCheck::kOk);
  EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 1));
  EXPECT_EQ(value.mapped_calls(), 0);
  EXPECT_GT(value.read_calls(), 1);
}

TEST(PageStreamMapped, AFlippedByteAtAnyPieceOrChunkBoundaryIsCorrupt) {
  const HostGeometry g = geometry(HostLayout::kPageFirst);  // 2 KiB spans: pieces cross them
  std::vector<uint8_t> host = random_host(g, 22);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  const uint64_t payload = kvp::storage::page_payload_bytes(g), piece = kvp::storage::kCopyHashPieceBytes;
  for (const uint64_t at : {uint64_t(0), piece - 1, piece, 3 * piece + 17, kReadChunkBytes - 1, kReadChunkBytes,
                            payload / 2, payload - 1}) {
    MemoryValue value(good);
    value.offer_mapping(true);
    value.bytes()[kPageHeaderBytes + at] ^= 0x04;
    bool read_error = false;
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error), PageCheck::kCorrupt) << "payload byte " << at;
    EXPECT_FALSE(read_error);
    EXPECT_EQ(value.read_calls(), 1) << at;
  }
}

TEST(PageStreamMapped, ShortOrLongValuesAreRefusedBeforeAnythingIsCopied) {
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 23);
  const std::vector<uint8_t> before = host;
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  std::vector<uint8_t> longer = good;
  longer.push_back(1);
  for (const auto& [bytes, expect] : {std::pair{std::vector<uint8_t>(good.begin(), good.end() - 1), PageCheck::kTruncated},
                                      std::pair{longer, PageCheck::kCorrupt}}) {
    MemoryValue value(bytes);
    value.offer_mapping(true);
    bool read_error = false;
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error), expect);
    EXPECT_EQ(value.mapped_calls(), 0) << "the header's length check comes first";
    EXPECT_TRUE(host == before) << "nothing was written into the host pages";
  }
}

// ---- the payload hashed on a PayloadHasher's thread while it is read ----

// The test geometry's payload is long enough to be pipelined, in chunks of which the last
// is not whole.
TEST(PageStreamPipelined, TheTestPagesArePipelined) {
  const uint64_t payload = kvp::storage::page_payload_bytes(geometry(HostLayout::kLayerFirst));
  EXPECT_GE(payload, kPipelinedReadFrom);
  EXPECT_NE(payload % kReadChunkBytes, 0u);
}

TEST(PageStreamPipelined, PagesComeBackWholeUnderEveryLayoutOneAndManyPages) {
  PayloadHasher hasher;
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                                  HostLayout::kPageHead}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    HostGeometry g = geometry(layout);
    g.pages = 8;
    ASSERT_EQ(kvp::host::finish_geometry(&g), "");
    std::vector<uint8_t> host = random_host(g, 11);
    // Pages 0..3 stored, read into pages 4..7 through one hasher, one after another (one
    // page, then the next ones: the hasher starts each page afresh).
    for (int64_t page = 0; page < 4; ++page) {
      SCOPED_TRACE(page);
      MemoryValue value(sealed(g, host, page, digest_of(uint8_t(page))));
      bool read_error = true;
      ASSERT_EQ(read_into(g, &host, 4 + page, value, &read_error, digest_of(uint8_t(page)), &hasher), PageCheck::kOk);
      EXPECT_FALSE(read_error);
      EXPECT_TRUE(payload_of(g, host, 4 + page) == payload_of(g, host, page));
    }
  }
}

TEST(PageStreamPipelined, ACorruptChunkInTheMiddleOrAtTheEndIsCorruptAndTheNextPageStillLoads) {
  PayloadHasher hasher;
  const HostGeometry g = geometry(HostLayout::kPageFirst);
  std::vector<uint8_t> host = random_host(g, 12);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  const uint64_t payload = kvp::storage::page_payload_bytes(g);
  const uint64_t middle = (payload / kReadChunkBytes / 2) * kReadChunkBytes + 1000;  // inside a middle chunk
  for (const uint64_t at : {uint64_t(0), middle, kReadChunkBytes - 1, kReadChunkBytes, payload - kReadChunkBytes / 2,
                            payload - 1}) {
    MemoryValue value(good);
    value.bytes()[kPageHeaderBytes + at] ^= 0x10;
    bool read_error = false;
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error, digest_of(1), &hasher), PageCheck::kCorrupt)
        << "payload byte " << at;
    EXPECT_FALSE(read_error);
    MemoryValue intact(good);  // the same hasher, the next page: no trace of the bad one
    EXPECT_EQ(read_into(g, &host, 1, intact, &read_error, digest_of(1), &hasher), PageCheck::kOk) << at;
    EXPECT_TRUE(payload_of(g, host, 1) == payload_of(g, host, 0));
  }
}

TEST(PageStreamPipelined, ShortAndUnreadableValuesAreNotLoadedAndTheHasherLetsGo) {
  PayloadHasher hasher;
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 13);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  bool read_error = false;
  // Short files: the length says so (the header check), or the reads come back short in
  // the first, a middle and the last chunk.
  for (const size_t len : {size_t(kPageHeaderBytes + 3 * kReadChunkBytes), good.size() - 1}) {
    MemoryValue value(std::vector<uint8_t>(good.begin(), good.begin() + long(len)));
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error, digest_of(1), &hasher), PageCheck::kTruncated) << len;
  }
  for (const size_t len : {size_t(kPageHeaderBytes + 10), size_t(kPageHeaderBytes + 5 * kReadChunkBytes + 7),
                           good.size() - 1}) {
    MemoryValue value(std::vector<uint8_t>(good.begin(), good.begin() + long(len)));
    value.claim_size(good.size());
    EXPECT_EQ(read_into(g, &host, 2, value, &read_error, digest_of(1), &hasher), PageCheck::kTruncated) << len;
    EXPECT_FALSE(read_error);
  }
  // A read error in a middle chunk and in the last one: reported, never kOk.
  const uint64_t last_chunk = kPageHeaderBytes + (good.size() - kPageHeaderBytes) / kReadChunkBytes * kReadChunkBytes;
  for (const uint64_t from : {uint64_t(kPageHeaderBytes + 4 * kReadChunkBytes), last_chunk}) {
    MemoryValue failing(good);
    failing.fail_reads_from(from);
    EXPECT_EQ(read_into(g, &host, 2, failing, &read_error, digest_of(1), &hasher), PageCheck::kTruncated) << from;
    EXPECT_TRUE(read_error);
  }
  // After all that the hasher still serves whole pages; the host page it gave up is the
  // caller's again (written here while no page is under way: TSan sees any late read).
  const std::vector<uint8_t> zeros(good.size() - kPageHeaderBytes, 0);
  kvp::storage::scatter_page_hashed(g, host.data(), 2, zeros.data());
  MemoryValue intact(good);
  EXPECT_EQ(read_into(g, &host, 2, intact, &read_error, digest_of(1), &hasher), PageCheck::kOk);
  EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 0));
}

// A reader that throws in the middle of a pipelined page (a custom backend's code, say):
// the exception reaches the caller, and the same hasher serves the next page, into the
// same host page, whole. (read_stored_page also cancels the hasher's page before
// rethrowing; with that cancel removed, this test still passed, also under TSan in three
// runs: it checks the exception and the hasher's reuse, not the cancel.)
TEST(PageStreamPipelined, AReaderThatThrowsMidPageLeavesTheHasherFree) {
  PayloadHasher hasher;
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 15);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  const uint64_t payload = kvp::storage::page_payload_bytes(g);
  for (const uint64_t from : {uint64_t(kPageHeaderBytes + kReadChunkBytes),
                              uint64_t(kPageHeaderBytes + payload / kReadChunkBytes * kReadChunkBytes)}) {
    SCOPED_TRACE(from);
    MemoryValue throwing(good);
    throwing.throw_reads_from(from);
    bool read_error = false;
    EXPECT_THROW(read_into(g, &host, 2, throwing, &read_error, digest_of(1), &hasher), std::runtime_error);
    EXPECT_GT(throwing.read_calls(), 2) << "the page was read in chunks, beside the hasher";
    const std::vector<uint8_t> zeros(payload, 0);
    kvp::storage::scatter_page_hashed(g, host.data(), 2, zeros.data());
    MemoryValue intact(good);
    ASSERT_EQ(read_into(g, &host, 2, intact, &read_error, digest_of(1), &hasher), PageCheck::kOk);
    EXPECT_FALSE(read_error);
    EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 0));
  }
}

TEST(PageStreamPipelined, ManyPagesInARowMatchTheSequentialResults) {
  // Whoever hashes a chunk (the thread, or the reading thread when the thread lags), the
  // verdict is the same as without a hasher: here on 24 pages, every fourth damaged.
  PayloadHasher hasher;
  const HostGeometry g = geometry(HostLayout::kPageFirstDirect);
  std::vector<uint8_t> host = random_host(g, 14);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  const uint64_t payload = kvp::storage::page_payload_bytes(g);
  for (int i = 0; i < 24; ++i) {
    MemoryValue piped(good), plain(good);
    if (i % 4 == 3) {
      const uint64_t at = kPageHeaderBytes + (uint64_t(i) * 104729) % payload;
      piped.bytes()[at] ^= 0x01;
      plain.bytes()[at] ^= 0x01;
    }
    bool read_error = false;
    const PageCheck without = read_into(g, &host, 1, plain, &read_error);
    const PageCheck with = read_into(g, &host, 2, piped, &read_error, digest_of(1), &hasher);
    EXPECT_EQ(with, without) << i;
    EXPECT_EQ(with, i % 4 == 3 ? PageCheck::kCorrupt : PageCheck::kOk) << i;
  }
}

// ---- a mapped page copied by two threads: SegmentCopier ----

// The test pages have several segments, the last one not whole, so the copier has
// segments to take and a short one to hash.
TEST(SegmentCopier, TheTestPagesHaveSeveralSegmentsAndAShortLastOne) {
  const uint64_t payload = kvp::storage::page_payload_bytes(geometry(HostLayout::kLayerFirst));
  EXPECT_GE(payload, kvp::storage::kSegmentCopyFrom);
  EXPECT_NE(payload % kvp::storage::kPayloadSegmentBytes, 0u);
}

// Every layout: the page lands whole, the other pages keep their bytes, the value is the
// payload's checksum; and the copier's thread really takes segments (copies are repeated
// until it took some, for at most 5 s, as a busy machine may run it late).
TEST(SegmentCopier, CopiesEveryLayoutAsTheScatterDoesWithBothThreads) {
  kvp::storage::SegmentCopier copier;
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                                  HostLayout::kPageHead}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    const HostGeometry g = geometry(layout);
    const std::vector<uint8_t> payload = payload_of(g, random_host(g, 41), 1);
    const uint64_t checksum = kvp::storage::PayloadHash::of(payload.data(), payload.size());
    size_t by_copier = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (int k = 0; k < 3 || (by_copier == 0 && std::chrono::steady_clock::now() < give_up); ++k) {
      std::vector<uint8_t> host = random_host(g, 42 + uint64_t(k));
      const std::vector<uint8_t> page0 = payload_of(g, host, 0), page2 = payload_of(g, host, 2);
      ASSERT_EQ(copier.copy(g, host.data(), 1, payload.data()), checksum) << k;
      ASSERT_TRUE(payload_of(g, host, 1) == payload) << k;
      ASSERT_TRUE(payload_of(g, host, 0) == page0) << k;
      ASSERT_TRUE(payload_of(g, host, 2) == page2) << k;
      by_copier += copier.last_copier_segments();
    }
    EXPECT_GT(by_copier, 0u) << "the copier's thread never took a segment";
  }
}

// The copier is kept off the CPU of the thread that posts (the kernel would otherwise wake
// it there, behind the poster): with this thread on one CPU, the copier may run on every other
// allowed CPU but that one.
TEST(SegmentCopier, StaysOffThePostingThreadsCpu) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  if (CPU_COUNT(&mine) < 2) GTEST_SKIP() << "one CPU: nowhere else to go";
  kvp::storage::SegmentCopier copier;
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  const std::vector<uint8_t> payload = payload_of(g, random_host(g, 47), 1);
  std::vector<uint8_t> host = random_host(g, 48);
  for (int cpu = 0, tried = 0; cpu < CPU_SETSIZE && tried < 2; ++cpu) {
    if (!CPU_ISSET(cpu, &mine)) continue;
    ++tried;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // this thread on `cpu` alone
    const uint64_t checksum = copier.copy(g, host.data(), 1, payload.data());
    ASSERT_EQ(sched_setaffinity(0, sizeof(mine), &mine), 0);
    EXPECT_EQ(checksum, kvp::storage::PayloadHash::of(payload.data(), payload.size()));
    cpu_set_t copier_cpus;
    ASSERT_TRUE(copier.copier_cpus(&copier_cpus));
    EXPECT_FALSE(CPU_ISSET(cpu, &copier_cpus)) << "cpu " << cpu;
    EXPECT_EQ(CPU_COUNT(&copier_cpus), CPU_COUNT(&mine) - 1) << "cpu " << cpu;
  }
}

TEST(SegmentCopier, ReadsAMappedValueWithTheHeaderReadOnly) {
  kvp::storage::SegmentCopier copier;
  const HostGeometry g = geometry(HostLayout::kPageFirst);
  std::vector<uint8_t> host = random_host(g, 43);
  MemoryValue value(sealed(g, host, 1, digest_of(1)));
  value.offer_mapping(true);
  bool read_error = true;
  ASSERT_EQ(kvp::storage::read_stored_page(g, host.data(), 2, fingerprint(), digest_of(1), value, &read_error,
                                           nullptr, &copier),
            PageCheck::kOk);
  EXPECT_FALSE(read_error);
  EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 1));
  EXPECT_EQ(value.mapped_calls(), 1);
  EXPECT_EQ(value.read_calls(), 1) << "only the header is read; the payload comes from the mapping";
}

// A flipped byte in any segment (the first, a middle one, the short last one, either side
// of a segment's edge) is corrupt whichever thread copied it, and the next page loads whole.
TEST(SegmentCopier, AFlippedByteInAnySegmentIsCorruptAndTheNextPageLoads) {
  kvp::storage::SegmentCopier copier;
  kvp::storage::PayloadHasher hasher;  // given too: the copier comes first for a mapped value
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 44);
  const std::vector<uint8_t> good = sealed(g, host, 0, digest_of(1));
  const uint64_t payload = kvp::storage::page_payload_bytes(g), S = kvp::storage::kPayloadSegmentBytes;
  for (const uint64_t at : {uint64_t(0), S - 1, S, S + 4097, 2 * S - 1, 2 * S, payload - 1}) {
    MemoryValue value(good);
    value.offer_mapping(true);
    value.bytes()[kPageHeaderBytes + at] ^= 0x10;
    bool read_error = false;
    EXPECT_EQ(kvp::storage::read_stored_page(g, host.data(), 2, fingerprint(), digest_of(1), value, &read_error,
                                             &hasher, &copier),
              PageCheck::kCorrupt)
        << "payload byte " << at;
    EXPECT_EQ(value.read_calls(), 1) << at;
    MemoryValue intact(good);
    intact.offer_mapping(true);
    EXPECT_EQ(kvp::storage::read_stored_page(g, host.data(), 1, fingerprint(), digest_of(1), intact, &read_error,
                                             &hasher, &copier),
              PageCheck::kOk)
        << at;
    EXPECT_TRUE(payload_of(g, host, 1) == payload_of(g, host, 0)) << at;
  }
}

// A value the reader cannot map, or a page of less than two segments, goes the other ways;
// the results are the same.
TEST(SegmentCopier, UnmappedValuesAndSmallPagesAreReadWithoutIt) {
  kvp::storage::SegmentCopier copier;
  const HostGeometry g = geometry(HostLayout::kPageFirstDirect);
  std::vector<uint8_t> host = random_host(g, 45);
  MemoryValue unmapped(sealed(g, host, 1, digest_of(1)));
  bool read_error = true;
  ASSERT_EQ(kvp::storage::read_stored_page(g, host.data(), 2, fingerprint(), digest_of(1), unmapped, &read_error,
                                           nullptr, &copier),
            PageCheck::kOk);
  EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 1));
  EXPECT_GT(unmapped.read_calls(), 1) << "read with read_at";

  HostGeometry small = g;  // one layer: 524,800 bytes of payload
  small.layers = 1;
  ASSERT_EQ(kvp::host::finish_geometry(&small), "");
  ASSERT_LT(kvp::storage::page_payload_bytes(small), kvp::storage::kSegmentCopyFrom);
  std::vector<uint8_t> small_host = random_host(small, 46);
  MemoryValue value(sealed(small, small_host, 0, digest_of(2)));
  value.offer_mapping(true);
  ASSERT_EQ(kvp::storage::read_stored_page(small, small_host.data(), 1, fingerprint(), digest_of(2), value,
                                           &read_error, nullptr, &copier),
            PageCheck::kOk);
  EXPECT_TRUE(payload_of(small, small_host, 1) == payload_of(small, small_host, 0));
  EXPECT_EQ(copier.last_copier_segments(), 0u) << "never asked";
}

// Backups with a copier: hashed beside the writes (layer_first, page_first_direct), or
// gathered ahead of them into staging (page_first, page_head): the same stored bytes.
TEST(SegmentCopier, BackupsStoreTheSameBytesUnderEveryLayout) {
  kvp::storage::SegmentCopier copier;
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect,
                                  HostLayout::kPageHead}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    const HostGeometry g = geometry(layout);
    EXPECT_EQ(kvp::storage::has_short_runs(g), layout == HostLayout::kPageFirst || layout == HostLayout::kPageHead);
    std::vector<uint8_t> staging(kvp::storage::page_payload_bytes(g));
    for (int k = 0; k < 3; ++k) {
      const std::vector<uint8_t> host = random_host(g, 50 + uint64_t(k));
      MemoryValue value;
      ASSERT_TRUE(kvp::storage::write_stored_page(g, host.data(), 1, fingerprint(), digest_of(1), value, &copier,
                                                  staging.data()));
      EXPECT_TRUE(value.bytes() == sealed(g, host, 1, digest_of(1))) << k;
      MemoryValue hashed_beside;  // no staging: every layout written as it lies, hashed by the copier
      ASSERT_TRUE(
          kvp::storage::write_stored_page(g, host.data(), 1, fingerprint(), digest_of(1), hashed_beside, &copier));
      EXPECT_TRUE(hashed_beside.bytes() == value.bytes()) << k;
    }
  }
}

// A write that fails part-way stores nothing whole and leaves the copier free: the next
// page is written whole.
TEST(SegmentCopier, AFailedBackupWriteLeavesTheCopierFree) {
  kvp::storage::SegmentCopier copier;
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    const HostGeometry g = geometry(layout);
    const std::vector<uint8_t> host = random_host(g, 55);
    std::vector<uint8_t> staging(kvp::storage::page_payload_bytes(g));
    for (const int writes : {0, 1}) {
      MemoryValue failing;
      failing.fail_writes_after(writes);
      EXPECT_FALSE(kvp::storage::write_stored_page(g, host.data(), 1, fingerprint(), digest_of(1), failing, &copier,
                                                   staging.data()))
          << writes;
      MemoryValue value;
      ASSERT_TRUE(kvp::storage::write_stored_page(g, host.data(), 2, fingerprint(), digest_of(2), value, &copier,
                                                  staging.data()));
      EXPECT_TRUE(value.bytes() == sealed(g, host, 2, digest_of(2))) << writes;
    }
  }
}

// wait_segment: once it returns, that segment of the gathered payload is final, whichever
// thread gathered it; finish() then gives the checksum of the whole.
TEST(SegmentCopier, AGatheredSegmentIsFinalOnceWaitedFor) {
  kvp::storage::SegmentCopier copier;
  const HostGeometry g = geometry(HostLayout::kPageFirst);
  const std::vector<uint8_t> host = random_host(g, 56);
  const std::vector<uint8_t> expect = payload_of(g, host, 2);
  const uint64_t S = kvp::storage::kPayloadSegmentBytes;
  for (int k = 0; k < 5; ++k) {
    std::vector<uint8_t> staging(expect.size(), 0xAB);
    copier.post(kvp::storage::SegmentWork::kGather, g, const_cast<uint8_t*>(host.data()), 2, staging.data());
    for (uint64_t seg = 0; seg * S < expect.size(); ++seg) {
      copier.wait_segment(size_t(seg));
      const uint64_t end = std::min<uint64_t>((seg + 1) * S, expect.size());
      ASSERT_EQ(std::memcmp(staging.data() + seg * S, expect.data() + seg * S, end - seg * S), 0) << k << " " << seg;
    }
    EXPECT_EQ(copier.finish(), kvp::storage::PayloadHash::of(expect.data(), expect.size())) << k;
    EXPECT_TRUE(staging == expect) << k;
  }
}

// ---- through the file backend: real files, the real chunked reads ----

std::unique_ptr<BlobStore> open_store(const std::string& dir) {
  kvp::config::StorageConfig cfg;
  cfg.enabled = true;
  cfg.path = dir;
  std::unique_ptr<BlobStore> store;
  const kvp::Status st = kvp::storage::open_file_store(cfg, &store);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return store;
}

class CountingProducer final : public kvp::storage::ValueProducer {
 public:
  CountingProducer(const HostGeometry& g, const std::vector<uint8_t>& host, int64_t page, const Digest& d)
      : inner_(g, host.data(), page, fingerprint(), d) {}
  bool produce(kvp::storage::ValueWriter& writer) override {
    ++calls;
    return inner_.produce(writer);
  }
  int calls = 0;

 private:
  kvp::storage::StoredPageProducer inner_;
};

// Writes only the first `bytes` bytes of a value (a buggy producer), or gives up.
class PartialProducer final : public kvp::storage::ValueProducer {
 public:
  PartialProducer(const std::vector<uint8_t>& value, size_t bytes, bool result)
      : value_(value), bytes_(bytes), result_(result) {}
  bool produce(kvp::storage::ValueWriter& writer) override {
    iovec span{const_cast<uint8_t*>(value_.data()), bytes_};
    return writer.write_at(0, &span, 1) && result_;
  }

 private:
  const std::vector<uint8_t>& value_;
  size_t bytes_;
  bool result_;
};

std::string path_of(const std::string& dir, const Digest& d) {
  return dir + "/" + kvp::storage::page_key(fingerprint(), d) + ".kvp";
}

TEST(FileStoreStreamed, PagesRoundTripByteIdenticalWithExactCounters) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  ASSERT_TRUE(store->streams());
  const HostGeometry g = geometry(HostLayout::kPageFirst);
  std::vector<uint8_t> host = random_host(g, 4);
  const uint64_t stored = kvp::storage::stored_page_bytes(kvp::storage::page_payload_bytes(g));
  const std::string key = kvp::storage::page_key(fingerprint(), digest_of(1));
  CountingProducer producer(g, host, 0, digest_of(1));
  ASSERT_EQ(store->put_streamed(key, stored, producer), BlobResult::kOk);
  EXPECT_EQ(producer.calls, 1);
  // Read back by the plain get(): exactly seal_page's bytes.
  std::vector<uint8_t> back(stored + 10);
  uint8_t* dst = back.data();
  const size_t capacity = back.size();
  size_t size = 0;
  BlobResult r = BlobResult::kError;
  store->get(&key, &dst, &capacity, 1, &size, &r);
  ASSERT_EQ(r, BlobResult::kOk);
  back.resize(size);
  EXPECT_TRUE(back == sealed(g, host, 0, digest_of(1)));
  // And by get_streamed into host page 2.
  kvp::storage::StoredPageConsumer consumer(g, host.data(), 2, fingerprint(), digest_of(1));
  uint64_t got = 0;
  ASSERT_EQ(store->get_streamed(key, consumer, &got), BlobResult::kOk);
  EXPECT_EQ(consumer.check(), PageCheck::kOk);
  EXPECT_EQ(got, stored);
  EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 0));
  // Write-once: the producer is not asked again.
  EXPECT_EQ(store->put_streamed(key, stored, producer), BlobResult::kOk);
  EXPECT_EQ(producer.calls, 1);
  // A miss: the consumer is not called.
  kvp::storage::StoredPageConsumer nobody(g, host.data(), 2, fingerprint(), digest_of(9));
  EXPECT_EQ(store->get_streamed(kvp::storage::page_key(fingerprint(), digest_of(9)), nobody, &got),
            BlobResult::kMiss);
  EXPECT_EQ(nobody.check(), PageCheck::kTruncated) << "untouched";
  const kvp::storage::BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.put_bytes, stored);
  EXPECT_EQ(s.put_existing, 1u);
  EXPECT_EQ(s.gets, 3u);
  EXPECT_EQ(s.get_hits, 2u);
  EXPECT_EQ(s.get_bytes, 2 * stored);
  EXPECT_EQ(s.get_misses, 1u);
  EXPECT_EQ(s.io_errors, 0u);
}

TEST(FileStoreStreamed, DamagedAndTruncatedFilesAreNeverLoaded) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 5);
  const uint64_t stored = kvp::storage::stored_page_bytes(kvp::storage::page_payload_bytes(g));
  const auto put = [&](const Digest& d) {
    kvp::storage::StoredPageProducer producer(g, host.data(), 0, fingerprint(), d);
    return store->put_streamed(kvp::storage::page_key(fingerprint(), d), stored, producer);
  };
  const auto load = [&](const Digest& d) {
    kvp::storage::StoredPageConsumer consumer(g, host.data(), 2, fingerprint(), d);
    uint64_t size = 0;
    EXPECT_EQ(store->get_streamed(kvp::storage::page_key(fingerprint(), d), consumer, &size), BlobResult::kOk);
    return consumer.check();
  };
  // A flipped byte on each side of the first read-chunk boundary.
  uint8_t seed = 10;
  for (const uint64_t at : {kPageHeaderBytes + kReadChunkBytes - 1, kPageHeaderBytes + kReadChunkBytes}) {
    const Digest d = digest_of(seed++);
    ASSERT_EQ(put(d), BlobResult::kOk);
    const int fd = ::open(path_of(tmp.path(), d).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, off_t(at)), 1);
    c ^= 0x80;
    ASSERT_EQ(::pwrite(fd, &c, 1, off_t(at)), 1);
    ::close(fd);
    EXPECT_EQ(load(d), PageCheck::kCorrupt) << "file byte " << at;
  }
  // Truncated at a read-chunk boundary, inside the header, and to nothing.
  for (const off_t len : {off_t(kPageHeaderBytes + 2 * kReadChunkBytes), off_t(40), off_t(0)}) {
    const Digest d = digest_of(seed++);
    ASSERT_EQ(put(d), BlobResult::kOk);
    ASSERT_EQ(::truncate(path_of(tmp.path(), d).c_str(), len), 0);
    EXPECT_EQ(load(d), PageCheck::kTruncated) << "length " << len;
  }
  // An intact page still loads.
  const Digest d = digest_of(seed++);
  ASSERT_EQ(put(d), BlobResult::kOk);
  EXPECT_EQ(load(d), PageCheck::kOk);
  EXPECT_EQ(store->stats().io_errors, 0u);
}

TEST(FileStoreStreamed, AnAbandonedOrShortValueStoresNothing) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::vector<uint8_t> value(300 << 10, 0x5a);  // large enough to be preallocated
  const std::string key = kvp::storage::page_key(fingerprint(), digest_of(1));
  PartialProducer gives_up(value, value.size(), false);
  EXPECT_EQ(store->put_streamed(key, value.size(), gives_up), BlobResult::kError);
  PartialProducer short_one(value, value.size() - 1, true);
  EXPECT_EQ(store->put_streamed(key, value.size(), short_one), BlobResult::kError);
  EXPECT_EQ(tmp.files(), std::vector<std::string>()) << "no value and no temporary file stays";
  kvp::storage::BlobStats s = store->stats();
  EXPECT_EQ(s.put_errors, 2u);
  EXPECT_EQ(s.io_errors, 0u) << "the producer's doing, not the file system's";
  EXPECT_EQ(s.puts, 0u);
  PartialProducer whole(value, value.size(), true);
  EXPECT_EQ(store->put_streamed(key, value.size(), whole), BlobResult::kOk);
  EXPECT_EQ(store->stats().puts, 1u);
}

// Writes a value as three spans (of 7, 9 and 14 KiB) in one write_at.
class ThreeSpans final : public kvp::storage::ValueProducer {
 public:
  explicit ThreeSpans(const std::vector<uint8_t>& value) : value_(value) {}
  bool produce(kvp::storage::ValueWriter& writer) override {
    uint8_t* base = const_cast<uint8_t*>(value_.data());
    const iovec spans[3] = {{base, 7 << 10}, {base + (7 << 10), 9 << 10}, {base + (16 << 10), 14 << 10}};
    return writer.write_at(0, spans, 3);
  }

 private:
  const std::vector<uint8_t>& value_;
};

TEST(FileStoreStreamed, AWriteCutShortInsideASpanIsAnErrorAndLeavesNoFile) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  std::vector<uint8_t> value(30 << 10);
  for (size_t i = 0; i < value.size(); ++i) value[i] = uint8_t(i * 13 + (i >> 9));
  const std::string key = kvp::storage::page_key(fingerprint(), digest_of(3));
  {
    // The file system takes 10,000 bytes (the middle of the second span), then refuses.
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
    const auto old_handler = signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved;
    limited.rlim_cur = 10000;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
    ThreeSpans producer(value);
    const BlobResult r = store->put_streamed(key, value.size(), producer);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    EXPECT_EQ(r, BlobResult::kError);
  }
  EXPECT_EQ(tmp.files(), std::vector<std::string>()) << "no value and no temporary file stays";
  EXPECT_EQ(store->stats().io_errors, 1u);
  // Without the limit the same spans make the whole value, in order.
  ThreeSpans producer(value);
  ASSERT_EQ(store->put_streamed(key, value.size(), producer), BlobResult::kOk);
  std::vector<uint8_t> back(value.size() + 1);
  uint8_t* dst = back.data();
  const size_t capacity = back.size();
  size_t size = 0;
  BlobResult r = BlobResult::kError;
  store->get(&key, &dst, &capacity, 1, &size, &r);
  ASSERT_EQ(r, BlobResult::kOk);
  back.resize(size);
  EXPECT_TRUE(back == value);
}

TEST(FileStoreStreamed, PipelinedReadsOfDamagedAndShortFilesAreNeverLoaded) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  PayloadHasher hasher;
  const HostGeometry g = geometry(HostLayout::kPageFirst);
  std::vector<uint8_t> host = random_host(g, 15);
  const uint64_t payload = kvp::storage::page_payload_bytes(g);
  const uint64_t stored = kvp::storage::stored_page_bytes(payload);
  const auto put = [&](const Digest& d) {
    kvp::storage::StoredPageProducer producer(g, host.data(), 0, fingerprint(), d);
    return store->put_streamed(kvp::storage::page_key(fingerprint(), d), stored, producer);
  };
  const auto load = [&](const Digest& d) {
    kvp::storage::StoredPageConsumer consumer(g, host.data(), 2, fingerprint(), d, &hasher);
    uint64_t size = 0;
    EXPECT_EQ(store->get_streamed(kvp::storage::page_key(fingerprint(), d), consumer, &size), BlobResult::kOk);
    return consumer.check();
  };
  uint8_t seed = 40;
  // A flipped byte in a middle chunk and in the last byte of the file.
  for (const uint64_t at : {kPageHeaderBytes + 5 * kReadChunkBytes + 123, stored - 1}) {
    const Digest d = digest_of(seed++);
    ASSERT_EQ(put(d), BlobResult::kOk);
    const int fd = ::open(path_of(tmp.path(), d).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, off_t(at)), 1);
    c ^= 0x04;
    ASSERT_EQ(::pwrite(fd, &c, 1, off_t(at)), 1);
    ::close(fd);
    EXPECT_EQ(load(d), PageCheck::kCorrupt) << "file byte " << at;
  }
  // Short: in a middle chunk, one byte short.
  for (const off_t len : {off_t(kPageHeaderBytes + 6 * kReadChunkBytes + 5), off_t(stored - 1)}) {
    const Digest d = digest_of(seed++);
    ASSERT_EQ(put(d), BlobResult::kOk);
    ASSERT_EQ(::truncate(path_of(tmp.path(), d).c_str(), len), 0);
    EXPECT_EQ(load(d), PageCheck::kTruncated) << "length " << len;
  }
  const Digest d = digest_of(seed++);
  ASSERT_EQ(put(d), BlobResult::kOk);
  EXPECT_EQ(load(d), PageCheck::kOk);
  EXPECT_TRUE(payload_of(g, host, 2) == payload_of(g, host, 0));
  EXPECT_EQ(store->stats().io_errors, 0u);
}

// ---- StorageTier's prefetch thread, with and without its PayloadHasher ----

// Stores host pages 0..3 through a tier, damages the stored page `bad` by `damage`, and
// prefetches the four into pages 4..7: returns the pages that landed, and the tier's stats.
struct PrefetchOutcome {
  size_t landed = 0;
  kvp::storage::StorageTierStats stats;
  bool intact = true;  // the landed pages hold the stored payloads
};

// `unstreamed`: through the file backend with its streamed calls hidden (kvtest::UnstreamedStore),
// so that the tier takes the path of memcached, redis and callback backends.
// How the prefetch thread reads a page: alone, beside its PayloadHasher, or with its
// SegmentCopier (mapped files and staged values; the tier's default).
enum class Way { kAlone, kPipelined, kCopier };
const char* way_name(Way way) { return way == Way::kAlone ? "alone" : way == Way::kPipelined ? "pipelined" : "copier"; }

template <class Damage>
PrefetchOutcome prefetch_after_damage(Way way, HostLayout layout, size_t pages, size_t bad, Damage damage,
                                      bool unstreamed = false) {
  TempDir tmp;
  HostGeometry g = geometry(layout);
  g.pages = 2 * pages;
  EXPECT_EQ(kvp::host::finish_geometry(&g), "");
  std::vector<uint8_t> host = random_host(g, 16);
  std::unique_ptr<BlobStore> store = open_store(tmp.path());
  if (unstreamed) store = std::make_unique<kvtest::UnstreamedStore>(std::move(store));
  kvp::storage::StorageTier tier(std::move(store), g, host.data());
  tier.set_pipelined_reads(way == Way::kPipelined);
  tier.set_segment_copies(way == Way::kCopier);
  std::vector<int64_t> sources;
  std::vector<Digest> digests;
  for (size_t i = 0; i < pages; ++i) {
    sources.push_back(int64_t(i));
    digests.push_back(digest_of(uint8_t(60 + i)));
  }
  tier.backup(sources, digests, fingerprint());
  tier.wait_idle();
  EXPECT_EQ(tier.stats().backup_pages, pages);
  if (bad < pages) damage(path_of(tmp.path(), digests[bad]));
  kvp::storage::StorageTier::StagedPrefetch staged = tier.stage_prefetch(digests, fingerprint(), 1);
  for (size_t i = 0; i < pages; ++i) staged.pages[i] = int64_t(pages + i);
  const uint64_t id = tier.commit_prefetch(std::move(staged));
  tier.wait_idle();
  PrefetchOutcome out;
  out.landed = tier.finish_prefetch(id);
  std::vector<int64_t> released;
  tier.take_released(&released);
  EXPECT_EQ(released.size(), pages - out.landed) << "every page that did not land comes back";
  out.stats = tier.stats();
  for (size_t i = 0; i < out.landed; ++i) {
    out.intact = out.intact && payload_of(g, host, int64_t(pages + i)) == payload_of(g, host, int64_t(i));
  }
  return out;
}

void flip_byte(const std::string& path, off_t at) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t c = 0;
  if (at < 0) at += ::lseek(fd, 0, SEEK_END);
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c ^= 0x20;
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
}

TEST(StorageTierStreamed, PrefetchesLoadTheSamePagesAlonePipelinedOrWithTheCopier) {
  for (const Way way : {Way::kAlone, Way::kPipelined, Way::kCopier}) {
    for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst}) {
      for (const size_t pages : {size_t(1), size_t(4)}) {
        SCOPED_TRACE(std::string(way_name(way)) + " " + kvp::host::host_layout_name(layout) + " pages " +
                     std::to_string(pages));
        const PrefetchOutcome whole = prefetch_after_damage(way, layout, pages, pages, [](const std::string&) {});
        EXPECT_EQ(whole.landed, pages);
        EXPECT_TRUE(whole.intact);
        EXPECT_EQ(whole.stats.prefetch_pages, pages);
        EXPECT_EQ(whole.stats.pages_corrupt + whole.stats.pages_truncated + whole.stats.read_failures, 0u);
      }
    }
  }
}

TEST(StorageTierStreamed, ADamagedOrShortPageEndsThePrefetchThereAndIsNotLoaded) {
  const off_t middle = off_t(kPageHeaderBytes + 5 * kReadChunkBytes + 77);
  for (const Way way : {Way::kAlone, Way::kPipelined, Way::kCopier}) {
    SCOPED_TRACE(way_name(way));
    // The second of four pages damaged in a middle chunk, then in its last byte.
    for (const off_t at : {middle, off_t(-1)}) {
      const PrefetchOutcome o = prefetch_after_damage(way, HostLayout::kLayerFirst, 4, 1,
                                                      [&](const std::string& path) { flip_byte(path, at); });
      EXPECT_EQ(o.landed, 1u) << at;
      EXPECT_TRUE(o.intact);
      EXPECT_EQ(o.stats.pages_corrupt, 1u) << at;
      EXPECT_EQ(o.stats.prefetch_pages, 1u);
    }
    // One page only, damaged at its end: nothing lands.
    const PrefetchOutcome one = prefetch_after_damage(way, HostLayout::kPageFirst, 1, 0,
                                                      [](const std::string& path) { flip_byte(path, -1); });
    EXPECT_EQ(one.landed, 0u);
    EXPECT_EQ(one.stats.pages_corrupt, 1u);
    // The last of four pages cut short in a middle chunk: three land.
    const PrefetchOutcome cut = prefetch_after_damage(way, HostLayout::kPageFirstDirect, 4, 3,
                                                      [&](const std::string& path) { ASSERT_EQ(::truncate(path.c_str(), middle), 0); });
    EXPECT_EQ(cut.landed, 3u);
    EXPECT_TRUE(cut.intact);
    EXPECT_EQ(cut.stats.pages_truncated, 1u);
    EXPECT_EQ(cut.stats.pages_corrupt, 0u);
  }
}

// ---- the staged path (backends that do not stream): checked while copied into the host page ----

TEST(CopyHashed, CopiesAndHashesAnyLengthAtAnyAlignment) {
  std::vector<uint8_t> src = random_host(geometry(HostLayout::kLayerFirst), 31);
  const size_t piece = kvp::storage::kCopyHashPieceBytes;
  for (const size_t bytes : {size_t(0), size_t(1), size_t(63), piece - 1, piece, piece + 1, 3 * piece + 65,
                             size_t(1) << 20}) {
    for (const size_t misalign : {size_t(0), size_t(1), size_t(33)}) {
      std::vector<uint8_t> dst(bytes + misalign + 1, 0xEE);
      kvp::storage::PayloadHash hash;
      kvp::storage::copy_hashed(dst.data() + misalign, src.data() + 7, bytes, &hash);
      kvp::util::stream_fence();
      EXPECT_EQ(hash.digest(), kvp::storage::PayloadHash::of(src.data() + 7, bytes)) << bytes << "+" << misalign;
      EXPECT_EQ(std::memcmp(dst.data() + misalign, src.data() + 7, bytes), 0) << bytes << "+" << misalign;
      EXPECT_EQ(dst[misalign + bytes], 0xEE) << "nothing written past the end";
      if (misalign > 0) {
        EXPECT_EQ(dst[misalign - 1], 0xEE) << "nothing written before the start";
      }
    }
  }
}

TEST(CopyHashed, ScatterWritesOnlyItsPageAndReturnsThePayloadsChecksum) {
  for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect}) {
    SCOPED_TRACE(kvp::host::host_layout_name(layout));
    const HostGeometry g = geometry(layout);
    const std::vector<uint8_t> source = random_host(g, 32);
    std::vector<uint8_t> host = random_host(g, 33);
    const std::vector<uint8_t> payload = payload_of(g, source, 1);
    const std::vector<uint8_t> page0 = payload_of(g, host, 0), page2 = payload_of(g, host, 2);
    EXPECT_EQ(kvp::storage::scatter_page_hashed(g, host.data(), 1, payload.data()),
              kvp::storage::PayloadHash::of(payload.data(), payload.size()));
    EXPECT_TRUE(payload_of(g, host, 1) == payload);
    EXPECT_TRUE(payload_of(g, host, 0) == page0);
    EXPECT_TRUE(payload_of(g, host, 2) == page2);
  }
}

TEST(StorageTierStaged, PagesLandIntactUnderEveryLayoutAloneOrWithTheCopier) {
  for (const Way way : {Way::kAlone, Way::kCopier}) {
    for (const HostLayout layout : {HostLayout::kLayerFirst, HostLayout::kPageFirst, HostLayout::kPageFirstDirect}) {
      for (const size_t pages : {size_t(1), size_t(4)}) {
        SCOPED_TRACE(std::string(way_name(way)) + " " + kvp::host::host_layout_name(layout) + " pages " +
                     std::to_string(pages));
        const PrefetchOutcome whole =
            prefetch_after_damage(way, layout, pages, pages, [](const std::string&) {}, /*unstreamed=*/true);
        EXPECT_EQ(whole.landed, pages);
        EXPECT_TRUE(whole.intact);
        EXPECT_EQ(whole.stats.prefetch_pages, pages);
        EXPECT_EQ(whole.stats.pages_corrupt + whole.stats.pages_truncated + whole.stats.read_failures, 0u);
      }
    }
  }
}

TEST(StorageTierStaged, AFlippedByteAtAnyPieceBoundaryIsNeverLoaded) {
  // The payload is hashed piece by piece as it is copied into the host page: a damaged byte
  // in the first, a middle or the last piece, or right at a piece's edge, still makes the
  // page a miss, and the prefetch ends before it (the earlier page stays loaded).
  // With the copier, the same in each of its segments.
  const off_t piece = off_t(kvp::storage::kCopyHashPieceBytes), header = off_t(kPageHeaderBytes);
  const off_t segment = off_t(kvp::storage::kPayloadSegmentBytes);
  for (const Way way : {Way::kAlone, Way::kCopier}) {
    for (const off_t at : {header, header + piece - 1, header + piece, header + 37 * piece + 5, header + segment - 1,
                           header + segment, header + 2 * segment + 3, off_t(-1)}) {
      const PrefetchOutcome o = prefetch_after_damage(
          way, HostLayout::kPageFirst, 4, 1, [&](const std::string& path) { flip_byte(path, at); }, true);
      EXPECT_EQ(o.landed, 1u) << way_name(way) << " " << at;
      EXPECT_TRUE(o.intact) << way_name(way) << " " << at;
      EXPECT_EQ(o.stats.pages_corrupt, 1u) << way_name(way) << " " << at;
      EXPECT_EQ(o.stats.prefetch_pages, 1u) << way_name(way) << " " << at;
    }
  }
  // A damaged header: refused before any payload byte is copied.
  const PrefetchOutcome head = prefetch_after_damage(
      Way::kAlone, HostLayout::kLayerFirst, 2, 0, [](const std::string& path) { flip_byte(path, 20); }, true);
  EXPECT_EQ(head.landed, 0u);
  EXPECT_EQ(head.stats.pages_corrupt + head.stats.pages_foreign, 1u);
}

TEST(StorageTierStaged, TheKeptStagingBufferNeverPassesOffAnEarlierPage) {
  // The staging buffer outlives each prefetch. Here it still holds the whole, valid page from
  // the first prefetch when the second reads the same page cut short: the short value must be
  // a miss, not the earlier bytes taken for the page.
  TempDir tmp;
  HostGeometry g = geometry(HostLayout::kLayerFirst);
  std::vector<uint8_t> host = random_host(g, 34);
  kvp::storage::StorageTier tier(std::make_unique<kvtest::UnstreamedStore>(open_store(tmp.path())), g, host.data());
  const std::vector<Digest> digests{digest_of(90)};
  tier.backup({0}, digests, fingerprint());
  tier.wait_idle();
  ASSERT_EQ(tier.stats().backup_pages, 1u);
  const auto prefetch_into = [&](int64_t page) {
    kvp::storage::StorageTier::StagedPrefetch staged = tier.stage_prefetch(digests, fingerprint(), 1);
    staged.pages[0] = page;
    const uint64_t id = tier.commit_prefetch(std::move(staged));
    tier.wait_idle();
    const size_t landed = tier.finish_prefetch(id);
    std::vector<int64_t> released;
    tier.take_released(&released);
    EXPECT_EQ(landed + released.size(), 1u);
    return landed;
  };
  ASSERT_EQ(prefetch_into(1), 1u);
  EXPECT_TRUE(payload_of(g, host, 1) == payload_of(g, host, 0));
  const off_t cut = off_t(kPageHeaderBytes + kvp::storage::page_payload_bytes(g) / 2);
  ASSERT_EQ(::truncate(path_of(tmp.path(), digests[0]).c_str(), cut), 0);
  EXPECT_EQ(prefetch_into(2), 0u);
  EXPECT_EQ(tier.stats().pages_truncated, 1u);
  EXPECT_EQ(tier.stats().prefetch_pages, 1u);
}

}  // namespace
