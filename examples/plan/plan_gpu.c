/*
 * kvpool-plan --gpu: SGLang's server-args reserve and model-runner budget for
 * one configuration on one GPU, then kvpool_plan() of that budget twice: with
 * the settings SGLang would derive left to it, and with the configuration's own.
 */
#include "plan_gpu.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_sizing.h"
#include "kvpool/kvpool.h"
#include "plan_config.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* The inputs of one configuration's sizing, resolved from the options, the tables and the config. */
typedef struct gpu_setup {
  const char *gpu_label;
  double gpu_mib;           /* server args' view */
  double cuda_total_bytes;  /* model runner's view */
  long tp_size;
  double weights_bytes;     /* all ranks */
  char weights_source[128];
  int vision_layers;
  int vision_hidden;
} gpu_setup;

/* SGLang's pool with its own defaults (max_running_requests etc. derived, not taken from the config). */
typedef struct sglang_pool {
  uint64_t kv_bytes_per_token;
  uint64_t max_total_tokens;
  uint64_t swa_tokens;
  uint64_t mamba_slots;
  uint64_t max_running_requests;
} sglang_pool;

static int fail(const char *path, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "kvpool-plan: %s: ", path);
  vfprintf(stderr, fmt, args);
  fputc('\n', stderr);
  va_end(args);
  return 1;
}

static int resolve_setup(const char *path, const plan_config *c, const gpu_options *opt, gpu_setup *s) {
  gpu_setup r = {0};
  if (opt->gpu_name != NULL) {
    const gpu_spec *gpu = gpu_find(opt->gpu_name);
    if (gpu == NULL) return fail(path, "unknown GPU \"%s\"", opt->gpu_name);
    r.gpu_label = gpu->name;
    r.gpu_mib = gpu->smi_mib;
    r.cuda_total_bytes = gpu->cuda_total_gib * GIB;
  } else {
    r.gpu_label = "manual";
    r.gpu_mib = opt->gpu_memory_gib * 1024.0;
    r.cuda_total_bytes = opt->gpu_memory_gib * GIB;
  }
  r.tp_size = opt->tp_size > 0 ? opt->tp_size : c->tp_size;
  if (r.tp_size < 1) return fail(path, "$.parallel.tp_size: expected a whole number 1..4096 (or pass --tp)");
  const model_spec *model = model_find(c->model_name);
  if (opt->weights_gib > 0) {
    r.weights_bytes = opt->weights_gib * GIB;
    snprintf(r.weights_source, sizeof r.weights_source, "--weights-gib");
  } else if (opt->params_billion > 0) {
    r.weights_bytes = opt->params_billion * 1e9 * opt->weight_bits / 8.0;
    snprintf(r.weights_source, sizeof r.weights_source, "--params %g x %g bits", opt->params_billion,
             opt->weight_bits);
  } else if (model != NULL) {
    r.weights_bytes = model->params_billion * 1e9 * model->bits_per_weight / 8.0;
    snprintf(r.weights_source, sizeof r.weights_source, "built-in table: %g B params x %g bits",
             model->params_billion, model->bits_per_weight);
  } else {
    return fail(path,
                "model \"%s\" is not in the built-in weights table (docs/services.md, \"Sizing for a GPU\"); "
                "pass --weights-gib GIB or --params BILLIONS",
                c->model_name);
  }
  if (opt->vision_layers > 0) {
    r.vision_layers = opt->vision_layers;
    r.vision_hidden = opt->vision_hidden;
  } else if (!opt->no_vision && model != NULL) {
    r.vision_layers = model->vision_layers;
    r.vision_hidden = model->vision_hidden;
  }
  *s = r;
  return 0;
}

static int plan_with_budget(const char *path, const plan_config *c, long tp_size, double budget, int sglang_defaults,
                            kvpool_plan_info *out) {
  char err[256];
  char *text = plan_config_for_gpu(c, tp_size, budget, sglang_defaults, err, sizeof err);
  if (text == NULL) return fail(path, "%s", err);
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  kvpool_status st = kvpool_plan(text, strlen(text), &plan);
  free(text);
  if (st != KVPOOL_OK) {
    return fail(path, "%.2f GiB of KV budget per rank at tp %ld: %s: %s", budget / GIB, tp_size,
                kvpool_status_string(st), kvpool_last_error());
  }
  *out = plan;
  return 0;
}

/* SGLang sizes an fp8 NSA row as kv_lora_rank + qk_rope_head_dim bytes; kvpool allocates the packed row
 * (an fp32 scale per 128 values and a bf16 rope part): SGLang's cell is smaller by the difference. */
static uint64_t sglang_row_shortfall(const plan_config *c) {
  if (strcmp(c->attention, "nsa") != 0 || strcmp(c->kv_dtype, "fp8_e4m3") != 0) return 0;
  return (uint64_t)(c->kv_lora_rank / 128 * 4 + c->qk_rope_head_dim);
}

static void sglang_pool_from(const plan_config *c, const kvpool_plan_info *defaults, double budget,
                             sglang_pool *out) {
  sglang_pool s = {defaults->kv_bytes_per_token, defaults->max_total_tokens, defaults->swa_tokens,
                   defaults->mamba_slots, defaults->max_running_requests};
  const uint64_t shortfall = sglang_row_shortfall(c);
  if (shortfall > 0) {
    s.kv_bytes_per_token -= shortfall * defaults->num_layers;
    s.max_total_tokens = (uint64_t)floor(budget / (double)s.kv_bytes_per_token);
    s.max_total_tokens -= s.max_total_tokens % defaults->page_size;
    s.max_running_requests = sglang_default_running_requests(s.max_total_tokens, defaults->max_context_len);
  }
  *out = s;
}

static void print_json_string(const char *s) {
  putchar('"');
  for (; *s != '\0'; ++s) {
    const unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch < 0x20) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

static void print_kvpool_json(const kvpool_plan_info *p) {
  printf("{\"kv_bytes_per_token\": %" PRIu64 ", \"swa_bytes_per_token\": %" PRIu64 ", \"page_size\": %" PRIu32
         ", \"max_total_tokens\": %" PRIu64 ", \"swa_tokens\": %" PRIu64 ", \"mamba_slots\": %" PRIu64
         ", \"max_running_requests\": %" PRIu32 ", \"max_context_len\": %" PRIu32 ", \"kv_memory_bytes\": %" PRIu64
         ", \"req_table_bytes\": %" PRIu64 ", \"mamba_memory_bytes\": %" PRIu64 ", \"total_memory_bytes\": %" PRIu64
         "}",
         p->kv_bytes_per_token, p->swa_bytes_per_token, p->page_size, p->max_total_tokens, p->swa_tokens,
         p->mamba_slots, p->max_running_requests, p->max_context_len, p->kv_memory_bytes, p->req_table_bytes,
         p->mamba_memory_bytes, p->total_memory_bytes);
}

static void print_json(const char *path, const plan_config *c, const gpu_setup *s, const sglang_reserve *r,
                       const sglang_pool *sg, const kvpool_plan_info *kv, int first) {
  printf("%s{\"config\": ", first ? "" : ",\n ");
  print_json_string(path);
  printf(", \"model\": ");
  print_json_string(c->model_name);
  printf(", \"gpu\": ");
  print_json_string(s->gpu_label);
  printf(", \"gpu_memory_mib\": %.15g, \"cuda_total_bytes\": %.0f, \"tp_size\": %ld, \"pp_size\": 1"
         ", \"weights_bytes\": %.0f, \"weights_per_rank_bytes\": %.0f, \"weights_source\": ",
         s->gpu_mib, s->cuda_total_bytes, s->tp_size, s->weights_bytes, s->weights_bytes / (double)s->tp_size);
  print_json_string(s->weights_source);
  printf(", \"vision_layers\": %d, \"vision_hidden\": %d, \"config_memory_bytes\": %.0f", s->vision_layers,
         s->vision_hidden, c->memory_bytes);
  printf(",\n  \"sglang\": {\"chunked_prefill_size\": %ld, \"cuda_graph_max_bs\": %ld, \"mem_fraction_given\": %s"
         ", \"reserved_mib\": {\"constant\": %.15g, \"activations\": %.15g, \"cuda_graphs\": %.15g"
         ", \"parallel\": %.15g, \"floor_top_up\": %.15g, \"total\": %.15g}"
         ", \"mem_fraction_static_before_vlm\": %.15g, \"vlm_factor\": %.15g, \"mem_fraction_static\": %.15g"
         ", \"static_bytes\": %.0f, \"kv_budget_bytes\": %.0f, \"kv_bytes_per_token\": %" PRIu64
         ", \"max_total_tokens\": %" PRIu64 ", \"swa_tokens\": %" PRIu64 ", \"mamba_slots\": %" PRIu64
         ", \"max_running_requests\": %" PRIu64 "},\n  \"kvpool\": ",
         r->chunked_prefill_size, r->cuda_graph_max_bs, r->fraction_given ? "true" : "false", r->constant_mib,
         r->activations_mib, r->cuda_graph_mib, r->parallel_mib, r->floor_top_up_mib, r->reserved_mib,
         r->fraction_before_vlm, r->vlm_factor, r->mem_fraction_static, r->static_bytes, r->kv_budget_bytes,
         sg->kv_bytes_per_token, sg->max_total_tokens, sg->swa_tokens, sg->mamba_slots, sg->max_running_requests);
  print_kvpool_json(kv);
  printf("}");
}

static void print_row(const char *label, uint64_t sglang, uint64_t kvpool) {
  printf("  %-22s%-25" PRIu64 "%" PRIu64 "\n", label, sglang, kvpool);
}

static void print_text(const char *path, const plan_config *c, const gpu_setup *s, const sglang_reserve *r,
                       const sglang_pool *sg, const kvpool_plan_info *kv) {
  const double per_rank = s->weights_bytes / (double)s->tp_size;
  printf("%s: %s on %s, tp %ld\n", path, c->model_name, s->gpu_label, s->tp_size);
  printf("  gpu memory            %.0f MiB (server args) / %.2f GiB (model runner)\n", s->gpu_mib,
         s->cuda_total_bytes / GIB);
  printf("  weights               %.2f GiB, %.2f GiB per rank (%s)\n", s->weights_bytes / GIB, per_rank / GIB,
         s->weights_source);
  printf("  sglang server args    chunked_prefill_size %ld, cuda_graph_max_bs %ld\n", r->chunked_prefill_size,
         r->cuda_graph_max_bs);
  if (r->fraction_given) {
    printf("  mem_fraction_static   %.3f (given)\n", r->mem_fraction_static);
  } else {
    printf("  reserved              %.0f MiB = %.0f constant + %.0f activations + %.0f cuda graphs + %.0f tp x pp",
           r->reserved_mib, r->constant_mib, r->activations_mib, r->cuda_graph_mib, r->parallel_mib);
    if (r->floor_top_up_mib > 0) printf(" + %.0f up to the 10 GiB floor", r->floor_top_up_mib);
    printf("\n  mem_fraction_static   %.3f", r->fraction_before_vlm);
    if (r->vlm_factor != 1.0) {
      printf(" x %.4f vision factor (ViT %d x %d) = %.4f", r->vlm_factor, s->vision_layers, s->vision_hidden,
             r->mem_fraction_static);
    }
    printf("\n");
  }
  printf("  per rank              static %.2f GiB = weights %.2f GiB + KV budget %.2f GiB; %.2f GiB outside it\n",
         r->static_bytes / GIB, per_rank / GIB, r->kv_budget_bytes / GIB,
         (s->cuda_total_bytes - r->static_bytes) / GIB);
  printf("  %-22s%-25s%s\n", "", "sglang (its defaults)", "kvpool_plan (this config)");
  print_row("kv bytes/token", sg->kv_bytes_per_token, kv->kv_bytes_per_token);
  print_row("max total tokens", sg->max_total_tokens, kv->max_total_tokens);
  if (kv->swa_tokens > 0) print_row("swa tokens", sg->swa_tokens, kv->swa_tokens);
  if (kv->mamba_slots > 0) print_row("mamba slots", sg->mamba_slots, kv->mamba_slots);
  print_row("running requests", sg->max_running_requests, kv->max_running_requests);
  printf("  %-22s%-25s%.2f GiB (kv %.2f + table %.2f + mamba %.2f)\n", "kvpool memory", "",
         kv->total_memory_bytes / GIB, kv->kv_memory_bytes / GIB, kv->req_table_bytes / GIB,
         kv->mamba_memory_bytes / GIB);
  if (c->memory_bytes > r->kv_budget_bytes) {
    printf("  note                  the config's memory_bytes (%.2f GiB) is more than this GPU leaves\n",
           c->memory_bytes / GIB);
  }
}

int plan_gpu_report(const char *path, const char *text, size_t len, const gpu_options *opt, int json, int first) {
  char err[512];
  plan_config c;
  if (plan_config_parse(text, len, &c, err, sizeof err) != 0) return fail(path, "%s", err);
  int failed = 1;
  gpu_setup s;
  sglang_reserve r;
  kvpool_plan_info defaults = KVPOOL_PLAN_INFO_INIT, kv = KVPOOL_PLAN_INFO_INIT;
  if (resolve_setup(path, &c, opt, &s) != 0) goto done;
  const sglang_inputs in = {s.gpu_mib,
                            s.cuda_total_bytes,
                            s.weights_bytes / (double)s.tp_size,
                            (int)s.tp_size,
                            1,
                            opt->chunked_prefill_size,
                            opt->cuda_graph_max_bs,
                            opt->mem_fraction_static,
                            s.vision_layers,
                            s.vision_hidden};
  if (sglang_reserve_compute(&in, &r, err, sizeof err) != 0) {
    fail(path, "%s on %s at tp %ld: %s", c.model_name, s.gpu_label, s.tp_size, err);
    goto done;
  }
  if (plan_with_budget(path, &c, s.tp_size, r.kv_budget_bytes, 1, &defaults) != 0) goto done;
  if (plan_with_budget(path, &c, s.tp_size, r.kv_budget_bytes, 0, &kv) != 0) goto done;
  sglang_pool sg;
  sglang_pool_from(&c, &defaults, r.kv_budget_bytes, &sg);
  if (json) print_json(path, &c, &s, &r, &sg, &kv, first);
  else print_text(path, &c, &s, &r, &sg, &kv);
  failed = 0;
done:
  plan_config_free(&c);
  return failed;
}
