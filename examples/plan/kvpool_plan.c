/*
 * kvpool-plan: print the sizing of one or more kvpool configurations
 * (bytes per token, token capacity, request rows, memory), using only the
 * public C API.
 *
 *   kvpool-plan [--json] CONFIG.json [CONFIG.json ...]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvpool/kvpool.h"

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (bigger == NULL) free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  *len = n;
  return buf;
}

static double gib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0 * 1024.0); }

static void print_text(const char *path, const kvpool_plan_info *p) {
  printf("%s\n", path);
  printf("  kv bytes/token        %" PRIu64 "\n", p->kv_bytes_per_token);
  if (p->swa_bytes_per_token > 0) {
    printf("  full / swa bytes/tok  %" PRIu64 " / %" PRIu64 "\n", p->full_bytes_per_token, p->swa_bytes_per_token);
  }
  printf("  page size             %" PRIu32 "\n", p->page_size);
  printf("  max total tokens      %" PRIu64 " (%" PRIu64 " pages)\n", p->max_total_tokens, p->num_pages);
  if (p->swa_tokens > 0) printf("  swa tokens            %" PRIu64 "\n", p->swa_tokens);
  printf("  layers / kv heads     %" PRIu32 " / %" PRIu32 " per rank\n", p->num_layers, p->kv_heads_per_rank);
  printf("  running requests      %" PRIu32 " (table %" PRIu32 " rows x %" PRIu32 ")\n", p->max_running_requests,
         p->req_rows, p->max_context_len);
  if (p->mamba_slots > 0) {
    printf("  mamba                 %" PRIu32 " layers, %" PRIu64 " slots x %" PRIu64 " bytes\n", p->mamba_layers,
           p->mamba_slots, p->mamba_state_bytes);
  }
  printf("  memory                kv %.3f GiB + table %.3f GiB + mamba %.3f GiB = %.3f GiB\n",
         gib(p->kv_memory_bytes), gib(p->req_table_bytes), gib(p->mamba_memory_bytes), gib(p->total_memory_bytes));
}

static void print_json(const char *path, const kvpool_plan_info *p, int first) {
  printf("%s{\"config\": \"%s\", \"kv_bytes_per_token\": %" PRIu64 ", \"full_bytes_per_token\": %" PRIu64
         ", \"swa_bytes_per_token\": %" PRIu64 ", \"page_size\": %" PRIu32 ", \"max_total_tokens\": %" PRIu64
         ", \"swa_tokens\": %" PRIu64 ", \"num_pages\": %" PRIu64 ", \"num_layers\": %" PRIu32
         ", \"kv_heads_per_rank\": %" PRIu32 ", \"max_running_requests\": %" PRIu32 ", \"req_rows\": %" PRIu32
         ", \"max_context_len\": %" PRIu32 ", \"mamba_layers\": %" PRIu32 ", \"mamba_slots\": %" PRIu64
         ", \"mamba_state_bytes\": %" PRIu64 ", \"kv_memory_bytes\": %" PRIu64 ", \"req_table_bytes\": %" PRIu64
         ", \"mamba_memory_bytes\": %" PRIu64 ", \"total_memory_bytes\": %" PRIu64 "}",
         first ? "" : ",\n ", path, p->kv_bytes_per_token, p->full_bytes_per_token, p->swa_bytes_per_token,
         p->page_size, p->max_total_tokens, p->swa_tokens, p->num_pages, p->num_layers, p->kv_heads_per_rank,
         p->max_running_requests, p->req_rows, p->max_context_len, p->mamba_layers, p->mamba_slots,
         p->mamba_state_bytes, p->kv_memory_bytes, p->req_table_bytes, p->mamba_memory_bytes, p->total_memory_bytes);
}

int main(int argc, char **argv) {
  int json = 0, files = 0, failed = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: %s [--json] CONFIG.json [CONFIG.json ...]\n", argv[0]);
      return 0;
    } else ++files;
  }
  if (files == 0) {
    fprintf(stderr, "usage: %s [--json] CONFIG.json [CONFIG.json ...]\n", argv[0]);
    return 2;
  }
  if (kvpool_version() < KVPOOL_VERSION_NUMBER) {
    fprintf(stderr, "kvpool-plan: library %s is older than its headers %s\n", kvpool_version_string(),
            KVPOOL_VERSION_STRING);
    return 1;
  }
  if (json) printf("[");
  int first = 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) continue;
    size_t len = 0;
    char *text = read_file(argv[i], &len);
    if (text == NULL) {
      fprintf(stderr, "kvpool-plan: cannot read %s\n", argv[i]);
      failed = 1;
      continue;
    }
    kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
    kvpool_status st = kvpool_plan(text, len, &plan);
    free(text);
    if (st != KVPOOL_OK) {
      fprintf(stderr, "kvpool-plan: %s: %s: %s\n", argv[i], kvpool_status_string(st), kvpool_last_error());
      failed = 1;
      continue;
    }
    if (json) print_json(argv[i], &plan, first);
    else print_text(argv[i], &plan);
    first = 0;
  }
  if (json) printf("]\n");
  return failed;
}
