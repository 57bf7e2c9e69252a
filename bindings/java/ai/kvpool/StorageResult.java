package ai.kvpool;

/** The outcome of one key in a {@link StorageBackend} call (storage.h's kvstore_result). */
public enum StorageResult {
  /** put: stored (or the key already held the value); get: the value was read whole. */
  OK(0),
  /** get: no value under the key (never stored, or evicted). Not a valid put result. */
  MISS(1),
  /** The backend failed for this key (I/O error, server down, timeout). */
  ERROR(2);

  private final int value;

  StorageResult(int value) {
    this.value = value;
  }

  /** The C value (KVSTORE_OK, KVSTORE_MISS, KVSTORE_ERROR). */
  public int swigValue() {
    return value;
  }
}
