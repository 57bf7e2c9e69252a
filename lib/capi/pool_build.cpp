// Builds the components a configuration asks for, in dependency order.
#include "capi/pool_handle.hpp"
#include "backend/device.hpp"
#include "host/host_geometry.hpp"
#include "seq/mamba_sequences.hpp"
#include "seq/swa_sequences.hpp"
#include "storage/backends.hpp"
#include "storage/callback_store.hpp"
#include "storage/page_key.hpp"

namespace kvp::capi {
namespace {

Status make_backend(const config::Config& c, std::unique_ptr<backend::Backend>* out) {
  if (c.pool.device == config::DeviceKind::kCpu) {
    *out = backend::make_cpu_backend();
    return Status::ok();
  }
  KVPOOL_RETURN_IF_ERROR(backend::cuda_check_device(c.pool.device_index));
  return backend::make_cuda_backend(c.pool.device_index, out);
}

mamba::MambaShape mamba_shape(const config::Config& c, const plan::Plan& p) {
  mamba::MambaShape s;
  for (int l = c.parallel.start_layer; l <= c.parallel.end_layer; ++l) {
    if (!c.model.layer_is_full[static_cast<size_t>(l)]) s.layers.push_back(l);
  }
  s.slots = static_cast<int64_t>(p.mamba_slots);
  s.conv_bytes = p.mamba_conv_bytes;
  s.ssm_bytes = p.mamba_ssm_bytes;
  s.draft_tokens = c.pool.mamba_spec_draft_tokens;
  s.spec_slots = p.max_running_requests;
  s.ping_pong = c.pool.mamba_extra_buffer;
  return s;
}

// host_cache: the host tier sized from the device pool, and its transfer engine.
Status build_host_tier(::kvpool* pool) {
  const config::Config& c = pool->config;
  host::HostGeometry g;
  if (!host::parse_host_layout(c.host_cache.layout, &g.layout)) {
    return Status::config("$.host_cache.layout: got \"" + c.host_cache.layout + "\", expected a host layout");
  }
  g.page_size = pool->plan.page_size;
  KVPOOL_RETURN_IF_ERROR(pool->kv->tier_parts(&g.parts, &g.layers));
  backend::MemoryInfo memory;
  KVPOOL_RETURN_IF_ERROR(backend::host_memory(&memory));
  KVPOOL_RETURN_IF_ERROR(host::HostPool::make(pool->backend.get(), c.host_cache, pool->plan.max_total_tokens,
                                              std::move(g), memory.free_bytes, &pool->host));
  if (c.model.attention == config::Attention::kSWA) {
    // The window layers' rows of window tails: a second pool with as many host tokens as the
    // first (a node's window tail is at most its tokens), sized by token count, not bytes.
    host::HostGeometry w;
    w.layout = pool->host->geometry().layout;
    w.page_size = pool->plan.page_size;
    KVPOOL_RETURN_IF_ERROR(pool->kv->tier_parts(&w.parts, &w.layers, true));
    config::HostCacheConfig window_cfg = c.host_cache;
    window_cfg.ratio = 1;
    window_cfg.size_bytes = 0;
    const uint64_t used = pool->host->geometry().bytes;
    KVPOOL_RETURN_IF_ERROR(host::HostPool::make(pool->backend.get(), window_cfg, pool->host->tokens() - 1, std::move(w),
                                                memory.free_bytes > used ? memory.free_bytes - used : 0,
                                                &pool->host_window));
  }
  if (c.pool.device == config::DeviceKind::kCuda) {
    host::CudaTransferOptions options;
    options.direct = c.host_cache.io_backend == "direct";
    KVPOOL_RETURN_IF_ERROR(host::make_cuda_transfer(pool->host.get(), c.pool.device_index, options, &pool->host_transfer));
    if (pool->host_window) {
      KVPOOL_RETURN_IF_ERROR(
          host::make_cuda_transfer(pool->host_window.get(), c.pool.device_index, options, &pool->host_window_transfer));
    }
    return Status::ok();
  }
  const bool defer = c.host_cache.defer_completion;
  pool->host_transfer = host::make_cpu_transfer(pool->host.get(), defer);
  if (pool->host_window) pool->host_window_transfer = host::make_cpu_transfer(pool->host_window.get(), defer);
  return Status::ok();
}

// storage: the backend, the tier's threads over the host pool, and the cache's flows.
Status build_storage_tier(::kvpool* pool) {
  const config::Config& c = pool->config;
  std::unique_ptr<storage::BlobStore> store;
  if (pool->has_storage_backend) {  // "custom": the engine's callbacks (kvpool_create_with_storage())
    store = storage::make_callback_store(pool->storage_backend);
  } else {
    KVPOOL_RETURN_IF_ERROR(storage::open_blob_store(c.storage, &store));
  }
  const host::HostGeometry& g = pool->host->geometry();
  pool->storage = std::make_unique<storage::StorageTier>(std::move(store), g, pool->host->data());
  cache::StorageOptions options;
  const std::string& policy = c.storage.prefetch_policy;
  options.policy = policy == "wait_complete" ? cache::StorageOptions::Policy::kWaitComplete
                   : policy == "timeout"     ? cache::StorageOptions::Policy::kTimeout
                                             : cache::StorageOptions::Policy::kBestEffort;
  options.threshold_tokens = static_cast<size_t>(c.storage.prefetch_threshold_tokens);
  options.timeout_base_s = c.storage.prefetch_timeout_base_s;
  options.timeout_per_ki_token_s = c.storage.prefetch_timeout_per_ki_token_s;
  // SGLang's prefetch_capacity_limit: 80 % of what the host tier holds beyond the device pool.
  const uint64_t device = pool->plan.max_total_tokens, host_tokens = pool->host->tokens();
  options.capacity_tokens = static_cast<size_t>(0.8 * static_cast<double>(host_tokens > device ? host_tokens - device : 0));
  pool->cache->enable_storage(pool->storage.get(), storage::model_identity(c, g), options);
  return Status::ok();
}

}  // namespace

Status build_pool(::kvpool* pool) {
  const config::Config& c = pool->config;
  const plan::Plan& p = pool->plan;
  KVPOOL_RETURN_IF_ERROR(make_backend(c, &pool->backend));
  if (pool->has_allocator) pool->backend = backend::with_allocator(std::move(pool->backend), pool->allocator);
  if (c.pool.device == config::DeviceKind::kCuda) {
    KVPOOL_RETURN_IF_ERROR(backend::DeviceFault::make(c.pool.device_index, &pool->device_fault));
  }
  const bool need_sort = c.pool.disaggregation_mode != config::DisaggregationMode::kNone;
  int64_t slot_limit = 0;
  if (c.model.attention == config::Attention::kSWA) {
    pool->swa = std::make_unique<alloc::SwaAllocator>(static_cast<int64_t>(p.max_total_tokens),
                                                      static_cast<int64_t>(p.swa_tokens), need_sort);
    slot_limit = static_cast<int64_t>(p.max_total_tokens) + 1;
  } else {
    pool->paged = std::make_unique<alloc::PagedAllocator>(static_cast<int64_t>(p.num_pages), p.page_size, need_sort);
    slot_limit = pool->paged->slot_limit();
    if (c.pool.device_free_list) {
      KVPOOL_RETURN_IF_ERROR(alloc::DevicePages::make(pool->backend.get(), c.pool.device_index,
                                                      static_cast<int64_t>(p.num_pages), p.page_size, need_sort,
                                                      pool->device_fault.get(), &pool->device_pages));
    }
  }
  KVPOOL_RETURN_IF_ERROR(
      req::RequestTable::make(pool->backend.get(), p.req_rows, p.max_context_len, slot_limit, &pool->requests));
  if (c.model.attention == config::Attention::kHybridLinear) {
    KVPOOL_RETURN_IF_ERROR(mamba::MambaPool::make(pool->backend.get(), mamba_shape(c, p), p.req_rows, &pool->mamba));
  }
  const int64_t* swa_mapping = pool->swa ? pool->swa->mapping_data() : nullptr;
  KVPOOL_RETURN_IF_ERROR(pool::KvBuffers::make(pool->backend.get(), c, p, swa_mapping, &pool->kv));
  // Prefix cache and requests: the plain radix tree serves variants whose KV is
  // fully described by the token slots (swa and hybrid_linear need their own trees).
  const bool plain = c.model.attention != config::Attention::kSWA && c.model.attention != config::Attention::kHybridLinear;
  if (c.host_cache.enabled) {
    // The tier lives in the radix tree's nodes (host-only and device+host states): the
    // plain tree's, the mamba tree's (full-attention KV) and the swa tree's (full-layer KV,
    // and the window layers' rows of window tails) have them (docs/host-tier.md).
    if (c.model.attention == config::Attention::kSWA && c.storage.enabled) {
      return Status::unsupported("storage: the storage tier serves mha, mla, nsa and double_sparse pools; a swa "
                                 "pool's host tier has no storage tier yet");
    }
    if (c.model.attention == config::Attention::kHybridLinear) {
      if (c.pool.mamba_extra_buffer) {
        return Status::unsupported("host_cache: a hybrid_linear pool with pool.mamba_extra_buffer has no mamba radix "
                                   "cache to tier");
      }
      if (c.storage.enabled) {
        return Status::unsupported("storage: the storage tier serves mha, mla, nsa and double_sparse pools; a "
                                   "hybrid_linear pool's host tier has no storage tier yet");
      }
    }
    if (c.prefix_cache.kind != config::PrefixCacheKind::kRadix) {
      return Status::config("$.host_cache: the host tier keeps what the radix cache evicts, expected prefix_cache.kind "
                            "\"radix\" with it");
    }
    if (c.host_cache.defer_completion && c.pool.device == config::DeviceKind::kCuda) {
      return Status::config("$.host_cache.defer_completion: got true on a CUDA pool, expected it only on CPU pools "
                            "(a CUDA pool's copies are asynchronous already)");
    }
    KVPOOL_RETURN_IF_ERROR(build_host_tier(pool));
  }
  if (plain && c.prefix_cache.kind == config::PrefixCacheKind::kRadix) {
    cache::EvictionPolicy policy = cache::EvictionPolicy::kLru;
    cache::parse_eviction_policy(c.prefix_cache.eviction, &policy);  // validated by the config parser
    pool->cache = std::make_unique<cache::PrefixCache>(pool->paged.get(), policy, c.prefix_cache.events);
    if (pool->host_transfer) {
      cache::WritePolicy write = cache::WritePolicy::kWriteThrough;
      cache::parse_write_policy(c.host_cache.write_policy, &write);  // validated by the config parser
      pool->cache->enable_host_tier(pool->host.get(), pool->host_transfer.get(), write);
      if (c.storage.enabled) KVPOOL_RETURN_IF_ERROR(build_storage_tier(pool));
    }
  }
  if (plain) pool->seqs = std::make_unique<seq::Sequences>(pool->paged.get(), pool->requests.get(), pool->cache.get());
  const bool radix = c.prefix_cache.kind == config::PrefixCacheKind::kRadix;
  if (c.model.attention == config::Attention::kSWA) {
    const size_t window = static_cast<size_t>(c.model.sliding_window);
    if (radix) KVPOOL_RETURN_IF_ERROR(cache::SwaCache::make(pool->swa.get(), window, &pool->swa_cache));
    if (radix && c.prefix_cache.events) pool->swa_cache->tree().enable_events();
    if (radix && pool->host_transfer) {
      cache::WritePolicy write = cache::WritePolicy::kWriteThrough;
      cache::parse_write_policy(c.host_cache.write_policy, &write);  // validated by the config parser
      pool->swa_cache->enable_host_tier(pool->host.get(), pool->host_transfer.get(), pool->host_window.get(),
                                        pool->host_window_transfer.get(), write);
    }
    pool->seqs = std::make_unique<seq::SwaSequences>(pool->swa.get(), pool->requests.get(), pool->swa_cache.get(), window);
  }
  // SGLang's extra_buffer mode (ping-pong state snapshots) is not implemented by the mamba tree or kvseq.
  if (c.model.attention == config::Attention::kHybridLinear && !c.pool.mamba_extra_buffer) {
    if (radix) KVPOOL_RETURN_IF_ERROR(cache::MambaCache::make(pool->paged.get(), pool->mamba.get(), &pool->mamba_cache));
    if (radix && c.prefix_cache.events) pool->mamba_cache->tree().enable_events();
    if (radix && pool->host_transfer) {  // the full-attention layers' KV; mamba states stay on the device
      cache::WritePolicy write = cache::WritePolicy::kWriteThrough;
      cache::parse_write_policy(c.host_cache.write_policy, &write);  // validated by the config parser
      pool->mamba_cache->enable_host_tier(pool->host.get(), pool->host_transfer.get(), write);
    }
    pool->seqs = std::make_unique<seq::MambaSequences>(pool->paged.get(), pool->requests.get(), pool->mamba.get(),
                                                       pool->mamba_cache.get());
  }
  if (pool->seqs) {  // a CUDA pool batches kvseq's request-table writes (req/table_writes.hpp)
    std::unique_ptr<req::TableWrites> writes;
    KVPOOL_RETURN_IF_ERROR(
        req::TableWrites::make(pool->backend.get(), pool->requests.get(), pool->device_fault.get(), &writes));
    pool->seqs->set_table_writes(std::move(writes));
  }
  // swa pools keep the shortfall rule: SGLang's hybrid allocator evicts only the shortfall of each pool too.
  if (pool->seqs && c.prefix_cache.sglang_evict_rule) pool->seqs->set_evict_rule(seq::EvictRule::kSglang);
  return Status::ok();
}

}  // namespace kvp::capi
