/*
 * kvpool-plan: print the sizing of one or more kvpool configurations
 * (bytes per token, token capacity, request rows, memory), using only the
 * public C API. With --gpu or --gpu-memory, size them for one GPU as SGLang's
 * server arguments would, beside kvpool_plan() of the same budget.
 *
 *   kvpool-plan [--json] [GPU OPTIONS] CONFIG.json [CONFIG.json ...]
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_sizing.h"
#include "kvpool/kvpool.h"
#include "plan_gpu.h"

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

static void usage(FILE *f, const char *prog) {
  size_t count = 0;
  const gpu_spec *gpus = gpu_table(&count);
  fprintf(f,
          "usage: %s [--json] [GPU OPTIONS] CONFIG.json [CONFIG.json ...]\n"
          "Prints the sizing of kvpool configurations (docs/config.md, \"Sizing\").\n"
          "\n"
          "  --json                    one JSON object per configuration, in an array\n"
          "\n"
          "GPU options (docs/services.md, \"Sizing for a GPU\"): size each configuration for one GPU\n"
          "as SGLang's server arguments would, beside kvpool_plan() of the same KV budget.\n"
          "  --gpu NAME                a GPU of the built-in table:",
          prog);
  for (size_t i = 0; i < count; ++i) fprintf(f, " %s", gpus[i].name);
  fprintf(f,
          "\n"
          "  --gpu-memory GIB          or the GPU's memory by hand, in GiB\n"
          "  --tp N                    tensor-parallel ranks (default: the config's parallel.tp_size)\n"
          "  --weights-gib GIB         weights of all ranks together (default: the built-in table,\n"
          "                            keyed on the config's model.name)\n"
          "  --params BILLIONS         or parameters, with --weight-bits BITS (default 16)\n"
          "  --vision LAYERS,HIDDEN    the vision tower (default: the table's), or --no-vision\n"
          "  --chunked-prefill-size N  as SGLang's flag (default: by GPU memory)\n"
          "  --cuda-graph-max-bs N     as SGLang's flag (default: by GPU memory and tp)\n"
          "  --mem-fraction-static F   as SGLang's flag (default: derived from the reserve)\n");
}

/* A whole, finite, positive number, at most `max`. */
static int parse_positive(const char *text, double max, double *out) {
  char *end = NULL;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0' || !isfinite(v) || v <= 0 || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_count(const char *text, long max, long *out) {
  double v = 0;
  if (parse_positive(text, (double)max, &v) != 0 || v != floor(v)) return -1;
  *out = (long)v;
  return 0;
}

static int parse_vision(const char *text, gpu_options *opt) {
  char extra = 0;
  int layers = 0, hidden = 0;
  if (sscanf(text, "%d,%d%c", &layers, &hidden, &extra) != 2 || layers < 1 || layers > 1000 || hidden < 1 ||
      hidden > 100000) {
    return -1;
  }
  opt->vision_layers = layers;
  opt->vision_hidden = hidden;
  return 0;
}

/* Parses argv; config paths are left in argv order (files[i] nonzero). Returns 0 or 2 (usage error). */
static int parse_options(int argc, char **argv, int *json, gpu_options *opt, char *is_file, int *files) {
  for (int i = 1; i < argc; ++i) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (strcmp(arg, "--json") == 0) {
      *json = 1;
      continue;
    }
    if (strncmp(arg, "--", 2) != 0) {
      is_file[i] = 1;
      ++*files;
      continue;
    }
    if (strcmp(arg, "--no-vision") == 0) {
      opt->no_vision = 1;
      continue;
    }
    if (value == NULL) {
      fprintf(stderr, "kvpool-plan: %s: unknown option or missing value\n", arg);
      return 2;
    }
    if (strcmp(arg, "--gpu") == 0) {
      opt->gpu_name = value;
      if (gpu_find(value) == NULL) {
        size_t count = 0;
        const gpu_spec *gpus = gpu_table(&count);
        fprintf(stderr, "kvpool-plan: --gpu: unknown GPU \"%s\", expected one of:", value);
        for (size_t k = 0; k < count; ++k) fprintf(stderr, " %s", gpus[k].name);
        fprintf(stderr, " (or --gpu-memory GIB)\n");
        return 2;
      }
    } else if (strcmp(arg, "--gpu-memory") == 0) {
      bad = parse_positive(value, 1 << 20, &opt->gpu_memory_gib);
    } else if (strcmp(arg, "--tp") == 0) {
      bad = parse_count(value, 4096, &opt->tp_size);
    } else if (strcmp(arg, "--weights-gib") == 0) {
      bad = parse_positive(value, 1 << 24, &opt->weights_gib);
    } else if (strcmp(arg, "--params") == 0) {
      bad = parse_positive(value, 1e6, &opt->params_billion);
    } else if (strcmp(arg, "--weight-bits") == 0) {
      bad = parse_positive(value, 64, &opt->weight_bits);
    } else if (strcmp(arg, "--vision") == 0) {
      bad = parse_vision(value, opt);
    } else if (strcmp(arg, "--chunked-prefill-size") == 0) {
      bad = parse_count(value, 1L << 24, &opt->chunked_prefill_size);
    } else if (strcmp(arg, "--cuda-graph-max-bs") == 0) {
      bad = parse_count(value, 1L << 20, &opt->cuda_graph_max_bs);
    } else if (strcmp(arg, "--mem-fraction-static") == 0) {
      bad = parse_positive(value, 1, &opt->mem_fraction_static) || opt->mem_fraction_static >= 1;
    } else {
      fprintf(stderr, "kvpool-plan: %s: unknown option\n", arg);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "kvpool-plan: %s: bad value \"%s\" (see --help)\n", arg, value);
      return 2;
    }
    ++i;
  }
  const int gpu = opt->gpu_name != NULL || opt->gpu_memory_gib > 0;
  if (opt->gpu_name != NULL && opt->gpu_memory_gib > 0) {
    fprintf(stderr, "kvpool-plan: --gpu and --gpu-memory: give one of them\n");
    return 2;
  }
  const int gpu_only = opt->tp_size > 0 || opt->weights_gib > 0 || opt->params_billion > 0 || opt->weight_bits > 0 ||
                       opt->no_vision || opt->vision_layers > 0 || opt->chunked_prefill_size > 0 ||
                       opt->cuda_graph_max_bs > 0 || opt->mem_fraction_static > 0;
  if (gpu_only && !gpu) {
    fprintf(stderr, "kvpool-plan: GPU options need --gpu NAME or --gpu-memory GIB\n");
    return 2;
  }
  if (opt->weights_gib > 0 && opt->params_billion > 0) {
    fprintf(stderr, "kvpool-plan: --weights-gib and --params: give one of them\n");
    return 2;
  }
  if (opt->weight_bits > 0 && opt->params_billion <= 0) {
    fprintf(stderr, "kvpool-plan: --weight-bits needs --params\n");
    return 2;
  }
  if (opt->no_vision && opt->vision_layers > 0) {
    fprintf(stderr, "kvpool-plan: --vision and --no-vision: give one of them\n");
    return 2;
  }
  if (opt->weight_bits <= 0) opt->weight_bits = 16;
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout, argv[0]);
      return 0;
    }
  }
  int json = 0, files = 0, failed = 0;
  gpu_options opt = {0};
  char *is_file = calloc((size_t)argc, 1);
  if (is_file == NULL) return 1;
  if (parse_options(argc, argv, &json, &opt, is_file, &files) != 0) {
    free(is_file);
    return 2;
  }
  if (files == 0) {
    free(is_file);
    usage(stderr, argv[0]);
    return 2;
  }
  const int gpu = opt.gpu_name != NULL || opt.gpu_memory_gib > 0;
  if (kvpool_version() < KVPOOL_VERSION_NUMBER) {
    fprintf(stderr, "kvpool-plan: library %s is older than its headers %s\n", kvpool_version_string(),
            KVPOOL_VERSION_STRING);
    free(is_file);
    return 1;
  }
  if (json) printf("[");
  int first = 1;
  for (int i = 1; i < argc; ++i) {
    if (!is_file[i]) continue;
    size_t len = 0;
    char *text = read_file(argv[i], &len);
    if (text == NULL) {
      fprintf(stderr, "kvpool-plan: cannot read %s\n", argv[i]);
      failed = 1;
      continue;
    }
    if (gpu) {
      const int bad = plan_gpu_report(argv[i], text, len, &opt, json, first);
      free(text);
      failed |= bad;
      if (!bad) first = 0;
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
  free(is_file);
  return failed;
}
