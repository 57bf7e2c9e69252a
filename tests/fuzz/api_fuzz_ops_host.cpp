// Ops of the host tier (kvhost_*, host.h), for pools with a host_cache section.
// Besides the driver's checks (kvpool_check, failure changes nothing, documented
// statuses), each op checks what the header promises about its results: the load
// set rotates, a match's device part is radix_match's, a load-back turns exactly
// the host part into device tokens and its counters add up (load_evicted_tokens is
// the device tokens the tree lost), host eviction frees host-only tokens only, the
// counters never go down, and CPU pools never have a copy in flight. Some calls go
// to NULL or to a pool without a host tier (both must fail), or pass stale, foreign
// or made-up node handles, out-of-range sets and layers, NULL outputs, short buffers
// and struct sizes of older callers.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "api_fuzz_driver.hpp"

namespace kvfuzz {

namespace {
constexpr kvpool_status INV = KVPOOL_ERR_INVALID_ARGUMENT;
constexpr kvpool_status UNS = KVPOOL_ERR_UNSUPPORTED;
constexpr kvpool_status BTS = KVPOOL_ERR_BUFFER_TOO_SMALL;
constexpr kvpool_status OOM = KVPOOL_ERR_OUT_OF_MEMORY;
constexpr size_t kMaxNodes = 32;
constexpr size_t kLoadBackThreshold = 10;  // host.h: fewer tokens are not loaded
constexpr int32_t kLayers = 2;             // api_fuzz_host.cpp's model

bool tracing() {
  static const bool trace = std::getenv("KVFUZZ_TRACE") != nullptr;  // as Driver::call
  return trace;
}

// A pool without a host tier, shared by every execution (every kvhost_* call on it fails,
// so it never changes). Never destroyed: it lives as long as the process.
kvpool* plain_pool() {
  static kvpool* pool = [] {
    const std::string json =
        R"({"model": {"num_layers": 2, "kv_heads": 1, "head_dim": 4}, "pool": {"kv_dtype": "f32", "page_size": 4,
            "max_total_tokens": 32, "max_context_len": 32}, "prefix_cache": {"kind": "radix"}})";
    kvpool* p = nullptr;
    if (kvpool_create(json.data(), json.size(), &p) != KVPOOL_OK) {
      std::fprintf(stderr, "kvpool api fuzz: the plain pool was refused: %s\n", kvpool_last_error());
      std::abort();
    }
    return p;
  }();
  return pool;
}

// The counters of kvhost_stats that only ever grow.
std::vector<uint64_t> growing(const kvhost_stats& s) {
  return {s.backups,     s.backup_tokens,       s.backups_skipped, s.backup_errors, s.loads,
          s.load_tokens, s.loads_refused,       s.host_evicted_tokens, s.bytes_to_host, s.bytes_to_device,
          s.load_evicted_tokens};
}
}  // namespace

kvpool* Driver::host_target() {
  switch (in_.below(24)) {
    case 0: return nullptr;
    case 1: return plain_pool();
    default: return pool_;
  }
}

kvhost_stats Driver::host_stats() {
  kvhost_stats s = KVHOST_STATS_INIT;
  if (kvhost_get_stats(pool_, &s) != KVPOOL_OK) fail("kvhost_get_stats", kvpool_last_error());
  if (s.copies_in_flight != 0) fail("kvhost_get_stats", "a copy in flight on a CPU pool");
  if (s.used_tokens > s.capacity_tokens || s.host_only_tokens > s.used_tokens) {
    fail("kvhost_get_stats", "host tokens: used " + std::to_string(s.used_tokens) + " of " +
                                 std::to_string(s.capacity_tokens) + ", host-only " + std::to_string(s.host_only_tokens));
  }
  const std::vector<uint64_t> now = growing(s), before = growing(counters_);
  for (size_t i = 0; i < now.size(); ++i) {
    if (now[i] < before[i]) fail("kvhost_get_stats", "counter " + std::to_string(i) + " went down");
  }
  counters_ = s;
  return s;
}

size_t Driver::device_tokens() {
  size_t evictable = 0, protected_len = 0, total = 0;
  if (radix_sizes(pool_, &evictable, &protected_len, &total) != KVPOOL_OK) fail("radix_sizes", kvpool_last_error());
  return total;
}

std::string Driver::host_picture() const {
  std::string out;
  kvhost_stats s = KVHOST_STATS_INIT;
  if (kvhost_get_stats(pool_, &s) != KVPOOL_OK) return "host: status\n";
  for (uint64_t v : growing(s)) out += std::to_string(v) + ' ';
  out = "host: capacity " + std::to_string(s.capacity_tokens) + " used " + std::to_string(s.used_tokens) + " host-only " +
        std::to_string(s.host_only_tokens) + " in flight " + std::to_string(s.copies_in_flight) + " counters " + out + "\n";
  int32_t set = -1;
  if (kvhost_load_set(pool_, &set) == KVPOOL_OK) out += "load set " + std::to_string(set) + "\n";
  for (uint64_t node : nodes_) {
    int32_t on_device = -1, on_host = -1;
    size_t tokens = 0;
    const kvpool_status st = kvhost_node_state(pool_, node, &on_device, &on_host, &tokens);
    out += "node " + std::to_string(node) + ": ";
    out += st == KVPOOL_OK ? std::to_string(on_device) + " " + std::to_string(on_host) + " " + std::to_string(tokens)
                           : "status " + std::to_string(st);
    out += "\n";
  }
  return out;
}

void Driver::host_stats_op() {
  kvpool* target = host_target();
  kvhost_stats s = KVHOST_STATS_INIT;
  constexpr uint64_t kCanary = 0x5eed5eed5eedull;
  bool old_caller = false, too_small = false, null_out = false;
  switch (in_.below(8)) {
    case 0:  // a caller built before load_evicted_tokens: the rest is written, that field is not
      s.struct_size = static_cast<uint32_t>(offsetof(kvhost_stats, load_evicted_tokens));
      s.load_evicted_tokens = kCanary;
      old_caller = true;
      break;
    case 1: {  // smaller still: refused
      static const uint32_t sizes[] = {0, 4, 8, static_cast<uint32_t>(offsetof(kvhost_stats, load_evicted_tokens) - 1)};
      s.struct_size = sizes[in_.below(4)];
      too_small = true;
      break;
    }
    case 2:
      null_out = true;
      break;
    default:
      break;
  }
  const kvpool_status st =
      call("kvhost_get_stats", {INV, UNS}, false, [&] { return kvhost_get_stats(target, null_out ? nullptr : &s); });
  if (st != KVPOOL_OK) {
    if (target == pool_ && !too_small && !null_out) fail("kvhost_get_stats", "refused a valid call: " + last_error_);
    return;
  }
  if (target != pool_ || too_small || null_out) fail("kvhost_get_stats", "accepted a bad call");
  if (old_caller) {
    if (s.load_evicted_tokens != kCanary) fail("kvhost_get_stats", "wrote past an older caller's struct_size");
    if (s.struct_size != offsetof(kvhost_stats, load_evicted_tokens)) fail("kvhost_get_stats", "changed struct_size");
  }
  const kvhost_stats now = host_stats();  // the checks, and the full struct to compare with
  if (s.used_tokens != now.used_tokens || s.backups != now.backups || s.bytes_to_device != now.bytes_to_device ||
      (!old_caller && s.load_evicted_tokens != now.load_evicted_tokens)) {
    fail("kvhost_get_stats", "two reads in a row differ");
  }
}

void Driver::host_poll_op() {
  kvpool* target = host_target();
  const int32_t wait = static_cast<int32_t>(in_.below(3)) - (in_.chance(8) ? 2 : 0);  // nonzero: wait (negatives too)
  size_t completed = 77;
  const bool null_out = in_.chance(4);
  const kvpool_status st =
      call("kvhost_poll", {INV, UNS}, true, [&] { return kvhost_poll(target, wait, null_out ? nullptr : &completed); });
  if (st != KVPOOL_OK) {
    if (target == pool_) fail("kvhost_poll", "refused a valid call: " + last_error_);
    return;
  }
  if (target != pool_) fail("kvhost_poll", "accepted a pool without a host tier");
  if (!null_out && completed != 0) fail("kvhost_poll", "a CPU pool released copies in flight");
  host_stats();
}

void Driver::host_stream_op() {
  kvpool* target = host_target();
  void* stream = nullptr;
  if (in_.chance(2)) stream = reinterpret_cast<void*>(static_cast<uintptr_t>(in_.u16()) << 4);  // CPU pools ignore it
  const kvpool_status st = call("kvhost_set_stream", {INV, UNS}, false, [&] { return kvhost_set_stream(target, stream); });
  if ((st == KVPOOL_OK) != (target == pool_)) fail("kvhost_set_stream", "accepted a bad pool or refused the pool");
}

void Driver::host_load_set_op() {
  kvpool* target = host_target();
  const bool advance = in_.chance(2);
  const bool null_out = in_.chance(16);
  int32_t set = -5;
  const kvpool_status st = call(advance ? "kvhost_next_load_set" : "kvhost_load_set", {INV, UNS}, advance, [&] {
    return advance ? kvhost_next_load_set(target, null_out ? nullptr : &set)
                   : kvhost_load_set(target, null_out ? nullptr : &set);
  });
  const bool valid = target == pool_ && !null_out;
  if ((st == KVPOOL_OK) != valid) fail("kvhost_load_set", "accepted a bad call or refused a valid one");
  if (st != KVPOOL_OK) return;
  if (advance) load_set_ = (load_set_ + 1) % 3;
  if (set != load_set_) fail("kvhost_load_set", "set " + std::to_string(set) + ", expected " + std::to_string(load_set_));
}

void Driver::host_wait_layer_op() {
  kvpool* target = host_target();
  static const int32_t sets[] = {0, 1, 2, 0, 1, 2, -1, 3, INT32_MAX, INT32_MIN};
  static const int32_t layers[] = {0, 1, 0, 1, -1, kLayers, INT32_MAX, INT32_MIN};
  const int32_t set = sets[in_.below(sizeof(sets) / sizeof(*sets))];
  const int32_t layer = layers[in_.below(sizeof(layers) / sizeof(*layers))];
  void* stream = in_.chance(2) ? nullptr : reinterpret_cast<void*>(uintptr_t{0x1000});
  const kvpool_status st =
      call("kvhost_wait_layer", {INV, UNS}, false, [&] { return kvhost_wait_layer(target, set, layer, stream); });
  const bool valid = target == pool_ && set >= 0 && set < 3 && layer >= 0 && layer < kLayers;
  if ((st == KVPOOL_OK) != valid) {
    fail("kvhost_wait_layer", "set " + std::to_string(set) + " layer " + std::to_string(layer) + ": status " +
                                  std::to_string(st));
  }
}

void Driver::host_match_op() {
  kvpool* target = host_target();
  std::vector<int32_t> t = tokens(context_);
  std::vector<int64_t> slots(t.size() + 1, -7);
  const size_t cap = in_.chance(6) ? in_.below(t.size() + 1) : t.size();
  const bool null_tokens = !t.empty() && in_.chance(32);  // NULL with a length: refused
  const size_t null_out = in_.chance(16) ? 1 + in_.below(4) : 0;  // which output is NULL
  size_t matched = SIZE_MAX, host_matched = SIZE_MAX;
  uint64_t node = 0, host_node = 0;
  const char* key = extra_key();
  const kvpool_status st = call("kvhost_match", {INV, UNS, BTS}, false, [&] {
    return kvhost_match(target, null_tokens ? nullptr : t.data(), t.size(), key, slots.data(), cap, null_out == 1 ? nullptr : &matched,
                        null_out == 2 ? nullptr : &host_matched, null_out == 3 ? nullptr : &node,
                        null_out == 4 ? nullptr : &host_node);
  });
  if (st == BTS) {
    if (matched <= cap || matched > t.size()) fail("kvhost_match", "buffer too small, but the need fits");
    for (int64_t s : slots) {
      if (s != -7) fail("kvhost_match", "wrote slots into a buffer it called too small");
    }
    return;
  }
  if (st != KVPOOL_OK) return;
  if (target != pool_ || null_out != 0 || null_tokens) fail("kvhost_match", "accepted a bad call");
  if (tracing()) std::fprintf(stderr, "  %zu tokens: %zu on the device, %zu on the host\n", t.size(), matched, host_matched);
  if (matched + host_matched > t.size()) fail("kvhost_match", "matched more tokens than it was given");
  if (matched % static_cast<size_t>(page_) != 0 || host_matched % static_cast<size_t>(page_) != 0) {
    fail("kvhost_match", "a match that is not whole pages");
  }
  if (slots[matched] != -7) fail("kvhost_match", "wrote past the matched slots");
  // The device part is exactly radix_match's.
  std::vector<int64_t> plain(t.size() + 1, -7);
  size_t plain_matched = 0;
  uint64_t plain_node = 0;
  call("radix_match", {INV, UNS, BTS}, false, [&] {
    return radix_match(pool_, t.data(), t.size(), key, plain.data(), t.size(), &plain_matched, &plain_node);
  });
  if (plain_matched != matched || plain_node != node || !std::equal(slots.begin(), slots.begin() + static_cast<long>(matched), plain.begin())) {
    fail("kvhost_match", "device part differs from radix_match's: " + std::to_string(matched) + " vs " +
                             std::to_string(plain_matched) + " tokens");
  }
  if (matched == 0) root_ = node;
  if (host_matched > 0) {
    int32_t on_device = -1, on_host = -1;
    size_t n = 0;
    if (kvhost_node_state(pool_, host_node, &on_device, &on_host, &n) != KVPOOL_OK || on_device != 0 || on_host != 1) {
      fail("kvhost_match", "host_node is not a host-only node");
    }
  }
  // Known handles only: the root (unlocking it is a no-op the lock model must know of) is node
  // when nothing matched on the device; host_node without a host part may be the root too.
  if (nodes_.size() < kMaxNodes) nodes_.push_back(node);
  if (host_matched > 0 && nodes_.size() < kMaxNodes) nodes_.push_back(host_node);
}

void Driver::host_load_back_op() {
  kvpool* target = host_target();
  // The handle: mostly the host node of a fresh kvhost_match; else a known (maybe stale) or made-up one.
  uint64_t host_node = 0;
  size_t expect_host = SIZE_MAX, expect_device = 0;  // SIZE_MAX: unknown
  std::vector<int32_t> t;
  const char* key = nullptr;
  switch (in_.below(8)) {
    case 0:
      host_node = wrong_node();
      break;
    case 1:
      host_node = nodes_.empty() ? wrong_node() : nodes_[in_.below(nodes_.size())];
      break;
    default: {
      t = tokens(context_);
      key = extra_key();
      std::vector<int64_t> slots(t.size() + 1);
      size_t matched = 0, host_matched = 0;
      uint64_t node = 0;
      if (call("kvhost_match", {INV, UNS, BTS}, false, [&] {
            return kvhost_match(pool_, t.data(), t.size(), key, slots.data(), slots.size(), &matched, &host_matched, &node,
                                &host_node);
          }) != KVPOOL_OK) {
        return;
      }
      if (matched == 0) root_ = node;
      expect_host = host_matched;
      expect_device = matched;
      break;
    }
  }
  const size_t need = expect_host == SIZE_MAX ? context_ : expect_host;
  size_t cap = need;
  if (in_.chance(6)) cap = in_.below(need + 1);  // maybe too small
  std::vector<int64_t> slots(cap + 1, -7);
  const bool null_slots = cap > 0 && in_.chance(24);
  const size_t null_out = in_.chance(24) ? 1 + in_.below(2) : 0;
  size_t loaded = SIZE_MAX;
  uint64_t node = 0;
  const kvhost_stats before = host_stats();
  const size_t device_before = device_tokens();
  const kvpool_status st = call("kvhost_load_back", {INV, UNS, BTS}, true, [&] {
    return kvhost_load_back(target, host_node, null_slots ? nullptr : slots.data(), cap, null_out == 1 ? nullptr : &loaded,
                            null_out == 2 ? nullptr : &node);
  });
  if (st == BTS) {
    if (loaded <= cap) fail("kvhost_load_back", "buffer too small, but the need fits");
    if (expect_host != SIZE_MAX && loaded != expect_host) fail("kvhost_load_back", "the need is not the host match");
    for (int64_t s : slots) {
      if (s != -7) fail("kvhost_load_back", "wrote slots into a buffer it called too small");
    }
    return;
  }
  if (st != KVPOOL_OK) {
    if (target == pool_ && expect_host != SIZE_MAX && !null_slots && null_out == 0 && cap >= need) {
      fail("kvhost_load_back", "refused the host node of a fresh match: " + last_error_);
    }
    return;
  }
  if (target != pool_ || null_slots || null_out != 0) fail("kvhost_load_back", "accepted a bad call");
  if (tracing()) std::fprintf(stderr, "  loaded %zu of %zu\n", loaded, expect_host);
  if (loaded > cap) fail("kvhost_load_back", "loaded more than slots_cap");
  if (slots[loaded] != -7) fail("kvhost_load_back", "wrote past the loaded slots");
  const kvhost_stats after = host_stats();
  const size_t device_after = device_tokens();
  // The tree lost what the load-back evicted and gained what it loaded, nothing else.
  if (device_before + loaded < device_after ||
      after.load_evicted_tokens - before.load_evicted_tokens != device_before + loaded - device_after) {
    fail("kvhost_load_back", "device tokens " + std::to_string(device_before) + " -> " + std::to_string(device_after) +
                                 " with " + std::to_string(loaded) + " loaded, but load_evicted_tokens grew by " +
                                 std::to_string(after.load_evicted_tokens - before.load_evicted_tokens));
  }
  if (after.loads != before.loads + (loaded > 0 ? 1 : 0) || after.load_tokens != before.load_tokens + loaded) {
    fail("kvhost_load_back", "loads / load_tokens do not count this load");
  }
  if (loaded == 0 && after.load_evicted_tokens != before.load_evicted_tokens && after.loads_refused == before.loads_refused) {
    fail("kvhost_load_back", "evicted for a load that neither happened nor was counted refused");
  }
  if (expect_host != SIZE_MAX) {
    if (loaded != 0 && loaded != expect_host) fail("kvhost_load_back", "loaded part of the host match");
    if (loaded == 0 && expect_host >= kLoadBackThreshold && after.loads_refused == before.loads_refused) {
      fail("kvhost_load_back", "loaded nothing of a host match above the threshold without counting it refused");
    }
    if (expect_host > 0 && expect_host < kLoadBackThreshold && loaded != 0) {
      fail("kvhost_load_back", "loaded a host match below the threshold");
    }
    if (loaded > 0) {  // the match now finds the loaded tokens on the device, in the slots returned
      std::vector<int64_t> again(t.size() + 1);
      size_t matched = 0, host_matched = 0;
      uint64_t n1 = 0, n2 = 0;
      if (call("kvhost_match", {INV, UNS, BTS}, false, [&] {
            return kvhost_match(pool_, t.data(), t.size(), key, again.data(), again.size(), &matched, &host_matched, &n1, &n2);
          }) != KVPOOL_OK ||
          // hybrid_linear: device tombstones may lie between the usable device prefix and the
          // loaded chain, so the loaded tokens end the new match (docs/host-tier.md).
          (fam_.mamba ? matched < expect_device + loaded : matched != expect_device + loaded) || n1 != node ||
          !std::equal(slots.begin(), slots.begin() + static_cast<long>(loaded),
                      again.begin() + static_cast<long>(fam_.mamba ? matched - loaded : expect_device))) {
        fail("kvhost_load_back", "the loaded tokens are not where a match finds them");
      }
    }
  }
  if (loaded > 0) {
    int32_t on_device = -1, on_host = -1;
    if (kvhost_node_state(pool_, node, &on_device, &on_host, nullptr) != KVPOOL_OK || on_device != 1 || on_host != 1) {
      fail("kvhost_load_back", "the node returned is not on both tiers");
    }
  }
  if (loaded > 0 && nodes_.size() < kMaxNodes) nodes_.push_back(node);  // else maybe the root
}

void Driver::host_evict_op() {
  kvpool* target = host_target();
  size_t n = in_.below(static_cast<size_t>(slot_limit_) * 2 + 2);
  if (in_.chance(16)) n = SIZE_MAX;
  const bool null_out = in_.chance(24);
  size_t evicted = SIZE_MAX;
  const kvhost_stats before = host_stats();
  const kvpool_status st =
      call("kvhost_evict", {INV, UNS}, true, [&] { return kvhost_evict(target, n, null_out ? nullptr : &evicted); });
  if ((st == KVPOOL_OK) != (target == pool_ && !null_out)) fail("kvhost_evict", "accepted a bad call or refused a valid one");
  if (st != KVPOOL_OK) return;
  const kvhost_stats after = host_stats();
  // hybrid_linear: the childless tombstones above an evicted leaf go too, device+host ones
  // included (a tombstone leaf holds KV nobody can use), so more than the host-only tokens
  // may be freed.
  const bool host_only_exact = !fam_.mamba;
  if ((host_only_exact ? evicted > before.host_only_tokens : evicted > before.used_tokens) ||
      after.used_tokens != before.used_tokens - evicted ||
      (host_only_exact ? after.host_only_tokens != before.host_only_tokens - evicted
                       : after.host_only_tokens > before.host_only_tokens) ||
      after.host_evicted_tokens != before.host_evicted_tokens + evicted) {
    fail("kvhost_evict", std::to_string(evicted) + " evicted: host-only " + std::to_string(before.host_only_tokens) +
                             " -> " + std::to_string(after.host_only_tokens) + ", used " +
                             std::to_string(before.used_tokens) + " -> " + std::to_string(after.used_tokens));
  }
  if (evicted % static_cast<size_t>(page_) != 0) fail("kvhost_evict", "evicted part of a page");
}

void Driver::host_node_state_op() {
  kvpool* target = host_target();
  uint64_t node;
  switch (in_.below(6)) {
    case 0: node = wrong_node(); break;
    case 1: node = root_ != 0 ? root_ : wrong_node(); break;
    default: node = nodes_.empty() ? wrong_node() : nodes_[in_.below(nodes_.size())]; break;  // maybe stale
  }
  const size_t null_out = in_.chance(16) ? 1 + in_.below(3) : 0;  // 3: tokens (allowed)
  int32_t on_device = -1, on_host = -1;
  size_t tokens = SIZE_MAX;
  const kvpool_status st = call("kvhost_node_state", {INV, UNS}, false, [&] {
    return kvhost_node_state(target, node, null_out == 1 ? nullptr : &on_device, null_out == 2 ? nullptr : &on_host,
                             null_out == 3 ? nullptr : &tokens);
  });
  if (st != KVPOOL_OK) return;
  if (target != pool_ || null_out == 1 || null_out == 2) fail("kvhost_node_state", "accepted a bad call");
  if ((on_device != 0 && on_device != 1) || (on_host != 0 && on_host != 1)) fail("kvhost_node_state", "not 0 or 1");
  if (null_out == 3) return;
  if (node == root_ && root_ != 0) {
    if (tokens != 0) fail("kvhost_node_state", "the root has tokens");
    return;
  }
  if (on_device == 0 && on_host == 0) fail("kvhost_node_state", "a live node on neither tier");
  if (tokens == 0 || tokens % static_cast<size_t>(page_) != 0) {
    fail("kvhost_node_state", "a node of " + std::to_string(tokens) + " tokens");
  }
}

}  // namespace kvfuzz

namespace kvfuzz {

// A whole request in one op (begin, one extend of the rest of the prompt, finish), as the
// single ops rarely line up: fills the tree with prompts that later ops find on the device
// or, after device eviction, on the host (and kvseq_begin loads back).
void Driver::host_request_op() {
  std::vector<int32_t> t = tokens(context_);
  if (t.empty() || seqs_.size() >= 8) return;
  const char* key = extra_key();
  uint64_t seq = 0;
  size_t cached = 0;
  if (call("kvseq_begin", {INV, OOM, UNS}, true, [&] {
        return kvseq_begin(pool_, t.data(), t.size(), key, &seq, &cached);
      }) != KVPOOL_OK) {
    return;
  }
  if (seq == 0 || cached >= t.size()) fail("kvseq_begin", "id 0 or the whole prompt reported cached");
  seqs_.push_back(seq);
  kvseq_info info = KVSEQ_INFO_INIT;
  if (kvseq_get_info(pool_, seq, &info) != KVPOOL_OK) fail("kvseq_get_info", kvpool_last_error());
  if (info.host_hit > info.cached || info.cached != cached) fail("kvseq_begin", "host_hit or cached disagree");
  int64_t chunk = static_cast<int64_t>(info.tokens - info.computed);
  std::vector<int64_t> slots(static_cast<size_t>(chunk) + 1);
  if (call("kvseq_extend", {INV, OOM}, true, [&] {
        return kvseq_extend(pool_, &seq, 1, &chunk, 1, slots.data(), static_cast<size_t>(chunk));
      }) != KVPOOL_OK) {
    return;  // stays live for the other ops
  }
  if (in_.chance(4)) return;  // left running: decodes, retracts, aborts
  if (call("kvseq_finish", {INV}, true, [&] { return kvseq_finish(pool_, seq, t.size()); }) == KVPOOL_OK) {
    seqs_.pop_back();
    if (dead_.size() < 16) dead_.push_back(seq);
  }
}

}  // namespace kvfuzz
