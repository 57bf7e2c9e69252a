/*
 * Compiled as strict C89, C99 and C11 (see CMakeLists.txt) with -pedantic and
 * warnings as errors: the public headers must stay plain, portable C that any
 * engine's C compiler accepts. Nothing here runs; compiling is the test.
 * (That every declared function is exported is checked by tests/abi.)
 */
#include <kvpool/kvpool.h>
#include <kvpool/kvpool.h> /* include guards: a second include must be harmless */

/* A C89-compatible static assertion (a negative array size is an error). */
#define HEADER_CHECK_ASSERT(name, cond) typedef char header_check_##name[(cond) ? 1 : -1]

HEADER_CHECK_ASSERT(ok_is_zero, KVPOOL_OK == 0);
HEADER_CHECK_ASSERT(version_number, KVPOOL_VERSION_NUMBER == KVPOOL_VERSION_MAJOR * 10000 +
                                                                 KVPOOL_VERSION_MINOR * 100 +
                                                                 KVPOOL_VERSION_PATCH);

/* The initializer must name every field: -Wextra (missing-field-initializers)
 * turns a field appended without updating the macro into an error here. */
const kvpool_plan_info *header_check_plan(void);
const kvpool_plan_info *header_check_plan(void) {
  static const kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  return &plan;
}
