/* Building the replay's pool configuration with cJSON (docs/config.md lists the keys). */
#include "pool_config.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One layer, one KV head of one element in f16: 4 bytes per token, so even an
 * unbounded pool for the whole trace is a few hundred MB of untouched calloc'ed memory. */
static const char kTinyModel[] =
    "{\"version\": 1,"
    " \"model\": {\"name\": \"replay-tiny\", \"num_layers\": 1, \"attention\": \"mha\", \"kv_heads\": 1, \"head_dim\": 1},"
    " \"pool\": {\"device\": \"cpu\", \"kv_dtype\": \"f16\", \"page_size\": 16},"
    " \"prefix_cache\": {\"kind\": \"radix\", \"eviction\": \"lru\"}}";

static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return 1;
}

uint64_t pool_unbounded_capacity(const trace *t, uint32_t page_size) {
  uint64_t tokens = 0;
  for (size_t i = 0; i < t->num_reqs; ++i) {
    const uint64_t len = (uint64_t)t->reqs[i].input_len + t->reqs[i].output_len;
    tokens += ((len + page_size - 1) / page_size + 1) * page_size;
  }
  return tokens;
}

/* obj[key] = number, replacing any previous value. */
static int set_number(cJSON *obj, const char *key, double v) {
  cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
  return cJSON_AddNumberToObject(obj, key, v) != NULL;
}

static cJSON *get_or_add_object(cJSON *root, const char *key) {
  cJSON *o = cJSON_GetObjectItemCaseSensitive(root, key);
  return cJSON_IsObject(o) ? o : cJSON_AddObjectToObject(root, key);
}

static uint32_t get_u32(const cJSON *obj, const char *key, uint32_t fallback) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNumber(v) && v->valuedouble >= 1 ? (uint32_t)v->valuedouble : fallback;
}

static int set_string(cJSON *obj, const char *key, const char *v) {
  cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
  return cJSON_AddStringToObject(obj, key, v) != NULL;
}

/* host_cache sized to host_capacity tokens over a device pool of device_tokens (whole pages):
 * ratio = host / device, write_policy from the flag (else the config's, else write_through),
 * headroom_bytes the config's, else REPLAY_HOST_HEADROOM_BYTES. */
static int apply_host(const replay_options *o, cJSON *root, uint64_t device_tokens, uint64_t host_capacity,
                      char *err, size_t err_cap) {
  if (device_tokens == 0) {
    return fail(err, err_cap, "--host-capacity-tokens needs a token capacity (--capacity-tokens, or "
                              "pool.max_total_tokens in the config)");
  }
  if (host_capacity <= device_tokens) {
    return fail(err, err_cap, "--host-capacity-tokens %llu is not larger than the device capacity %llu",
                (unsigned long long)host_capacity, (unsigned long long)device_tokens);
  }
  if (host_capacity > 1000 * device_tokens) {
    return fail(err, err_cap, "--host-capacity-tokens %llu exceeds 1000 x the device capacity %llu (host_cache.ratio)",
                (unsigned long long)host_capacity, (unsigned long long)device_tokens);
  }
  cJSON *host = get_or_add_object(root, "host_cache");
  if (host == NULL) return fail(err, err_cap, "out of memory");
  /* kvpool takes floor(device x ratio): half a token more keeps binary rounding from losing one. */
  double ratio = ((double)host_capacity + 0.5) / (double)device_tokens;
  if (ratio > 1000.0) ratio = 1000.0;
  cJSON_DeleteItemFromObjectCaseSensitive(host, "size_bytes");
  int ok = set_number(host, "ratio", ratio);
  if (o->host_write_policy != NULL) ok = ok && set_string(host, "write_policy", o->host_write_policy);
  if (!cJSON_HasObjectItem(host, "headroom_bytes")) {
    ok = ok && set_number(host, "headroom_bytes", (double)REPLAY_HOST_HEADROOM_BYTES);
  }
  return ok ? 0 : fail(err, err_cap, "out of memory");
}

/* storage from --storage SPEC: "file:DIR", or "memcached:" / "redis:" and a comma-separated
 * list of HOST:PORT. Needs a host tier (the storage tier sits below it). When the config's
 * storage section names the same backend, its other keys (timeout_ms, retry_timeout_s,
 * replicas, prefetch_*) stay and SPEC replaces only the location; otherwise SPEC replaces
 * the whole section (another backend's keys would not parse). */
static int apply_storage(const char *spec, cJSON *root, char *err, size_t err_cap) {
  if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "host_cache"))) {
    return fail(err, err_cap, "--storage needs a host tier (--host-capacity-tokens, or host_cache in --config)");
  }
  const char *colon = strchr(spec, ':');
  char backend[16];
  snprintf(backend, sizeof backend, "%.*s", (int)(colon - spec), spec);
  cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "storage");
  const cJSON *had = cJSON_IsObject(st) ? cJSON_GetObjectItemCaseSensitive(st, "backend") : NULL;
  if (cJSON_IsString(had) && strcmp(had->valuestring, backend) == 0) {
    cJSON_DeleteItemFromObjectCaseSensitive(st, "path");
    cJSON_DeleteItemFromObjectCaseSensitive(st, "servers");
  } else {
    cJSON_DeleteItemFromObjectCaseSensitive(root, "storage");
    st = get_or_add_object(root, "storage");
  }
  if (st == NULL) return fail(err, err_cap, "out of memory");
  int ok = set_string(st, "backend", backend);
  if (strcmp(backend, "file") == 0) {
    ok = ok && set_string(st, "path", colon + 1);
  } else {
    cJSON *servers = cJSON_AddArrayToObject(st, "servers");
    ok = ok && servers != NULL;
    for (const char *at = colon + 1; ok && *at != '\0';) {
      const char *end = strchr(at, ',');
      const size_t len = end ? (size_t)(end - at) : strlen(at);
      char server[256];
      if (len == 0 || len >= sizeof server) return fail(err, err_cap, "--storage: bad server list in %s", spec);
      snprintf(server, sizeof server, "%.*s", (int)len, at);
      ok = cJSON_AddItemToArray(servers, cJSON_CreateString(server));
      at += len + (end ? 1 : 0);
    }
  }
  return ok ? 0 : fail(err, err_cap, "out of memory");
}

/* Fills the pool and prefix_cache keys the replay controls. */
static int apply(const replay_options *o, const trace *t, uint64_t capacity, uint64_t host_capacity, cJSON *root,
                 pool_setup *out, char *err, size_t err_cap) {
  cJSON *pool = get_or_add_object(root, "pool");
  cJSON *cache = get_or_add_object(root, "prefix_cache");
  if (pool == NULL || cache == NULL) return fail(err, err_cap, "out of memory");
  /* docs/config.md: page_size defaults to 1 when the config leaves it out. */
  out->page_size = o->page_size ? o->page_size : get_u32(pool, "page_size", 1);
  if (capacity == 0 && o->config_path == NULL) capacity = CAPACITY_UNBOUNDED;
  out->unbounded = capacity == CAPACITY_UNBOUNDED;
  if (out->unbounded) capacity = pool_unbounded_capacity(t, out->page_size);
  int ok = set_number(pool, "page_size", out->page_size);
  if (capacity != 0) {
    /* An exact token count: a memory budget would only lower it. */
    cJSON_DeleteItemFromObjectCaseSensitive(pool, "memory_bytes");
    cJSON_DeleteItemFromObjectCaseSensitive(pool, "mem_fraction");
    ok = ok && set_number(pool, "max_total_tokens", (double)capacity);
  }
  /* Each running request needs a row, and rows must hold the longest request. */
  if (get_u32(pool, "max_running_requests", 0) < o->concurrency) {
    ok = ok && set_number(pool, "max_running_requests", o->concurrency);
  }
  if (get_u32(pool, "max_context_len", 0) < t->max_context) {
    ok = ok && set_number(pool, "max_context_len", t->max_context);
  }
  if (o->policy != NULL) {
    cJSON_DeleteItemFromObjectCaseSensitive(cache, "eviction");
    ok = ok && cJSON_AddStringToObject(cache, "eviction", o->policy) != NULL;
  }
  if (o->evict_rule != NULL) {
    cJSON_DeleteItemFromObjectCaseSensitive(cache, "evict_rule");
    ok = ok && cJSON_AddStringToObject(cache, "evict_rule", o->evict_rule) != NULL;
  }
  /* Nothing drains KV events during a replay; the queue would only grow. */
  cJSON_DeleteItemFromObjectCaseSensitive(cache, "events");
  if (!ok) return fail(err, err_cap, "out of memory");
  if (host_capacity != 0) {
    if (out->unbounded) return fail(err, err_cap, "--host-capacity-tokens needs a bounded device capacity");
    /* The device capacity kvpool will use: max_total_tokens in whole pages. */
    const cJSON *max_tokens = cJSON_GetObjectItemCaseSensitive(pool, "max_total_tokens");
    const uint64_t tokens = cJSON_IsNumber(max_tokens) && max_tokens->valuedouble >= 1 ? (uint64_t)max_tokens->valuedouble : 0;
    if (apply_host(o, root, tokens - tokens % out->page_size, host_capacity, err, err_cap)) return 1;
  }
  if (o->storage != NULL && apply_storage(o->storage, root, err, err_cap)) return 1;
  if (o->no_storage) cJSON_DeleteItemFromObjectCaseSensitive(root, "storage");
  const cJSON *host = cJSON_GetObjectItemCaseSensitive(root, "host_cache");
  out->host_tier = cJSON_IsObject(host);
  if (out->host_tier) {
    const cJSON *wp = cJSON_GetObjectItemCaseSensitive(host, "write_policy");
    snprintf(out->host_write_policy, sizeof out->host_write_policy, "%s",
             cJSON_IsString(wp) ? wp->valuestring : "write_through");
  }

  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(cache, "kind");
  const cJSON *policy = cJSON_GetObjectItemCaseSensitive(cache, "eviction");
  const char *name = "lru";
  if (cJSON_IsString(kind) && strcmp(kind->valuestring, "radix") != 0) name = kind->valuestring;
  else if (cJSON_IsString(policy)) name = policy->valuestring;
  snprintf(out->policy, sizeof out->policy, "%s", name);
  const cJSON *rule = cJSON_GetObjectItemCaseSensitive(cache, "evict_rule");
  out->sglang_evict_rule = cJSON_IsString(rule) && strcmp(rule->valuestring, "sglang") == 0;
  return 0;
}

int pool_config_build(const replay_options *o, const trace *t, uint64_t capacity, uint64_t host_capacity,
                      pool_setup *out, char *err, size_t err_cap) {
  memset(out, 0, sizeof *out);
  char *text = NULL;
  if (o->config_path != NULL) {
    size_t text_len = 0;
    text = read_whole_file(o->config_path, &text_len);
    if (text == NULL) return fail(err, err_cap, "cannot read %s", o->config_path);
  }
  cJSON *root = cJSON_Parse(text ? text : kTinyModel);
  free(text);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return fail(err, err_cap, "%s: not a JSON object", o->config_path ? o->config_path : "built-in config");
  }
  int rc = apply(o, t, capacity, host_capacity, root, out, err, err_cap);
  if (rc == 0) {
    out->json = cJSON_PrintUnformatted(root);
    if (out->json == NULL) rc = fail(err, err_cap, "out of memory");
  }
  cJSON_Delete(root);
  return rc;
}

void pool_setup_free(pool_setup *s) {
  cJSON_free(s->json);
  s->json = NULL;
}
