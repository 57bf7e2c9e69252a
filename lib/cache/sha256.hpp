// SHA-256 (FIPS 180-4), incremental. Used for the page-hash chain of KV
// events, which routers in other languages recompute bit for bit.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace kvp::cache {

class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256();
  void update(const void* data, size_t len);
  Digest finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace kvp::cache
