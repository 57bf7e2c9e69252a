/*
 * kvpool-plan --gpu: the few fields of a kvpool configuration the GPU sizing
 * reads, and the configuration rewritten for a GPU (tensor-parallel size and
 * the KV budget SGLang would leave), so that kvpool_plan() can size it.
 */
#ifndef KVPOOL_PLAN_PLAN_CONFIG_H
#define KVPOOL_PLAN_PLAN_CONFIG_H

#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct plan_config {
  cJSON *root;
  const char *model_name;  /* model.name, or "" */
  const char *attention;   /* model.attention, or "" */
  const char *kv_dtype;    /* pool.kv_dtype, or "" */
  long kv_lora_rank;       /* model.kv_lora_rank, or 0 */
  long qk_rope_head_dim;   /* model.qk_rope_head_dim, or 0 */
  long tp_size;            /* parallel.tp_size, or 1 (0 when it is not a whole number: kvpool_plan() rejects it) */
  double memory_bytes;     /* pool.memory_bytes as written, or 0 */
} plan_config;

/* Parses `text`; returns 0, or -1 with a message in err (malformed JSON, not an object). */
int plan_config_parse(const char *text, size_t len, plan_config *out, char *err, size_t err_len);

/*
 * The configuration for `tp_size` ranks (this process is rank 0) whose pool gets
 * `budget_bytes` (pool.memory_bytes; pool.mem_fraction dropped). Mamba state
 * shapes, per rank at the config's tp_size, have their first dimension rescaled
 * to `tp_size`. With `sglang_defaults`, also without the settings SGLang would
 * derive itself (max_running_requests, max_total_tokens, mamba_cache_size).
 * Returns JSON text to free(), or NULL with a message in err.
 */
char *plan_config_for_gpu(const plan_config *c, long tp_size, double budget_bytes, int sglang_defaults, char *err,
                          size_t err_len);

void plan_config_free(plan_config *c);

#endif /* KVPOOL_PLAN_PLAN_CONFIG_H */
