// extern "C" entry points of pool.h and plan.h.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "backend/device.hpp"
#include "capi/errors.hpp"
#include "capi/handles.hpp"
#include "capi/pool_handle.hpp"
#include "capi/pool_lock.hpp"
#include "kvpool/plan.h"
#include "kvpool/pool.h"
#include "kvpool/storage.h"
#include "storage/callback_store.hpp"
#include "util/log.hpp"

namespace kvp::capi {
namespace {

using backend::MemoryInfo;

// Memory of the configured device, queried only when mem_fraction needs it.
Status device_memory_for(const config::Config& c, MemoryInfo* memory, const MemoryInfo** use) {
  *use = nullptr;
  if (!c.pool.mem_fraction) return Status::ok();
  if (c.pool.device == config::DeviceKind::kCuda) {
    KVPOOL_RETURN_IF_ERROR(backend::cuda_memory(c.pool.device_index, memory));
  } else {
    KVPOOL_RETURN_IF_ERROR(backend::host_memory(memory));
  }
  *use = memory;
  return Status::ok();
}

Status plan_from_json(const char* json, size_t json_len, config::Config* c, plan::Plan* p) {
  KVPOOL_RETURN_IF_ERROR(config::parse_config(json, json_len, c));
  MemoryInfo memory;
  const MemoryInfo* use = nullptr;
  KVPOOL_RETURN_IF_ERROR(device_memory_for(*c, &memory, &use));
  return plan::compute_plan(*c, use, p);
}

Status check_plan_out(const kvpool_plan_info* out) {
  if (out == nullptr) return Status::invalid("plan: out is NULL");
  if (out->struct_size < sizeof(kvpool_plan_info)) {
    return Status::invalid("plan: out->struct_size is " + std::to_string(out->struct_size) + ", expected at least " +
                           std::to_string(sizeof(kvpool_plan_info)) + " (use KVPOOL_PLAN_INFO_INIT)");
  }
  return Status::ok();
}

void write_plan(const plan::Plan& p, kvpool_plan_info* out) {
  kvpool_plan_info info = KVPOOL_PLAN_INFO_INIT;
  info.page_size = p.page_size;
  info.kv_bytes_per_token = p.kv_bytes_per_token;
  info.full_bytes_per_token = p.full_bytes_per_token;
  info.swa_bytes_per_token = p.swa_bytes_per_token;
  info.max_total_tokens = p.max_total_tokens;
  info.swa_tokens = p.swa_tokens;
  info.num_pages = p.num_pages;
  info.max_running_requests = p.max_running_requests;
  info.max_context_len = p.max_context_len;
  info.req_rows = p.req_rows;
  info.num_layers = p.num_layers;
  info.kv_heads_per_rank = p.kv_heads_per_rank;
  info.mamba_layers = p.mamba_layers;
  info.mamba_state_bytes = p.mamba_state_bytes;
  info.mamba_slots = p.mamba_slots;
  info.kv_memory_bytes = p.kv_memory_bytes;
  info.req_table_bytes = p.req_table_bytes;
  info.mamba_memory_bytes = p.mamba_memory_bytes;
  info.total_memory_bytes = p.total_memory_bytes;
  // Never write past what the caller's struct holds; keep its struct_size.
  const uint32_t caller_size = out->struct_size;
  std::memcpy(out, &info, sizeof(info));
  out->struct_size = caller_size;
}

Status check_allocator(const kvpool_allocator* a) {
  if (a->struct_size < sizeof(kvpool_allocator)) {
    return Status::invalid("allocator->struct_size is " + std::to_string(a->struct_size) + ", expected at least " +
                           std::to_string(sizeof(kvpool_allocator)) + " (sizeof(kvpool_allocator))");
  }
  if (a->alloc == nullptr || a->free == nullptr) return Status::invalid("allocator->alloc and ->free must not be NULL");
  return Status::ok();
}

// storage.backend "custom" exactly when the caller gave a backend table.
Status check_storage_backend(const config::StorageConfig& st, bool has_table) {
  const bool custom = st.enabled && st.backend == "custom";
  if (custom && !has_table) {
    return Status::config("$.storage.backend: got \"custom\", which only kvpool_create_with_storage() can serve "
                          "(it takes the kvstore_backend callbacks); expected \"file\", \"memcached\" or \"redis\" "
                          "here");
  }
  if (has_table && !st.enabled) {
    return Status::config("$.storage: missing, expected a storage section with \"backend\": \"custom\" "
                          "(kvpool_create_with_storage() was given a backend)");
  }
  if (has_table && !custom) {
    return Status::config("$.storage.backend: got \"" + st.backend + "\", expected \"custom\" "
                          "(kvpool_create_with_storage() was given a backend)");
  }
  return Status::ok();
}

// The info line of a new pool: what it is and how big (kvpool/log.h).
std::string describe_created(const ::kvpool* pool) {
  const config::Config& c = pool->config;
  const plan::Plan& p = pool->plan;
  std::string s = "pool created: model \"" + c.model.name + "\" (" + config::attention_name(c.model.attention) +
                  ", " + std::to_string(p.num_layers) + " layers) on " +
                  (c.pool.device == config::DeviceKind::kCuda ? "cuda:" + std::to_string(c.pool.device_index) : "cpu") +
                  ", " + std::to_string(p.max_total_tokens) + " tokens in pages of " + std::to_string(p.page_size) +
                  ", " + std::to_string(p.max_running_requests) + " requests of up to " +
                  std::to_string(p.max_context_len) + " tokens, " + std::to_string(p.total_memory_bytes) + " bytes";
  if (pool->host) s += ", host tier of " + std::to_string(pool->host->tokens()) + " tokens";
  if (c.storage.enabled) s += ", storage backend \"" + c.storage.backend + "\"";
  return s;
}

// Either extra (allocator, storage backend) may be NULL; both could be given together,
// but no public call takes both yet.
Status create_pool(const char* json, size_t json_len, kvpool** out, const kvpool_allocator* allocator = nullptr,
                   const kvstore_backend* storage_backend = nullptr) {
  if (out == nullptr) return Status::invalid("kvpool_create: out is NULL");
  *out = nullptr;
  if (json == nullptr) return Status::invalid("kvpool_create: json is NULL");
  auto pool = std::make_unique<::kvpool>();
  if (allocator != nullptr) {
    KVPOOL_RETURN_IF_ERROR(check_allocator(allocator));
    pool->allocator = *allocator;
    pool->has_allocator = true;
  }
  if (storage_backend != nullptr) {
    pool->storage_backend = *storage_backend;  // the fields this version knows (struct_size was checked)
    pool->storage_backend.struct_size = sizeof(kvstore_backend);
    pool->has_storage_backend = true;
  }
  KVPOOL_RETURN_IF_ERROR(plan_from_json(json, json_len, &pool->config, &pool->plan));
  KVPOOL_RETURN_IF_ERROR(check_storage_backend(pool->config.storage, pool->has_storage_backend));
  KVPOOL_RETURN_IF_ERROR(build_pool(pool.get()));
  if (pool->config.pool.thread_safe) pool->lock = std::make_unique<PoolLock>();  // before any other thread can see it
  register_handle(pool.get(), HandleKind::kPool);
  // From here on the pool owns the backend's `user`: kvpool_destroy() calls its destroy.
  if (pool->has_storage_backend) pool->storage_backend_release.arm(pool->storage_backend);
  KVPOOL_LOG(KVPOOL_LOG_INFO, describe_created(pool.get()));
  *out = pool.release();
  return Status::ok();
}

Status read_file(const char* path, std::string* text) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    const int err = errno;
    std::string message = std::string("cannot open \"") + path + "\": " + std::strerror(err);
    return err == ENOMEM ? Status(KVPOOL_ERR_HOST_MEMORY, std::move(message)) : Status::io(std::move(message));
  }
  if (file.peek() == std::char_traits<char>::eof()) {  // empty: `<<` would set failbit
    if (file.bad()) return Status::io(std::string("cannot read \"") + path + "\": " + std::strerror(errno));
    text->clear();
    return Status::ok();
  }
  std::ostringstream buffer;
  // `<<` catches what the copy throws (std::bad_alloc) and sets failbit; with failbit
  // in exceptions() it rethrows it instead, so that running out of memory is
  // KVPOOL_ERR_HOST_MEMORY and not a truncated configuration.
  buffer.exceptions(std::ios::failbit);
  buffer << file.rdbuf();
  if (file.bad()) return Status::io(std::string("cannot read \"") + path + "\": " + std::strerror(errno));
  *text = buffer.str();
  return Status::ok();
}

}  // namespace
}  // namespace kvp::capi

using kvp::Status;
using kvp::capi::guarded;
using kvp::capi::HandleKind;
using kvp::capi::is_live_handle;

extern "C" {

KVPOOL_API kvpool_status kvpool_create(const char* json, size_t json_len, kvpool** out) {
  return guarded("kvpool_create", [&] { return kvp::capi::create_pool(json, json_len, out); });
}

KVPOOL_API kvpool_status kvpool_create_with_allocator(const char* json, size_t json_len,
                                                      const kvpool_allocator* allocator, kvpool** out) {
  return guarded("kvpool_create_with_allocator",
                 [&] { return kvp::capi::create_pool(json, json_len, out, allocator); });
}

KVPOOL_API kvpool_status kvpool_create_with_storage(const char* json, size_t json_len, const kvstore_backend* backend,
                                                    kvpool** out) {
  return guarded("kvpool_create_with_storage", [&]() -> Status {
    if (out == nullptr) return Status::invalid("kvpool_create_with_storage: out is NULL");
    *out = nullptr;
    // Checked before anything else, so a bad table fails the same whatever the JSON says.
    const Status table = kvp::storage::check_backend_table(backend);
    if (!table.is_ok()) return Status(table.code(), "kvpool_create_with_storage: " + table.message());
    return kvp::capi::create_pool(json, json_len, out, nullptr, backend);
  });
}

KVPOOL_API kvpool_status kvpool_create_from_file(const char* path, kvpool** out) {
  return guarded("kvpool_create_from_file", [&]() -> Status {
    if (out == nullptr) return Status::invalid("kvpool_create_from_file: out is NULL");
    *out = nullptr;
    if (path == nullptr) return Status::invalid("kvpool_create_from_file: path is NULL");
    std::string text;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::read_file(path, &text));
    Status st = kvp::capi::create_pool(text.data(), text.size(), out);
    if (!st.is_ok()) return Status(st.code(), std::string(path) + ": " + st.message());
    return st;
  });
}

KVPOOL_API void kvpool_destroy(kvpool* pool) {
  if (pool == nullptr) return;
  // Only a live handle is deleted; a stale or foreign pointer is ignored. No lock, even on
  // a thread-safe pool: no other call may run on it now or later (the caller's duty).
  // A kvpool_allocator free callback that calls kvpool here finds the handle dead already.
  if (kvp::capi::unregister_handle(pool, HandleKind::kPool)) {
    KVPOOL_LOG(KVPOOL_LOG_INFO, "destroying pool: model \"" + pool->config.model.name + "\"");
    delete pool;
  }
}

KVPOOL_API const char* kvpool_backend(const kvpool* pool) {
  if (!is_live_handle(pool, HandleKind::kPool)) {
    kvp::capi::fail_noexcept(KVPOOL_ERR_INVALID_ARGUMENT, "kvpool_backend", ": pool is NULL or not a live kvpool handle");
    return nullptr;
  }
  return pool->config.pool.device == kvp::config::DeviceKind::kCuda ? "cuda" : "cpu";
}

KVPOOL_API int kvpool_cuda_device_count(void) {
  try {
    return kvp::backend::cuda_device_count();
  } catch (...) {
    return 0;
  }
}

KVPOOL_API kvpool_status kvpool_plan(const char* json, size_t json_len, kvpool_plan_info* out) {
  return guarded("kvpool_plan", [&]() -> Status {
    if (json == nullptr) return Status::invalid("kvpool_plan: json is NULL");
    KVPOOL_RETURN_IF_ERROR(kvp::capi::check_plan_out(out));
    kvp::config::Config c;
    kvp::plan::Plan p;
    KVPOOL_RETURN_IF_ERROR(kvp::capi::plan_from_json(json, json_len, &c, &p));
    kvp::capi::write_plan(p, out);
    return Status::ok();
  });
}

KVPOOL_API kvpool_status kvpool_get_plan(const kvpool* pool, kvpool_plan_info* out) {
  return guarded("kvpool_get_plan", [&]() -> Status {
    if (!is_live_handle(pool, HandleKind::kPool)) {
      return Status::invalid("kvpool_get_plan: pool is NULL or not a live kvpool handle");
    }
    KVPOOL_RETURN_IF_ERROR(kvp::capi::check_plan_out(out));
    kvp::capi::write_plan(pool->plan, out);
    return Status::ok();
  });
}

}  // extern "C"
