#include <fstream>
#include <sstream>
#include <string>

#include "backend/device.hpp"

namespace kvp::backend {

Status host_memory(MemoryInfo* out) {
  std::ifstream meminfo("/proc/meminfo");
  if (!meminfo) return Status::io("host memory: cannot read /proc/meminfo");
  uint64_t total_kib = 0, available_kib = 0;
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    fields >> key >> kib;
    if (key == "MemTotal:") total_kib = kib;
    if (key == "MemAvailable:") available_kib = kib;
  }
  if (total_kib == 0) return Status::io("host memory: /proc/meminfo has no MemTotal");
  out->total_bytes = total_kib * 1024;
  out->free_bytes = available_kib * 1024;
  return Status::ok();
}

}  // namespace kvp::backend
