// Requests of hybrid_linear pools (SGLANG_SEMANTICS §1.11, §4.1): besides its
// KV slots each request owns one mamba state slot, holding the recurrent state
// after its last computed token.
//
// - begin matches up to the deepest cached node that has a state, locks it and
//   copies that state into a fresh slot of the request (copy-on-write: the tree's
//   state is never written by a request); without a hit the slot is zeroed.
// - The row allocated by the first extend maps to that slot (kvreq_mamba_slots).
// - The next extend of a request with computed tokens not in the tree yet
//   (chunked prefill) caches them first (SGLang's cache_unfinished_req): the
//   engine computed the earlier chunks by then, so the request's state is the
//   state after exactly those tokens. The tree gets a fork of it in a new slot
//   (the request keeps computing in its own), evicting one unlocked cached
//   state if no slot is free, and skipping this step's caching if none is
//   evictable either. Duplicates are freed, the row switches to the tree's
//   slots and the lock moves to the new node. The chunk being allocated is not
//   cached: its state exists only after the engine computed it.
// - finish with every computed token committed caches the tokens and hands the
//   request's slot to the tree (SGLang's no_buffer mode); the slot is freed if
//   the tree already had a state there, and whenever nothing is cached.
#pragma once

#include "cache/mamba_cache.hpp"
#include "mamba/mamba_pool.hpp"
#include "seq/sequences.hpp"

namespace kvp::seq {

class MambaSequences : public Sequences {
 public:
  // `cache` may be NULL (prefix cache kind "chunk" or "none").
  MambaSequences(alloc::PagedAllocator* allocator, req::RequestTable* table, mamba::MambaPool* states,
                 cache::MambaCache* cache);

  void accounting(size_t* available, size_t* evictable, size_t* protected_len, size_t* uncached,
                  size_t* capacity) const override;
  size_t check(std::string* report, size_t max_lines) const override;
  size_t check_attribution(std::string* report, size_t max_lines) const override;
  bool holds_state(int32_t slot) const override;

 protected:
  size_t tree_evictable() const override;
  Status tree_evict(size_t tokens) override;
  Status match_and_lock(Request* r) override;
  void reserve_rematch(Request* r) override;
  Status unlock(Request* r) override;
  Status on_new_row(Request* r) override;
  Status before_chunks(const std::vector<Request*>& reqs) override;
  Status after_chunk(Request* r) override;
  bool tree_owns(int64_t slot) const override;
  Status release(Request* r, bool insert, size_t committed) override;

 private:
  // Takes the host memory that caching `reqs` (their first `committed` tokens,
  // 0: every computed token) needs, before the first change of the caller.
  void reserve_inserts(const std::vector<Request*>& reqs, size_t committed);
  // Caches slots[0, computed) with a fork of the request's state (see above).
  Status cache_unfinished(Request* r);

  mamba::MambaPool* states_;
  cache::MambaCache* mcache_;
  cache::MambaMatch match_;  // cache_unfinished's match, its slots sized once to max_context_len
};

}  // namespace kvp::seq
