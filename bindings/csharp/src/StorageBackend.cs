// KvPool.StorageBackend: an engine's own store as the storage tier of a pool
// (Pool.WithStorage, kvpool_create_with_storage). The C side is the shim in
// ../storage_backend.i; contract: docs/storage-custom.md.
using System;
using System.Runtime.InteropServices;

namespace KvPool {

  /// <summary>The outcome of one key in a <see cref="StorageBackend"/> call (storage.h's kvstore_result).</summary>
  public enum StorageResult {
    /// <summary>Put: stored (or the key already held the value); Get: the value was read whole.</summary>
    Ok = 0,
    /// <summary>Get: no value under the key (never stored, or evicted). Not a valid Put result.</summary>
    Miss = 1,
    /// <summary>The backend failed for this key (I/O error, server down, timeout).</summary>
    Error = 2
  }

  /// <summary>
  /// An engine's own store as the storage tier of a pool (<see cref="Pool.WithStorage"/>): a cache
  /// cluster client, an object store, a test double. kvpool stores opaque byte values under short
  /// keys ([0-9a-z-], 1 to 120 characters; a key always names the same bytes) and checks every value
  /// it reads. Batches hold at most 128 keys; every result starts as <see cref="StorageResult.Error"/>.
  /// Put, Get and ExistsPrefix run on the pool's storage threads (a backup and a prefetch thread,
  /// possibly at the same time), Clear on the thread that calls <see cref="Pool.StorageClear"/>;
  /// pools sharing a backend call it from all their threads: every method must be thread-safe.
  /// An exception never reaches kvpool: it makes every key of that call an error (ExistsPrefix: 0
  /// keys; Clear: StorageClear fails with Status.Io) and is passed to <see cref="Failed"/>. A method
  /// never calls a Pool method and never blocks forever (StorageFlush and Dispose wait for running
  /// calls). A pool keeps its backend alive until it is disposed (or finalized).
  /// </summary>
  public abstract class StorageBackend {
    /// <summary>Stores values[i] under keys[i] for every i; sets results[i] to Ok (stored, or the
    /// key already held it) or Error. The value arrays are copies the backend may keep.</summary>
    public abstract void Put(string[] keys, byte[][] values, StorageResult[] results);

    /// <summary>Reads every key: values[i] = the bytes stored under keys[i], exactly as they were
    /// put, with results[i] = Ok; or results[i] = Miss (no value) or Error. The arrays are copied;
    /// the backend may keep them.</summary>
    public abstract void Get(string[] keys, byte[][] values, StorageResult[] results);

    /// <summary>How many of keys exist, counted from the start up to the first that does not (a key
    /// that cannot be asked about counts as missing).</summary>
    public abstract int ExistsPrefix(string[] keys);

    /// <summary>Removes every value the backend holds for kvpool (<see cref="Pool.StorageClear"/>);
    /// throw to report a failure. Optional: without an override StorageClear fails with
    /// Status.Unsupported.</summary>
    public virtual void Clear() {
      throw new NotSupportedException("this StorageBackend does not implement Clear()");
    }

    /// <summary>Called with what a method threw (operation "Put", "Get", "ExistsPrefix" or "Clear"),
    /// on the thread that ran it, after the call's keys were reported as errors. Does nothing by
    /// default; override it to log. What it throws is ignored.</summary>
    protected virtual void Failed(string operation, Exception error) {
    }

    // Whether the concrete class overrides Clear() (the C table's clear is then set).
    internal bool ImplementsClear {
      get { return GetType().GetMethod("Clear", Type.EmptyTypes).DeclaringType != typeof(StorageBackend); }
    }

    // --- The callbacks of every pool's table (storage_backend.i) ---------------------------
    // Static delegates, registered once with the shim and kept alive by these fields for the
    // life of the process. `user` is a GCHandle of the backend. They run on the pool's storage
    // threads (mono attaches them) and catch everything: an exception escaping a callback on
    // a foreign thread would end the process.
    internal delegate void PutCallback(IntPtr user, IntPtr keys, IntPtr values, IntPtr sizes, UIntPtr n, IntPtr results);
    internal delegate void GetCallback(IntPtr user, IntPtr keys, IntPtr dst, IntPtr capacity, UIntPtr n, IntPtr sizes,
                                       IntPtr results);
    internal delegate UIntPtr ExistsCallback(IntPtr user, IntPtr keys, UIntPtr n);
    internal delegate int ClearCallback(IntPtr user);
    internal delegate void ReleaseCallback(IntPtr user);

    static readonly PutCallback putCallback = new PutCallback(PutThunk);
    static readonly GetCallback getCallback = new GetCallback(GetThunk);
    static readonly ExistsCallback existsCallback = new ExistsCallback(ExistsThunk);
    static readonly ClearCallback clearCallback = new ClearCallback(ClearThunk);
    static readonly ReleaseCallback releaseCallback = new ReleaseCallback(ReleaseThunk);

    static StorageBackend() {
      KvpoolPINVOKE.KvPoolCs_RegisterStorage(putCallback, getCallback, existsCallback, clearCallback, releaseCallback);
    }

    // Runs the static constructor (registration) before a pool can call back.
    internal static void EnsureRegistered() {
    }

    static StorageBackend Target(IntPtr user) {
      return (StorageBackend)GCHandle.FromIntPtr(user).Target;
    }

    void Report(string operation, Exception error) {
      try {
        Failed(operation, error);
      } catch (Exception) {
        // A failing failure hook must not become a failure of the storage thread.
      }
    }

    static string[] Keys(IntPtr keys, int n) {
      string[] k = new string[n];
      for (int i = 0; i < n; i++) k[i] = Marshal.PtrToStringAnsi(Marshal.ReadIntPtr(keys, i * IntPtr.Size));
      return k;
    }

    static long SizeAt(IntPtr sizes, int i) {
      return (long)(ulong)Marshal.ReadIntPtr(sizes, i * IntPtr.Size).ToInt64();
    }

    static void PutThunk(IntPtr user, IntPtr keys, IntPtr values, IntPtr sizes, UIntPtr count, IntPtr results) {
      StorageBackend backend = null;
      try {
        int n = checked((int)count.ToUInt64());
        backend = Target(user);
        byte[][] v = new byte[n][];
        for (int i = 0; i < n; i++) {
          v[i] = new byte[checked((int)SizeAt(sizes, i))];
          Marshal.Copy(Marshal.ReadIntPtr(values, i * IntPtr.Size), v[i], 0, v[i].Length);
        }
        StorageResult[] r = NewResults(n);
        backend.Put(Keys(keys, n), v, r);
        for (int i = 0; i < n; i++) Marshal.WriteInt32(results, i * 4, (int)r[i]);
      } catch (Exception e) {
        // The results C prefilled with KVSTORE_ERROR stay as they are: none was written yet.
        if (backend != null) backend.Report("Put", e);
      }
    }

    static void GetThunk(IntPtr user, IntPtr keys, IntPtr dst, IntPtr capacity, UIntPtr count, IntPtr sizes,
                         IntPtr results) {
      StorageBackend backend = null;
      try {
        int n = checked((int)count.ToUInt64());
        backend = Target(user);
        byte[][] v = new byte[n][];
        StorageResult[] r = NewResults(n);
        backend.Get(Keys(keys, n), v, r);
        for (int i = 0; i < n; i++) {
          StorageResult result = r[i];
          if (result == StorageResult.Ok) {
            if (v[i] == null) {
              result = StorageResult.Error;  // Ok without bytes is no value
            } else {
              long room = SizeAt(capacity, i);
              int copy = (int)Math.Min(room, (long)v[i].Length);
              Marshal.Copy(v[i], 0, Marshal.ReadIntPtr(dst, i * IntPtr.Size), copy);
              // The full length: kvpool rejects a value longer than the room it gave.
              Marshal.WriteIntPtr(sizes, i * IntPtr.Size, new IntPtr(v[i].Length));
            }
          }
          Marshal.WriteInt32(results, i * 4, (int)result);
        }
      } catch (Exception e) {
        // Some keys may already be Ok with their bytes copied; the rest stay KVSTORE_ERROR.
        if (backend != null) backend.Report("Get", e);
      }
    }

    static UIntPtr ExistsThunk(IntPtr user, IntPtr keys, UIntPtr count) {
      StorageBackend backend = null;
      try {
        int n = checked((int)count.ToUInt64());
        backend = Target(user);
        return new UIntPtr((ulong)Math.Max(0, backend.ExistsPrefix(Keys(keys, n))));
      } catch (Exception e) {
        if (backend != null) backend.Report("ExistsPrefix", e);
        return UIntPtr.Zero;  // a key that cannot be asked about is missing
      }
    }

    static int ClearThunk(IntPtr user) {
      StorageBackend backend = null;
      try {
        backend = Target(user);
        backend.Clear();
        return (int)StorageResult.Ok;
      } catch (Exception e) {
        if (backend != null) backend.Report("Clear", e);
        return (int)StorageResult.Error;
      }
    }

    // The table's destroy: the pool no longer calls the backend, which may be collected now.
    static void ReleaseThunk(IntPtr user) {
      try {
        GCHandle.FromIntPtr(user).Free();
      } catch (Exception) {
        // Nothing to report to: a handle that cannot be freed is leaked, never thrown into C.
      }
    }

    static StorageResult[] NewResults(int n) {
      StorageResult[] r = new StorageResult[n];
      for (int i = 0; i < n; i++) r[i] = StorageResult.Error;  // a result left unwritten is an error
      return r;
    }
  }

  public partial class Pool {
    /// <summary>Creates a pool whose storage tier is the engine's own store
    /// (docs/storage-custom.md): the configuration's storage section says "backend": "custom", and
    /// the pool's storage threads call backend's methods. Pools given the same backend share its
    /// values. The pool keeps backend alive until it is disposed.</summary>
    /// <exception cref="KvPoolException">Status.InvalidArgument for a null backend; Status.Config
    /// when the configuration has no storage section or names another backend.</exception>
    public static Pool WithStorage(string json, StorageBackend backend) {
      StorageBackend.EnsureRegistered();
      GCHandle handle = new GCHandle();
      IntPtr user = IntPtr.Zero;
      bool hasClear = false;
      if (backend != null) {
        hasClear = backend.ImplementsClear;
        handle = GCHandle.Alloc(backend);
        user = GCHandle.ToIntPtr(handle);
      }
      IntPtr pool;
      try {
        Kvpool.kvpool_create_with_storage(json, user, hasClear ? 1 : 0, out pool);
      } catch {
        // A failed creation calls nothing, not even destroy: the handle is still ours.
        if (handle.IsAllocated) handle.Free();
        throw;
      }
      return new Pool(pool, true);
    }
  }
}
