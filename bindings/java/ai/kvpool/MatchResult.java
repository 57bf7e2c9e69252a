package ai.kvpool;

/** The longest cached prefix of a key ({@link Pool#match(int[], String)}). */
public final class MatchResult {
  private final long[] slots;
  private final long node;

  MatchResult(long[] slots, long node) {
    this.slots = slots;
    this.node = node;
  }

  /** The cached slots of the matched tokens (a whole number of pages; a copy). */
  public long[] getSlots() {
    return slots.clone();
  }

  /** Number of matched tokens. */
  public int getLength() {
    return slots.length;
  }

  /** Handle of the node where the match ends (the root if nothing matched). */
  public long getNode() {
    return node;
  }

  @Override
  public String toString() {
    return "MatchResult{length=" + slots.length + ", node=" + Long.toUnsignedString(node) + "}";
  }
}
