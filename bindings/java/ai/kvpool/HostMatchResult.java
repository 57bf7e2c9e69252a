package ai.kvpool;

/**
 * A match that also reports the host tier ({@link Pool#hostMatch(int[], String)}): the device part
 * (as {@link MatchResult}) and the host-only part after it.
 */
public final class HostMatchResult {
  private final long[] slots;
  private final long node;
  private final long hostLength;
  private final long hostNode;

  HostMatchResult(long[] slots, long node, long hostLength, long hostNode) {
    this.slots = slots;
    this.node = node;
    this.hostLength = hostLength;
    this.hostNode = hostNode;
  }

  /** The device slots of the tokens matched on the device (a copy). */
  public long[] getSlots() {
    return slots.clone();
  }

  /** Number of tokens matched on the device. */
  public int getLength() {
    return slots.length;
  }

  /** Handle of the deepest matched device node (the root if none). */
  public long getNode() {
    return node;
  }

  /** Tokens matched after the device part in host-only nodes. */
  public long getHostLength() {
    return hostLength;
  }

  /**
   * Handle of the deepest matched node with a host copy (the root if none): pass it to
   * {@link Pool#hostLoadBack(long)}.
   */
  public long getHostNode() {
    return hostNode;
  }

  @Override
  public String toString() {
    return "HostMatchResult{length=" + slots.length + ", node=" + Long.toUnsignedString(node) + ", hostLength="
        + hostLength + ", hostNode=" + Long.toUnsignedString(hostNode) + "}";
  }
}
