// A read-only mapping of a whole file, made only when every page of the file is in the
// page cache (mincore), for the file backend's checked reads (page_stream.cpp).
//
// Why only then: a mapping turns an I/O error into SIGBUS at the access instead of an
// error from read(); with the pages resident there is no I/O to fail, and a read that
// needs the disk is dominated by the disk anyway (it takes the preadv path). What a
// mapping cannot survive is the file being truncated in place while it is copied: the
// file store never does that (values are written to a temporary name and renamed, and
// removed by unlink, which leaves an open mapping intact); docs/storage-file.md says so.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvp::storage {

class ResidentMapping {
 public:
  ResidentMapping() = default;
  ResidentMapping(const ResidentMapping&) = delete;
  ResidentMapping& operator=(const ResidentMapping&) = delete;
  ~ResidentMapping() { reset(); }

  // Maps the first `size` bytes of `fd` (size > 0) when all of them are resident; returns
  // the mapping or NULL (nothing is mapped then). Allocates nothing once the calling thread
  // has mapped a file this large (mincore's answer goes to a buffer of the thread's).
  const uint8_t* map(int fd, uint64_t size);
  const uint8_t* data() const { return data_; }
  void reset();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvp::storage
