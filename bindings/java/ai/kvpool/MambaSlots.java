package ai.kvpool;

import java.util.Arrays;

/** The state slot and ping-pong slots of a hybrid request row ({@link Pool#reqMambaSlots(int)}). */
public final class MambaSlots {
  private final int slot;
  private final int[] pingPong;

  MambaSlots(int slot, int[] pingPong) {
    this.slot = slot;
    this.pingPong = pingPong.clone();
  }

  /** The row's state slot, -1 if none. */
  public int getSlot() {
    return slot;
  }

  /** The two ping-pong slots (-1, -1 without pool.mamba_extra_buffer); a copy. */
  public int[] getPingPong() {
    return pingPong.clone();
  }

  @Override
  public String toString() {
    return "MambaSlots{slot=" + slot + ", pingPong=" + Arrays.toString(pingPong) + "}";
  }
}
