#include "storage/backends.hpp"

namespace kvp::storage {

Status open_blob_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out) {
  if (cfg.backend == "file") return open_file_store(cfg, out);
  if (cfg.backend == "memcached") return open_memcached_store(cfg, out);
  if (cfg.backend == "redis") return open_redis_store(cfg, out);
  return Status::config("$.storage.backend: got \"" + cfg.backend + "\", expected \"file\", \"memcached\" or \"redis\"");
}

}  // namespace kvp::storage
