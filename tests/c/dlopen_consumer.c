/*
 * Loads libkvpool the way engines that do not link it do: dlopen() with
 * RTLD_NOW | RTLD_LOCAL, then dlsym() for each entry point. Checks that the
 * public functions resolve (with the KVPOOL_0 symbol version), that a pool
 * can be made and destroyed, and that internal C++ symbols stay hidden.
 *
 *   dlopen_consumer LIBRARY INTERNAL_SYMBOL
 *
 * INTERNAL_SYMBOL is a mangled kvp:: name that exists in the library's
 * static symbol table (tests/abi checks that) but must not be dynamic.
 */
#define _GNU_SOURCE /* dlvsym */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <kvpool/kvpool.h> /* for the types only: this program does not link kvpool */

static int failures = 0;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                               \
    }                                                                           \
  } while (0)

/* ISO C has no conversion from void* to a function pointer; copying the bits
 * is what POSIX guarantees to work. */
#define LOAD(handle, var, name)                              \
  do {                                                       \
    void *sym_ = dlsym((handle), (name));                    \
    if (sym_ == NULL) fprintf(stderr, "dlsym(%s): %s\n", (name), dlerror()); \
    CHECK(sym_ != NULL);                                     \
    memcpy(&(var), &sym_, sizeof(var));                      \
  } while (0)

static const char kConfig[] =
    "{\"model\": {\"num_layers\": 2, \"kv_heads\": 2, \"head_dim\": 16},"
    " \"pool\": {\"device\": \"cpu\", \"max_total_tokens\": 256, \"max_context_len\": 64}}";
static const char kBadConfig[] =
    "{\"model\": {\"num_layers\": 2, \"kv_heads\": 2, \"head_dim\": 16, \"kv_head\": 2},"
    " \"pool\": {\"device\": \"cpu\", \"max_total_tokens\": 256, \"max_context_len\": 64}}";

int main(int argc, char **argv) {
  uint32_t (*version)(void) = NULL;
  kvpool_status (*create)(const char *, size_t, kvpool **) = NULL;
  const char *(*last_error)(void) = NULL;
  void (*destroy)(kvpool *) = NULL;
  const char *(*status_string)(kvpool_status) = NULL;
  kvpool *pool = NULL;
  kvpool_status st;
  void *lib;

  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBRARY INTERNAL_SYMBOL\n", argv[0]);
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", argv[1], dlerror());
    return 1;
  }

  LOAD(lib, version, "kvpool_version");
  LOAD(lib, create, "kvpool_create");
  LOAD(lib, last_error, "kvpool_last_error");
  LOAD(lib, destroy, "kvpool_destroy");
  LOAD(lib, status_string, "kvpool_status_string");
  if (failures > 0) return 1; /* calling a NULL pointer below would only crash */

  /* The version script gives every export the version node KVPOOL_0. */
  CHECK(dlvsym(lib, "kvpool_version", "KVPOOL_0") != NULL);
  CHECK(version() >= KVPOOL_VERSION_NUMBER);
  CHECK(version() / 10000 == KVPOOL_VERSION_MAJOR);

  st = create(kConfig, sizeof kConfig - 1, &pool);
  if (st != KVPOOL_OK) fprintf(stderr, "create: %s: %s\n", status_string(st), last_error());
  CHECK(st == KVPOOL_OK && pool != NULL);
  destroy(pool);
  destroy(NULL);

  pool = NULL;
  st = create(kBadConfig, sizeof kBadConfig - 1, &pool);
  CHECK(st == KVPOOL_ERR_CONFIG && pool == NULL);
  CHECK(strstr(last_error(), "$.model.kv_head") != NULL);
  printf("config error as expected: %s: %s\n", status_string(st), last_error());

  /* Internal C++ code must not be reachable, neither mangled nor by a plain name. */
  CHECK(dlsym(lib, argv[2]) == NULL);
  CHECK(dlsym(lib, "parse_config") == NULL);
  /* RTLD_LOCAL: the library's symbols did not enter the global namespace. */
  CHECK(dlsym(RTLD_DEFAULT, "kvpool_create") == NULL);

  CHECK(dlclose(lib) == 0);
  if (failures > 0) {
    fprintf(stderr, "dlopen_consumer: %d check(s) failed\n", failures);
    return 1;
  }
  printf("dlopen_consumer: all checks passed\n");
  return 0;
}
