/* Command line of kvpool-replay. */
#ifndef KVPOOL_REPLAY_OPTIONS_H
#define KVPOOL_REPLAY_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "stop_points.h"

/* A capacity value meaning "large enough that nothing is ever evicted". */
#define CAPACITY_UNBOUNDED UINT64_MAX

typedef struct replay_options {
  const char *trace_path;
  const char *config_path;  /* NULL: the built-in tiny model */
  uint64_t capacity;        /* tokens; CAPACITY_UNBOUNDED; 0 = not given */
  uint32_t page_size;       /* 0 = not given */
  const char *policy;       /* NULL = not given */
  uint32_t concurrency;
  uint32_t chunk;           /* 0 = whole prompt */
  int greedy;               /* --admission greedy: admit without reserving memory */
  int prompts_only;         /* --prompts-only: output lengths read as 0 (SGLang replay's method) */
  const char *evict_rule;   /* --evict-rule: "sglang" or "shortfall"; NULL = the config's */
  const char *per_request;  /* --per-request FILE: matched tokens of every request; NULL = none */
  uint64_t host_capacity;   /* --host-capacity-tokens: host tier tokens; 0 = no host tier flag */
  const char *host_write_policy; /* --host-write-policy; NULL = the config's, else write_through */
  const char *storage;      /* --storage file:DIR | memcached:H:P[,H:P...] | redis:H:P[,H:P...]; NULL = none */
  uint32_t instances;       /* --instances N: the trace split round robin over N pools (default 1) */
  int no_storage;           /* not a flag: drop any storage tier (the private comparison of --instances) */
  uint64_t check_every;     /* 0 = only at the end */
  size_t max_requests;      /* 0 = all */
  uint64_t *sweep;          /* capacities of --sweep (owned), sweep_len of them */
  size_t sweep_len;
  const char *out_dir;
  int json;
  int progress;             /* -1 auto (stderr is a terminal), 0 never, 1 always */
  stop_points stops;        /* --stop-at N1,N2,...: SIGSTOP itself after that many requests */
} replay_options;

/* Parses argv. Returns 0 to run, 1 when --help was printed (exit 0), 2 on a
 * usage error (already reported on stderr with the usage text). */
int options_parse(int argc, char **argv, replay_options *out);
void options_free(replay_options *o);
void options_usage(FILE *f, const char *prog);

#endif
