package ai.kvpool;

/** Request rows and their mamba state slots ({@link Pool#reqAllocHybrid(int[])}). */
public final class HybridRows {
  private final int[] rows;
  private final int[] slots;

  HybridRows(int[] rows, int[] slots) {
    this.rows = rows;
    this.slots = slots;
  }

  /** The rows, one per request (the array is this object's own: do not modify it). */
  public int[] getRows() {
    return rows;
  }

  /** Each row's state slot, in the order of {@link #getRows()}. */
  public int[] getSlots() {
    return slots;
  }
}
