// Requests of hybrid_linear pools (SGLANG_SEMANTICS §1.11, §4.1): besides its
// KV slots each request owns one mamba state slot, holding the recurrent state
// after its last computed token.
//
// - begin matches up to the deepest cached node that has a state, locks it and
//   copies that state into a fresh slot of the request (copy-on-write: the tree's
//   state is never written by a request); without a hit the slot is zeroed.
// - The row allocated by the first extend maps to that slot (kvreq_mamba_slots).
// - finish with every computed token committed caches the tokens and hands the
//   request's slot to the tree (SGLang's no_buffer mode); the slot is freed if
//   the tree already had a state there, and whenever nothing is cached.
// - Nothing is cached during prefill: the state after a chunk exists only once
//   the engine computed it, after kvseq_extend returned.
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
  Status make_room(size_t tokens) override;
  Status match_and_lock(Request* r) override;
  Status unlock(Request* r) override;
  Status on_new_row(Request* r) override;
  Status after_chunk(Request* r) override;
  bool tree_owns(int64_t slot) const override;
  Status release(Request* r, bool insert, size_t committed) override;

 private:
  mamba::MambaPool* states_;
  cache::MambaCache* mcache_;
};

}  // namespace kvp::seq
