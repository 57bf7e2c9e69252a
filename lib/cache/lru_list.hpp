// Intrusive LRU list over arena-indexed tree nodes (SGLANG_SEMANTICS §4.0).
//
// The trees with two resources per node (MambaRadixTree, SwaRadixTree) keep
// one list per resource; a node embeds one LruLinks per list, so moves are
// O(1) and nothing is allocated per node.
//
// SGLang finds eviction victims by walking such a list from the LRU end and
// skipping locked (or internal) nodes, which costs O(skipped nodes) for every
// victim. Here each list also keeps an ordered index of the members the owner
// marks as candidates (e.g. "unlocked leaf"), keyed by list position, so the
// least recent candidate is found in O(log n). Positions are stamps from a
// per-list counter, taken on every move to the MRU end, so stamp order is list
// order.
//
// Host memory: the candidate index is a std::set, whose nodes are kept as
// spares (C++17 node handles) instead of being freed, and reserve() makes
// enough of them for every possible member beforehand. Toggling candidacy and
// moving a member then never allocate, so a tree call that changes the list
// after its first change cannot run out of host memory there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kvp::cache {

struct LruLinks {
  int32_t newer = -1;  // toward the MRU end
  int32_t older = -1;  // toward the LRU end
  uint64_t stamp = 0;  // list position, larger = more recent; 0 = not in the list
  bool candidate = false;
};

// kLinks is a pointer to the node's LruLinks member (it may be declared in a
// base class of Node).
template <class Node, auto kLinks>
class LruList {
 public:
  // `nodes` is the arena's storage; it may grow but must outlive the list.
  explicit LruList(std::vector<Node>* nodes) : nodes_(nodes) {}
  LruList(const LruList&) = delete;
  LruList& operator=(const LruList&) = delete;

  bool contains(int32_t id) const { return links(id).stamp != 0; }
  size_t size() const { return size_; }
  size_t candidate_count() const { return candidates_.size(); }
  int32_t lru() const { return tail_; }
  int32_t mru() const { return head_; }
  int32_t newer(int32_t id) const { return links(id).newer; }
  int32_t older(int32_t id) const { return links(id).older; }

  // Precondition: not in the list.
  void push_mru(int32_t id) {
    LruLinks& l = links(id);
    l.stamp = ++clock_;
    l.newer = -1;
    l.older = head_;
    l.candidate = false;
    if (head_ >= 0) {
      links(head_).newer = id;
    } else {
      tail_ = id;
    }
    head_ = id;
    ++size_;
  }

  // Precondition: in the list. Also drops the node from the candidates.
  void remove(int32_t id) {
    set_candidate(id, false);
    LruLinks& l = links(id);
    if (l.newer >= 0) {
      links(l.newer).older = l.older;
    } else {
      head_ = l.older;
    }
    if (l.older >= 0) {
      links(l.older).newer = l.newer;
    } else {
      tail_ = l.newer;
    }
    l = LruLinks{};
    --size_;
  }

  // Precondition: in the list. Candidacy is kept (re-keyed at the new position).
  void move_to_mru(int32_t id) {
    if (head_ == id) return;
    const bool was_candidate = links(id).candidate;
    remove(id);
    push_mru(id);
    set_candidate(id, was_candidate);
  }

  // Marks a member as an eviction candidate or not. Precondition for `on`: in the list.
  // Allocates nothing once reserve() covered every member.
  void set_candidate(int32_t id, bool on) {
    LruLinks& l = links(id);
    if (l.candidate == on) return;
    if (on) {
      add_candidate(Key{l.stamp, id});
    } else {
      auto nh = candidates_.extract(Key{l.stamp, id});
      if (spares_.size() < spares_.capacity()) spares_.push_back(std::move(nh));  // within capacity: no allocation
    }
    l.candidate = on;
  }

  // Makes sure `members` members can all be candidates without allocating: spare
  // index nodes for those that are not, and room to keep the nodes given back.
  void reserve(size_t members) {
    if (spares_.capacity() < members) spares_.reserve(members);
    while (candidates_.size() + spares_.size() < members) {
      // A placeholder key no member has (stamps start at 1), taken out again at once.
      spares_.push_back(candidates_.extract(candidates_.emplace(0, -1).first));
    }
  }

  // Least recently used candidate, -1 if none.
  int32_t oldest_candidate() const { return candidates_.empty() ? -1 : candidates_.begin()->second; }

  // Forgets all members (the arena resets the nodes' links itself).
  void clear() {
    head_ = tail_ = -1;
    size_ = 0;
    candidates_.clear();
  }

  // Structural self-check: links agree both ways, stamps fall from MRU to LRU,
  // the size and the candidate index match the members. Returns "" if sound.
  std::string verify() const {
    size_t count = 0, flagged = 0;
    int32_t prev = -1;
    uint64_t prev_stamp = UINT64_MAX;
    for (int32_t id = head_; id >= 0; id = links(id).older) {
      const LruLinks& l = links(id);
      if (++count > nodes_->size()) return "the list has a cycle";
      if (l.newer != prev) return "node " + std::to_string(id) + " has a wrong newer link";
      if (l.stamp == 0 || l.stamp >= prev_stamp) return "node " + std::to_string(id) + " is out of stamp order";
      if (l.candidate) {
        ++flagged;
        if (candidates_.count({l.stamp, id}) == 0) return "candidate " + std::to_string(id) + " is missing from the index";
      }
      prev = id;
      prev_stamp = l.stamp;
    }
    if (prev != tail_) return "the tail is not the last node";
    if (count != size_) return "size " + std::to_string(size_) + " but " + std::to_string(count) + " members";
    if (flagged != candidates_.size()) return "the candidate index holds non-members";
    return "";
  }

 private:
  LruLinks& links(int32_t id) { return (*nodes_)[static_cast<size_t>(id)].*kLinks; }
  const LruLinks& links(int32_t id) const { return (*nodes_)[static_cast<size_t>(id)].*kLinks; }

  using Key = std::pair<uint64_t, int32_t>;
  void add_candidate(const Key& key) {
    if (spares_.empty()) {
      candidates_.insert(key);  // not reserved: allocates
      return;
    }
    auto nh = std::move(spares_.back());
    spares_.pop_back();
    nh.value() = key;
    candidates_.insert(std::move(nh));
  }

  std::vector<Node>* nodes_;
  int32_t head_ = -1;
  int32_t tail_ = -1;
  size_t size_ = 0;
  uint64_t clock_ = 0;
  std::set<Key> candidates_;
  std::vector<typename std::set<Key>::node_type> spares_;  // unused index nodes (see reserve)
};

}  // namespace kvp::cache
