/*
 * java/storage_backend.i: kvpool_create_with_storage for Java, included by
 * the end of ../kvpool.i. A hand-written shim (the .i is compiled as C, so
 * no SWIG directors): Pool.withStorage(json, backend) builds a
 * kvstore_backend whose C callbacks call the package-private final
 * call* methods of the ai.kvpool.StorageBackend object (StorageBackend.java),
 * which call the engine's put/get/existsPrefix/clear and turn anything they
 * throw into KVSTORE_ERROR results.
 *
 * - Threads: the callbacks run on the pool's storage threads, which the JVM
 *   did not create. The first callback on such a thread attaches it (as a
 *   daemon named "kvpool-storage", so it never holds up JVM exit); a
 *   pthread key detaches it when the thread exits (the pool's threads end in
 *   kvpool_destroy), so a pool's threads leave no java.lang.Thread behind.
 *   `clear` and `destroy` run on the Java thread that called storageClear()
 *   or close() (or the Cleaner's): already attached, left as it is.
 * - References: each callback runs inside PushLocalFrame/PopLocalFrame and
 *   deletes the per-key locals it makes in its loops, so a batch of 128 keys
 *   never holds more than a handful of local references. The backend object
 *   is a global reference owned by the table: taken at creation, released
 *   by the table's destroy (kvpool_destroy, after the storage threads have
 *   stopped), or at once when the creation fails (no destroy then).
 * - Failures: results start as KVSTORE_ERROR and are only overwritten from
 *   the int[] the Java side filled when the call returned normally; an
 *   exception left pending (the trampolines catch Throwable, so only a JNI
 *   failure such as an OutOfMemoryError making the arrays) is cleared and the
 *   whole batch is an error. If the thread cannot be attached (the JVM is
 *   shutting down), the batch is an error too. Nothing is thrown into C.
 */
%{
#include <pthread.h>

/* ai.kvpool.StorageResult (hand-written) gives these numbers to its items. */
typedef char kvpool_java_storage_result_numbers[(KVSTORE_OK == 0 && KVSTORE_MISS == 1 && KVSTORE_ERROR == 2) ? 1 : -1];

/* Threads this shim attached are detached at their exit by this key's
 * destructor (its value is the JavaVM). */
static pthread_key_t kvpool_java_detach_key;
static pthread_once_t kvpool_java_detach_once = PTHREAD_ONCE_INIT;
static int kvpool_java_detach_ready = 0;

static void kvpool_java_detach_thread(void *vm) {
  (*(JavaVM *)vm)->DetachCurrentThread((JavaVM *)vm);
}

static void kvpool_java_make_detach_key(void) {
  kvpool_java_detach_ready = pthread_key_create(&kvpool_java_detach_key, kvpool_java_detach_thread) == 0;
}

/* One per pool: the backend (global reference) and what the callbacks need,
 * looked up once at creation on a Java thread (FindClass on an attached
 * native thread would search the system class loader only). */
typedef struct kvpool_java_store {
  JavaVM *vm;
  jobject backend;
  jclass string_class;  /* java.lang.String, global */
  jclass bytes_class;   /* byte[], global */
  jmethodID put;        /* void callPut(String[], byte[][], int[]) */
  jmethodID get;        /* byte[][] callGet(String[], int[]) */
  jmethodID exists;     /* int callExistsPrefix(String[]) */
  jmethodID clear;      /* int callClear() */
} kvpool_java_store;

/* This thread's JNIEnv: attaches a thread the JVM does not know, to be
 * detached when it exits. NULL when that is impossible. */
static JNIEnv *kvpool_java_env(JavaVM *vm) {
  JNIEnv *env = NULL;
  JavaVMAttachArgs args;
  jint rc = (*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8);
  if (rc == JNI_OK) return env;
  if (rc != JNI_EDETACHED) return NULL;
  pthread_once(&kvpool_java_detach_once, kvpool_java_make_detach_key);
  /* Without the key the thread could never be detached: refuse rather than leak a Thread. */
  if (!kvpool_java_detach_ready) return NULL;
  args.version = JNI_VERSION_1_8;
  args.name = (char *)"kvpool-storage";
  args.group = NULL;
  if ((*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&env, &args) != JNI_OK) return NULL;
  if (pthread_setspecific(kvpool_java_detach_key, vm) != 0) {
    (*vm)->DetachCurrentThread(vm);
    return NULL;
  }
  return env;
}

/* Clears a pending exception; returns whether there was one. */
static int kvpool_java_failed(JNIEnv *env) {
  if (!(*env)->ExceptionCheck(env)) return 0;
  (*env)->ExceptionClear(env);
  return 1;
}

/* The keys as a String[] (they are [0-9a-z-], so modified UTF-8 is UTF-8). */
static jobjectArray kvpool_java_keys(JNIEnv *env, const kvpool_java_store *s, const char *const *keys, size_t n) {
  size_t i;
  jobjectArray array = (*env)->NewObjectArray(env, (jsize)n, s->string_class, NULL);
  if (!array) return NULL;
  for (i = 0; i < n; ++i) {
    jstring key = (*env)->NewStringUTF(env, keys[i]);
    if (!key) return NULL;
    (*env)->SetObjectArrayElement(env, array, (jsize)i, key);
    (*env)->DeleteLocalRef(env, key);
    if ((*env)->ExceptionCheck(env)) return NULL;
  }
  return array;
}

/* Copies the int[] the Java side filled into results (checked by kvpool). */
static int kvpool_java_results(JNIEnv *env, jintArray codes, size_t n, int32_t *results) {
  jint chunk[128];
  size_t start, i;
  for (start = 0; start < n; start += 128) {
    size_t m = n - start < 128 ? n - start : 128;
    (*env)->GetIntArrayRegion(env, codes, (jsize)start, (jsize)m, chunk);
    if ((*env)->ExceptionCheck(env)) return 0;
    for (i = 0; i < m; ++i) results[start + i] = (int32_t)chunk[i];
  }
  return 1;
}

static void kvpool_java_put(void *user, const char *const *keys, const uint8_t *const *values, const size_t *sizes,
                            size_t n, int32_t *results) {
  kvpool_java_store *s = (kvpool_java_store *)user;
  JNIEnv *env = kvpool_java_env(s->vm);
  jobjectArray jkeys, jvalues;
  jintArray codes;
  size_t i;
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
  if (!env || n > (size_t)0x7fffffff) return;
  if ((*env)->PushLocalFrame(env, 8) != 0) {
    kvpool_java_failed(env);
    return;
  }
  jkeys = kvpool_java_keys(env, s, keys, n);
  if (!jkeys) goto done;
  jvalues = (*env)->NewObjectArray(env, (jsize)n, s->bytes_class, NULL);
  if (!jvalues) goto done;
  for (i = 0; i < n; ++i) {
    jbyteArray value;
    if (sizes[i] > (size_t)0x7fffffff) goto done;  /* no Java array that long */
    value = (*env)->NewByteArray(env, (jsize)sizes[i]);
    if (!value) goto done;
    (*env)->SetByteArrayRegion(env, value, 0, (jsize)sizes[i], (const jbyte *)values[i]);
    (*env)->SetObjectArrayElement(env, jvalues, (jsize)i, value);
    (*env)->DeleteLocalRef(env, value);
    if ((*env)->ExceptionCheck(env)) goto done;
  }
  codes = (*env)->NewIntArray(env, (jsize)n);
  if (!codes) goto done;
  (*env)->CallVoidMethod(env, s->backend, s->put, jkeys, jvalues, codes);
  if ((*env)->ExceptionCheck(env)) goto done;
  if (!kvpool_java_results(env, codes, n, results)) {
    for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
  }
done:
  kvpool_java_failed(env);
  (*env)->PopLocalFrame(env, NULL);
}

static void kvpool_java_get(void *user, const char *const *keys, uint8_t *const *dst, const size_t *capacity, size_t n,
                            size_t *sizes, int32_t *results) {
  kvpool_java_store *s = (kvpool_java_store *)user;
  JNIEnv *env = kvpool_java_env(s->vm);
  jobjectArray jkeys, jvalues;
  jintArray codes;
  size_t i;
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
  if (!env || n > (size_t)0x7fffffff) return;
  if ((*env)->PushLocalFrame(env, 8) != 0) {
    kvpool_java_failed(env);
    return;
  }
  jkeys = kvpool_java_keys(env, s, keys, n);
  if (!jkeys) goto done;
  codes = (*env)->NewIntArray(env, (jsize)n);
  if (!codes) goto done;
  jvalues = (jobjectArray)(*env)->CallObjectMethod(env, s->backend, s->get, jkeys, codes);
  if ((*env)->ExceptionCheck(env) || !jvalues) goto done;
  if (!kvpool_java_results(env, codes, n, results)) goto fail;
  for (i = 0; i < n; ++i) {
    jbyteArray value;
    jsize len;
    size_t copy;
    if (results[i] != KVSTORE_OK) continue;  /* MISS, ERROR or garbage: kvpool reads it as it is */
    value = (jbyteArray)(*env)->GetObjectArrayElement(env, jvalues, (jsize)i);
    if ((*env)->ExceptionCheck(env)) goto fail;
    if (!value) {  /* callGet already reports a null value as ERROR; never read through NULL */
      results[i] = KVSTORE_ERROR;
      continue;
    }
    len = (*env)->GetArrayLength(env, value);
    copy = (size_t)len < capacity[i] ? (size_t)len : capacity[i];
    (*env)->GetByteArrayRegion(env, value, 0, (jsize)copy, (jbyte *)dst[i]);
    (*env)->DeleteLocalRef(env, value);
    if ((*env)->ExceptionCheck(env)) goto fail;
    sizes[i] = (size_t)len;  /* the full length: kvpool rejects a value longer than capacity */
  }
  goto done;
fail:
  for (i = 0; i < n; ++i) results[i] = KVSTORE_ERROR;
done:
  kvpool_java_failed(env);
  (*env)->PopLocalFrame(env, NULL);
}

static size_t kvpool_java_exists_prefix(void *user, const char *const *keys, size_t n) {
  kvpool_java_store *s = (kvpool_java_store *)user;
  JNIEnv *env = kvpool_java_env(s->vm);
  jobjectArray jkeys;
  jint found = 0;
  if (!env || n > (size_t)0x7fffffff) return 0;
  if ((*env)->PushLocalFrame(env, 4) != 0) {
    kvpool_java_failed(env);
    return 0;
  }
  jkeys = kvpool_java_keys(env, s, keys, n);
  if (jkeys) {
    found = (*env)->CallIntMethod(env, s->backend, s->exists, jkeys);
    if ((*env)->ExceptionCheck(env) || found < 0) found = 0;  /* a key that cannot be asked about is missing */
  }
  kvpool_java_failed(env);
  (*env)->PopLocalFrame(env, NULL);
  return (size_t)found;
}

static int32_t kvpool_java_clear(void *user) {
  kvpool_java_store *s = (kvpool_java_store *)user;
  JNIEnv *env = kvpool_java_env(s->vm);
  jint rc;
  if (!env) return KVSTORE_ERROR;
  rc = (*env)->CallIntMethod(env, s->backend, s->clear);
  if (kvpool_java_failed(env)) return KVSTORE_ERROR;
  return (int32_t)rc;
}

static void kvpool_java_store_free(JNIEnv *env, kvpool_java_store *s) {
  if (env) {
    if (s->backend) (*env)->DeleteGlobalRef(env, s->backend);
    if (s->string_class) (*env)->DeleteGlobalRef(env, s->string_class);
    if (s->bytes_class) (*env)->DeleteGlobalRef(env, s->bytes_class);
  }
  free(s);
}

/* kvpool_destroy, after the pool's storage threads stopped: the backend may be collected now. */
static void kvpool_java_destroy(void *user) {
  kvpool_java_store *s = (kvpool_java_store *)user;
  kvpool_java_store_free(kvpool_java_env(s->vm), s);
}

/* Looks up a class and makes it a global reference (NULL with an exception pending on failure). */
static jclass kvpool_java_global_class(JNIEnv *env, const char *name) {
  jclass local = (*env)->FindClass(env, name);
  jclass global;
  if (!local) return NULL;
  global = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  return global;
}

/* Pool.withStorage: runs on the calling Java thread. A null backend goes to
 * the library as a NULL table (its own INVALID_ARGUMENT message); has_clear
 * is whether the Java class overrides clear() (else kvstore_clear answers
 * UNSUPPORTED, as for a C table without clear). */
static kvpool_status kvpool_java_create_with_storage(JNIEnv *jenv, const char *json, size_t json_len, jobject backend,
                                                     int has_clear, kvpool **out) {
  kvstore_backend table;
  kvpool_java_store *s;
  jclass cls;
  kvpool_status status;
  if (!backend) return kvpool_create_with_storage(json, json_len, NULL, out);
  s = (kvpool_java_store *)calloc(1, sizeof *s);
  if (!s) {
    SWIG_JavaThrowException(jenv, SWIG_JavaOutOfMemoryError, "kvpool: no memory for the storage backend");
    return KVPOOL_ERR_HOST_MEMORY;  /* kvpool_java_throw leaves the pending error to propagate */
  }
  if ((*jenv)->GetJavaVM(jenv, &s->vm) != JNI_OK) goto fail;
  s->string_class = kvpool_java_global_class(jenv, "java/lang/String");
  if (!s->string_class) goto fail;
  s->bytes_class = kvpool_java_global_class(jenv, "[B");
  if (!s->bytes_class) goto fail;
  cls = (*jenv)->FindClass(jenv, "ai/kvpool/StorageBackend");
  if (!cls) goto fail;
  s->put = (*jenv)->GetMethodID(jenv, cls, "callPut", "([Ljava/lang/String;[[B[I)V");
  s->get = s->put ? (*jenv)->GetMethodID(jenv, cls, "callGet", "([Ljava/lang/String;[I)[[B") : NULL;
  s->exists = s->get ? (*jenv)->GetMethodID(jenv, cls, "callExistsPrefix", "([Ljava/lang/String;)I") : NULL;
  s->clear = s->exists ? (*jenv)->GetMethodID(jenv, cls, "callClear", "()I") : NULL;
  (*jenv)->DeleteLocalRef(jenv, cls);
  if (!s->clear) goto fail;
  s->backend = (*jenv)->NewGlobalRef(jenv, backend);
  if (!s->backend) goto fail;

  memset(&table, 0, sizeof table);
  table.struct_size = (uint32_t)sizeof table;
  table.user = s;
  table.put = kvpool_java_put;
  table.get = kvpool_java_get;
  table.exists_prefix = kvpool_java_exists_prefix;
  table.clear = has_clear ? kvpool_java_clear : NULL;
  table.destroy = kvpool_java_destroy;
  status = kvpool_create_with_storage(json, json_len, &table, out);
  /* A failed creation never calls destroy: the reference is still ours. */
  if (status != KVPOOL_OK) kvpool_java_store_free(jenv, s);
  return status;
fail:
  /* Only JNI can fail here, normally with an exception pending (kvpool_java_throw defers to it). */
  if (!(*jenv)->ExceptionCheck(jenv)) {
    SWIG_JavaThrowException(jenv, SWIG_JavaRuntimeException, "kvpool: the JNI setup of the storage backend failed");
  }
  kvpool_java_store_free(jenv, s);
  return KVPOOL_ERR_INTERNAL;
}
%}

%typemap(in, numinputs=0) JNIEnv *jenv %{ $1 = jenv; %}
%typemap(jni) jobject backend "jobject"
%typemap(jtype) jobject backend "StorageBackend"
%typemap(jstype) jobject backend "StorageBackend"
%typemap(javain) jobject backend "$javainput"
%typemap(in) jobject backend %{ $1 = $input; %}
%rename(kvpool_create_with_storage) kvpool_java_create_with_storage;
KVPOOL_RAW(kvpool_java_create_with_storage)
kvpool_status kvpool_java_create_with_storage(JNIEnv *jenv, const char *json, size_t json_len, jobject backend,
                                              int has_clear, kvpool **out);
