// The byte reader of the API fuzz targets: turns the fuzz input into small
// numbers. Reading past the end yields zeros (so every input decodes to some
// program), and `done()` tells the op loop to stop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvfuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool done() const { return pos_ >= size_; }

  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }

  uint16_t u16() {
    const uint16_t lo = u8();
    return static_cast<uint16_t>(lo | (u8() << 8));
  }

  uint32_t u32() {
    const uint32_t lo = u16();
    return lo | (static_cast<uint32_t>(u16()) << 16);
  }

  // A value in [0, n) (0 when n is 0); one byte for small n so inputs stay short.
  size_t below(size_t n) {
    if (n == 0) return 0;
    return n <= 256 ? u8() % n : u16() % n;
  }

  // True about one time in `one_in` (reads a byte): the decoder's "make this argument wrong" switch.
  bool chance(unsigned one_in) { return u8() % one_in == 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace kvfuzz
