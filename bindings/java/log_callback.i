/*
 * java/log_callback.i: kvpool_set_log_callback for Java, included by the end
 * of ../kvpool.i (after storage_backend.i, whose thread attaching and JNI
 * helpers it uses). Kvpool.setLogListener(listener, level) makes a sink (the
 * listener as a global reference; LogDispatch.deliver calls it) and sets
 * kvpool_java_log as the library's callback with it.
 *
 * - Threads: messages of the pools' storage threads arrive on threads the JVM
 *   did not create; they are attached as daemons and detached at their exit,
 *   as for the storage backend (kvpool_java_env).
 * - The message goes over as UTF-8 bytes (LogDispatch decodes them), inside a
 *   local frame; anything the listener throws is caught by LogDispatch, and a
 *   JNI failure (an exception left pending) is cleared: nothing reaches C.
 * - A message logged on a Java thread comes from inside one of its kvpool
 *   calls, which may hold a Java array pinned (GetPrimitiveArrayCritical: no
 *   JNI call allowed until it is released): it is kept and delivered when the
 *   call returns (kvpool_java_log_flush, from the `ret` typemap), to the
 *   listener set then; what the listener's own calls log meanwhile is dropped,
 *   as the library drops what a callback's calls log.
 * - Which sink the library holds is kept here, under a mutex, in the order
 *   the library saw the calls; the replaced sink's global reference is
 *   deleted once setLogListener's call returned (the library no longer calls
 *   it). A setLogListener from inside a listener does not wait for that
 *   mutex (its holder may be waiting in the library for this very listener):
 *   the thread-local flag sends it straight to the library, which refuses it.
 */
%{
/* One listener the library may call: a global reference (the JavaVM to attach with). */
typedef struct kvpool_java_log_sink {
  JavaVM *vm;
  jobject listener;  /* global */
} kvpool_java_log_sink;

/* ai.kvpool.LogDispatch and its static deliver(LogListener, int, byte[]): looked up by the
 * first setLogListener (on a Java thread), never released. */
static jclass kvpool_java_log_dispatch = NULL;
static jmethodID kvpool_java_log_deliver = NULL;

/* In the library's callback on this thread: a setLogListener goes straight to the library. */
static __thread int kvpool_java_in_log = 0;
/* Delivering deferred messages on this thread: what the listener's own calls log is dropped. */
static __thread int kvpool_java_delivering = 0;
static pthread_mutex_t kvpool_java_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static kvpool_java_log_sink *kvpool_java_log_current = NULL;

/* Messages of a Java thread's own kvpool call, delivered when the call returns (below). */
typedef struct kvpool_java_deferred {
  struct kvpool_java_deferred *next;
  jint level;
  size_t len;
  char text[1];
} kvpool_java_deferred;
static __thread kvpool_java_deferred *kvpool_java_deferred_head = NULL;
static __thread kvpool_java_deferred *kvpool_java_deferred_tail = NULL;

/* Calls the listener with the message as UTF-8 bytes; leaves no exception pending. */
static void kvpool_java_log_deliver_now(JNIEnv *env, jobject listener, jint level, const char *text, size_t len) {
  jbyteArray bytes;
  if (len > (size_t)0x7fffffff) return;
  if ((*env)->PushLocalFrame(env, 2) != 0) {
    kvpool_java_failed(env);
    return;
  }
  bytes = (*env)->NewByteArray(env, (jsize)len);
  if (bytes) {
    (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)len, (const jbyte *)text);
    if (!(*env)->ExceptionCheck(env)) {
      (*env)->CallStaticVoidMethod(env, kvpool_java_log_dispatch, kvpool_java_log_deliver, listener, level, bytes);
    }
  }
  kvpool_java_failed(env);
  (*env)->PopLocalFrame(env, NULL);
}

/* The library's callback. On a thread the JVM made, the message comes from inside a
 * kvpool call of Java code, which may hold an array pinned with GetPrimitiveArrayCritical
 * (no JNI call may run then): it is kept and delivered when the call returns. Threads the
 * shim attached (the pools' storage threads) get it at once. */
static void kvpool_java_log(void *user, kvpool_log_level level, const char *message) {
  kvpool_java_log_sink *s = (kvpool_java_log_sink *)user;
  JNIEnv *env = NULL;
  jint rc;
  if (kvpool_java_delivering) return;
  rc = (*s->vm)->GetEnv(s->vm, (void **)&env, JNI_VERSION_1_8);
  if (rc == JNI_OK && !(kvpool_java_detach_ready && pthread_getspecific(kvpool_java_detach_key))) {
    size_t len = strlen(message);
    kvpool_java_deferred *d = (kvpool_java_deferred *)malloc(sizeof *d + len);
    if (!d) return;
    d->next = NULL;
    d->level = (jint)level;
    d->len = len;
    memcpy(d->text, message, len + 1);
    if (kvpool_java_deferred_tail) {
      kvpool_java_deferred_tail->next = d;
    } else {
      kvpool_java_deferred_head = d;
    }
    kvpool_java_deferred_tail = d;
    return;
  }
  env = kvpool_java_env(s->vm);
  if (!env) return;
  kvpool_java_in_log = 1;
  kvpool_java_log_deliver_now(env, s->listener, (jint)level, message, strlen(message));
  kvpool_java_in_log = 0;
}

/* Delivers this thread's kept messages to the listener set now (the one they were meant for
 * may have been replaced since): from the `ret` typemap of every kvpool_status call, after
 * the pinned arrays are released and before a failure is thrown. The mutex is held
 * meanwhile, so that no setLogListener returns while a replaced listener still runs; the
 * listener itself may not call setLogListener (refused before the mutex). */
static void kvpool_java_log_flush(JNIEnv *env) {
  kvpool_java_deferred *d, *next;
  if (!kvpool_java_deferred_head || kvpool_java_delivering) return;
  if ((*env)->ExceptionCheck(env)) return;  /* kept for the next call */
  d = kvpool_java_deferred_head;
  kvpool_java_deferred_head = kvpool_java_deferred_tail = NULL;
  pthread_mutex_lock(&kvpool_java_log_mutex);
  kvpool_java_delivering = 1;
  for (; d; d = next) {
    next = d->next;
    if (kvpool_java_log_current) {
      kvpool_java_log_deliver_now(env, kvpool_java_log_current->listener, d->level, d->text, d->len);
    }
    free(d);
  }
  kvpool_java_delivering = 0;
  pthread_mutex_unlock(&kvpool_java_log_mutex);
}

/* KvPoolException(INVALID_ARGUMENT, message), as kvpool_java_throw makes them. */
static void kvpool_java_throw_invalid(JNIEnv *jenv, const char *msg) {
  jclass cls = (*jenv)->FindClass(jenv, "ai/kvpool/KvPoolException");
  jmethodID ctor = cls ? (*jenv)->GetMethodID(jenv, cls, "<init>", "(I[B)V") : NULL;
  jsize len = (jsize)strlen(msg);
  jbyteArray bytes = ctor ? (*jenv)->NewByteArray(jenv, len) : NULL;
  jobject ex;
  if (!bytes) return;
  (*jenv)->SetByteArrayRegion(jenv, bytes, 0, len, (const jbyte *)msg);
  ex = (*jenv)->NewObject(jenv, cls, ctor, (jint)KVPOOL_ERR_INVALID_ARGUMENT, bytes);
  if (ex) (*jenv)->Throw(jenv, (jthrowable)ex);
}

static void kvpool_java_log_sink_free(JNIEnv *env, kvpool_java_log_sink *s) {
  if (env && s->listener) (*env)->DeleteGlobalRef(env, s->listener);
  free(s);
}

/* Kvpool.setLogListener: runs on the calling Java thread; a null listener clears. */
static kvpool_status kvpool_java_set_log_callback(JNIEnv *jenv, jobject listener, kvpool_log_level level) {
  kvpool_java_log_sink *s = NULL;
  kvpool_java_log_sink *previous = NULL;
  kvpool_status status;
  if (kvpool_java_in_log) return kvpool_set_log_callback(NULL, NULL, level);  /* refused: inside a listener */
  if (kvpool_java_delivering) {  /* a kept message's listener: refused here, as the library refuses the others */
    kvpool_java_throw_invalid(jenv, "kvpool_set_log_callback: called from inside a log callback");
    return KVPOOL_ERR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&kvpool_java_log_mutex);
  if (listener && !kvpool_java_log_deliver) {
    jclass dispatch = kvpool_java_global_class(jenv, "ai/kvpool/LogDispatch");
    jmethodID deliver =
        dispatch ? (*jenv)->GetStaticMethodID(jenv, dispatch, "deliver", "(Lai/kvpool/LogListener;I[B)V") : NULL;
    if (!deliver) {
      if (dispatch) (*jenv)->DeleteGlobalRef(jenv, dispatch);
      pthread_mutex_unlock(&kvpool_java_log_mutex);
      goto fail;
    }
    kvpool_java_log_dispatch = dispatch;
    kvpool_java_log_deliver = deliver;
  }
  if (listener) {
    s = (kvpool_java_log_sink *)calloc(1, sizeof *s);
    if (!s || (*jenv)->GetJavaVM(jenv, &s->vm) != JNI_OK || !(s->listener = (*jenv)->NewGlobalRef(jenv, listener))) {
      pthread_mutex_unlock(&kvpool_java_log_mutex);
      goto fail;
    }
  }
  status = kvpool_set_log_callback(s ? kvpool_java_log : NULL, s, level);
  if (status == KVPOOL_OK) {
    previous = kvpool_java_log_current;
    kvpool_java_log_current = s;
  }
  pthread_mutex_unlock(&kvpool_java_log_mutex);
  if (status != KVPOOL_OK) {
    if (s) kvpool_java_log_sink_free(jenv, s);
    return status;
  }
  if (previous) kvpool_java_log_sink_free(jenv, previous);  /* the library no longer calls it */
  return status;
fail:
  if (!(*jenv)->ExceptionCheck(jenv)) {
    SWIG_JavaThrowException(jenv, SWIG_JavaRuntimeException, "kvpool: the JNI setup of the log listener failed");
  }
  if (s) kvpool_java_log_sink_free(jenv, s);
  return KVPOOL_ERR_INTERNAL;
}
%}

%typemap(jni) jobject listener "jobject"
%typemap(jtype) jobject listener "LogListener"
%typemap(jstype) jobject listener "LogListener"
%typemap(javain) jobject listener "$javainput"
%typemap(in) jobject listener %{ $1 = $input; %}
/* Public: Kvpool.setLogListener(listener, level). */
%javamethodmodifiers kvpool_java_set_log_callback "
  /**
   * Routes the library's messages of {@code level} (and more severe) to {@code listener},
   * for every pool of the process; {@code null} turns logging off (the default). When it
   * returns, the previous listener is not running and is never called again.
   *
   * <p>The listener runs on the thread of the failing call or, for the storage tier's
   * messages, on a pool's storage thread (attached to the JVM as a daemon named
   * kvpool-storage), possibly on several at once: it must be thread-safe, return quickly,
   * and not call setLogListener (which then throws KvPoolException INVALID_ARGUMENT).
   * Whatever it throws is caught and dropped.
   *
   * @param listener receives each message, or null
   * @param level the most verbose level delivered (ignored for null)
   * @throws KvPoolException INVALID_ARGUMENT from inside a listener
   */
  public";
%rename(setLogListener) kvpool_java_set_log_callback;
kvpool_status kvpool_java_set_log_callback(JNIEnv *jenv, jobject listener, kvpool_log_level level);
