// Opening the storage tier's backends (docs/storage.md). Each returns a precise
// status (KVPOOL_ERR_CONFIG for a directory or servers that cannot be used,
// KVPOOL_ERR_UNSUPPORTED when kvpool was built without the backend's client library).
#pragma once

#include <memory>

#include "config/config.hpp"
#include "storage/blob_store.hpp"
#include "util/status.hpp"

namespace kvp::storage {

Status open_file_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);
Status open_memcached_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);
Status open_redis_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);

// The backend cfg.backend names.
Status open_blob_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);

}  // namespace kvp::storage
