/*
 * Compiled as strict C89, C99 and C11 (see CMakeLists.txt) with -pedantic and
 * warnings as errors: the public headers must stay plain, portable C that any
 * engine's C compiler accepts. Nothing here runs; compiling is the test.
 * (That every declared function is exported is checked by tests/abi.)
 */
#include <kvpool/kvpool.h>
#include <kvpool/kvpool.h> /* include guards: a second include must be harmless */

/* A C89-compatible static assertion (a negative array size is an error). */
#define HEADER_CHECK_ASSERT(name, cond) typedef char header_check_##name[(cond) ? 1 : -1]

HEADER_CHECK_ASSERT(ok_is_zero, KVPOOL_OK == 0);
HEADER_CHECK_ASSERT(version_number, KVPOOL_VERSION_NUMBER == KVPOOL_VERSION_MAJOR * 10000 +
                                                                 KVPOOL_VERSION_MINOR * 100 +
                                                                 KVPOOL_VERSION_PATCH);

/* The initializer must name every field: -Wextra (missing-field-initializers)
 * turns a field appended without updating the macro into an error here. */
const kvpool_plan_info *header_check_plan(void);
const kvpool_plan_info *header_check_plan(void) {
  static const kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  return &plan;
}

/* device.h (stream-ordered calls) and kvpool_create_with_allocator: their
 * prototypes as function pointer types, so a changed signature (or a header
 * that is not valid C89 around them) is a compile error here. */
#include <kvpool/device.h> /* also included by kvpool.h; a direct include must work too */

HEADER_CHECK_ASSERT(device_fault_code, KVPOOL_ERR_DEVICE_FAULT == 11);

struct header_check_device_api {
  kvpool_status (*create_with_allocator)(const char *, size_t, const kvpool_allocator *, kvpool **);
  kvpool_status (*synchronize)(kvpool *, void *);
  kvpool_status (*extend_async)(kvpool *, const int64_t *, const int64_t *, size_t, const int64_t *, const int64_t *,
                                const int64_t *, int64_t *, size_t, int64_t *, size_t, void *);
  kvpool_status (*extend_pages)(const kvpool *, const int64_t *, const int64_t *, size_t, size_t *);
  kvpool_status (*decode_async)(kvpool *, const int64_t *, size_t, const int64_t *, const int64_t *, int64_t *,
                                int64_t *, size_t, void *);
  kvpool_status (*alloc_async)(kvpool *, int64_t *, size_t, void *);
  kvpool_status (*free_pages_async)(kvpool *, const int64_t *, size_t, void *);
  kvpool_status (*write_batch_async)(kvpool *, const int32_t *, const int64_t *, const int64_t *, size_t,
                                     const int64_t *, size_t, const int64_t *, size_t, void *);
  kvpool_status (*last_loc_async)(const kvpool *, const int32_t *, const int64_t *, size_t, int64_t *, void *);
  kvpool_status (*set_kv_async)(kvpool *, int32_t, const int64_t *, size_t, const void *, size_t, const void *,
                                size_t, int32_t, float, float, void *);
  kvpool_status (*set_mla_kv_async)(kvpool *, int32_t, const int64_t *, size_t, const void *, size_t, const void *,
                                    size_t, int32_t, void *);
  kvpool_status (*get_kv_async)(const kvpool *, int32_t, const int64_t *, size_t, void *, size_t, void *, size_t,
                                int32_t, void *);
  kvpool_status (*move_kv_async)(kvpool *, const int64_t *, size_t, const int64_t *, size_t, void *);
  kvpool_status (*mamba_alloc_async)(kvpool *, int32_t *, size_t, void *);
  kvpool_status (*mamba_fork_async)(kvpool *, int32_t, int32_t *, void *);
  kvpool_status (*mamba_copy_async)(kvpool *, const int32_t *, size_t, const int32_t *, size_t, void *);
  kvpool_status (*decode_graph_async)(kvpool *, size_t, const int64_t *, const int64_t *, int64_t *, void *);
  kvpool_status (*decode_watermark)(const kvpool *, const int64_t *, size_t, size_t *);
  kvpool_status (*decode_graph_advance)(kvpool *, const int64_t *, size_t, size_t);
  kvpool_status (*seq_extend_async)(kvpool *, const uint64_t *, size_t, const int64_t *, size_t, int64_t *, size_t,
                                    void *);
  kvpool_status (*seq_decode_async)(kvpool *, const uint64_t *, size_t, const int32_t *, size_t, int64_t *, size_t,
                                    void *);
};

const struct header_check_device_api *header_check_device(void);
const struct header_check_device_api *header_check_device(void) {
  static const struct header_check_device_api api = {
      kvpool_create_with_allocator, kvpool_synchronize,    kvalloc_extend_async,    kvalloc_extend_pages,
      kvalloc_decode_async,         kvalloc_alloc_async,   kvalloc_free_pages_async, kvreq_write_batch_async,
      kvreq_last_loc_async,         kvpool_set_kv_async,   kvpool_set_mla_kv_async, kvpool_get_kv_async,
      kvpool_move_kv_async,         kvpool_mamba_alloc_async, kvpool_mamba_fork_async, kvpool_mamba_copy_async,
      kvalloc_decode_graph_async,   kvalloc_decode_watermark, kvalloc_decode_graph_advance, kvseq_extend_async,
      kvseq_decode_async};
  return &api;
}

/* The allocator struct is plain C with the documented fields in order. */
const kvpool_allocator *header_check_allocator(void);
const kvpool_allocator *header_check_allocator(void) {
  static const kvpool_allocator allocator = {sizeof(kvpool_allocator), NULL, NULL, NULL};
  return &allocator;
}

/* storage.h: the custom backend table is plain C with the documented fields in order,
 * and kvpool_create_with_storage has the documented prototype. */
static void header_check_put(void *user, const char *const *keys, const uint8_t *const *values, const size_t *sizes,
                             size_t n, int32_t *results) {
  (void)user, (void)keys, (void)values, (void)sizes, (void)n, (void)results;
}
static void header_check_get(void *user, const char *const *keys, uint8_t *const *dst, const size_t *capacity,
                             size_t n, size_t *sizes, int32_t *results) {
  (void)user, (void)keys, (void)dst, (void)capacity, (void)n, (void)sizes, (void)results;
}
static size_t header_check_exists_prefix(void *user, const char *const *keys, size_t n) {
  (void)user, (void)keys;
  return n;
}
static int32_t header_check_clear(void *user) {
  (void)user;
  return KVSTORE_OK;
}
static void header_check_destroy(void *user) { (void)user; }

HEADER_CHECK_ASSERT(kvstore_results, KVSTORE_OK == 0 && KVSTORE_MISS == 1 && KVSTORE_ERROR == 2);

const kvstore_backend *header_check_storage_backend(void);
const kvstore_backend *header_check_storage_backend(void) {
  static const kvstore_backend backend = {sizeof(kvstore_backend), NULL, header_check_put, header_check_get,
                                          header_check_exists_prefix, header_check_clear, header_check_destroy};
  static kvpool_status (*const create)(const char *, size_t, const kvstore_backend *, kvpool **) =
      kvpool_create_with_storage;
  (void)create;
  return &backend;
}
