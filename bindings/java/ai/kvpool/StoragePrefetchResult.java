package ai.kvpool;

/** What {@link Pool#storagePrefetch(int[], String)} started: an id, or 0 and why not. */
public final class StoragePrefetchResult {
  private final long id;
  private final StorageSkip skipped;

  StoragePrefetchResult(long id, StorageSkip skipped) {
    this.id = id;
    this.skipped = skipped;
  }

  /** The prefetch's id (an unsigned 64-bit value), or 0 when nothing started. */
  public long getId() {
    return id;
  }

  /** Whether a prefetch started (getId() is not 0). */
  public boolean isStarted() {
    return id != 0;
  }

  /** Why nothing started ({@link StorageSkip#NONE} when a prefetch did). */
  public StorageSkip getSkipped() {
    return skipped;
  }

  @Override
  public String toString() {
    return "StoragePrefetchResult{id=" + Long.toUnsignedString(id) + ", skipped=" + skipped + "}";
  }
}
