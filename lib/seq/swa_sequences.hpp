// Requests of swa pools (SGLANG_SEMANTICS §1.5, §4.2): every token has a
// full-pool slot and, while it is inside the request's sliding window, a
// window slot mapped from it.
//
// - begin matches the usable prefix (no tombstone, or at least `window` live
//   tokens ending the match) and window-locks it.
// - extend and decode first free the window slots of the request's own tokens
//   that no later token can attend to (positions before `computed - window`)
//   through the allocator's free_swa: the full slots stay. Then they evict
//   (full and window KV) when short, and allocate in both pools.
// - The next extend of a request with computed tokens not in the tree yet
//   (chunked prefill) caches them (SGLang's cache_unfinished_req), right after
//   freeing its out-of-window slots, with SGLang's swa insert: the tree frees
//   the request's duplicates, revives unlocked tombstones with its windowed
//   slots and keeps its windowless tokens as a tombstone, so only about the
//   last window of them stays window-locked. The row switches to the tree's
//   slots and the lock moves to the new node. Skipped for that step when the
//   insert would free window slots the request still attends to (a tombstone
//   another request locks lies there), or when the new lock would protect so
//   much cached window KV that the batch would no longer fit.
// - finish caches the committed tokens the same way; windowless tokens with
//   nothing windowed after them are freed rather than cached.
#pragma once

#include "alloc/swa_allocator.hpp"
#include "cache/swa_cache.hpp"
#include "seq/sequences.hpp"

namespace kvp::seq {

class SwaSequences : public Sequences {
 public:
  // `cache` may be NULL (prefix cache kind "chunk" or "none").
  SwaSequences(alloc::SwaAllocator* allocator, req::RequestTable* table, cache::SwaCache* cache, size_t window);

  Status extend(const uint64_t* ids, const int64_t* chunks, size_t n, int64_t* out, size_t out_len) override;
  Status decode(const uint64_t* ids, const int32_t* tokens, size_t n, int64_t* out) override;
  void accounting(size_t* available, size_t* evictable, size_t* protected_len, size_t* uncached,
                  size_t* capacity) const override;
  size_t check(std::string* report, size_t max_lines) const override;
  size_t check_attribution(std::string* report, size_t max_lines) const override;

 protected:
  Status match_and_lock(Request* r) override;
  void reserve_rematch(Request* r) override;
  Status unlock(Request* r) override;
  bool tree_owns(int64_t slot) const override;
  bool slot_held(int64_t slot) const override;
  Status free_slots(const std::vector<int64_t>& slots, size_t from, size_t to) override;
  // The swa allocator has no exact undo: the slots are freed (no leak; the free lists'
  // order may differ from before the call).
  void undo_allocation(const int64_t* out, size_t n) override;
  Status release(Request* r, bool insert, size_t committed) override;

 private:
  // Window slots the next computation of `r` no longer needs: [*from, *to).
  void out_of_window(const Request& r, size_t* from, size_t* to) const;
  // Frees out-of-window slots of `reqs`, caches their computed tokens (with
  // `cache`), evicts when short and allocates `total` slots, or fails with
  // OUT_OF_MEMORY having changed nothing.
  Status allocate(const std::vector<Request*>& reqs, size_t total, bool cache, int64_t* out);
  // Takes, before allocate's first change, the host memory that caching the
  // computed tokens of `reqs` (cache_unfinished) needs: the tree's inserts, and
  // the match, lock and unlock after each.
  void reserve_caching(const std::vector<Request*>& reqs);
  // Caches slots[0, computed) of `r` unless that could leave fewer than `need`
  // window slots free or evictable (see above).
  Status cache_unfinished(Request* r, size_t need);

  alloc::SwaAllocator* swa_;
  cache::SwaCache* scache_;
  size_t window_;
  cache::SwaMatch match_;  // cache_unfinished's match, its slots sized once to max_context_len
};

}  // namespace kvp::seq
