// Small helpers shared by the unit tests.
#pragma once

#include <string>

#include "kvpool/kvpool.h"

namespace kvtest {

// Plans `json`; on failure returns the status and stores the message in *error.
inline kvpool_status plan(const std::string& json, kvpool_plan_info* out, std::string* error = nullptr) {
  kvpool_plan_info init = KVPOOL_PLAN_INFO_INIT;
  *out = init;
  kvpool_status st = kvpool_plan(json.data(), json.size(), out);
  if (error != nullptr) *error = st == KVPOOL_OK ? "" : kvpool_last_error();
  return st;
}

}  // namespace kvtest
