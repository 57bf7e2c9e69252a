// Ops of the request table (kvreq_*), the KV allocators (kvalloc_*) and the
// mamba state slots, with plausible and wrong arguments.
#include <algorithm>
#include <climits>

#include "api_fuzz_driver.hpp"

namespace kvfuzz {

namespace {
constexpr kvpool_status INV = KVPOOL_ERR_INVALID_ARGUMENT;
constexpr kvpool_status OOM = KVPOOL_ERR_OUT_OF_MEMORY;
constexpr kvpool_status UNS = KVPOOL_ERR_UNSUPPORTED;

// NULL instead of the data, now and then, for an array whose length stays non-zero.
template <class T>
T* maybe_null(Input& in, std::vector<T>& v) {
  return in.chance(24) ? nullptr : v.data();
}
}  // namespace

// --- kvreq_* -----------------------------------------------------------------

void Driver::req_alloc() {
  const size_t n = in_.below(4);
  std::vector<int32_t> rows(n + 1, -7);
  int32_t* out = n > 0 ? maybe_null(in_, rows) : rows.data();
  if (call("kvreq_alloc", {INV, OOM}, true, [&] { return kvreq_alloc(pool_, out, n); }) == KVPOOL_OK) {
    rows_.insert(rows_.end(), rows.begin(), rows.begin() + static_cast<long>(n));
  }
}

void Driver::req_free() {
  std::vector<int32_t> rows;
  const size_t k = in_.below(std::min<size_t>(rows_.size(), 3) + 1);
  const size_t start = rows_.empty() ? 0 : in_.below(rows_.size());
  for (size_t i = 0; i < k; ++i) rows.push_back(rows_[(start + i) % rows_.size()]);
  if (in_.chance(3)) {
    if (!rows.empty() && in_.chance(2)) {
      rows.push_back(rows.front());  // listed twice
    } else {
      rows.insert(rows.begin() + static_cast<long>(in_.below(rows.size() + 1)), wrong_row());
    }
  }
  int32_t* arg = rows.empty() ? nullptr : maybe_null(in_, rows);
  if (call("kvreq_free", {INV}, true, [&] { return kvreq_free(pool_, arg, rows.size()); }) == KVPOOL_OK) {
    for (int32_t r : rows) rows_.erase(std::find(rows_.begin(), rows_.end(), r));
  }
}

void Driver::req_write() {
  const int32_t row = !rows_.empty() && !in_.chance(6) ? rows_[in_.below(rows_.size())] : wrong_row();
  size_t start = in_.below(context_ + 1);
  if (in_.chance(12)) start = in_.chance(2) ? SIZE_MAX - 2 : context_;
  std::vector<int64_t> slots(in_.below(9));
  for (auto& s : slots) s = in_.chance(16) ? wrong_slot() : static_cast<int64_t>(in_.below(static_cast<size_t>(slot_limit_)));
  const int64_t* arg = slots.empty() ? nullptr : maybe_null(in_, slots);
  call("kvreq_write", {INV}, true, [&] { return kvreq_write(pool_, row, start, arg, slots.size()); });
}

void Driver::req_read() {
  int32_t row;
  const std::set<int32_t> taken = seq_rows();
  if (!rows_.empty() && in_.chance(2)) {
    row = rows_[in_.below(rows_.size())];
  } else if (!taken.empty() && in_.chance(2)) {
    row = *std::next(taken.begin(), static_cast<long>(in_.below(taken.size())));  // reading a request's row is fine
  } else {
    row = wrong_row();
  }
  size_t start = in_.below(context_ + 2);
  std::vector<int64_t> out(in_.below(17));
  int64_t* arg = out.empty() ? nullptr : maybe_null(in_, out);
  call("kvreq_read", {INV}, false, [&] { return kvreq_read(pool_, row, start, arg, out.size()); });
}

void Driver::req_write_batch() {
  const size_t batch = in_.below(4);
  std::vector<int32_t> rows;
  std::vector<int64_t> prefix(batch), seq(batch);
  int64_t prefix_sum = 0, extend_sum = 0;
  for (size_t i = 0; i < batch; ++i) {
    rows.push_back(!rows_.empty() && !in_.chance(8) ? rows_[in_.below(rows_.size())] : wrong_row());
    prefix[i] = static_cast<int64_t>(in_.below(std::min<size_t>(context_, 24) + 1));
    seq[i] = prefix[i] + static_cast<int64_t>(in_.below(9));
    if (in_.chance(16)) seq[i] = in_.chance(2) ? prefix[i] - 1 : static_cast<int64_t>(context_) + 1;
    if (in_.chance(32)) prefix[i] = -1;
    prefix_sum += std::max<int64_t>(prefix[i], 0);
    extend_sum += std::max<int64_t>(seq[i] - prefix[i], 0);
  }
  if (in_.chance(16) && !rows.empty()) rows.push_back(rows[0]);  // rows_len disagrees
  std::vector<int64_t> ps(static_cast<size_t>(prefix_sum) + (in_.chance(16) ? 1 : 0));
  std::vector<int64_t> es(static_cast<size_t>(extend_sum));
  for (auto& s : ps) s = static_cast<int64_t>(in_.below(static_cast<size_t>(slot_limit_)));
  for (auto& s : es) s = in_.chance(32) ? slot_limit_ : static_cast<int64_t>(in_.below(static_cast<size_t>(slot_limit_)));
  call("kvreq_write_batch", {INV}, true, [&] {
    return kvreq_write_batch(pool_, rows.empty() ? nullptr : rows.data(), rows.size(), prefix.data(), prefix.size(),
                             seq.data(), seq.size(), ps.empty() ? nullptr : maybe_null(in_, ps), ps.size(),
                             es.empty() ? nullptr : maybe_null(in_, es), es.size());
  });
}

void Driver::req_last_loc() {
  const size_t batch = in_.below(4);
  std::vector<int32_t> rows;
  std::vector<int64_t> prefix(batch);
  const std::set<int32_t> taken = seq_rows();
  for (size_t i = 0; i < batch; ++i) {
    if (!taken.empty() && in_.chance(3)) {
      rows.push_back(*std::next(taken.begin(), static_cast<long>(in_.below(taken.size()))));
    } else {
      rows.push_back(!rows_.empty() && !in_.chance(8) ? rows_[in_.below(rows_.size())] : wrong_row());
    }
    prefix[i] = in_.chance(24) ? static_cast<int64_t>(context_) + 1 : static_cast<int64_t>(in_.below(context_ + 1));
  }
  std::vector<int64_t> out(batch + (in_.chance(16) ? 1 : 0));
  call("kvreq_last_loc", {INV}, false, [&] {
    return kvreq_last_loc(pool_, rows.empty() ? nullptr : rows.data(), rows.size(), prefix.data(), prefix.size(),
                          out.empty() ? nullptr : out.data(), out.size());
  });
}

// --- kvalloc_* ---------------------------------------------------------------

void Driver::alloc_alloc() {
  if (!fam_.direct_alloc) return;
  size_t n = in_.below(4) * static_cast<size_t>(page_);
  if (in_.chance(8)) n = in_.chance(2) ? n + 1 : static_cast<size_t>(slot_limit_ + page_);  // not whole pages / too many
  std::vector<int64_t> slots(n + 1, -7);
  int64_t* out = n > 0 ? maybe_null(in_, slots) : slots.data();
  own_call_ = true;
  const kvpool_status st = call("kvalloc_alloc", {INV, OOM}, true, [&] { return kvalloc_alloc(pool_, out, n); });
  own_call_ = false;
  if (st == KVPOOL_OK) {
    own_pages_of(slots.data(), n);
    if (n > 0) direct_ = true;
  }
}

void Driver::alloc_free() {
  if (!fam_.direct_alloc) return;
  std::vector<int64_t> slots = own_slots(3);
  if (page_ > 1 && in_.chance(2)) {  // any slot of a page frees it: keep one per page
    std::vector<int64_t> one;
    for (size_t i = 0; i < slots.size(); i += static_cast<size_t>(page_)) {
      one.push_back(slots[i] + static_cast<int64_t>(in_.below(static_cast<size_t>(page_))));
    }
    slots = one;
  }
  if (in_.chance(3)) {
    if (!slots.empty() && in_.chance(2)) {
      slots.push_back(slots.back());  // twice in one call: an error for page 1, freed once when paged
    } else {
      slots.insert(slots.begin() + static_cast<long>(in_.below(slots.size() + 1)), wrong_slot());
    }
  }
  const int64_t* arg = slots.empty() ? nullptr : maybe_null(in_, slots);
  own_call_ = true;
  const kvpool_status st = call("kvalloc_free", {INV}, true, [&] { return kvalloc_free(pool_, arg, slots.size()); });
  own_call_ = false;
  if (st == KVPOOL_OK) {
    for (int64_t s : slots) {
      if (own_.erase(s / page_) && group_open_) pending_.insert(s / page_);
      windowless_.erase(s);
    }
  }
}

namespace {
// The last slot of a prefix of `len` tokens whose last page is `page` (the driver's own).
int64_t last_slot(int64_t page, int64_t page_size, int64_t len) { return page * page_size + (len - 1) % page_size; }
}  // namespace

void Driver::alloc_extend() {
  if (!fam_.direct_alloc) return;
  std::vector<int64_t> pages;
  for (int64_t p : own_) pages.push_back(p);
  const size_t batch = 1 + in_.below(3);
  std::vector<int64_t> prefix(batch), seq(batch), last(batch);
  int64_t total = 0;
  for (size_t i = 0; i < batch; ++i) {
    if (!pages.empty() && in_.chance(2)) {
      prefix[i] = 1 + static_cast<int64_t>(in_.below(40));
      last[i] = last_slot(pages[in_.below(pages.size())], page_, prefix[i]);
    } else {
      prefix[i] = 0;
      last[i] = -1;
    }
    seq[i] = prefix[i] + static_cast<int64_t>(in_.below(static_cast<size_t>(2 * page_ + 3)));
    if (in_.chance(10)) {
      switch (in_.below(6)) {
        case 0: prefix[i] = -1 - static_cast<int64_t>(in_.below(2)); break;
        case 1: seq[i] = prefix[i] - 1; break;
        case 2: last[i] += 1; break;              // breaks the page alignment rule (paged)
        case 3: last[i] = slot_limit_; break;     // out of range
        case 4: seq[i] = INT64_MAX - static_cast<int64_t>(in_.below(2)); break;
        default: last[i] = prefix[i] == 0 ? 0 : -1; break;
      }
    }
    total += std::max<int64_t>(0, std::min<int64_t>(seq[i] - prefix[i], 1 << 12));
  }
  size_t slots_len = static_cast<size_t>(std::min<int64_t>(total, 1 << 12));
  if (in_.chance(16)) slots_len += 1;
  std::vector<int64_t> out(slots_len + 1, -7);
  size_t seq_len = batch, last_len = batch;
  if (in_.chance(24)) (in_.chance(2) ? seq_len : last_len) -= 1;
  own_call_ = true;
  const kvpool_status st = call("kvalloc_extend", {INV, OOM, UNS}, true, [&] {
    return kvalloc_extend(pool_, prefix.data(), batch, seq.data(), seq_len, last.data(), last_len,
                          slots_len > 0 ? maybe_null(in_, out) : out.data(), slots_len);
  });
  own_call_ = false;
  if (st == KVPOOL_OK) {
    own_pages_of(out.data(), slots_len);
    if (slots_len > 0) direct_ = true;
  }
}

void Driver::alloc_decode() {
  if (!fam_.direct_alloc) return;
  std::vector<int64_t> pages;
  for (int64_t p : own_) pages.push_back(p);
  const size_t batch = 1 + in_.below(3);
  std::vector<int64_t> seq(batch), last(batch);
  for (size_t i = 0; i < batch; ++i) {
    if (!pages.empty() && !in_.chance(4)) {
      seq[i] = 2 + static_cast<int64_t>(in_.below(60));
      last[i] = last_slot(pages[in_.below(pages.size())], page_, seq[i] - 1);  // slot of token seq-2
    } else {
      seq[i] = 1;
      last[i] = -1;
    }
    if (in_.chance(10)) {
      switch (in_.below(4)) {
        case 0: seq[i] = static_cast<int64_t>(in_.below(2)) - 1; break;  // 0 or -1
        case 1: last[i] += 1; break;
        case 2: last[i] = -2; break;
        default: last[i] = slot_limit_ + 1; break;
      }
    }
  }
  size_t seq_len = batch, last_len = batch, slots_len = batch;
  if (in_.chance(24)) (in_.chance(2) ? last_len : slots_len) += 1;
  std::vector<int64_t> out(slots_len + 1, -7);
  own_call_ = true;
  const kvpool_status st = call("kvalloc_decode", {INV, OOM, UNS}, true, [&] {
    return kvalloc_decode(pool_, seq.data(), seq_len, last.data(), last_len, maybe_null(in_, out), slots_len);
  });
  own_call_ = false;
  if (st == KVPOOL_OK) {
    own_pages_of(out.data(), slots_len);
    direct_ = true;
  }
}

void Driver::alloc_swa() {
  const size_t what = in_.below(3);
  if (what == 0) {
    if (!fam_.direct_alloc) return;
    std::vector<int64_t> slots = own_slots(4);
    if (in_.chance(4)) slots.insert(slots.begin() + static_cast<long>(in_.below(slots.size() + 1)), wrong_slot());
    own_call_ = true;
    const kvpool_status st = call("kvalloc_free_swa", {INV, UNS}, true, [&] {
      return kvalloc_free_swa(pool_, slots.empty() ? nullptr : maybe_null(in_, slots), slots.size());
    });
    own_call_ = false;
    if (st == KVPOOL_OK) windowless_.insert(slots.begin(), slots.end());
  } else if (what == 1) {
    std::vector<int64_t> slots(in_.below(6));
    for (auto& s : slots) s = in_.chance(8) ? wrong_slot() : static_cast<int64_t>(in_.below(static_cast<size_t>(slot_limit_) + 1));
    std::vector<int64_t> out(slots.size() + (in_.chance(16) ? 1 : 0));
    call("kvalloc_translate_swa", {INV, UNS}, false, [&] {
      return kvalloc_translate_swa(pool_, slots.empty() ? nullptr : slots.data(), slots.size(),
                                   out.empty() ? nullptr : out.data(), out.size());
    });
  } else {
    size_t full = 0, window = 0, tokens = 0;
    call("kvalloc_swa_available", {INV, UNS}, false, [&] { return kvalloc_swa_available(pool_, &full, &window); });
    call("kvalloc_available", {INV, UNS}, false, [&] { return kvalloc_available(pool_, &tokens); });
  }
}

void Driver::alloc_group() {
  // Mostly the call that fits the state; sometimes the other one (must be rejected).
  const bool begin = group_open_ == in_.chance(6);
  own_call_ = true;
  if (begin) {
    if (call("kvalloc_free_group_begin", {INV}, true, [&] { return kvalloc_free_group_begin(pool_); }) == KVPOOL_OK) {
      group_open_ = true;
    }
  } else if (call("kvalloc_free_group_end", {INV}, true, [&] { return kvalloc_free_group_end(pool_); }) == KVPOOL_OK) {
    group_open_ = false;
    pending_.clear();
  }
  own_call_ = false;
}

void Driver::alloc_backup_restore() {
  own_call_ = true;
  if (in_.chance(2)) {
    uint64_t token = 0;
    if (call("kvalloc_backup", {INV}, true, [&] { return kvalloc_backup(pool_, &token); }) == KVPOOL_OK) {
      backup_token_ = token;
      backup_dirty_ = false;
      backup_own_ = own_;
      backup_windowless_ = windowless_;
    }
  } else {
    // Restoring a snapshot that predates allocations of requests or the tree would hand
    // their slots back to the allocator (the caller's bug): then only wrong tokens.
    const bool right = !backup_dirty_ && !in_.chance(6);
    const uint64_t token = right ? backup_token_ : backup_token_ + 1 + in_.below(2);
    if (call("kvalloc_restore", {INV}, true, [&] { return kvalloc_restore(pool_, token); }) == KVPOOL_OK) {
      if (!right) fail("kvalloc_restore", "accepted a token that is not the latest backup's");
      own_ = backup_own_;
      windowless_ = backup_windowless_;
    }
  }
  own_call_ = false;
}

void Driver::alloc_merge() {
  own_call_ = true;
  call("kvalloc_merge_and_sort", {INV}, true, [&] { return kvalloc_merge_and_sort(pool_); });
  own_call_ = false;
}

// --- mamba state slots ---------------------------------------------------------

void Driver::mamba_alloc_free() {
  if (!fam_.direct_alloc) return;
  if (in_.chance(2)) {
    const size_t n = in_.below(3);
    std::vector<int32_t> slots(n + 1, -7);
    const kvpool_status st = call("kvpool_mamba_alloc", {INV, OOM, UNS}, true, [&] {
      return kvpool_mamba_alloc(pool_, n > 0 ? maybe_null(in_, slots) : slots.data(), n);
    });
    if (st == KVPOOL_OK) {
      states_.insert(slots.begin(), slots.begin() + static_cast<long>(n));
      if (n > 0) direct_ = true;
    }
    if (st == KVPOOL_OK && n > 0 && in_.chance(3)) {
      // A copy into the new slot (from it, or from a kvseq request's state, which is only read),
      // or into a kvseq request's state: refused, it would overwrite the request's state.
      const int32_t req = request_state();
      const bool into_request = req > 0 && in_.chance(2);
      const int32_t src = into_request || req <= 0 ? slots[0] : req;
      const int32_t dst = into_request ? req : slots[0];
      const kvpool_status c = call("kvpool_mamba_copy", {INV, UNS}, false, [&] { return kvpool_mamba_copy(pool_, src, dst); });
      if (into_request && c == KVPOOL_OK) fail("kvpool_mamba_copy", "copied into a kvseq request's state slot");
      if (!into_request && c != KVPOOL_OK) fail("kvpool_mamba_copy", "refused a copy into an own slot");
    }
    return;
  }
  std::vector<int32_t> slots;
  for (int32_t s : states_) {
    if (in_.chance(2)) slots.push_back(s);
  }
  if (in_.chance(3)) {
    int32_t wrong = 0;
    switch (in_.below(4)) {
      case 0: wrong = -1; break;
      case 1: wrong = INT32_MAX; break;
      case 2:  // a kvseq request's state slot: refused
        wrong = request_state();
        break;
      default: wrong = slots.empty() ? 0 : slots.front(); break;  // listed twice
    }
    slots.push_back(wrong);
  }
  const kvpool_status st = call("kvpool_mamba_free", {INV, UNS}, true, [&] {
    return kvpool_mamba_free(pool_, slots.empty() ? nullptr : slots.data(), slots.size());
  });
  if (st == KVPOOL_OK) {
    for (int32_t s : slots) states_.erase(s);
  }
}

}  // namespace kvfuzz
