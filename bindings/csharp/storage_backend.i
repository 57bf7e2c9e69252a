/*
 * csharp/storage_backend.i: kvpool_create_with_storage for C#, included by
 * the end of ../kvpool.i. A hand-written shim (the .i is compiled as C, so
 * no SWIG directors): KvPool.StorageBackend (src/StorageBackend.cs)
 * registers five static delegates once (KvPoolCs_RegisterStorage, like
 * KvPoolCs_RegisterRaise); the table of every pool made by
 * Pool.WithStorage(json, backend) calls them through the C functions below,
 * with `user` = a GCHandle of the backend object.
 *
 * - The delegates live in static readonly fields of StorageBackend, so the
 *   function pointers stay valid for the life of the process.
 * - The pool's storage threads are not mono threads: mono attaches a foreign
 *   thread on its first call through a delegate's function pointer (and
 *   forgets it when the thread exits).
 * - The managed side catches every exception (one escaping a reverse
 *   P/Invoke on a foreign thread would end the process) and reports the
 *   keys as errors; results start as KVSTORE_ERROR here too.
 * - Lifetime: the GCHandle keeps the backend alive; the table's destroy
 *   frees it (kvpool_destroy, after the storage threads have stopped). When
 *   the creation fails nothing is called and Pool.WithStorage frees it.
 */
%{
/* KvPool.StorageResult (hand-written) gives these numbers to its items. */
typedef char kvpool_cs_storage_result_numbers[(KVSTORE_OK == 0 && KVSTORE_MISS == 1 && KVSTORE_ERROR == 2) ? 1 : -1];

typedef void (SWIGSTDCALL *KvPoolCs_StoragePut)(void *user, const char *const *keys, const uint8_t *const *values,
                                                const size_t *sizes, size_t n, int32_t *results);
typedef void (SWIGSTDCALL *KvPoolCs_StorageGet)(void *user, const char *const *keys, uint8_t *const *dst,
                                                const size_t *capacity, size_t n, size_t *sizes, int32_t *results);
typedef size_t (SWIGSTDCALL *KvPoolCs_StorageExists)(void *user, const char *const *keys, size_t n);
typedef int32_t (SWIGSTDCALL *KvPoolCs_StorageClear)(void *user);
typedef void (SWIGSTDCALL *KvPoolCs_StorageRelease)(void *user);

static KvPoolCs_StoragePut kvpool_cs_storage_put = NULL;
static KvPoolCs_StorageGet kvpool_cs_storage_get = NULL;
static KvPoolCs_StorageExists kvpool_cs_storage_exists = NULL;
static KvPoolCs_StorageClear kvpool_cs_storage_clear = NULL;
static KvPoolCs_StorageRelease kvpool_cs_storage_release = NULL;

#ifdef __cplusplus
extern "C"
#endif
SWIGEXPORT void SWIGSTDCALL KvPoolCs_RegisterStorage(KvPoolCs_StoragePut put, KvPoolCs_StorageGet get,
                                                     KvPoolCs_StorageExists exists, KvPoolCs_StorageClear clear,
                                                     KvPoolCs_StorageRelease release) {
  kvpool_cs_storage_put = put;
  kvpool_cs_storage_get = get;
  kvpool_cs_storage_exists = exists;
  kvpool_cs_storage_clear = clear;
  kvpool_cs_storage_release = release;
}

/* The table's callbacks: forwarders, since the delegates' calling
 * convention (SWIGSTDCALL) need not be the table's. */
static void kvpool_cs_put(void *user, const char *const *keys, const uint8_t *const *values, const size_t *sizes,
                          size_t n, int32_t *results) {
  size_t i;
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;  /* what the managed side leaves unwritten */
  kvpool_cs_storage_put(user, keys, values, sizes, n, results);
}

static void kvpool_cs_get(void *user, const char *const *keys, uint8_t *const *dst, const size_t *capacity, size_t n,
                          size_t *sizes, int32_t *results) {
  size_t i;
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
  kvpool_cs_storage_get(user, keys, dst, capacity, n, sizes, results);
}

static size_t kvpool_cs_exists_prefix(void *user, const char *const *keys, size_t n) {
  return kvpool_cs_storage_exists(user, keys, n);
}

static int32_t kvpool_cs_clear(void *user) {
  return kvpool_cs_storage_clear(user);
}

static void kvpool_cs_destroy(void *user) {
  kvpool_cs_storage_release(user);
}

/* Pool.WithStorage: backend is the GCHandle of the StorageBackend (0 for
 * null: the library's own INVALID_ARGUMENT for a NULL table); has_clear is
 * whether its class overrides Clear(). */
static kvpool_status kvpool_cs_create_with_storage(const char *json, size_t json_len, kvpool_addr backend,
                                                   int has_clear, kvpool **out) {
  kvstore_backend table;
  if (!backend) return kvpool_create_with_storage(json, json_len, NULL, out);
  memset(&table, 0, sizeof table);
  table.struct_size = (uint32_t)sizeof table;
  table.user = (void *)backend;
  /* Registered by StorageBackend's static constructor before any backend exists. */
  table.put = kvpool_cs_storage_put ? kvpool_cs_put : NULL;
  table.get = kvpool_cs_storage_get ? kvpool_cs_get : NULL;
  table.exists_prefix = kvpool_cs_storage_exists ? kvpool_cs_exists_prefix : NULL;
  table.clear = has_clear && kvpool_cs_storage_clear ? kvpool_cs_clear : NULL;
  table.destroy = kvpool_cs_storage_release ? kvpool_cs_destroy : NULL;
  return kvpool_create_with_storage(json, json_len, &table, out);
}
%}

%pragma(csharp) imclasscode=%{
  [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="KvPoolCs_RegisterStorage")]
  internal static extern void KvPoolCs_RegisterStorage(StorageBackend.PutCallback put, StorageBackend.GetCallback get,
      StorageBackend.ExistsCallback exists, StorageBackend.ClearCallback clear, StorageBackend.ReleaseCallback release);
%}

%rename(kvpool_create_with_storage) kvpool_cs_create_with_storage;
KVPOOL_RAW(kvpool_cs_create_with_storage)
kvpool_status kvpool_cs_create_with_storage(const char *json, size_t json_len, kvpool_addr backend, int has_clear,
                                            kvpool **out);
