#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "backend/device.hpp"

namespace kvp::backend {
namespace {

// The value in KiB of "<key> <n> kB" in /proc/meminfo's text, 0 if absent.
uint64_t field_kib(const char* text, const char* key) {
  const size_t len = std::strlen(key);
  for (const char* line = text; *line != '\0';) {
    if (std::strncmp(line, key, len) == 0) return std::strtoull(line + len, nullptr, 10);
    const char* next = std::strchr(line, '\n');
    if (next == nullptr) break;
    line = next + 1;
  }
  return 0;
}

}  // namespace

Status host_memory(MemoryInfo* out) {
  // Read with open/read into a stack buffer: nothing here allocates, so a failing heap
  // shows up as the allocation that failed, not as an unreadable /proc/meminfo.
  char text[16384];
  const int fd = ::open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io("host memory: cannot read /proc/meminfo");
  size_t used = 0;
  while (used < sizeof text - 1) {
    const ssize_t got = ::read(fd, text + used, sizeof text - 1 - used);
    if (got <= 0) break;
    used += static_cast<size_t>(got);
  }
  ::close(fd);
  text[used] = '\0';
  const uint64_t total_kib = field_kib(text, "MemTotal:");
  const uint64_t available_kib = field_kib(text, "MemAvailable:");
  if (total_kib == 0) return Status::io("host memory: /proc/meminfo has no MemTotal");
  out->total_bytes = total_kib * 1024;
  out->free_bytes = available_kib * 1024;
  return Status::ok();
}

}  // namespace kvp::backend
