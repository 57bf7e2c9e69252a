// IdAllocator: hands out ids 1..N (id 0 is reserved) from a free list, with
// SGLang's policies, and knows at every moment who owns each id.
//
// It is the one free-list engine behind the token allocator (ids = slots),
// the paged allocator (ids = pages), each pool of the swa allocator, the
// request rows and the mamba state slots. The policies:
//   - take(n): from the front of the free list;
//   - give back (kAppend): each id to the back, in order (FIFO reuse);
//   - give back (kPrependSorted): sorted ascending, to the front (recently
//     freed first), duplicates collapsed (several slots of one page);
//   - need_sort: give-backs go to a release list that merge_and_sort() folds
//     into the free list, sorted, when an allocation needs it;
//   - free groups: give-backs are collected and released together.
// An owned bit per id rejects double frees, frees of ids never handed out,
// id 0 and out-of-range ids before anything changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alloc/ring.hpp"
#include "alloc/undo_log.hpp"
#include "util/status.hpp"

namespace kvp::alloc {

enum class GiveBackOrder { kAppend, kPrependSorted };

class IdAllocator {
 public:
  // `what` names the ids in messages ("slot", "page", "row", "mamba slot").
  IdAllocator(int64_t num_ids, GiveBackOrder order, bool need_sort, std::string what);

  int64_t num_ids() const { return num_ids_; }
  bool need_sort() const { return need_sort_; }
  const std::string& what() const { return what_; }

  size_t free_count() const { return free_.size(); }
  size_t available() const { return free_.size() + release_.size(); }
  size_t pending() const { return group_.size(); }
  size_t held() const { return held_; }
  bool owned(int64_t id) const { return id >= 1 && id <= num_ids_ && owned_[static_cast<size_t>(id)] != 0; }
  // The owned bits, index = id, for branch-free checks; [0] (the reserved id) is always 0.
  const uint8_t* owned_bits() const { return owned_.data(); }

  // --- allocation -----------------------------------------------------------
  // OK if `n` ids can be taken (merging deferred frees if needed), without changing anything.
  bool can_take(size_t n) const { return n <= available(); }
  // Takes `n` ids from the front into `out`; OUT_OF_MEMORY changes nothing.
  Status take(size_t n, int64_t* out);
  // For callers that read the free list before consuming it (paged extend/decode):
  // make sure the first `n` ids are in the free list proper, then peek/consume.
  void prepare(size_t n, bool merge_hint);
  int64_t peek(size_t i) const { return free_.at(i); }
  // The first `n` ids of the free list proper (n <= free_count()), in order, as one array:
  // the ring's own storage when they do not wrap around its end, else a copy in *scratch.
  // Valid until the free list or *scratch changes.
  const int64_t* front(size_t n, std::vector<int64_t>* scratch) const {
    const int64_t *a = nullptr, *b = nullptr;
    size_t na = 0, nb = 0;
    free_.parts(&a, &na, &b, &nb);
    if (na >= n) return a;
    scratch->resize(n);
    free_.copy_front(n, scratch->data());
    return scratch->data();
  }
  void consume(size_t n);
  // Undoes the last take/consume of `n` ids (a later step of the caller failed): they
  // return to the front of the free list in the order they were taken, not owned.
  // Nothing may have changed the free list since. Does not allocate.
  void untake(size_t n);

  // --- freeing --------------------------------------------------------------
  // Checks ids (range, id 0, owned, and repeats unless `collapse_repeats`) and
  // gives them back per the policy; on error nothing changes.
  Status give_back(const int64_t* ids, size_t n, bool collapse_repeats, bool bypass_group = false);
  // give_back() of ids that the caller has checked: every one in range, held, and the
  // ids strictly ascending (PagedAllocator::free checks its pages while collecting them).
  Status give_back_held(const int64_t* ids, size_t n);
  // As give_back() of each run in turn (run r = ids[ends[r-1], ends[r])), with one
  // check of all ids first and no sorting of runs already in order: the free list ends
  // up exactly as after one give_back per run. Ids repeated within the batch are
  // collapsed (`collapse_repeats`) or an error. Allocates nothing beyond give_back's
  // reserved scratch. *ranges (unless NULL) tells whether every run was a block of
  // consecutive ascending ids (then callers may clear their own marks per block).
  Status give_back_runs(const int64_t* ids, const size_t* ends, size_t runs, bool collapse_repeats,
                        bool* ranges = nullptr);
  // The same check without changing anything.
  Status check_give_back(const int64_t* ids, size_t n, bool collapse_repeats) const;
  // Sizes the scratch of give_back for freeing every id at once, so that no give
  // back ever allocates (for the small allocators that callers free after
  // changing others: request rows, mamba slots).
  void reserve_scratch() {
    scratch_.reserve(static_cast<size_t>(num_ids_));
    unique_.reserve(static_cast<size_t>(num_ids_));
  }

  Status group_begin();
  Status group_end();
  bool in_group() const { return in_group_; }

  // --- snapshots, reset -----------------------------------------------------
  void backup();
  void restore();
  bool backup_active() const { return log_.active(); }
  void merge_and_sort();
  void clear();

  // Replaces the lists (front first); every other id becomes owned. Each id may appear
  // once; on error nothing changes. No group or snapshot may be open.
  Status assign_lists(const std::vector<int64_t>& free, const std::vector<int64_t>& release);

  std::vector<int64_t> free_list() const { return free_.to_vector(); }
  std::vector<int64_t> release_list() const { return release_.to_vector(); }

  // Appends one line per broken invariant to `report`; returns the number of problems.
  size_t check(std::string* report, size_t max_lines) const;

 private:
  // Every id in range, not 0 and owned (the first offender's message otherwise); tells
  // whether the ids are ascending, and strictly.
  Status check_held(const int64_t* ids, size_t n, bool* ascending, bool* strictly) const;
  // Leaves the ids to give back in *unique unless it is NULL (only the check is wanted).
  // With `in_place`, strictly ascending ids are not copied: *in_place tells that the ids
  // to give back are `ids` themselves (the common paged free: one entry per page, sorted).
  Status check_ids(const int64_t* ids, size_t n, bool collapse_repeats, std::vector<int64_t>* unique,
                   bool* in_place) const;
  void set_owned(int64_t id, bool owned);
  // give_back's changes once the ids are checked and in the policy's order: disowned,
  // then into the group or the free/release list.
  void release_checked(const int64_t* ids, size_t n, bool bypass_group);
  // give_back_runs' placement while a backup records every write (ids marked 2 by it).
  Status give_back_runs_recorded(const int64_t* ids, const size_t* ends, size_t runs);
  // give_back_runs of runs that are each a block of consecutive ascending ids (a leaf's
  // slots at page 1, allocated together), with byte-block checks and writes instead of a
  // pass per id. Returns false, having changed nothing, where it does not apply (a run not
  // a block, a backup running) or the batch is bad: the general path then decides, and
  // words any error.
  bool give_back_ranges(const int64_t* ids, const size_t* ends, size_t runs);
  void disown(const int64_t* ids, size_t n);  // set_owned(id, false) of each, unrecorded without a backup
  // Into the free or release list per policy; sorts ids in place first (kPrependSorted).
  void insert_released(std::vector<int64_t>& ids);
  void insert_run(const int64_t* ids, size_t n);  // ids already in the policy's order

  int64_t num_ids_;
  GiveBackOrder order_;
  bool need_sort_;
  std::string what_;
  UndoLog log_;
  Ring free_;
  Ring release_;
  std::vector<uint8_t> owned_;  // index = id; [0] unused (reserved)
  size_t held_ = 0;
  bool in_group_ = false;
  std::vector<int64_t> group_;
  // Position of the rings and held count at backup time.
  size_t saved_free_head_ = 0, saved_free_size_ = 0, saved_release_head_ = 0, saved_release_size_ = 0,
         saved_held_ = 0;
  mutable std::vector<int64_t> scratch_;
  std::vector<int64_t> unique_;  // give_back's ids, reused: a free allocates only to grow it
};

}  // namespace kvp::alloc
