/*
 * go/log_callback.i: kvpool_set_log_callback for Go, included by the end of
 * ../kvpool.i. The library calls kvpool_go_log, which calls the Go function
 * that kvpool/logging.go exports (//export kvpoolGoLog) with the
 * runtime/cgo.Handle of the Go callback as `user`.
 *
 * - Which handle the library holds is kept here, under a mutex, in the
 *   order the library saw the calls: kvpool_go_set_log_callback reports the
 *   handle it replaced, which SetLogCallback deletes (the library no longer
 *   calls it once the call returned).
 * - A SetLogCallback from inside the Go callback must not wait for that
 *   mutex (its holder may be waiting in the library for this very callback
 *   to return): the thread-local flag sends it straight to the library, which
 *   refuses it. A cgo callback and the cgo calls it makes run on the C
 *   thread that called it, so the flag is that goroutine's.
 */
%{
#include <pthread.h>

/* The exported Go function (its C type as cgo writes it into _cgo_export.h). */
extern void kvpoolGoLog(uintptr_t user, int32_t level, char *message);

static __thread int kvpool_go_in_log = 0;
static pthread_mutex_t kvpool_go_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static kvpool_addr kvpool_go_log_handle = 0;  /* the handle the library calls back with */

static void kvpool_go_log(void *user, kvpool_log_level level, const char *message) {
  kvpool_go_in_log = 1;
  kvpoolGoLog((uintptr_t)user, (int32_t)level, (char *)message);
  kvpool_go_in_log = 0;
}

/* handle: the cgo.Handle of the callback, 0 to clear; *previous: the handle replaced (0: none). */
static kvpool_status kvpool_go_set_log_callback(kvpool_addr handle, kvpool_log_level level, uint64_t *previous) {
  kvpool_status status;
  *previous = 0;
  if (kvpool_go_in_log) return kvpool_set_log_callback(NULL, NULL, level);  /* refused: inside a callback */
  pthread_mutex_lock(&kvpool_go_log_mutex);
  status = kvpool_set_log_callback(handle ? kvpool_go_log : NULL, (void *)handle, level);
  if (status == KVPOOL_OK) {
    *previous = (uint64_t)kvpool_go_log_handle;
    kvpool_go_log_handle = handle;
  }
  pthread_mutex_unlock(&kvpool_go_log_mutex);
  return status;
}
%}

%rename(kvpool_set_log_callback) kvpool_go_set_log_callback;
kvpool_status kvpool_go_set_log_callback(kvpool_addr handle, kvpool_log_level level, uint64_t *previous);
