/**
 * @file log.h
 * @brief The library's diagnostics, delivered to a callback the service sets (off by default).
 *
 * kvpool writes nothing to stdout, stderr or files. A service that wants the library's
 * diagnostics in its own logger sets one process-wide callback with kvpool_set_log_callback();
 * until then (and after it is cleared) nothing is logged and no message is even formatted.
 *
 * What is logged (docs/services.md, "Logging", has the full list):
 * - #KVPOOL_LOG_ERROR: failed calls that point to a bug or broken hardware (#KVPOOL_ERR_INTERNAL,
 *   #KVPOOL_ERR_CUDA, #KVPOOL_ERR_DEVICE_FAULT), with the call's message.
 * - #KVPOOL_LOG_WARN: the storage tier's troubles (put or get errors, timeouts, server or file system
 *   errors, servers taken out of rotation, stored pages rejected by their checks), host-tier
 *   backups that could not start, calls that ran out of host memory or failed on I/O.
 * - #KVPOOL_LOG_INFO: pools created (with their sizing) and destroyed.
 * - #KVPOOL_LOG_DEBUG: every other failed call, with its status and message (including the
 *   recoverable ones, such as #KVPOOL_ERR_OUT_OF_MEMORY and #KVPOOL_ERR_BUFFER_TOO_SMALL).
 *
 * Threads: the callback runs on the thread where the event happened: the thread of the kvpool
 * call, or one of a pool's storage threads (backups and prefetches), which the runtime of the
 * service did not create. Calls may overlap, so the callback must be thread-safe.
 */
#ifndef KVPOOL_LOG_H
#define KVPOOL_LOG_H

#include "kvpool/export.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Severity of a log message; a smaller value is more severe.
 *
 * The numeric values are part of the ABI.
 */
typedef enum kvpool_log_level {
  /** A bug or broken hardware: the call failed and the pool may be unusable. */
  KVPOOL_LOG_ERROR = 0,
  /** Something failed that the library works around (a storage write, a host backup). */
  KVPOOL_LOG_WARN = 1,
  /** Pool lifecycle: created (with its sizing), being destroyed. */
  KVPOOL_LOG_INFO = 2,
  /** Every failed call with its status and message. */
  KVPOOL_LOG_DEBUG = 3
} kvpool_log_level;

/**
 * @brief Receives one log message.
 * @param user_data The pointer given to kvpool_set_log_callback().
 * @param level     The message's severity (at most as verbose as the level that was set).
 * @param message   One line of UTF-8 text without a trailing newline, valid only during the call.
 *
 * It must not call kvpool_set_log_callback() (that call fails with #KVPOOL_ERR_INVALID_ARGUMENT);
 * other kvpool calls are allowed but log nothing while it runs on that thread. It must not
 * throw (C++) or longjmp out, and should return quickly: a storage thread waits for it.
 */
typedef void (*kvpool_log_callback)(void *user_data, kvpool_log_level level, const char *message);

/**
 * @brief Set (or clear) the process-wide log callback.
 * @param[in] callback  The function to call, or NULL to log nothing (the default).
 * @param[in] user_data Passed back to @p callback unchanged.
 * @param[in] level     The most verbose level delivered: #KVPOOL_LOG_WARN delivers errors and
 *                      warnings. Ignored when @p callback is NULL.
 * @return #KVPOOL_OK; #KVPOOL_ERR_INVALID_ARGUMENT for a level that is not a ::kvpool_log_level
 *         (with a callback), or when called from inside a log callback (nothing changes then).
 *
 * When it returns, the previous callback is not running on any thread and is never called
 * again, so its @p user_data may be released. Messages of events on other threads while it
 * runs go to the previous callback or to the new one, each whole.
 *
 * Thread safety: safe from any thread, also while pools log from theirs.
 */
KVPOOL_API kvpool_status kvpool_set_log_callback(kvpool_log_callback callback, void *user_data, kvpool_log_level level);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_LOG_H */
