// Compiled as C++17 with -pedantic and warnings as errors: C++ engines include
// the C headers directly, so they must be clean C++ too and give C linkage.
#include <kvpool/kvpool.h>

#include <type_traits>

// The declarations must have C linkage, or a C++ caller would look for
// mangled names that the library does not export.
extern "C" kvpool_status kvpool_create(const char *json, size_t json_len, kvpool **out);

static_assert(std::is_standard_layout<kvpool_plan_info>::value, "plan info must be a C struct");
static_assert(std::is_trivially_copyable<kvpool_plan_info>::value, "plan info must be a C struct");
static_assert(sizeof(kvpool_status) == sizeof(int), "kvpool_status must have the size of a C enum");

// The C initializer macro must also work in C++ and cover every field.
const kvpool_plan_info *header_check_plan_cxx();
const kvpool_plan_info *header_check_plan_cxx() {
  static const kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  return &plan;
}
