package ai.kvpool;

/** The hash of one page of tokens ({@link Pool#pageHash(int[], byte[])}). */
public final class PageHash {
  private final byte[] digest;
  private final long id;

  PageHash(byte[] digest, long id) {
    this.digest = digest;
    this.id = id;
  }

  /** The 32-byte SHA-256 digest (a copy): the parent of the next page. */
  public byte[] getDigest() {
    return digest.clone();
  }

  /** The event id: the digest's first 8 bytes read big-endian ({@link KvEvent#getBlockHash()}). */
  public long getId() {
    return id;
  }

  @Override
  public String toString() {
    return "PageHash{id=" + id + "}";
  }
}
