// extern "C" entry point of log.h: the process-wide log callback (util/log.hpp).
#include "capi/errors.hpp"
#include "kvpool/log.h"
#include "util/log.hpp"

extern "C" {

KVPOOL_API kvpool_status kvpool_set_log_callback(kvpool_log_callback callback, void* user_data, kvpool_log_level level) {
  return kvp::capi::guarded("kvpool_set_log_callback",
                            [&] { return kvp::log::set_callback(callback, user_data, level); });
}

}  // extern "C"
