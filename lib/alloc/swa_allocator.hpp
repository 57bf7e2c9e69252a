// The allocator of swa models (SGLang's SWATokenToKVPoolAllocator): a full
// pool and a sliding-window pool, both page_size 1, and a mapping from each
// full slot to its window slot (0 = none). Public ids are full-pool slots.
#pragma once

#include <cstdint>
#include <vector>

#include "alloc/id_allocator.hpp"
#include "alloc/undo_log.hpp"
#include "util/status.hpp"

namespace kvp::alloc {

class SwaAllocator {
 public:
  SwaAllocator(int64_t full_slots, int64_t swa_slots, bool need_sort);

  IdAllocator& full() { return full_; }
  const IdAllocator& full() const { return full_; }
  IdAllocator& swa() { return swa_; }
  const IdAllocator& swa() const { return swa_; }
  const std::vector<int64_t>& mapping() const { return mapping_; }
  int64_t* mapping_data() { return mapping_.data(); }

  Status alloc(size_t n, int64_t* out);
  // Full slots without window slots (mapping 0): the tombstone part of a host-tier load-back.
  Status alloc_full_only(size_t n, int64_t* out);
  Status free(const int64_t* slots, size_t n);
  Status free_swa(const int64_t* slots, size_t n);
  // Frees full slots whose window slots are already gone (swa radix
  // tombstones): the mapping entries are cleared, and a window slot a stale
  // entry may still name is never freed.
  Status free_full_only(const int64_t* slots, size_t n);
  Status translate(const int64_t* slots, size_t n, int64_t* out) const;

  Status group_begin();
  Status group_end();
  void backup();
  void restore();
  void merge_and_sort();
  void clear();
  size_t check(std::string* report, size_t max_lines) const;

 private:
  Status check_full_slots(const int64_t* slots, size_t n) const;
  // Window slots of `slots` (skipping 0), mapping entries zeroed, window slots freed.
  Status release_window(const int64_t* slots, size_t n, bool bypass_group);
  void set_mapping(int64_t full, int64_t swa);

  IdAllocator full_;
  IdAllocator swa_;
  std::vector<int64_t> mapping_;  // index = full slot in [0, full_slots]
  UndoLog mapping_log_;
  std::vector<int64_t> scratch_;
  std::vector<int64_t> sorted_;  // free_swa's duplicate check
};

}  // namespace kvp::alloc
