// Argument helpers: plausible values from the driver's model, and wrong values
// that the library can (and must) detect.
#include <algorithm>
#include <climits>

#include "api_fuzz_driver.hpp"

namespace kvfuzz {

// Prompts share prefixes (a few "documents", each a fixed token run) so that
// matches, splits and reuse happen; the tail draws from a tiny alphabet.
std::vector<int32_t> Driver::tokens(size_t max_len) {
  const int32_t doc = static_cast<int32_t>(in_.below(4));
  const size_t shared = in_.below(std::min<size_t>(max_len, 48) + 1);
  const size_t tail = in_.below(std::min<size_t>(max_len - shared, 16) + 1);
  std::vector<int32_t> t;
  t.reserve(shared + tail);
  for (size_t i = 0; i < shared; ++i) t.push_back(doc * 1000 + static_cast<int32_t>(i));
  for (size_t i = 0; i < tail; ++i) t.push_back(static_cast<int32_t>(in_.below(3)) + 7);
  return t;
}

std::vector<int64_t> Driver::free_list_slots() {
  std::vector<int64_t> out;
  size_t len = 0;
  for (int32_t list : {KVALLOC_LIST_FREE, KVALLOC_LIST_RELEASE}) {
    std::vector<int64_t> ids(static_cast<size_t>(num_pages_) + 1);
    if (kvalloc_free_list(pool_, list, ids.data(), ids.size(), &len) != KVPOOL_OK) continue;
    for (size_t i = 0; i < len; ++i) out.push_back(ids[i] * page_);
  }
  return out;
}

int64_t Driver::wrong_slot() {
  switch (in_.below(7)) {
    case 0: return 0;  // reserved padding
    case 1: return -1 - static_cast<int64_t>(in_.below(3));
    case 2: return slot_limit_ + static_cast<int64_t>(in_.below(3));
    case 3: return in_.chance(2) ? INT64_MAX : INT64_MIN;
    case 4:
      if (!pending_.empty()) return *pending_.begin() * page_;  // freed in the open group: a double free
      [[fallthrough]];
    default: {
      const std::vector<int64_t> free = free_list_slots();  // a free page: never allocated or freed already
      if (free.empty()) return 0;
      return free[in_.below(free.size())] + static_cast<int64_t>(in_.below(static_cast<size_t>(page_)));
    }
  }
}

std::set<int32_t> Driver::seq_rows() {
  std::set<int32_t> out;
  for (uint64_t s : seqs_) {
    kvseq_info info = KVSEQ_INFO_INIT;
    if (kvseq_get_info(pool_, s, &info) == KVPOOL_OK && info.row >= 0) out.insert(info.row);
  }
  return out;
}

int32_t Driver::wrong_row() {
  switch (in_.below(4)) {
    case 0: return 0;
    case 1: return -1;
    case 2: return req_rows_ + static_cast<int32_t>(in_.below(3));
    default: {
      // A row in range that neither the driver nor a request holds (free, so rejected).
      const int32_t r = 1 + static_cast<int32_t>(in_.below(static_cast<size_t>(std::max(req_rows_ - 1, 1))));
      const std::set<int32_t> taken = seq_rows();
      if (taken.count(r) || std::find(rows_.begin(), rows_.end(), r) != rows_.end()) return 0;
      return r;
    }
  }
}

uint64_t Driver::wrong_seq() {
  switch (in_.below(3)) {
    case 0: return 0;
    case 1: return dead_.empty() ? UINT64_MAX : dead_[in_.below(dead_.size())];
    default: return (static_cast<uint64_t>(in_.u16()) << 32) | 0xdeadu;
  }
}

uint64_t Driver::wrong_node() {
  if (in_.chance(2)) return in_.chance(2) ? 0 : UINT64_MAX;
  return static_cast<uint64_t>(in_.u32()) * 0x9e3779b97f4a7c15ull;
}

std::vector<int64_t> Driver::own_slots(size_t max_pages) {
  std::vector<int64_t> pages;
  for (int64_t p : own_) {
    if (pending_.count(p) == 0) pages.push_back(p);
  }
  std::vector<int64_t> slots;
  size_t want = in_.below(std::min(max_pages, pages.size()) + 1);
  size_t start = pages.empty() ? 0 : in_.below(pages.size());
  for (size_t i = 0; i < want; ++i) {
    const int64_t p = pages[(start + i) % pages.size()];
    for (int64_t j = 0; j < page_; ++j) slots.push_back(p * page_ + j);
  }
  return slots;
}

int32_t Driver::request_state() {
  if (seqs_.empty()) return 0;
  const uint64_t seq = seqs_[in_.below(seqs_.size())];
  int32_t state = 0;
  if (kvseq_mamba_slot(pool_, seq, &state) != KVPOOL_OK) return 0;
  return state;
}

const char* Driver::extra_key() {
  switch (in_.below(8)) {
    case 0: return "lora-1";
    case 1: return "";
    default: return nullptr;
  }
}

void Driver::forget_pages_of(const int64_t* slots, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const int64_t p = slots[i] / page_;
    if (own_.erase(p) && group_open_) pending_.insert(p);
    windowless_.erase(slots[i]);
  }
}

void Driver::own_pages_of(const int64_t* slots, size_t n) {
  for (size_t i = 0; i < n; ++i) own_.insert(slots[i] / page_);
}

}  // namespace kvfuzz
