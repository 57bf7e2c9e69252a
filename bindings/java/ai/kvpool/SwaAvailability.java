package ai.kvpool;

/** Free slots of the two pools of a swa allocator ({@link Pool#swaAvailable()}). */
public final class SwaAvailability {
  private final long full;
  private final long swa;

  SwaAvailability(long full, long swa) {
    this.full = full;
    this.swa = swa;
  }

  /** Free slots of the full-attention pool. */
  public long getFull() {
    return full;
  }

  /** Free slots of the sliding-window pool. */
  public long getSwa() {
    return swa;
  }

  @Override
  public String toString() {
    return "SwaAvailability{full=" + full + ", swa=" + swa + "}";
  }
}
