package ai.kvpool;

import java.nio.charset.StandardCharsets;

/** The native log shim (java/log_callback.i) calls listeners through here. */
final class LogDispatch {
  private LogDispatch() {}

  /**
   * Called on the thread of the event (maybe a pool's storage thread) with the
   * message's UTF-8 bytes. Nothing the listener throws may reach native code.
   */
  static void deliver(LogListener listener, int level, byte[] message) {
    try {
      listener.log(LogLevel.swigToEnum(level), new String(message, StandardCharsets.UTF_8));
    } catch (Throwable ignored) {
      // A failing listener loses its message; the library goes on.
    }
  }
}
