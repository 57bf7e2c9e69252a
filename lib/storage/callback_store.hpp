// The storage tier's `custom` backend: a BlobStore over the engine's C callback
// table (kvstore_backend, storage.h; kvpool_create_with_storage()).
//
// - Batches are handed to the callbacks as they come, split into calls of at most
//   kCallbackBatch keys (storage.h promises that bound); keys are passed as the
//   NUL-terminated strings of the std::string keys, valid during the call only.
// - Each result is written KVSTORE_ERROR before the call, so a callback that leaves
//   one unset, or writes a value that is no kvstore_result, fails that key. A put
//   answering KVSTORE_MISS is an error too. exists_prefix answers above n are taken as n.
// - Counted in BlobStats as the other backends do: puts / put_bytes (results
//   KVSTORE_OK; the table cannot say whether the key existed, so put_existing stays
//   0), put_errors, gets, get_hits / get_bytes (the bytes copied, at most the
//   capacity), get_misses, get_errors, exists_calls. The counters for servers, files
//   and evictions stay 0: the engine's backend keeps its own.
// - No method allocates or throws. The callbacks are the engine's: they must honour
//   the contract of storage.h (thread-safe, bounded, no re-entry into kvpool).
// - The table's destroy callback is not the store's business: BackendRelease
//   (held by the pool handle) calls it once the pool is done with everything.
#pragma once

#include <cstddef>
#include <memory>

#include "kvpool/storage.h"
#include "storage/blob_store.hpp"
#include "util/status.hpp"

namespace kvp::storage {

// The most keys one callback receives.
constexpr size_t kCallbackBatch = 128;

// KVPOOL_ERR_INVALID_ARGUMENT when `table` is NULL, its struct_size is smaller than
// sizeof(kvstore_backend) or put, get or exists_prefix is NULL; the message names
// the field. Calls nothing.
Status check_backend_table(const kvstore_backend* table);

// A store over a table check_backend_table accepted (copied). describe() is "custom".
std::unique_ptr<BlobStore> make_callback_store(const kvstore_backend& table);

// Calls the table's destroy callback (if any) once, when it is itself destroyed,
// provided arm() was called: the pool handle arms it only when creation succeeded,
// so a failed kvpool_create_with_storage() leaves `user` to the caller.
class BackendRelease {
 public:
  BackendRelease() = default;
  ~BackendRelease();
  BackendRelease(const BackendRelease&) = delete;
  BackendRelease& operator=(const BackendRelease&) = delete;

  void arm(const kvstore_backend& table) {
    destroy_ = table.destroy;
    user_ = table.user;
  }

 private:
  void (*destroy_)(void*) = nullptr;
  void* user_ = nullptr;
};

}  // namespace kvp::storage
