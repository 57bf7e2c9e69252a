package ai.kvpool;

/** Tokens held by the radix tree ({@link Pool#radixSizes()}). */
public final class RadixSizes {
  private final long evictable;
  private final long protectedTokens;
  private final long total;

  RadixSizes(long evictable, long protectedTokens, long total) {
    this.evictable = evictable;
    this.protectedTokens = protectedTokens;
    this.total = total;
  }

  /** Tokens of unlocked nodes ({@link Pool#evict(long)} can free them). */
  public long getEvictable() {
    return evictable;
  }

  /** Tokens of locked nodes and their ancestors. */
  public long getProtected() {
    return protectedTokens;
  }

  /** Evictable plus protected. */
  public long getTotal() {
    return total;
  }

  @Override
  public String toString() {
    return "RadixSizes{evictable=" + evictable + ", protected=" + protectedTokens + ", total=" + total + "}";
  }
}
