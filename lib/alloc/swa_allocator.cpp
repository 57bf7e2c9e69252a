#include "alloc/swa_allocator.hpp"

#include <algorithm>
#include <string>

namespace kvp::alloc {

SwaAllocator::SwaAllocator(int64_t full_slots, int64_t swa_slots, bool need_sort)
    : full_(full_slots, GiveBackOrder::kAppend, need_sort, "slot"),
      swa_(swa_slots, GiveBackOrder::kAppend, need_sort, "window slot"),
      mapping_(static_cast<size_t>(full_slots) + 1, 0) {
  // Sized once: no alloc or free of the two pools allocates after one pool changed.
  full_.reserve_scratch();
  swa_.reserve_scratch();
  scratch_.reserve(static_cast<size_t>(std::max(full_slots, swa_slots)));
  sorted_.reserve(static_cast<size_t>(full_slots));
}

void SwaAllocator::set_mapping(int64_t full, int64_t swa) {
  mapping_log_.record(UndoLog::Target::kMapping, full, mapping_[static_cast<size_t>(full)]);
  mapping_[static_cast<size_t>(full)] = swa;
}

Status SwaAllocator::alloc(size_t n, int64_t* out) {
  if (!full_.can_take(n) || !swa_.can_take(n)) {
    return Status::out_of_memory("need " + std::to_string(n) + " slots in both pools, " +
                                 std::to_string(full_.available()) + " full and " + std::to_string(swa_.available()) +
                                 " window slots available");
  }
  scratch_.resize(n);
  mapping_log_.reserve(n);  // set_mapping's undo records (while a backup is active)
  KVPOOL_RETURN_IF_ERROR(full_.take(n, out));
  KVPOOL_RETURN_IF_ERROR(swa_.take(n, scratch_.data()));
  for (size_t i = 0; i < n; ++i) set_mapping(out[i], scratch_[i]);
  return Status::ok();
}

Status SwaAllocator::alloc_full_only(size_t n, int64_t* out) {
  if (!full_.can_take(n)) {
    return Status::out_of_memory("need " + std::to_string(n) + " full slots, " + std::to_string(full_.available()) +
                                 " available");
  }
  return full_.take(n, out);  // their mapping entries are 0 already (a free clears them)
}

Status SwaAllocator::check_full_slots(const int64_t* slots, size_t n) const {
  for (size_t i = 0; i < n; ++i) {
    if (slots[i] < 0 || slots[i] > full_.num_ids()) {
      return Status::invalid("slot " + std::to_string(slots[i]) + " is out of range [1, " +
                             std::to_string(full_.num_ids()) + "]");
    }
  }
  return Status::ok();
}

Status SwaAllocator::release_window(const int64_t* slots, size_t n, bool bypass_group) {
  scratch_.clear();
  for (size_t i = 0; i < n; ++i) {
    const int64_t w = mapping_[static_cast<size_t>(slots[i])];
    if (w > 0) scratch_.push_back(w);
  }
  KVPOOL_RETURN_IF_ERROR(swa_.give_back(scratch_.data(), scratch_.size(), false, bypass_group));
  for (size_t i = 0; i < n; ++i) {
    if (mapping_[static_cast<size_t>(slots[i])] != 0) set_mapping(slots[i], 0);
  }
  return Status::ok();
}

Status SwaAllocator::free(const int64_t* slots, size_t n) {
  if (n == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(check_full_slots(slots, n));
  KVPOOL_RETURN_IF_ERROR(full_.check_give_back(slots, n, false));
  // Window slots of distinct owned full slots are distinct by the mapping invariant.
  KVPOOL_RETURN_IF_ERROR(full_.give_back(slots, n, false));
  return release_window(slots, n, false);
}

Status SwaAllocator::free_full_only(const int64_t* slots, size_t n) {
  if (n == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(check_full_slots(slots, n));
  KVPOOL_RETURN_IF_ERROR(full_.give_back(slots, n, false));
  for (size_t i = 0; i < n; ++i) {
    if (mapping_[static_cast<size_t>(slots[i])] != 0) set_mapping(slots[i], 0);
  }
  return Status::ok();
}

Status SwaAllocator::free_swa(const int64_t* slots, size_t n) {
  KVPOOL_RETURN_IF_ERROR(check_full_slots(slots, n));
  for (size_t i = 0; i < n; ++i) {
    if (!full_.owned(slots[i])) {
      return Status::invalid("slot " + std::to_string(slots[i]) + " is not allocated; only held slots have window slots");
    }
  }
  std::vector<int64_t>& sorted = sorted_;  // sized at creation: kvseq frees window slots of request after request
  sorted.assign(slots, slots + n);
  std::sort(sorted.begin(), sorted.end());
  auto repeat = std::adjacent_find(sorted.begin(), sorted.end());
  if (repeat != sorted.end()) return Status::invalid("slot " + std::to_string(*repeat) + " is listed twice");
  return release_window(slots, n, true);  // SGLang frees window slots at once, even inside a group
}

Status SwaAllocator::translate(const int64_t* slots, size_t n, int64_t* out) const {
  KVPOOL_RETURN_IF_ERROR(check_full_slots(slots, n));
  for (size_t i = 0; i < n; ++i) out[i] = mapping_[static_cast<size_t>(slots[i])];
  return Status::ok();
}

Status SwaAllocator::group_begin() {
  KVPOOL_RETURN_IF_ERROR(full_.group_begin());
  return swa_.group_begin();
}

Status SwaAllocator::group_end() {
  KVPOOL_RETURN_IF_ERROR(full_.group_end());
  return swa_.group_end();
}

void SwaAllocator::backup() {
  full_.backup();
  swa_.backup();
  mapping_log_.start();
}

void SwaAllocator::restore() {
  full_.restore();
  swa_.restore();
  const auto& entries = mapping_log_.entries();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) mapping_[static_cast<size_t>(it->index)] = it->old_value;
  mapping_log_.clear_entries();
}

void SwaAllocator::merge_and_sort() {
  full_.merge_and_sort();
  swa_.merge_and_sort();
}

void SwaAllocator::clear() {
  full_.clear();
  swa_.clear();
  mapping_log_.stop();
  std::fill(mapping_.begin(), mapping_.end(), 0);
}

size_t SwaAllocator::check(std::string* report, size_t max_lines) const {
  size_t problems = full_.check(report, max_lines);
  problems += swa_.check(report, max_lines > problems ? max_lines - problems : 0);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  std::vector<int64_t> mapped_by(static_cast<size_t>(swa_.num_ids()) + 1, 0);
  for (int64_t f = 1; f <= full_.num_ids(); ++f) {
    const int64_t w = mapping_[static_cast<size_t>(f)];
    if (w == 0) continue;
    if (!full_.owned(f)) complain("slot " + std::to_string(f) + " is free but still maps to window slot " + std::to_string(w));
    if (w < 0 || w > swa_.num_ids()) {
      complain("slot " + std::to_string(f) + " maps to invalid window slot " + std::to_string(w));
      continue;
    }
    if (!swa_.owned(w)) complain("slot " + std::to_string(f) + " maps to window slot " + std::to_string(w) + ", which is free");
    if (mapped_by[static_cast<size_t>(w)] != 0) {
      complain("window slot " + std::to_string(w) + " is double-owned by slots " +
               std::to_string(mapped_by[static_cast<size_t>(w)]) + " and " + std::to_string(f));
    }
    mapped_by[static_cast<size_t>(w)] = f;
  }
  for (int64_t w = 1; w <= swa_.num_ids(); ++w) {
    if (swa_.owned(w) && mapped_by[static_cast<size_t>(w)] == 0) {
      complain("window slot " + std::to_string(w) + " leaked: held but mapped by no slot");
    }
  }
  if (mapping_[0] != 0) complain("the reserved slot 0 maps to window slot " + std::to_string(mapping_[0]));
  return problems;
}

}  // namespace kvp::alloc
