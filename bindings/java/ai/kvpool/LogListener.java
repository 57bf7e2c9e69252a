package ai.kvpool;

/**
 * Receives the library's log messages (log.h), once set with
 * {@link Kvpool#setLogListener(LogListener, LogLevel)}.
 *
 * <p>To route them into java.util.logging, for instance:
 * <pre>{@code
 * Logger logger = Logger.getLogger("kvpool");
 * Kvpool.setLogListener((level, message) -> logger.log(
 *     level == LogLevel.ERROR ? Level.SEVERE : level == LogLevel.WARN ? Level.WARNING
 *         : level == LogLevel.INFO ? Level.INFO : Level.FINE, message), LogLevel.INFO);
 * }</pre>
 * (SLF4J or Log4j the same way.) It runs on kvpool's threads too: see setLogListener.
 */
@FunctionalInterface
public interface LogListener {
  /**
   * One message.
   * @param level its severity
   * @param message one line of text without a trailing newline
   */
  void log(LogLevel level, String message);
}
