package ai.kvpool;

/** A request just started ({@link Pool#begin(int[], String)}). */
public final class SeqBegin {
  private final long seq;
  private final long cached;

  SeqBegin(long seq, long cached) {
    this.seq = seq;
    this.cached = cached;
  }

  /** The request id (never 0; an unsigned 64-bit value). */
  public long getSeq() {
    return seq;
  }

  /** Prompt tokens found in the prefix cache. */
  public long getCached() {
    return cached;
  }

  @Override
  public String toString() {
    return "SeqBegin{seq=" + Long.toUnsignedString(seq) + ", cached=" + cached + "}";
  }
}
