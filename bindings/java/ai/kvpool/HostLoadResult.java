package ai.kvpool;

/** What {@link Pool#hostLoadBack(long)} brought back to the device. */
public final class HostLoadResult {
  private final long[] slots;
  private final long node;

  HostLoadResult(long[] slots, long node) {
    this.slots = slots;
    this.node = node;
  }

  /** The loaded tokens' device slots, owned by the tree (a copy; empty if nothing was loaded). */
  public long[] getSlots() {
    return slots.clone();
  }

  /** Number of tokens loaded (0 below the 10-token threshold or without device room). */
  public int getLoaded() {
    return slots.length;
  }

  /** Handle of the deepest device node of the path afterwards. */
  public long getNode() {
    return node;
  }

  @Override
  public String toString() {
    return "HostLoadResult{loaded=" + slots.length + ", node=" + Long.toUnsignedString(node) + "}";
  }
}
