// Fuzz target: arbitrary bytes as a configuration. Whatever the input, the
// library must not crash, must answer with a known status, and a pool that
// can be created must report the same plan as kvpool_plan().
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <string.h>  // memmem (GNU)

#include "kvpool/kvpool.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* json = reinterpret_cast<const char*>(data);
  kvpool_plan_info planned = KVPOOL_PLAN_INFO_INIT;
  kvpool_status plan_status = kvpool_plan(json, size, &planned);
  if (plan_status > KVPOOL_ERR_CHECK_FAILED) std::abort();

  // Creating allocates what the plan says; keep mutated configs to small pools so
  // the run's memory and time do not depend on the machine's RAM.
  if (plan_status == KVPOOL_OK &&
      (planned.total_memory_bytes > (uint64_t(256) << 20) || planned.num_pages + planned.swa_tokens > (1u << 20))) {
    return 0;
  }
  // The plan does not count the host tier (host_cache), whose size a mutated ratio or
  // size_bytes can push to all free memory less the headroom: such configs are parsed and
  // planned above but not created.
  static const char kHost[] = "\"host_cache\"";
  if (memmem(data, size, kHost, sizeof kHost - 1) != nullptr) return 0;
  kvpool* pool = nullptr;
  kvpool_status create_status = kvpool_create(json, size, &pool);
  if (create_status != KVPOOL_OK) {
    if (pool != nullptr) std::abort();  // failure leaves the handle NULL
    if (kvpool_last_error()[0] == '\0') std::abort();  // and always says why
    return 0;
  }
  if (plan_status != KVPOOL_OK) std::abort();  // create succeeded, so planning must too
  kvpool_plan_info from_pool = KVPOOL_PLAN_INFO_INIT;
  if (kvpool_get_plan(pool, &from_pool) != KVPOOL_OK) std::abort();
  if (std::memcmp(&from_pool, &planned, sizeof(planned)) != 0) std::abort();
  if (kvpool_check(pool, nullptr, 0) != KVPOOL_OK) std::abort();  // a fresh pool is consistent
  kvpool_destroy(pool);
  return 0;
}
