#include "alloc/id_allocator.hpp"

#include <algorithm>
#include <cstring>

#include "alloc/ownership_check.hpp"

namespace kvp::alloc {

IdAllocator::IdAllocator(int64_t num_ids, GiveBackOrder order, bool need_sort, std::string what)
    : num_ids_(num_ids),
      order_(order),
      need_sort_(need_sort),
      what_(std::move(what)),
      free_(static_cast<size_t>(num_ids), &log_, UndoLog::Target::kFreeRing),
      release_(static_cast<size_t>(num_ids), &log_, UndoLog::Target::kReleaseRing),
      owned_(static_cast<size_t>(num_ids) + 1, 0) {
  clear();
}

void IdAllocator::clear() {
  log_.stop();
  in_group_ = false;
  group_.clear();
  std::fill(owned_.begin(), owned_.end(), 0);
  held_ = 0;
  release_.clear();
  free_.clear();  // refilled in place: clear() allocates nothing, so it cannot fail half-way
  for (int64_t i = 0; i < num_ids_; ++i) free_.push_back(i + 1);
}

Status IdAllocator::assign_lists(const std::vector<int64_t>& free, const std::vector<int64_t>& release) {
  if (in_group_ || log_.active()) return Status::invalid("the lists cannot be replaced inside a free group or snapshot");
  if (!release.empty() && !need_sort_) return Status::invalid("a release list needs need_sort");
  std::vector<uint8_t> listed(static_cast<size_t>(num_ids_) + 1, 0);
  for (const std::vector<int64_t>* list : {&free, &release}) {
    for (int64_t id : *list) {
      if (id < 1 || id > num_ids_ || listed[static_cast<size_t>(id)] != 0) {
        return Status::internal(what_ + " " + std::to_string(id) + " is out of range or listed twice");
      }
      listed[static_cast<size_t>(id)] = 1;
    }
  }
  // Storage is sized for every id: nothing below allocates.
  free_.clear();
  release_.clear();
  free_.push_back_range(free.data(), free.size());
  release_.push_back_range(release.data(), release.size());
  for (int64_t id = 1; id <= num_ids_; ++id) owned_[static_cast<size_t>(id)] = listed[static_cast<size_t>(id)] ^ 1;
  held_ = static_cast<size_t>(num_ids_) - free.size() - release.size();
  return Status::ok();
}

void IdAllocator::set_owned(int64_t id, bool owned) {
  uint8_t& bit = owned_[static_cast<size_t>(id)];
  log_.record(UndoLog::Target::kOwned, id, bit);
  bit = owned ? 1 : 0;
}

Status IdAllocator::take(size_t n, int64_t* out) {
  if (!can_take(n)) {
    return Status::out_of_memory("need " + std::to_string(n) + " " + what_ + "s, " + std::to_string(available()) +
                                 " available");
  }
  prepare(n, false);
  for (size_t i = 0; i < n; ++i) out[i] = free_.at(i);
  consume(n);
  return Status::ok();
}

void IdAllocator::prepare(size_t n, bool merge_hint) {
  const bool merge = need_sort_ && !release_.empty() && (merge_hint || n > free_.size());
  log_.reserve(n + (merge ? free_.size() + release_.size() : 0));  // consume() then cannot throw
  if (merge) merge_and_sort();
}

void IdAllocator::consume(size_t n) {
  if (log_.active()) {
    for (size_t i = 0; i < n; ++i) set_owned(free_.at(i), true);
  } else {  // nothing to record: the owned bytes straight from the ring's (at most two) parts
    const int64_t *a = nullptr, *b = nullptr;
    size_t na = 0, nb = 0;
    free_.parts(&a, &na, &b, &nb);
    uint8_t* owned = owned_.data();  // a local: a byte store could alias the vector's pointer
    const size_t from_a = std::min(n, na);
    for (size_t i = 0; i < from_a; ++i) owned[static_cast<size_t>(a[i])] = 1;
    for (size_t i = 0; i < n - from_a; ++i) owned[static_cast<size_t>(b[i])] = 1;
  }
  free_.pop_front(n);
  held_ += n;
}

void IdAllocator::untake(size_t n) {
  free_.unpop_front(n);
  for (size_t i = 0; i < n; ++i) set_owned(free_.at(i), false);
  held_ -= n;
}

Status IdAllocator::check_held(const int64_t* ids, size_t n, bool* ascending_out, bool* strictly_out) const {
  // One branch-free pass for the usual valid call (id 0 and out-of-range ids read
  // owned_[0], which is never set); the messages come from a second pass only on error.
  bool bad = false, ascending = true, strictly = true;  // ascending: the usual case (pages from a sorted free list)
  const int64_t limit = num_ids_;
  for (size_t i = 0; i < n; ++i) {
    const int64_t id = ids[i];
    const size_t at = id >= 1 && id <= limit ? static_cast<size_t>(id) : 0;
    bad |= owned_[at] == 0;
    if (i > 0) {
      ascending &= ids[i - 1] <= id;
      strictly &= ids[i - 1] < id;
    }
  }
  for (size_t i = 0; bad && i < n; ++i) {
    const int64_t id = ids[i];
    if (id == 0) return Status::invalid(what_ + " 0 is reserved and never handed out");
    if (id < 0 || id > num_ids_) {
      return Status::invalid(what_ + " " + std::to_string(id) + " is out of range [1, " + std::to_string(num_ids_) + "]");
    }
    if (owned_[static_cast<size_t>(id)] == 0) {
      return Status::invalid(what_ + " " + std::to_string(id) +
                             " is not allocated (freed twice, or never handed out)");
    }
  }
  *ascending_out = ascending;
  *strictly_out = strictly;
  return Status::ok();
}

Status IdAllocator::check_ids(const int64_t* ids, size_t n, bool collapse_repeats, std::vector<int64_t>* unique,
                              bool* in_place) const {
  bool ascending = true, strictly = true;
  KVPOOL_RETURN_IF_ERROR(check_held(ids, n, &ascending, &strictly));
  if (in_place != nullptr) *in_place = false;
  if (strictly) {  // no repeats, and the ids to give back are `ids` themselves, in order
    if (in_place != nullptr) {
      *in_place = true;
    } else if (unique != nullptr) {
      unique->assign(ids, ids + n);
    }
    return Status::ok();
  }
  if (ascending) {  // already in order: repeats are adjacent, no sort needed
    if (n > 0 && !collapse_repeats) {
      const int64_t* repeat = std::adjacent_find(ids, ids + n);
      if (repeat != ids + n) return Status::invalid(what_ + " " + std::to_string(*repeat) + " is listed twice in one free");
    }
    if (unique == nullptr) return Status::ok();
    unique->resize(n);
    unique->resize(static_cast<size_t>(std::unique_copy(ids, ids + n, unique->begin()) - unique->begin()));
    return Status::ok();
  }
  scratch_.assign(ids, ids + n);
  std::sort(scratch_.begin(), scratch_.end());
  auto repeat = std::adjacent_find(scratch_.begin(), scratch_.end());
  if (repeat != scratch_.end() && !collapse_repeats) {
    return Status::invalid(what_ + " " + std::to_string(*repeat) + " is listed twice in one free");
  }
  if (unique == nullptr) return Status::ok();
  if (order_ == GiveBackOrder::kPrependSorted || collapse_repeats) {
    scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
    *unique = scratch_;
  } else {
    unique->assign(ids, ids + n);  // FIFO keeps the caller's order
  }
  return Status::ok();
}

Status IdAllocator::check_give_back(const int64_t* ids, size_t n, bool collapse_repeats) const {
  // No copy of the ids: callers check right before a free that follows other changes.
  return check_ids(ids, n, collapse_repeats, nullptr, nullptr);
}

void IdAllocator::disown(const int64_t* ids, size_t n) {
  if (log_.active()) {
    for (size_t i = 0; i < n; ++i) set_owned(ids[i], false);
    return;
  }
  uint8_t* owned = owned_.data();  // a local: a byte store could alias the vector's pointer, reloaded per id
  for (size_t i = 0; i < n; ++i) owned[static_cast<size_t>(ids[i])] = 0;  // nothing to record
}

Status IdAllocator::give_back(const int64_t* ids, size_t n, bool collapse_repeats, bool bypass_group) {
  if (n == 0) return Status::ok();
  bool in_place = false;  // strictly ascending ids are given back as they are, without a copy
  KVPOOL_RETURN_IF_ERROR(check_ids(ids, n, collapse_repeats, &unique_, &in_place));
  if (in_place) {
    release_checked(ids, n, bypass_group);
  } else {
    release_checked(unique_.data(), unique_.size(), bypass_group);
  }
  return Status::ok();
}

Status IdAllocator::give_back_held(const int64_t* ids, size_t n) {
  if (n == 0) return Status::ok();
  release_checked(ids, n, false);
  return Status::ok();
}

void IdAllocator::release_checked(const int64_t* ids, size_t n, bool bypass_group) {
  // What can throw comes before the first change: the undo records (an owned bit
  // and a ring write per id) and the group's room.
  log_.reserve(2 * n);
  const bool grouped = in_group_ && !bypass_group;
  if (grouped && group_.capacity() - group_.size() < n) group_.reserve(std::max(group_.size() + n, 2 * group_.capacity()));
  disown(ids, n);
  held_ -= n;
  if (grouped) {
    group_.insert(group_.end(), ids, ids + n);
  } else {
    insert_run(ids, n);  // in the policy's order: check_ids sorts for kPrependSorted
  }
}

namespace {

// Whether ids[0, n) are first, first + 1, ... (unsigned arithmetic: no overflow). An OR
// of differences rather than a compare per id: it vectorises with SSE2 alone, which has
// no 64-bit compare.
bool consecutive(const int64_t* ids, size_t n) {
  const uint64_t first = static_cast<uint64_t>(ids[0]);
  uint64_t diff = 0;
  for (size_t i = 1; i < n; ++i) diff |= static_cast<uint64_t>(ids[i]) ^ (first + i);
  return diff == 0;
}

// Whether every byte of bits[0, n) equals `value` (vectorised, like the above).
bool all_bytes(const uint8_t* bits, size_t n, uint8_t value) {
  unsigned diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= bits[i] ^ value;
  return diff == 0;
}

}  // namespace

bool IdAllocator::give_back_ranges(const int64_t* ids, const size_t* ends, size_t runs) {
  // Worth it only for long runs: a block costs a few calls where an id costs a few
  // instructions (the 10,100 one-id runs of a tree of one-page nodes take the general path).
  const size_t n = ends[runs - 1];
  if (log_.active() || n < 8 * runs) return false;
  for (size_t r = 0, from = 0; r < runs; from = ends[r++]) {
    if (ends[r] == from || !consecutive(ids + from, ends[r] - from)) return false;
    if (ids[from] < 1 || ids[from] > num_ids_ - static_cast<int64_t>(ends[r] - from - 1)) return false;
  }
  // What can throw comes first: the group's room.
  if (in_group_ && group_.capacity() - group_.size() < n) group_.reserve(std::max(group_.size() + n, 2 * group_.capacity()));
  // Every id owned (1) and in no earlier block: each checked block is marked 2, and the
  // marks go back to 1 if a later block fails (a repeat or an id not held).
  uint8_t* owned = owned_.data();
  for (size_t r = 0, from = 0; r < runs; from = ends[r++]) {
    uint8_t* block = owned + ids[from];
    const size_t len = ends[r] - from;
    if (!all_bytes(block, len, 1)) {
      for (size_t q = 0, f = 0; q < r; f = ends[q++]) std::memset(owned + ids[f], 1, ends[q] - f);
      return false;
    }
    std::memset(block, 2, len);
  }
  for (size_t r = 0, from = 0; r < runs; from = ends[r++]) std::memset(owned + ids[from], 0, ends[r] - from);
  held_ -= n;
  // The placement of give_back_runs with no repeat and every run sorted: the runs'
  // concatenation, except that pushing runs one by one to the front (kPrependSorted)
  // leaves the last run first.
  if (in_group_) {
    group_.insert(group_.end(), ids, ids + n);
  } else if (order_ == GiveBackOrder::kAppend) {
    insert_run(ids, n);
  } else {
    for (size_t r = 0, from = 0; r < runs; from = ends[r++]) insert_run(ids + from, ends[r] - from);
  }
  return true;
}

Status IdAllocator::give_back_runs(const int64_t* ids, const size_t* ends, size_t runs, bool collapse_repeats,
                                   bool* ranges) {
  const size_t n = runs == 0 ? 0 : ends[runs - 1];
  if (ranges != nullptr) *ranges = false;
  if (n == 0) return Status::ok();
  if (give_back_ranges(ids, ends, runs)) {
    if (ranges != nullptr) *ranges = true;
    return Status::ok();
  }
  bool ascending = true, strictly = true;
  KVPOOL_RETURN_IF_ERROR(check_held(ids, n, &ascending, &strictly));  // range and owned; repeats below
  // Repeats: mark each id (owned 1 -> 2) and look for a second mark.
  size_t repeat = n;
  for (size_t i = 0; i < n; ++i) {
    uint8_t& bit = owned_[static_cast<size_t>(ids[i])];
    if (bit == 2 && repeat == n) repeat = i;
    bit = 2;
  }
  if (repeat < n && !collapse_repeats) {
    for (size_t i = 0; i < n; ++i) owned_[static_cast<size_t>(ids[i])] = 1;
    return Status::invalid(what_ + " " + std::to_string(ids[repeat]) + " is listed twice in one free");
  }
  // What can throw before the first change: the undo records and the group's room.
  log_.reserve(2 * n);
  if (in_group_ && group_.capacity() - group_.size() < n) group_.reserve(std::max(group_.size() + n, 2 * group_.capacity()));
  if (unique_.capacity() < n) unique_.reserve(n);
  if (log_.active()) return give_back_runs_recorded(ids, ends, runs);
  // Without a backup nothing is recorded, and the runs go in as one block: the ids not
  // freed yet (a mark of 2: first occurrences), each run sorted for kPrependSorted.
  // Runs pushed one by one to the back (kAppend, or a group) are their concatenation;
  // runs pushed one by one to the front (kPrependSorted) leave the last run first, so
  // the block holds the runs in reverse order.
  unique_.clear();
  for (size_t r = 0, from = 0; r < runs; from = ends[r++]) {
    const size_t start = unique_.size();
    for (size_t i = from; i < ends[r]; ++i) {
      uint8_t& bit = owned_[static_cast<size_t>(ids[i])];
      if (bit != 2) continue;  // a repeat, collapsed
      bit = 0;
      unique_.push_back(ids[i]);  // within the reserved room
    }
    if (order_ == GiveBackOrder::kPrependSorted && unique_.size() - start > 1 &&
        !std::is_sorted(unique_.begin() + static_cast<long>(start), unique_.end())) {
      std::sort(unique_.begin() + static_cast<long>(start), unique_.end());
    }
    if (order_ == GiveBackOrder::kPrependSorted && !in_group_ && unique_.size() - start > 1) {
      std::reverse(unique_.begin() + static_cast<long>(start), unique_.end());  // undone by the whole reverse below
    }
  }
  held_ -= unique_.size();
  if (in_group_) {
    group_.insert(group_.end(), unique_.begin(), unique_.end());
    return Status::ok();
  }
  if (order_ == GiveBackOrder::kPrependSorted) std::reverse(unique_.begin(), unique_.end());
  insert_run(unique_.data(), unique_.size());
  return Status::ok();
}

Status IdAllocator::give_back_runs_recorded(const int64_t* ids, const size_t* ends, size_t runs) {
  // With a backup running every write is recorded: give_back's placement, run by run.
  // The marks of 2 go back to 1 first, so that each record holds the owned bit's value.
  for (size_t i = 0; i < ends[runs - 1]; ++i) owned_[static_cast<size_t>(ids[i])] = 1;
  for (size_t r = 0, from = 0; r < runs; from = ends[r++]) {
    unique_.clear();
    for (size_t i = from; i < ends[r]; ++i) {
      const int64_t id = ids[i];
      if (owned_[static_cast<size_t>(id)] == 0) continue;  // a repeat, collapsed
      set_owned(id, false);
      unique_.push_back(id);  // within the reserved room
    }
    if (unique_.empty()) continue;
    held_ -= unique_.size();
    if (order_ == GiveBackOrder::kPrependSorted && !std::is_sorted(unique_.begin(), unique_.end())) {
      std::sort(unique_.begin(), unique_.end());
    }
    if (in_group_) {
      group_.insert(group_.end(), unique_.begin(), unique_.end());
    } else {
      insert_released(unique_);
    }
  }
  return Status::ok();
}

void IdAllocator::insert_released(std::vector<int64_t>& ids) {
  if (order_ == GiveBackOrder::kPrependSorted && !std::is_sorted(ids.begin(), ids.end())) {
    std::sort(ids.begin(), ids.end());  // in place: no allocation
  }
  insert_run(ids.data(), ids.size());
}

void IdAllocator::insert_run(const int64_t* ids, size_t n) {
  Ring& target = need_sort_ ? release_ : free_;
  if (order_ == GiveBackOrder::kAppend) {
    target.push_back_range(ids, n);
  } else {
    target.push_front_range(ids, n);
  }
}

Status IdAllocator::group_begin() {
  if (in_group_) return Status::invalid("a free group is already open");
  in_group_ = true;
  group_.clear();
  return Status::ok();
}

Status IdAllocator::group_end() {
  if (!in_group_) return Status::invalid("no free group is open");
  log_.reserve(group_.size());
  in_group_ = false;
  if (!group_.empty()) insert_released(group_);
  group_.clear();
  return Status::ok();
}

void IdAllocator::backup() {
  log_.start();
  saved_free_head_ = free_.head();
  saved_free_size_ = free_.size();
  saved_release_head_ = release_.head();
  saved_release_size_ = release_.size();
  saved_held_ = held_;
}

void IdAllocator::restore() {
  const auto& entries = log_.entries();
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    switch (it->target) {
      case UndoLog::Target::kFreeRing: free_.undo_write(it->index, it->old_value); break;
      case UndoLog::Target::kReleaseRing: release_.undo_write(it->index, it->old_value); break;
      case UndoLog::Target::kOwned: owned_[static_cast<size_t>(it->index)] = static_cast<uint8_t>(it->old_value); break;
      case UndoLog::Target::kMapping: break;  // not ours
    }
  }
  log_.clear_entries();
  free_.set_position(saved_free_head_, saved_free_size_);
  release_.set_position(saved_release_head_, saved_release_size_);
  held_ = saved_held_;
}

void IdAllocator::merge_and_sort() {
  if (release_.empty()) return;
  std::vector<int64_t> all = free_.to_vector();
  std::vector<int64_t> released = release_.to_vector();
  all.insert(all.end(), released.begin(), released.end());
  std::sort(all.begin(), all.end());
  log_.reserve(all.size());
  release_.clear();
  free_.assign(all);
}

size_t IdAllocator::check(std::string* report, size_t max_lines) const {
  OwnershipView view;
  view.what = what_;
  view.num_ids = num_ids_;
  free_.parts(&view.free_parts[0].data, &view.free_parts[0].size, &view.free_parts[1].data, &view.free_parts[1].size);
  release_.parts(&view.release_parts[0].data, &view.release_parts[0].size, &view.release_parts[1].data,
                 &view.release_parts[1].size);
  view.group = group_;
  view.owned = &owned_;
  view.held_counter = held_;
  return check_ownership(view, report, max_lines);
}

}  // namespace kvp::alloc
