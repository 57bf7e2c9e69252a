// Request id -> Request* for the lookups of every kvseq call: open addressing with
// linear probing, at most half full, Fibonacci hashing (ids are handed out in sequence:
// their low bits would make one long probe run, which every erase would walk). A
// lookup is about one probe in a table of 16 bytes per slot that stays in cache (an
// unordered_map find costs a modulo and two or three dependent loads). The Requests
// themselves stay in the owner's map (stable addresses); this only indexes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvp::seq {

struct Request;

class IdIndex {
 public:
  // Room for `n` ids in all, so that insert() does not allocate (may allocate itself).
  void reserve(size_t n) {
    if (2 * n <= slots_.size()) return;
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * n) {
      cap *= 2;
      ++bits;
    }
    std::vector<Slot> old(cap);
    old.swap(slots_);
    shift_ = 64 - bits;
    for (const Slot& s : old) {
      if (s.id != 0) place(s.id, s.req);
    }
  }
  // `id` (never 0) must be absent and reserve() must have made room.
  void insert(uint64_t id, Request* req) {
    place(id, req);
    ++size_;
  }
  Request* find(uint64_t id) const {
    if (slots_.empty() || id == 0) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = home(id);; i = (i + 1) & mask) {
      if (slots_[i].id == id) return slots_[i].req;
      if (slots_[i].id == 0) return nullptr;
    }
  }
  void erase(uint64_t id) noexcept {
    if (slots_.empty() || id == 0) return;
    const size_t mask = slots_.size() - 1;
    size_t hole = home(id);
    while (slots_[hole].id != id) {
      if (slots_[hole].id == 0) return;
      hole = (hole + 1) & mask;
    }
    // Backward-shift deletion: later entries of the probe run that may move up do.
    for (size_t j = (hole + 1) & mask; slots_[j].id != 0; j = (j + 1) & mask) {
      const size_t h = home(slots_[j].id);
      // Entry j may fill the hole unless its home lies cyclically in (hole, j].
      const bool stays = hole <= j ? (h > hole && h <= j) : (h > hole || h <= j);
      if (!stays) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t id = 0;
    Request* req = nullptr;
  };

 public:
  // find() for a loop of lookups that changes no entry (a decode step's batch): the
  // table's address, mask and shift are copied once, so that they stay in registers
  // where the loop's stores through Request pointers would make the compiler reload
  // them per lookup. Valid until the index changes.
  class Reader {
   public:
    explicit Reader(const IdIndex& index)
        : slots_(index.slots_.empty() ? kEmptySlots : index.slots_.data()),
          mask_(index.slots_.empty() ? 0 : index.slots_.size() - 1),
          byte_shift_((index.slots_.empty() ? 63 : index.shift_) - kSlotBits) {}
    // As IdIndex::find. Id 0 needs no test of its own: its probe ends at the first empty
    // slot (there always is one), whose id is 0 and whose request is NULL. The home slot
    // is tested first on its own: an id is almost always there (the table is at most half
    // full and ids are spread by the hash), and that test is then one compare.
    Request* find(uint64_t id) const {
      // The home's byte offset straight from the hash: its top log2(size) bits (one bit for
      // an index never reserved, whose two empty slots are kEmptySlots) times sizeof(Slot),
      // so that neither a mask nor a scaling of the index comes before the loads.
      const size_t at = static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> byte_shift_) & ~(sizeof(Slot) - 1);
      const Slot* home = reinterpret_cast<const Slot*>(reinterpret_cast<const char*>(slots_) + at);
      if (home->id == id) return home->req;
      for (size_t i = at / sizeof(Slot);; i = (i + 1) & mask_) {
        if (slots_[i].id == id || slots_[i].id == 0) return slots_[i].req;
      }
    }

   private:
    static constexpr int kSlotBits = 4;  // log2(sizeof(Slot))
    static_assert(sizeof(Slot) == size_t{1} << kSlotBits, "a slot is an id and a pointer");
    const Slot* slots_;
    size_t mask_;
    int byte_shift_;
  };

 private:
  size_t home(uint64_t id) const { return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_); }
  void place(uint64_t id, Request* req) {
    const size_t mask = slots_.size() - 1;
    size_t i = home(id);
    while (slots_[i].id != 0) i = (i + 1) & mask;
    slots_[i] = Slot{id, req};
  }
  static const Slot kEmptySlots[2];  // what a Reader of an index never reserved probes
  std::vector<Slot> slots_;      // a power of two long
  int shift_ = 64;           // 64 - log2(slots_.size())
  size_t size_ = 0;
};

inline const IdIndex::Slot IdIndex::kEmptySlots[2]{};

}  // namespace kvp::seq
