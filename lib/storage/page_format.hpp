// The storage tier's page format: what every backend stores for one page.
//
//   offset  bytes  field
//        0      8  magic "KVPOOLPG"
//        8      4  format version (2)
//       12      4  header bytes (96)
//       16     16  model fingerprint (page_key.hpp)
//       32     32  the page's digest (its key without the namespace)
//       64      8  payload bytes
//       72      8  payload checksum: XXH3-64 of its 1 MiB segments' XXH3-64s
//                  (payload_hash.hpp; version 1: XXH3-64 of the payload)
//       80      8  reserved, 0
//       88      8  XXH3-64 of bytes [0, 88)
//       96      …  payload
//
// Integers are little-endian. The payload is layout independent: for each row
// kind the tier copies (host_geometry.hpp's parts, in order), for each tiered
// layer, the page's rows in token order (a per-page row kind: its one row), each
// row as the device holds it. So a page written from a page_first host tier
// loads into a layer_first one, and the stored bytes never depend on the host
// layout (SGLang's file backend stores raw host layout bytes, which a pool with
// another layout then misreads).
//
// A value is loaded only when every check passes: whole header, magic, header
// checksum, version, fingerprint, digest, payload length and payload checksum.
// A damaged, truncated or foreign value is a miss, never loaded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cache/page_hash.hpp"
#include "storage/page_key.hpp"

namespace kvp::storage {

constexpr uint32_t kPageFormatVersion = 2;
constexpr size_t kPageHeaderBytes = 96;

// Bytes of a stored page with `payload_bytes` of payload.
constexpr size_t stored_page_bytes(uint64_t payload_bytes) { return kPageHeaderBytes + payload_bytes; }

// Writes the header of a page whose payload the caller has already put at
// page + kPageHeaderBytes (payload_bytes long), checksums included.
void seal_page(uint8_t* page, uint64_t payload_bytes, const Fingerprint& fingerprint, const cache::Digest& digest);
// The same with the payload checksum already computed (gather_page_hashed()).
void seal_page_hashed(uint8_t* page, uint64_t payload_bytes, uint64_t payload_hash, const Fingerprint& fingerprint,
                      const cache::Digest& digest);

enum class PageCheck : uint8_t {
  kOk,
  kTruncated,  // shorter than its header or its payload says
  kCorrupt,    // bad magic, a checksum that does not match, or trailing bytes
  kVersion,    // another format version
  kForeign,    // written by a pool with another fingerprint, or a payload of another length
  kWrongKey,   // the header names another page than the key it was stored under
};
const char* page_check_name(PageCheck check);

// Checks a stored page of `length` bytes read under the key of (fingerprint,
// digest) for a pool whose pages carry `payload_bytes` of payload.
PageCheck check_page(const uint8_t* page, size_t length, const Fingerprint& fingerprint, const cache::Digest& digest,
                     uint64_t payload_bytes);
// Every check but the payload checksum, whose expected value goes to *payload_hash: the
// caller hashes the payload as it copies it (scatter_page_hashed()) and compares; a page
// whose hash differs is corrupt and must not be used.
PageCheck check_page_header(const uint8_t* page, size_t length, const Fingerprint& fingerprint,
                            const cache::Digest& digest, uint64_t payload_bytes, uint64_t* payload_hash);

}  // namespace kvp::storage
