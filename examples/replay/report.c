/* Table, JSON and CSV forms of replay results. docs/replay.md defines each metric. */
#include "report.h"

#include <inttypes.h>
#include <string.h>

const char *report_thousands(uint64_t v, char *buf, size_t cap) {
  char digits[32];
  int n = snprintf(digits, sizeof digits, "%" PRIu64, v);
  size_t o = 0;
  for (int i = 0; i < n && o + 2 < cap; ++i) {
    if (i > 0 && (n - i) % 3 == 0) buf[o++] = ',';
    buf[o++] = digits[i];
  }
  buf[o] = '\0';
  return buf;
}

/* A JSON string literal (paths may hold quotes or backslashes). */
static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *c = (const unsigned char *)s; *c; ++c) {
    if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
    else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
    else fputc(*c, f);
  }
  fputc('"', f);
}

void report_text(FILE *f, const run_summary *s) {
  const replay_result *r = &s->r;
  char a[32], b[32], c[32], d[32], e[32];
  fprintf(f, "kvpool-replay: %s\n", s->trace_path);
  fprintf(f, "  requests          %s (%s blocks of 512 tokens)\n", report_thousands(r->requests, a, sizeof a),
          report_thousands(r->blocks, b, sizeof b));
  fprintf(f, "  tokens            %s prompt + %s output\n", report_thousands(r->input_tokens, a, sizeof a),
          report_thousands(r->output_tokens, b, sizeof b));
  fprintf(f, "  capacity          %s tokens%s, page %" PRIu32 ", policy %s\n",
          report_thousands(r->capacity_tokens, a, sizeof a), s->unbounded ? " (unbounded)" : "", r->page_size,
          s->policy);
  char chunk[48] = "whole-prompt prefill";
  if (s->chunk) snprintf(chunk, sizeof chunk, "prefill chunk %" PRIu32, s->chunk);
  fprintf(f, "  concurrency       %" PRIu32 ", %s, %s admission\n", s->concurrency, chunk,
          s->greedy ? "greedy" : "reserve");
  if (s->instances > 1) {
    fprintf(f, "  instances         %" PRIu32 " (request i on instance i %% %" PRIu32 ", run interleaved%s); figures summed\n",
            s->instances, s->instances, r->storage ? ", one shared store" : "");
  }
  fprintf(f, "  block hit ratio   %.2f%%  (%s of %s blocks)\n", 100.0 * r->block_hit_ratio,
          report_thousands(r->hit_blocks, a, sizeof a), report_thousands(r->blocks, b, sizeof b));
  fprintf(f, "  token hit ratio   %.2f%%  (%s of %s prompt tokens)\n", 100.0 * r->token_hit_ratio,
          report_thousands(r->matched_tokens, a, sizeof a), report_thousands(r->input_tokens, b, sizeof b));
  if (s->instances > 1) {
    fprintf(f, "  private caches    %.2f%%  (%s tokens: the same %" PRIu32 " instances %s)\n",
            100.0 * s->private_token_hit_ratio, report_thousands(s->private_matched_tokens, a, sizeof a), s->instances,
            r->storage ? "without the shared store" : "- no store: the run above");
    for (uint32_t k = 0; k < s->instances; ++k) {
      const replay_result *q = &s->instance_results[k];
      fprintf(f, "    instance %-6" PRIu32 " %.2f%%  (%s matched: %s device, %s host, %s storage)\n", k,
              100.0 * q->token_hit_ratio, report_thousands(q->matched_tokens, a, sizeof a),
              report_thousands(q->device_hit_tokens, b, sizeof b), report_thousands(q->host_hit_tokens, c, sizeof c),
              report_thousands(q->storage_hit_tokens, d, sizeof d));
    }
  }
  if (r->host_tier) {
    const double in = r->input_tokens ? (double)r->input_tokens : 1.0;
    fprintf(f, "  host tier         %s tokens, %s\n", report_thousands(r->host_capacity_tokens, a, sizeof a),
            s->host_write_policy);
    fprintf(f, "    device hits     %.2f%%  (%s tokens)\n", 100.0 * (double)r->device_hit_tokens / in,
            report_thousands(r->device_hit_tokens, a, sizeof a));
    fprintf(f, "    host hits       %.2f%%  (%s tokens loaded back at first admission)\n",
            100.0 * (double)r->host_hit_tokens / in, report_thousands(r->host_hit_tokens, a, sizeof a));
    fprintf(f, "    to host         %s bytes (%s tokens in %s backups; %s skipped)\n",
            report_thousands(r->bytes_to_host, a, sizeof a), report_thousands(r->host_backup_tokens, b, sizeof b),
            report_thousands(r->host_backups, c, sizeof c), report_thousands(r->host_backups_skipped, d, sizeof d));
    fprintf(f, "    to device       %s bytes (%s tokens in %s loads; %s refused)\n",
            report_thousands(r->bytes_to_device, a, sizeof a), report_thousands(r->host_load_tokens, b, sizeof b),
            report_thousands(r->host_loads, c, sizeof c), report_thousands(r->host_loads_refused, d, sizeof d));
    fprintf(f, "    host evicted    %s tokens; at the end %s host tokens, %s host-only\n",
            report_thousands(r->host_evicted_tokens, a, sizeof a), report_thousands(r->host_used_tokens, b, sizeof b),
            report_thousands(r->host_only_tokens, c, sizeof c));
  }
  if (r->storage) {
    const double in = r->input_tokens ? (double)r->input_tokens : 1.0;
    fprintf(f, "  storage tier\n    storage hits    %.2f%%  (%s tokens prefetched and loaded at first admission)\n",
            100.0 * (double)r->storage_hit_tokens / in, report_thousands(r->storage_hit_tokens, a, sizeof a));
    fprintf(f, "    to storage      %s bytes (%s pages)\n", report_thousands(r->storage_bytes_written, a, sizeof a),
            report_thousands(r->storage_backup_pages, b, sizeof b));
    fprintf(f, "    from storage    %s bytes (%s tokens in %s prefetches; %s pages rejected, %s failures)\n",
            report_thousands(r->storage_bytes_read, a, sizeof a), report_thousands(r->storage_prefetch_tokens, b, sizeof b),
            report_thousands(r->storage_prefetches, c, sizeof c), report_thousands(r->storage_pages_rejected, d, sizeof d),
            report_thousands(r->storage_failures, e, sizeof e));
    fprintf(f, "    store faults    %s timeouts, %s server errors, %s servers ejected (%s put, %s get errors)\n",
            report_thousands(r->storage_timeouts, a, sizeof a), report_thousands(r->storage_server_errors, b, sizeof b),
            report_thousands(r->storage_servers_ejected, c, sizeof c), report_thousands(r->storage_put_errors, d, sizeof d),
            report_thousands(r->storage_get_errors, e, sizeof e));
  }
  fprintf(f, "  evicted tokens    %s", report_thousands(r->evicted_tokens, a, sizeof a));
  if (r->host_tier) fprintf(f, " (%s by load-backs)", report_thousands(r->load_evicted_tokens, b, sizeof b));
  fputc('\n', f);
  /* With instances, the sum of each pool's peak against the sum of their capacities. */
  const double capacity = (double)r->capacity_tokens * (s->instances > 1 ? (double)s->instances : 1.0);
  fprintf(f, "  peak used tokens  %s (%.1f%% of capacity%s)\n", report_thousands(r->peak_used_tokens, a, sizeof a),
          capacity > 0 ? 100.0 * (double)r->peak_used_tokens / capacity : 0.0, s->instances > 1 ? ", summed over instances" : "");
  fprintf(f, "  computed tokens   %s prefill + %s decode\n", report_thousands(r->prefill_tokens, a, sizeof a),
          report_thousands(r->decode_tokens, b, sizeof b));
  fprintf(f, "  retractions       %s, oom-skipped requests %s\n", report_thousands(r->retractions, a, sizeof a),
          report_thousands(r->oom_skipped, b, sizeof b));
  fprintf(f, "  steps             %s\n", report_thousands(r->steps, a, sizeof a));
  fprintf(f, "  kvseq operations  %s in %s calls, %s ops/s\n", report_thousands(r->ops, a, sizeof a),
          report_thousands(r->kvseq_calls, b, sizeof b), report_thousands((uint64_t)r->ops_per_second, c, sizeof c));
  fprintf(f, "  wall time         %.2f s\n", r->wall_seconds);
  fprintf(f, "  kvpool_check      OK (%" PRIu64 " check%s)\n", r->checks, r->checks == 1 ? "" : "s");
}

void report_json(FILE *f, const run_summary *s) {
  const replay_result *r = &s->r;
  fputs("{\"trace\": ", f);
  json_string(f, s->trace_path);
  fputs(", \"policy\": ", f);
  json_string(f, s->policy);
  fprintf(f,
          ", \"capacity_tokens\": %" PRIu64 ", \"unbounded\": %s, \"page_size\": %" PRIu32
          ", \"concurrency\": %" PRIu32 ", \"chunk\": %" PRIu32 ", \"admission\": \"%s\", \"requests\": %" PRIu64 ", \"blocks\": %" PRIu64
          ", \"hit_blocks\": %" PRIu64 ", \"block_hit_ratio\": %.6f, \"input_tokens\": %" PRIu64
          ", \"matched_tokens\": %" PRIu64 ", \"token_hit_ratio\": %.6f, \"output_tokens\": %" PRIu64
          ", \"evicted_tokens\": %" PRIu64 ", \"peak_used_tokens\": %" PRIu64 ", \"final_cached_tokens\": %" PRIu64
          ", \"prefill_tokens\": %" PRIu64 ", \"decode_tokens\": %" PRIu64 ", \"retractions\": %" PRIu64
          ", \"oom_skipped\": %" PRIu64 ", \"steps\": %" PRIu64 ", \"kvseq_calls\": %" PRIu64 ", \"ops\": %" PRIu64
          ", \"ops_per_second\": %.0f, \"wall_seconds\": %.3f, \"checks\": %" PRIu64 ", \"check\": \"ok\"",
          r->capacity_tokens, s->unbounded ? "true" : "false", r->page_size, s->concurrency, s->chunk, s->greedy ? "greedy" : "reserve", r->requests,
          r->blocks, r->hit_blocks, r->block_hit_ratio, r->input_tokens, r->matched_tokens, r->token_hit_ratio,
          r->output_tokens, r->evicted_tokens, r->peak_used_tokens, r->final_cached_tokens, r->prefill_tokens,
          r->decode_tokens, r->retractions, r->oom_skipped, r->steps, r->kvseq_calls, r->ops, r->ops_per_second,
          r->wall_seconds, r->checks);
  /* Hits by tier (token_hit_ratio above counts both) and the host tier's figures, 0 without one. */
  fprintf(f,
          ", \"device_hit_tokens\": %" PRIu64 ", \"host_hit_tokens\": %" PRIu64 ", \"bytes_to_host\": %" PRIu64
          ", \"bytes_to_device\": %" PRIu64 ", \"host_tier\": %s, \"host_capacity_tokens\": %" PRIu64
          ", \"host_write_policy\": \"%s\", \"host_backups\": %" PRIu64 ", \"host_backup_tokens\": %" PRIu64
          ", \"host_backups_skipped\": %" PRIu64 ", \"host_loads\": %" PRIu64 ", \"host_load_tokens\": %" PRIu64
          ", \"host_loads_refused\": %" PRIu64 ", \"host_evicted_tokens\": %" PRIu64 ", \"host_used_tokens\": %" PRIu64
          ", \"host_only_tokens\": %" PRIu64 ", \"load_evicted_tokens\": %" PRIu64,
          r->device_hit_tokens, r->host_hit_tokens, r->bytes_to_host, r->bytes_to_device,
          r->host_tier ? "true" : "false", r->host_capacity_tokens, s->host_write_policy, r->host_backups,
          r->host_backup_tokens, r->host_backups_skipped, r->host_loads, r->host_load_tokens, r->host_loads_refused,
          r->host_evicted_tokens, r->host_used_tokens, r->host_only_tokens, r->load_evicted_tokens);
  fprintf(f,
          ", \"storage_hit_tokens\": %" PRIu64 ", \"storage\": %s, \"storage_backup_pages\": %" PRIu64
          ", \"storage_bytes_written\": %" PRIu64 ", \"storage_prefetches\": %" PRIu64
          ", \"storage_prefetch_tokens\": %" PRIu64 ", \"storage_bytes_read\": %" PRIu64
          ", \"storage_pages_rejected\": %" PRIu64 ", \"storage_failures\": %" PRIu64,
          r->storage_hit_tokens, r->storage ? "true" : "false", r->storage_backup_pages, r->storage_bytes_written,
          r->storage_prefetches, r->storage_prefetch_tokens, r->storage_bytes_read, r->storage_pages_rejected,
          r->storage_failures);
  fprintf(f,
          ", \"storage_put_errors\": %" PRIu64 ", \"storage_get_errors\": %" PRIu64 ", \"storage_timeouts\": %" PRIu64
          ", \"storage_server_errors\": %" PRIu64 ", \"storage_servers_ejected\": %" PRIu64,
          r->storage_put_errors, r->storage_get_errors, r->storage_timeouts, r->storage_server_errors,
          r->storage_servers_ejected);
  if (s->instances > 1) {
    fprintf(f, ", \"instances\": %" PRIu32 ", \"private_token_hit_ratio\": %.6f, \"private_matched_tokens\": %" PRIu64
            ", \"instance_hits\": [", s->instances, s->private_token_hit_ratio, s->private_matched_tokens);
    for (uint32_t k = 0; k < s->instances; ++k) {
      const replay_result *q = &s->instance_results[k];
      fprintf(f, "%s{\"requests\": %" PRIu64 ", \"input_tokens\": %" PRIu64 ", \"matched_tokens\": %" PRIu64
              ", \"device_hit_tokens\": %" PRIu64 ", \"host_hit_tokens\": %" PRIu64 ", \"storage_hit_tokens\": %" PRIu64 "}",
              k ? ", " : "", q->requests, q->input_tokens, q->matched_tokens, q->device_hit_tokens, q->host_hit_tokens,
              q->storage_hit_tokens);
    }
    fputc(']', f);
  }
  fputc('}', f);
}

void report_sweep_text(FILE *f, const run_summary *runs, size_t n) {
  if (n == 0) return;
  int host = 0;  /* host-tier columns only when some run has the tier */
  for (size_t i = 0; i < n; ++i) host |= runs[i].r.host_tier;
  fprintf(f, "kvpool-replay sweep: %s (page %" PRIu32 ", policy %s, concurrency %" PRIu32 ")\n", runs[0].trace_path,
          runs[0].r.page_size, runs[0].policy, runs[0].concurrency);
  fprintf(f, "  %15s  ", "capacity");
  if (host) fprintf(f, "%15s  %9s  %9s  ", "host tier", "dev. hit", "host hit");
  fprintf(f, "%9s  %9s  %15s  %15s  %11s  %8s\n", "block hit", "token hit", "evicted tokens", "peak used",
          "retractions", "seconds");
  for (size_t i = 0; i < n; ++i) {
    const replay_result *r = &runs[i].r;
    char a[32], b[32], c[32], d[32];
    fprintf(f, "  %15s  ", report_thousands(r->capacity_tokens, a, sizeof a));
    if (host) {
      const double in = r->input_tokens ? (double)r->input_tokens : 1.0;
      fprintf(f, "%15s  %8.2f%%  %8.2f%%  ", r->host_tier ? report_thousands(r->host_capacity_tokens, a, sizeof a) : "-",
              100.0 * (double)r->device_hit_tokens / in, 100.0 * (double)r->host_hit_tokens / in);
    }
    fprintf(f, "%8.2f%%  %8.2f%%  %15s  %15s  %11s  %8.2f%s\n", 100.0 * r->block_hit_ratio,
            100.0 * r->token_hit_ratio, report_thousands(r->evicted_tokens, b, sizeof b),
            report_thousands(r->peak_used_tokens, c, sizeof c), report_thousands(r->retractions, d, sizeof d),
            r->wall_seconds, runs[i].unbounded ? "  (unbounded)" : "");
  }
}

int report_csv(const char *path, const run_summary *runs, size_t n) {
  FILE *f = fopen(path, "w");
  if (f == NULL) return 1;
  fputs("capacity_tokens,unbounded,page_size,policy,concurrency,block_hit_ratio,token_hit_ratio,hit_blocks,blocks,"
        "matched_tokens,input_tokens,evicted_tokens,peak_used_tokens,retractions,oom_skipped,steps,ops_per_second,"
        "wall_seconds,host_capacity_tokens,device_hit_tokens,host_hit_tokens,bytes_to_host,bytes_to_device\n",
        f);
  for (size_t i = 0; i < n; ++i) {
    const replay_result *r = &runs[i].r;
    fprintf(f,
            "%" PRIu64 ",%d,%" PRIu32 ",%s,%" PRIu32 ",%.6f,%.6f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
            ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.0f,%.3f,%" PRIu64 ",%" PRIu64 ",%" PRIu64
            ",%" PRIu64 ",%" PRIu64 "\n",
            r->capacity_tokens, runs[i].unbounded, r->page_size, runs[i].policy, runs[i].concurrency,
            r->block_hit_ratio, r->token_hit_ratio, r->hit_blocks, r->blocks, r->matched_tokens, r->input_tokens,
            r->evicted_tokens, r->peak_used_tokens, r->retractions, r->oom_skipped, r->steps, r->ops_per_second,
            r->wall_seconds, r->host_capacity_tokens, r->device_hit_tokens, r->host_hit_tokens, r->bytes_to_host,
            r->bytes_to_device);
  }
  return fclose(f) != 0;
}
