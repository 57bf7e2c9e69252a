// Fixed-capacity ring of ids with O(1) push_front, push_back and pop_front.
// A free list never holds an id twice, so capacity = number of ids suffices.
// Writes are reported to an optional UndoLog.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "alloc/undo_log.hpp"

namespace kvp::alloc {

class Ring {
 public:
  Ring(size_t capacity, UndoLog* log, UndoLog::Target target)
      : data_(capacity == 0 ? 1 : capacity), log_(log), target_(target) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t head() const { return head_; }
  // i-th element from the front.
  int64_t at(size_t i) const { return data_[wrap(head_ + i)]; }

  void push_back(int64_t id) { write(wrap(head_ + size_), id), ++size_; }
  void push_front(int64_t id) {
    head_ = head_ == 0 ? data_.size() - 1 : head_ - 1;
    write(head_, id);
    ++size_;
  }
  // The same as push_front of ids[n-1], ..., ids[0]: afterwards ids[0..n) lead the ring.
  // With no undo log running, at most two block copies.
  void push_front_range(const int64_t* ids, size_t n) {
    if (n == 0) return;
    if (log_ != nullptr && log_->active()) {
      for (size_t i = n; i-- > 0;) push_front(ids[i]);
      return;
    }
    const size_t cap = data_.size();
    const size_t start = (head_ + cap - n % cap) % cap;
    const size_t first = std::min(n, cap - start);  // up to the end of the storage
    std::memcpy(data_.data() + start, ids, first * sizeof(int64_t));
    if (first < n) std::memcpy(data_.data(), ids + first, (n - first) * sizeof(int64_t));
    head_ = start;
    size_ += n;
  }
  // The same as push_back of ids[0], ..., ids[n-1].
  void push_back_range(const int64_t* ids, size_t n) {
    if (n == 0) return;
    if (log_ != nullptr && log_->active()) {
      for (size_t i = 0; i < n; ++i) push_back(ids[i]);
      return;
    }
    const size_t cap = data_.size();
    const size_t start = wrap(head_ + size_);
    const size_t first = std::min(n, cap - start);
    std::memcpy(data_.data() + start, ids, first * sizeof(int64_t));
    if (first < n) std::memcpy(data_.data(), ids + first, (n - first) * sizeof(int64_t));
    size_ += n;
  }
  // The contents as at most two contiguous parts, front first.
  void parts(const int64_t** a, size_t* na, const int64_t** b, size_t* nb) const {
    *na = std::min(size_, data_.size() - head_);
    *a = data_.data() + head_;
    *nb = size_ - *na;
    *b = data_.data();
  }
  // Copies the first n elements to out.
  void copy_front(size_t n, int64_t* out) const {
    if (n == 0) return;
    const size_t first = std::min(n, data_.size() - head_);
    std::memcpy(out, data_.data() + head_, first * sizeof(int64_t));
    if (first < n) std::memcpy(out + first, data_.data(), (n - first) * sizeof(int64_t));
  }
  // Undoes pop_front(n) when nothing was written since: the popped entries are still stored.
  void unpop_front(size_t n) {
    head_ = (head_ + data_.size() - n % data_.size()) % data_.size();
    size_ += n;
  }
  void pop_front(size_t n) {
    head_ = n < data_.size() ? wrap(head_ + n) : (head_ + n) % data_.size();
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
    copy_front(size_, v.data());
    return v;
  }

  // Snapshot/restore support: the position fields and the raw slot writes.
  void set_position(size_t head, size_t size) {
    head_ = head;
    size_ = size;
  }
  void undo_write(int64_t pos, int64_t old_value) { data_[static_cast<size_t>(pos)] = old_value; }

 private:
  // i < 2 * capacity: one compare instead of a division.
  size_t wrap(size_t i) const { return i >= data_.size() ? i - data_.size() : i; }
  void write(size_t pos, int64_t id) {
    if (log_ != nullptr) log_->record(target_, static_cast<int64_t>(pos), data_[pos]);
    data_[pos] = id;
  }

  // Zeroed storage from calloc: a large ring's pages are not touched (faulted in) until
  // used, so a release list that a pool without need_sort never fills costs no memory.
  class Storage {
   public:
    explicit Storage(size_t n) : n_(n), p_(static_cast<int64_t*>(std::calloc(n, sizeof(int64_t)))) {
      if (p_ == nullptr) throw std::bad_alloc();
    }
    ~Storage() { std::free(p_); }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    size_t size() const { return n_; }
    int64_t* data() { return p_; }
    const int64_t* data() const { return p_; }
    int64_t& operator[](size_t i) { return p_[i]; }
    int64_t operator[](size_t i) const { return p_[i]; }

   private:
    size_t n_;
    int64_t* p_;
  };
  Storage data_;
  size_t head_ = 0;
  size_t size_ = 0;
  UndoLog* log_;
  UndoLog::Target target_;
};

}  // namespace kvp::alloc
