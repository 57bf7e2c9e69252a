/*
 * kvpool-replay: replay a Mooncake-format request trace through kvpool's
 * request API (kvseq_*) and report prefix hit ratios, evictions, peak usage
 * and speed; with --sweep, one replay per capacity plus a CSV and an SVG plot.
 * Uses only the public C API. docs/replay.md describes the model and metrics.
 *
 * Exit status: 0 success, 1 failure (I/O, library error, failed check), 2 usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <kvpool/kvpool.h>

#include "options.h"
#include "pool_config.h"
#include "progress.h"
#include "replay.h"
#include "report.h"
#include "stop_points.h"
#include "svg_plot.h"
#include "trace.h"

#define PROG "kvpool-replay"

/* What runs after every scheduler step: the progress bar and the --stop-at points. */
typedef struct step_observer {
  progress bar;
  stop_points stops;
} step_observer;

static void observer_init(step_observer *w, const replay_options *o, const char *label) {
  progress_init(&w->bar, o->json && o->progress < 0 ? 0 : o->progress, label);  /* --progress forces it, --json too */
  w->stops = o->stops;
  stop_points_rewind(&w->stops);
}

/* A replay_progress_fn: ctx is a step_observer*. */
static void observe_step(void *ctx, size_t done, size_t total) {
  step_observer *w = ctx;
  progress_update(&w->bar, done, total);
  stop_points_check(&w->stops, done);
}

/* One replay at `capacity`, with a host tier of host_capacity tokens if not 0 (see
 * pool_config_build); fills *out, and matched[] / host_matched[] when not NULL. */
static int run_one(const replay_options *o, const trace *t, uint64_t capacity, uint64_t host_capacity,
                   const char *label, run_summary *out, uint64_t *matched, uint64_t *host_matched) {
  char err[1024];
  pool_setup setup;
  if (pool_config_build(o, t, capacity, host_capacity, &setup, err, sizeof err)) {
    fprintf(stderr, PROG ": %s\n", err);
    return 1;
  }
  step_observer watch;
  observer_init(&watch, o, label);
  replay_params params = {.trace = t,
                          .config_json = setup.json,
                          .concurrency = o->concurrency,
                          .chunk = o->chunk,
                          .check_every = o->check_every,
                          .greedy = o->greedy,
                          .sglang_evict_rule = setup.sglang_evict_rule,
                          .matched = matched,
                          .host_matched = host_matched,
                          .progress = observe_step,
                          .progress_ctx = &watch};
  memset(out, 0, sizeof *out);
  const int rc = replay_run(&params, &out->r, err, sizeof err);
  progress_end(&watch.bar);
  out->trace_path = o->trace_path;
  snprintf(out->policy, sizeof out->policy, "%s", setup.policy);
  out->concurrency = o->concurrency;
  out->chunk = o->chunk;
  out->greedy = o->greedy;
  out->unbounded = setup.unbounded;
  out->host_requested = host_capacity;
  if (setup.host_tier) snprintf(out->host_write_policy, sizeof out->host_write_policy, "%s", setup.host_write_policy);
  pool_setup_free(&setup);
  if (rc != 0) fprintf(stderr, PROG ": %s\n", err);
  return rc;
}

/* --instances: the pooled result is the instances' results summed; capacities and the
 * page size are one pool's, peak_used_tokens the sum of each pool's peak. */
static void sum_results(const replay_result *rs, size_t n, replay_result *out) {
  *out = rs[0];
  for (size_t k = 1; k < n; ++k) {
    const replay_result *r = &rs[k];
#define ADD(f) out->f += r->f
    ADD(requests); ADD(blocks); ADD(hit_blocks); ADD(input_tokens); ADD(matched_tokens);
    ADD(device_hit_tokens); ADD(host_hit_tokens); ADD(storage_hit_tokens); ADD(output_tokens);
    ADD(evicted_tokens); ADD(load_evicted_tokens); ADD(peak_used_tokens); ADD(final_cached_tokens);
    ADD(retractions); ADD(oom_skipped); ADD(steps); ADD(prefill_tokens); ADD(decode_tokens);
    ADD(kvseq_calls); ADD(ops); ADD(checks);
    ADD(host_used_tokens); ADD(host_only_tokens); ADD(host_backups); ADD(host_backup_tokens);
    ADD(host_backups_skipped); ADD(host_loads); ADD(host_load_tokens); ADD(host_loads_refused);
    ADD(host_evicted_tokens); ADD(bytes_to_host); ADD(bytes_to_device);
    ADD(storage_backup_pages); ADD(storage_bytes_written); ADD(storage_prefetches); ADD(storage_prefetch_tokens);
    ADD(storage_bytes_read); ADD(storage_pages_rejected); ADD(storage_failures);
    ADD(storage_put_errors); ADD(storage_get_errors); ADD(storage_timeouts); ADD(storage_server_errors);
    ADD(storage_servers_ejected);
#undef ADD
  }
  out->block_hit_ratio = out->blocks ? (double)out->hit_blocks / (double)out->blocks : 0.0;
  out->token_hit_ratio = out->input_tokens ? (double)out->matched_tokens / (double)out->input_tokens : 0.0;
  out->ops_per_second = out->wall_seconds > 0 ? (double)out->ops / out->wall_seconds : 0.0;
}

/* One interleaved run of the o->instances sub-traces subs[] on pools built from o (with
 * no_storage set, without a storage tier), into results[]; matched[k] / host_matched[k]
 * per instance when not NULL. */
static int run_group(const replay_options *o, const trace *t, const trace *subs, const char *label,
                     replay_result *results, pool_setup *setup, uint64_t **matched, uint64_t **host_matched) {
  char err[1024];
  const size_t n = o->instances;
  if (pool_config_build(o, t, o->capacity, o->host_capacity, setup, err, sizeof err)) {
    fprintf(stderr, PROG ": %s\n", err);
    return 1;
  }
  replay_params *params = calloc(n, sizeof *params);
  if (params == NULL) {
    fprintf(stderr, PROG ": out of memory\n");
    return 1;
  }
  step_observer watch;
  observer_init(&watch, o, label);
  for (size_t k = 0; k < n; ++k) {
    params[k] = (replay_params){.trace = &subs[k],
                                .config_json = setup->json,
                                .concurrency = o->concurrency,
                                .chunk = o->chunk,
                                .check_every = o->check_every,
                                .greedy = o->greedy,
                                .sglang_evict_rule = setup->sglang_evict_rule,
                                .matched = matched ? matched[k] : NULL,
                                .host_matched = host_matched ? host_matched[k] : NULL,
                                .progress = observe_step,
                                .progress_ctx = &watch};
  }
  const int rc = replay_run_group(params, n, results, err, sizeof err);
  progress_end(&watch.bar);
  free(params);
  if (rc != 0) fprintf(stderr, PROG ": %s\n", err);
  return rc;
}

/* --instances N > 1: the trace split round robin over N pools run interleaved (sharing the
 * storage tier if there is one), then, with a storage tier, the same split again without it:
 * the private caches' hit ratio. Fills *out (summed) and matched[] / host_matched[] in trace order. */
static int run_instances(const replay_options *o, const trace *t, run_summary *out, replay_result *results,
                         uint64_t *matched, uint64_t *host_matched) {
  const size_t n = o->instances;
  trace *subs = calloc(n, sizeof *subs);
  replay_result *priv = calloc(n, sizeof *priv);
  uint64_t **m = calloc(n, sizeof *m), **hm = calloc(n, sizeof *hm);
  int rc = subs == NULL || priv == NULL || m == NULL || hm == NULL;
  for (size_t k = 0; k < n && rc == 0; ++k) {
    rc = trace_split(t, n, k, &subs[k]);
    if (rc == 0 && matched != NULL) {
      rc = (m[k] = calloc(subs[k].num_reqs + 1, sizeof **m)) == NULL || (hm[k] = calloc(subs[k].num_reqs + 1, sizeof **hm)) == NULL;
    }
  }
  if (rc != 0) fprintf(stderr, PROG ": out of memory\n");
  pool_setup setup;
  memset(&setup, 0, sizeof setup);
  memset(out, 0, sizeof *out);
  if (rc == 0) rc = run_group(o, t, subs, "replay", results, &setup, matched ? m : NULL, matched ? hm : NULL);
  if (rc == 0) {
    sum_results(results, n, &out->r);
    out->trace_path = o->trace_path;
    snprintf(out->policy, sizeof out->policy, "%s", setup.policy);
    out->concurrency = o->concurrency;
    out->chunk = o->chunk;
    out->greedy = o->greedy;
    out->unbounded = setup.unbounded;
    out->host_requested = o->host_capacity;
    if (setup.host_tier) snprintf(out->host_write_policy, sizeof out->host_write_policy, "%s", setup.host_write_policy);
    out->instances = (uint32_t)n;
    out->instance_results = results;
    out->private_matched_tokens = out->r.matched_tokens;
    out->private_token_hit_ratio = out->r.token_hit_ratio;
    for (size_t k = 0; matched != NULL && k < n; ++k) {
      for (size_t j = 0; j < subs[k].num_reqs; ++j) {
        matched[k + j * n] = m[k][j];
        host_matched[k + j * n] = hm[k][j];
      }
    }
  }
  pool_setup_free(&setup);
  if (rc == 0 && out->r.storage) {  /* the comparison: each instance with its own device and host tiers only */
    replay_options priv_opts = *o;
    priv_opts.storage = NULL;
    priv_opts.no_storage = 1;
    rc = run_group(&priv_opts, t, subs, "private", priv, &setup, NULL, NULL);
    pool_setup_free(&setup);
    if (rc == 0) {
      replay_result sum;
      sum_results(priv, n, &sum);
      out->private_matched_tokens = sum.matched_tokens;
      out->private_token_hit_ratio = sum.token_hit_ratio;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    if (subs != NULL) trace_free_split(&subs[k]);
    if (m != NULL) free(m[k]);
    if (hm != NULL) free(hm[k]);
  }
  free(subs);
  free(priv);
  free(m);
  free(hm);
  return rc;
}

/* mkdir -p. */
static int make_dirs(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return 1;
  for (char *p = buf + 1;; ++p) {
    const char c = *p;
    if (c == '/' || c == '\0') {
      *p = '\0';
      if (mkdir(buf, 0777) != 0 && errno != EEXIST) return 1;
      *p = c;
    }
    if (c == '\0') return 0;
  }
}

/* --per-request: one line per request, trace order (the format of SGLang's replay files);
 * with a host tier (host_matched not NULL) each line is "matched host_hit". */
static int write_per_request(const char *path, const uint64_t *matched, const uint64_t *host_matched, size_t n) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (host_matched != NULL) fprintf(f, "%" PRIu64 " %" PRIu64 "\n", matched[i], host_matched[i]);
    else fprintf(f, "%" PRIu64 "\n", matched[i]);
  }
  if (fclose(f) != 0) {
    fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* --sweep with --host-capacity-tokens: the capacities that get a second run with the tier. */
static int host_run_at(const replay_options *o, uint64_t capacity) {
  return o->host_capacity != 0 && capacity != CAPACITY_UNBOUNDED && capacity < o->host_capacity &&
         o->host_capacity <= 1000 * capacity;
}

static int sweep(const replay_options *o, const trace *t) {
  /* Ascending, distinct, and always ending with the unbounded ceiling; with a host tier,
   * each capacity below it is followed by its run with the tier. */
  uint64_t *caps = malloc((o->sweep_len + 1) * sizeof *caps);
  run_summary *runs = calloc(2 * o->sweep_len + 1, sizeof *runs);
  if (caps == NULL || runs == NULL) return 1;
  memcpy(caps, o->sweep, o->sweep_len * sizeof *caps);
  qsort(caps, o->sweep_len, sizeof *caps, cmp_u64);
  size_t n = 0;
  for (size_t i = 0; i < o->sweep_len; ++i) {
    if (caps[i] != CAPACITY_UNBOUNDED && (n == 0 || caps[n - 1] != caps[i])) caps[n++] = caps[i];
  }
  caps[n++] = CAPACITY_UNBOUNDED;
  size_t total = n;
  for (size_t i = 0; i < n; ++i) total += (size_t)host_run_at(o, caps[i]);
  int rc = 0;
  size_t done = 0;
  for (size_t i = 0; i < n && rc == 0; ++i) {
    for (int host = 0; host <= host_run_at(o, caps[i]) && rc == 0; ++host) {
      char label[64];
      snprintf(label, sizeof label, "sweep %zu/%zu%s", done + 1, total, host ? " +host" : "");
      rc = run_one(o, t, caps[i], host ? o->host_capacity : 0, label, &runs[done], NULL, NULL);
      ++done;
    }
  }
  n = done;
  char csv[4200], svg[4200];
  snprintf(csv, sizeof csv, "%s/sweep.csv", o->out_dir);
  snprintf(svg, sizeof svg, "%s/sweep.svg", o->out_dir);
  if (rc == 0 && make_dirs(o->out_dir) != 0) {
    fprintf(stderr, PROG ": cannot create %s: %s\n", o->out_dir, strerror(errno));
    rc = 1;
  }
  if (rc == 0 && report_csv(csv, runs, n) != 0) {
    fprintf(stderr, PROG ": cannot write %s: %s\n", csv, strerror(errno));
    rc = 1;
  }
  if (rc == 0 && svg_plot_sweep(svg, runs, n) != 0) {
    fprintf(stderr, PROG ": cannot write %s: %s\n", svg, strerror(errno));
    rc = 1;
  }
  if (rc == 0 && o->json) {
    printf("{\"sweep\": [");
    for (size_t i = 0; i < n; ++i) {
      if (i) printf(",\n  ");
      report_json(stdout, &runs[i]);
    }
    printf("],\n \"csv\": \"%s\", \"svg\": \"%s\"}\n", csv, svg);
  } else if (rc == 0) {
    report_sweep_text(stdout, runs, n);
    printf("wrote %s and %s\n", csv, svg);
  }
  free(caps);
  free(runs);
  return rc;
}

int main(int argc, char **argv) {
  replay_options o;
  const int parsed = options_parse(argc, argv, &o);
  if (parsed != 0) {
    options_free(&o);
    return parsed == 1 ? 0 : 2;
  }
  if (kvpool_version() < KVPOOL_VERSION_NUMBER) {
    fprintf(stderr, PROG ": library %s is older than its headers %s\n", kvpool_version_string(),
            KVPOOL_VERSION_STRING);
    options_free(&o);
    return 1;
  }
  trace t;
  char err[1024];
  if (trace_load(o.trace_path, o.max_requests, &t, err, sizeof err)) {
    fprintf(stderr, PROG ": %s\n", err);
    options_free(&o);
    return 1;
  }
  if (o.prompts_only) trace_drop_outputs(&t);
  int rc;
  if (o.sweep != NULL) {
    rc = sweep(&o, &t);
  } else {
    run_summary s;
    uint64_t *matched = NULL, *host_matched = NULL;
    if (o.per_request != NULL && ((matched = calloc(t.num_reqs ? t.num_reqs : 1, sizeof *matched)) == NULL ||
                                  (host_matched = calloc(t.num_reqs ? t.num_reqs : 1, sizeof *host_matched)) == NULL)) {
      fprintf(stderr, PROG ": out of memory\n");
      free(matched);
      trace_free(&t);
      options_free(&o);
      return 1;
    }
    replay_result *results = NULL;
    if (o.instances > 1) {
      results = calloc(o.instances, sizeof *results);
      rc = results == NULL ? (fprintf(stderr, PROG ": out of memory\n"), 1)
                           : run_instances(&o, &t, &s, results, matched, host_matched);
    } else {
      rc = run_one(&o, &t, o.capacity, o.host_capacity, "replay", &s, matched, host_matched);
    }
    if (rc == 0 && matched != NULL) {
      rc = write_per_request(o.per_request, matched, s.r.host_tier ? host_matched : NULL, t.num_reqs);
    }
    free(matched);
    free(host_matched);
    if (rc == 0 && o.json) {
      report_json(stdout, &s);
      putchar('\n');
    } else if (rc == 0) {
      report_text(stdout, &s);
    }
    free(results);
  }
  trace_free(&t);
  options_free(&o);
  return rc;
}
