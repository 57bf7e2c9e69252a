package ai.kvpool;

/** One KV event of the radix tree ({@link Pool#takeEvents()}; needs prefix_cache.events). */
public final class KvEvent {
  private final EventType type;
  private final long blockHash;
  private final long parentHash;
  private final boolean hasParent;
  private final int[] tokens;

  KvEvent(EventType type, long blockHash, long parentHash, boolean hasParent, int[] tokens) {
    this.type = type;
    this.blockHash = blockHash;
    this.parentHash = parentHash;
    this.hasParent = hasParent;
    this.tokens = tokens;
  }

  /** BLOCK_STORED, BLOCK_REMOVED or ALL_BLOCKS_CLEARED. */
  public EventType getType() {
    return type;
  }

  /** The page's id: the first 8 bytes of its SHA-256 digest, big-endian ({@link Pool#pageHash}). */
  public long getBlockHash() {
    return blockHash;
  }

  /** The previous page's id, if {@link #hasParent()}. */
  public long getParentHash() {
    return parentHash;
  }

  /** True for a BLOCK_STORED page that has a previous page. */
  public boolean hasParent() {
    return hasParent;
  }

  /** BLOCK_STORED: the page's tokens (a copy); empty otherwise. */
  public int[] getTokens() {
    return tokens.clone();
  }

  @Override
  public String toString() {
    return "KvEvent{" + type + ", blockHash=" + blockHash + (hasParent ? ", parentHash=" + parentHash : "")
        + ", tokens=" + tokens.length + "}";
  }
}
