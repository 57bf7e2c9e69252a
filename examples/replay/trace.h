/*
 * A Mooncake-format request trace held in memory, and its expansion into
 * token ids (examples/data/README.md explains the format).
 */
#ifndef KVPOOL_REPLAY_TRACE_H
#define KVPOOL_REPLAY_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* Tokens per hash_ids block in Mooncake traces. */
#define TRACE_BLOCK_TOKENS 512u

typedef struct trace_request {
  int64_t timestamp_ms;  /* only orders arrivals; the replay never waits */
  uint32_t input_len;
  uint32_t output_len;
  size_t block_off;      /* first of its blocks in trace.block_ids */
  uint32_t num_blocks;   /* ceil(input_len / 512) */
  uint64_t output_base;  /* decoded tokens of all earlier requests: makes output ids unique */
} trace_request;

typedef struct trace {
  trace_request *reqs;
  size_t num_reqs;
  int32_t *block_ids;       /* hash_ids of all requests, concatenated */
  uint64_t total_blocks;
  uint64_t input_tokens;
  uint64_t output_tokens;
  uint32_t max_context;     /* longest input + output */
  int32_t max_block_id;
} trace;

/* Loads at most max_reqs requests (0 = all). On failure returns nonzero and
 * writes a message naming the line into err. */
int trace_load(const char *path, size_t max_reqs, trace *out, char *err, size_t err_cap);
void trace_free(trace *t);

/* --prompts-only: every output_length becomes 0 (SGLang's replay method: prompts are
 * matched, computed and cached; nothing is decoded). */
void trace_drop_outputs(trace *t);

/* --instances: instance k of n gets requests k, k + n, k + 2n, ... of t, in order. out
 * shares t's block_ids (t must outlive it) and owns only its reqs: free it with
 * trace_free_split. Output ids stay those of t, so they are distinct across instances.
 * max_context and max_block_id are t's (sizes that fit every instance). Returns nonzero
 * when out of memory. */
int trace_split(const trace *t, size_t n, size_t k, trace *out);
void trace_free_split(trace *t);

/* Writes request i's prompt followed by its first `decoded` output tokens into
 * out (room for input_len + decoded ids). Prompt id of block h, offset t: h*512+t;
 * output ids are negative and distinct per request, so they never match a prompt. */
void trace_expand(const trace *t, size_t i, uint32_t decoded, int32_t *out);

/* The id of request i's k-th decoded token (what trace_expand writes after the prompt). */
int32_t trace_output_token(const trace *t, size_t i, uint32_t k);

/* Reads a whole file into a NUL-terminated malloc'd buffer (NULL on failure); *len gets its size. */
char *read_whole_file(const char *path, size_t *len);

#endif
