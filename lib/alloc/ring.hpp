// Fixed-capacity ring of ids with O(1) push_front, push_back and pop_front.
// A free list never holds an id twice, so capacity = number of ids suffices.
// Writes are reported to an optional UndoLog.
#pragma once

#include <cstdint>
#include <vector>

#include "alloc/undo_log.hpp"

namespace kvp::alloc {

class Ring {
 public:
  Ring(size_t capacity, UndoLog* log, UndoLog::Target target)
      : data_(capacity == 0 ? 1 : capacity, 0), log_(log), target_(target) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t head() const { return head_; }
  // i-th element from the front.
  int64_t at(size_t i) const { return data_[(head_ + i) % data_.size()]; }

  void push_back(int64_t id) { write((head_ + size_) % data_.size(), id), ++size_; }
  void push_front(int64_t id) {
    head_ = (head_ + data_.size() - 1) % data_.size();
    write(head_, id);
    ++size_;
  }
  // Undoes pop_front(n) when nothing was written since: the popped entries are still stored.
  void unpop_front(size_t n) {
    head_ = (head_ + data_.size() - n % data_.size()) % data_.size();
    size_ += n;
  }
  void pop_front(size_t n) {
    head_ = (head_ + n) % data_.size();
    size_ -= n;
  }
  void clear() { head_ = size_ = 0; }
  // Replace the contents (used by merge-and-sort and clear).
  void assign(const std::vector<int64_t>& ids) {
    head_ = 0;
    size_ = 0;
    for (int64_t id : ids) push_back(id);
  }
  std::vector<int64_t> to_vector() const {
    std::vector<int64_t> v(size_);
    for (size_t i = 0; i < size_; ++i) v[i] = at(i);
    return v;
  }

  // Snapshot/restore support: the position fields and the raw slot writes.
  void set_position(size_t head, size_t size) {
    head_ = head;
    size_ = size;
  }
  void undo_write(int64_t pos, int64_t old_value) { data_[static_cast<size_t>(pos)] = old_value; }

 private:
  void write(size_t pos, int64_t id) {
    if (log_ != nullptr) log_->record(target_, static_cast<int64_t>(pos), data_[pos]);
    data_[pos] = id;
  }

  std::vector<int64_t> data_;
  size_t head_ = 0;
  size_t size_ = 0;
  UndoLog* log_;
  UndoLog::Target target_;
};

}  // namespace kvp::alloc
