// KvPoolException: a kvpool call returned a status other than Status.Ok.
namespace KvPool {

  /// <summary>
  /// A kvpool call failed. <see cref="Code"/> is the stable numeric
  /// kvpool_status, <see cref="Status"/> its enum value, and the message is
  /// the library's detail for this failure (for a configuration error it
  /// names the JSON path). The message is captured inside the failing
  /// native call, so it always belongs to this failure.
  /// </summary>
  public class KvPoolException : global::System.Exception {
    private readonly int code;

    /// <summary>Creates the exception; an empty message is replaced by the status' description.</summary>
    public KvPoolException(int code, string message)
        : base(string.IsNullOrEmpty(message) ? Describe(code) : message) {
      this.code = code;
    }

    /// <summary>The numeric kvpool_status.</summary>
    public int Code {
      get { return code; }
    }

    /// <summary>The status as an enum; a code newer than this binding keeps its number.</summary>
    public Status Status {
      get { return (Status)code; }
    }

    /// <summary>Type, status name, code and message.</summary>
    public override string ToString() {
      return GetType().FullName + ": [" + Status + " " + code + "] " + Message;
    }

    private static string Describe(int code) {
      return Kvpool.StatusString((Status)code);
    }
  }
}
