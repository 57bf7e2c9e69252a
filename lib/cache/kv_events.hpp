// KV events (SGLANG_SEMANTICS §3.11; docs/prefix_cache.md#kv-events): the kinds, one queued
// event, and the queue of the page-size-1 trees (swa, mamba), whose pages are single tokens.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cache/page_hash.hpp"

namespace kvp::cache {

// BlockStored / BlockRemoved: a page entered / left the device tier; HostStored /
// HostRemoved: a page's host-tier copy was made / dropped (host tier only).
enum class EventType : int32_t { kBlockStored = 0, kBlockRemoved = 1, kAllBlocksCleared = 2, kHostStored = 3, kHostRemoved = 4 };

// A queued event. A BlockStored event's tokens are [token_offset, token_offset +
// token_count) of the tree's flat token queue (one array for all events: no buffer
// per event), which starts empty after every drain.
struct KvEvent {
  EventType type;
  int64_t block_hash = 0;
  int64_t parent_hash = 0;
  bool has_parent = false;
  size_t token_offset = 0;
  size_t token_count = 0;
};

// The events of a page-size-1 tree, oldest first. push() allocates nothing within the
// room reserve() made, so a tree reserves before a call's first change.
class TokenEventQueue {
 public:
  const std::vector<KvEvent>& events() const { return events_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  void clear() {
    events_.clear();  // capacities kept: the next events reuse them
    tokens_.clear();
  }
  // Room for `more` events, each with one token.
  void reserve(size_t more) {
    if (events_.capacity() - events_.size() < more) events_.reserve(std::max(events_.size() + more, 2 * events_.capacity()));
    if (tokens_.capacity() - tokens_.size() < more) tokens_.reserve(std::max(tokens_.size() + more, 2 * tokens_.capacity()));
  }
  // The event of the token whose digest is `digest` (`parent`: the previous token's, null
  // under the root); BlockStored carries the token.
  void push(EventType type, const Digest* parent, const Digest& digest, int32_t token) {
    KvEvent e{type, event_id(digest), parent != nullptr ? event_id(*parent) : 0, parent != nullptr, tokens_.size(), 0};
    if (type == EventType::kBlockStored) {
      tokens_.push_back(token);
      e.token_count = 1;
    }
    events_.push_back(e);
  }
  void push_cleared() { events_.push_back(KvEvent{EventType::kAllBlocksCleared}); }

 private:
  std::vector<KvEvent> events_;
  std::vector<int32_t> tokens_;
};

}  // namespace kvp::cache
