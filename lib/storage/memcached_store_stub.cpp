// The memcached backend when kvpool is built without libmemcached (CMake did
// not find `pkg-config libmemcached`): opening it says how to get it.
#include "storage/memcached_store.hpp"

namespace kvp::storage {

std::string memcached_part_key(const std::string& key, uint32_t index) {
  return key + ".p" + std::to_string(index);
}

Status open_memcached_store(const config::StorageConfig&, std::unique_ptr<BlobStore>* out) {
  out->reset();
  return Status::unsupported("kvpool was built without libmemcached (install libmemcached-dev and rebuild)");
}

}  // namespace kvp::storage
