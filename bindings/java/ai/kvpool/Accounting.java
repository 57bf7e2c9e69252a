package ai.kvpool;

/**
 * SGLang's scheduler accounting ({@link Pool#accounting()}): available + evictable + protected +
 * uncached == capacity whenever only the request API allocates.
 */
public final class Accounting {
  private final long available;
  private final long evictable;
  private final long protectedTokens;
  private final long uncached;
  private final long capacity;

  Accounting(long available, long evictable, long protectedTokens, long uncached, long capacity) {
    this.available = available;
    this.evictable = evictable;
    this.protectedTokens = protectedTokens;
    this.uncached = uncached;
    this.capacity = capacity;
  }

  /** The allocator's free tokens. */
  public long getAvailable() {
    return available;
  }

  /** The tree's unlocked tokens (0 without a tree). */
  public long getEvictable() {
    return evictable;
  }

  /** The tree's locked tokens. */
  public long getProtected() {
    return protectedTokens;
  }

  /** Tokens held by requests and not owned by the tree (whole pages). */
  public long getUncached() {
    return uncached;
  }

  /** The token capacity. */
  public long getCapacity() {
    return capacity;
  }

  /** Whether available + evictable + protected + uncached == capacity. */
  public boolean holds() {
    return available + evictable + protectedTokens + uncached == capacity;
  }

  @Override
  public String toString() {
    return "Accounting{available=" + available + ", evictable=" + evictable + ", protected=" + protectedTokens
        + ", uncached=" + uncached + ", capacity=" + capacity + "}";
  }
}
