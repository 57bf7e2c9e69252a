package ai.kvpool;

import java.util.Arrays;

/**
 * An engine's own store as the storage tier of a pool ({@link Pool#withStorage}): a cache
 * cluster client, an object store, a test double. kvpool stores opaque byte values under short
 * keys and checks every value it reads (docs/storage-custom.md has the contract).
 *
 * <ul>
 *   <li><b>Keys</b> are 1 to 120 characters of {@code [0-9a-z-]}; a key always names the same
 *       bytes, so {@link #put} may skip a key that exists and report {@link StorageResult#OK}.
 *   <li><b>Batches</b> hold at most 128 keys; every key gets its own result. A result left
 *       {@code null}, or one that is not valid for the call ({@code MISS} from {@code put}),
 *       counts as {@link StorageResult#ERROR}.
 *   <li><b>Threads</b>: {@code put}, {@code get} and {@code existsPrefix} run on the pool's
 *       storage threads (a backup and a prefetch thread, possibly at the same time; attached to
 *       the JVM as daemon threads named "kvpool-storage"), {@code clear} on the thread that calls
 *       {@link Pool#storageClear()}. Pools sharing one backend call it from all their threads:
 *       <b>every method must be thread-safe.</b>
 *   <li><b>Exceptions</b> never reach kvpool: anything a method throws makes every key of that
 *       call {@link StorageResult#ERROR} ({@code existsPrefix}: 0 keys; {@code clear}: the
 *       {@code storageClear()} call fails with {@link Status#IO}), and is passed to
 *       {@link #failed}.
 *   <li><b>No re-entry, bounded</b>: a method never calls a {@link Pool} method, and never
 *       blocks forever (bound every wait on a server with a timeout and report an error or a
 *       miss). {@code storageFlush()} and {@code close()} wait for running calls, so a method
 *       must not wait for a lock that the thread calling them holds.
 *   <li><b>Lifetime</b>: a pool keeps its backend reachable until it is closed (or collected).
 *       A backend that holds a reference to its own pool keeps both alive until
 *       {@code close()}.
 * </ul>
 */
public abstract class StorageBackend {
  /** For subclasses. */
  protected StorageBackend() {
  }

  /**
   * Stores {@code values[i]} under {@code keys[i]} for every i and sets {@code results[i]} to
   * {@link StorageResult#OK} (stored, or the key already held it) or {@link StorageResult#ERROR}.
   * The value arrays are copies that the backend may keep.
   */
  public abstract void put(String[] keys, byte[][] values, StorageResult[] results);

  /**
   * Reads every key: {@code values[i]} = the bytes stored under {@code keys[i]}, exactly as they
   * were put, with {@code results[i]} = {@link StorageResult#OK}; or {@code results[i]} =
   * {@link StorageResult#MISS} (no value under the key, e.g. evicted) or
   * {@link StorageResult#ERROR}. The returned arrays are copied; the backend may keep them.
   */
  public abstract void get(String[] keys, byte[][] values, StorageResult[] results);

  /**
   * How many of {@code keys} exist, counted from the start up to the first that does not (a key
   * that cannot be asked about counts as missing; a count above {@code keys.length} is taken as
   * {@code keys.length}).
   */
  public abstract int existsPrefix(String[] keys);

  /**
   * Removes every value the backend holds for kvpool ({@link Pool#storageClear()}); throw to
   * report a failure. Optional: a backend that does not override it makes
   * {@code storageClear()} fail with {@link Status#UNSUPPORTED}.
   */
  public void clear() {
    throw new UnsupportedOperationException("this StorageBackend does not implement clear()");
  }

  /**
   * Called with what a method threw ({@code operation} is "put", "get", "existsPrefix" or
   * "clear"), on the thread that ran it, after the call's keys were reported as errors. Does
   * nothing by default; override it to log. What it throws is ignored.
   */
  protected void failed(String operation, Throwable error) {
  }

  /** Whether the concrete class overrides {@link #clear()} (the C table's clear is then set). */
  final boolean implementsClear() {
    try {
      return getClass().getMethod("clear").getDeclaringClass() != StorageBackend.class;
    } catch (NoSuchMethodException e) {
      return false;
    }
  }

  // The trampolines the JNI shim (java/storage_backend.i) calls from the storage threads. They
  // catch everything: an exception must become error results, never a pending exception in C.

  private void report(String operation, Throwable error) {
    try {
      failed(operation, error);
    } catch (Throwable ignored) {
      // A failing failure hook must not turn into a failure of the storage thread.
    }
  }

  private static int code(StorageResult r) {
    return r == null ? StorageResult.ERROR.swigValue() : r.swigValue();
  }

  final void callPut(String[] keys, byte[][] values, int[] codes) {
    StorageResult[] results = new StorageResult[keys.length];
    try {
      put(keys, values, results);
    } catch (Throwable t) {
      Arrays.fill(codes, StorageResult.ERROR.swigValue());
      report("put", t);
      return;
    }
    for (int i = 0; i < codes.length; i++) {
      codes[i] = code(results[i]);
    }
  }

  final byte[][] callGet(String[] keys, int[] codes) {
    byte[][] values = new byte[keys.length][];
    StorageResult[] results = new StorageResult[keys.length];
    try {
      get(keys, values, results);
    } catch (Throwable t) {
      Arrays.fill(codes, StorageResult.ERROR.swigValue());
      report("get", t);
      return null;
    }
    for (int i = 0; i < codes.length; i++) {
      // OK without bytes is no value: an error rather than an empty page.
      codes[i] = (results[i] == StorageResult.OK && values[i] == null) ? StorageResult.ERROR.swigValue()
                                                                        : code(results[i]);
    }
    return values;
  }

  final int callExistsPrefix(String[] keys) {
    try {
      return Math.max(0, existsPrefix(keys));
    } catch (Throwable t) {
      report("existsPrefix", t);
      return 0;
    }
  }

  final int callClear() {
    try {
      clear();
      return StorageResult.OK.swigValue();
    } catch (Throwable t) {
      report("clear", t);
      return StorageResult.ERROR.swigValue();
    }
  }
}
