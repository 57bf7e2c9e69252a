// The request layer (kvseq_*): each request's tokens, row, slots and tree
// lock, and the transitions that move slot ownership between the allocator,
// the request and the prefix tree (SGLANG_SEMANTICS §1.14, §3.9, §3.10, §1.19).
//
// Ownership per request: slots[0, cached) belong to the tree (the request holds
// a lock on the node where they end); slots[cached, computed) belong to the
// request. Every transition frees or hands over exactly the request's part.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/paged_allocator.hpp"
#include "cache/prefix_cache.hpp"
#include "req/request_table.hpp"
#include "util/status.hpp"

namespace kvp::seq {

struct Request {
  std::vector<int32_t> tokens;
  std::string extra_key;
  int32_t row = -1;
  std::vector<int64_t> slots;  // one per computed token; mirrors the table row
  size_t cached = 0;           // leading tokens owned by the tree (page-aligned)
  size_t prefix_hit = 0;
  cache::NodeHandle node = 0;  // locked node (meaningful with a tree)
};

class Sequences {
 public:
  // `cache` may be NULL (prefix cache kind "chunk" or "none").
  Sequences(alloc::PagedAllocator* allocator, req::RequestTable* table, cache::PrefixCache* cache);

  Status begin(const int32_t* tokens, size_t n, const std::string& extra_key, uint64_t* id, size_t* cached);
  Status extend(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* out, size_t out_len);
  Status decode(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out);
  Status finish(uint64_t id, size_t committed);
  Status abort(uint64_t id);
  Status retract(uint64_t id, size_t* cached);

  const Request* find(uint64_t id) const;
  size_t active() const { return requests_.size(); }
  // Tokens held by requests beyond what the tree owns, counted in whole pages.
  size_t uncached_tokens() const;
  size_t check(std::string* report, size_t max_lines) const;
  // Marks every page a request owns (slots[cached, computed)).
  void mark_request_pages(std::vector<uint8_t>* pages) const;

 private:
  Status lookup(uint64_t id, Request** out);
  Status check_batch(const uint64_t* ids, size_t n, std::vector<Request*>* reqs);
  // Frees enough unlocked cached prefixes for `tokens` more slots, or fails without evicting.
  Status make_room(size_t tokens);
  void match_and_lock(Request* r);
  Status unlock(Request* r);
  Status free_slots(const std::vector<int64_t>& slots, size_t from, size_t to);
  Status cache_computed_pages(Request* r);
  Status release(Request* r, bool insert, size_t committed);

  alloc::PagedAllocator* allocator_;
  req::RequestTable* table_;
  cache::PrefixCache* cache_;
  std::unordered_map<uint64_t, Request> requests_;
  uint64_t next_id_ = 1;
};

}  // namespace kvp::seq
