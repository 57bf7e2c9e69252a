#include "seq/mamba_sequences.hpp"

#include <algorithm>
#include <vector>

namespace kvp::seq {

MambaSequences::MambaSequences(alloc::PagedAllocator* allocator, req::RequestTable* table, mamba::MambaPool* states,
                               cache::MambaCache* cache)
    : Sequences(allocator, table, nullptr), states_(states), mcache_(cache) {
  // Matches right after an insert or a release: into a buffer sized once.
  if (mcache_ != nullptr) match_.slots.reserve(static_cast<size_t>(table_->max_context_len()));
}

namespace {

Status no_state_slot() { return Status::out_of_memory("no mamba state slot is free or evictable for the request"); }

}  // namespace

bool MambaSequences::tree_owns(int64_t slot) const { return mcache_ != nullptr && mcache_->owns_slot(slot); }

bool MambaSequences::holds_state(int32_t slot) const {
  for (const auto& [id, r] : requests_) {
    if (r.state == slot) return true;
  }
  return false;
}

size_t MambaSequences::tree_evictable() const { return mcache_ != nullptr ? mcache_->tree().full_evictable_size() : 0; }

Status MambaSequences::tree_evict(size_t tokens) {
  size_t evicted = 0;
  return mcache_->evict(tokens, &evicted);
}

Status MambaSequences::match_and_lock(Request* r) {
  r->cached = r->prefix_hit = r->host_hit = 0;
  r->slots.clear();
  r->node = 0;
  int32_t source = -1;
  cache::EventRoomHold held;
  if (mcache_ != nullptr) {
    r->slots.reserve(r->tokens.size());  // before the match: its split is a change
    // The KV events of the state eviction below: it follows the lock (and a load-back), so
    // its own reserve_events(0) would come after a change (found by
    // FaultSeq.HybridLinearHostTierWriteBackEvents on seed 112: the lock stayed).
    mcache_->tree().reserve_eviction_events();
    cache::MambaMatch& m = match_;
    KVPOOL_RETURN_IF_ERROR(mcache_->match(r->tokens.data(), r->tokens.size() - 1, r->extra_key, -1, &m));
    if (mcache_->host_tier() && !retracting_ && m.host_tokens > 0) {
      // A deeper state on a host-only node: its KV chain comes back (SGLang's init_load_back;
      // the load keeps the matched path pinned while it makes room), then the match ends there.
      // The request's own state slot is taken below, after the load: a free one, or an
      // evictable state other than host_node's, which the request then locks. A load moves
      // states only from evictable to free (the states of what it evicts), so with none
      // free and host_node's the only evictable one, a load that succeeds leaves no slot:
      // the begin fails here, before the load changes the tree and the host tier.
      if (states_->ids().available() == 0 && mcache_->tree().mamba_evictable_size() <= 1 &&
          mcache_->load_would_fit(m.host_node)) {
        return no_state_slot();
      }
      std::vector<int64_t> loaded_slots;
      size_t loaded = 0;
      KVPOOL_RETURN_IF_ERROR(mcache_->load_back(m.host_node, &loaded_slots, &loaded));
      // load_back reserved its eviction's and restore's events before either, and that room
      // bounds the state eviction's too: asked again after the load, it could grow the queue.
      held = mcache_->tree().hold_event_room();
      if (loaded > 0) {
        KVPOOL_RETURN_IF_ERROR(mcache_->match(r->tokens.data(), r->tokens.size() - 1, r->extra_key, -1, &m));
        r->host_hit = loaded;
      }
    }
    KVPOOL_RETURN_IF_ERROR(mcache_->tree().lock(m.node));  // also protects the state copied below
    r->node = m.node;
    r->slots.assign(m.slots.begin(), m.slots.end());
    source = m.mamba_slot;
  }
  // The request's own state slot; evict an unlocked cached state when none is free.
  if (states_->ids().available() == 0 && mcache_ != nullptr && mcache_->tree().mamba_evictable_size() > 0) {
    size_t evicted = 0;
    KVPOOL_RETURN_IF_ERROR(mcache_->evict_mamba(1, &evicted));
  }
  if (states_->ids().available() == 0) {
    KVPOOL_RETURN_IF_ERROR(unlock(r));
    r->slots.clear();
    r->node = 0;
    return no_state_slot();
  }
  if (source >= 0) {
    // The matched state, copied into a slot of the request's own: every byte is written, so
    // the slot is not zeroed first (a Qwen3-Next state is 72 MB).
    KVPOOL_RETURN_IF_ERROR(states_->fork(source, &r->state));
  } else {
    KVPOOL_RETURN_IF_ERROR(states_->alloc(&r->state, 1));  // zeroed
  }
  r->cached = r->prefix_hit = r->slots.size();
  return Status::ok();
}

void MambaSequences::reserve_rematch(Request* r) {
  if (mcache_ != nullptr) mcache_->tree().reserve_match(r->tokens.size());
  r->slots.reserve(r->tokens.size());
}

Status MambaSequences::unlock(Request* r) {
  if (mcache_ == nullptr) return Status::ok();
  return mcache_->tree().unlock(r->node);
}

Status MambaSequences::on_new_row(Request* r) {
  int32_t slot = 0;
  return states_->attach(&r->row, &r->state, 1, &slot);
}

Status MambaSequences::after_chunk(Request*) { return Status::ok(); }

void MambaSequences::reserve_inserts(const std::vector<Request*>& reqs, size_t committed) {
  std::vector<size_t> bounds;  // per request that caches: its tokens not in the tree yet
  for (const Request* r : reqs) {
    const size_t n = committed > 0 ? committed : r->slots.size();
    if (n <= r->cached) continue;
    bounds.push_back(n - r->cached);
    mcache_->tree().reserve_namespace(r->extra_key);
  }
  mcache_->tree().reserve_inserts(bounds.data(), bounds.size());
}

Status MambaSequences::before_chunks(const std::vector<Request*>& reqs) {
  if (mcache_ == nullptr) return Status::ok();
  // Before the first request's state is forked or a cached state evicted.
  reserve_inserts(reqs, 0);
  for (Request* r : reqs) {
    if (r->slots.size() > r->cached) KVPOOL_RETURN_IF_ERROR(cache_unfinished(r));
  }
  return Status::ok();
}

// Never lowers free + evictable KV slots: the request's duplicates of tokens it
// now locks in the tree are freed, its other tokens go from uncached to
// protected, and evict_mamba only moves evictable KV to free.
Status MambaSequences::cache_unfinished(Request* r) {
  const size_t n = r->slots.size();
  if (states_->ids().available() == 0 && mcache_->tree().mamba_evictable_size() > 0) {
    size_t evicted = 0;
    KVPOOL_RETURN_IF_ERROR(mcache_->evict_mamba(1, &evicted));
  }
  // No slot for the tree's copy: cache at a later extend or at finish instead.
  if (states_->ids().available() == 0) return Status::ok();
  int32_t fork = -1;
  KVPOOL_RETURN_IF_ERROR(states_->fork(r->state, &fork));
  size_t prefix = 0;
  bool exist = false;
  // A chunk of a prompt not fully computed: no write-policy hit (SGLang's chunked insert).
  const Status inserted =
      mcache_->insert(r->tokens.data(), n, r->slots.data(), fork, r->extra_key, &prefix, &exist, nullptr, false);
  if (!inserted.is_ok() || exist) {
    // Not taken (the node had a state already, or the insert was refused): the fork is ours to free.
    KVPOOL_RETURN_IF_ERROR(states_->free_unattached(&fork, 1));
    KVPOOL_RETURN_IF_ERROR(inserted);
  }
  KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, r->cached, prefix));  // another request cached these first
  cache::MambaMatch& m = match_;
  KVPOOL_RETURN_IF_ERROR(mcache_->match(r->tokens.data(), n, r->extra_key, -1, &m));
  if (m.slots.size() != n) {
    return Status::internal("the mamba radix tree lost tokens just inserted (" + std::to_string(m.slots.size()) + " of " +
                            std::to_string(n) + " match)");
  }
  std::copy(m.slots.begin() + static_cast<long>(r->cached), m.slots.end(), r->slots.begin() + static_cast<long>(r->cached));
  KVPOOL_RETURN_IF_ERROR(table_->write(r->row, r->cached, m.slots.data() + r->cached, n - r->cached));
  KVPOOL_RETURN_IF_ERROR(mcache_->tree().lock(m.node));  // before the unlock, so the path never becomes evictable
  KVPOOL_RETURN_IF_ERROR(unlock(r));
  r->node = m.node;
  r->cached = n;
  return Status::ok();
}

Status MambaSequences::release(Request* r, bool insert, size_t committed) {
  // The insert below must not allocate once the row is detached.
  if (insert && mcache_ != nullptr && committed == r->slots.size()) reserve_inserts({r}, committed);
  if (r->row >= 0) KVPOOL_RETURN_IF_ERROR(states_->detach(&r->row, 1, false, -1));
  size_t own_from = r->cached;  // slots[cached, computed) are the request's
  bool state_taken = false;
  // The state describes every computed token: only then can the tokens be cached with it.
  if (insert && mcache_ != nullptr && committed == r->slots.size() && committed > r->cached) {
    size_t prefix = 0;
    bool exist = false;
    KVPOOL_RETURN_IF_ERROR(
        mcache_->insert(r->tokens.data(), committed, r->slots.data(), r->state, r->extra_key, &prefix, &exist, nullptr));
    KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, r->cached, prefix));  // duplicates of cached tokens
    own_from = committed;
    state_taken = !exist;
  }
  KVPOOL_RETURN_IF_ERROR(free_slots(r->slots, own_from, r->slots.size()));
  if (!state_taken && r->state >= 0) KVPOOL_RETURN_IF_ERROR(states_->free_unattached(&r->state, 1));
  r->state = -1;
  if (r->row >= 0) KVPOOL_RETURN_IF_ERROR(table_->free(&r->row, 1));
  r->row = -1;
  return unlock(r);
}

void MambaSequences::accounting(size_t* available, size_t* evictable, size_t* protected_len, size_t* uncached,
                                size_t* capacity) const {
  Sequences::accounting(available, evictable, protected_len, uncached, capacity);
  *evictable = mcache_ != nullptr ? mcache_->tree().full_evictable_size() : 0;
  *protected_len = mcache_ != nullptr ? mcache_->tree().full_protected_size() : 0;
}

size_t MambaSequences::check(std::string* report, size_t max_lines) const {
  size_t problems = check_requests(report, max_lines, mcache_ != nullptr);
  auto complain = [&](const std::string& line) {
    if (problems++ < max_lines) *report += line + "\n";
  };
  for (const auto& [id, r] : requests_) {
    const std::string who = "request " + std::to_string(id) + ": ";
    if (r.state < 1 || !states_->ids().owned(r.state)) {
      complain(who + "mamba slot " + std::to_string(r.state) + " is not allocated");
      continue;
    }
    if (mcache_ != nullptr && mcache_->owns_state(r.state)) complain(who + "mamba slot " + std::to_string(r.state) + " belongs to the tree too");
    if (r.row >= 0 && states_->slot_of_row(r.row) != r.state) {
      complain(who + "row " + std::to_string(r.row) + " maps to mamba slot " + std::to_string(states_->slot_of_row(r.row)) +
               ", not " + std::to_string(r.state));
    }
  }
  return problems;
}

size_t MambaSequences::check_attribution(std::string* report, size_t max_lines) const {
  size_t problems = Sequences::check_attribution(report, max_lines);
  const auto& ids = states_->ids();
  std::vector<uint8_t> users(static_cast<size_t>(ids.num_ids()) + 1, 0);
  for (const auto& [id, r] : requests_) {
    if (r.state >= 1 && r.state <= ids.num_ids()) ++users[static_cast<size_t>(r.state)];
  }
  for (int64_t s = 1; s <= ids.num_ids(); ++s) {
    const int owners = users[static_cast<size_t>(s)] + (mcache_ != nullptr && mcache_->owns_state(static_cast<int32_t>(s)) ? 1 : 0);
    if (ids.owned(s) && owners != 1 && problems++ < max_lines) {
      *report += "mamba slot " + std::to_string(s) + (owners == 0 ? " leaked: held, but owned by no request and no tree node\n"
                                                                  : " is owned by " + std::to_string(owners) + " requests/tree nodes\n");
    }
  }
  return problems;
}

}  // namespace kvp::seq
