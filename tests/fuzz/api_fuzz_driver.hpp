// The shared part of the API fuzz targets: decodes a sequence of C API calls
// (kvreq_*, kvalloc_*, radix_*, kvseq_*, mamba) from the fuzz bytes and runs
// them on one pool, checking after every call that
//   1. kvpool_check() passes,
//   2. a failed call left the pool's public picture (tests/support/pool_state.hpp)
//      byte-identical,
//   3. a failure status is one the header documents for that call (never
//      KVPOOL_ERR_INTERNAL) and kvpool_last_error() says why.
// Any violation prints what happened and abort()s, which libFuzzer reports.
//
// Arguments are mostly plausible, so deep states are reached, and often wrong.
// The driver keeps a model of what *it* owns (slots, rows, state slots, locks):
// the library cannot tell one legitimate holder from another, so handing it
// another holder's slot (e.g. freeing a request's slot with kvalloc_free) is the
// caller's bug, not the library's, and the driver never does that. "Wrong"
// arguments are ones the library can detect: free or out-of-range slots,
// unknown ids, bad lengths, NULL arrays.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api_fuzz_input.hpp"
#include "kvpool/kvpool.h"

namespace kvfuzz {

// What a target tells the driver about the pool it created.
struct Family {
  bool swa = false;            // attention "swa": window pool, radix_*_swa
  bool mamba = false;          // attention "hybrid_linear": state slots, radix_*_mamba
  bool direct_alloc = true;    // may call kvalloc_* / kvpool_mamba_alloc (else kvseq/radix only)
  bool host = false;           // a host tier (host_cache): the kvhost_* ops join the op table
};

// Creates a pool from `json` (which must succeed: the targets only pick valid
// configs), decodes the rest of `in` into calls on it, and destroys it.
void run_api_program(const std::string& json, const Family& family, Input& in);

class Driver {
 public:
  Driver(kvpool* pool, const Family& family, Input& in);
  void run();

 private:
  using Allowed = std::initializer_list<kvpool_status>;

  // --- checks (api_fuzz_driver.cpp) ---
  // Runs `f` (one C call) under the three checks; `mutates` says whether success may change the picture.
  kvpool_status call(const char* what, Allowed allowed, bool mutates, const std::function<kvpool_status()>& f);
  std::string picture_now() const;        // pool_state() of the pool as it is
  const std::string& picture_before();  // the cached picture, retaken after a change
  [[noreturn]] void fail(const char* what, const std::string& why);
  void check_pool(const char* what);
  void check_accounting();

  // --- argument helpers (api_fuzz_args.cpp) ---
  std::vector<int32_t> tokens(size_t max_len);
  int64_t wrong_slot();                 // a slot kvalloc_free must reject
  int32_t wrong_row();                  // a row no one may hand out
  uint64_t wrong_seq();                 // an id kvseq_* must reject
  uint64_t wrong_node();                // a handle radix_* must reject
  std::vector<int64_t> own_slots(size_t max_pages);  // whole own pages (slots for page 1), in order
  std::vector<int64_t> free_list_slots();            // first slots of the pages now free
  std::set<int32_t> seq_rows();                      // rows held by live requests
  const char* extra_key();
  // The state slot of a live kvseq request (0 if none): radix_insert_mamba, kvpool_mamba_free and
  // the copy targets (radix_match_mamba's cow_slot, kvpool_mamba_copy's dst) refuse it, with or
  // without a row (corpus api_hybrid/rowless-request-state).
  int32_t request_state();
  void forget_pages_of(const int64_t* slots, size_t n);
  void own_pages_of(const int64_t* slots, size_t n);

  // --- ops (api_fuzz_ops_*.cpp) ---
  void req_alloc();
  void req_free();
  void req_write();
  void req_read();
  void req_write_batch();
  void req_last_loc();
  void alloc_alloc();
  void alloc_free();
  void alloc_extend();
  void alloc_decode();
  void alloc_swa();  // free_swa / translate_swa / swa_available
  void alloc_group();
  void alloc_backup_restore();
  void alloc_merge();
  void mamba_alloc_free();
  void radix_match_op();
  void radix_insert_op();
  void radix_lock_op();
  void radix_unlock_op();
  void radix_evict_op();
  void radix_events_op();
  void radix_reset_op();
  void radix_match_mamba_op();
  void radix_insert_mamba_op();
  void radix_insert_swa_op();
  void seq_begin();
  void seq_extend();
  void seq_decode();
  void seq_finish_abort();
  void seq_retract();
  void seq_query();
  void after_tree_change();  // a call that may free tree slots was made
  // Host tier (api_fuzz_ops_host.cpp). Each op also aims some calls at a pool without a
  // tier or at NULL (host_target), which must fail.
  void host_stats_op();
  void host_poll_op();
  void host_stream_op();
  void host_load_set_op();
  void host_wait_layer_op();
  void host_match_op();
  void host_load_back_op();
  void host_evict_op();
  void host_node_state_op();
  void host_request_op();  // begin, extend, finish in one op (fills the tree)
  kvpool* host_target();                   // pool_ mostly; else NULL or a pool without a host tier
  kvhost_stats host_stats();               // kvhost_get_stats of pool_ (must succeed)
  size_t device_tokens();                  // radix_sizes' total: the tree's device tokens
  std::string host_picture() const;        // the tier's part of picture_now()

  kvpool* pool_;
  Family fam_;
  Input& in_;
  int64_t page_ = 1;        // page_size
  int64_t slot_limit_ = 0;  // slots are in [0, slot_limit_)
  int64_t num_pages_ = 0;
  size_t context_ = 0;      // max_context_len
  int32_t req_rows_ = 0;

  // The model of what the driver itself holds.
  std::set<int64_t> own_;          // pages (slots when page_ is 1) from kvalloc_*
  std::set<int64_t> pending_;      // own pages freed inside the open free group
  std::set<int64_t> windowless_;   // swa: own slots whose window slot kvalloc_free_swa freed
  bool group_open_ = false;
  std::vector<int32_t> rows_;      // rows from kvreq_alloc
  std::set<int32_t> states_;       // mamba state slots from kvpool_mamba_alloc
  std::vector<uint64_t> seqs_;     // live kvseq ids
  std::vector<uint64_t> dead_;     // finished / aborted ids
  std::vector<uint64_t> nodes_;    // handles seen (may be stale)
  std::map<uint64_t, int> locks_;  // radix_lock calls not yet undone
  // The root's handle, once a match that found nothing returned it. Locking and unlocking the
  // root are no-ops that always succeed (as SGLang's inc/dec_lock_ref stop at the root): engines
  // lock whatever a match returned, the root included.
  uint64_t root_ = 0;
  bool direct_ = false;            // a kvalloc/mamba allocation succeeded (accounting identity no longer holds)
  int32_t load_set_ = 0;           // host tier: the load set kvhost_load_set must report
  kvhost_stats counters_{};        // host tier: the last counters seen (they never go down)

  // kvalloc_backup: the model at the snapshot; `dirty` once a call other than the
  // driver's own kvalloc_* changed the allocator (restoring would then revert a
  // request's or the tree's slots: the caller's bug, so the driver does not).
  uint64_t backup_token_ = 0;
  bool backup_dirty_ = true;
  std::set<int64_t> backup_own_, backup_windowless_;

  bool own_call_ = false;  // the call being made is one of the driver's own kvalloc_* (keeps a backup clean)
  std::string picture_;  // pool_state() of the current state, while !stale_
  bool stale_ = true;
  std::string last_call_;
  std::string last_error_;  // the message of the last call that failed (kvpool_last_error is overwritten by the checks)
};

}  // namespace kvfuzz
