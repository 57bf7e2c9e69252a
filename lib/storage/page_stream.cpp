#include "storage/page_stream.hpp"

#include <xxhash.h>

#include <memory>
#include <new>

#include "storage/page_codec.hpp"

namespace kvp::storage {
namespace {

struct StateDeleter {
  void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};
using HashState = std::unique_ptr<XXH3_state_t, StateDeleter>;

HashState new_hash() {
  HashState state(XXH3_createState());
  if (!state) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  return state;
}

void hash_spans(XXH3_state_t* state, const PayloadChunk& chunk) {
  for (int i = 0; i < chunk.count; ++i) XXH3_64bits_update(state, chunk.spans[i].iov_base, chunk.spans[i].iov_len);
}

// Hash a chunk, then write it: the write copies bytes the hash just brought into the cache.
class HashThenWrite final : public ChunkVisitor {
 public:
  HashThenWrite(XXH3_state_t* state, ValueWriter& writer) : state_(state), writer_(writer) {}
  bool visit(const PayloadChunk& chunk) override {
    hash_spans(state_, chunk);
    return writer_.write_at(kPageHeaderBytes + chunk.offset, chunk.spans, chunk.count);
  }

 private:
  XXH3_state_t* state_;
  ValueWriter& writer_;
};

// Read a chunk into the host page, then hash it there while it is in the cache.
class ReadThenHash final : public ChunkVisitor {
 public:
  ReadThenHash(XXH3_state_t* state, ValueReader& reader) : state_(state), reader_(reader) {}
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
  XXH3_state_t* state_;
  ValueReader& reader_;
};

}  // namespace

bool write_stored_page(const host::HostGeometry& g, const uint8_t* host, int64_t page, const Fingerprint& fp,
                       const cache::Digest& digest, ValueWriter& writer) {
  HashState state = new_hash();
  HashThenWrite visitor(state.get(), writer);
  // The visitor only reads the host spans: the cast serves the iovec type.
  if (!for_each_payload_chunk(g, const_cast<uint8_t*>(host), page, kWriteChunkBytes, kMaxChunkSpans, visitor)) {
    return false;
  }
  uint8_t header[kPageHeaderBytes];
  seal_page_hashed(header, page_payload_bytes(g), XXH3_64bits_digest(state.get()), fp, digest);
  iovec span{header, sizeof(header)};
  return writer.write_at(0, &span, 1);
}

PageCheck read_stored_page(const host::HostGeometry& g, uint8_t* host, int64_t page, const Fingerprint& fp,
                           const cache::Digest& digest, ValueReader& reader, bool* read_error) {
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
  HashState state = new_hash();
  ReadThenHash visitor(state.get(), reader);
  if (!for_each_payload_chunk(g, host, page, kReadChunkBytes, kMaxChunkSpans, visitor)) {
    *read_error = visitor.failed;
    return PageCheck::kTruncated;
  }
  return XXH3_64bits_digest(state.get()) == expected ? PageCheck::kOk : PageCheck::kCorrupt;
}

}  // namespace kvp::storage
