// A storage-tier thread's staging memory for backends that do not stream (memcached,
// redis, callbacks): whole stored pages go through it between the backend and the host
// tier. Kept from one job to the next: a vector per job cost, for each 8 MiB page, a
// memset of the page and 2,048 page faults on every prefetch (bench_storage_file's staged
// tier_read rows), more than the copy and the check together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace kvp::storage {

class StagingBuffer {
 public:
  // At least `bytes` bytes (their contents left as they were), or NULL when the buffer must
  // grow and the memory cannot be had (the old buffer is gone then). The buffer only grows:
  // it holds what the largest batch of this thread needed, for the tier's life.
  uint8_t* reserve(size_t bytes) {
    if (bytes > size_) {
      data_.reset();
      size_ = 0;
      data_.reset(new (std::nothrow) uint8_t[bytes]);  // not value-initialised: no memset
      if (data_ == nullptr) return nullptr;
      size_ = bytes;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

}  // namespace kvp::storage
