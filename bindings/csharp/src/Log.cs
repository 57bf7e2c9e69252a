// KvPool.Log: the library's diagnostics in a .NET logger (kvpool_set_log_callback, log.h).
// The C side is the shim in ../log_callback.i.
using System;
using System.Runtime.InteropServices;

namespace KvPool {

  /// <summary>Receives one library message: one line of text without a trailing newline.</summary>
  public delegate void LogCallback(LogLevel level, string message);

  /// <summary>
  /// Routes the library's messages (log.h) to a delegate, for every pool of the process. Off by
  /// default. To send them to Microsoft.Extensions.Logging, for instance:
  /// <code>
  /// Log.SetCallback((level, message) => logger.Log(level == LogLevel.Error ? MsLogLevel.Error
  ///     : level == LogLevel.Warn ? MsLogLevel.Warning : level == LogLevel.Info ? MsLogLevel.Information
  ///     : MsLogLevel.Debug, "{Message}", message), LogLevel.Info);
  /// </code>
  /// </summary>
  public static class Log {
    // Registered once with the shim and kept alive by this field for the life of the process.
    internal delegate void Callback(IntPtr user, int level, IntPtr message, int length);
    static readonly Callback callback = new Callback(Deliver);

    static Log() {
      KvpoolPINVOKE.KvPoolCs_RegisterLog(callback);
    }

    /// <summary>
    /// Sends the messages of <paramref name="level"/> (and more severe) to <paramref name="callback"/>;
    /// null turns logging off. When it returns, the previous delegate is not running and is never
    /// called again (and may be collected).
    /// </summary>
    /// <remarks>The delegate runs on the thread of the failing call or, for the storage tier's
    /// messages, on a pool's storage thread (which mono attaches), possibly on several at once: it
    /// must be thread-safe, return quickly and not call SetCallback (which then throws
    /// KvPoolException with Status.InvalidArgument). What it throws is caught and dropped.</remarks>
    public static void SetCallback(LogCallback callback, LogLevel level) {
      GCHandle handle = new GCHandle();
      IntPtr user = IntPtr.Zero;
      if (callback != null) {
        handle = GCHandle.Alloc(callback);
        user = GCHandle.ToIntPtr(handle);
      }
      ulong previous;
      try {
        Kvpool.kvpool_set_log_callback(user, level, out previous);
      } catch {
        if (handle.IsAllocated) handle.Free();  // the library never saw it
        throw;
      }
      if (previous != 0) GCHandle.FromIntPtr(new IntPtr((long)previous)).Free();  // no longer called
    }

    // On the thread of the event (maybe a pool's storage thread): nothing may escape into C.
    static void Deliver(IntPtr user, int level, IntPtr message, int length) {
      try {
        LogCallback target = (LogCallback)GCHandle.FromIntPtr(user).Target;
        byte[] bytes = new byte[length];
        Marshal.Copy(message, bytes, 0, length);
        target((LogLevel)level, System.Text.Encoding.UTF8.GetString(bytes));
      } catch {
        // A failing callback loses its message; the library goes on.
      }
    }
  }
}
