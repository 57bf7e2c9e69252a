#include "alloc/ownership_check.hpp"

namespace kvp::alloc {

size_t check_ownership(const OwnershipView& v, std::string* report, size_t max_lines) {
  size_t problems = 0;
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  const std::vector<uint8_t>& owned = *v.owned;
  if (owned.size() > 0 && owned[0] != 0) complain("the reserved " + v.what + " 0 is marked as held");
  std::vector<uint8_t> listed(static_cast<size_t>(v.num_ids) + 1, 0);
  auto count_ids = [&](const int64_t* ids, size_t n, const char* name) {
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (id < 1 || id > v.num_ids) {
        complain(v.what + " list '" + name + "' holds invalid id " + std::to_string(id));
        continue;
      }
      if (owned[static_cast<size_t>(id)] != 0) {
        complain(v.what + " " + std::to_string(id) + " is double-owned: held and in the " + name + " list");
      }
      if (listed[static_cast<size_t>(id)] != 0) {
        complain(v.what + " " + std::to_string(id) + " is double-owned: listed again in the " + name + " list");
      }
      listed[static_cast<size_t>(id)] = 1;
    }
  };
  auto count_list = [&](const std::vector<int64_t>& list, const char* name) { count_ids(list.data(), list.size(), name); };
  count_list(v.free, "free");
  for (const auto& part : v.free_parts) count_ids(part.data, part.size, "free");
  count_list(v.release, "release");
  for (const auto& part : v.release_parts) count_ids(part.data, part.size, "release");
  count_list(v.group, "free-group");
  const size_t free_count = v.free.size() + v.free_parts[0].size + v.free_parts[1].size;
  const size_t release_count = v.release.size() + v.release_parts[0].size + v.release_parts[1].size;
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
  const size_t accounted = free_count + release_count + v.group.size() + v.held_counter;
  if (accounted != static_cast<size_t>(v.num_ids)) {
    complain(v.what + " accounting: free " + std::to_string(free_count) + " + deferred " +
             std::to_string(release_count) + " + pending " + std::to_string(v.group.size()) + " + held " +
             std::to_string(v.held_counter) + " != capacity " + std::to_string(v.num_ids));
  }
  return problems;
}

}  // namespace kvp::alloc
