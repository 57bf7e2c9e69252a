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

// device.h and kvpool_create_with_allocator: C linkage and plain C types too.
extern "C" kvpool_status kvpool_synchronize(kvpool *pool, void *stream);
extern "C" kvpool_status kvpool_move_kv_async(kvpool *pool, const int64_t *dst, size_t dst_len, const int64_t *src,
                                              size_t src_len, void *stream);
extern "C" kvpool_status kvpool_create_with_allocator(const char *json, size_t json_len,
                                                      const kvpool_allocator *allocator, kvpool **out);
static_assert(std::is_standard_layout<kvpool_allocator>::value, "kvpool_allocator must be a C struct");
static_assert(std::is_trivially_copyable<kvpool_allocator>::value, "kvpool_allocator must be a C struct");
// storage.h: kvpool_create_with_storage and its callback table.
extern "C" kvpool_status kvpool_create_with_storage(const char *json, size_t json_len, const kvstore_backend *backend,
                                                    kvpool **out);
static_assert(std::is_standard_layout<kvstore_backend>::value, "kvstore_backend must be a C struct");
static_assert(std::is_trivially_copyable<kvstore_backend>::value, "kvstore_backend must be a C struct");
static_assert(KVPOOL_ERR_DEVICE_FAULT == 11, "status codes never change");
