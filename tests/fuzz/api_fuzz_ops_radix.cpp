// Ops of the prefix caches (radix_*, and the _mamba / _swa variants). The
// driver hands the tree only slots it owns; wrong arguments are ones the tree
// can detect (free, out-of-range or already-cached slots, stale handles).
#include <algorithm>
#include <climits>

#include "api_fuzz_driver.hpp"

namespace kvfuzz {

namespace {
constexpr kvpool_status INV = KVPOOL_ERR_INVALID_ARGUMENT;
constexpr kvpool_status UNS = KVPOOL_ERR_UNSUPPORTED;
constexpr kvpool_status BTS = KVPOOL_ERR_BUFFER_TOO_SMALL;
constexpr size_t kMaxNodes = 32;

// `t` cut or padded (with a fixed run) to exactly n tokens.
std::vector<int32_t> fit(std::vector<int32_t> t, size_t n) {
  for (size_t i = t.size(); i < n; ++i) t.push_back(500 + static_cast<int32_t>(i));
  t.resize(n);
  return t;
}
}  // namespace

void Driver::radix_match_op() {
  std::vector<int32_t> t = tokens(context_);
  std::vector<int64_t> slots(t.size() + 1, -7);
  size_t cap = in_.chance(8) ? in_.below(t.size() + 1) : t.size();
  const int32_t* arg = t.empty() || !in_.chance(32) ? t.data() : nullptr;
  size_t matched = 0;
  uint64_t node = 0;
  const char* key = extra_key();
  // A match splits nodes and reorders the LRU, neither of which the picture shows.
  const kvpool_status st = call("radix_match", {INV, UNS, BTS}, false, [&] {
    return radix_match(pool_, arg, t.size(), key, slots.data(), cap, &matched, &node);
  });
  if (st == KVPOOL_OK && matched == 0) root_ = node;
  if (st == KVPOOL_OK && nodes_.size() < kMaxNodes) nodes_.push_back(node);
}

void Driver::radix_insert_op() {
  std::vector<int64_t> slots = fam_.direct_alloc ? own_slots(4) : std::vector<int64_t>{};
  std::vector<int32_t> t = fit(tokens(context_), slots.size());
  const char* key = extra_key();
  if (in_.chance(4)) {
    switch (in_.below(4)) {
      case 0:  // a slot the library must refuse: free, reserved or out of range
        if (!slots.empty()) slots[in_.below(slots.size())] = wrong_slot();
        break;
      case 1:  // a slot the tree has already (from a fresh match of another key)
        if (!slots.empty()) {
          std::vector<int32_t> other = tokens(context_);
          std::vector<int64_t> found(other.size() + 1);
          size_t matched = 0;
          uint64_t node = 0;
          if (call("radix_match", {INV, UNS, BTS}, false, [&] {
                return radix_match(pool_, other.data(), other.size(), nullptr, found.data(), found.size(), &matched,
                                   &node);
              }) == KVPOOL_OK &&
              matched > 0) {
            slots[in_.below(slots.size())] = found[in_.below(matched)];
          }
        }
        break;
      case 2:  // not whole pages, or lengths that disagree
        if (!t.empty()) t.pop_back();
        break;
      default:
        slots.push_back(1);
        break;
    }
  }
  size_t prefix_len = 0;
  uint64_t node = 0;
  const int32_t priority = static_cast<int32_t>(in_.below(3)) - 1;
  const kvpool_status st = call("radix_insert", {INV, UNS}, true, [&] {
    return radix_insert(pool_, t.empty() ? nullptr : t.data(), t.size(), slots.empty() ? nullptr : slots.data(),
                        slots.size(), key, priority, &prefix_len, in_.chance(4) ? nullptr : &node);
  });
  if (st == KVPOOL_OK) {
    // The tree took slots[prefix_len:]; the driver keeps (owns) the duplicates before it.
    for (size_t i = prefix_len; i < slots.size(); ++i) {
      own_.erase(slots[i] / page_);
      windowless_.erase(slots[i]);
    }
    if (t.empty() && node != 0) root_ = node;  // an empty key ends at the root
    if (node != 0 && nodes_.size() < kMaxNodes) nodes_.push_back(node);
  }
}

void Driver::radix_lock_op() {
  const uint64_t node = !nodes_.empty() && !in_.chance(6) ? nodes_[in_.below(nodes_.size())] : wrong_node();
  if (call("radix_lock", {INV, UNS}, true, [&] { return radix_lock(pool_, node); }) == KVPOOL_OK && node != root_) {
    ++locks_[node];
  }
}

void Driver::radix_unlock_op() {
  std::vector<uint64_t> mine;
  for (const auto& [node, n] : locks_) {
    if (n > 0) mine.push_back(node);
  }
  uint64_t node;
  if (!mine.empty() && !in_.chance(6)) {
    node = mine[in_.below(mine.size())];
  } else if (mine.empty() && seqs_.empty() && !nodes_.empty() && in_.chance(2)) {
    node = nodes_[in_.below(nodes_.size())];  // nothing holds a lock: unlocking must be refused (but the root's)
  } else {
    node = wrong_node();
  }
  const kvpool_status st = call("radix_unlock", {INV, UNS}, true, [&] { return radix_unlock(pool_, node); });
  if (st == KVPOOL_OK && node != root_) {
    if (locks_[node] <= 0) fail("radix_unlock", "unlocked a node that no one had locked");
    --locks_[node];
  }
}

void Driver::radix_evict_op() {
  size_t n = in_.below(static_cast<size_t>(slot_limit_) + 2);
  if (in_.chance(16)) n = SIZE_MAX;
  size_t evicted = 0, swa_evicted = 0;
  switch (in_.below(3)) {
    case 0:
      call("radix_evict_swa", {INV, UNS}, true, [&] {
        return radix_evict_swa(pool_, n, in_.below(static_cast<size_t>(slot_limit_) + 2), &evicted, &swa_evicted);
      });
      break;
    case 1:
      call("radix_evict_mamba", {INV, UNS}, true, [&] { return radix_evict_mamba(pool_, in_.below(6), &evicted); });
      break;
    default:
      call("radix_evict", {INV, UNS}, true, [&] { return radix_evict(pool_, n, in_.chance(32) ? nullptr : &evicted); });
      break;
  }
}

void Driver::radix_events_op() {
  std::vector<radix_event> events(in_.below(8));
  std::vector<int32_t> toks(in_.below(64));
  size_t events_len = 0, tokens_len = 0;
  call("radix_take_events", {INV, UNS, BTS}, false, [&] {
    return radix_take_events(pool_, events.empty() ? nullptr : events.data(), events.size(), &events_len,
                             toks.empty() ? nullptr : toks.data(), toks.size(), &tokens_len);
  });
  size_t a = 0, b = 0, c = 0;
  call("radix_sizes", {INV, UNS}, false, [&] { return radix_sizes(pool_, &a, &b, &c); });
  call("radix_state_sizes", {INV, UNS}, false, [&] { return radix_state_sizes(pool_, &a, in_.chance(32) ? nullptr : &b); });
}

void Driver::radix_reset_op() {
  if (call("radix_reset", {INV, UNS}, true, [&] { return radix_reset(pool_); }) == KVPOOL_OK) {
    for (const auto& [node, n] : locks_) {
      if (n > 0) fail("radix_reset", "reset a tree with a locked node");
    }
    locks_.clear();
    nodes_.clear();
  }
}

void Driver::radix_match_mamba_op() {
  std::vector<int32_t> t = tokens(context_);
  std::vector<int64_t> slots(t.size() + 1, -7);
  int32_t cow = -1;
  switch (in_.below(5)) {
    case 0:
    case 1:
      if (!states_.empty()) cow = *std::next(states_.begin(), static_cast<long>(in_.below(states_.size())));
      break;
    case 2:
      cow = in_.chance(2) ? 0 : INT32_MAX;  // reserved / out of range
      break;
    case 3:  // a kvseq request's state (0 without requests): refused, it would be overwritten
      cow = request_state();
      break;
    default:
      break;
  }
  const bool request_cow = cow > 0 && states_.count(cow) == 0;
  size_t matched = 0;
  uint64_t node = 0;
  int32_t tree_state = -1;
  const char* key = extra_key();
  kvpool_status st = call("radix_match_mamba", {INV, UNS, BTS}, false, [&] {
    return radix_match_mamba(pool_, t.data(), t.size(), key, cow, slots.data(), t.size(), &matched, &node, &tree_state);
  });
  if (st == KVPOOL_OK && request_cow) fail("radix_match_mamba", "copied into a kvseq request's state slot");
  if (st != KVPOOL_OK) return;
  if (matched == 0) root_ = node;
  if (nodes_.size() < kMaxNodes) nodes_.push_back(node);
  if (tree_state > 0 && in_.chance(3)) {  // the tree's own state as the copy target: refused
    call("radix_match_mamba", {INV, UNS, BTS}, false, [&] {
      return radix_match_mamba(pool_, t.data(), t.size(), key, tree_state, slots.data(), t.size(), &matched, &node,
                               &tree_state);
    });
  }
}

void Driver::radix_insert_mamba_op() {
  std::vector<int64_t> slots = fam_.direct_alloc ? own_slots(6) : std::vector<int64_t>{};
  std::vector<int32_t> t = fit(tokens(context_), slots.size());
  int32_t state = states_.empty() ? -1 : *std::next(states_.begin(), static_cast<long>(in_.below(states_.size())));
  if (in_.chance(4)) {
    switch (in_.below(4)) {
      case 0: state = in_.chance(2) ? 0 : -1; break;
      case 1:  // a kvseq request's state: refused
        state = request_state();
        break;
      case 2:
        if (!slots.empty()) slots[in_.below(slots.size())] = wrong_slot();
        break;
      default:
        if (!t.empty()) t.pop_back();
        break;
    }
  }
  size_t prefix_len = 0;
  int32_t exist = -1;
  uint64_t node = 0;
  const char* key = extra_key();
  const kvpool_status st = call("radix_insert_mamba", {INV, UNS}, true, [&] {
    return radix_insert_mamba(pool_, t.empty() ? nullptr : t.data(), t.size(), slots.empty() ? nullptr : slots.data(),
                              slots.size(), key, state, &prefix_len, &exist, &node);
  });
  if (st == KVPOOL_OK) {
    for (size_t i = prefix_len; i < slots.size(); ++i) own_.erase(slots[i]);
    if (exist == 0) states_.erase(state);
    if (nodes_.size() < kMaxNodes) nodes_.push_back(node);
  }
}

void Driver::radix_insert_swa_op() {
  // The prefix comes from a fresh match (the tree's slots), the rest from the driver's own slots.
  std::vector<int32_t> t = tokens(context_);
  std::vector<int64_t> found(t.size() + 1);
  size_t matched = 0;
  uint64_t node = 0;
  const char* key = extra_key();
  if (call("radix_match", {INV, UNS, BTS}, false, [&] {
        return radix_match(pool_, t.data(), t.size(), key, found.data(), found.size(), &matched, &node);
      }) != KVPOOL_OK) {
    return;
  }
  if (matched == 0) root_ = node;
  std::vector<int64_t> mine = fam_.direct_alloc ? own_slots(6) : std::vector<int64_t>{};
  // Windowless own slots first: they must be the leading ones (swa_evicted_len).
  std::stable_partition(mine.begin(), mine.end(), [&](int64_t s) { return windowless_.count(s) > 0; });
  size_t leading = 0;
  while (leading < mine.size() && windowless_.count(mine[leading])) ++leading;
  std::vector<int64_t> slots(found.begin(), found.begin() + static_cast<long>(matched));
  slots.insert(slots.end(), mine.begin(), mine.end());
  t.resize(matched);
  std::vector<int32_t> more = fit(tokens(context_), mine.size());
  t.insert(t.end(), more.begin(), more.end());
  size_t prev = matched, evicted = leading > 0 ? matched + leading : 0;
  if (in_.chance(5)) {
    switch (in_.below(4)) {
      case 0: prev = matched + 1 + in_.below(3); break;
      case 1: evicted = t.size() + 1; break;
      case 2: evicted = in_.below(t.size() + 1); break;
      default:
        if (!mine.empty()) slots.back() = wrong_slot();
        break;
    }
  }
  size_t prefix_len = 0;
  const kvpool_status st = call("radix_insert_swa", {INV, UNS}, true, [&] {
    return radix_insert_swa(pool_, t.empty() ? nullptr : t.data(), t.size(), slots.empty() ? nullptr : slots.data(),
                            slots.size(), key, prev, evicted, &prefix_len, &node);
  });
  if (st == KVPOOL_OK) {
    // The caller owns none of slots[prev:] afterwards (taken or freed by the tree).
    for (size_t i = prev; i < slots.size(); ++i) {
      own_.erase(slots[i]);
      windowless_.erase(slots[i]);
    }
    if (t.empty() && node != 0) root_ = node;  // an empty key ends at the root
    if (node != 0 && nodes_.size() < kMaxNodes) nodes_.push_back(node);
  }
}

}  // namespace kvfuzz
