/* Printing replay results: a table for people, JSON and CSV for programs. */
#ifndef KVPOOL_REPLAY_REPORT_H
#define KVPOOL_REPLAY_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "replay.h"

/* A result with the settings that produced it. */
typedef struct run_summary {
  const char *trace_path;
  char policy[16];
  uint32_t concurrency;
  uint32_t chunk;  /* 0 = whole prompt */
  int greedy;      /* --admission greedy */
  int unbounded;
  uint64_t host_requested;     /* --host-capacity-tokens of this run, 0 for none (r.host_capacity_tokens: kvpool's) */
  char host_write_policy[32];  /* the host tier's write policy ("" without one: r.host_tier) */
  replay_result r;             /* with --instances N > 1: summed over the instances (the pooled run) */
  /* --instances N > 1 (instances 1: none of these is reported). */
  uint32_t instances;
  const replay_result *instance_results; /* N results of the pooled run */
  uint64_t private_matched_tokens;       /* the same split without a storage tier (= pooled without --storage) */
  double private_token_hit_ratio;
} run_summary;

void report_text(FILE *f, const run_summary *s);
/* One JSON object (no trailing newline). */
void report_json(FILE *f, const run_summary *s);
void report_sweep_text(FILE *f, const run_summary *runs, size_t n);
/* Writes path; returns nonzero (errno set) if it cannot. */
int report_csv(const char *path, const run_summary *runs, size_t n);

/* "1,234,567": into buf, which it returns. */
const char *report_thousands(uint64_t v, char *buf, size_t cap);

#endif
