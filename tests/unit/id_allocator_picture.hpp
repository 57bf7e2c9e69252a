// A test's picture of an IdAllocator's whole state (held count, free and release lists,
// every owned bit), for comparing two allocators or one before and after a call.
#pragma once

#include <cstdint>
#include <string>

#include "alloc/id_allocator.hpp"

namespace kvtest {

inline std::string picture(const kvp::alloc::IdAllocator& a) {
  std::string s = "held " + std::to_string(a.held()) + " free";
  for (int64_t id : a.free_list()) s += " " + std::to_string(id);
  s += " release";
  for (int64_t id : a.release_list()) s += " " + std::to_string(id);
  s += " owned";
  for (int64_t id = 1; id <= a.num_ids(); ++id) s += a.owned(id) ? "1" : "0";
  return s;
}

}  // namespace kvtest
