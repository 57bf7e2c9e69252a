/**
 * @file version.h
 * @brief Compile-time and run-time version of kvpool.
 *
 * The macros describe the headers you compiled against; kvpool_version()
 * describes the library actually loaded. A binding or an engine that
 * `dlopen`s the library should check `kvpool_version() >= KVPOOL_VERSION_NUMBER`.
 * The CMake project version is read from this file, so it is the single source.
 */
#ifndef KVPOOL_VERSION_H
#define KVPOOL_VERSION_H

#include <stdint.h>

#include "kvpool/export.h"

/** Major version: incremented on ABI breaks (it is the SONAME number). */
#define KVPOOL_VERSION_MAJOR 0
/** Minor version: incremented when functions are added. */
#define KVPOOL_VERSION_MINOR 1
/** Patch version: incremented for fixes that do not change the ABI. */
#define KVPOOL_VERSION_PATCH 0
/** The version as one number: major*10000 + minor*100 + patch. */
#define KVPOOL_VERSION_NUMBER \
  (KVPOOL_VERSION_MAJOR * 10000 + KVPOOL_VERSION_MINOR * 100 + KVPOOL_VERSION_PATCH)
/** The version as a string, "major.minor.patch". */
#define KVPOOL_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Version of the loaded library as #KVPOOL_VERSION_NUMBER computes it.
 * @return major*10000 + minor*100 + patch of the library at run time.
 *
 * Thread safety: safe from any thread.
 */
KVPOOL_API uint32_t kvpool_version(void);

/**
 * @brief Version of the loaded library as a string such as "0.1.0".
 * @return A static NUL-terminated string; never NULL, never freed.
 *
 * Thread safety: safe from any thread.
 */
KVPOOL_API const char *kvpool_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_VERSION_H */
