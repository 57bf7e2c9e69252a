// Prefix-cache benchmarks: radix_match and radix_insert latency, radix_evict
// throughput, SGLang's RadixCache anchor workload, and a replay of the
// Mooncake synthetic trace through kvseq_*. Public C API only (radix_*,
// kvseq_*, kvalloc_*); every status is checked and a failing call skips the
// benchmark (it is never timed).
//
// Pools have the smallest possible KV buffers (1 layer, 1 head, head_dim 1,
// f16): the tree never touches KV memory. Token ids come from a fixed seed.
// Timed calls that change the tree are undone outside the timed region
// (manual timing); after each benchmark the pool must be back to its starting
// free count and pass kvpool_check().
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

#ifndef KVBENCH_DEFAULT_TRACE
#define KVBENCH_DEFAULT_TRACE "examples/data/synthetic_trace.jsonl"
#endif

namespace {

using kvbench::Clock;
using kvbench::ok;
using kvbench::seconds_between;
using Tokens = std::vector<int32_t>;

constexpr int64_t kMinPoolTokens = int64_t{1} << 20;  // SGLang's anchor pools hold >= 1,048,576 tokens
constexpr int32_t kVocab = 151936;                    // random token ids lie in [0, kVocab)

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

struct PoolSpec {
  int64_t page = 1;
  int64_t tokens = kMinPoolTokens;
  std::string eviction = "lru";
  bool events = false;
  int64_t max_context = 40000;
};

std::string radix_pool_json(const PoolSpec& s) {
  return R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 1}, "pool": {"kv_dtype": "f16", "page_size": )" +
         std::to_string(s.page) + R"(, "max_total_tokens": )" + std::to_string(s.tokens) +
         R"(, "max_running_requests": 8, "max_context_len": )" + std::to_string(s.max_context) +
         R"(}, "prefix_cache": {"kind": "radix", "eviction": ")" + s.eviction +
         R"(", "events": )" + (s.events ? "true" : "false") + "}}";
}

// Which tree each cached pool holds now ("" = unknown / empty). Benchmarks that
// only read the tree (match) or undo what they change (insert) reuse a tree
// built by an earlier run of the same configuration instead of rebuilding it.
std::map<kvpool*, std::string>& tree_tags() {
  static std::map<kvpool*, std::string> tags;
  return tags;
}

kvpool* get_pool(benchmark::State& state, const PoolSpec& spec) {
  return kvbench::PoolCache::get(state, radix_pool_json(spec));
}

bool drain_events(benchmark::State& state, kvpool* pool, std::vector<radix_event>* ev, std::vector<int32_t>* tok,
                  size_t* events_out = nullptr);

// Empties the tree (returning its slots) and the allocator, and drops queued
// KV events (pools with events on queue AllBlocksCleared here).
bool empty_pool(benchmark::State& state, kvpool* pool) {
  tree_tags()[pool].clear();
  if (!ok(state, radix_reset(pool), "radix_reset")) return false;
  if (!ok(state, kvalloc_clear(pool), "kvalloc_clear")) return false;
  std::vector<radix_event> ev;
  std::vector<int32_t> tok;
  return drain_events(state, pool, &ev, &tok);
}

size_t available(benchmark::State& state, kvpool* pool) {
  size_t n = 0;
  ok(state, kvalloc_available(pool, &n), "kvalloc_available");
  return n;
}

// After a benchmark's loop: same free count as before, and kvpool_check() passes.
void verify_steady(benchmark::State& state, kvpool* pool, size_t available_before) {
  if (state.error_occurred()) return;
  const size_t after = available(state, pool);
  if (state.error_occurred()) return;
  if (after != available_before) {
    const std::string msg = "pool did not return to its state: " + std::to_string(available_before) +
                            " tokens available before, " + std::to_string(after) + " after";
    state.SkipWithError(msg.c_str());
    return;
  }
  char report[512];
  if (kvpool_check(pool, report, sizeof(report)) != KVPOOL_OK) {
    const std::string msg = std::string("kvpool_check failed: ") + report;
    state.SkipWithError(msg.c_str());
  }
}

void fail(benchmark::State& state, const std::string& msg) { state.SkipWithError(msg.c_str()); }

// Drains queued KV events (pools with events on); returns false on error.
bool drain_events(benchmark::State& state, kvpool* pool, std::vector<radix_event>* ev, std::vector<int32_t>* tok,
                  size_t* events_out) {
  size_t ne = 0, nt = 0;
  kvpool_status st = radix_take_events(pool, ev->data(), ev->size(), &ne, tok->data(), tok->size(), &nt);
  if (st == KVPOOL_ERR_BUFFER_TOO_SMALL) {
    ev->resize(ne);
    tok->resize(nt);
    st = radix_take_events(pool, ev->data(), ev->size(), &ne, tok->data(), tok->size(), &nt);
  }
  if (!ok(state, st, "radix_take_events")) return false;
  if (events_out != nullptr) *events_out = ne;
  return true;
}

Tokens random_tokens(std::mt19937_64& rng, size_t n) {
  std::uniform_int_distribution<int32_t> tok(0, kVocab - 1);
  Tokens t(n);
  for (auto& x : t) x = tok(rng);
  return t;
}

// Allocates slots for key[0, n), inserts it, frees the duplicates the tree
// already had (the documented caller flow); returns the prefix length.
bool insert_fresh(benchmark::State& state, kvpool* pool, const int32_t* key, size_t n, std::vector<int64_t>* slots,
                  size_t* prefix, uint64_t* node = nullptr) {
  slots->resize(n);
  if (!ok(state, kvalloc_alloc(pool, slots->data(), n), "kvalloc_alloc (setup)")) return false;
  uint64_t nd = 0;
  if (!ok(state, radix_insert(pool, key, n, slots->data(), n, nullptr, 0, prefix, &nd), "radix_insert (setup)")) {
    return false;
  }
  if (node != nullptr) *node = nd;
  return ok(state, kvalloc_free(pool, slots->data(), *prefix), "kvalloc_free (duplicates)");
}

// Unlocks what a benchmark locked, also when it stops early.
struct LockSet {
  kvpool* pool = nullptr;
  std::vector<uint64_t> nodes;
  ~LockSet() {
    for (uint64_t n : nodes) radix_unlock(pool, n);
  }
};

bool lock_matches(benchmark::State& state, kvpool* pool, const std::vector<Tokens>& keys, LockSet* locks) {
  locks->pool = pool;
  std::vector<int64_t> slots;
  for (const Tokens& k : keys) {
    slots.resize(k.size());
    size_t matched = 0;
    uint64_t node = 0;
    if (!ok(state, radix_match(pool, k.data(), k.size(), nullptr, slots.data(), slots.size(), &matched, &node),
            "radix_match (lock setup)")) {
      return false;
    }
    if (!ok(state, radix_lock(pool, node), "radix_lock")) return false;
    locks->nodes.push_back(node);
  }
  return true;
}

// --- match / insert: 64 cached prompts of L tokens ------------------------------------

// 8 groups x 8 prompts: a prompt is its group's L/2-token prefix plus its own
// L/2-token suffix, so a cached prompt is a path of 2 nodes. First tokens of
// every group, suffix and key are distinct by construction (no accidental sharing,
// so expected match lengths are exact and a match never splits a node).
struct PromptSet {
  std::vector<Tokens> cached;  // 64 prompts in the tree
  std::vector<Tokens> fresh;   // 64 prompts not in the tree, sharing a group prefix (L/2 hit)
  std::vector<Tokens> novel;   // 4 keys sharing nothing (insert rows)
};

PromptSet build_prompts(int64_t len) {
  std::mt19937_64 rng(kvbench::kSeed ^ static_cast<uint64_t>(len));
  const size_t half = static_cast<size_t>(len / 2);
  PromptSet s;
  std::vector<Tokens> groups;
  for (int g = 0; g < 8; ++g) {
    groups.push_back(random_tokens(rng, half));
    groups.back()[0] = kVocab + g;
  }
  auto prompt = [&](int g, int32_t first) {
    Tokens t = groups[static_cast<size_t>(g)];
    Tokens suffix = random_tokens(rng, half);
    suffix[0] = first;
    t.insert(t.end(), suffix.begin(), suffix.end());
    return t;
  };
  for (int i = 0; i < 64; ++i) s.cached.push_back(prompt(i / 8, 2 * kVocab + i));
  for (int i = 0; i < 64; ++i) s.fresh.push_back(prompt(i % 8, 3 * kVocab + i));
  for (int i = 0; i < 4; ++i) {
    s.novel.push_back(random_tokens(rng, static_cast<size_t>(len)));
    s.novel.back()[0] = 4 * kVocab + i;
  }
  return s;
}

// Generated once per length (benchmarks run their function several times).
const PromptSet& make_prompts(int64_t len) {
  static std::map<int64_t, PromptSet> cache;
  auto it = cache.find(len);
  if (it == cache.end()) it = cache.emplace(len, build_prompts(len)).first;
  return it->second;
}

PoolSpec prompt_pool_spec(int64_t len, int64_t page, bool events) {
  PoolSpec spec;
  spec.page = page;
  spec.tokens = next_pow2(std::max(kMinPoolTokens, 40 * len));  // 36 L cached + room for a new key
  spec.events = events;
  return spec;
}

// The pool for (len, page) holding the 64 cached prompts (built unless it holds them already).
kvpool* prompt_tree(benchmark::State& state, int64_t len, int64_t page, bool events, const PromptSet& prompts) {
  kvpool* pool = get_pool(state, prompt_pool_spec(len, page, events));
  if (pool == nullptr) return nullptr;
  const std::string tag = "prompts/" + std::to_string(len);
  const size_t expect_total = static_cast<size_t>(36 * len);
  size_t ev = 0, pr = 0, total = 0;
  if (tree_tags()[pool] == tag && radix_sizes(pool, &ev, &pr, &total) == KVPOOL_OK && total == expect_total &&
      pr == 0) {
    return pool;
  }
  if (!empty_pool(state, pool)) return nullptr;
  std::vector<int64_t> slots;
  for (size_t i = 0; i < prompts.cached.size(); ++i) {
    const Tokens& p = prompts.cached[i];
    size_t prefix = 0;
    if (!insert_fresh(state, pool, p.data(), p.size(), &slots, &prefix)) return nullptr;
    const size_t want = i % 8 == 0 ? 0 : p.size() / 2;
    if (prefix != want) {
      fail(state, "setup: prompt " + std::to_string(i) + " had " + std::to_string(prefix) + " cached tokens, expected " +
                      std::to_string(want));
      return nullptr;
    }
  }
  if (events) {
    std::vector<radix_event> e;
    std::vector<int32_t> t;
    if (!drain_events(state, pool, &e, &t)) return nullptr;
  }
  if (!ok(state, radix_sizes(pool, &ev, &pr, &total), "radix_sizes")) return nullptr;
  if (total != expect_total) {
    fail(state, "setup: the tree holds " + std::to_string(total) + " tokens, expected " + std::to_string(expect_total));
    return nullptr;
  }
  tree_tags()[pool] = tag;
  return pool;
}

enum class MatchKind {
  kFull,    // a cached prompt: all L tokens, 2 nodes
  kPrefix,  // a new prompt of a cached group: L/2 tokens, 1 node
};

// One radix_match; items = matched tokens.
void BM_RadixMatch(benchmark::State& state, MatchKind kind) {
  const int64_t len = state.range(0), page = state.range(1);
  const PromptSet& prompts = make_prompts(len);
  kvpool* pool = prompt_tree(state, len, page, false, prompts);
  if (pool == nullptr) return;
  const std::vector<Tokens>& keys = kind == MatchKind::kFull ? prompts.cached : prompts.fresh;
  const size_t expect = kind == MatchKind::kFull ? static_cast<size_t>(len) : static_cast<size_t>(len / 2);
  std::vector<int64_t> slots(static_cast<size_t>(len));
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  size_t k = 0;
  for (auto _ : state) {
    const Tokens& key = keys[k++ % keys.size()];
    size_t matched = 0;
    uint64_t node = 0;
    const kvpool_status st =
        radix_match(pool, key.data(), key.size(), nullptr, slots.data(), slots.size(), &matched, &node);
    if (!ok(state, st, "radix_match")) break;
    if (matched != expect) {
      fail(state, "radix_match matched " + std::to_string(matched) + " tokens, expected " + std::to_string(expect));
      break;
    }
    benchmark::DoNotOptimize(slots.data());
  }
  verify_steady(state, pool, before);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(expect));
}

// One radix_insert of a key of L tokens sharing nothing with the tree (one new
// leaf under the root). The 64 cached prompts are locked, so the untimed
// radix_evict that undoes the insert can only take the new leaf.
void BM_RadixInsert(benchmark::State& state, bool events) {
  const int64_t len = state.range(0), page = state.range(1);
  const PromptSet& prompts = make_prompts(len);
  kvpool* pool = prompt_tree(state, len, page, events, prompts);
  if (pool == nullptr) return;
  const size_t before = available(state, pool);
  LockSet locks;
  if (state.error_occurred() || !lock_matches(state, pool, prompts.cached, &locks)) return;
  std::vector<int64_t> slots(static_cast<size_t>(len));
  std::vector<radix_event> ev(static_cast<size_t>(len / page) + 1);
  std::vector<int32_t> tok(static_cast<size_t>(len));
  size_t k = 0;
  for (auto _ : state) {
    const Tokens& key = prompts.novel[k++ % prompts.novel.size()];
    if (!ok(state, kvalloc_alloc(pool, slots.data(), slots.size()), "kvalloc_alloc (setup)")) break;
    size_t prefix = 1;
    uint64_t node = 0;
    const auto t0 = Clock::now();
    const kvpool_status st =
        radix_insert(pool, key.data(), key.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node);
    const auto t1 = Clock::now();
    if (!ok(state, st, "radix_insert")) break;
    state.SetIterationTime(seconds_between(t0, t1));
    if (prefix != 0) {
      fail(state, "radix_insert found " + std::to_string(prefix) + " cached tokens of a new key");
      break;
    }
    size_t evicted = 0;
    if (!ok(state, radix_evict(pool, static_cast<size_t>(len), &evicted), "radix_evict (undo)")) break;
    if (evicted != static_cast<size_t>(len)) {
      fail(state, "undo: radix_evict freed " + std::to_string(evicted) + " tokens, expected " + std::to_string(len));
      break;
    }
    size_t nev = 0;
    if (events && !drain_events(state, pool, &ev, &tok, &nev)) break;
    if (events && nev != 2 * static_cast<size_t>(len / page)) {  // BlockStored + BlockRemoved per page
      fail(state, "expected " + std::to_string(2 * len / page) + " events, got " + std::to_string(nev));
      break;
    }
  }
  for (uint64_t n : locks.nodes) ok(state, radix_unlock(pool, n), "radix_unlock");
  locks.nodes.clear();
  verify_steady(state, pool, before);
  state.SetItemsProcessed(state.iterations() * len);
}

// --- evict: 10,000 one-page leaves --------------------------------------------------

// 100 one-page group nodes with 100 one-page leaves each, inserted in a shuffled
// order, then 5,000 matches of random leaves (hit counts for lfu, a mixed access
// order for lru). One timed radix_evict frees the whole tree: every leaf, then
// every group node once its leaves are gone.
struct EvictTree {
  std::vector<Tokens> groups;  // 1 page
  std::vector<Tokens> leaves;  // 2 pages: group page + own page, in insertion order
  std::vector<size_t> touches;  // indices into leaves, matched after the build
};

constexpr int kEvictGroups = 100, kEvictLeavesPerGroup = 100, kEvictTouches = 5000;

EvictTree build_evict_tree_keys(int64_t page) {
  std::mt19937_64 rng(kvbench::kSeed ^ static_cast<uint64_t>(page * 31337));
  EvictTree t;
  const size_t P = static_cast<size_t>(page);
  for (int g = 0; g < kEvictGroups; ++g) {
    t.groups.push_back(random_tokens(rng, P));
    t.groups.back()[0] = kVocab + g;
  }
  for (int g = 0; g < kEvictGroups; ++g) {
    for (int i = 0; i < kEvictLeavesPerGroup; ++i) {
      Tokens leaf = t.groups[static_cast<size_t>(g)];
      Tokens own = random_tokens(rng, P);
      own[0] = 2 * kVocab + i;
      leaf.insert(leaf.end(), own.begin(), own.end());
      t.leaves.push_back(std::move(leaf));
    }
  }
  std::shuffle(t.leaves.begin(), t.leaves.end(), rng);
  std::uniform_int_distribution<size_t> pick(0, t.leaves.size() - 1);
  for (int i = 0; i < kEvictTouches; ++i) t.touches.push_back(pick(rng));
  return t;
}

const EvictTree& make_evict_tree(int64_t page) {
  static std::map<int64_t, EvictTree> cache;
  auto it = cache.find(page);
  if (it == cache.end()) it = cache.emplace(page, build_evict_tree_keys(page)).first;
  return it->second;
}

bool build_evict_tree(benchmark::State& state, kvpool* pool, const EvictTree& t, int64_t page,
                      std::vector<int64_t>* slots) {
  const size_t P = static_cast<size_t>(page);
  const size_t nodes = t.groups.size() + t.leaves.size();
  slots->resize(nodes * P);
  if (!ok(state, kvalloc_alloc(pool, slots->data(), slots->size()), "kvalloc_alloc (setup)")) return false;
  size_t off = 0, prefix = 0;
  std::vector<int64_t> group_slots(t.groups.size() * P);
  std::map<int32_t, size_t> group_of;  // first token -> group index
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const int64_t* s = slots->data() + off;
    off += P;
    if (!ok(state, radix_insert(pool, t.groups[g].data(), P, s, P, nullptr, 0, &prefix, nullptr), "radix_insert (setup)")) {
      return false;
    }
    std::copy(s, s + P, group_slots.begin() + static_cast<long>(g * P));
    group_of[t.groups[g][0]] = g;
  }
  std::vector<int64_t> key_slots(2 * P);
  for (const Tokens& leaf : t.leaves) {
    const size_t g = group_of[leaf[0]];
    std::copy(group_slots.begin() + static_cast<long>(g * P), group_slots.begin() + static_cast<long>((g + 1) * P),
              key_slots.begin());  // the tree's own slots for the cached group page
    std::copy(slots->data() + off, slots->data() + off + P, key_slots.begin() + static_cast<long>(P));
    off += P;
    if (!ok(state, radix_insert(pool, leaf.data(), 2 * P, key_slots.data(), 2 * P, nullptr, 0, &prefix, nullptr),
            "radix_insert (setup)")) {
      return false;
    }
    if (prefix != P) {
      fail(state, "setup: a leaf found " + std::to_string(prefix) + " cached tokens, expected " + std::to_string(P));
      return false;
    }
  }
  size_t matched = 0;
  uint64_t node = 0;
  for (size_t i : t.touches) {
    if (!ok(state, radix_match(pool, t.leaves[i].data(), 2 * P, nullptr, key_slots.data(), key_slots.size(), &matched, &node),
            "radix_match (setup)")) {
      return false;
    }
  }
  return true;
}

// One radix_evict of the whole tree (10,100 nodes); items = tokens evicted.
void BM_RadixEvict(benchmark::State& state, const char* policy) {
  const int64_t page = state.range(0);
  PoolSpec spec;
  spec.page = page;
  spec.eviction = policy;
  kvpool* pool = get_pool(state, spec);
  if (pool == nullptr || !empty_pool(state, pool)) return;
  const EvictTree& tree = make_evict_tree(page);
  const size_t total = (tree.groups.size() + tree.leaves.size()) * static_cast<size_t>(page);
  std::vector<int64_t> slots;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  int64_t tokens = 0;
  for (auto _ : state) {
    if (!build_evict_tree(state, pool, tree, page, &slots)) break;
    size_t evicted = 0;
    const auto t0 = Clock::now();
    const kvpool_status st = radix_evict(pool, total, &evicted);
    const auto t1 = Clock::now();
    if (!ok(state, st, "radix_evict")) break;
    state.SetIterationTime(seconds_between(t0, t1));
    if (evicted != total) {
      fail(state, "radix_evict freed " + std::to_string(evicted) + " tokens, expected " + std::to_string(total));
      break;
    }
    tokens += static_cast<int64_t>(evicted);
  }
  verify_steady(state, pool, before);
  state.SetItemsProcessed(tokens);
  state.counters["nodes_per_call"] = static_cast<double>(tree.groups.size() + tree.leaves.size());
}

// --- SGLang's RadixCache anchor workload ---------------------------------------------

// /work/shared/anchors/SGLANG_H100.md section 3: 50 system prompts of 1024 random
// tokens; 2000 requests = a prompt + a unique suffix of U[896,1152] tokens
// (~2048), built in scheduler order (match, allocate the rest, insert); pool of
// 4M tokens, LRU. Keys are cut to whole pages. `fresh` are 1000 new requests
// (a cached prompt + a new suffix).
struct AnchorSet {
  std::vector<Tokens> requests;
  std::vector<Tokens> fresh;
};

AnchorSet build_anchor(int64_t page) {
  std::mt19937_64 rng(kvbench::kSeed ^ 0x5a5a);
  std::vector<Tokens> prompts;
  for (int p = 0; p < 50; ++p) {
    prompts.push_back(random_tokens(rng, 1024));
    prompts.back()[0] = kVocab + p;
  }
  std::uniform_int_distribution<size_t> which(0, prompts.size() - 1);
  std::uniform_int_distribution<size_t> suffix_len(896, 1152);
  int32_t unique = 2 * kVocab;
  auto request = [&]() {
    Tokens t = prompts[which(rng)];
    Tokens s = random_tokens(rng, suffix_len(rng));
    s[0] = unique++;
    t.insert(t.end(), s.begin(), s.end());
    t.resize(t.size() - t.size() % static_cast<size_t>(page));
    return t;
  };
  AnchorSet a;
  for (int i = 0; i < 2000; ++i) a.requests.push_back(request());
  for (int i = 0; i < 1000; ++i) a.fresh.push_back(request());
  return a;
}

const AnchorSet& make_anchor(int64_t page) {
  static std::map<int64_t, AnchorSet> cache;
  auto it = cache.find(page);
  if (it == cache.end()) it = cache.emplace(page, build_anchor(page)).first;
  return it->second;
}

kvpool* anchor_tree(benchmark::State& state, int64_t page, const AnchorSet& a, bool force_rebuild = false) {
  PoolSpec spec;
  spec.page = page;
  spec.tokens = int64_t{4} << 20;  // SGLang's anchor: 4M-token allocator
  kvpool* pool = get_pool(state, spec);
  if (pool == nullptr) return nullptr;
  const std::string tag = "anchor";
  if (!force_rebuild && tree_tags()[pool] == tag) return pool;
  if (!empty_pool(state, pool)) return nullptr;
  std::vector<int64_t> slots(4096);
  for (const Tokens& r : a.requests) {
    size_t matched = 0, prefix = 0;
    uint64_t node = 0;
    slots.resize(r.size());
    if (!ok(state, radix_match(pool, r.data(), r.size(), nullptr, slots.data(), slots.size(), &matched, &node),
            "radix_match (setup)")) {
      return nullptr;
    }
    if (!ok(state, kvalloc_alloc(pool, slots.data() + matched, r.size() - matched), "kvalloc_alloc (setup)")) return nullptr;
    if (!ok(state, radix_insert(pool, r.data(), r.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node),
            "radix_insert (setup)")) {
      return nullptr;
    }
    if (prefix != matched) {
      fail(state, "setup: insert found " + std::to_string(prefix) + " cached tokens, match " + std::to_string(matched));
      return nullptr;
    }
  }
  tree_tags()[pool] = tag;
  return pool;
}

enum class AnchorOp {
  kMatchFull,     // match_prefix of a cached request: ~2048 tokens, 2 nodes
  kMatchPrompt,   // match_prefix of a new request: its 1024-token prompt
  kInsertLeaf,    // insert of a new request: one new ~1024-token suffix leaf
  kInsertCached,  // insert of a cached request: nothing new
  kEvict10k,      // evict(10000): ~10 LRU suffix leaves
};

void BM_RadixAnchor(benchmark::State& state, AnchorOp op) {
  const int64_t page = state.range(0);
  const AnchorSet& a = make_anchor(page);
  kvpool* pool = anchor_tree(state, page, a);
  if (pool == nullptr) return;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  LockSet locks;
  if (op == AnchorOp::kInsertLeaf && !lock_matches(state, pool, a.requests, &locks)) return;
  std::vector<int64_t> slots(4096);
  size_t k = 0;
  int64_t items = 0;
  for (auto _ : state) {
    size_t matched = 0, prefix = 0, evicted = 0;
    uint64_t node = 0;
    kvpool_status st = KVPOOL_OK;
    if (op == AnchorOp::kMatchFull || op == AnchorOp::kMatchPrompt) {
      const Tokens& r = op == AnchorOp::kMatchFull ? a.requests[k++ % a.requests.size()] : a.fresh[k++ % a.fresh.size()];
      const auto t0 = Clock::now();
      st = radix_match(pool, r.data(), r.size(), nullptr, slots.data(), slots.size(), &matched, &node);
      const auto t1 = Clock::now();
      if (!ok(state, st, "radix_match")) break;
      state.SetIterationTime(seconds_between(t0, t1));
      const size_t want = op == AnchorOp::kMatchFull ? r.size() : 1024;
      if (matched != want) {
        fail(state, "radix_match matched " + std::to_string(matched) + " tokens, expected " + std::to_string(want));
        break;
      }
      items += static_cast<int64_t>(matched);
    } else if (op == AnchorOp::kInsertLeaf || op == AnchorOp::kInsertCached) {
      const Tokens& r = op == AnchorOp::kInsertCached ? a.requests[k++ % a.requests.size()] : a.fresh[k++ % a.fresh.size()];
      // Untimed, as a scheduler does before inserting: the cached prefix's slots
      // (the tree's) and new slots for the rest.
      if (!ok(state, radix_match(pool, r.data(), r.size(), nullptr, slots.data(), slots.size(), &matched, &node),
              "radix_match (setup)")) {
        break;
      }
      if (!ok(state, kvalloc_alloc(pool, slots.data() + matched, r.size() - matched), "kvalloc_alloc (setup)")) break;
      const auto t0 = Clock::now();
      st = radix_insert(pool, r.data(), r.size(), slots.data(), r.size(), nullptr, 0, &prefix, &node);
      const auto t1 = Clock::now();
      if (!ok(state, st, "radix_insert")) break;
      state.SetIterationTime(seconds_between(t0, t1));
      if (prefix != matched) {
        fail(state, "radix_insert found " + std::to_string(prefix) + " cached tokens, expected " + std::to_string(matched));
        break;
      }
      items += static_cast<int64_t>(op == AnchorOp::kInsertCached ? r.size() : r.size() - prefix);
      if (op == AnchorOp::kInsertLeaf) {  // undo: the new leaf is the only unlocked one
        if (!ok(state, radix_evict(pool, 1, &evicted), "radix_evict (undo)")) break;
        if (evicted != r.size() - prefix) {
          fail(state, "undo: radix_evict freed " + std::to_string(evicted) + " tokens, expected " +
                          std::to_string(r.size() - prefix));
          break;
        }
      }
    } else {
      size_t ev = 0, pr = 0, total = 0;
      if (!ok(state, radix_sizes(pool, &ev, &pr, &total), "radix_sizes")) break;
      if (ev < (size_t{1} << 20)) {  // half the tree is gone: rebuild it (untimed)
        if (anchor_tree(state, page, a, true) == nullptr) break;
      }
      const auto t0 = Clock::now();
      st = radix_evict(pool, 10000, &evicted);
      const auto t1 = Clock::now();
      if (!ok(state, st, "radix_evict")) break;
      state.SetIterationTime(seconds_between(t0, t1));
      if (evicted < 10000) {
        fail(state, "radix_evict freed " + std::to_string(evicted) + " tokens, expected >= 10000");
        break;
      }
      items += static_cast<int64_t>(evicted);
    }
  }
  for (uint64_t n : locks.nodes) ok(state, radix_unlock(pool, n), "radix_unlock");
  locks.nodes.clear();
  if (op == AnchorOp::kEvict10k) {
    // The tree lost leaves: the next benchmark rebuilds it. Steady state is
    // checked as "everything back" after emptying the tree.
    if (!state.error_occurred() && empty_pool(state, pool)) {
      size_t cap = 0;
      if (ok(state, kvalloc_available(pool, &cap), "kvalloc_available")) verify_steady(state, pool, cap);
    }
  } else {
    verify_steady(state, pool, before);
  }
  state.SetItemsProcessed(items);
  state.counters["tokens_per_call"] = benchmark::Counter(static_cast<double>(items), benchmark::Counter::kAvgIterations);
}

// --- replay of the Mooncake synthetic trace through kvseq_* -----------------------------

struct TraceRequest {
  Tokens tokens;
  int64_t output = 0;
};

std::string trace_path() {
  const char* env = std::getenv("KVBENCH_TRACE");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(KVBENCH_DEFAULT_TRACE);
}

// Reads the first `limit` requests of a Mooncake JSONL trace and expands block
// id h into the 512 token ids h * 512 + t (the trace README's recipe), cut to
// input_length: two requests share exactly the prefix their blocks share.
bool load_trace(const std::string& path, size_t limit, std::vector<TraceRequest>* out, std::string* why) {
  std::ifstream in(path);
  if (!in) {
    *why = "trace not found: " + path + " (set KVBENCH_TRACE to a Mooncake synthetic_trace.jsonl)";
    return false;
  }
  std::string line;
  size_t lineno = 0;
  while (out->size() < limit && std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto field = [&](const char* name) -> const char* {
      const size_t at = line.find(std::string("\"") + name + "\"");
      if (at == std::string::npos) return nullptr;
      const size_t colon = line.find(':', at);
      return colon == std::string::npos ? nullptr : line.c_str() + colon + 1;
    };
    const char* in_len = field("input_length");
    const char* out_len = field("output_length");
    const char* ids = field("hash_ids");
    if (in_len == nullptr || out_len == nullptr || ids == nullptr) {
      *why = path + ":" + std::to_string(lineno) + ": missing input_length, output_length or hash_ids";
      return false;
    }
    TraceRequest r;
    const long long n = std::strtoll(in_len, nullptr, 10);
    r.output = std::strtoll(out_len, nullptr, 10);
    const char* p = std::strchr(ids, '[');
    if (p == nullptr || n <= 0) {
      *why = path + ":" + std::to_string(lineno) + ": bad input_length or hash_ids";
      return false;
    }
    ++p;
    r.tokens.reserve(static_cast<size_t>(n));
    while (static_cast<long long>(r.tokens.size()) < n) {
      char* end = nullptr;
      const long long h = std::strtoll(p, &end, 10);
      if (end == p || h < 0 || h >= (int64_t{1} << 31) / 512) {
        *why = path + ":" + std::to_string(lineno) + ": hash_ids too short or out of range";
        return false;
      }
      for (int32_t t = 0; t < 512 && static_cast<long long>(r.tokens.size()) < n; ++t) {
        r.tokens.push_back(static_cast<int32_t>(h * 512 + t));
      }
      p = end;
      while (*p == ',' || *p == ' ') ++p;
    }
    out->push_back(std::move(r));
  }
  return true;
}

const std::vector<TraceRequest>* trace(size_t limit, std::string* why) {
  static std::map<size_t, std::vector<TraceRequest>> cache;
  static std::map<size_t, std::string> errors;
  auto it = cache.find(limit);
  if (it != cache.end()) return &it->second;
  auto e = errors.find(limit);
  if (e != errors.end()) {
    *why = e->second;
    return nullptr;
  }
  std::vector<TraceRequest> reqs;
  if (!load_trace(trace_path(), limit, &reqs, why)) {
    errors[limit] = *why;
    return nullptr;
  }
  return &cache.emplace(limit, std::move(reqs)).first->second;
}

// Replays the first N requests one at a time (concurrency 1): kvseq_begin
// (match + lock), one kvseq_extend of the whole uncached prompt (allocation,
// eviction when short, caching of its pages), with `decode` one kvseq_decode
// per output token, then kvseq_finish of every computed token. Page 16, a
// 4M-token pool (LRU); each iteration starts from an empty cache (untimed).
// items = requests; prompt_tokens_per_second counts every prompt token.
void BM_Replay(benchmark::State& state, bool decode) {
  const int64_t page = state.range(0);
  const size_t limit = static_cast<size_t>(state.range(1));
  std::string why;
  const std::vector<TraceRequest>* reqs = trace(limit, &why);
  if (reqs == nullptr) {
    state.SkipWithError(why.c_str());
    return;
  }
  PoolSpec spec;
  spec.page = page;
  spec.tokens = int64_t{4} << 20;
  spec.max_context = 262144;  // the trace's longest prompt is 191,378 tokens
  kvpool* pool = get_pool(state, spec);
  if (pool == nullptr || !empty_pool(state, pool)) return;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  size_t longest = 0;
  int64_t prompt_tokens = 0;
  for (const auto& r : *reqs) {
    longest = std::max(longest, r.tokens.size());
    prompt_tokens += static_cast<int64_t>(r.tokens.size());
  }
  std::vector<int64_t> slots(longest);
  int64_t requests = 0, tokens = 0, hits = 0, decoded = 0;
  for (auto _ : state) {
    if (!empty_pool(state, pool)) break;
    uint64_t seq = 0;
    bool failed = false;
    int32_t generated = int32_t{1} << 30;  // generated token ids: never in a prompt
    const auto t0 = Clock::now();
    for (const TraceRequest& r : *reqs) {
      size_t cached = 0;
      if (!ok(state, kvseq_begin(pool, r.tokens.data(), r.tokens.size(), nullptr, &seq, &cached), "kvseq_begin")) {
        failed = true;
        break;
      }
      const int64_t chunk = static_cast<int64_t>(r.tokens.size() - cached);
      if (!ok(state, kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), static_cast<size_t>(chunk)), "kvseq_extend")) {
        failed = true;
        break;
      }
      size_t committed = r.tokens.size();
      if (decode) {
        int64_t slot = 0;
        for (int64_t i = 0; i < r.output; ++i) {
          const int32_t tok = generated++;
          if (!ok(state, kvseq_decode(pool, &seq, 1, &tok, 1, &slot, 1), "kvseq_decode")) {
            failed = true;
            break;
          }
        }
        if (failed) break;
        committed += static_cast<size_t>(r.output);
        decoded += r.output;
      }
      if (!ok(state, kvseq_finish(pool, seq, committed), "kvseq_finish")) {
        failed = true;
        break;
      }
      seq = 0;
      hits += static_cast<int64_t>(cached);
    }
    const auto t1 = Clock::now();
    if (failed) {
      if (seq != 0) kvseq_abort(pool, seq);
      break;
    }
    state.SetIterationTime(seconds_between(t0, t1));
    requests += static_cast<int64_t>(reqs->size());
    tokens += prompt_tokens;
  }
  if (!state.error_occurred()) {
    char report[512];
    if (kvpool_check(pool, report, sizeof(report)) != KVPOOL_OK) {
      fail(state, std::string("kvpool_check after the replay failed: ") + report);
    }
  }
  if (!state.error_occurred() && empty_pool(state, pool)) verify_steady(state, pool, before);
  state.SetItemsProcessed(requests);
  state.counters["prompt_tokens_per_second"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["hit_ratio"] = tokens > 0 ? static_cast<double>(hits) / static_cast<double>(tokens) : 0.0;
  if (decode) {
    state.counters["decode_steps_per_second"] = benchmark::Counter(static_cast<double>(decoded), benchmark::Counter::kIsRate);
  }
}

void len_page_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"len", "page"});
  b->ArgsProduct({{1024, 2048, 8192, 32768}, {1, 16, 64}});
}

}  // namespace

#define KVBENCH_MANUAL(b) b->Apply(kvbench::add_stats)->UseManualTime()->Unit(benchmark::kMicrosecond)

BENCHMARK_CAPTURE(BM_RadixMatch, full, MatchKind::kFull)
    ->Apply(len_page_args)
    ->Apply(kvbench::add_stats)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_RadixMatch, prefix, MatchKind::kPrefix)
    ->Apply(len_page_args)
    ->Apply(kvbench::add_stats)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixInsert, new, false))->Apply(len_page_args);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixInsert, new_events, true))->Apply(len_page_args);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixEvict, lru, "lru"))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixEvict, lfu, "lfu"))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixAnchor, match_full, AnchorOp::kMatchFull))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixAnchor, match_prompt, AnchorOp::kMatchPrompt))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixAnchor, insert_leaf, AnchorOp::kInsertLeaf))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixAnchor, insert_cached, AnchorOp::kInsertCached))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_RadixAnchor, evict_10000, AnchorOp::kEvict10k))->ArgName("page")->Arg(1)->Arg(16);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_Replay, prompt, false))->ArgNames({"page", "requests"})->Args({16, 1000})->Unit(benchmark::kMillisecond);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_Replay, decode, true))->ArgNames({"page", "requests"})->Args({16, 1000})->Unit(benchmark::kMillisecond);

KVBENCH_MAIN()
