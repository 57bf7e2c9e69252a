// Undo log for O(1) backup/restore: while a snapshot is active, every write to
// allocator state records the value it overwrote; restore replays the records
// backwards. Cost is proportional to the changes since the snapshot, not to
// the pool size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvp::alloc {

class UndoLog {
 public:
  // What an entry restores; the owner interprets `index`.
  enum class Target : uint8_t { kFreeRing, kReleaseRing, kOwned, kMapping };

  struct Entry {
    Target target;
    int64_t index;
    int64_t old_value;
  };

  bool active() const { return active_; }
  void start() {
    active_ = true;
    entries_.clear();
  }
  void stop() {
    active_ = false;
    entries_.clear();
  }
  // Makes room for `more` records (while active), so that the records of a change
  // can be written without allocating once the change has begun.
  void reserve(size_t more) {
    if (!active_ || entries_.capacity() - entries_.size() >= more) return;
    entries_.reserve(std::max(entries_.size() + more, 2 * entries_.capacity()));
  }
  void record(Target target, int64_t index, int64_t old_value) {
    if (active_) entries_.push_back({target, index, old_value});
  }
  // Entries newest first are undone by iterating in reverse; the log then restarts.
  const std::vector<Entry>& entries() const { return entries_; }
  void clear_entries() { entries_.clear(); }

 private:
  bool active_ = false;
  std::vector<Entry> entries_;
};

}  // namespace kvp::alloc
