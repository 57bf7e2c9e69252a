// The checks every decoded call goes through, and the op loop.
#include "api_fuzz_driver.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "../support/pool_state.hpp"

namespace kvfuzz {

Driver::Driver(kvpool* pool, const Family& family, Input& in) : pool_(pool), fam_(family), in_(in) {
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  if (kvpool_get_plan(pool, &plan) != KVPOOL_OK) fail("kvpool_get_plan", kvpool_last_error());
  page_ = plan.page_size;
  num_pages_ = static_cast<int64_t>(plan.num_pages);
  slot_limit_ = (num_pages_ + 1) * page_;
  context_ = plan.max_context_len;
  req_rows_ = static_cast<int32_t>(plan.req_rows);
}

void Driver::fail(const char* what, const std::string& why) {
  std::fprintf(stderr, "kvpool api fuzz: %s: %s\n(previous call: %s)\n", what, why.c_str(), last_call_.c_str());
  std::abort();
}

std::string Driver::picture_now() const {
  kvtest::PoolStateOptions opts;
  opts.seqs = seqs_;
  opts.rows = rows_;
  opts.row_len = context_;
  std::string picture = kvtest::pool_state(pool_, opts);
  if (fam_.host) picture += host_picture();
  return picture;
}

const std::string& Driver::picture_before() {
  if (stale_) {
    picture_ = picture_now();
    stale_ = false;
  }
  return picture_;
}

void Driver::check_pool(const char* what) {
  // Without a report buffer the check skips its text summary; the report is asked for only on failure.
  if (kvpool_check(pool_, nullptr, 0) == KVPOOL_OK) return;
  char report[2048];
  kvpool_check(pool_, report, sizeof(report));
  fail(what, std::string("kvpool_check failed after the call:\n") + report);
}

// Without direct allocations, SGLang's identity must hold exactly (seq.h, kvseq_accounting).
void Driver::check_accounting() {
  size_t available = 0, evictable = 0, protected_len = 0, uncached = 0, capacity = 0;
  if (kvseq_accounting(pool_, &available, &evictable, &protected_len, &uncached, &capacity) != KVPOOL_OK) {
    fail("kvseq_accounting", kvpool_last_error());
  }
  // Slots freed inside an open free group are neither available nor held until the group ends
  // (check.h: free + pending + held == capacity), so they join the identity here.
  kvpool_stats stats = KVPOOL_STATS_INIT;
  if (kvpool_get_stats(pool_, &stats) != KVPOOL_OK) fail("kvpool_get_stats", kvpool_last_error());
  const size_t pending = static_cast<size_t>(stats.token_pending);
  if (!direct_ && available + pending + evictable + protected_len + uncached != capacity) {
    fail("kvseq_accounting", std::to_string(available) + " + " + std::to_string(pending) + " pending + " +
                                 std::to_string(evictable) + " + " + std::to_string(protected_len) + " + " +
                                 std::to_string(uncached) + " != " + std::to_string(capacity));
  }
}

kvpool_status Driver::call(const char* what, Allowed allowed, bool mutates, const std::function<kvpool_status()>& f) {
  const std::string& before = picture_before();  // stays valid: only a successful call marks it stale
  last_call_ = what;
  const kvpool_status st = f();
  static const bool trace = std::getenv("KVFUZZ_TRACE") != nullptr;  // replaying a finding: print every call
  if (trace) std::fprintf(stderr, "%-24s -> %d %s\n", what, st, st == KVPOOL_OK ? "" : kvpool_last_error());
  if (st != KVPOOL_OK) {
    if (st == KVPOOL_ERR_INTERNAL || std::find(allowed.begin(), allowed.end(), st) == allowed.end()) {
      fail(what, std::string("undocumented status ") + std::to_string(st) + " (" + kvpool_status_string(st) +
                     "): " + kvpool_last_error());
    }
    const std::string message = kvpool_last_error();  // taken now: the picture's own calls overwrite it
    if (message.empty()) fail(what, "failed without a message");
    last_error_ = message;
    const std::string after = picture_now();
    if (after != before) {
      fail(what, "the failed call (" + message + ") changed the pool:\n" +
                     kvtest::first_difference(before, after));
    }
  } else if (mutates || fam_.host) {
    // Host tier: the picture holds the known nodes' states, which a match changes (splits).
    stale_ = true;
    if (!own_call_) backup_dirty_ = true;
  }
  check_pool(what);
  return st;
}

void Driver::run() {
  // One op per leading byte; family-foreign ops still run (they must answer UNSUPPORTED).
  using Op = void (Driver::*)();
  static const Op ops[] = {
      &Driver::seq_begin,        &Driver::seq_extend,        &Driver::seq_decode,
      &Driver::seq_finish_abort, &Driver::seq_retract,       &Driver::seq_query,
      &Driver::seq_begin,        &Driver::seq_extend,        &Driver::seq_decode,
      &Driver::radix_match_op,   &Driver::radix_insert_op,   &Driver::radix_lock_op,
      &Driver::radix_unlock_op,  &Driver::radix_evict_op,    &Driver::radix_events_op,
      &Driver::radix_reset_op,   &Driver::radix_match_mamba_op, &Driver::radix_insert_mamba_op,
      &Driver::radix_insert_swa_op,
      &Driver::req_alloc,        &Driver::req_free,          &Driver::req_write,
      &Driver::req_read,         &Driver::req_write_batch,   &Driver::req_last_loc,
      &Driver::alloc_alloc,      &Driver::alloc_free,        &Driver::alloc_extend,
      &Driver::alloc_decode,     &Driver::alloc_swa,         &Driver::alloc_group,
      &Driver::alloc_backup_restore, &Driver::alloc_merge,   &Driver::mamba_alloc_free,
  };
  // Host tier: its ops follow the others, so every other op keeps its index (and the seeds their meaning).
  static const Op host_ops[] = {
      &Driver::host_stats_op,      &Driver::host_poll_op,       &Driver::host_stream_op,
      &Driver::host_load_set_op,   &Driver::host_wait_layer_op, &Driver::host_match_op,
      &Driver::host_match_op,      &Driver::host_load_back_op,  &Driver::host_load_back_op,
      &Driver::host_evict_op,      &Driver::host_node_state_op, &Driver::host_request_op,
      &Driver::host_request_op,
  };
  constexpr size_t kOps = sizeof(ops) / sizeof(ops[0]);
  constexpr size_t kHostOps = sizeof(host_ops) / sizeof(host_ops[0]);
  const size_t op_count = fam_.host ? kOps + kHostOps : kOps;
  constexpr size_t kMaxOps = 256;  // bounds one execution's time
  check_pool("kvpool_create");
  if (fam_.host) counters_ = host_stats();
  for (size_t n = 0; n < kMaxOps && !in_.done(); ++n) {
    const size_t op = in_.u8() % op_count;
    if (op < kOps) {
      (this->*ops[op])();
    } else {
      (this->*host_ops[op - kOps])();
    }
    if (!stale_ || n % 8 == 0) check_accounting();
  }
  // Tear down through the API as an engine would; everything must come back.
  for (uint64_t s : seqs_) {
    if (kvseq_abort(pool_, s) != KVPOOL_OK) fail("kvseq_abort (teardown)", kvpool_last_error());
  }
  seqs_.clear();
  if (fam_.host) {
    // With every lock the driver took undone, the whole tree can leave the device and then the host.
    for (const auto& [node, n] : locks_) {
      for (int i = 0; i < n; ++i) {
        if (radix_unlock(pool_, node) != KVPOOL_OK) fail("radix_unlock (teardown)", kvpool_last_error());
      }
    }
    locks_.clear();
    size_t done = 0, evicted = 0;
    if (kvhost_poll(pool_, 1, &done) != KVPOOL_OK) fail("kvhost_poll (teardown)", kvpool_last_error());
    if (radix_evict(pool_, SIZE_MAX, &evicted) != KVPOOL_OK) fail("radix_evict (teardown)", kvpool_last_error());
    if (device_tokens() != 0) fail("radix_evict (teardown)", "device tokens left in an unlocked tree");
    check_pool("radix_evict (teardown)");
    const kvhost_stats end = host_stats();  // before the teardown's host eviction
    if (std::getenv("KVFUZZ_TRACE") != nullptr) {
      std::fprintf(stderr, "host tier: %llu backups, %llu loads (%llu tokens), %llu refused, %llu load-evicted, %llu host-evicted\n",
                   static_cast<unsigned long long>(end.backups), static_cast<unsigned long long>(end.loads),
                   static_cast<unsigned long long>(end.load_tokens), static_cast<unsigned long long>(end.loads_refused),
                   static_cast<unsigned long long>(end.load_evicted_tokens),
                   static_cast<unsigned long long>(end.host_evicted_tokens));
    }
    if (kvhost_evict(pool_, SIZE_MAX, &evicted) != KVPOOL_OK) fail("kvhost_evict (teardown)", kvpool_last_error());
    const kvhost_stats s = host_stats();
    if (s.used_tokens != 0 || s.host_only_tokens != 0 || s.copies_in_flight != 0) {
      fail("kvhost_evict (teardown)", "host tokens left: used " + std::to_string(s.used_tokens) + ", host-only " +
                                          std::to_string(s.host_only_tokens) + ", copies in flight " +
                                          std::to_string(s.copies_in_flight));
    }
  }
  check_pool("teardown");
}

void run_api_program(const std::string& json, const Family& family, Input& in) {
  kvpool* pool = nullptr;
  if (kvpool_create(json.data(), json.size(), &pool) != KVPOOL_OK) {
    std::fprintf(stderr, "kvpool api fuzz: the target's config was refused: %s\n%s\n", kvpool_last_error(), json.c_str());
    std::abort();
  }
  {
    Driver driver(pool, family, in);
    driver.run();
  }
  kvpool_destroy(pool);
}

}  // namespace kvfuzz
