// The object behind the public `kvpool*` handle: the configuration, its plan,
// and every component the configuration asks for.
#pragma once

#include <cstdint>
#include <memory>

#include "alloc/device_pages.hpp"
#include "alloc/paged_allocator.hpp"
#include "alloc/swa_allocator.hpp"
#include "backend/backend.hpp"
#include "backend/device_fault.hpp"
#include "cache/mamba_cache.hpp"
#include "cache/prefix_cache.hpp"
#include "cache/swa_cache.hpp"
#include "capi/pool_lock.hpp"
#include "config/config.hpp"
#include "host/host_pool.hpp"
#include "host/host_transfer.hpp"
#include "mamba/mamba_pool.hpp"
#include "plan/plan.hpp"
#include "pool/kv_buffers.hpp"
#include "req/request_table.hpp"
#include "seq/sequences.hpp"
#include "storage/callback_store.hpp"

namespace kvp {

// Counters reported by kvpool_get_stats().
struct Counters {
  uint64_t alloc_calls = 0;
  uint64_t free_calls = 0;
  uint64_t alloc_failures = 0;
  uint64_t rejected_calls = 0;
};

// Counters only kvpool_metrics_text() reports (monotonic).
struct MetricCounters {
  uint64_t lookups = 0;             // kvseq_begin calls that succeeded
  uint64_t lookup_tokens = 0;       // ... their prompt tokens
  uint64_t device_hit_tokens = 0;   // ... found on the device (kvseq_info: prefix_hit - host_hit)
  uint64_t host_hit_tokens = 0;     // ... loaded back from the host tier (host_hit - storage_hit)
  uint64_t storage_hit_tokens = 0;  // ... that a storage prefetch had brought (storage_hit)
  uint64_t device_faults_cleared = 0;  // device faults forgotten by kvalloc_clear() (CUDA pools)
};

// pool.free_list "device": which copy of the KV free list is current. The host mirror
// (`paged`) serves kvseq_* / radix_*, the device lists the stream-ordered calls; each
// side catches up when it is next used (capi/device_mirror.hpp).
enum class ListHome : uint8_t {
  kBoth,    // identical
  kHost,    // kvseq_* / radix_* changed the host mirror since
  kDevice,  // device.h calls or host-array kvalloc_* changed the device lists since
};

}  // namespace kvp

struct kvpool {
  // kvpool_create_with_storage(): calls the backend table's destroy callback. Declared
  // first so that it runs last, once the storage tier's threads have stopped; armed
  // only when creation succeeded.
  kvp::storage::BackendRelease storage_backend_release;
  kvp::config::Config config;
  kvp::plan::Plan plan;
  // pool.thread_safe: the lock every entry point takes (capi/pool_lock.hpp); null without
  // the key, and then no call pays for it. Set before the handle is registered.
  std::unique_ptr<kvp::capi::PoolLock> lock;
  // kvpool_create_with_allocator(): the caller's memory callbacks (used by `backend`).
  kvpool_allocator allocator{};
  bool has_allocator = false;
  // kvpool_create_with_storage(): the engine's backend (storage.backend "custom").
  kvstore_backend storage_backend{};
  bool has_storage_backend = false;
  std::unique_ptr<kvp::backend::Backend> backend;
  // CUDA pools: the sticky device-side fault of device.h calls (null on CPU pools).
  std::unique_ptr<kvp::backend::DeviceFault> device_fault;
  // pool.free_list "device": the KV free list in device memory (alloc/device_pages.hpp).
  // `paged` then only supplies the geometry and the host-side argument checks.
  std::unique_ptr<kvp::alloc::DevicePages> device_pages;
  kvp::ListHome list_home = kvp::ListHome::kBoth;
  // Exactly one of the two KV allocators exists.
  std::unique_ptr<kvp::alloc::PagedAllocator> paged;
  std::unique_ptr<kvp::alloc::SwaAllocator> swa;
  std::unique_ptr<kvp::req::RequestTable> requests;
  std::unique_ptr<kvp::mamba::MambaPool> mamba;  // hybrid_linear only
  std::unique_ptr<kvp::pool::KvBuffers> kv;
  // host_cache: the host tier's memory and page allocator (lib/host/host_pool.hpp), and the
  // copies between it and `kv`. Declared after `kv` and in this order so that destruction
  // runs transfer, then host pool, then buffers, and the backend last (it frees the memory).
  std::unique_ptr<kvp::host::HostPool> host;
  std::unique_ptr<kvp::host::HostTransfer> host_transfer;
  // swa pools: a second host pool for the window layers' rows of window tails, and its copies.
  std::unique_ptr<kvp::host::HostPool> host_window;
  std::unique_ptr<kvp::host::HostTransfer> host_window_transfer;
  // After the host pool: destroyed first, its threads stop before the host memory goes.
  std::unique_ptr<kvp::storage::StorageTier> storage;
  std::unique_ptr<kvp::cache::PrefixCache> cache;  // radix prefix cache (mha, mla, nsa, double_sparse)
  std::unique_ptr<kvp::cache::MambaCache> mamba_cache;  // hybrid_linear radix cache (page_size 1, no extra buffer)
  std::unique_ptr<kvp::cache::SwaCache> swa_cache;      // swa radix cache
  std::unique_ptr<kvp::seq::Sequences> seqs;       // kvseq_* (Mamba/SwaSequences for hybrid_linear/swa)
  kvp::Counters counters;
  kvp::MetricCounters metric_counters;
  uint64_t backup_token = 0;  // 0 = no active snapshot
  // Set once a caller allocates KV slots directly (kvalloc_*): from then on the
  // self-check cannot attribute every held page to a request or the tree.
  bool direct_allocations = false;
  uint64_t next_backup_token = 1;
};

namespace kvp::capi {

// Builds every component of a pool whose config and plan are set.
Status build_pool(::kvpool* pool);

}  // namespace kvp::capi
