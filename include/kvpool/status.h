/**
 * @file status.h
 * @brief Status codes and error messages shared by every kvpool function.
 *
 * Every fallible function returns a ::kvpool_status. A failed call changes
 * nothing (no pool, tree or table is modified) and leaves a message for the
 * calling thread in kvpool_last_error(). Decide success or failure from the
 * status code only, never from the message.
 */
#ifndef KVPOOL_STATUS_H
#define KVPOOL_STATUS_H

#include "kvpool/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Result of a kvpool call.
 *
 * The numeric values are part of the ABI: they never change and new codes
 * are only appended.
 */
typedef enum kvpool_status {
  /** Success. */
  KVPOOL_OK = 0,
  /** A parameter is invalid: NULL or foreign handle, wrong length, slot out of range, double free. */
  KVPOOL_ERR_INVALID_ARGUMENT = 1,
  /** The JSON configuration is malformed or inconsistent; the message names the JSON path. */
  KVPOOL_ERR_CONFIG = 2,
  /** Recoverable: not enough free slots, pages, rows or state slots. Nothing changed; free or evict and retry. */
  KVPOOL_ERR_OUT_OF_MEMORY = 3,
  /** A CUDA runtime call failed; the message carries the CUDA error text. */
  KVPOOL_ERR_CUDA = 4,
  /** The operation or option is not supported by this build, backend or pool variant. */
  KVPOOL_ERR_UNSUPPORTED = 5,
  /** An internal invariant failed or an unexpected exception was caught (a bug: please report it). */
  KVPOOL_ERR_INTERNAL = 6,
  /** A caller-provided output buffer is too small; the required size is reported through the out-parameter. */
  KVPOOL_ERR_BUFFER_TOO_SMALL = 7,
  /** A file could not be opened, read or written; the message carries the path and the system error. */
  KVPOOL_ERR_IO = 8,
  /** Host (system) memory could not be allocated. */
  KVPOOL_ERR_HOST_MEMORY = 9,
  /** kvpool_check() found a leaked or double-owned slot, page, row or state slot. */
  KVPOOL_ERR_CHECK_FAILED = 10,
  /** A stream-ordered call (device.h) found invalid input on the device; the pool refuses device work until kvalloc_clear(). */
  KVPOOL_ERR_DEVICE_FAULT = 11
} kvpool_status;

/**
 * @brief A short, static English description of a status code.
 * @param status Any value; unknown values give "unknown status".
 * @return A static NUL-terminated string; never NULL, never freed.
 *
 * Thread safety: safe from any thread.
 */
KVPOOL_API const char *kvpool_status_string(kvpool_status status);

/**
 * @brief Detail of the last failure on the calling thread.
 * @return A NUL-terminated message, "" if no call on this thread has failed.
 *         The string is owned by the library and valid until the next kvpool
 *         call on the same thread.
 *
 * The message is set by every failing call and not cleared by successful ones.
 * Bindings read it inside the same native call that failed.
 *
 * Thread safety: per thread (thread-local storage).
 */
KVPOOL_API const char *kvpool_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_STATUS_H */
