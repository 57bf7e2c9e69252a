package ai.kvpool;

/** Where a radix node's tokens live ({@link Pool#hostNodeState(long)}). */
public final class HostNodeState {
  private final boolean onDevice;
  private final boolean onHost;
  private final long tokens;

  HostNodeState(boolean onDevice, boolean onHost, long tokens) {
    this.onDevice = onDevice;
    this.onHost = onHost;
    this.tokens = tokens;
  }

  /** Whether the node's KV is on the device. */
  public boolean isOnDevice() {
    return onDevice;
  }

  /** Whether the node has a host copy. */
  public boolean isOnHost() {
    return onHost;
  }

  /** The node's token count. */
  public long getTokens() {
    return tokens;
  }

  @Override
  public String toString() {
    return "HostNodeState{onDevice=" + onDevice + ", onHost=" + onHost + ", tokens=" + tokens + "}";
  }
}
