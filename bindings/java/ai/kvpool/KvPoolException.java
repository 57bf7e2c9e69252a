package ai.kvpool;

import java.nio.charset.StandardCharsets;

/**
 * A kvpool call returned a status other than {@link Status#OK}.
 *
 * <p>Unchecked, like {@link IllegalArgumentException}: most failures are
 * configuration or programming errors that callers do not handle locally.
 * Catch it where a failure is expected and recoverable, e.g.
 * {@link Status#OUT_OF_MEMORY} (free or evict, then retry).
 *
 * <p>The message is the library's detail for the failed call (for a
 * configuration error it names the JSON path, the value and what was
 * expected); it is read inside the same native call, so it always belongs
 * to this failure.
 */
public class KvPoolException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;

  /** Made by the JNI wrapper (kvpool.i): the message arrives as UTF-8 bytes. */
  KvPoolException(int code, byte[] utf8Message) {
    this(code, new String(utf8Message, StandardCharsets.UTF_8));
  }

  /**
   * @param code    the kvpool_status value
   * @param message the detail; when empty, the status' description is used
   */
  public KvPoolException(int code, String message) {
    super(message == null || message.isEmpty() ? describe(code) : message);
    this.code = code;
  }

  /** The numeric kvpool_status (stable across versions). */
  public int getCode() {
    return code;
  }

  /** The status as an enum, or null for a code newer than this binding. */
  public Status getStatus() {
    for (Status s : Status.values()) {
      if (s.swigValue() == code) {
        return s;
      }
    }
    return null;
  }

  @Override
  public String toString() {
    Status status = getStatus();
    String name = status == null ? "UNKNOWN" : status.name();
    return getClass().getName() + ": [" + name + " " + code + "] " + getMessage();
  }

  private static String describe(int code) {
    Status status = null;
    for (Status s : Status.values()) {
      if (s.swigValue() == code) {
        status = s;
      }
    }
    return status == null ? "kvpool status " + code : Kvpool.statusString(status);
  }
}
