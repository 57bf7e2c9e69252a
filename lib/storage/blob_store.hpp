// The storage tier's backends (L3, SGLANG_SEMANTICS §5.4): stores of immutable
// byte values under short ASCII keys. A backend knows nothing of pages, models
// or layouts: the page format (page_format.hpp) puts a header and checksums
// around each page, and page keys (page_key.hpp) name them, so every backend
// stores and returns opaque bytes and every check happens above it, once.
//
// Contract shared by every backend (file, memcached, redis, the C callback
// table):
// - Keys are 1..120 characters of [0-9a-z-] (page_key.hpp makes them).
// - A value, once stored under a key, is never replaced by a different one:
//   the key is a hash of the page's tokens and the model, so the same key
//   always means the same bytes. put() may skip a key that already exists
//   (counted as put_existing) and report it kOk.
// - Every method may be called from several threads at once (the backup and
//   the prefetch threads of one pool, and any number of pools in the process).
// - No method throws, none blocks longer than the backend's timeout per server
//   round trip, and a failure of one key never hides the results of the others.
// - A key that cannot be read whole (missing, a part lost, a server down, a
//   timeout) is a miss or an error, never a short value passed off as whole.
#pragma once

#include <sys/uio.h>  // iovec: the spans of the streamed calls

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.hpp"

namespace kvp::storage {

// The outcome of one key of a batch.
enum class BlobResult : uint8_t {
  kOk,     // stored / read whole
  kMiss,   // get: no value under the key
  kError,  // the backend failed for this key (I/O error, server down, timeout); counted in BlobStats
};

// Counters of a backend since it was opened (monotonic). Each failure is counted
// once, in the most specific counter that applies.
struct BlobStats {
  uint64_t puts = 0;            // values stored (put_existing not included)
  uint64_t put_bytes = 0;       // bytes of those values
  uint64_t put_existing = 0;    // puts skipped: the key already held a value
  uint64_t put_errors = 0;      // puts that failed (any cause)
  uint64_t gets = 0;            // keys asked for by get()
  uint64_t get_hits = 0;        // ... read whole
  uint64_t get_bytes = 0;       // bytes of those values
  uint64_t get_misses = 0;      // ... with no value
  uint64_t get_errors = 0;      // ... that failed (any cause)
  uint64_t exists_calls = 0;    // exists_prefix() calls
  uint64_t timeouts = 0;        // operations that waited a whole timeout for a server
  uint64_t server_errors = 0;   // connection refused or reset, protocol or server-side errors
  uint64_t io_errors = 0;       // file system errors (ENOSPC, EIO, ...)
  uint64_t partial_values = 0;  // split values with a part missing or not matching its manifest (read as misses)
  uint64_t evicted = 0;         // values the backend dropped to stay within its size bound
  uint64_t evicted_bytes = 0;
  uint64_t servers_ejected = 0;  // times a server was taken out of the rotation after failures
};

// The streamed calls (put_streamed / get_streamed): a value moves in pieces
// straight between the caller's memory (a host-tier page, whose bytes are not
// contiguous in the stored order under most layouts) and the backend, without a
// staging copy of the whole value. Each piece is a list of spans laid back to
// back in the value.

// Where a producer writes the value of put_streamed().
class ValueWriter {
 public:
  virtual ~ValueWriter() = default;
  // Writes the spans back to back at byte `offset` of the value; false when it
  // failed (the put then fails, whatever the producer does next).
  virtual bool write_at(uint64_t offset, const iovec* spans, int count) = 0;
};

// Makes one value through a writer: every byte exactly once, in any order.
class ValueProducer {
 public:
  virtual ~ValueProducer() = default;
  // False to abandon the value (nothing is stored).
  virtual bool produce(ValueWriter& writer) = 0;
};

// What a consumer of get_streamed() reads the value through.
class ValueReader {
 public:
  virtual ~ValueReader() = default;
  // The value's full length.
  virtual uint64_t size() const = 0;
  // Reads bytes from `offset` into the spans, back to back; *got = bytes read,
  // fewer than asked when the value ends first (it may have been cut short under
  // the reader). False on a read error (the get is then kError).
  virtual bool read_at(uint64_t offset, const iovec* spans, int count, size_t* got) = 0;
  // The whole value (size() bytes) readable in memory until the reader is destroyed, or
  // NULL when the reader cannot offer that cheaply and safely (then read_at is the way).
  // A file reader maps a file whose pages are all in the page cache: copying from the
  // mapping lets the caller check each piece while it is in the cache.
  virtual const uint8_t* mapped() { return nullptr; }
};

// Reads one value through a reader: as much of it as it wants, in any order.
class ValueConsumer {
 public:
  virtual ~ValueConsumer() = default;
  virtual void consume(ValueReader& reader) = 0;
};

class BlobStore {
 public:
  virtual ~BlobStore() = default;

  // What and where, for messages and stats: "file:/var/cache/kvpool",
  // "memcached:10.0.0.1:11211,10.0.0.2:11211", "redis:10.0.0.1:6379".
  virtual std::string describe() const = 0;

  // Stores values[i] (sizes[i] bytes) under keys[i] for i < n; out[i] says how each went.
  virtual void put(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
                   BlobResult* out) = 0;

  // Reads the value of keys[i] into dst[i], which has room for capacity[i] bytes.
  // out[i] = kOk with sizes[i] = the value's full length; when that exceeds
  // capacity[i] only capacity[i] bytes were copied (the caller, which knows the
  // length a page must have, treats any other length as a damaged value).
  virtual void get(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
                   BlobResult* out) = 0;

  // How many of keys[0..n) exist, counted from the start up to the first that
  // does not (SGLang's batch_exists); a key the backend cannot ask about counts
  // as missing.
  virtual size_t exists_prefix(const std::string* keys, size_t n) = 0;

  // Removes every value this store holds (the file backend: the page files of
  // its directory; memcached: flush_all; redis: the keys under kvpool's prefix).
  virtual Status clear() = 0;

  virtual BlobStats stats() const = 0;

  // ---- optional: streamed values (the file backend) ----
  // Backends that return true here also take put_streamed() / get_streamed();
  // the others are used through put() / get() and a staging buffer (memcached
  // and redis send a batch of values in one round trip, which needs them whole).
  virtual bool streams() const { return false; }
  // Stores a value of `size` bytes that `producer` writes under `key`, counted as
  // one put. A key that already holds a value of `size` bytes is skipped without
  // calling the producer (put_existing, kOk). When the producer abandons the
  // value, writes fewer than `size` bytes or a write fails, nothing is stored
  // (kError).
  virtual BlobResult put_streamed(const std::string& key, uint64_t size, ValueProducer& producer) {
    (void)key, (void)size, (void)producer;
    return BlobResult::kError;
  }
  // Lets `consumer` read the value of `key`, counted as one get: kMiss when there
  // is none (the consumer is not called), kError when it cannot be opened or a
  // read failed, else kOk with *size = the value's full length. Whether the bytes
  // make sense is the consumer's business.
  virtual BlobResult get_streamed(const std::string& key, ValueConsumer& consumer, uint64_t* size) {
    (void)key, (void)consumer;
    *size = 0;
    return BlobResult::kError;
  }
};

}  // namespace kvp::storage
