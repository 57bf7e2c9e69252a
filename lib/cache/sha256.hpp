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

  // The digest of one short message, padded in place (no incremental buffering).
  static Digest of(const void* data, size_t len);
  // The same for a message already in a caller's buffer of `cap` bytes, which is
  // padded where it lies (no copy): needs cap >= padded_size(len).
  static Digest of_buffer(uint8_t* msg, size_t len, size_t cap);
  static constexpr size_t padded_size(size_t len) { return (len + 9 + 63) / 64 * 64; }
  // A chain of messages, each the previous digest followed by `tail_len` bytes:
  // out[i] = SHA-256(out[i - 1] || tails[i * tail_len, (i + 1) * tail_len)), with
  // out[-1] = `first`. On the hardware path the previous digest never leaves the
  // registers (the chain is bound by the rounds' latency; nothing else waits on it).
  static void chain(const Digest& first, const uint8_t* tails, size_t tail_len, size_t count, Digest* out);

  // Whether compress() uses the CPU's SHA extensions (x86 SHA-NI; detected once).
  static bool hardware();
  // Tests: turn the hardware path off (and on again, where the CPU has it).
  static void allow_hardware(bool on);

 private:
  void compress(const uint8_t* block);
  void compress_portable(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace kvp::cache
