// The redis backend of a build without hiredis (lib/CMakeLists.txt compiles
// this file when pkg-config finds no hiredis).
#include "storage/redis_store.hpp"

namespace kvp::storage {

Status open_redis_store(const config::StorageConfig& /*cfg*/, std::unique_ptr<BlobStore>* /*out*/) {
  return Status::unsupported("storage backend \"redis\": kvpool was built without hiredis (install libhiredis-dev "
                             "and rebuild)");
}

}  // namespace kvp::storage
