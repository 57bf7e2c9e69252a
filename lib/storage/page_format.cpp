#include "storage/page_format.hpp"

#include <cstring>

#include "storage/payload_hash.hpp"

namespace kvp::storage {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'P', 'O', 'O', 'L', 'P', 'G'};
// Field offsets (page_format.hpp's table).
constexpr size_t kVersionAt = 8, kHeaderBytesAt = 12, kFingerprintAt = 16, kDigestAt = 32, kPayloadBytesAt = 64,
                 kPayloadSumAt = 72, kReservedAt = 80, kHeaderSumAt = 88;

template <class T>
void put(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof(T));  // x86-64 and aarch64 Linux: little-endian, as the format says
}
template <class T>
T get(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

static_assert(kHeaderSumAt + 8 == kPageHeaderBytes, "the header checksum ends the header");

void seal_page(uint8_t* page, uint64_t payload_bytes, const Fingerprint& fingerprint, const cache::Digest& digest) {
  seal_page_hashed(page, payload_bytes, PayloadHash::of(page + kPageHeaderBytes, payload_bytes), fingerprint, digest);
}

void seal_page_hashed(uint8_t* page, uint64_t payload_bytes, uint64_t payload_hash, const Fingerprint& fingerprint,
                      const cache::Digest& digest) {
  std::memcpy(page, kMagic, sizeof(kMagic));
  put<uint32_t>(page + kVersionAt, kPageFormatVersion);
  put<uint32_t>(page + kHeaderBytesAt, uint32_t(kPageHeaderBytes));
  std::memcpy(page + kFingerprintAt, fingerprint.bytes.data(), fingerprint.bytes.size());
  std::memcpy(page + kDigestAt, digest.data(), digest.size());
  put<uint64_t>(page + kPayloadBytesAt, payload_bytes);
  put<uint64_t>(page + kPayloadSumAt, payload_hash);
  put<uint64_t>(page + kReservedAt, 0);
  put<uint64_t>(page + kHeaderSumAt, PayloadHash::xxh3(page, kHeaderSumAt));
}

const char* page_check_name(PageCheck check) {
  switch (check) {
    case PageCheck::kOk: return "ok";
    case PageCheck::kTruncated: return "truncated";
    case PageCheck::kCorrupt: return "corrupt";
    case PageCheck::kVersion: return "another format version";
    case PageCheck::kForeign: return "foreign";
    case PageCheck::kWrongKey: return "stored under another key";
  }
  return "unknown";
}

PageCheck check_page(const uint8_t* page, size_t length, const Fingerprint& fingerprint, const cache::Digest& digest,
                     uint64_t payload_bytes) {
  uint64_t expected = 0;
  const PageCheck header = check_page_header(page, length, fingerprint, digest, payload_bytes, &expected);
  if (header != PageCheck::kOk) return header;
  return PayloadHash::of(page + kPageHeaderBytes, payload_bytes) == expected ? PageCheck::kOk : PageCheck::kCorrupt;
}

PageCheck check_page_header(const uint8_t* page, size_t length, const Fingerprint& fingerprint,
                            const cache::Digest& digest, uint64_t payload_bytes, uint64_t* payload_hash) {
  if (length < kPageHeaderBytes) return PageCheck::kTruncated;
  if (std::memcmp(page, kMagic, sizeof(kMagic)) != 0) return PageCheck::kCorrupt;
  if (get<uint64_t>(page + kHeaderSumAt) != PayloadHash::xxh3(page, kHeaderSumAt)) return PageCheck::kCorrupt;
  if (get<uint32_t>(page + kVersionAt) != kPageFormatVersion ||
      get<uint32_t>(page + kHeaderBytesAt) != kPageHeaderBytes) {
    return PageCheck::kVersion;
  }
  if (std::memcmp(page + kFingerprintAt, fingerprint.bytes.data(), fingerprint.bytes.size()) != 0) {
    return PageCheck::kForeign;
  }
  if (std::memcmp(page + kDigestAt, digest.data(), digest.size()) != 0) return PageCheck::kWrongKey;
  if (get<uint64_t>(page + kPayloadBytesAt) != payload_bytes) return PageCheck::kForeign;
  if (length < kPageHeaderBytes + payload_bytes) return PageCheck::kTruncated;
  if (length > kPageHeaderBytes + payload_bytes) return PageCheck::kCorrupt;
  *payload_hash = get<uint64_t>(page + kPayloadSumAt);
  return PageCheck::kOk;
}

}  // namespace kvp::storage
