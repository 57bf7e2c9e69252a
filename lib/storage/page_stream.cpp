#include "storage/page_stream.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <new>
#include <thread>
#include <vector>

#include "storage/page_codec.hpp"
#include "storage/payload_hash.hpp"
#include "storage/segment_copier.hpp"
#include "util/stream_copy.hpp"

namespace kvp::storage {
namespace {

void hash_spans(PayloadHash* hash, const PayloadChunk& chunk) {
  for (int i = 0; i < chunk.count; ++i) hash->update(chunk.spans[i].iov_base, chunk.spans[i].iov_len);
}

// Hash a chunk, then write it: the write copies bytes the hash just brought into the cache.
class HashThenWrite final : public ChunkVisitor {
 public:
  HashThenWrite(PayloadHash* state, ValueWriter& writer) : state_(state), writer_(writer) {}
  bool visit(const PayloadChunk& chunk) override {
    hash_spans(state_, chunk);
    return writer_.write_at(kPageHeaderBytes + chunk.offset, chunk.spans, chunk.count);
  }

 private:
  PayloadHash* state_;
  ValueWriter& writer_;
};

// Write a chunk, hashed elsewhere (a SegmentCopier).
class WriteOnly final : public ChunkVisitor {
 public:
  explicit WriteOnly(ValueWriter& writer) : writer_(writer) {}
  bool visit(const PayloadChunk& chunk) override {
    return writer_.write_at(kPageHeaderBytes + chunk.offset, chunk.spans, chunk.count);
  }

 private:
  ValueWriter& writer_;
};

// Read a chunk into the host page, then hash it there while it is in the cache.
class ReadThenHash final : public ChunkVisitor {
 public:
  ReadThenHash(PayloadHash* state, ValueReader& reader) : state_(state), reader_(reader) {}
  bool visit(const PayloadChunk& chunk) override {
    size_t got = 0;
    if (!reader_.read_at(kPageHeaderBytes + chunk.offset, chunk.spans, chunk.count, &got)) {
      failed = true;
      return false;
    }
    if (got < chunk.bytes) {  // the value ended early: cut short under us
      short_read = true;
      return false;
    }
    hash_spans(state_, chunk);
    return true;
  }
  bool failed = false, short_read = false;

 private:
  PayloadHash* state_;
  ValueReader& reader_;
};

// Copy a chunk from the mapped value into the host page, hashing it as it goes
// (copy_hashed: each piece of the value right after its copy, with streaming stores, which
// made the copy faster than the kernel's copy of a plain read(): bench_storage_file).
class CopyThenHash final : public ChunkVisitor {
 public:
  CopyThenHash(PayloadHash* hash, const uint8_t* payload) : hash_(hash), payload_(payload) {}
  bool visit(const PayloadChunk& chunk) override {
    const uint8_t* src = payload_ + chunk.offset;
    for (int i = 0; i < chunk.count; ++i) {
      copy_hashed(static_cast<uint8_t*>(chunk.spans[i].iov_base), src, chunk.spans[i].iov_len, hash_);
      src += chunk.spans[i].iov_len;
    }
    return true;
  }

 private:
  PayloadHash* hash_;
  const uint8_t* payload_;
};

}  // namespace

// The page's chunks as for_each_payload_chunk visits them, recorded by begin(): the reading
// thread reads them in order and either thread hashes them in order from the same table.
//
// Who hashes: the hasher's thread, woken for each chunk that lands, hashes chunk i while the
// reading thread reads chunk i+1. When the thread falls behind (a loaded machine did not
// run it), the reading thread hashes the backlog itself between two reads, and after the
// last read it hashes whatever is left: it never sleeps
// waiting for a thread that is not running, and at worst does what it did without one.
// The XXH3 state, the table and the position are under hash_mu, held for one chunk at a
// time, so that the two take turns at chunk boundaries.
struct PayloadHasher::Shared {
  static constexpr std::chrono::microseconds kPoll{50};

  // Waiting politely in a polling loop.
  static void relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  // Waking the thread.
  std::mutex mu;
  std::condition_variable wake;
  bool stopping = false;  // under mu
  // Chunks landed, chunks hashed (copies of `next` for the checks without hash_mu), whether a
  // page is under way, and whether the thread is asleep. Sequentially consistent: landed()
  // stores `landed` then reads `sleeping`, the thread stores `sleeping` then reads `landed`,
  // so at least one of them sees the other's store and no wake-up is lost.
  std::atomic<size_t> landed{0}, hashed{0};
  std::atomic<bool> active{false}, sleeping{false};

  std::mutex hash_mu;
  PayloadHash state;
  std::vector<iovec> spans;         // every chunk's spans, back to back
  std::vector<size_t> first_span;   // chunk k: spans [first_span[k], first_span[k + 1])
  std::vector<uint64_t> offset;     // chunk k's offset in the payload
  std::vector<uint64_t> bytes;      // ... and length
  size_t next = 0;                  // the next chunk to hash
  size_t by_reader = 0;             // chunks of this page the reading thread hashed itself
  size_t sequential_pages = 0;      // pages to read without the thread (reading thread only)
  bool open = false;                // a page is under way (false: the thread must not touch it)
  std::thread thread;

  size_t chunks() const { return offset.size(); }

  // Hashes chunk `next` (hash_mu held).
  void hash_next() {
    for (size_t i = first_span[next]; i < first_span[next + 1]; ++i) {
      state.update(spans[i].iov_base, spans[i].iov_len);
    }
    hashed.store(++next);
  }

  bool has_work() const { return active.load() && landed.load() > hashed.load(); }

  // The hasher's thread: sleeps until chunks land, hashes them one lock hold at a time.
  // Between two chunks of a page it first polls for a while (about one chunk's read):
  // on a machine with a core to spare the next chunk lands within that, and neither side
  // then pays a wake-up (a system call, and an interrupt to the other core).
  void run() {
    for (;;) {
      if (active.load()) {
        const auto until = std::chrono::steady_clock::now() + kPoll;
        for (unsigned n = 1; !has_work(); ++n) {
          relax();
          if (n % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
        }
      }
      {
        std::unique_lock<std::mutex> lk(mu);
        sleeping.store(true);
        wake.wait(lk, [this] { return stopping || has_work(); });
        sleeping.store(false);
        if (stopping) return;
      }
      for (;;) {
        std::lock_guard<std::mutex> hl(hash_mu);
        if (!open || next >= landed.load()) break;
        hash_next();
      }
    }
  }
};

namespace {

// Records a page's chunks into a PayloadHasher's table.
class RecordChunks final : public ChunkVisitor {
 public:
  explicit RecordChunks(PayloadHasher::Shared& s) : s_(s) {}
  bool visit(const PayloadChunk& chunk) override {
    s_.offset.push_back(chunk.offset);
    s_.bytes.push_back(chunk.bytes);
    s_.spans.insert(s_.spans.end(), chunk.spans, chunk.spans + chunk.count);
    s_.first_span.push_back(s_.spans.size());
    return true;
  }

 private:
  PayloadHasher::Shared& s_;
};

}  // namespace

PayloadHasher::PayloadHasher() : shared_(std::make_unique<Shared>()) {
  Shared* s = shared_.get();
  s->thread = std::thread([s] { s->run(); });
}

PayloadHasher::~PayloadHasher() {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->stopping = true;
  }
  shared_->wake.notify_all();
  shared_->thread.join();
}

size_t PayloadHasher::begin(const host::HostGeometry& g, const uint8_t* host, int64_t page, uint64_t chunk_bytes) {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> hl(s.hash_mu);
  s.open = false;
  s.spans.clear();
  s.offset.clear();
  s.bytes.clear();
  s.first_span.assign(1, 0);
  RecordChunks record(s);
  // Only read through these spans (the cast serves the iovec type). May throw bad_alloc (the
  // first page of a geometry grows the table): the page is then not open, nothing changed.
  for_each_payload_chunk(g, const_cast<uint8_t*>(host), page, chunk_bytes, kMaxChunkSpans, record);
  s.state.reset();
  s.next = 0;
  s.by_reader = 0;
  s.hashed.store(0);
  s.landed.store(0);
  s.open = true;
  s.active.store(true);
  return s.chunks();
}

PayloadChunk PayloadHasher::chunk(size_t k) const {
  const Shared& s = *shared_;  // the table changes only in begin(), on the reading thread
  PayloadChunk c;
  c.offset = s.offset[k];
  c.bytes = s.bytes[k];
  c.spans = s.spans.data() + s.first_span[k];
  c.count = int(s.first_span[k + 1] - s.first_span[k]);
  return c;
}

void PayloadHasher::landed(size_t chunks) {
  Shared& s = *shared_;
  s.landed.store(chunks);
  if (s.sleeping.load()) {
    std::lock_guard<std::mutex> lk(s.mu);  // the thread is in its wait, or about to be: it sees this
    s.wake.notify_one();
  }
  // The thread is behind by more than the chunk it should be hashing now: hash the backlog
  // here, unless the thread is at it this very moment.
  if (chunks >= s.hashed.load() + kHelpAfterChunks && s.hash_mu.try_lock()) {
    std::lock_guard<std::mutex> hl(s.hash_mu, std::adopt_lock);
    while (s.next < chunks) {
      s.hash_next();
      ++s.by_reader;
    }
  }
}

uint64_t PayloadHasher::finish() {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> hl(s.hash_mu);  // waits at most for the chunk the thread is hashing
  while (s.next < s.chunks()) {
    s.hash_next();
    ++s.by_reader;
  }
  // The thread hashed too little of this page to be worth its hand-overs (the machine is
  // busy): the next pages are read, then hashed, here, and then the thread is tried again.
  if (s.by_reader * kLaggingShare > s.chunks()) s.sequential_pages = kSequentialPages;
  s.open = false;
  s.active.store(false);
  return s.state.digest();
}

bool PayloadHasher::keeping_up() {
  Shared& s = *shared_;
  if (s.sequential_pages == 0) return true;
  --s.sequential_pages;
  return false;
}

void PayloadHasher::cancel() {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> hl(s.hash_mu);
  s.open = false;
  s.active.store(false);
}

bool PayloadHasher::worthwhile() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return std::thread::hardware_concurrency() > 1;
  return CPU_COUNT(&cpus) > 1;
}

namespace {

// The pipelined read: chunk by chunk from the hasher's table into the host page, each handed
// to the hasher. False when a read failed (*failed) or came back short.
bool read_handing_over(PayloadHasher& hasher, size_t chunks, ValueReader& reader, bool* failed) {
  for (size_t k = 0; k < chunks; ++k) {
    const PayloadChunk c = hasher.chunk(k);
    size_t got = 0;
    if (!reader.read_at(kPageHeaderBytes + c.offset, c.spans, c.count, &got)) {
      *failed = true;
      return false;
    }
    if (got < c.bytes) return false;  // the value ended early: cut short under us
    hasher.landed(k + 1);
  }
  return true;
}

// The header, which holds the payload checksum, written last at offset 0 (the backend
// renames the value into place only after it).
bool write_header(const host::HostGeometry& g, uint64_t checksum, const Fingerprint& fp, const cache::Digest& digest,
                  ValueWriter& writer) {
  uint8_t header[kPageHeaderBytes];
  seal_page_hashed(header, page_payload_bytes(g), checksum, fp, digest);
  iovec span{header, sizeof(header)};
  return writer.write_at(0, &span, 1);
}

// write_stored_page with a copier and a staging buffer: the copier gathers the page into the
// buffer ahead, segment by segment, while this thread writes it out behind it in contiguous
// pieces: each piece the next segment, and the ones after it already gathered, up to
// kWriteChunkBytes (so the first write starts after one segment, not two). nullopt when the
// page could not be posted (nothing written).
std::optional<bool> write_gathered(const host::HostGeometry& g, const uint8_t* host, int64_t page,
                                   const Fingerprint& fp, const cache::Digest& digest, ValueWriter& writer,
                                   SegmentCopier& copier, uint8_t* staging) {
  const uint64_t payload = page_payload_bytes(g);
  try {
    copier.post(SegmentWork::kGather, g, const_cast<uint8_t*>(host), page, staging);
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
  bool written = true;
  try {  // a write that throws (a backend's code) must not leave the copier on the page
    const size_t segments = size_t((payload + kPayloadSegmentBytes - 1) / kPayloadSegmentBytes);
    const auto segment_end = [&](size_t s) { return std::min(uint64_t(s + 1) * kPayloadSegmentBytes, payload); };
    for (size_t s = 0; s < segments && written;) {
      const uint64_t at = uint64_t(s) * kPayloadSegmentBytes;
      copier.wait_segment(s);
      uint64_t end = segment_end(s++);
      while (s < segments && segment_end(s) - at <= kWriteChunkBytes && copier.segment_done(s)) end = segment_end(s++);
      iovec span{staging + at, size_t(end - at)};
      written = writer.write_at(kPageHeaderBytes + at, &span, 1);
    }
  } catch (...) {
    (void)copier.finish();
    throw;
  }
  const uint64_t checksum = copier.finish();
  return written && write_header(g, checksum, fp, digest, writer);
}

}  // namespace

bool write_stored_page(const host::HostGeometry& g, const uint8_t* host, int64_t page, const Fingerprint& fp,
                       const cache::Digest& digest, ValueWriter& writer, SegmentCopier* copier, uint8_t* staging) {
  if (copier != nullptr && staging != nullptr && page_payload_bytes(g) >= kSegmentCopyFrom &&
      has_short_runs(g)) {
    if (const std::optional<bool> written = write_gathered(g, host, page, fp, digest, writer, *copier, staging)) {
      return *written;
    }
  }
  if (copier != nullptr && page_payload_bytes(g) >= kSegmentCopyFrom) {
    try {
      copier->post(SegmentWork::kHash, g, const_cast<uint8_t*>(host), page, nullptr);  // kHash only reads
    } catch (const std::bad_alloc&) {
      copier = nullptr;  // no room for the segments' digests: hash here, as the writes go
    }
  }
  if (copier != nullptr) {
    // The copier hashes the page from its first segment while this thread writes it out; then
    // this thread hashes what the copier has not reached (finish). A write that throws (a
    // backend's code) must not leave the copier on the page.
    WriteOnly visitor(writer);
    bool written = false;
    try {
      written = for_each_payload_chunk(g, const_cast<uint8_t*>(host), page, kWriteChunkBytes, kMaxChunkSpans, visitor);
    } catch (...) {
      (void)copier->finish();
      throw;
    }
    const uint64_t checksum = copier->finish();
    return written && write_header(g, checksum, fp, digest, writer);
  }
  PayloadHash state;
  HashThenWrite visitor(&state, writer);
  // The visitor only reads the host spans: the cast serves the iovec type.
  if (!for_each_payload_chunk(g, const_cast<uint8_t*>(host), page, kWriteChunkBytes, kMaxChunkSpans, visitor)) {
    return false;
  }
  return write_header(g, state.digest(), fp, digest, writer);
}

PageCheck read_stored_page(const host::HostGeometry& g, uint8_t* host, int64_t page, const Fingerprint& fp,
                           const cache::Digest& digest, ValueReader& reader, bool* read_error,
                           PayloadHasher* hasher, SegmentCopier* copier) {
  *read_error = false;
  const uint64_t payload = page_payload_bytes(g), length = reader.size();
  if (length < kPageHeaderBytes) return PageCheck::kTruncated;
  uint8_t header[kPageHeaderBytes];
  iovec span{header, sizeof(header)};
  size_t got = 0;
  if (!reader.read_at(0, &span, 1, &got)) {
    *read_error = true;
    return PageCheck::kTruncated;
  }
  if (got < kPageHeaderBytes) return PageCheck::kTruncated;
  uint64_t expected = 0;
  const PageCheck head = check_page_header(header, size_t(length), fp, digest, payload, &expected);
  if (head != PageCheck::kOk) return head;
  // A cached file shared with a copier: two threads copy and hash it (segment_copier.hpp).
  if (copier != nullptr && payload >= kSegmentCopyFrom) {
    if (const uint8_t* value = reader.mapped()) {
      try {
        return copier->copy(g, host, page, value + kPageHeaderBytes) == expected ? PageCheck::kOk
                                                                                 : PageCheck::kCorrupt;
      } catch (const std::bad_alloc&) {  // no room for the segments' digests: nothing copied, go on alone
      }
    }
  }
  // With a hasher keeping up (a core to spare), hashing beside preadv beats copying from a
  // mapping and hashing on this thread (bench_storage_file on a 16-CPU host: 89-96 % against
  // 65-90 % of a plain read for 8 pages); without one the mapping is the faster way.
  const bool pipelined = hasher != nullptr && payload >= kPipelinedReadFrom && hasher->keeping_up();
  if (!pipelined && payload >= kMappedReadFrom) {
    // check_page_header checked that the value holds exactly the header and the payload.
    if (const uint8_t* value = reader.mapped()) {
      PayloadHash hash;
      CopyThenHash visitor(&hash, value + kPageHeaderBytes);
      for_each_payload_chunk(g, host, page, kReadChunkBytes, kMaxChunkSpans, visitor);
      util::stream_fence();  // the page's streamed stores before whoever reads it next
      return hash.digest() == expected ? PageCheck::kOk : PageCheck::kCorrupt;
    }
  }
  if (pipelined) {
    size_t chunks = 0;
    try {
      chunks = hasher->begin(g, host, page, kReadChunkBytes);
    } catch (const std::bad_alloc&) {
      hasher = nullptr;  // no room for the chunk table: read, then hash, here
    }
    if (hasher != nullptr) {
      bool read = false;
      try {  // a reader that throws must not leave the hasher on a page its caller gives away
        read = read_handing_over(*hasher, chunks, reader, read_error);
      } catch (...) {
        hasher->cancel();
        throw;
      }
      if (!read) {
        hasher->cancel();  // the host page is the caller's again only once the hasher let go of it
        return PageCheck::kTruncated;
      }
      return hasher->finish() == expected ? PageCheck::kOk : PageCheck::kCorrupt;
    }
  }
  PayloadHash state;
  ReadThenHash visitor(&state, reader);
  if (!for_each_payload_chunk(g, host, page, kReadChunkBytes, kMaxChunkSpans, visitor)) {
    *read_error = visitor.failed;
    return PageCheck::kTruncated;
  }
  return state.digest() == expected ? PageCheck::kOk : PageCheck::kCorrupt;
}

}  // namespace kvp::storage
