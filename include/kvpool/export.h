/**
 * @file export.h
 * @brief Symbol visibility macro for the kvpool C ABI.
 *
 * The library is built with hidden visibility; only functions marked
 * #KVPOOL_API are exported (and a linker version script double-checks this).
 */
#ifndef KVPOOL_EXPORT_H
#define KVPOOL_EXPORT_H

/**
 * @def KVPOOL_API
 * @brief Marks a function as part of the public, exported C ABI.
 */
#if defined(_WIN32)
#  if defined(KVPOOL_BUILDING)
#    define KVPOOL_API __declspec(dllexport)
#  else
#    define KVPOOL_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define KVPOOL_API __attribute__((visibility("default")))
#else
#  define KVPOOL_API
#endif

#endif /* KVPOOL_EXPORT_H */
