#include "storage/resident_mapping.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace kvp::storage {

const uint8_t* ResidentMapping::map(int fd, uint64_t size) {
  reset();
  if (size == 0 || size > SIZE_MAX) return nullptr;
  void* p = ::mmap(nullptr, size_t(size), PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  data_ = static_cast<uint8_t*>(p);
  size_ = size_t(size);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size_ + page - 1) / page);
  bool all = ::mincore(p, size_, resident.data()) == 0;
  for (size_t i = 0; all && i < resident.size(); ++i) all = (resident[i] & 1) != 0;
  if (!all) reset();
  return data_;
}

void ResidentMapping::reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace kvp::storage
