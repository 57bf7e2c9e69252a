/*
 * One replay: a trace pushed through kvseq_* on a fresh pool by a simple
 * continuous-batching scheduler (docs/replay.md, "Scheduler model").
 */
#ifndef KVPOOL_REPLAY_REPLAY_H
#define KVPOOL_REPLAY_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

typedef void (*replay_progress_fn)(void *ctx, size_t done, size_t total);

typedef struct replay_params {
  const trace *trace;
  const char *config_json;  /* the pool to create (see pool_config.h) */
  uint32_t concurrency;     /* requests running at once (>= 1) */
  uint32_t chunk;           /* prefill chunk in tokens; 0 = the whole remaining prompt */
  uint64_t check_every;     /* kvpool_check every K steps; 0 = only at the end */
  int greedy;               /* admit without reserving memory for running requests */
  int sglang_evict_rule;    /* evict SGLang's whole estimate when free < it (prefix_cache.evict_rule) */
  uint64_t *matched;        /* NULL, or one entry per trace request: tokens matched at first admission */
  uint64_t *host_matched;   /* NULL, or one entry per trace request: of those, tokens loaded from the host tier */
  replay_progress_fn progress;
  void *progress_ctx;
} replay_params;

typedef struct replay_result {
  uint64_t requests;
  uint64_t blocks;
  uint64_t hit_blocks;       /* blocks wholly inside the cached prefix at first admission */
  uint64_t input_tokens;
  uint64_t matched_tokens;   /* kvseq_begin's cached length at first admission, summed (every tier) */
  uint64_t device_hit_tokens; /* of matched_tokens, found on the device */
  uint64_t host_hit_tokens;  /* of matched_tokens, loaded back from the host tier, not brought by storage */
  uint64_t storage_hit_tokens; /* of matched_tokens, prefetched from the storage tier (kvseq_info.storage_hit) */
  uint64_t output_tokens;
  double block_hit_ratio;
  double token_hit_ratio;
  uint64_t evicted_tokens;   /* device tokens evicted: by radix_evict, plus load_evicted_tokens */
  uint64_t load_evicted_tokens; /* device tokens evicted inside kvseq_begin/retract to load host hits back */
  uint64_t peak_used_tokens; /* max over steps of capacity - available */
  uint64_t final_cached_tokens;
  uint64_t capacity_tokens;
  uint32_t page_size;
  uint64_t retractions;
  uint64_t oom_skipped;      /* requests that could not run even alone, aborted */
  uint64_t steps;
  uint64_t prefill_tokens;   /* tokens computed by kvseq_extend (misses and recomputation) */
  uint64_t decode_tokens;
  uint64_t kvseq_calls;      /* kvseq_begin/extend/decode/finish/abort/retract calls (a batched decode is one) */
  uint64_t ops;              /* per-request operations (a batched decode of n is n) */
  uint64_t checks;           /* kvpool_check calls, all passed */
  double wall_seconds;       /* pool creation to destruction */
  /* The host tier (kvhost_get_stats at the end); all 0 when host_tier is 0. */
  int host_tier;
  uint64_t host_capacity_tokens;
  uint64_t host_used_tokens;       /* at the end */
  uint64_t host_only_tokens;       /* at the end */
  uint64_t host_backups, host_backup_tokens, host_backups_skipped;
  uint64_t host_loads, host_load_tokens, host_loads_refused;
  uint64_t host_evicted_tokens;
  uint64_t bytes_to_host, bytes_to_device;
  /* The storage tier (kvstore_get_stats at the end); all 0 when storage is 0. */
  int storage;
  uint64_t storage_backup_pages, storage_bytes_written, storage_prefetches, storage_prefetch_tokens,
      storage_bytes_read, storage_pages_rejected, storage_failures;
  /* The backend's faults (kvstore_stats store_*): a server that is down, stopped or restarted
   * shows here, while its pages are only misses in the figures above. */
  uint64_t storage_put_errors, storage_get_errors, storage_timeouts, storage_server_errors, storage_servers_ejected;
  double ops_per_second;
} replay_result;

/* Returns 0 on success; otherwise nonzero with a message in err. */
int replay_run(const replay_params *p, replay_result *out, char *err, size_t err_cap);

/* --instances: n pools, instance k replaying params[k] (its own sub-trace, see trace_split)
 * into outs[k], run interleaved: one scheduler step of each busy instance in turn. When
 * their configs name a storage tier they share it: instance 0 clears it (once, before the
 * other pools are created) and every instance's backups are flushed before each prefetch.
 * params[0].progress gets the done and total requests of all instances. Every outs[k]
 * gets the whole run's wall_seconds. replay_run is this with n = 1. */
int replay_run_group(const replay_params *params, size_t n, replay_result *outs, char *err, size_t err_cap);

#endif
