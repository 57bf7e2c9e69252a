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
 *    destructor is kvpool_destroy; the raw create/destroy/plan functions are
 *    not public in Java/C#: the idiomatic methods live on Pool.
 *  - `kvpool_plan_info` is a read-only struct (Java/C#: PlanInfo with
 *    getters/properties); its constructor sets struct_size.
 *  - Zero-copy index-array typemaps, bound by PARAMETER NAME (see the
 *    "Index arrays" block of each language section):
 *        (const int32_t *ids, size_t n)   (int32_t *out, size_t n)
 *        (const int64_t *ids, size_t n)   (int64_t *out, size_t n)
 *    Other parameter names get them with one %apply line after the language
 *    sections (checked to work in all three languages), e.g. for
 *    kvalloc_free(pool, const int64_t *slots, size_t slots_len):
 *      #if defined(SWIGCSHARP)
 *      %apply const int64_t *ids { const int64_t *slots };
 *      #else
 *      %apply (const int64_t *ids, size_t n) { (const int64_t *slots, size_t slots_len) };
 *      #endif
 *
 * The idiomatic Go layer is hand-written (bindings/go/kvpool/*.go); Java and
 * C# get theirs through the javacode/cscode typemaps below plus a few
 * hand-written files (bindings/java/ai/kvpool, bindings/csharp/src).
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
%rename(OK) KVPOOL_OK;
%rename("%(strip:[KVPOOL_ERR_])s", %$isenumitem) "";

/* Public, renamed module functions: Kvpool.version() etc. */
%rename(version) kvpool_version;
%rename(versionString) kvpool_version_string;
%rename(statusString) kvpool_status_string;
%rename(cudaDeviceCount) kvpool_cuda_device_count;
/* Raw functions behind Pool's methods: package-private. */
%javamethodmodifiers kvpool_create "";
%javamethodmodifiers kvpool_create_from_file "";
%javamethodmodifiers kvpool_backend "";
%javamethodmodifiers kvpool_plan "";
%javamethodmodifiers kvpool_get_plan "";
%ignore kvpool_destroy;  /* Pool.close() is the only way to destroy */

%pragma(java) moduleclassmodifiers="public final class"
%pragma(java) jniclassclassmodifiers="final class"
%pragma(java) jniclasscode=%{
  /* Loads libkvpool_jni.so from java.library.path, or from the absolute
   * path in the system property kvpool.jni.library when set. */
  static {
    String path = System.getProperty("kvpool.jni.library");
    if (path != null && !path.isEmpty()) {
      System.load(path);
    } else {
      System.loadLibrary("kvpool_jni");
    }
  }

  /* Frees native memory of proxies that were never closed (no finalize()). */
  static final java.lang.ref.Cleaner CLEANER = java.lang.ref.Cleaner.create();
%}

/* --- Throwing KvPoolException from inside the native call ---------------- */
%{
/* Throws ai.kvpool.KvPoolException(code, message) with the message of the
 * failure that just happened on this thread. The message goes over as UTF-8
 * bytes (not NewStringUTF, whose "modified UTF-8" rejects some byte
 * sequences a file path may contain). Any JNI failure leaves its own
 * exception (e.g. OutOfMemoryError) pending instead. */
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
%}

/* A returned kvpool_status becomes `void` in Java and throws on failure. The
 * throw is in the `ret` typemap, which runs after argout/freearg: arrays held
 * with Get*Critical are released before any JNI call is made. */
%typemap(jni) kvpool_status "void"
%typemap(jtype) kvpool_status "void"
%typemap(jstype) kvpool_status "void"
%typemap(out) kvpool_status ""
%typemap(ret) kvpool_status %{
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

/* --- Index arrays: int[] / long[] without copying ------------------------- */
/* Bound by name: (const int32_t *ids, size_t n), (int32_t *out, size_t n),
 * (const int64_t *ids, size_t n), (int64_t *out, size_t n).
 * The array is pinned with GetPrimitiveArrayCritical in `check` (after every
 * `in` typemap, so no other argument's JNI call runs inside the critical
 * region) and released in `argout`, before the `ret` typemap may throw.
 * Rule for functions using them: return kvpool_status or a primitive (an
 * `out` typemap creating a Java object would run inside the region).
 * `ids` arrays are released with JNI_ABORT (never written back); `out`
 * arrays with 0 (written back if the VM had to copy). */
%define KVPOOL_JAVA_CRITICAL_ARRAY(CTYPE, JNITYPE, JTYPE, NAME, MODE)
%typemap(jni) (CTYPE *NAME, size_t n) #JNITYPE
%typemap(jtype) (CTYPE *NAME, size_t n) #JTYPE
%typemap(jstype) (CTYPE *NAME, size_t n) #JTYPE
%typemap(javain) (CTYPE *NAME, size_t n) "$javainput"
%typemap(in) (CTYPE *NAME, size_t n) {
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, #NAME " array is null");
    return $null;
  }
  $1 = NULL;
  $2 = (size_t)(*jenv)->GetArrayLength(jenv, $input);
}
%typemap(check) (CTYPE *NAME, size_t n) {
  $1 = ($1_ltype)(*jenv)->GetPrimitiveArrayCritical(jenv, $input, NULL);
  if (!$1) return $null;
}
%typemap(argout) (CTYPE *NAME, size_t n) {
  if ($1) (*jenv)->ReleasePrimitiveArrayCritical(jenv, $input, (void *)$1, MODE);
}
%enddef
KVPOOL_JAVA_CRITICAL_ARRAY(const int32_t, jintArray, int[], ids, JNI_ABORT)
KVPOOL_JAVA_CRITICAL_ARRAY(int32_t, jintArray, int[], out, 0)
KVPOOL_JAVA_CRITICAL_ARRAY(const int64_t, jlongArray, long[], ids, JNI_ABORT)
KVPOOL_JAVA_CRITICAL_ARRAY(int64_t, jlongArray, long[], out, 0)

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

/* Pool: AutoCloseable; close() destroys once, later calls do nothing. After
 * close() the handle is 0, which every C function rejects with
 * KVPOOL_ERR_INVALID_ARGUMENT, so methods on a closed Pool throw. */
%typemap(javainterfaces) struct kvpool "AutoCloseable"
%typemap(javadestruct, methodname="close", methodmodifiers="@Override public synchronized") struct kvpool {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%typemap(javacode) struct kvpool %{
  /**
   * Creates a pool from a JSON configuration (docs/config.md).
   * @throws KvPoolException CONFIG for a malformed or invalid configuration
   */
  public Pool(String json) {
    this(create(json), true);
  }

  /**
   * Creates a pool from a JSON configuration file.
   * @throws KvPoolException IO if the file cannot be read, else as {@link #Pool(String)}
   */
  public static Pool fromFile(String path) {
    long[] handle = new long[1];
    Kvpool.kvpool_create_from_file(path, handle);
    return new Pool(handle[0], true);
  }

  private static long create(String json) {
    long[] handle = new long[1];
    Kvpool.kvpool_create(json, handle);
    return handle[0];
  }

  /** Name of the backend the pool runs on: "cpu" or "cuda". */
  public String backend() {
    return Kvpool.kvpool_backend(this);
  }

  /** The plan (sizing) this pool was created with. */
  public PlanInfo plan() {
    PlanInfo info = new PlanInfo();
    Kvpool.kvpool_get_plan(this, info);
    return info;
  }

  /**
   * Validates a configuration and computes its sizing without allocating.
   * @throws KvPoolException CONFIG for a malformed or invalid configuration
   */
  public static PlanInfo plan(String json) {
    PlanInfo info = new PlanInfo();
    Kvpool.kvpool_plan(json, info);
    return info;
  }
%}

/* PlanInfo: a read-only value; memory goes back through the Cleaner only
 * (no public delete, so a getter can never see freed memory). */
%typemap(javadestruct, methodname="delete", methodmodifiers="private synchronized") struct kvpool_plan_info {
    swigCPtr = 0;
    if (swigCleanable != null) swigCleanable.clean();
  }
%javamethodmodifiers kvpool_plan_info::kvpool_plan_info "";
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
/* A code appended to status.h needs its PascalCase name here (the C# test
 * StatusCodesAndStrings fails until it has one). */

%rename(Version) kvpool_version;
%rename(VersionString) kvpool_version_string;
%rename(StatusString) kvpool_status_string;
%rename(CudaDeviceCount) kvpool_cuda_device_count;
%csmethodmodifiers kvpool_create "internal";
%csmethodmodifiers kvpool_create_from_file "internal";
%csmethodmodifiers kvpool_backend "internal";
%csmethodmodifiers kvpool_plan "internal";
%csmethodmodifiers kvpool_get_plan "internal";
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

/* --- Out-handle of kvpool_create*: `out IntPtr` -------------------------- */
%typemap(ctype) kvpool **out "void **"
%typemap(imtype) kvpool **out "out global::System.IntPtr"
%typemap(cstype) kvpool **out "out global::System.IntPtr"
%typemap(csin) kvpool **out "out $csinput"
%typemap(in) kvpool **out %{ $1 = (kvpool **)$input; %}

/* --- Index arrays: blittable arrays pinned by the marshaller ------------- */
/* Bound by name: `const int32_t *ids`, `int32_t *out`, `const int64_t *ids`,
 * `int64_t *out` (the `size_t n` beside them stays a ulong parameter). C#
 * cannot fold (pointer, length) into one parameter, so make the raw function
 * `internal` with %csmethodmodifiers and add a public overload in cscode
 * that passes array.Length. int[]/long[] are blittable: the marshaller pins
 * them and C reads/writes the managed array in place ([In,Out] makes the
 * written values visible under any marshaller that might copy). */
%define KVPOOL_CS_ARRAY(CTYPE, CSTYPE, NAME)
%typemap(ctype) CTYPE *NAME "void *"
%typemap(cstype) CTYPE *NAME #CSTYPE
%typemap(csin) CTYPE *NAME "$csinput"
%typemap(in) CTYPE *NAME %{ $1 = ($1_ltype)$input; %}
%enddef
KVPOOL_CS_ARRAY(const int32_t, int[], ids)
KVPOOL_CS_ARRAY(int32_t, int[], out)
KVPOOL_CS_ARRAY(const int64_t, long[], ids)
KVPOOL_CS_ARRAY(int64_t, long[], out)
%typemap(imtype) const int32_t *ids "[global::System.Runtime.InteropServices.In] int[]"
%typemap(imtype) int32_t *out "[global::System.Runtime.InteropServices.In, global::System.Runtime.InteropServices.Out] int[]"
%typemap(imtype) const int64_t *ids "[global::System.Runtime.InteropServices.In] long[]"
%typemap(imtype) int64_t *out "[global::System.Runtime.InteropServices.In, global::System.Runtime.InteropServices.Out] long[]"

/* --- Pool ------------------------------------------------------------------ */
/* IDisposable through SWIG's defaults: Dispose() destroys once and resets
 * the handle to null, which every C function rejects with
 * KVPOOL_ERR_INVALID_ARGUMENT, so methods on a disposed Pool throw. */
%typemap(cscode) struct kvpool %{
  /// <summary>Creates a pool from a JSON configuration (docs/config.md).</summary>
  /// <exception cref="KvPoolException">Status.Config for a malformed or invalid configuration.</exception>
  public Pool(string json) : this(Create(json), true) {
  }

  /// <summary>Creates a pool from a JSON configuration file.</summary>
  /// <exception cref="KvPoolException">Status.Io if the file cannot be read.</exception>
  public static Pool FromFile(string path) {
    global::System.IntPtr handle;
    Kvpool.kvpool_create_from_file(path, out handle);
    return new Pool(handle, true);
  }

  private static global::System.IntPtr Create(string json) {
    global::System.IntPtr handle;
    Kvpool.kvpool_create(json, out handle);
    return handle;
  }

  /// <summary>Name of the backend the pool runs on: "cpu" or "cuda".</summary>
  public string Backend() {
    return Kvpool.kvpool_backend(this);
  }

  /// <summary>The plan (sizing) this pool was created with.</summary>
  public PlanInfo Plan() {
    PlanInfo info = new PlanInfo();
    Kvpool.kvpool_get_plan(this, info);
    return info;
  }

  /// <summary>Validates a configuration and computes its sizing without allocating.</summary>
  public static PlanInfo Plan(string json) {
    PlanInfo info = new PlanInfo();
    Kvpool.kvpool_plan(json, info);
    return info;
  }
%}

/* --- PlanInfo: a read-only value, freed by its finalizer only ------------- */
/* Not IDisposable: a public Dispose() would let a property read freed memory. */
%typemap(csinterfaces) struct kvpool_plan_info ""
%typemap(csdispose) struct kvpool_plan_info %{
  ~$csclassname() {
    Dispose(false);
  }

  internal void Dispose() {
    Dispose(true);
    global::System.GC.SuppressFinalize(this);
  }
%}
%csmethodmodifiers kvpool_plan_info::kvpool_plan_info "internal";
%rename("%(camelcase)s", %$isvariable, %$ismember) "";

/* ======================================================================== */
#elif defined(SWIGGO)
/* ======================================================================== */

/* cgo finds the library through pkg-config (kvpool.pc when installed,
 * kvpool-uninstalled.pc from the build tree via PKG_CONFIG_PATH). */
%insert(cgo_comment_typedefs) %{
#cgo pkg-config: kvpool
%}

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

/* --- Index arrays: Go slices passed as they are (zero-copy) -------------- */
/* Bound by name: (const int32_t *ids, size_t n), (int32_t *out, size_t n),
 * (const int64_t *ids, size_t n), (int64_t *out, size_t n). C reads/writes
 * the slice's backing array directly; this is legal under the cgo pointer
 * rules because []int32/[]int64 hold no Go pointers and C keeps nothing
 * after the call (checked with GODEBUG=cgocheck=2). */
%typemap(gotype) (const int32_t *ids, size_t n), (int32_t *out, size_t n) "[]int32"
%typemap(gotype) (const int64_t *ids, size_t n), (int64_t *out, size_t n) "[]int64"
%typemap(in) (const int32_t *ids, size_t n), (int32_t *out, size_t n),
             (const int64_t *ids, size_t n), (int64_t *out, size_t n) %{
  $1 = ($1_ltype)$input.array;
  $2 = (size_t)$input.len;
%}

#endif /* language sections */

/* ------------------------------------------------------------------------ */
/* Declarations that must precede the headers                                */
/* ------------------------------------------------------------------------ */

/* The opaque handle is declared as an (empty) struct BEFORE the header's
 * typedef, otherwise SWIG's Java JNI class refers to a class named `kvpool`
 * that is never generated (TOOLCHAIN_NOTES 7.3). The body is for SWIG only. */
#if defined(SWIGJAVA) || defined(SWIGCSHARP)
%rename(Pool) kvpool;
%rename(PlanInfo) kvpool_plan_info;
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

/* A plan_info made by the bindings always carries its struct_size. */
%extend kvpool_plan_info {
  kvpool_plan_info() {
    kvpool_plan_info *info = (kvpool_plan_info *)calloc(1, sizeof(kvpool_plan_info));
    if (info) info->struct_size = (uint32_t)sizeof(kvpool_plan_info);
    return info;
  }
  ~kvpool_plan_info() { free($self); }
}
/* struct_size is an ABI detail the constructor handles. */
%ignore kvpool_plan_info::struct_size;

/* Bindings surface errors themselves; the raw thread-local message and the C
 * initializer macro have no use in Go/Java/C#. */
%ignore kvpool_last_error;
%ignore KVPOOL_PLAN_INFO_INIT;

/* ------------------------------------------------------------------------ */
/* The public headers, in dependency order                                   */
/* ------------------------------------------------------------------------ */
%immutable;  /* plan_info members are read-only */
%include "kvpool/export.h"
%include "kvpool/version.h"
%include "kvpool/status.h"
%include "kvpool/pool.h"
%include "kvpool/plan.h"
%mutable;
