package ai.kvpool;

/** The longest cached prefix of a key ({@link Pool#match(int[], String)}). */
public final class MatchResult {
  private final long[] slots;
  private final long node;
  private final int mambaSlot;

  MatchResult(long[] slots, long node) {
    this(slots, node, -1);
  }

  MatchResult(long[] slots, long node, int mambaSlot) {
    this.slots = slots;
    this.node = node;
    this.mambaSlot = mambaSlot;
  }

  /**
   * {@link Pool#matchMamba(int[], String, int)}: the node's mamba state slot, owned by the tree
   * (-1 if nothing matched, and for {@link Pool#match(int[], String)}).
   */
  public int getMambaSlot() {
    return mambaSlot;
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
