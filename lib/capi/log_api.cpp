// extern "C" entry point of log.h: the process-wide log callback (util/log.hpp).
#include <cstdint>
#include <cstring>

#include "capi/errors.hpp"
#include "kvpool/log.h"
#include "util/log.hpp"

extern "C" {

KVPOOL_API kvpool_status kvpool_set_log_callback(kvpool_log_callback callback, void* user_data, kvpool_log_level level) {
  // C callers may pass any int. Loading such a value as the enum type is undefined in C++
  // (UBSan: "not a valid value"), so the argument's representation is read as an int, as
  // kvpool_status_string does.
  static_assert(sizeof(kvpool_log_level) == sizeof(int32_t), "kvpool_log_level is int-sized");
  int32_t value = 0;
  std::memcpy(&value, &level, sizeof value);
  return kvp::capi::guarded("kvpool_set_log_callback",
                            [&] { return kvp::log::set_callback(callback, user_data, value); });
}

}  // extern "C"
