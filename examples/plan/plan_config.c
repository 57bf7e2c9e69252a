/* Reading and rewriting a kvpool configuration for kvpool-plan --gpu (cJSON). */
#include "plan_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *string_at(const cJSON *object, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
  return cJSON_IsString(item) ? item->valuestring : "";
}

static double number_at(const cJSON *object, const char *key, double fallback) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
  return cJSON_IsNumber(item) ? item->valuedouble : fallback;
}

int plan_config_parse(const char *text, size_t len, plan_config *out, char *err, size_t err_len) {
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (root == NULL) {
    const char *at = cJSON_GetErrorPtr();
    snprintf(err, err_len, "malformed JSON at byte %ld", at != NULL ? (long)(at - text) : 0L);
    return -1;
  }
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    snprintf(err, err_len, "the configuration is not a JSON object");
    return -1;
  }
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *pool = cJSON_GetObjectItemCaseSensitive(root, "pool");
  const cJSON *parallel = cJSON_GetObjectItemCaseSensitive(root, "parallel");
  plan_config c = {0};
  c.root = root;
  c.model_name = string_at(model, "name");
  c.attention = string_at(model, "attention");
  c.kv_dtype = string_at(pool, "kv_dtype");
  c.kv_lora_rank = (long)number_at(model, "kv_lora_rank", 0);
  c.qk_rope_head_dim = (long)number_at(model, "qk_rope_head_dim", 0);
  const double tp_size = number_at(parallel, "tp_size", 1);
  c.tp_size = tp_size >= 1 && tp_size <= 4096 && tp_size == floor(tp_size) ? (long)tp_size : 0;
  c.memory_bytes = number_at(pool, "memory_bytes", 0);
  *out = c;
  return 0;
}

/* object[key], created empty when absent; NULL when it is there but not an object. */
static cJSON *object_at(cJSON *object, const char *key) {
  cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
  if (item == NULL) item = cJSON_AddObjectToObject(object, key);
  return cJSON_IsObject(item) ? item : NULL;
}

static int set_number(cJSON *object, const char *key, double value) {
  cJSON_DeleteItemFromObjectCaseSensitive(object, key);
  return cJSON_AddNumberToObject(object, key, value) != NULL;
}

/* Mamba shapes are what one rank stores at the config's tp_size; SGLang shards their first dimension
 * (conv channels, SSM heads) over the ranks, so another tp_size rescales it. */
static int rescale_first_dim(cJSON *mamba, const char *key, long from_tp, long to_tp, char *err, size_t err_len) {
  cJSON *shape = cJSON_GetObjectItemCaseSensitive(mamba, key);
  cJSON *first = cJSON_IsArray(shape) ? cJSON_GetArrayItem(shape, 0) : NULL;
  if (!cJSON_IsNumber(first)) return 0;  /* kvpool_plan() reports a malformed shape */
  const double whole = first->valuedouble * (double)from_tp;
  if (fmod(whole, (double)to_tp) != 0) {
    snprintf(err, err_len, "$.model.mamba.%s[0]: %.0f at tp_size %ld does not split over %ld ranks", key,
             first->valuedouble, from_tp, to_tp);
    return -1;
  }
  cJSON_SetNumberValue(first, whole / (double)to_tp);
  return 0;
}

char *plan_config_for_gpu(const plan_config *c, long tp_size, double budget_bytes, int sglang_defaults, char *err,
                          size_t err_len) {
  cJSON *copy = cJSON_Duplicate(c->root, 1);
  if (copy == NULL) {
    snprintf(err, err_len, "out of memory");
    return NULL;
  }
  char *text = NULL;
  cJSON *pool = object_at(copy, "pool");
  cJSON *parallel = object_at(copy, "parallel");
  cJSON *mamba = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(copy, "model"), "mamba");
  if (cJSON_IsObject(mamba) && tp_size != c->tp_size && c->tp_size >= 1 &&
      (rescale_first_dim(mamba, "conv_shape", c->tp_size, tp_size, err, err_len) != 0 ||
       rescale_first_dim(mamba, "ssm_shape", c->tp_size, tp_size, err, err_len) != 0)) {
    cJSON_Delete(copy);
    return NULL;
  }
  /* Keys that are not objects are left for kvpool_plan() to reject with its own message. */
  int ok = 1;
  if (parallel != NULL) {
    ok = ok && set_number(parallel, "tp_size", (double)tp_size) && set_number(parallel, "tp_rank", 0);
  }
  if (pool != NULL) {
    cJSON_DeleteItemFromObjectCaseSensitive(pool, "mem_fraction");
    ok = ok && set_number(pool, "memory_bytes", budget_bytes);
    if (sglang_defaults) {
      cJSON_DeleteItemFromObjectCaseSensitive(pool, "max_running_requests");
      cJSON_DeleteItemFromObjectCaseSensitive(pool, "max_total_tokens");
      cJSON_DeleteItemFromObjectCaseSensitive(pool, "mamba_cache_size");
    }
  }
  if (ok) text = cJSON_PrintUnformatted(copy);
  if (text == NULL) snprintf(err, err_len, "out of memory");
  cJSON_Delete(copy);
  return text;
}

void plan_config_free(plan_config *c) {
  cJSON_Delete(c->root);
  c->root = NULL;
}
