#include "alloc/ownership_check.hpp"

namespace kvp::alloc {

size_t check_ownership(const OwnershipView& v, std::string* report, size_t max_lines) {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  const std::vector<uint8_t>& owned = *v.owned;
  if (owned.size() > 0 && owned[0] != 0) complain("the reserved " + v.what + " 0 is marked as held");
  std::vector<uint16_t> listed(static_cast<size_t>(v.num_ids) + 1, 0);
  auto count_list = [&](const std::vector<int64_t>& list, const char* name) {
    for (int64_t id : list) {
      if (id < 1 || id > v.num_ids) {
        complain(v.what + " list '" + name + "' holds invalid id " + std::to_string(id));
        continue;
      }
      if (owned[static_cast<size_t>(id)] != 0) {
        complain(v.what + " " + std::to_string(id) + " is double-owned: held and in the " + name + " list");
      }
      if (listed[static_cast<size_t>(id)]++ > 0) {
        complain(v.what + " " + std::to_string(id) + " is double-owned: listed again in the " + name + " list");
      }
    }
  };
  count_list(v.free, "free");
  count_list(v.release, "release");
  count_list(v.group, "free-group");
  size_t held = 0;
  for (int64_t id = 1; id <= v.num_ids; ++id) {
    const bool is_held = owned[static_cast<size_t>(id)] != 0;
    held += is_held ? 1 : 0;
    if (!is_held && listed[static_cast<size_t>(id)] == 0) {
      complain(v.what + " " + std::to_string(id) + " leaked: neither held nor free");
    }
  }
  if (held != v.held_counter) {
    complain(v.what + " count mismatch: " + std::to_string(held) + " held by the bitmap, " +
             std::to_string(v.held_counter) + " by the counter");
  }
  const size_t accounted = v.free.size() + v.release.size() + v.group.size() + v.held_counter;
  if (accounted != static_cast<size_t>(v.num_ids)) {
    complain(v.what + " accounting: free " + std::to_string(v.free.size()) + " + deferred " +
             std::to_string(v.release.size()) + " + pending " + std::to_string(v.group.size()) + " + held " +
             std::to_string(v.held_counter) + " != capacity " + std::to_string(v.num_ids));
  }
  return problems;
}

}  // namespace kvp::alloc
