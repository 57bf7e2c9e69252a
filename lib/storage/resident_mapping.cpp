#include "storage/resident_mapping.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <vector>

namespace kvp::storage {
namespace {

// mincore's answer, one byte per memory page: reused by each thread's later mappings, so
// that a checked read allocates nothing (2 KiB for an 8 MiB page file; it grows to the
// largest file the thread mapped). NULL when it cannot grow: the caller then does not map.
unsigned char* residency_buffer(size_t pages) {
  thread_local std::vector<unsigned char> buffer;
  if (buffer.size() < pages) {
    try {
      buffer.resize(pages);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  }
  return buffer.data();
}

}  // namespace

const uint8_t* ResidentMapping::map(int fd, uint64_t size) {
  reset();
  if (size == 0 || size > SIZE_MAX) return nullptr;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t pages = (size_t(size) + page - 1) / page;
  unsigned char* resident = residency_buffer(pages);
  if (resident == nullptr) return nullptr;
  void* p = ::mmap(nullptr, size_t(size), PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  data_ = static_cast<uint8_t*>(p);
  size_ = size_t(size);
  bool all = ::mincore(p, size_, resident) == 0;
  for (size_t i = 0; all && i < pages; ++i) all = (resident[i] & 1) != 0;
  if (!all) reset();
  return data_;
}

void ResidentMapping::reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kvp::storage
