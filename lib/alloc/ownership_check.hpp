// The ownership invariant of one id space, as a pure function of its state so
// that it can be tested on hand-made broken states: every id 1..N is exactly
// one of held, free, deferred (release list) or pending (open free group).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvp::alloc {

struct OwnershipView {
  std::string what;  // "slot", "page", "row", "mamba slot"
  int64_t num_ids = 0;
  std::vector<int64_t> free, release, group;
  // Free / deferred ids given in place (a ring's two contiguous parts), counted in
  // addition to `free` / `release`: the check copies nothing.
  struct Span {
    const int64_t* data = nullptr;
    size_t size = 0;
  };
  Span free_parts[2], release_parts[2];
  const std::vector<uint8_t>* owned = nullptr;  // index = id; [0] reserved
  size_t held_counter = 0;
};

// Appends one line per problem (at most `max_lines`) and returns the number of problems.
size_t check_ownership(const OwnershipView& view, std::string* report, size_t max_lines);

}  // namespace kvp::alloc
