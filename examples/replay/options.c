/* Command-line parsing of kvpool-replay: every mistake is a usage error (exit 2). */
#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const kPolicies[] = {"lru", "lfu", "fifo", "mru", "filo", "priority"};

void options_usage(FILE *f, const char *prog) {
  fprintf(f,
          "usage: %s --trace FILE [options]\n"
          "Replays a Mooncake-format trace through kvpool's request API (kvseq) and reports\n"
          "prefix hit ratios, evictions, peak usage and speed (docs/replay.md).\n"
          "\n"
          "  --trace FILE              JSONL trace: timestamp, input_length, output_length, hash_ids\n"
          "  --config FILE             pool configuration (default: a tiny 1-layer model on the cpu)\n"
          "  --capacity-tokens N|unbounded\n"
          "                            token capacity (k/M/G suffixes: 2M = 2000000); default:\n"
          "                            unbounded, or the config's capacity with --config\n"
          "  --page-size N             tokens per page (default 16, or the config's)\n"
          "  --policy NAME             eviction: lru, lfu, fifo, mru, filo, priority (default lru,\n"
          "                            or the config's)\n"
          "  --concurrency N           requests running at once (default 1)\n"
          "  --chunk N                 prefill chunk in tokens (default: the whole prompt)\n"
          "  --admission reserve|greedy\n"
          "                            reserve (default): start a request only if memory covers what\n"
          "                            all running requests still need; greedy: start whenever fewer\n"
          "                            than --concurrency run (more retractions)\n"
          "  --prompts-only            drop the outputs (output_length read as 0): prompts are\n"
          "                            matched, computed and cached, nothing is decoded\n"
          "  --evict-rule sglang|shortfall\n"
          "                            how much is evicted when free slots are short: SGLang's\n"
          "                            scheduler estimate (need + a page per request) whenever\n"
          "                            free < it, or only the shortfall (default: the config's,\n"
          "                            else shortfall); sets prefix_cache.evict_rule\n"
          "  --host-capacity-tokens N  add a host-memory tier (L2, host_cache) of N tokens (k/M/G\n"
          "                            suffixes); N must exceed the device capacity, which must\n"
          "                            be bounded; with --sweep, a second replay with the tier at\n"
          "                            every capacity below N\n"
          "  --host-write-policy P     write_through (default), write_through_selective, write_back\n"
          "  --storage SPEC            add a storage tier (L3) below the host tier: file:DIR,\n"
          "                            memcached:HOST:PORT[,HOST:PORT...] or redis:HOST:PORT[,...];\n"
          "                            the store is cleared when each run starts; a --config\n"
          "                            storage section of the same backend keeps its other keys\n"
          "                            (timeout_ms, retry_timeout_s, prefetch_*)\n"
          "  --instances N             split the trace round robin over N pools run interleaved\n"
          "                            (request i on pool i %% N; default 1); with --storage they\n"
          "                            share one store, and a second run without it reports the\n"
          "                            private-cache hit ratio beside the pooled one\n"
          "  --per-request FILE        write each request's matched tokens at its first admission,\n"
          "                            one line per request in trace order (with a host tier:\n"
          "                            matched and host-hit tokens, separated by a space)\n"
          "  --max-requests N          replay only the first N requests\n"
          "  --check-every K           run kvpool_check every K steps (default: only at the end)\n"
          "  --sweep N1,N2,...         one replay per capacity plus an unbounded one; writes\n"
          "                            sweep.csv and sweep.svg into --out\n"
          "  --out DIR                 output folder of --sweep (default: .)\n"
          "  --json                    print one JSON object instead of the table\n"
          "  --stop-at N1,N2,...       stop the process (SIGSTOP) once N1, N2, ... requests have\n"
          "                            finished, in every run; resume it with SIGCONT (for\n"
          "                            fault-injection tests; at most 8 ascending counts)\n"
          "  --progress / --no-progress\n"
          "                            force the progress bar on stderr on or off (--progress\n"
          "                            also with --json; default: on when stderr is a terminal\n"
          "                            and --json is not given)\n"
          "  -h, --help                this text\n",
          prog);
}

/* A positive decimal count with an optional k/M/G suffix (powers of 1000). */
static int parse_count(const char *s, uint64_t max, uint64_t *out) {
  if (s == NULL || *s < '0' || *s > '9') return 0;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return 0;
  uint64_t mult = 1;
  if (*end == 'k' || *end == 'K') mult = 1000ull, ++end;
  else if (*end == 'm' || *end == 'M') mult = 1000000ull, ++end;
  else if (*end == 'g' || *end == 'G') mult = 1000000000ull, ++end;
  if (*end != '\0' || v == 0 || v > max / mult) return 0;
  *out = (uint64_t)v * mult;
  return 1;
}

static int parse_capacity(const char *s, uint64_t *out) {
  if (s != NULL && strcmp(s, "unbounded") == 0) {
    *out = CAPACITY_UNBOUNDED;
    return 1;
  }
  return parse_count(s, (uint64_t)1 << 40, out);
}

static int parse_sweep(const char *s, replay_options *o) {
  size_t n = 1;
  for (const char *c = s; *c; ++c) n += *c == ',';
  o->sweep = calloc(n, sizeof *o->sweep);
  if (o->sweep == NULL) return 0;
  char *copy = malloc(strlen(s) + 1);
  if (copy == NULL) return 0;
  strcpy(copy, s);
  int ok = 1;
  char *item = copy;
  for (size_t i = 0; i < n && ok; ++i) {
    char *comma = strchr(item, ',');
    if (comma != NULL) *comma = '\0';
    ok = parse_capacity(item, &o->sweep[i]);
    item = comma ? comma + 1 : item;
  }
  free(copy);
  o->sweep_len = n;
  return ok;
}

static int is_policy(const char *s) {
  for (size_t i = 0; i < sizeof kPolicies / sizeof kPolicies[0]; ++i) {
    if (strcmp(s, kPolicies[i]) == 0) return 1;
  }
  return 0;
}

static int usage_error(const char *prog, const char *what, const char *arg) {
  fprintf(stderr, "%s: %s%s%s\n", prog, what, arg ? ": " : "", arg ? arg : "");
  options_usage(stderr, prog);
  return 2;
}

int options_parse(int argc, char **argv, replay_options *o) {
  memset(o, 0, sizeof *o);
  o->concurrency = 1;
  o->instances = 1;
  o->out_dir = ".";
  o->progress = -1;
  const char *prog = argv[0];
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    uint64_t v = 0;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      options_usage(stdout, prog);
      return 1;
    }
    if (strcmp(a, "--json") == 0) { o->json = 1; continue; }
    if (strcmp(a, "--progress") == 0) { o->progress = 1; continue; }
    if (strcmp(a, "--no-progress") == 0) { o->progress = 0; continue; }
    if (strcmp(a, "--prompts-only") == 0) { o->prompts_only = 1; continue; }
    /* Every other option takes a value. */
    static const char *const kValued[] = {"--trace", "--config", "--capacity-tokens", "--page-size", "--policy",
                                          "--concurrency", "--chunk", "--admission", "--max-requests", "--check-every",
                                          "--sweep", "--out", "--evict-rule", "--per-request",
                                          "--host-capacity-tokens", "--host-write-policy", "--storage",
                                          "--instances", "--stop-at"};
    int known = 0;
    for (size_t k = 0; k < sizeof kValued / sizeof kValued[0]; ++k) known |= strcmp(a, kValued[k]) == 0;
    if (!known) return usage_error(prog, "unknown option", a);
    if (i + 1 >= argc) return usage_error(prog, "missing value for", a);
    const char *val = argv[++i];
    if (strcmp(a, "--trace") == 0) {
      o->trace_path = val;
    } else if (strcmp(a, "--config") == 0) {
      o->config_path = val;
    } else if (strcmp(a, "--out") == 0) {
      o->out_dir = val;
    } else if (strcmp(a, "--per-request") == 0) {
      o->per_request = val;
    } else if (strcmp(a, "--evict-rule") == 0) {
      if (strcmp(val, "sglang") != 0 && strcmp(val, "shortfall") != 0) {
        return usage_error(prog, "--evict-rule must be sglang or shortfall", val);
      }
      o->evict_rule = val;
    } else if (strcmp(a, "--host-capacity-tokens") == 0) {
      if (!parse_count(val, (uint64_t)1 << 40, &o->host_capacity)) {
        return usage_error(prog, "bad --host-capacity-tokens (a token count)", val);
      }
    } else if (strcmp(a, "--stop-at") == 0) {
      if (!stop_points_parse(val, &o->stops)) {
        return usage_error(prog, "--stop-at must be 1 to 8 ascending positive counts, comma-separated", val);
      }
    } else if (strcmp(a, "--instances") == 0) {
      if (!parse_count(val, 4096, &v)) return usage_error(prog, "--instances must be a number from 1 to 4096", val);
      o->instances = (uint32_t)v;
    } else if (strcmp(a, "--storage") == 0) {
      if (strncmp(val, "file:", 5) != 0 && strncmp(val, "memcached:", 10) != 0 && strncmp(val, "redis:", 6) != 0) {
        return usage_error(prog, "--storage must be file:DIR, memcached:HOST:PORT[,...] or redis:HOST:PORT[,...]", val);
      }
      if (strchr(val, ':')[1] == '\0') return usage_error(prog, "--storage needs a directory or servers after the colon", val);
      o->storage = val;
    } else if (strcmp(a, "--host-write-policy") == 0) {
      if (strcmp(val, "write_through") != 0 && strcmp(val, "write_through_selective") != 0 &&
          strcmp(val, "write_back") != 0) {
        return usage_error(prog, "--host-write-policy must be write_through, write_through_selective or write_back", val);
      }
      o->host_write_policy = val;
    } else if (strcmp(a, "--capacity-tokens") == 0) {
      if (!parse_capacity(val, &o->capacity)) return usage_error(prog, "bad --capacity-tokens", val);
    } else if (strcmp(a, "--page-size") == 0) {
      if (!parse_count(val, 4096, &v) || (v & (v - 1)) != 0) {
        return usage_error(prog, "--page-size must be a power of two in [1, 4096]", val);
      }
      o->page_size = (uint32_t)v;
    } else if (strcmp(a, "--policy") == 0) {
      if (!is_policy(val)) return usage_error(prog, "unknown --policy (lru, lfu, fifo, mru, filo, priority)", val);
      o->policy = val;
    } else if (strcmp(a, "--concurrency") == 0) {
      if (!parse_count(val, 1u << 20, &v)) return usage_error(prog, "--concurrency must be in [1, 1048576]", val);
      o->concurrency = (uint32_t)v;
    } else if (strcmp(a, "--chunk") == 0) {
      if (!parse_count(val, INT32_MAX, &v)) return usage_error(prog, "bad --chunk", val);
      o->chunk = (uint32_t)v;
    } else if (strcmp(a, "--admission") == 0) {
      if (strcmp(val, "reserve") != 0 && strcmp(val, "greedy") != 0) {
        return usage_error(prog, "--admission must be reserve or greedy", val);
      }
      o->greedy = strcmp(val, "greedy") == 0;
    } else if (strcmp(a, "--max-requests") == 0) {
      if (!parse_count(val, SIZE_MAX, &v)) return usage_error(prog, "bad --max-requests", val);
      o->max_requests = (size_t)v;
    } else if (strcmp(a, "--check-every") == 0) {
      if (!parse_count(val, UINT64_MAX, &v)) return usage_error(prog, "bad --check-every", val);
      o->check_every = v;
    } else if (strcmp(a, "--sweep") == 0) {
      free(o->sweep);
      o->sweep = NULL;
      if (!parse_sweep(val, o)) return usage_error(prog, "bad --sweep (capacities separated by commas)", val);
    }
  }
  if (o->trace_path == NULL) return usage_error(prog, "--trace is required", NULL);
  if (o->sweep != NULL && o->capacity != 0) {
    return usage_error(prog, "--sweep and --capacity-tokens exclude each other", NULL);
  }
  if (o->sweep != NULL && o->per_request != NULL) {
    return usage_error(prog, "--per-request writes one replay's requests; it excludes --sweep", NULL);
  }
  if (o->sweep != NULL && o->instances > 1) {
    return usage_error(prog, "--instances with --sweep is not supported", NULL);
  }
  if (o->host_write_policy != NULL && o->host_capacity == 0) {
    return usage_error(prog, "--host-write-policy needs --host-capacity-tokens", NULL);
  }
  if (o->host_capacity != 0 && o->sweep == NULL) {
    /* The tier is sized as a ratio of the device capacity (host_cache.ratio, in (1, 1000]). */
    if (o->capacity == CAPACITY_UNBOUNDED || (o->capacity == 0 && o->config_path == NULL)) {
      return usage_error(prog, "--host-capacity-tokens needs a bounded --capacity-tokens (an unbounded device cache never evicts)",
                         NULL);
    }
    if (o->capacity != 0 && o->host_capacity <= o->capacity) {
      return usage_error(prog, "--host-capacity-tokens must be larger than --capacity-tokens", NULL);
    }
    if (o->capacity != 0 && o->host_capacity > 1000 * o->capacity) {
      return usage_error(prog, "--host-capacity-tokens may be at most 1000 x --capacity-tokens (host_cache.ratio)", NULL);
    }
  }
  if (o->host_capacity != 0 && o->sweep != NULL) {
    int below = 0;
    for (size_t i = 0; i < o->sweep_len; ++i) below |= o->sweep[i] != CAPACITY_UNBOUNDED && o->sweep[i] < o->host_capacity;
    if (!below) return usage_error(prog, "--host-capacity-tokens must be larger than some --sweep capacity", NULL);
  }
  return 0;
}

void options_free(replay_options *o) {
  free(o->sweep);
  o->sweep = NULL;
}
