package ai.kvpool;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * Java strings to the UTF-8 bytes the C API takes. Done in Java because JNI's
 * GetStringUTFChars yields "modified UTF-8", which differs for U+0000 and for
 * characters outside the BMP.
 */
final class Utf8 {
  private Utf8() {
  }

  /** The exact UTF-8 bytes (for (text, length) parameters). */
  static byte[] bytes(String s) {
    return Objects.requireNonNull(s, "string argument is null").getBytes(StandardCharsets.UTF_8);
  }

  /** UTF-8 bytes plus a terminating 0 (for NUL-terminated parameters). */
  static byte[] cString(String s) {
    byte[] utf8 = bytes(s);
    if (s.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("string argument contains a NUL character");
    }
    return Arrays.copyOf(utf8, utf8.length + 1);
  }

  /** As {@link #cString}, but null stays null (a nullable C string, e.g. extra_key). */
  static byte[] cStringOrNull(String s) {
    return s == null ? null : cString(s);
  }

  /** The NUL-terminated UTF-8 text at the start of bytes (all of it without a 0). */
  static String fromC(byte[] bytes) {
    int n = 0;
    while (n < bytes.length && bytes[n] != 0) {
      n++;
    }
    return new String(bytes, 0, n, StandardCharsets.UTF_8);
  }
}
