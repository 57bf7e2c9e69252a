// Utf8: C# strings to the NUL-terminated UTF-8 bytes the C API takes.
namespace KvPool {

  /// <summary>
  /// Encodes strings explicitly instead of relying on the marshaller's
  /// LPStr, which is the ANSI code page on Windows. The result is a byte[],
  /// which P/Invoke pins rather than copies.
  /// </summary>
  internal static class Utf8 {
    /// <summary>UTF-8 bytes plus a terminating 0; rejects null and embedded NULs
    /// (the C side measures the text with strlen).</summary>
    internal static byte[] CString(string s) {
      if (s == null) {
        throw new global::System.ArgumentNullException("s", "string argument is null");
      }
      if (s.IndexOf('\0') >= 0) {
        throw new global::System.ArgumentException("string argument contains a NUL character", "s");
      }
      global::System.Text.Encoding utf8 = global::System.Text.Encoding.UTF8;
      byte[] bytes = new byte[utf8.GetByteCount(s) + 1];
      utf8.GetBytes(s, 0, s.Length, bytes, 0);
      return bytes;
    }

    /// <summary>As CString, but null stays null (a nullable C string, e.g. extra_key).</summary>
    internal static byte[] CStringOrNull(string s) {
      return s == null ? null : CString(s);
    }

    /// <summary>The NUL-terminated UTF-8 text at the start of bytes (all of it without a 0).</summary>
    internal static string FromC(byte[] bytes) {
      int n = global::System.Array.IndexOf(bytes, (byte)0);
      return global::System.Text.Encoding.UTF8.GetString(bytes, 0, n < 0 ? bytes.Length : n);
    }
  }
}
