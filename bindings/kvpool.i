/*
 * kvpool.i: the ONE SWIG interface of kvpool for Go, Java and C#.
 *
 * It wraps the public C headers (C mode, no -c++). What it adds on top of
 * the mechanical wrapping, in every language:
 *
 *  - kvpool_status as a return value is never seen by callers: a status other
 *    than KVPOOL_OK becomes an error (Go `error`, Java/C# KvPoolException).
 *    The message is read from kvpool_last_error() INSIDE the generated C
 *    wrapper of the failing call, i.e. on the same OS thread and before any
 *    other kvpool call, so it can never belong to another call. Every
 *    function added later that returns kvpool_status gets this for free.
 *  - A kvpool_status *parameter* must be named `status` (as in
 *    kvpool_status_string) to be passed as a plain enum value.
 *  - The opaque handle `struct kvpool` is a class (Java/C#: Pool) whose
 *    destructor is kvpool_destroy; the raw C functions are not public in
 *    Java/C# (KVPOOL_RAW list below): the idiomatic methods live on Pool.
 *  - Read-only structs filled by the library (kvpool_plan_info -> PlanInfo,
 *    kvpool_stats -> Stats, kvhost_stats -> HostStats, kvpool_buffer -> an
 *    internal BufferDescriptor; the storage tier's kvstore_stats ->
 *    StorageStats and kvstore_prefetch_info -> StoragePrefetchInfo)
 *    are made by a constructor that sets struct_size.
 *  - Zero-copy array typemaps, bound by PARAMETER NAME. The base patterns
 *    (see the "Arrays" block of each language section):
 *        (const int32_t *ids, size_t n)   (int32_t *out, size_t n)
 *        (const int64_t *ids, size_t n)   (int64_t *out, size_t n)
 *        (const void *BYTES_IN, size_t BYTES_IN_LEN)    bytes read by C
 *        (void *BYTES_OUT, size_t BYTES_OUT_LEN)        bytes written by C
 *        (const float *F32_IN, size_t F32_IN_LEN)       floats read by C (count)
 *        (const uint64_t *ids, size_t n)                request ids read by C
 *    and scalar out-parameters (returned by the idiomatic layer):
 *        size_t *OUT_SIZE   int32_t *OUT_I32   uint64_t *OUT_U64   int64_t *OUT_I64
 *    A `const char *extra_key` (prefix-cache namespace) is a nullable string.
 *    Every (pointer, length) parameter of the headers gets one of them with
 *    one macro line in the "Parameter names" block after the language
 *    sections (KVPOOL_IN_ARRAY / KVPOOL_OUT_ARRAY / ...), which expands to
 *    the right %apply per language, e.g. for
 *    kvalloc_free(pool, const int64_t *slots, size_t slots_len):
 *      KVPOOL_IN_ARRAY(int64_t, slots, slots_len)
 *    i.e. in Java/Go  %apply (const int64_t *ids, size_t n) { (const int64_t *slots, size_t slots_len) };
 *         in C#       %apply const int64_t *ids { const int64_t *slots };
 *    (C# cannot fold a pair into one parameter: the length stays a ulong
 *    parameter that the idiomatic method fills from the array's Length.)
 *
 * The idiomatic layers: Go is hand-written (bindings/go/kvpool/*.go); Java
 * gets Pool's methods through the javacode typemap in java/pool_methods.i
 * plus hand-written value classes (java/ai/kvpool); C# makes Pool a partial
 * class whose idiomatic half is csharp/src/Pool.cs (plus value classes).
 */

/* Module name = Java/C# module class name (Kvpool.version()); Go package kvpool. */
#if defined(SWIGGO)
%module kvpool
#else
%module Kvpool
#endif

%{
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kvpool/kvpool.h"
%}

/* int64_t/uint64_t: on LP64 Linux glibc's type is `long`, so the build passes
 * -DSWIGWORDSIZE64 there (bindings/CMakeLists.txt); then the casts SWIG writes
 * into the wrappers match the headers (a `long long *` cast of an `int64_t *`
 * is an incompatible-pointer error). SWIG maps `long` to a 32-bit int in
 * Java and C#, so the 64-bit target types are restored here. */
%include <stdint.i>
%apply long long { int64_t };
%apply unsigned long long { uint64_t };

/* ======================================================================== */
#if defined(SWIGJAVA)
/* ======================================================================== */

/* Numbers: Java has no unsigned types. uint32_t values (counts, sizes, the
 * version number) are exposed as int and uint64_t as long, as the JDK does
 * for sizes; none of kvpool's values come near the sign bit. */
%apply int { uint32_t };
%apply long long { uint64_t };

%javaconst(1);
%include "enums.swg"
%rename(Status) kvpool_status;
%rename(DType) kvpool_dtype;
%rename(BufferKind) kvpool_buffer_kind;
%rename(AllocKind) kvalloc_kind;
%rename(AllocList) kvalloc_list;
%rename(EventType) radix_event_type;
%rename(BLOCK_STORED) RADIX_EVENT_BLOCK_STORED;
%rename(BLOCK_REMOVED) RADIX_EVENT_BLOCK_REMOVED;
%rename(ALL_BLOCKS_CLEARED) RADIX_EVENT_ALL_BLOCKS_CLEARED;
%rename(HOST_STORED) RADIX_EVENT_HOST_STORED;
%rename(HOST_REMOVED) RADIX_EVENT_HOST_REMOVED;
/* storage.h: why kvstore_prefetch started nothing (StorageSkip.NONE, ...). */
%rename(StorageSkip) kvstore_skip;
%rename(NONE) KVSTORE_SKIP_NONE;
%rename(BELOW_THRESHOLD) KVSTORE_SKIP_BELOW_THRESHOLD;
%rename(NOT_BACKED_UP) KVSTORE_SKIP_NOT_BACKED_UP;
%rename(CAPACITY) KVSTORE_SKIP_CAPACITY;
%rename(HOST_FULL) KVSTORE_SKIP_HOST_FULL;
%rename(OK) KVPOOL_OK;
/* log.h: LogLevel.ERROR ... LogLevel.DEBUG. */
%rename(LogLevel) kvpool_log_level;
%rename(ERROR) KVPOOL_LOG_ERROR;
%rename(WARN) KVPOOL_LOG_WARN;
%rename(INFO) KVPOOL_LOG_INFO;
%rename(DEBUG) KVPOOL_LOG_DEBUG;
/* Enum items lose their C prefix: Status.CONFIG, DType.F32, BufferKind.K,
 * AllocKind.PAGED, AllocList.SWA_FREE. */
%rename("%(regex:/^KV(POOL|ALLOC)_(ERR_|DTYPE_|BUFFER_|LIST_)?(.*)$/\\3/)s", %$isenumitem) "";

/* Public, renamed module functions: Kvpool.version() etc. */
%rename(version) kvpool_version;
%rename(versionString) kvpool_version_string;
%rename(statusString) kvpool_status_string;
%rename(cudaDeviceCount) kvpool_cuda_device_count;
/* Raw functions behind Pool's methods: package-private (KVPOOL_RAW below). */
%define KVPOOL_RAW(NAME)
%javamethodmodifiers NAME "";
%enddef
%ignore kvpool_destroy;  /* Pool.close() is the only way to destroy */

%pragma(java) moduleclassmodifiers="public final class"
%pragma(java) jniclassclassmodifiers="final class"
%pragma(java) jniclasscode=%{
  /* Loads libkvpool_jni.so: the path in the system property
   * kvpool.jni.library, else java.library.path, else the copy bundled in
   * the jar (ai/kvpool/NativeLoader.java). */
  static {
    NativeLoader.load();
  }

  /* Frees native memory of proxies that were never closed (no finalize()). */
  static final java.lang.ref.Cleaner CLEANER = java.lang.ref.Cleaner.create();
%}

/* --- Throwing KvPoolException from inside the native call ---------------- */
%{
/* Throws ai.kvpool.KvPoolException(code, message) with the message of the
 * failure that just happened on this thread. The message goes over as UTF-8
 * bytes (not NewStringUTF, whose "modified UTF-8" rejects some byte
 * sequences a file path may contain). Any JNI failure, or an exception
 * already pending (e.g. OutOfMemoryError from pinning an array), is left
 * to propagate instead. */
/* The class name follows the -package option the build passes (ai.kvpool). */
static void kvpool_java_throw(JNIEnv *jenv, kvpool_status status) {
  const char *msg = kvpool_last_error();
  jsize len = (jsize)strlen(msg);
  jclass cls;
  jmethodID ctor;
  jbyteArray bytes;
  jobject ex;
  if ((*jenv)->ExceptionCheck(jenv)) return;
  cls = (*jenv)->FindClass(jenv, "ai/kvpool/KvPoolException");
  if (!cls) return;
  ctor = (*jenv)->GetMethodID(jenv, cls, "<init>", "(I[B)V");
  if (!ctor) return;
  bytes = (*jenv)->NewByteArray(jenv, len);
  if (!bytes) return;
  (*jenv)->SetByteArrayRegion(jenv, bytes, 0, len, (const jbyte *)msg);
  if ((*jenv)->ExceptionCheck(jenv)) return;
  ex = (*jenv)->NewObject(jenv, cls, ctor, (jint)status, bytes);
  if (!ex) return;
  (*jenv)->Throw(jenv, (jthrowable)ex);
}

/* A size_t travels in a jlong (scalar out-parameters, OUT_SIZE below). */
typedef char kvpool_java_size_t_fits_jlong[sizeof(size_t) <= sizeof(jlong) ? 1 : -1];
%}

/* A returned kvpool_status becomes `void` in Java and throws on failure. The
 * throw is in the `ret` typemap, which runs after argout/freearg: arrays held
 * with Get*Critical are released before any JNI call is made. */
%typemap(jni) kvpool_status "void"
%typemap(jtype) kvpool_status "void"
%typemap(jstype) kvpool_status "void"
%typemap(out) kvpool_status ""
%typemap(ret) kvpool_status %{
  kvpool_java_log_flush(jenv);  /* log messages of this call (java/log_callback.i) */
  if ($1 != KVPOOL_OK) kvpool_java_throw(jenv, $1);
%}
%typemap(javaout) kvpool_status {
    $jnicall;
  }
/* ...but a parameter named `status` is an ordinary Status enum value. */
%apply enum SWIGTYPE { kvpool_status status };

/* Functions returning NULL on failure (today: kvpool_backend, which fails
 * for a NULL or dead handle) throw instead of returning null. */
%typemap(out) const char *KVPOOL_NONNULL_STRING {
  if (!$1) {
    kvpool_java_throw(jenv, KVPOOL_ERR_INVALID_ARGUMENT);
    return $null;
  }
  $result = (*jenv)->NewStringUTF(jenv, (const char *)$1);
}
%apply const char *KVPOOL_NONNULL_STRING { const char *kvpool_backend };

/* --- Strings: UTF-8 bytes made in Java (Utf8.java) ------------------------ */
/* JSON text with its length: a byte[] holding exactly the UTF-8 bytes. */
%typemap(jni) (const char *json, size_t json_len) "jbyteArray"
%typemap(jtype) (const char *json, size_t json_len) "byte[]"
%typemap(jstype) (const char *json, size_t json_len) "String"
%typemap(javain) (const char *json, size_t json_len) "Utf8.bytes($javainput)"
%typemap(in) (const char *json, size_t json_len) {
  $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
  $1 = ($1_ltype)(*jenv)->GetByteArrayElements(jenv, $input, NULL);
  if (!$1) return $null;
}
%typemap(freearg) (const char *json, size_t json_len) {
  if ($1) (*jenv)->ReleaseByteArrayElements(jenv, $input, (jbyte *)$1, JNI_ABORT);
}
/* NUL-terminated path: UTF-8 bytes plus a trailing 0 (not modified UTF-8). */
%typemap(jni) const char *path "jbyteArray"
%typemap(jtype) const char *path "byte[]"
%typemap(jstype) const char *path "String"
%typemap(javain) const char *path "Utf8.cString($javainput)"
%typemap(in) const char *path {
  $1 = ($1_ltype)(*jenv)->GetByteArrayElements(jenv, $input, NULL);
  if (!$1) return $null;
}
%typemap(freearg) const char *path {
  if ($1) (*jenv)->ReleaseByteArrayElements(jenv, $input, (jbyte *)$1, JNI_ABORT);
}
/* Prefix-cache namespace: as a path, but a Java null passes NULL (the default namespace). */
%typemap(jni) const char *extra_key "jbyteArray"
%typemap(jtype) const char *extra_key "byte[]"
%typemap(jstype) const char *extra_key "String"
%typemap(javain) const char *extra_key "Utf8.cStringOrNull($javainput)"
%typemap(in) const char *extra_key {
  $1 = NULL;
  if ($input) {
    $1 = ($1_ltype)(*jenv)->GetByteArrayElements(jenv, $input, NULL);
    if (!$1) return $null;
  }
}
%typemap(freearg) const char *extra_key {
  if ($1) (*jenv)->ReleaseByteArrayElements(jenv, $input, (jbyte *)$1, JNI_ABORT);
}

/* --- Out-handle of kvpool_create*: a long[1] the Java side reads --------- */
%typemap(jni) kvpool **out "jlongArray"
%typemap(jtype) kvpool **out "long[]"
%typemap(jstype) kvpool **out "long[]"
%typemap(javain) kvpool **out "$javainput"
/* Only Pool's own code calls these (package-private), always with new long[1]. */
%typemap(in) kvpool **out (kvpool *handle = NULL) %{ $1 = &handle; %}
%typemap(argout) kvpool **out {
  jlong h = 0;
  *(kvpool **)&h = handle$argnum;
  (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &h);
}

/* --- Arrays: Java primitive arrays without copying ------------------------ */
/* A (pointer, length) pair is one Java array. The array is pinned with
 * GetPrimitiveArrayCritical in `check` (after every `in` typemap, so no other
 * argument's JNI call runs inside the critical region; several pins nest) and
 * released in `argout`, before the `ret` typemap may throw and before the
 * `freearg` of scalar out-parameters writes back.
 * Rule for functions using them: return kvpool_status or a primitive (an
 * `out` typemap creating a Java object would run inside the region).
 * Arrays C only reads are released with JNI_ABORT (never written back);
 * arrays C writes with 0 (written back if the VM had to copy).
 * NULLABLE arrays pass (NULL, 0) for a Java null (kvpool_set_kv's v of an
 * mla pool); the others throw NullPointerException. ELEM_BYTES > 1 turns
 * the element count into a byte count (float[] as bytes).
 * Should a pin fail (the VM could not copy; HotSpot pins in place), the
 * pointer stays NULL: the library rejects a NULL with a non-zero length, and
 * the pending OutOfMemoryError is what Java sees (kvpool_java_throw defers). */
%define KVPOOL_JAVA_PINNED(CTYPE, PTR, LEN, JNITYPE, JTYPE, MODE, NULLABLE, ELEM_BYTES)
%typemap(jni) (CTYPE *PTR, size_t LEN) #JNITYPE
%typemap(jtype) (CTYPE *PTR, size_t LEN) #JTYPE
%typemap(jstype) (CTYPE *PTR, size_t LEN) #JTYPE
%typemap(javain) (CTYPE *PTR, size_t LEN) "$javainput"
%typemap(in) (CTYPE *PTR, size_t LEN) {
  $1 = NULL;
  $2 = 0;
  if ($input) {
    $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input) * (ELEM_BYTES);
  } else if (!(NULLABLE)) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "$1_name array is null");
    return $null;
  }
}
%typemap(check) (CTYPE *PTR, size_t LEN) {
  if ($input) $1 = ($1_ltype)(*jenv)->GetPrimitiveArrayCritical(jenv, $input, NULL);
}
%typemap(argout) (CTYPE *PTR, size_t LEN) {
  if ($1) (*jenv)->ReleasePrimitiveArrayCritical(jenv, $input, (void *)$1, MODE);
}
%enddef
KVPOOL_JAVA_PINNED(const int32_t, ids, n, jintArray, int[], JNI_ABORT, 0, 1)
KVPOOL_JAVA_PINNED(int32_t, out, n, jintArray, int[], 0, 0, 1)
KVPOOL_JAVA_PINNED(const int64_t, ids, n, jlongArray, long[], JNI_ABORT, 0, 1)
KVPOOL_JAVA_PINNED(int64_t, out, n, jlongArray, long[], 0, 0, 1)
/* uint64_t ids (request ids) travel as long[]: same bits. */
KVPOOL_JAVA_PINNED(const uint64_t, ids, n, jlongArray, long[], JNI_ABORT, 0, 1)
KVPOOL_JAVA_PINNED(const void, BYTES_IN, BYTES_IN_LEN, jbyteArray, byte[], JNI_ABORT, 1, 1)
KVPOOL_JAVA_PINNED(void, BYTES_OUT, BYTES_OUT_LEN, jbyteArray, byte[], 0, 1, 1)
KVPOOL_JAVA_PINNED(const float, F32_IN, F32_IN_LEN, jfloatArray, float[], JNI_ABORT, 0, 1)
/* float[] passed where C takes bytes (the f32 overloads of setKv/getKv). */
KVPOOL_JAVA_PINNED(const void, F32_BYTES_IN, F32_BYTES_IN_LEN, jfloatArray, float[], JNI_ABORT, 1, sizeof(jfloat))
KVPOOL_JAVA_PINNED(void, F32_BYTES_OUT, F32_BYTES_OUT_LEN, jfloatArray, float[], 0, 1, sizeof(jfloat))

/* --- Direct ByteBuffers: bulk KV data outside the Java heap --------------- */
/* The buffer's address and capacity; Pool passes buffer.slice(), so that is
 * the window position..limit. Nothing is pinned (direct memory never moves),
 * so these may be large and the GC is never held up. A null buffer passes
 * (NULL, 0); a heap buffer throws IllegalArgumentException. */
%define KVPOOL_JAVA_NIO(CTYPE, PTR, LEN)
%typemap(jni) (CTYPE *PTR, size_t LEN) "jobject"
%typemap(jtype) (CTYPE *PTR, size_t LEN) "java.nio.ByteBuffer"
%typemap(jstype) (CTYPE *PTR, size_t LEN) "java.nio.ByteBuffer"
%typemap(javain) (CTYPE *PTR, size_t LEN) "$javainput"
%typemap(in) (CTYPE *PTR, size_t LEN) {
  $1 = NULL;
  $2 = 0;
  if ($input) {
    jlong capacity = (*jenv)->GetDirectBufferCapacity(jenv, $input);
    $1 = ($1_ltype)(*jenv)->GetDirectBufferAddress(jenv, $input);
    if (!$1 || capacity < 0) {
      SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "$1_name is not a direct ByteBuffer");
      return $null;
    }
    $2 = (size_t)capacity;
  }
}
%enddef
KVPOOL_JAVA_NIO(const void, NIO_IN, NIO_IN_LEN)
KVPOOL_JAVA_NIO(void, NIO_OUT, NIO_OUT_LEN)

/* --- Scalar out-parameters: a one-element array --------------------------- */
/* C writes a local; `freearg` (after every argout, i.e. after every pinned
 * array is released) copies it into element 0, also when the call failed
 * (kvalloc_free_list reports the needed length with BUFFER_TOO_SMALL). */
%define KVPOOL_JAVA_SCALAR_OUT(CTYPE, NAME, JNITYPE, JTYPE, JELEM, SET_REGION)
%typemap(jni) CTYPE *NAME #JNITYPE
%typemap(jtype) CTYPE *NAME #JTYPE
%typemap(jstype) CTYPE *NAME #JTYPE
%typemap(javain) CTYPE *NAME "$javainput"
%typemap(in) CTYPE *NAME (CTYPE value = 0) {
  if (!$input || (*jenv)->GetArrayLength(jenv, $input) < 1) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "$1_name needs an array of one element");
    return $null;
  }
  $1 = &value;
}
%typemap(freearg) CTYPE *NAME {
  if (!(*jenv)->ExceptionCheck(jenv)) {
    JELEM element = (JELEM)value$argnum;
    (*jenv)->SET_REGION(jenv, $input, 0, 1, &element);
  }
}
%enddef
KVPOOL_JAVA_SCALAR_OUT(size_t, OUT_SIZE, jlongArray, long[], jlong, SetLongArrayRegion)
KVPOOL_JAVA_SCALAR_OUT(int32_t, OUT_I32, jintArray, int[], jint, SetIntArrayRegion)
KVPOOL_JAVA_SCALAR_OUT(uint64_t, OUT_U64, jlongArray, long[], jlong, SetLongArrayRegion)
KVPOOL_JAVA_SCALAR_OUT(int64_t, OUT_I64, jlongArray, long[], jlong, SetLongArrayRegion)

/* --- Addresses (device.h): a native address as a long -------------------- */
/* kvpool_addr (uintptr_t) parameters and results are plain Java longs: the
 * address of device memory (or host memory on a CPU pool), or a stream. */
%typemap(jni) kvpool_addr "jlong"
%typemap(jtype) kvpool_addr "long"
%typemap(jstype) kvpool_addr "long"
%typemap(javain) kvpool_addr "$javainput"
%typemap(javaout) kvpool_addr {
    return $jnicall;
  }
%typemap(in) kvpool_addr %{ $1 = (kvpool_addr)$input; %}
%typemap(out) kvpool_addr %{ $result = (jlong)$1; %}

/* --- Proxies own native memory; a Cleaner frees what was not closed ------ */
/* SWIG's default finalize() is deprecated (and fails -Xlint:all -Werror).
 * The Cleaner action captures only the address, never the proxy. */
%define KVPOOL_JAVA_OWNED_PROXY(TYPE, DELETE)
%typemap(javafinalize) TYPE ""
%typemap(javaclassmodifiers) TYPE "public final class"
%typemap(javabody) TYPE %{
  private transient long swigCPtr;
  private final transient java.lang.ref.Cleaner.Cleanable swigCleanable;

  $javaclassname(long cPtr, boolean cMemoryOwn) {
    swigCPtr = cPtr;
    swigCleanable = (cMemoryOwn && cPtr != 0)
        ? KvpoolJNI.CLEANER.register(this, () -> KvpoolJNI.DELETE(cPtr))
        : null;
  }

  static long getCPtr($javaclassname obj) {
    return (obj == null) ? 0 : obj.swigCPtr;
  }
%}
%enddef
KVPOOL_JAVA_OWNED_PROXY(struct kvpool, delete_Pool)
KVPOOL_JAVA_OWNED_PROXY(struct kvpool_plan_info, delete_PlanInfo)
KVPOOL_JAVA_OWNED_PROXY(struct kvpool_stats, delete_Stats)
KVPOOL_JAVA_OWNED_PROXY(struct kvpool_buffer, delete_BufferDescriptor)
KVPOOL_JAVA_OWNED_PROXY(struct kvseq_info, delete_SeqInfo)
KVPOOL_JAVA_OWNED_PROXY(struct kvhost_stats, delete_HostStats)
KVPOOL_JAVA_OWNED_PROXY(struct kvstore_stats, delete_StorageStats)
KVPOOL_JAVA_OWNED_PROXY(struct kvstore_prefetch_info, delete_StoragePrefetchInfo)

/* Pool: AutoCloseable; close() destroys once, later calls do nothing. After
 * close() the handle is 0, which every C function rejects with
 * KVPOOL_ERR_INVALID_ARGUMENT, so methods on a closed Pool throw. */
%typemap(javainterfaces) struct kvpool "AutoCloseable"
%typemap(javadestruct, methodname="close", methodmodifiers="@Override public synchronized") struct kvpool {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
/* Pool.close() returns no status: the log messages of the destroy (java/log_callback.i)
 * are delivered here instead of by the `ret` typemap. */
%exception kvpool::~kvpool %{
  $action
  kvpool_java_log_flush(jenv);
%}
/* Pool's idiomatic methods (the javacode typemap of struct kvpool). */
%include "java/pool_methods.i"

/* PlanInfo and Stats: read-only values; memory goes back through the Cleaner
 * only (no public delete, so a getter can never see freed memory). */
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvpool_plan_info {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvpool_plan_info::kvpool_plan_info "";
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvpool_stats {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvpool_stats::kvpool_stats "";
/* SeqInfo (kvseq_info): a read-only value made by Pool.seqInfo(). */
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvseq_info {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvseq_info::kvseq_info "";
/* HostStats (kvhost_stats): a read-only value made by Pool.hostStats(). */
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvhost_stats {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvhost_stats::kvhost_stats "";
/* StorageStats (kvstore_stats) and StoragePrefetchInfo (kvstore_prefetch_info):
 * read-only values made by Pool.storageStats() / Pool.storagePrefetchPoll(). */
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvstore_stats {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvstore_stats::kvstore_stats "";
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvstore_prefetch_info {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvstore_prefetch_info::kvstore_prefetch_info "";
%typemap(javacode) struct kvstore_prefetch_info %{
  /** Whether nothing more will land (all read, stopped at a missing or bad page, or revoked). */
  public boolean isDone() {
    return getDone() != 0;
  }

  /** Whether storage held fewer tokens than the threshold (nothing was read). */
  public boolean isRevoked() {
    return getRevoked() != 0;
  }

  /** Whether the prefetch policy lets the request go on now. */
  public boolean isReady() {
    return getReady() != 0;
  }

  /** Whether getHitTokens() is known. */
  public boolean isSearched() {
    return getSearched() != 0;
  }

  @Override
  public String toString() {
    return "StoragePrefetchInfo{done=" + getDone() + ", revoked=" + getRevoked() + ", ready=" + getReady()
        + ", searched=" + getSearched() + ", askedTokens=" + getAskedTokens() + ", hitTokens=" + getHitTokens()
        + ", loadedTokens=" + getLoadedTokens() + "}";
  }
%}
%typemap(javacode) struct kvpool_stats %{
  /** The allocator kind as an enum (getAllocKind() is its number). */
  public AllocKind getKind() {
    return AllocKind.swigToEnum(getAllocKind());
  }
%}
/* BufferDescriptor: package-private; Pool.buffer() copies it into the public
 * BufferInfo and frees it at once (delete() is package-private). */
%typemap(javaclassmodifiers) struct kvpool_buffer "final class"
%typemap(javadestruct, methodname="delete", methodmodifiers="synchronized") struct kvpool_buffer {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%rename(shapeAt) kvpool_buffer::shape_at;
%rename(strideAt) kvpool_buffer::stride_at;
%rename(dataAddress) kvpool_buffer::data_address;
%rename("%(lowercamelcase)s", %$isvariable, %$ismember) "";

/* ======================================================================== */
#elif defined(SWIGCSHARP)
/* ======================================================================== */

/* size_t is 32-bit `uint` in SWIG's C# defaults; make it ulong. */
%apply unsigned long long { size_t };

%csconst(1);
%rename(Status) kvpool_status;
%rename(Ok) KVPOOL_OK;
%rename(InvalidArgument) KVPOOL_ERR_INVALID_ARGUMENT;
%rename(Config) KVPOOL_ERR_CONFIG;
%rename(OutOfMemory) KVPOOL_ERR_OUT_OF_MEMORY;
%rename(Cuda) KVPOOL_ERR_CUDA;
%rename(Unsupported) KVPOOL_ERR_UNSUPPORTED;
%rename(Internal) KVPOOL_ERR_INTERNAL;
%rename(BufferTooSmall) KVPOOL_ERR_BUFFER_TOO_SMALL;
%rename(Io) KVPOOL_ERR_IO;
%rename(HostMemory) KVPOOL_ERR_HOST_MEMORY;
%rename(CheckFailed) KVPOOL_ERR_CHECK_FAILED;
%rename(DeviceFault) KVPOOL_ERR_DEVICE_FAULT;
/* A code appended to status.h needs its PascalCase name here (the C# test
 * StatusCodesAndStrings fails until it has one). */

%rename(DType) kvpool_dtype;
%rename(F32) KVPOOL_DTYPE_F32;
%rename(F16) KVPOOL_DTYPE_F16;
%rename(Bf16) KVPOOL_DTYPE_BF16;
%rename(Fp8E4m3) KVPOOL_DTYPE_FP8_E4M3;
%rename(Fp8E5m2) KVPOOL_DTYPE_FP8_E5M2;
%rename(Fp4E2m1) KVPOOL_DTYPE_FP4_E2M1;
%rename(U8) KVPOOL_DTYPE_U8;
%rename(I32) KVPOOL_DTYPE_I32;
%rename(I64) KVPOOL_DTYPE_I64;
%rename(BufferKind) kvpool_buffer_kind;
%rename(K) KVPOOL_BUFFER_K;
%rename(V) KVPOOL_BUFFER_V;
%rename(KScale) KVPOOL_BUFFER_K_SCALE;
%rename(VScale) KVPOOL_BUFFER_V_SCALE;
%rename(Indexer) KVPOOL_BUFFER_INDEXER;
%rename(Label) KVPOOL_BUFFER_LABEL;
%rename(ReqTable) KVPOOL_BUFFER_REQ_TABLE;
%rename(MambaConv) KVPOOL_BUFFER_MAMBA_CONV;
%rename(MambaSsm) KVPOOL_BUFFER_MAMBA_SSM;
%rename(SwaMapping) KVPOOL_BUFFER_SWA_MAPPING;
%rename(MambaIntermediateSsm) KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM;
%rename(MambaIntermediateConv) KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV;
%rename(AllocKind) kvalloc_kind;
%rename(Token) KVALLOC_TOKEN;
%rename(Paged) KVALLOC_PAGED;
%rename(Swa) KVALLOC_SWA;
%rename(AllocList) kvalloc_list;
%rename(Free) KVALLOC_LIST_FREE;
%rename(Release) KVALLOC_LIST_RELEASE;
%rename(SwaFree) KVALLOC_LIST_SWA_FREE;
%rename(SwaRelease) KVALLOC_LIST_SWA_RELEASE;
%rename(EventType) radix_event_type;
%rename(BlockStored) RADIX_EVENT_BLOCK_STORED;
%rename(BlockRemoved) RADIX_EVENT_BLOCK_REMOVED;
%rename(AllBlocksCleared) RADIX_EVENT_ALL_BLOCKS_CLEARED;
%rename(HostStored) RADIX_EVENT_HOST_STORED;
%rename(HostRemoved) RADIX_EVENT_HOST_REMOVED;
%rename(StorageSkip) kvstore_skip;
%rename(None) KVSTORE_SKIP_NONE;
%rename(LogLevel) kvpool_log_level;
%rename(Error) KVPOOL_LOG_ERROR;
%rename(Warn) KVPOOL_LOG_WARN;
%rename(Info) KVPOOL_LOG_INFO;
%rename(Debug) KVPOOL_LOG_DEBUG;
%rename(BelowThreshold) KVSTORE_SKIP_BELOW_THRESHOLD;
%rename(NotBackedUp) KVSTORE_SKIP_NOT_BACKED_UP;
%rename(Capacity) KVSTORE_SKIP_CAPACITY;
%rename(HostFull) KVSTORE_SKIP_HOST_FULL;
/* An enum value appended to a header needs its PascalCase name here (the C#
 * test EnumsHavePascalCaseNames fails until it has one). */

%rename(Version) kvpool_version;
%rename(VersionString) kvpool_version_string;
%rename(StatusString) kvpool_status_string;
%rename(CudaDeviceCount) kvpool_cuda_device_count;
/* Raw functions behind Pool's methods: internal (KVPOOL_RAW below). */
%define KVPOOL_RAW(NAME)
%csmethodmodifiers NAME "internal";
%enddef
%ignore kvpool_destroy;  /* Pool.Dispose() is the only way to destroy */

%pragma(csharp) moduleclassmodifiers="public static class"

/* --- Raising KvPoolException from inside the native call ----------------- */
/* SWIG's C# pending-exception mechanism: the wrapper calls back into C#
 * (still inside the P/Invoke), which stores the exception in the imclass's
 * thread-static SWIGPendingException; the generated code throws it as soon
 * as the P/Invoke returns (`canthrow` + $excode). */
%{
typedef void (SWIGSTDCALL *KvPoolCs_RaiseCallback)(int code, const char *message, int length);
static KvPoolCs_RaiseCallback kvpool_cs_raise_callback = NULL;

#ifdef __cplusplus
extern "C"
#endif
SWIGEXPORT void SWIGSTDCALL KvPoolCs_RegisterRaise(KvPoolCs_RaiseCallback callback) {
  kvpool_cs_raise_callback = callback;
}

/* Hands this thread's failure (code + kvpool_last_error) to C#. */
static void kvpool_cs_raise(kvpool_status status) {
  const char *msg = kvpool_last_error();
  kvpool_cs_raise_callback((int)status, msg, (int)strlen(msg));
}
%}
%pragma(csharp) imclasscode=%{
  protected class KvPoolExceptionHelper {
    public delegate void RaiseDelegate(int code, global::System.IntPtr message, int length);
    static readonly RaiseDelegate raiseDelegate = new RaiseDelegate(Raise);

    [global::System.Runtime.InteropServices.DllImport("$dllimport", EntryPoint="KvPoolCs_RegisterRaise")]
    static extern void KvPoolCs_RegisterRaise(RaiseDelegate callback);

    // Called from the C wrapper of the failing call; the message bytes are
    // UTF-8 and only valid during the call, so they are copied here.
    static void Raise(int code, global::System.IntPtr message, int length) {
      byte[] bytes = new byte[length];
      global::System.Runtime.InteropServices.Marshal.Copy(message, bytes, 0, length);
      SWIGPendingException.Set(new KvPoolException(code, global::System.Text.Encoding.UTF8.GetString(bytes)));
    }

    static KvPoolExceptionHelper() {
      KvPoolCs_RegisterRaise(raiseDelegate);
    }
  }
  protected static KvPoolExceptionHelper kvpoolExceptionHelper = new KvPoolExceptionHelper();
%}

/* A returned kvpool_status becomes `void` in C# and throws on failure. */
%typemap(ctype) kvpool_status "int"
%typemap(imtype) kvpool_status "int"
%typemap(cstype) kvpool_status "void"
%typemap(out, canthrow=1) kvpool_status %{
  $result = (int)$1;
  if ($1 != KVPOOL_OK) kvpool_cs_raise($1);
%}
%typemap(csout, excode=SWIGEXCODE) kvpool_status {
    $imcall;$excode
  }
/* ...but a parameter named `status` is an ordinary Status enum value. */
%apply enum SWIGTYPE { kvpool_status status };

/* Functions returning NULL on failure (kvpool_backend) throw instead. */
%typemap(out, canthrow=1) const char *KVPOOL_NONNULL_STRING %{
  $result = SWIG_csharp_string_callback((const char *)$1);
  if (!$1) kvpool_cs_raise(KVPOOL_ERR_INVALID_ARGUMENT);
%}
%apply const char *KVPOOL_NONNULL_STRING { const char *kvpool_backend };

/* --- Strings: NUL-terminated UTF-8 bytes made in C# (Utf8.cs) ------------- */
/* A byte[] is blittable, so the marshaller pins it: no further copy. Utf8
 * rejects strings containing '\0', so strlen gives the exact length. */
%typemap(ctype) (const char *json, size_t json_len) "const char *"
%typemap(imtype) (const char *json, size_t json_len) "byte[]"
%typemap(cstype) (const char *json, size_t json_len) "string"
%typemap(csin) (const char *json, size_t json_len) "Utf8.CString($csinput)"
%typemap(in) (const char *json, size_t json_len) %{
  $1 = ($1_ltype)$input;
  $2 = $1 ? strlen($1) : 0;
%}
%typemap(ctype) const char *path "const char *"
%typemap(imtype) const char *path "byte[]"
%typemap(cstype) const char *path "string"
%typemap(csin) const char *path "Utf8.CString($csinput)"
%typemap(in) const char *path %{ $1 = ($1_ltype)$input; %}
/* Prefix-cache namespace: as a path, but null passes NULL (the default namespace). */
%typemap(ctype) const char *extra_key "const char *"
%typemap(imtype) const char *extra_key "byte[]"
%typemap(cstype) const char *extra_key "string"
%typemap(csin) const char *extra_key "Utf8.CStringOrNull($csinput)"
%typemap(in) const char *extra_key %{ $1 = ($1_ltype)$input; %}

/* --- Out-handle of kvpool_create*: `out IntPtr` -------------------------- */
%typemap(ctype) kvpool **out "void **"
%typemap(imtype) kvpool **out "out global::System.IntPtr"
%typemap(cstype) kvpool **out "out global::System.IntPtr"
%typemap(csin) kvpool **out "out $csinput"
%typemap(in) kvpool **out %{ $1 = (kvpool **)$input; %}

/* --- Arrays: blittable arrays pinned by the marshaller ------------------- */
/* Bound by name: `const int32_t *ids`, `int32_t *out`, `const int64_t *ids`,
 * `int64_t *out`, `const void *BYTES_IN`, `void *BYTES_OUT`,
 * `const float *F32_IN` (the `size_t` length beside each stays a ulong
 * parameter). C# cannot fold (pointer, length) into one parameter, so the
 * raw function is `internal` (KVPOOL_RAW) and Pool's public method passes
 * array.Length. int[]/long[]/byte[]/float[] are blittable: the marshaller
 * pins them and C reads/writes the managed array in place ([In,Out] makes
 * the written values visible under any marshaller that might copy). A null
 * array passes NULL (the library accepts it with length 0). */
%define KVPOOL_CS_ARRAY(CTYPE, CSTYPE, NAME)
%typemap(ctype) CTYPE *NAME "void *"
%typemap(imtype) CTYPE *NAME "[global::System.Runtime.InteropServices.In] CSTYPE"
%typemap(cstype) CTYPE *NAME "CSTYPE"
%typemap(csin) CTYPE *NAME "$csinput"
%typemap(in) CTYPE *NAME %{ $1 = ($1_ltype)$input; %}
%enddef
/* Arrays C writes: also [Out]. */
%define KVPOOL_CS_OUT_ARRAY(CTYPE, CSTYPE, NAME)
KVPOOL_CS_ARRAY(CTYPE, CSTYPE, NAME)
%typemap(imtype) CTYPE *NAME "[global::System.Runtime.InteropServices.In, global::System.Runtime.InteropServices.Out] CSTYPE"
%enddef
KVPOOL_CS_ARRAY(const int32_t, int[], ids)
KVPOOL_CS_OUT_ARRAY(int32_t, int[], out)
KVPOOL_CS_ARRAY(const int64_t, long[], ids)
KVPOOL_CS_OUT_ARRAY(int64_t, long[], out)
KVPOOL_CS_ARRAY(const uint64_t, ulong[], ids)
KVPOOL_CS_ARRAY(const void, byte[], BYTES_IN)
KVPOOL_CS_OUT_ARRAY(void, byte[], BYTES_OUT)
KVPOOL_CS_ARRAY(const float, float[], F32_IN)

/* --- Scalar out-parameters: `out` arguments ------------------------------ */
%define KVPOOL_CS_SCALAR_OUT(CTYPE, CSTYPE, NAME)
%typemap(ctype) CTYPE *NAME "void *"
%typemap(imtype) CTYPE *NAME "out CSTYPE"
%typemap(cstype) CTYPE *NAME "out CSTYPE"
%typemap(csin) CTYPE *NAME "out $csinput"
%typemap(in) CTYPE *NAME %{ $1 = ($1_ltype)$input; %}
%enddef
KVPOOL_CS_SCALAR_OUT(size_t, ulong, OUT_SIZE)
KVPOOL_CS_SCALAR_OUT(int32_t, int, OUT_I32)
KVPOOL_CS_SCALAR_OUT(uint64_t, ulong, OUT_U64)
KVPOOL_CS_SCALAR_OUT(int64_t, long, OUT_I64)

/* --- Addresses (device.h): IntPtr ---------------------------------------- */
/* kvpool_addr (uintptr_t) parameters and results are IntPtr: the address of
 * device memory (or host memory on a CPU pool), or a stream. */
%typemap(ctype) kvpool_addr "void *"
%typemap(imtype) kvpool_addr "global::System.IntPtr"
%typemap(cstype) kvpool_addr "global::System.IntPtr"
%typemap(csin) kvpool_addr "$csinput"
%typemap(csout, excode=SWIGEXCODE) kvpool_addr {
    global::System.IntPtr ret = $imcall;$excode
    return ret;
  }
%typemap(in) kvpool_addr %{ $1 = (kvpool_addr)$input; %}
%typemap(out) kvpool_addr %{ $result = (void *)$1; %}

/* --- Pool ------------------------------------------------------------------ */
/* IDisposable through SWIG's defaults: Dispose() destroys once and resets
 * the handle to null, which every C function rejects with
 * KVPOOL_ERR_INVALID_ARGUMENT, so methods on a disposed Pool throw. The
 * idiomatic methods are the other half of this partial class (src/Pool.cs). */
%typemap(csclassmodifiers) struct kvpool "public partial class"

/* --- PlanInfo, Stats: read-only values, freed by their finalizer only ---- */
/* Not IDisposable: a public Dispose() would let a property read freed memory. */
%define KVPOOL_CS_VALUE_PROXY(TYPE)
%typemap(csinterfaces) TYPE ""
%typemap(csdispose) TYPE %{
  ~$csclassname() {
    Dispose(false);
  }

  internal void Dispose() {
    Dispose(true);
    global::System.GC.SuppressFinalize(this);
  }
%}
%enddef
KVPOOL_CS_VALUE_PROXY(struct kvpool_plan_info)
KVPOOL_CS_VALUE_PROXY(struct kvpool_stats)
KVPOOL_CS_VALUE_PROXY(struct kvpool_buffer)
KVPOOL_CS_VALUE_PROXY(struct kvseq_info)
KVPOOL_CS_VALUE_PROXY(struct kvhost_stats)
%csmethodmodifiers kvseq_info::kvseq_info "internal";
%csmethodmodifiers kvhost_stats::kvhost_stats "internal";
KVPOOL_CS_VALUE_PROXY(struct kvstore_stats)
KVPOOL_CS_VALUE_PROXY(struct kvstore_prefetch_info)
%csmethodmodifiers kvstore_stats::kvstore_stats "internal";
%csmethodmodifiers kvstore_prefetch_info::kvstore_prefetch_info "internal";
%typemap(cscode) struct kvstore_prefetch_info %{
  /// <summary>Whether nothing more will land (all read, stopped at a missing or bad page, or revoked).</summary>
  public bool IsDone {
    get { return Done != 0; }
  }

  /// <summary>Whether storage held fewer tokens than the threshold (nothing was read).</summary>
  public bool IsRevoked {
    get { return Revoked != 0; }
  }

  /// <summary>Whether the prefetch policy lets the request go on now.</summary>
  public bool IsReady {
    get { return Ready != 0; }
  }

  /// <summary>Whether HitTokens is known.</summary>
  public bool IsSearched {
    get { return Searched != 0; }
  }

  /// <summary>All fields.</summary>
  public override string ToString() {
    return "StoragePrefetchInfo{Done=" + Done + ", Revoked=" + Revoked + ", Ready=" + Ready + ", Searched=" + Searched
        + ", AskedTokens=" + AskedTokens + ", HitTokens=" + HitTokens + ", LoadedTokens=" + LoadedTokens + "}";
  }
%}
%csmethodmodifiers kvpool_plan_info::kvpool_plan_info "internal";
%csmethodmodifiers kvpool_stats::kvpool_stats "internal";
%typemap(cscode) struct kvpool_stats %{
  /// <summary>The allocator kind as an enum (AllocKind is its number).</summary>
  public AllocKind Kind {
    get { return (global::KvPool.AllocKind)AllocKind; }
  }
%}
/* BufferDescriptor: internal; Pool.Buffer() copies it into the public
 * BufferInfo (src/BufferInfo.cs) and disposes of it at once. */
%typemap(csclassmodifiers) struct kvpool_buffer "internal class"
%rename(ShapeAt) kvpool_buffer::shape_at;
%rename(StrideAt) kvpool_buffer::stride_at;
%rename(DataAddress) kvpool_buffer::data_address;
%rename("%(camelcase)s", %$isvariable, %$ismember) "";

/* ======================================================================== */
#elif defined(SWIGGO)
/* ======================================================================== */

/* cgo finds the library through pkg-config (kvpool.pc when installed,
 * kvpool-uninstalled.pc from the build tree via PKG_CONFIG_PATH). */
%insert(cgo_comment_typedefs) %{
#cgo pkg-config: kvpool
%}

/* Go needs no hiding: the idiomatic layer is hand-written and the raw
 * Kvalloc_*, Kvreq_*, Kvpool_* wrappers stay exported beside it. */
%define KVPOOL_RAW(NAME)
%enddef

/* A returned kvpool_status becomes a Go `error` (nil for KVPOOL_OK). The C
 * wrapper packs "<code>:<message>" into a malloc'd string in the SAME call
 * (the goroutine cannot have moved to another OS thread in between), and
 * statusError (errors.go) turns it into *Error. OK costs no allocation. */
%{
#include <stdio.h>

static _gostring_ kvpool_go_pack_status(kvpool_status status) {
  _gostring_ packed;
  char code[16];
  const char *msg;
  size_t code_len, msg_len;
  packed.p = NULL;
  packed.n = 0;
  if (status == KVPOOL_OK) return packed;
  msg = kvpool_last_error();
  msg_len = strlen(msg);
  code_len = (size_t)snprintf(code, sizeof code, "%d:", (int)status);
  packed.p = (char *)malloc(code_len + msg_len);
  if (!packed.p) {
    /* No memory for the message: a NULL pointer with the code as length
     * (statusError in errors.go reads it without touching the pointer). */
    packed.n = (intgo)status;
    return packed;
  }
  memcpy(packed.p, code, code_len);
  memcpy(packed.p + code_len, msg, msg_len);
  packed.n = (intgo)(code_len + msg_len);
  return packed;
}
%}
%typemap(gotype) kvpool_status "error"
%typemap(imtype) kvpool_status "string"
%typemap(out) kvpool_status %{ $result = kvpool_go_pack_status($1); %}
%typemap(goout) kvpool_status %{ $result = statusError($1) %}
/* ...but a parameter named `status` is a plain int code. */
%typemap(gotype) kvpool_status status "int"
%typemap(imtype) kvpool_status status "int"
%typemap(goin) kvpool_status status "$result = $input"
%typemap(in) kvpool_status status %{ $1 = (kvpool_status)$input; %}

/* JSON text: the Go string's bytes are passed as they are (no copy, no NUL).
 * An empty string passes "" rather than NULL, so it is reported as malformed
 * JSON (KVPOOL_ERR_CONFIG) like in Java and C#. */
%typemap(gotype) (const char *json, size_t json_len) "string"
%typemap(in) (const char *json, size_t json_len) %{
  $1 = ($1_ltype)($input.n ? $input.p : "");
  $2 = (size_t)$input.n;
%}

/* Out-handle of kvpool_create*: a *uintptr into which C writes the handle. */
%typemap(gotype) kvpool **out "*uintptr"
%typemap(imtype) kvpool **out "*uintptr"
%typemap(in) kvpool **out %{ $1 = (kvpool **)$input; %}

/* --- Arrays: Go slices passed as they are (zero-copy) -------------------- */
/* C reads/writes the slice's backing array directly; this is legal under the
 * cgo pointer rules because these slices hold no Go pointers and C keeps
 * nothing after the call (checked with GODEBUG=cgocheck=2). A nil slice
 * passes (NULL, 0). */
%typemap(gotype) (const int32_t *ids, size_t n), (int32_t *out, size_t n) "[]int32"
%typemap(gotype) (const int64_t *ids, size_t n), (int64_t *out, size_t n) "[]int64"
%typemap(gotype) (const uint64_t *ids, size_t n) "[]uint64"
%typemap(gotype) (const void *BYTES_IN, size_t BYTES_IN_LEN), (void *BYTES_OUT, size_t BYTES_OUT_LEN) "[]byte"
%typemap(gotype) (const float *F32_IN, size_t F32_IN_LEN) "[]float32"
%typemap(in) (const int32_t *ids, size_t n), (int32_t *out, size_t n),
             (const int64_t *ids, size_t n), (int64_t *out, size_t n), (const uint64_t *ids, size_t n),
             (const void *BYTES_IN, size_t BYTES_IN_LEN), (void *BYTES_OUT, size_t BYTES_OUT_LEN),
             (const float *F32_IN, size_t F32_IN_LEN) %{
  $1 = ($1_ltype)$input.array;
  $2 = (size_t)$input.len;
%}

/* --- Scalar out-parameters: a pointer to a Go variable ------------------- */
/* Pointer-free Go memory, not kept by C: allowed by the cgo rules. size_t is
 * Go's uint (both pointer-sized). */
%typemap(gotype) size_t *OUT_SIZE "*uint"
%typemap(imtype) size_t *OUT_SIZE "*uint"
%typemap(gotype) int32_t *OUT_I32 "*int32"
%typemap(imtype) int32_t *OUT_I32 "*int32"
%typemap(gotype) uint64_t *OUT_U64 "*uint64"
%typemap(imtype) uint64_t *OUT_U64 "*uint64"
%typemap(gotype) int64_t *OUT_I64 "*int64"
%typemap(imtype) int64_t *OUT_I64 "*int64"
%typemap(in) size_t *OUT_SIZE, int32_t *OUT_I32, uint64_t *OUT_U64, int64_t *OUT_I64 %{ $1 = ($1_ltype)$input; %}

/* --- Addresses (device.h): uintptr ---------------------------------------- */
/* kvpool_addr (uintptr_t) parameters are Go uintptr values: the address of
 * device memory (or C-heap host memory on a CPU pool), or a stream. They are
 * numbers to Go: never the address of Go memory (cgo pointer rules). */
%typemap(gotype) kvpool_addr "uintptr"
%typemap(imtype) kvpool_addr "uintptr"
%typemap(in) kvpool_addr %{ $1 = (kvpool_addr)$input; %}

#endif /* language sections */

/* ------------------------------------------------------------------------ */
/* Parameter names: which typemap each (pointer, length) parameter gets     */
/* ------------------------------------------------------------------------ */
#if defined(SWIGCSHARP)
%define KVPOOL_IN_ARRAY(T, PTR, LEN)
%apply const T *ids { const T *PTR };
%enddef
%define KVPOOL_OUT_ARRAY(T, PTR, LEN)
%apply T *out { T *PTR };
%enddef
%define KVPOOL_IN_BYTES(PTR, LEN)
%apply const void *BYTES_IN { const void *PTR };
%enddef
%define KVPOOL_IN_BYTES_OF(CTYPE, PTR, LEN)
%apply const void *BYTES_IN { const CTYPE *PTR };
%enddef
%define KVPOOL_OUT_BYTES(CTYPE, PTR, LEN)
%apply void *BYTES_OUT { CTYPE *PTR };
%enddef
%define KVPOOL_IN_F32(PTR, LEN)
%apply const float *F32_IN { const float *PTR };
%enddef
#else
%define KVPOOL_IN_ARRAY(T, PTR, LEN)
%apply (const T *ids, size_t n) { (const T *PTR, size_t LEN) };
%enddef
%define KVPOOL_OUT_ARRAY(T, PTR, LEN)
%apply (T *out, size_t n) { (T *PTR, size_t LEN) };
%enddef
%define KVPOOL_IN_BYTES(PTR, LEN)
%apply (const void *BYTES_IN, size_t BYTES_IN_LEN) { (const void *PTR, size_t LEN) };
%enddef
%define KVPOOL_IN_BYTES_OF(CTYPE, PTR, LEN)
%apply (const void *BYTES_IN, size_t BYTES_IN_LEN) { (const CTYPE *PTR, size_t LEN) };
%enddef
%define KVPOOL_OUT_BYTES(CTYPE, PTR, LEN)
%apply (void *BYTES_OUT, size_t BYTES_OUT_LEN) { (CTYPE *PTR, size_t LEN) };
%enddef
%define KVPOOL_IN_F32(PTR, LEN)
%apply (const float *F32_IN, size_t F32_IN_LEN) { (const float *PTR, size_t LEN) };
%enddef
#endif

/* req.h */
KVPOOL_OUT_ARRAY(int32_t, rows, rows_len)        /* kvreq_alloc, kvreq_alloc_hybrid */
KVPOOL_IN_ARRAY(int32_t, rows, rows_len)         /* kvreq_free, kvreq_write_batch, kvreq_last_loc, kvreq_free_hybrid */
KVPOOL_IN_ARRAY(int64_t, slots, slots_len)       /* kvreq_write, kvalloc_free, kvalloc_free_swa, ..., set/get/copy */
KVPOOL_OUT_ARRAY(int64_t, slots, slots_len)      /* kvreq_read, kvalloc_alloc, kvalloc_extend, kvalloc_decode */
KVPOOL_IN_ARRAY(int64_t, prefix_lens, prefix_lens_len)
KVPOOL_IN_ARRAY(int64_t, seq_lens, seq_lens_len)
KVPOOL_IN_ARRAY(int64_t, prefix_slots, prefix_slots_len)
KVPOOL_IN_ARRAY(int64_t, extend_slots, extend_slots_len)
KVPOOL_IN_ARRAY(int64_t, last_locs, last_locs_len)   /* kvalloc_extend, kvalloc_decode */
KVPOOL_OUT_ARRAY(int64_t, last_locs, last_locs_len)  /* kvreq_last_loc */
/* alloc.h */
KVPOOL_OUT_ARRAY(int64_t, out, out_len)          /* kvalloc_translate_swa */
KVPOOL_OUT_ARRAY(int64_t, ids, ids_cap)          /* kvalloc_free_list */
/* mamba.h */
KVPOOL_OUT_ARRAY(int32_t, slots, slots_len)      /* kvpool_mamba_alloc(_async), kvreq_alloc_hybrid */
KVPOOL_IN_ARRAY(int32_t, slots, slots_len)       /* kvpool_mamba_free */
KVPOOL_IN_ARRAY(int32_t, reuse, reuse_len)
KVPOOL_OUT_ARRAY(int32_t, ping_pong, ping_pong_len)
KVPOOL_IN_BYTES(conv, conv_bytes)
KVPOOL_IN_BYTES(ssm, ssm_bytes)
KVPOOL_OUT_BYTES(void, conv, conv_bytes)
KVPOOL_OUT_BYTES(void, ssm, ssm_bytes)
/* check.h: the report is bytes C writes (a NUL-terminated string) */
KVPOOL_OUT_BYTES(char, report, report_cap)
/* buffers.h */
KVPOOL_IN_BYTES(k, k_bytes)
KVPOOL_IN_BYTES(v, v_bytes)
KVPOOL_OUT_BYTES(void, k, k_bytes)
KVPOOL_OUT_BYTES(void, v, v_bytes)
KVPOOL_IN_BYTES(nope, nope_bytes)
KVPOOL_IN_BYTES(rope, rope_bytes)
KVPOOL_IN_BYTES(labels, labels_bytes)
KVPOOL_IN_BYTES(keys, keys_bytes)
KVPOOL_IN_F32(scales, scales_len)
KVPOOL_IN_ARRAY(int64_t, dst, dst_len)           /* kvpool_move_kv */
KVPOOL_IN_ARRAY(int64_t, src, src_len)
KVPOOL_IN_BYTES(host, host_bytes)
KVPOOL_OUT_BYTES(void, host, host_bytes)
/* radix.h */
KVPOOL_IN_ARRAY(int32_t, tokens, tokens_len)     /* radix_match, radix_insert, radix_page_hash, kvseq_begin, kvseq_decode */
KVPOOL_OUT_ARRAY(int64_t, slots, slots_cap)      /* radix_match, kvseq_get_slots */
KVPOOL_IN_BYTES_OF(uint8_t, parent, parent_len)  /* radix_page_hash (nullable: a first page) */
KVPOOL_OUT_BYTES(uint8_t, digest, digest_len)
KVPOOL_OUT_ARRAY(int64_t, event_fields, event_fields_len)  /* kvpool_take_events_flat (below) */
KVPOOL_OUT_ARRAY(int32_t, event_tokens, event_tokens_len)
/* seq.h */
KVPOOL_IN_ARRAY(uint64_t, seqs, seqs_len)        /* kvseq_extend, kvseq_decode (and their _async) */
KVPOOL_IN_ARRAY(int64_t, chunk_lens, chunk_lens_len)
/* device.h (through the kvpool_addr_* wrappers below): only the host copies
 * of the lengths are arrays; every other pointer is a kvpool_addr. */
KVPOOL_IN_ARRAY(int64_t, prefix_lens_host, prefix_lens_host_len)
KVPOOL_IN_ARRAY(int64_t, seq_lens_host, seq_lens_host_len)  /* also kvalloc_decode_watermark/_graph_advance */

/* Scalar out-parameters (the idiomatic layers return them). */
%apply size_t *OUT_SIZE { size_t *rows, size_t *tokens, size_t *full, size_t *swa, size_t *slots,
                          size_t *bytes, size_t *ids_len,
                          size_t *matched, size_t *prefix_len, size_t *evicted, size_t *evictable,
                          size_t *protected_len, size_t *total, size_t *events_len, size_t *tokens_len,
                          size_t *cached, size_t *slots_len, size_t *available, size_t *uncached,
                          size_t *capacity, size_t *swa_evicted, size_t *pages, size_t *steps,
                          size_t *completed, size_t *host_matched, size_t *loaded };
%apply int32_t *OUT_I32 { int32_t *kind, int32_t *dst, int32_t *slot, int32_t *mamba_slot, int32_t *mamba_exist,
                          int32_t *set, int32_t *on_device, int32_t *on_host };
%apply uint64_t *OUT_U64 { uint64_t *token, uint64_t *node, uint64_t *seq, uint64_t *host_node };
%apply int64_t *OUT_I64 { int64_t *event_id };
/* storage.h */
%apply uint64_t *OUT_U64 { uint64_t *id, uint64_t *inserted_tokens };
/* metrics.h: the text is bytes C writes (NUL-terminated), its length an out-parameter. */
KVPOOL_OUT_BYTES(char, text, text_cap)
%apply size_t *OUT_SIZE { size_t *text_len };
/* log.h (each language's shim, included at the end): the handle the replaced callback had. */
%apply uint64_t *OUT_U64 { uint64_t *previous };
%apply int32_t *OUT_I32 { int32_t *skipped };

/* Raw C functions with an idiomatic method on Pool: hidden in Java/C#. */
KVPOOL_RAW(kvpool_create)
KVPOOL_RAW(kvpool_create_from_file)
KVPOOL_RAW(kvpool_backend)
KVPOOL_RAW(kvpool_plan)
KVPOOL_RAW(kvpool_get_plan)
KVPOOL_RAW(kvreq_available)
KVPOOL_RAW(kvreq_alloc)
KVPOOL_RAW(kvreq_free)
KVPOOL_RAW(kvreq_write)
KVPOOL_RAW(kvreq_read)
KVPOOL_RAW(kvreq_clear)
KVPOOL_RAW(kvreq_write_batch)
KVPOOL_RAW(kvreq_last_loc)
KVPOOL_RAW(kvalloc_get_kind)
KVPOOL_RAW(kvalloc_available)
KVPOOL_RAW(kvalloc_swa_available)
KVPOOL_RAW(kvalloc_alloc)
KVPOOL_RAW(kvalloc_free)
KVPOOL_RAW(kvalloc_extend)
KVPOOL_RAW(kvalloc_decode)
KVPOOL_RAW(kvalloc_free_swa)
KVPOOL_RAW(kvalloc_translate_swa)
KVPOOL_RAW(kvalloc_free_group_begin)
KVPOOL_RAW(kvalloc_free_group_end)
KVPOOL_RAW(kvalloc_backup)
KVPOOL_RAW(kvalloc_restore)
KVPOOL_RAW(kvalloc_merge_and_sort)
KVPOOL_RAW(kvalloc_clear)
KVPOOL_RAW(kvalloc_free_list)
KVPOOL_RAW(kvpool_mamba_available)
KVPOOL_RAW(kvpool_mamba_alloc)
KVPOOL_RAW(kvpool_mamba_free)
KVPOOL_RAW(kvpool_mamba_copy)
KVPOOL_RAW(kvpool_mamba_fork)
KVPOOL_RAW(kvpool_mamba_write)
KVPOOL_RAW(kvpool_mamba_read)
KVPOOL_RAW(kvreq_alloc_hybrid)
KVPOOL_RAW(kvreq_free_hybrid)
KVPOOL_RAW(kvreq_mamba_slots)
KVPOOL_RAW(kvpool_check)
KVPOOL_RAW(kvpool_get_stats)
KVPOOL_RAW(kvpool_metrics_text)
KVPOOL_RAW(kvpool_get_buffer)
KVPOOL_RAW(kvpool_set_kv)
KVPOOL_RAW(kvpool_set_mla_kv)
KVPOOL_RAW(kvpool_set_label)
KVPOOL_RAW(kvpool_set_indexer)
KVPOOL_RAW(kvpool_get_kv)
KVPOOL_RAW(kvpool_move_kv)
KVPOOL_RAW(kvpool_host_copy_bytes)
KVPOOL_RAW(kvpool_copy_to_host)
KVPOOL_RAW(kvpool_load_from_host)
KVPOOL_RAW(radix_match)
KVPOOL_RAW(radix_insert)
KVPOOL_RAW(radix_lock)
KVPOOL_RAW(radix_unlock)
KVPOOL_RAW(radix_evict)
KVPOOL_RAW(radix_sizes)
KVPOOL_RAW(radix_reset)
KVPOOL_RAW(radix_page_hash)
KVPOOL_RAW(radix_match_mamba)
KVPOOL_RAW(radix_insert_mamba)
KVPOOL_RAW(radix_evict_mamba)
KVPOOL_RAW(radix_insert_swa)
KVPOOL_RAW(radix_evict_swa)
KVPOOL_RAW(radix_state_sizes)
KVPOOL_RAW(kvpool_take_events_flat)
KVPOOL_RAW(kvseq_begin)
KVPOOL_RAW(kvseq_extend)
KVPOOL_RAW(kvseq_decode)
KVPOOL_RAW(kvseq_finish)
KVPOOL_RAW(kvseq_abort)
KVPOOL_RAW(kvseq_retract)
KVPOOL_RAW(kvseq_get_info)
KVPOOL_RAW(kvseq_get_slots)
KVPOOL_RAW(kvseq_accounting)
KVPOOL_RAW(kvseq_mamba_slot)
KVPOOL_RAW(kvhost_get_stats)
KVPOOL_RAW(kvhost_poll)
KVPOOL_RAW(kvhost_next_load_set)
KVPOOL_RAW(kvhost_load_set)
KVPOOL_RAW(kvhost_match)
KVPOOL_RAW(kvhost_load_back)
KVPOOL_RAW(kvhost_evict)
KVPOOL_RAW(kvhost_node_state)
KVPOOL_RAW(kvstore_get_stats)
KVPOOL_RAW(kvstore_prefetch)
KVPOOL_RAW(kvstore_prefetch_poll)
KVPOOL_RAW(kvstore_prefetch_end)
KVPOOL_RAW(kvstore_flush)
KVPOOL_RAW(kvstore_clear)
KVPOOL_RAW(kvpool_addr_host_set_stream)
KVPOOL_RAW(kvpool_addr_host_wait_layer)
KVPOOL_RAW(kvpool_addr_create_with_allocator)
KVPOOL_RAW(kvpool_addr_synchronize)
KVPOOL_RAW(kvpool_addr_extend_async)
KVPOOL_RAW(kvpool_addr_extend_pages)
KVPOOL_RAW(kvpool_addr_decode_async)
KVPOOL_RAW(kvpool_addr_alloc_async)
KVPOOL_RAW(kvpool_addr_free_pages_async)
KVPOOL_RAW(kvpool_addr_write_batch_async)
KVPOOL_RAW(kvpool_addr_last_loc_async)
KVPOOL_RAW(kvpool_addr_set_kv_async)
KVPOOL_RAW(kvpool_addr_set_mla_kv_async)
KVPOOL_RAW(kvpool_addr_get_kv_async)
KVPOOL_RAW(kvpool_addr_move_kv_async)
KVPOOL_RAW(kvpool_addr_mamba_alloc_async)
KVPOOL_RAW(kvpool_addr_mamba_fork_async)
KVPOOL_RAW(kvpool_addr_mamba_copy_async)
KVPOOL_RAW(kvpool_addr_decode_graph_async)
KVPOOL_RAW(kvpool_addr_decode_watermark)
KVPOOL_RAW(kvpool_addr_decode_graph_advance)
KVPOOL_RAW(kvpool_addr_seq_extend_async)
KVPOOL_RAW(kvpool_addr_seq_decode_async)

/* ------------------------------------------------------------------------ */
/* Declarations that must precede the headers                                */
/* ------------------------------------------------------------------------ */

/* The opaque handle is declared as an (empty) struct BEFORE the header's
 * typedef, otherwise SWIG's Java JNI class refers to a class named `kvpool`
 * that is never generated (TOOLCHAIN_NOTES 7.3). The body is for SWIG only. */
#if defined(SWIGJAVA) || defined(SWIGCSHARP)
%rename(Pool) kvpool;
%rename(PlanInfo) kvpool_plan_info;
%rename(Stats) kvpool_stats;
%rename(BufferDescriptor) kvpool_buffer;
%rename(SeqInfo) kvseq_info;
%rename(HostStats) kvhost_stats;
%rename(StorageStats) kvstore_stats;
%rename(StoragePrefetchInfo) kvstore_prefetch_info;
#endif
%nodefaultctor kvpool;
#if defined(SWIGGO)
/* Go: the hand-written Pool calls kvpool_destroy; SWIG's default destructor
 * would free() the handle. */
%nodefaultdtor kvpool;
#endif
struct kvpool {};
#if defined(SWIGJAVA) || defined(SWIGCSHARP)
/* Java/C#: the proxy's destructor (close()/Dispose()) is kvpool_destroy. */
%extend kvpool {
  ~kvpool() { kvpool_destroy($self); }
}
#endif

/* Structs made by the bindings always carry their struct_size. */
%extend kvpool_plan_info {
  kvpool_plan_info() {
    kvpool_plan_info *info = (kvpool_plan_info *)calloc(1, sizeof(kvpool_plan_info));
    if (info) info->struct_size = (uint32_t)sizeof(kvpool_plan_info);
    return info;
  }
  ~kvpool_plan_info() { free($self); }
}
%extend kvpool_stats {
  kvpool_stats() {
    kvpool_stats *stats = (kvpool_stats *)calloc(1, sizeof(kvpool_stats));
    if (stats) stats->struct_size = (uint32_t)sizeof(kvpool_stats);
    return stats;
  }
  ~kvpool_stats() { free($self); }
}
/* kvpool_buffer: the arrays and the pointer are read through accessors. */
%extend kvpool_buffer {
  kvpool_buffer() {
    kvpool_buffer *buffer = (kvpool_buffer *)calloc(1, sizeof(kvpool_buffer));
    if (buffer) buffer->struct_size = (uint32_t)sizeof(kvpool_buffer);
    return buffer;
  }
  ~kvpool_buffer() { free($self); }
  /** Extent of dimension `dim` (0 outside 0..ndim-1). */
  int64_t shape_at(int32_t dim) const {
    return (dim >= 0 && dim < $self->ndim && dim < 5) ? $self->shape[dim] : 0;
  }
  /** Stride of dimension `dim` in elements (0 outside 0..ndim-1). */
  int64_t stride_at(int32_t dim) const {
    return (dim >= 0 && dim < $self->ndim && dim < 5) ? $self->strides[dim] : 0;
  }
  /** The base address as a number. */
  uint64_t data_address() const { return (uint64_t)(uintptr_t)$self->data; }
}
/* struct_size is an ABI detail the constructors handle. */
%extend kvseq_info {
  kvseq_info() {
    kvseq_info *info = (kvseq_info *)calloc(1, sizeof(kvseq_info));
    if (info) info->struct_size = (uint32_t)sizeof(kvseq_info);
    return info;
  }
  ~kvseq_info() { free($self); }
}
%extend kvhost_stats {
  kvhost_stats() {
    kvhost_stats *stats = (kvhost_stats *)calloc(1, sizeof(kvhost_stats));
    if (stats) stats->struct_size = (uint32_t)sizeof(kvhost_stats);
    return stats;
  }
  ~kvhost_stats() { free($self); }
}
%extend kvstore_stats {
  kvstore_stats() {
    kvstore_stats *stats = (kvstore_stats *)calloc(1, sizeof(kvstore_stats));
    if (stats) stats->struct_size = (uint32_t)sizeof(kvstore_stats);
    return stats;
  }
  ~kvstore_stats() { free($self); }
}
%extend kvstore_prefetch_info {
  kvstore_prefetch_info() {
    kvstore_prefetch_info *info = (kvstore_prefetch_info *)calloc(1, sizeof(kvstore_prefetch_info));
    if (info) info->struct_size = (uint32_t)sizeof(kvstore_prefetch_info);
    return info;
  }
  ~kvstore_prefetch_info() { free($self); }
}
%ignore kvseq_info::struct_size;
%ignore kvhost_stats::struct_size;
%ignore kvstore_stats::struct_size;
%ignore kvstore_prefetch_info::struct_size;
%ignore kvpool_plan_info::struct_size;
%ignore kvpool_stats::struct_size;
%ignore kvpool_buffer::struct_size;
%ignore kvpool_buffer::data;
%ignore kvpool_buffer::shape;
%ignore kvpool_buffer::strides;
%ignore kvpool_buffer::reserved;

/* Bindings surface errors themselves; the raw thread-local message and the C
 * initializer macros have no use in Go/Java/C#. */
%ignore kvpool_last_error;
%ignore KVPOOL_PLAN_INFO_INIT;
%ignore KVPOOL_STATS_INIT;
%ignore KVPOOL_BUFFER_INIT;
%ignore KVSEQ_INFO_INIT;
%ignore KVHOST_STATS_INIT;
%ignore KVSTORE_STATS_INIT;
%ignore KVSTORE_PREFETCH_INFO_INIT;
/* kvhost_set_stream / kvhost_wait_layer take a cudaStream_t: bound by address
 * (kvpool_addr_host_* in the device.h block below), as the device.h calls. */
%ignore kvhost_set_stream;
%ignore kvhost_wait_layer;
/* kvpool_create_with_allocator: the callbacks of a kvpool_allocator are C
 * function pointers, which the bindings do not make from Go/Java/C# code. The
 * bindings call it with the struct's ADDRESS (kvpool_addr_create_with_allocator
 * below): 0 for the default allocator, or a kvpool_allocator made in C. */
%ignore kvpool_allocator;
%ignore kvpool_create_with_allocator;
/* kvpool_create_with_storage: the kvstore_backend table is C function
 * pointers too, but here the bindings make them: each language has a shim
 * (java/storage_backend.i, csharp/storage_backend.i, go/storage_backend.i,
 * included at the end) whose C callbacks call an object of the language
 * (Java/C# StorageBackend, a Go StorageBackend interface). The raw table and
 * call are not wrapped. */
%ignore kvstore_backend;
%ignore kvpool_create_with_storage;
/* kvstore_result is only seen by the shims; each language has a hand-written
 * StorageResult (its item names, OK/Ok, would clash with Status's in SWIG's
 * flat C enum scope), whose numbers the shims check against the header. */
%ignore kvstore_result;
%ignore KVSTORE_OK;
%ignore KVSTORE_MISS;
%ignore KVSTORE_ERROR;
/* radix_take_events fills an array of structs: the bindings call
 * kvpool_take_events_flat (below) instead, and build their own event values. */
%ignore radix_event;
%rename(event_type) radix_event::type;  /* `type` is a Go keyword (SWIG warns even for ignored structs) */
%ignore radix_take_events;
/* log.h: the callback is a C function pointer; each language's shim (java/log_callback.i,
 * csharp/log_callback.i, go/log_callback.i, included at the end) sets one that calls a
 * function of the language, and wraps kvpool_set_log_callback under the same name. */
%ignore kvpool_log_callback;
%ignore kvpool_set_log_callback;

/* ------------------------------------------------------------------------ */
/* The public headers, in dependency order                                   */
/* ------------------------------------------------------------------------ */
%immutable;  /* plan_info, stats and buffer members are read-only */
%include "kvpool/export.h"
%include "kvpool/version.h"
%include "kvpool/status.h"
%include "kvpool/pool.h"
%include "kvpool/plan.h"
%include "kvpool/req.h"
%include "kvpool/alloc.h"
%include "kvpool/buffers.h"
%include "kvpool/mamba.h"
%include "kvpool/check.h"
%include "kvpool/radix.h"
%include "kvpool/seq.h"
%include "kvpool/host.h"
%include "kvpool/storage.h"
%include "kvpool/metrics.h"
%include "kvpool/log.h"
%mutable;

/* ------------------------------------------------------------------------ */
/* device.h: stream-ordered calls on device memory, by ADDRESS               */
/* ------------------------------------------------------------------------ */
/* The array arguments of device.h are device pointers (host pointers on a
 * CPU pool) and the stream is a cudaStream_t: memory that Go, Java and C#
 * cannot hold as arrays. device.h is therefore NOT %included (its parameter
 * names would pick the host-array typemaps above); each function is wrapped
 * by a kvpool_addr_* function below taking every such pointer, and the
 * stream, as a kvpool_addr (uintptr_t): Go uintptr, Java long, C# IntPtr.
 * The target languages see them under the C names (kvpool_set_kv_async,
 * Go Kvpool_set_kv_async, ...). The exceptions are the `*_host` length
 * arrays of kvalloc_extend_async/kvalloc_decode_async and the arguments of
 * kvalloc_extend_pages, and the lengths of kvalloc_decode_watermark/
 * kvalloc_decode_graph_advance, which are host arrays: language arrays as
 * usual (their length is the batch), and the slot outputs of
 * kvpool_mamba_alloc_async/kvpool_mamba_fork_async (host ids, as
 * kvpool_mamba_alloc/kvpool_mamba_fork: an int32 array and a returned
 * int32), where only the stream is an address, and the request ids,
 * chunk lengths and tokens of kvseq_extend_async/kvseq_decode_async (host
 * arrays, as in kvseq_extend/kvseq_decode), where only the slots and the
 * stream are addresses.
 * C takes one `batch` for both host arrays of an extend; if their lengths
 * differ, the shorter one is passed as NULL (with the longer length), which
 * the library rejects with KVPOOL_ERR_INVALID_ARGUMENT ("... is NULL but its
 * length is ..."); the idiomatic layers check this first with a clearer
 * message. */
%{
typedef uintptr_t kvpool_addr;
#define KVPOOL_ADDR_PTR(T, addr) ((T)(void *)(addr))

static kvpool_status kvpool_addr_create_with_allocator(const char *json, size_t json_len, kvpool_addr allocator,
                                                      kvpool **out) {
  return kvpool_create_with_allocator(json, json_len, KVPOOL_ADDR_PTR(const kvpool_allocator *, allocator), out);
}

static kvpool_status kvpool_addr_synchronize(kvpool *pool, kvpool_addr stream) {
  return kvpool_synchronize(pool, KVPOOL_ADDR_PTR(void *, stream));
}

/* The shared `batch` of two host arrays (see above). */
static size_t kvpool_addr_batch(const int64_t **a, size_t a_len, const int64_t **b, size_t b_len) {
  if (a_len < b_len) *a = NULL;
  if (b_len < a_len) *b = NULL;
  return a_len > b_len ? a_len : b_len;
}

static kvpool_status kvpool_addr_extend_async(kvpool *pool, const int64_t *prefix_lens_host,
                                             size_t prefix_lens_host_len, const int64_t *seq_lens_host,
                                             size_t seq_lens_host_len, kvpool_addr prefix_lens, kvpool_addr seq_lens,
                                             kvpool_addr last_locs, kvpool_addr slots, size_t slots_len,
                                             kvpool_addr new_pages, size_t new_pages_len, kvpool_addr stream) {
  size_t batch = kvpool_addr_batch(&prefix_lens_host, prefix_lens_host_len, &seq_lens_host, seq_lens_host_len);
  return kvalloc_extend_async(pool, prefix_lens_host, seq_lens_host, batch, KVPOOL_ADDR_PTR(const int64_t *, prefix_lens),
                              KVPOOL_ADDR_PTR(const int64_t *, seq_lens), KVPOOL_ADDR_PTR(const int64_t *, last_locs),
                              KVPOOL_ADDR_PTR(int64_t *, slots), slots_len, KVPOOL_ADDR_PTR(int64_t *, new_pages),
                              new_pages_len, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_extend_pages(const kvpool *pool, const int64_t *prefix_lens_host,
                                             size_t prefix_lens_host_len, const int64_t *seq_lens_host,
                                             size_t seq_lens_host_len, size_t *pages) {
  size_t batch = kvpool_addr_batch(&prefix_lens_host, prefix_lens_host_len, &seq_lens_host, seq_lens_host_len);
  return kvalloc_extend_pages(pool, prefix_lens_host, seq_lens_host, batch, pages);
}

static kvpool_status kvpool_addr_decode_async(kvpool *pool, const int64_t *seq_lens_host, size_t seq_lens_host_len,
                                             kvpool_addr seq_lens, kvpool_addr last_locs, kvpool_addr slots,
                                             kvpool_addr new_pages, size_t new_pages_len, kvpool_addr stream) {
  return kvalloc_decode_async(pool, seq_lens_host, seq_lens_host_len, KVPOOL_ADDR_PTR(const int64_t *, seq_lens),
                              KVPOOL_ADDR_PTR(const int64_t *, last_locs), KVPOOL_ADDR_PTR(int64_t *, slots),
                              KVPOOL_ADDR_PTR(int64_t *, new_pages), new_pages_len, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_alloc_async(kvpool *pool, kvpool_addr slots, size_t slots_len, kvpool_addr stream) {
  return kvalloc_alloc_async(pool, KVPOOL_ADDR_PTR(int64_t *, slots), slots_len, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_free_pages_async(kvpool *pool, kvpool_addr pages, size_t pages_len,
                                                 kvpool_addr stream) {
  return kvalloc_free_pages_async(pool, KVPOOL_ADDR_PTR(const int64_t *, pages), pages_len,
                                  KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_write_batch_async(kvpool *pool, kvpool_addr rows, kvpool_addr prefix_lens,
                                                  kvpool_addr seq_lens, size_t batch, kvpool_addr prefix_slots,
                                                  size_t prefix_slots_len, kvpool_addr extend_slots,
                                                  size_t extend_slots_len, kvpool_addr stream) {
  return kvreq_write_batch_async(pool, KVPOOL_ADDR_PTR(const int32_t *, rows), KVPOOL_ADDR_PTR(const int64_t *, prefix_lens),
                                 KVPOOL_ADDR_PTR(const int64_t *, seq_lens), batch,
                                 KVPOOL_ADDR_PTR(const int64_t *, prefix_slots), prefix_slots_len,
                                 KVPOOL_ADDR_PTR(const int64_t *, extend_slots), extend_slots_len,
                                 KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_last_loc_async(const kvpool *pool, kvpool_addr rows, kvpool_addr prefix_lens,
                                               size_t batch, kvpool_addr last_locs, kvpool_addr stream) {
  return kvreq_last_loc_async(pool, KVPOOL_ADDR_PTR(const int32_t *, rows), KVPOOL_ADDR_PTR(const int64_t *, prefix_lens),
                              batch, KVPOOL_ADDR_PTR(int64_t *, last_locs), KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_set_kv_async(kvpool *pool, int32_t layer, kvpool_addr slots, size_t slots_len,
                                             kvpool_addr k, size_t k_bytes, kvpool_addr v, size_t v_bytes,
                                             int32_t src_dtype, float k_scale, float v_scale, kvpool_addr stream) {
  return kvpool_set_kv_async(pool, layer, KVPOOL_ADDR_PTR(const int64_t *, slots), slots_len,
                             KVPOOL_ADDR_PTR(const void *, k), k_bytes, KVPOOL_ADDR_PTR(const void *, v), v_bytes,
                             src_dtype, k_scale, v_scale, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_set_mla_kv_async(kvpool *pool, int32_t layer, kvpool_addr slots, size_t slots_len,
                                                 kvpool_addr nope, size_t nope_bytes, kvpool_addr rope,
                                                 size_t rope_bytes, int32_t src_dtype, kvpool_addr stream) {
  return kvpool_set_mla_kv_async(pool, layer, KVPOOL_ADDR_PTR(const int64_t *, slots), slots_len,
                                 KVPOOL_ADDR_PTR(const void *, nope), nope_bytes, KVPOOL_ADDR_PTR(const void *, rope),
                                 rope_bytes, src_dtype, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_get_kv_async(const kvpool *pool, int32_t layer, kvpool_addr slots, size_t slots_len,
                                             kvpool_addr k, size_t k_bytes, kvpool_addr v, size_t v_bytes,
                                             int32_t dst_dtype, kvpool_addr stream) {
  return kvpool_get_kv_async(pool, layer, KVPOOL_ADDR_PTR(const int64_t *, slots), slots_len,
                             KVPOOL_ADDR_PTR(void *, k), k_bytes, KVPOOL_ADDR_PTR(void *, v), v_bytes, dst_dtype,
                             KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_move_kv_async(kvpool *pool, kvpool_addr dst, size_t dst_len, kvpool_addr src,
                                              size_t src_len, kvpool_addr stream) {
  return kvpool_move_kv_async(pool, KVPOOL_ADDR_PTR(const int64_t *, dst), dst_len,
                              KVPOOL_ADDR_PTR(const int64_t *, src), src_len, KVPOOL_ADDR_PTR(void *, stream));
}

/* The slot ids of the mamba alloc/fork are HOST memory: arrays as in mamba.h. */
static kvpool_status kvpool_addr_mamba_alloc_async(kvpool *pool, int32_t *slots, size_t slots_len, kvpool_addr stream) {
  return kvpool_mamba_alloc_async(pool, slots, slots_len, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_mamba_fork_async(kvpool *pool, int32_t src, int32_t *dst, kvpool_addr stream) {
  return kvpool_mamba_fork_async(pool, src, dst, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_mamba_copy_async(kvpool *pool, kvpool_addr src, size_t src_len, kvpool_addr dst,
                                                 size_t dst_len, kvpool_addr stream) {
  return kvpool_mamba_copy_async(pool, KVPOOL_ADDR_PTR(const int32_t *, src), src_len,
                                 KVPOOL_ADDR_PTR(const int32_t *, dst), dst_len, KVPOOL_ADDR_PTR(void *, stream));
}

/* The graph decode: kvalloc_decode_graph_async takes device arrays of
 * `batch` values; the watermark and the advance take the HOST lengths, whose
 * length is the batch. */
static kvpool_status kvpool_addr_decode_graph_async(kvpool *pool, size_t batch, kvpool_addr seq_lens,
                                                   kvpool_addr last_locs, kvpool_addr slots, kvpool_addr stream) {
  return kvalloc_decode_graph_async(pool, batch, KVPOOL_ADDR_PTR(const int64_t *, seq_lens),
                                    KVPOOL_ADDR_PTR(const int64_t *, last_locs), KVPOOL_ADDR_PTR(int64_t *, slots),
                                    KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_decode_watermark(const kvpool *pool, const int64_t *seq_lens_host,
                                                 size_t seq_lens_host_len, size_t *steps) {
  return kvalloc_decode_watermark(pool, seq_lens_host, seq_lens_host_len, steps);
}

static kvpool_status kvpool_addr_decode_graph_advance(kvpool *pool, const int64_t *seq_lens_host,
                                                     size_t seq_lens_host_len, size_t steps) {
  return kvalloc_decode_graph_advance(pool, seq_lens_host, seq_lens_host_len, steps);
}

/* The request ids, chunk lengths and tokens of the kvseq calls are HOST
 * arrays (as in seq.h); only the slots and the stream are addresses. */
static kvpool_status kvpool_addr_seq_extend_async(kvpool *pool, const uint64_t *seqs, size_t seqs_len,
                                                 const int64_t *chunk_lens, size_t chunk_lens_len, kvpool_addr slots,
                                                 size_t slots_len, kvpool_addr stream) {
  return kvseq_extend_async(pool, seqs, seqs_len, chunk_lens, chunk_lens_len, KVPOOL_ADDR_PTR(int64_t *, slots),
                            slots_len, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_seq_decode_async(kvpool *pool, const uint64_t *seqs, size_t seqs_len,
                                                 const int32_t *tokens, size_t tokens_len, kvpool_addr slots,
                                                 size_t slots_len, kvpool_addr stream) {
  return kvseq_decode_async(pool, seqs, seqs_len, tokens, tokens_len, KVPOOL_ADDR_PTR(int64_t *, slots), slots_len,
                            KVPOOL_ADDR_PTR(void *, stream));
}

/* host.h (the host tier): kvhost_set_stream and kvhost_wait_layer take a
 * cudaStream_t; only the stream is an address. */
static kvpool_status kvpool_addr_host_set_stream(kvpool *pool, kvpool_addr stream) {
  return kvhost_set_stream(pool, KVPOOL_ADDR_PTR(void *, stream));
}

static kvpool_status kvpool_addr_host_wait_layer(kvpool *pool, int32_t set, int32_t layer, kvpool_addr stream) {
  return kvhost_wait_layer(pool, set, layer, KVPOOL_ADDR_PTR(void *, stream));
}
%}
typedef uintptr_t kvpool_addr;
%rename(kvpool_create_with_allocator) kvpool_addr_create_with_allocator;
%rename(kvpool_synchronize) kvpool_addr_synchronize;
%rename(kvalloc_extend_async) kvpool_addr_extend_async;
%rename(kvalloc_extend_pages) kvpool_addr_extend_pages;
%rename(kvalloc_decode_async) kvpool_addr_decode_async;
%rename(kvalloc_alloc_async) kvpool_addr_alloc_async;
%rename(kvalloc_free_pages_async) kvpool_addr_free_pages_async;
%rename(kvreq_write_batch_async) kvpool_addr_write_batch_async;
%rename(kvreq_last_loc_async) kvpool_addr_last_loc_async;
%rename(kvpool_set_kv_async) kvpool_addr_set_kv_async;
%rename(kvpool_set_mla_kv_async) kvpool_addr_set_mla_kv_async;
%rename(kvpool_get_kv_async) kvpool_addr_get_kv_async;
%rename(kvpool_move_kv_async) kvpool_addr_move_kv_async;
%rename(kvpool_mamba_alloc_async) kvpool_addr_mamba_alloc_async;
%rename(kvpool_mamba_fork_async) kvpool_addr_mamba_fork_async;
%rename(kvpool_mamba_copy_async) kvpool_addr_mamba_copy_async;
%rename(kvalloc_decode_graph_async) kvpool_addr_decode_graph_async;
%rename(kvalloc_decode_watermark) kvpool_addr_decode_watermark;
%rename(kvalloc_decode_graph_advance) kvpool_addr_decode_graph_advance;
%rename(kvseq_extend_async) kvpool_addr_seq_extend_async;
%rename(kvseq_decode_async) kvpool_addr_seq_decode_async;
%rename(kvhost_set_stream) kvpool_addr_host_set_stream;
%rename(kvhost_wait_layer) kvpool_addr_host_wait_layer;
kvpool_status kvpool_addr_create_with_allocator(const char *json, size_t json_len, kvpool_addr allocator, kvpool **out);
kvpool_status kvpool_addr_synchronize(kvpool *pool, kvpool_addr stream);
kvpool_status kvpool_addr_extend_async(kvpool *pool, const int64_t *prefix_lens_host, size_t prefix_lens_host_len,
                                      const int64_t *seq_lens_host, size_t seq_lens_host_len, kvpool_addr prefix_lens,
                                      kvpool_addr seq_lens, kvpool_addr last_locs, kvpool_addr slots, size_t slots_len,
                                      kvpool_addr new_pages, size_t new_pages_len, kvpool_addr stream);
kvpool_status kvpool_addr_extend_pages(const kvpool *pool, const int64_t *prefix_lens_host,
                                      size_t prefix_lens_host_len, const int64_t *seq_lens_host,
                                      size_t seq_lens_host_len, size_t *pages);
kvpool_status kvpool_addr_decode_async(kvpool *pool, const int64_t *seq_lens_host, size_t seq_lens_host_len,
                                      kvpool_addr seq_lens, kvpool_addr last_locs, kvpool_addr slots,
                                      kvpool_addr new_pages, size_t new_pages_len, kvpool_addr stream);
kvpool_status kvpool_addr_alloc_async(kvpool *pool, kvpool_addr slots, size_t slots_len, kvpool_addr stream);
kvpool_status kvpool_addr_free_pages_async(kvpool *pool, kvpool_addr pages, size_t pages_len, kvpool_addr stream);
kvpool_status kvpool_addr_write_batch_async(kvpool *pool, kvpool_addr rows, kvpool_addr prefix_lens,
                                           kvpool_addr seq_lens, size_t batch, kvpool_addr prefix_slots,
                                           size_t prefix_slots_len, kvpool_addr extend_slots,
                                           size_t extend_slots_len, kvpool_addr stream);
kvpool_status kvpool_addr_last_loc_async(const kvpool *pool, kvpool_addr rows, kvpool_addr prefix_lens, size_t batch,
                                        kvpool_addr last_locs, kvpool_addr stream);
kvpool_status kvpool_addr_set_kv_async(kvpool *pool, int32_t layer, kvpool_addr slots, size_t slots_len, kvpool_addr k,
                                      size_t k_bytes, kvpool_addr v, size_t v_bytes, int32_t src_dtype, float k_scale,
                                      float v_scale, kvpool_addr stream);
kvpool_status kvpool_addr_set_mla_kv_async(kvpool *pool, int32_t layer, kvpool_addr slots, size_t slots_len,
                                          kvpool_addr nope, size_t nope_bytes, kvpool_addr rope, size_t rope_bytes,
                                          int32_t src_dtype, kvpool_addr stream);
kvpool_status kvpool_addr_get_kv_async(const kvpool *pool, int32_t layer, kvpool_addr slots, size_t slots_len,
                                      kvpool_addr k, size_t k_bytes, kvpool_addr v, size_t v_bytes, int32_t dst_dtype,
                                      kvpool_addr stream);
kvpool_status kvpool_addr_move_kv_async(kvpool *pool, kvpool_addr dst, size_t dst_len, kvpool_addr src, size_t src_len,
                                       kvpool_addr stream);
kvpool_status kvpool_addr_mamba_alloc_async(kvpool *pool, int32_t *slots, size_t slots_len, kvpool_addr stream);
kvpool_status kvpool_addr_mamba_fork_async(kvpool *pool, int32_t src, int32_t *dst, kvpool_addr stream);
kvpool_status kvpool_addr_mamba_copy_async(kvpool *pool, kvpool_addr src, size_t src_len, kvpool_addr dst,
                                          size_t dst_len, kvpool_addr stream);
kvpool_status kvpool_addr_decode_graph_async(kvpool *pool, size_t batch, kvpool_addr seq_lens, kvpool_addr last_locs,
                                            kvpool_addr slots, kvpool_addr stream);
kvpool_status kvpool_addr_decode_watermark(const kvpool *pool, const int64_t *seq_lens_host, size_t seq_lens_host_len,
                                          size_t *steps);
kvpool_status kvpool_addr_decode_graph_advance(kvpool *pool, const int64_t *seq_lens_host, size_t seq_lens_host_len,
                                              size_t steps);
kvpool_status kvpool_addr_seq_extend_async(kvpool *pool, const uint64_t *seqs, size_t seqs_len, const int64_t *chunk_lens,
                                          size_t chunk_lens_len, kvpool_addr slots, size_t slots_len,
                                          kvpool_addr stream);
kvpool_status kvpool_addr_seq_decode_async(kvpool *pool, const uint64_t *seqs, size_t seqs_len, const int32_t *tokens,
                                          size_t tokens_len, kvpool_addr slots, size_t slots_len, kvpool_addr stream);
kvpool_status kvpool_addr_host_set_stream(kvpool *pool, kvpool_addr stream);
kvpool_status kvpool_addr_host_wait_layer(kvpool *pool, int32_t set, int32_t layer, kvpool_addr stream);

/* KV events for the bindings: radix_take_events with each event as six int64
 * fields (type, has_parent, block_hash, parent_hash, token_offset,
 * token_count) in one caller-provided array, so every language passes a
 * plain long array. The radix_event structs (40 bytes) are written into the
 * same memory (48 bytes per event) and widened in place, last event first
 * (no event's fields overlap an event not yet read), so nothing is allocated.
 * BUFFER_TOO_SMALL reports the needed event and token counts, as in C. */
%{
#define KVPOOL_EVENT_FIELDS 6
typedef char kvpool_event_fits_fields[sizeof(radix_event) <= KVPOOL_EVENT_FIELDS * sizeof(int64_t) ? 1 : -1];

static kvpool_status kvpool_take_events_flat(kvpool *pool, int64_t *event_fields, size_t event_fields_len,
                                             size_t *events_len, int32_t *event_tokens, size_t event_tokens_len,
                                             size_t *tokens_len) {
  size_t cap = event_fields_len / KVPOOL_EVENT_FIELDS;
  size_t i;
  kvpool_status status = radix_take_events(pool, cap ? (radix_event *)(void *)event_fields : NULL, cap, events_len,
                                           event_tokens, event_tokens_len, tokens_len);
  if (status != KVPOOL_OK) return status;
  for (i = *events_len; i-- > 0;) {
    radix_event e;
    int64_t *f = event_fields + i * KVPOOL_EVENT_FIELDS;
    memcpy(&e, (const char *)event_fields + i * sizeof(radix_event), sizeof e);
    f[0] = e.type;
    f[1] = e.has_parent;
    f[2] = e.block_hash;
    f[3] = e.parent_hash;
    f[4] = (int64_t)e.token_offset;
    f[5] = (int64_t)e.token_count;
  }
  return status;
}
%}
kvpool_status kvpool_take_events_flat(kvpool *pool, int64_t *event_fields, size_t event_fields_len, size_t *events_len,
                                      int32_t *event_tokens, size_t event_tokens_len, size_t *tokens_len);

#if defined(SWIGJAVA)
/* float[] and direct-ByteBuffer variants of the data functions: the same C
 * functions under a second name (a macro in the wrapper), declared with
 * parameter names that pick other typemaps. Package-private; Pool's
 * overloads call them. */
%{
#define kvpool_java_set_kv_f32 kvpool_set_kv
#define kvpool_java_get_kv_f32 kvpool_get_kv
#define kvpool_java_set_kv_nio kvpool_set_kv
#define kvpool_java_get_kv_nio kvpool_get_kv
#define kvpool_java_copy_to_host_nio kvpool_copy_to_host
#define kvpool_java_load_from_host_nio kvpool_load_from_host
%}
%apply (const void *F32_BYTES_IN, size_t F32_BYTES_IN_LEN) { (const void *k_f32, size_t k_f32_bytes),
                                                             (const void *v_f32, size_t v_f32_bytes) };
%apply (void *F32_BYTES_OUT, size_t F32_BYTES_OUT_LEN) { (void *k_f32, size_t k_f32_bytes),
                                                         (void *v_f32, size_t v_f32_bytes) };
%apply (const void *NIO_IN, size_t NIO_IN_LEN) { (const void *k_nio, size_t k_nio_bytes),
                                                 (const void *v_nio, size_t v_nio_bytes),
                                                 (const void *host_nio, size_t host_nio_bytes) };
%apply (void *NIO_OUT, size_t NIO_OUT_LEN) { (void *k_nio, size_t k_nio_bytes), (void *v_nio, size_t v_nio_bytes),
                                             (void *host_nio, size_t host_nio_bytes) };
%javamethodmodifiers kvpool_java_set_kv_f32 "";
%javamethodmodifiers kvpool_java_get_kv_f32 "";
%javamethodmodifiers kvpool_java_set_kv_nio "";
%javamethodmodifiers kvpool_java_get_kv_nio "";
%javamethodmodifiers kvpool_java_copy_to_host_nio "";
%javamethodmodifiers kvpool_java_load_from_host_nio "";
kvpool_status kvpool_java_set_kv_f32(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                     const void *k_f32, size_t k_f32_bytes, const void *v_f32, size_t v_f32_bytes,
                                     int32_t src_dtype, float k_scale, float v_scale);
kvpool_status kvpool_java_get_kv_f32(const kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                     void *k_f32, size_t k_f32_bytes, void *v_f32, size_t v_f32_bytes,
                                     int32_t dst_dtype);
kvpool_status kvpool_java_set_kv_nio(kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                     const void *k_nio, size_t k_nio_bytes, const void *v_nio, size_t v_nio_bytes,
                                     int32_t src_dtype, float k_scale, float v_scale);
kvpool_status kvpool_java_get_kv_nio(const kvpool *pool, int32_t layer, const int64_t *slots, size_t slots_len,
                                     void *k_nio, size_t k_nio_bytes, void *v_nio, size_t v_nio_bytes,
                                     int32_t dst_dtype);
kvpool_status kvpool_java_copy_to_host_nio(const kvpool *pool, const int64_t *slots, size_t slots_len,
                                           void *host_nio, size_t host_nio_bytes);
kvpool_status kvpool_java_load_from_host_nio(kvpool *pool, const int64_t *slots, size_t slots_len,
                                             const void *host_nio, size_t host_nio_bytes);
/* The address of a direct ByteBuffer (its position..limit window, as Pool
 * passes buffer.slice()): host memory for the device.h calls on a CPU pool.
 * A null buffer gives 0; a heap buffer throws IllegalArgumentException. */
%{
static kvpool_addr kvpool_java_address(void *host_nio, size_t host_nio_bytes) {
  (void)host_nio_bytes;
  return (kvpool_addr)host_nio;
}
%}
%javamethodmodifiers kvpool_java_address "";
kvpool_addr kvpool_java_address(void *host_nio, size_t host_nio_bytes);
#endif

/* kvpool_create_with_storage: each language's shim (see the %ignore above). */
#if defined(SWIGJAVA)
%include "java/storage_backend.i"
#elif defined(SWIGCSHARP)
%include "csharp/storage_backend.i"
#elif defined(SWIGGO)
%include "go/storage_backend.i"
#endif

/* kvpool_set_log_callback: each language's shim (see the %ignore above). */
#if defined(SWIGJAVA)
%include "java/log_callback.i"
#elif defined(SWIGCSHARP)
%include "csharp/log_callback.i"
#elif defined(SWIGGO)
%include "go/log_callback.i"
#endif
