/* Loading a Mooncake JSONL trace (one request object per line) with cJSON. */
#include "trace.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prompt ids are h * 512 + t and must stay int32: h < 2^31 / 512. */
#define MAX_BLOCK_ID ((int64_t)(INT32_MAX / (int32_t)TRACE_BLOCK_TOKENS))

static int fail(char *err, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
  return 1;
}

char *read_whole_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1 << 20, n = 0, got;
  char *buf = malloc(cap + 1);
  while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *bigger = realloc(buf, (cap *= 2) + 1);
      if (bigger == NULL) free(buf);
      buf = bigger;
    }
  }
  fclose(f);
  if (buf != NULL) buf[n] = '\0';
  *len = n;
  return buf;
}

/* A JSON number that is a whole value in [lo, hi]. */
static int get_int(const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(v)) return 0;
  double d = v->valuedouble;
  if (d != floor(d) || d < (double)lo || d > (double)hi) return 0;
  *out = (int64_t)d;
  return 1;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 1;
  size_t c = *cap ? *cap : 1024;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (q == NULL) return 0;
  *p = q;
  *cap = c;
  return 1;
}

/* Parses one line into t (appending a request); returns nonzero on error. */
static int parse_line(const char *line, size_t len, size_t lineno, trace *t, size_t *req_cap, size_t *blk_cap,
                      char *err, size_t err_cap) {
  cJSON *obj = cJSON_ParseWithLength(line, len);
  if (!cJSON_IsObject(obj)) {
    cJSON_Delete(obj);
    return fail(err, err_cap, "line %zu: not a JSON object", lineno);
  }
  int64_t ts = 0, in = 0, out = 0;
  int rc = 0;
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(obj, "hash_ids");
  if (!get_int(obj, "timestamp", INT64_MIN / 2, INT64_MAX / 2, &ts)) {
    rc = fail(err, err_cap, "line %zu: \"timestamp\" must be an integer", lineno);
  } else if (!get_int(obj, "input_length", 1, INT32_MAX, &in)) {
    rc = fail(err, err_cap, "line %zu: \"input_length\" must be an integer >= 1", lineno);
  } else if (!get_int(obj, "output_length", 0, INT32_MAX, &out)) {
    rc = fail(err, err_cap, "line %zu: \"output_length\" must be an integer >= 0", lineno);
  } else if (!cJSON_IsArray(ids) ||
             (int64_t)cJSON_GetArraySize(ids) != (in + TRACE_BLOCK_TOKENS - 1) / TRACE_BLOCK_TOKENS) {
    rc = fail(err, err_cap, "line %zu: \"hash_ids\" must be an array of ceil(input_length / 512) = %lld ids",
              lineno, (long long)((in + TRACE_BLOCK_TOKENS - 1) / TRACE_BLOCK_TOKENS));
  } else if (in + out > INT32_MAX) {
    rc = fail(err, err_cap, "line %zu: input_length + output_length is too large", lineno);
  }
  if (rc != 0) {
    cJSON_Delete(obj);
    return rc;
  }
  const size_t nb = (size_t)cJSON_GetArraySize(ids);
  if (!grow((void **)&t->reqs, req_cap, t->num_reqs + 1, sizeof *t->reqs) ||
      !grow((void **)&t->block_ids, blk_cap, t->total_blocks + nb, sizeof *t->block_ids)) {
    cJSON_Delete(obj);
    return fail(err, err_cap, "out of memory");
  }
  size_t k = 0;
  const cJSON *id;
  cJSON_ArrayForEach(id, ids) {
    double d = cJSON_IsNumber(id) ? id->valuedouble : -1.0;
    if (d != floor(d) || d < 0 || d > (double)MAX_BLOCK_ID) {
      cJSON_Delete(obj);
      return fail(err, err_cap, "line %zu: hash_ids[%zu] must be an integer in [0, %lld]", lineno, k,
                  (long long)MAX_BLOCK_ID);
    }
    t->block_ids[t->total_blocks + k++] = (int32_t)d;
    if ((int32_t)d > t->max_block_id) t->max_block_id = (int32_t)d;
  }
  cJSON_Delete(obj);
  trace_request *r = &t->reqs[t->num_reqs++];
  r->timestamp_ms = ts;
  r->input_len = (uint32_t)in;
  r->output_len = (uint32_t)out;
  r->block_off = (size_t)t->total_blocks;
  r->num_blocks = (uint32_t)nb;
  r->output_base = t->output_tokens;
  t->total_blocks += nb;
  t->input_tokens += (uint64_t)in;
  t->output_tokens += (uint64_t)out;
  if ((uint64_t)(in + out) > t->max_context) t->max_context = (uint32_t)(in + out);
  if (t->output_tokens >= (uint64_t)INT32_MAX) return fail(err, err_cap, "line %zu: too many output tokens", lineno);
  return 0;
}

int trace_load(const char *path, size_t max_reqs, trace *out, char *err, size_t err_cap) {
  memset(out, 0, sizeof *out);
  size_t len = 0;
  char *text = read_whole_file(path, &len);
  if (text == NULL) return fail(err, err_cap, "cannot read %s", path);
  size_t req_cap = 0, blk_cap = 0, lineno = 0;
  int rc = 0;
  for (char *p = text; p < text + len && rc == 0;) {
    char *nl = memchr(p, '\n', (size_t)(text + len - p));
    char *end = nl ? nl : text + len;
    ++lineno;
    size_t n = (size_t)(end - p);
    int blank = 1;
    for (size_t i = 0; i < n && blank; ++i) blank = (p[i] == ' ' || p[i] == '\t' || p[i] == '\r');
    if (!blank) {
      if (max_reqs != 0 && out->num_reqs == max_reqs) break;
      rc = parse_line(p, n, lineno, out, &req_cap, &blk_cap, err, err_cap);
    }
    p = end + 1;
  }
  free(text);
  if (rc == 0 && out->num_reqs == 0) rc = fail(err, err_cap, "%s: no requests", path);
  if (rc != 0) trace_free(out);
  return rc;
}

void trace_free(trace *t) {
  free(t->reqs);
  free(t->block_ids);
  memset(t, 0, sizeof *t);
}

int trace_split(const trace *t, size_t n, size_t k, trace *out) {
  memset(out, 0, sizeof *out);
  const size_t count = k < t->num_reqs ? (t->num_reqs - k + n - 1) / n : 0;
  out->reqs = malloc((count ? count : 1) * sizeof *out->reqs);
  if (out->reqs == NULL) return 1;
  out->block_ids = t->block_ids;
  out->max_context = t->max_context;
  out->max_block_id = t->max_block_id;
  for (size_t i = k; i < t->num_reqs; i += n) {
    const trace_request *r = &t->reqs[i];
    out->reqs[out->num_reqs++] = *r;
    out->total_blocks += r->num_blocks;
    out->input_tokens += r->input_len;
    out->output_tokens += r->output_len;
  }
  return 0;
}

void trace_free_split(trace *t) {
  free(t->reqs);
  memset(t, 0, sizeof *t);
}

void trace_drop_outputs(trace *t) {
  uint32_t longest = 0;
  for (size_t i = 0; i < t->num_reqs; ++i) {
    t->reqs[i].output_len = 0;
    t->reqs[i].output_base = 0;
    if (t->reqs[i].input_len > longest) longest = t->reqs[i].input_len;
  }
  t->output_tokens = 0;
  t->max_context = longest;
}

int32_t trace_output_token(const trace *t, size_t i, uint32_t k) {
  return (int32_t)(-1 - (int64_t)(t->reqs[i].output_base + k));
}

void trace_expand(const trace *t, size_t i, uint32_t decoded, int32_t *out) {
  const trace_request *r = &t->reqs[i];
  uint32_t pos = 0;
  for (uint32_t j = 0; j < r->num_blocks && pos < r->input_len; ++j) {
    const int32_t base = t->block_ids[r->block_off + j] * (int32_t)TRACE_BLOCK_TOKENS;
    const uint32_t left = r->input_len - pos;
    const uint32_t count = left < TRACE_BLOCK_TOKENS ? left : TRACE_BLOCK_TOKENS;
    for (uint32_t k = 0; k < count; ++k) out[pos + k] = base + (int32_t)k;  /* vectorisable: no exit test */
    pos += count;
  }
  for (uint32_t k = 0; k < decoded; ++k) out[pos++] = trace_output_token(t, i, k);
}
