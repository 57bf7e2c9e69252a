/*
 * A C program written the way a user's quick start would be, against the
 * public API only. The same file is built three ways: in the build tree,
 * against an installed copy through pkg-config, and through find_package()
 * (see pkgconfig_check.sh). Every step is checked; any failure exits 1.
 *
 *   consumer [CONFIG.json]   (the optional file is also loaded from disk)
 */
#include <stdio.h>
#include <string.h>

#include <kvpool/kvpool.h>

static int failures = 0;

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                        \
    }                                                                    \
  } while (0)

/* A small CPU pool: the test must not depend on a GPU. */
static const char kConfig[] =
    "{\"model\": {\"name\": \"consumer\", \"num_layers\": 2, \"attention\": \"mha\","
    "             \"kv_heads\": 2, \"head_dim\": 16},"
    " \"pool\": {\"device\": \"cpu\", \"kv_dtype\": \"f32\", \"page_size\": 4,"
    "            \"max_total_tokens\": 4096, \"max_running_requests\": 16, \"max_context_len\": 1024}}";

/* num_layers has the wrong type: the message must name its JSON path. */
static const char kBadConfig[] =
    "{\"model\": {\"num_layers\": \"32\", \"kv_heads\": 2, \"head_dim\": 16},"
    " \"pool\": {\"device\": \"cpu\", \"max_total_tokens\": 64, \"max_context_len\": 16}}";

static void check_version(void) {
  uint32_t v = kvpool_version();
  /* The loaded library must be at least what we compiled against, same major. */
  CHECK(v >= KVPOOL_VERSION_NUMBER);
  CHECK(v / 10000 == KVPOOL_VERSION_MAJOR);
  CHECK(strcmp(kvpool_version_string(), KVPOOL_VERSION_STRING) == 0);
  printf("kvpool %s (header %s)\n", kvpool_version_string(), KVPOOL_VERSION_STRING);
}

static void check_pool(void) {
  kvpool *pool = NULL;
  kvpool_plan_info planned = KVPOOL_PLAN_INFO_INIT;
  kvpool_plan_info live = KVPOOL_PLAN_INFO_INIT;
  const char *backend;
  kvpool_status st;

  /* Passing the length without the NUL: the library must not read past it. */
  st = kvpool_create(kConfig, sizeof kConfig - 1, &pool);
  CHECK(st == KVPOOL_OK);
  if (st != KVPOOL_OK) {
    fprintf(stderr, "kvpool_create: %s: %s\n", kvpool_status_string(st), kvpool_last_error());
    return;
  }
  CHECK(pool != NULL);

  backend = kvpool_backend(pool);
  CHECK(backend != NULL && strcmp(backend, "cpu") == 0);
  printf("backend %s, %d CUDA device(s)\n", backend ? backend : "(null)", kvpool_cuda_device_count());
  CHECK(kvpool_cuda_device_count() >= 0);

  /* Sizing without a pool and the plan of the live pool must agree. */
  CHECK(kvpool_plan(kConfig, sizeof kConfig - 1, &planned) == KVPOOL_OK);
  CHECK(kvpool_get_plan(pool, &live) == KVPOOL_OK);
  CHECK(live.struct_size == sizeof(kvpool_plan_info));
  CHECK(live.page_size == 4);
  CHECK(live.max_total_tokens == 4096);
  CHECK(live.num_pages == 4096 / 4);
  CHECK(live.num_layers == 2);
  /* 2 layers x (K + V) x 2 heads x 16 dims x 4 bytes (f32). */
  CHECK(live.kv_bytes_per_token == 2 * 2 * 2 * 16 * 4);
  CHECK(live.kv_bytes_per_token == planned.kv_bytes_per_token);
  CHECK(live.max_total_tokens == planned.max_total_tokens);
  CHECK(live.total_memory_bytes == planned.total_memory_bytes);
  CHECK(live.total_memory_bytes > 0);
  printf("plan: %lu bytes/token, %lu tokens, %lu bytes in all\n", (unsigned long)live.kv_bytes_per_token,
         (unsigned long)live.max_total_tokens, (unsigned long)live.total_memory_bytes);

  kvpool_destroy(pool);
  /* A second destroy of the same handle, and NULL, are documented no-ops. */
  kvpool_destroy(pool);
  kvpool_destroy(NULL);
  /* A destroyed handle is detected, not dereferenced. */
  CHECK(kvpool_backend(pool) == NULL);
  CHECK(kvpool_get_plan(pool, &live) == KVPOOL_ERR_INVALID_ARGUMENT);
}

static void check_errors(void) {
  kvpool *pool = (kvpool *)&failures; /* a non-NULL value that must be overwritten */
  kvpool_status st = kvpool_create(kBadConfig, strlen(kBadConfig), &pool);
  const char *msg = kvpool_last_error();
  CHECK(st == KVPOOL_ERR_CONFIG);
  CHECK(pool == NULL);
  CHECK(msg != NULL && strstr(msg, "$.model.num_layers") != NULL);
  printf("config error as expected: %s: %s\n", kvpool_status_string(st), msg ? msg : "(null)");

  CHECK(kvpool_create(NULL, 0, &pool) == KVPOOL_ERR_INVALID_ARGUMENT);
  CHECK(kvpool_create(kConfig, sizeof kConfig - 1, NULL) == KVPOOL_ERR_INVALID_ARGUMENT);
  CHECK(kvpool_create_from_file("/nonexistent/kvpool-consumer.json", &pool) == KVPOOL_ERR_IO);
  CHECK(pool == NULL);
  CHECK(strstr(kvpool_last_error(), "/nonexistent/kvpool-consumer.json") != NULL);

  CHECK(strcmp(kvpool_status_string(KVPOOL_OK), kvpool_status_string(KVPOOL_ERR_CONFIG)) != 0);
  CHECK(strcmp(kvpool_status_string((kvpool_status)12345), "unknown status") == 0);
}

static void check_file(const char *path) {
  kvpool *pool = NULL;
  kvpool_status st = kvpool_create_from_file(path, &pool);
  CHECK(st == KVPOOL_OK);
  if (st != KVPOOL_OK) {
    fprintf(stderr, "kvpool_create_from_file(%s): %s\n", path, kvpool_last_error());
    return;
  }
  printf("loaded %s on %s\n", path, kvpool_backend(pool));
  kvpool_destroy(pool);
}

int main(int argc, char **argv) {
  check_version();
  check_pool();
  check_errors();
  if (argc > 1) check_file(argv[1]);
  if (failures > 0) {
    fprintf(stderr, "consumer: %d check(s) failed\n", failures);
    return 1;
  }
  printf("consumer: all checks passed\n");
  return 0;
}
