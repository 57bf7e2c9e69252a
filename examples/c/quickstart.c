/*
 * kvpool quick start: create a pool from JSON, run two requests that share a
 * prompt prefix through the request API, and check that nothing leaked.
 * Uses only the public C API; exits non-zero on any unexpected result.
 */
#include <stdio.h>
#include <string.h>

#include "kvpool/kvpool.h"

#define CHECK(call)                                                                         \
  do {                                                                                      \
    kvpool_status st_ = (call);                                                             \
    if (st_ != KVPOOL_OK) {                                                                 \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kvpool_status_string(st_), kvpool_last_error()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(void) {
  const char *json =
      "{\"model\": {\"name\": \"tiny\", \"num_layers\": 2, \"kv_heads\": 2, \"head_dim\": 16},"
      " \"pool\": {\"kv_dtype\": \"bf16\", \"page_size\": 4, \"max_total_tokens\": 1024,"
      "            \"max_running_requests\": 8, \"max_context_len\": 256},"
      " \"prefix_cache\": {\"kind\": \"radix\", \"eviction\": \"lru\"}}";
  kvpool *pool = NULL;
  CHECK(kvpool_create(json, strlen(json), &pool));
  printf("kvpool %s, backend %s\n", kvpool_version_string(), kvpool_backend(pool));

  /* A system prompt of 12 tokens shared by two user turns. */
  int32_t first[16], second[16];
  for (int i = 0; i < 16; ++i) {
    first[i] = i < 12 ? 1000 + i : 2000 + i;
    second[i] = i < 12 ? 1000 + i : 3000 + i;
  }

  uint64_t a = 0, b = 0;
  size_t cached = 0;
  CHECK(kvseq_begin(pool, first, 16, NULL, &a, &cached));
  int64_t chunk = 16, slots[16];
  CHECK(kvseq_extend(pool, &a, 1, &chunk, 1, slots, 16)); /* prefill: 16 slots */
  int32_t token = 42;
  int64_t slot = 0;
  CHECK(kvseq_decode(pool, &a, 1, &token, 1, &slot, 1)); /* one generated token */
  CHECK(kvseq_finish(pool, a, 17));

  CHECK(kvseq_begin(pool, second, 16, NULL, &b, &cached));
  printf("second request reuses %zu cached tokens\n", cached);
  if (cached != 12) return 1;
  chunk = 16 - (int64_t)cached;
  CHECK(kvseq_extend(pool, &b, 1, &chunk, 1, slots, (size_t)chunk));
  CHECK(kvseq_finish(pool, b, 16));

  char report[256];
  CHECK(kvpool_check(pool, report, sizeof(report)));
  printf("check: %s\n", report);
  kvpool_destroy(pool);
  return 0;
}
