/*
 * csharp/log_callback.i: kvpool_set_log_callback for C#, included by the end
 * of ../kvpool.i. KvPool.Log (src/Log.cs) registers one static delegate once
 * (KvPoolCs_RegisterLog, like KvPoolCs_RegisterStorage); the library calls
 * kvpool_cs_log, which calls it with `user` = a GCHandle of the caller's
 * LogCallback delegate.
 *
 * - The registered delegate lives in a static readonly field of Log, so its
 *   function pointer stays valid for the life of the process; the caller's
 *   delegate is kept alive by its GCHandle until it is replaced.
 * - The pools' storage threads are not mono threads: mono attaches a foreign
 *   thread on its first call through a delegate's function pointer.
 * - Which handle the library holds is kept here, under a mutex, in the order
 *   the library saw the calls: kvpool_cs_set_log_callback reports the handle
 *   it replaced, which Log.SetCallback frees (the library no longer calls it).
 *   A SetCallback from inside the callback does not wait for that mutex (its
 *   holder may be waiting in the library for this very callback): the
 *   thread-local flag sends it straight to the library, which refuses it.
 * - The managed side catches everything the callback throws.
 */
%{
#include <pthread.h>

typedef void (SWIGSTDCALL *KvPoolCs_Log)(void *user, int level, const char *message, int length);
static KvPoolCs_Log kvpool_cs_log_delegate = NULL;

#ifdef __cplusplus
extern "C"
#endif
SWIGEXPORT void SWIGSTDCALL KvPoolCs_RegisterLog(KvPoolCs_Log callback) {
  kvpool_cs_log_delegate = callback;
}

static __thread int kvpool_cs_in_log = 0;
static pthread_mutex_t kvpool_cs_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static kvpool_addr kvpool_cs_log_handle = 0;  /* the handle the library calls back with */

static void kvpool_cs_log(void *user, kvpool_log_level level, const char *message) {
  size_t len = strlen(message);
  kvpool_cs_in_log = 1;
  kvpool_cs_log_delegate(user, (int)level, message, len > 0x7fffffff ? 0x7fffffff : (int)len);
  kvpool_cs_in_log = 0;
}

/* handle: the GCHandle of the delegate, 0 to clear; *previous: the handle replaced (0: none). */
static kvpool_status kvpool_cs_set_log_callback(kvpool_addr handle, kvpool_log_level level, uint64_t *previous) {
  kvpool_status status;
  *previous = 0;
  if (kvpool_cs_in_log) return kvpool_set_log_callback(NULL, NULL, level);  /* refused: inside a callback */
  pthread_mutex_lock(&kvpool_cs_log_mutex);
  /* Registered by Log's static constructor before any handle exists. */
  status = kvpool_set_log_callback(handle && kvpool_cs_log_delegate ? kvpool_cs_log : NULL, (void *)handle, level);
  if (status == KVPOOL_OK) {
    *previous = (uint64_t)kvpool_cs_log_handle;
    kvpool_cs_log_handle = handle;
  }
  pthread_mutex_unlock(&kvpool_cs_log_mutex);
  return status;
}
%}

%pragma(csharp) imclasscode=%{
  [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="KvPoolCs_RegisterLog")]
  internal static extern void KvPoolCs_RegisterLog(Log.Callback callback);
%}

%rename(kvpool_set_log_callback) kvpool_cs_set_log_callback;
KVPOOL_RAW(kvpool_cs_set_log_callback)
kvpool_status kvpool_cs_set_log_callback(kvpool_addr handle, kvpool_log_level level, uint64_t *previous);
