/*
 * The pool a replay runs on: the built-in tiny model (KV metadata only matters
 * here, so bytes per token are kept minimal) or a --config file, with the
 * replay's flags and the trace's needs written over its pool keys.
 */
#ifndef KVPOOL_REPLAY_POOL_CONFIG_H
#define KVPOOL_REPLAY_POOL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"
#include "trace.h"

typedef struct pool_setup {
  char *json;        /* the configuration to pass to kvpool_create (owned) */
  uint32_t page_size;
  char policy[16];   /* eviction policy, or the prefix-cache kind when not radix */
  int sglang_evict_rule; /* prefix_cache.evict_rule is "sglang" */
  int unbounded;     /* the capacity is the "never evict" size */
  int host_tier;     /* the config has a host_cache section (the flag's or the config file's own) */
  char host_write_policy[32]; /* its write policy, when host_tier */
} pool_setup;

/* headroom_bytes the replay gives a host tier it adds (docs/replay.md). */
#define REPLAY_HOST_HEADROOM_BYTES (1ull << 30)

/* capacity: tokens, CAPACITY_UNBOUNDED, or 0 to keep the config's (unbounded without --config).
 * host_capacity: host tier tokens (a host_cache section sized to them), or 0 for none
 * (a --config file's own host_cache section is then kept as it is).
 * Returns 0 on success, nonzero with a message in err. */
int pool_config_build(const replay_options *o, const trace *t, uint64_t capacity, uint64_t host_capacity,
                      pool_setup *out, char *err, size_t err_cap);
void pool_setup_free(pool_setup *s);

/* A capacity no replay of t can exceed at this page size: every request's tokens
 * in whole pages, plus one page each. */
uint64_t pool_unbounded_capacity(const trace *t, uint32_t page_size);

#endif
