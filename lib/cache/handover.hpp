// A check shared by the prefix caches that take slots from their callers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "util/status.hpp"

namespace kvp::cache {

// Refuses a list of handed-over slots that names one twice. Sorts a copy in
// *scratch, whose capacity the caller sized once to the number of slots that can
// exist (a longer list must repeat one), so that the check never allocates.
inline Status check_distinct(const int64_t* slots, size_t n, std::vector<int64_t>* scratch) {
  if (n > scratch->capacity()) return Status::invalid("a slot is handed over twice");
  scratch->assign(slots, slots + n);
  std::sort(scratch->begin(), scratch->end());
  if (std::adjacent_find(scratch->begin(), scratch->end()) != scratch->end()) return Status::invalid("a slot is handed over twice");
  return Status::ok();
}

}  // namespace kvp::cache
