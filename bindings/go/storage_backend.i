/*
 * go/storage_backend.i: kvpool_create_with_storage for Go, included by the
 * end of ../kvpool.i. The table's C callbacks below call Go functions that
 * kvpool/storagebackend.go exports (//export kvpoolGoStorage*); `user` is a
 * runtime/cgo.Handle of the Go StorageBackend, deleted by the table's destroy
 * (kvpool_destroy, after the storage threads have stopped), or by
 * OpenWithStorage when the creation fails. The storage threads are C
 * threads: cgo runs a Go callback on them as on any foreign thread. The Go
 * side recovers every panic and reports the keys as errors; results start as
 * KVSTORE_ERROR here.
 */
%{
/* The exported Go functions (their C types as cgo writes them into
 * _cgo_export.h, which this SWIG-generated file does not include). */
extern void kvpoolGoStoragePut(uintptr_t user, char **keys, uint8_t **values, size_t *sizes, size_t n,
                               int32_t *results);
extern void kvpoolGoStorageGet(uintptr_t user, char **keys, uint8_t **dst, size_t *capacity, size_t n,
                               size_t *sizes, int32_t *results);
extern size_t kvpoolGoStorageExists(uintptr_t user, char **keys, size_t n);
extern int32_t kvpoolGoStorageClear(uintptr_t user);
extern void kvpoolGoStorageRelease(uintptr_t user);

/* kvpool.StorageResult (types in storagebackend.go) gives these numbers to its constants. */
typedef char kvpool_go_storage_result_numbers[(KVSTORE_OK == 0 && KVSTORE_MISS == 1 && KVSTORE_ERROR == 2) ? 1 : -1];

static void kvpool_go_put(void *user, const char *const *keys, const uint8_t *const *values, const size_t *sizes,
                          size_t n, int32_t *results) {
  size_t i;
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;  /* what the Go side leaves unwritten */
  kvpoolGoStoragePut((uintptr_t)user, (char **)keys, (uint8_t **)values, (size_t *)sizes, n, results);
}

static void kvpool_go_get(void *user, const char *const *keys, uint8_t *const *dst, const size_t *capacity, size_t n,
                          size_t *sizes, int32_t *results) {
  size_t i;
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
  kvpoolGoStorageGet((uintptr_t)user, (char **)keys, (uint8_t **)dst, (size_t *)capacity, n, sizes, results);
}

static size_t kvpool_go_exists_prefix(void *user, const char *const *keys, size_t n) {
  return kvpoolGoStorageExists((uintptr_t)user, (char **)keys, n);
}

static int32_t kvpool_go_clear(void *user) {
  return kvpoolGoStorageClear((uintptr_t)user);
}

static void kvpool_go_destroy(void *user) {
  kvpoolGoStorageRelease((uintptr_t)user);
}

/* OpenWithStorage: backend is the cgo.Handle (0 for a nil backend: the
 * library's own INVALID_ARGUMENT for a NULL table); has_clear is whether the
 * Go value implements StorageClearer. */
static kvpool_status kvpool_go_create_with_storage(const char *json, size_t json_len, kvpool_addr backend,
                                                   int has_clear, kvpool **out) {
  kvstore_backend table;
  if (!backend) return kvpool_create_with_storage(json, json_len, NULL, out);
  memset(&table, 0, sizeof table);
  table.struct_size = (uint32_t)sizeof table;
  table.user = (void *)backend;
  table.put = kvpool_go_put;
  table.get = kvpool_go_get;
  table.exists_prefix = kvpool_go_exists_prefix;
  table.clear = has_clear ? kvpool_go_clear : NULL;
  table.destroy = kvpool_go_destroy;
  return kvpool_create_with_storage(json, json_len, &table, out);
}
%}

%rename(kvpool_create_with_storage) kvpool_go_create_with_storage;
kvpool_status kvpool_go_create_with_storage(const char *json, size_t json_len, kvpool_addr backend, int has_clear,
                                            kvpool **out);
