// Built only with -DKVPOOL_FAULT_INJECTION=ON (see fault_injection.hpp).
#ifndef KVPOOL_FAULT_INJECTION
#error "fault_injection.cpp is compiled only with KVPOOL_FAULT_INJECTION (lib/CMakeLists.txt)"
#endif
#include "util/fault_injection.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace kvp::inject {

Status device_call(const char* what) {
  static std::mutex mutex;
  static std::string selected;  // the variable's value the count belongs to
  static unsigned long long count = 0;
  std::lock_guard<std::mutex> lock(mutex);
  const char* env = std::getenv("KVPOOL_FAULT_DEVICE_CALL");
  const std::string value = env != nullptr ? env : "";
  if (value != selected) {
    selected = value;
    count = 0;
  }
  if (value.empty()) return Status::ok();
  const unsigned long long n = std::strtoull(value.c_str(), nullptr, 10);
  if (++count != n) return Status::ok();
  return Status::cuda(std::string(what) + ": injected failure (KVPOOL_FAULT_DEVICE_CALL=" + value + ")");
}

}  // namespace kvp::inject
