package ai.kvpool;

/** What {@link Pool#insert(int[], long[], String, int)} did. */
public final class InsertResult {
  private final long prefixLength;
  private final long node;
  private final boolean stateExisted;

  InsertResult(long prefixLength, long node) {
    this(prefixLength, node, false);
  }

  InsertResult(long prefixLength, long node, boolean stateExisted) {
    this.prefixLength = prefixLength;
    this.node = node;
    this.stateExisted = stateExisted;
  }

  /**
   * {@link Pool#insertMamba(int[], long[], String, int)}: true if the end node already had a mamba
   * state, so the caller keeps (and frees) its state slot; false if the tree took it.
   */
  public boolean isStateExisted() {
    return stateExisted;
  }

  /**
   * Leading tokens that were cached already: the caller still owns those slots (duplicates to
   * free, unless they are the tree's own); the tree took the rest.
   */
  public long getPrefixLength() {
    return prefixLength;
  }

  /** Handle of the node of the last token. */
  public long getNode() {
    return node;
  }

  @Override
  public String toString() {
    return "InsertResult{prefixLength=" + prefixLength + ", node=" + Long.toUnsignedString(node) + "}";
  }
}
