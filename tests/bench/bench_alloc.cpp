// Allocator benchmarks: token alloc+free, paged extend / decode / free,
// backup+restore. Public C API only (kvalloc_*); every status is checked and a
// failing call skips the benchmark (it is never timed).
//
// Workloads are generated from a fixed seed and rotate over a few pre-built
// input sets so consecutive calls do not see the same batch (as SGLang's
// anchor harness does). Calls that only undo a timed call (the free after an
// extend, the free after a decode) run outside the timed region: those
// benchmarks use manual timing around the one call they measure.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

using kvbench::Clock;
using kvbench::ok;
using kvbench::seconds_between;

constexpr int64_t kMinPoolTokens = int64_t{1} << 20;  // SGLang's anchor pools hold 1,048,576 tokens

int64_t pages_for(int64_t tokens, int64_t page) { return (tokens + page - 1) / page; }

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// A pool whose buffers are as small as possible (1 layer, 1 head, head_dim 1):
// the allocator does not touch KV memory, so only its bookkeeping matters.
std::string alloc_pool_json(int64_t page_size, int64_t tokens) {
  return R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 1}, "pool": {"kv_dtype": "bf16", "page_size": )" +
         std::to_string(page_size) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": 8, "max_context_len": 64}})";
}

// A pool with at least `needed_tokens` usable tokens (at least 1M, a power of
// two), emptied with kvalloc_clear().
kvpool* empty_pool(benchmark::State& state, int64_t page_size, int64_t needed_tokens) {
  const int64_t tokens = next_pow2(std::max(kMinPoolTokens, needed_tokens));
  kvpool* pool = kvbench::PoolCache::get(state, alloc_pool_json(page_size, tokens));
  if (pool == nullptr) return nullptr;
  if (!ok(state, kvalloc_clear(pool), "kvalloc_clear")) return nullptr;
  return pool;
}

// After a benchmark's loop: the pool must be back where it started (the
// untimed undo steps freed exactly what the timed calls allocated) and pass
// kvpool_check(). Catches a benchmark that drifts or a library that leaks.
void verify_steady(benchmark::State& state, kvpool* pool, size_t available_before) {
  if (state.error_occurred()) return;
  size_t after = 0;
  if (!ok(state, kvalloc_available(pool, &after), "kvalloc_available")) return;
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

size_t available(benchmark::State& state, kvpool* pool) {
  size_t n = 0;
  ok(state, kvalloc_available(pool, &n), "kvalloc_available");
  return n;
}

// --- workloads ----------------------------------------------------------------

enum class Shape {
  kShort,   // prefix ~ U[0, 2047], new tokens ~ U[1, 512]
  kAnchor,  // SGLang's anchor: prefix ~ U[0, 4096] with 15 % zero and 20 % page-aligned
            // (the rest unaligned), new tokens ~ U[1, 2048]
};

// One extend batch: its inputs, its output buffer, and where in the output
// the slots of *new* pages lie (the first slots of a request may fill the
// prefix's partial last page, which belongs to the prefix and must not be freed).
struct ExtendSet {
  std::vector<int64_t> prefix, seq, last;
  std::vector<int64_t> out;
  std::vector<std::pair<size_t, size_t>> new_page_ranges;  // [begin, end) into out
  std::vector<int64_t> free_slots;                         // gathered from out after a call
  int64_t new_tokens = 0;
  int64_t new_pages = 0;
  int64_t prefix_pages = 0;

  // Every slot of every new page (what an engine frees; BM_PagedFree times this).
  void gather_new_page_slots() {
    free_slots.clear();
    for (const auto& r : new_page_ranges) free_slots.insert(free_slots.end(), out.begin() + r.first, out.begin() + r.second);
  }
  // One slot per new page: frees the same pages at a fraction of the cost
  // (the untimed undo of BM_PagedExtend; keeps its wall time reasonable).
  void gather_one_slot_per_new_page(int64_t page) {
    free_slots.clear();
    for (const auto& r : new_page_ranges) {
      for (size_t i = r.first; i < r.second; i += static_cast<size_t>(page)) free_slots.push_back(out[i]);
    }
  }
};

void generate_extend(std::mt19937_64& rng, Shape shape, int64_t page, int64_t bs, ExtendSet* s) {
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  s->prefix.resize(bs);
  s->seq.resize(bs);
  for (int64_t i = 0; i < bs; ++i) {
    int64_t pre = 0, ext = 0;
    if (shape == Shape::kShort) {
      pre = std::uniform_int_distribution<int64_t>(0, 2047)(rng);
      ext = std::uniform_int_distribution<int64_t>(1, 512)(rng);
    } else {
      const double c = coin(rng);
      if (c < 0.15) {
        pre = 0;
      } else if (c < 0.35) {
        pre = std::uniform_int_distribution<int64_t>(1, 4096 / page)(rng) * page;
      } else {
        do {
          pre = std::uniform_int_distribution<int64_t>(1, 4096)(rng);
        } while (pre % page == 0);
      }
      ext = std::uniform_int_distribution<int64_t>(1, 2048)(rng);
    }
    s->prefix[i] = pre;
    s->seq[i] = pre + ext;
  }
  size_t off = 0;
  s->new_page_ranges.clear();
  s->new_tokens = s->new_pages = s->prefix_pages = 0;
  for (int64_t i = 0; i < bs; ++i) {
    const int64_t pre = s->prefix[i], ext = s->seq[i] - pre;
    const int64_t fill = pre % page == 0 ? 0 : std::min(page - pre % page, ext);
    if (fill < ext) s->new_page_ranges.emplace_back(off + fill, off + ext);
    off += static_cast<size_t>(ext);
    s->new_tokens += ext;
    s->new_pages += pages_for(s->seq[i], page) - pages_for(pre, page);
    s->prefix_pages += pages_for(pre, page);
  }
  s->out.assign(off, 0);
  s->last.assign(bs, -1);
}

// Builds `nsets` extend batches and allocates their prefixes from an empty
// pool (kvalloc_extend from nothing), so every last_loc is a real slot.
kvpool* setup_extend(benchmark::State& state, Shape shape, int64_t page, int64_t bs, int nsets,
                     std::vector<ExtendSet>* sets) {
  std::mt19937_64 rng(kvbench::kSeed ^ static_cast<uint64_t>(page * 1000003 + bs));
  sets->assign(nsets, ExtendSet());
  int64_t need_pages = 0, max_new_pages = 0;
  for (auto& s : *sets) {
    generate_extend(rng, shape, page, bs, &s);
    need_pages += s.prefix_pages;
    max_new_pages = std::max(max_new_pages, s.new_pages);
  }
  kvpool* pool = empty_pool(state, page, (need_pages + max_new_pages + 1) * page);
  if (pool == nullptr) return nullptr;
  std::vector<int64_t> zeros(bs, 0), none(bs, -1), slots;
  for (auto& s : *sets) {
    int64_t total = 0;
    for (int64_t p : s.prefix) total += p;
    slots.assign(total, 0);
    if (!ok(state, kvalloc_extend(pool, zeros.data(), zeros.size(), s.prefix.data(), s.prefix.size(), none.data(),
                                  none.size(), slots.data(), slots.size()),
            "kvalloc_extend (prefix setup)")) {
      return nullptr;
    }
    size_t off = 0;
    for (int64_t i = 0; i < bs; ++i) {
      off += static_cast<size_t>(s.prefix[i]);
      s.last[i] = s.prefix[i] > 0 ? slots[off - 1] : -1;
    }
  }
  return pool;
}

kvpool_status run_extend(kvpool* pool, ExtendSet& s) {
  return kvalloc_extend(pool, s.prefix.data(), s.prefix.size(), s.seq.data(), s.seq.size(), s.last.data(),
                        s.last.size(), s.out.data(), s.out.size());
}

// --- token allocator (page_size 1) --------------------------------------------

// alloc(n) then free of the same n slots; items = slots.
void BM_TokenAllocFree(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  kvpool* pool = empty_pool(state, 1, kMinPoolTokens);
  if (pool == nullptr) return;
  std::vector<int64_t> slots(n);
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  for (auto _ : state) {
    if (!ok(state, kvalloc_alloc(pool, slots.data(), n), "kvalloc_alloc")) break;
    if (!ok(state, kvalloc_free(pool, slots.data(), n), "kvalloc_free")) break;
  }
  verify_steady(state, pool, before);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

// --- paged extend / free --------------------------------------------------------

// Times kvalloc_extend alone; the new pages are freed untimed afterwards.
void BM_PagedExtend(benchmark::State& state, Shape shape) {
  const int64_t page = state.range(0), bs = state.range(1);
  std::vector<ExtendSet> sets;
  kvpool* pool = setup_extend(state, shape, page, bs, 4, &sets);
  if (pool == nullptr) return;
  size_t k = 0;
  int64_t tokens = 0, pages = 0;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  for (auto _ : state) {
    ExtendSet& s = sets[k++ % sets.size()];
    const auto t0 = Clock::now();
    const kvpool_status st = run_extend(pool, s);
    const auto t1 = Clock::now();
    if (!ok(state, st, "kvalloc_extend")) break;
    state.SetIterationTime(seconds_between(t0, t1));
    tokens += s.new_tokens;
    pages += s.new_pages;
    s.gather_one_slot_per_new_page(page);
    if (!ok(state, kvalloc_free(pool, s.free_slots.data(), s.free_slots.size()), "kvalloc_free (undo)")) break;
  }
  verify_steady(state, pool, before);
  state.SetItemsProcessed(tokens);
  state.counters["tokens_per_call"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kAvgIterations);
  state.counters["pages_per_call"] = benchmark::Counter(static_cast<double>(pages), benchmark::Counter::kAvgIterations);
}

// Times kvalloc_free of the slots of the pages one extend produced (every
// slot of every new page, as SGLang frees a request's new slots); the extend
// runs untimed before it.
void BM_PagedFree(benchmark::State& state, Shape shape) {
  const int64_t page = state.range(0), bs = state.range(1);
  std::vector<ExtendSet> sets;
  kvpool* pool = setup_extend(state, shape, page, bs, 4, &sets);
  if (pool == nullptr) return;
  size_t k = 0;
  int64_t slots = 0, pages = 0;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  for (auto _ : state) {
    ExtendSet& s = sets[k++ % sets.size()];
    if (!ok(state, run_extend(pool, s), "kvalloc_extend (setup)")) break;
    s.gather_new_page_slots();
    const auto t0 = Clock::now();
    const kvpool_status st = kvalloc_free(pool, s.free_slots.data(), s.free_slots.size());
    const auto t1 = Clock::now();
    if (!ok(state, st, "kvalloc_free")) break;
    state.SetIterationTime(seconds_between(t0, t1));
    slots += static_cast<int64_t>(s.free_slots.size());
    pages += s.new_pages;
  }
  verify_steady(state, pool, before);
  state.SetItemsProcessed(slots);
  state.counters["slots_per_call"] = benchmark::Counter(static_cast<double>(slots), benchmark::Counter::kAvgIterations);
  state.counters["pages_per_call"] = benchmark::Counter(static_cast<double>(pages), benchmark::Counter::kAvgIterations);
}

// --- paged decode ----------------------------------------------------------------

struct DecodeSet {
  std::vector<int64_t> seq, last, out;
  std::vector<size_t> crossing;  // requests whose new token starts a page
  std::vector<int64_t> undo;     // their new slots, freed after the call
};

// seq_lens ~ U[2, 8192] (SGLang's anchor). Each request holds the real page
// that contains its token seq-2 (allocated here), so last_loc is valid; the
// earlier pages of the request play no part in a decode and are not allocated.
kvpool* setup_decode(benchmark::State& state, int64_t page, int64_t bs, int nsets, std::vector<DecodeSet>* sets) {
  std::mt19937_64 rng(kvbench::kSeed ^ static_cast<uint64_t>(page * 7919 + bs));
  kvpool* pool = empty_pool(state, page, (static_cast<int64_t>(nsets) + 1) * bs * page);
  if (pool == nullptr) return nullptr;
  sets->assign(nsets, DecodeSet());
  std::vector<int64_t> held(static_cast<size_t>(bs * page));
  for (auto& s : *sets) {
    s.seq.resize(bs);
    s.last.resize(bs);
    s.out.assign(bs, 0);
    if (!ok(state, kvalloc_alloc(pool, held.data(), held.size()), "kvalloc_alloc (setup)")) return nullptr;
    for (int64_t i = 0; i < bs; ++i) {
      const int64_t seq = std::uniform_int_distribution<int64_t>(2, 8192)(rng);
      s.seq[i] = seq;
      s.last[i] = held[static_cast<size_t>(i * page)] + (seq - 2) % page;
      if (seq % page == 1 % page) s.crossing.push_back(static_cast<size_t>(i));
    }
  }
  return pool;
}

// Times one kvalloc_decode; the slots of requests that started a page are freed untimed.
void BM_PagedDecode(benchmark::State& state) {
  const int64_t page = state.range(0), bs = state.range(1);
  std::vector<DecodeSet> sets;
  kvpool* pool = setup_decode(state, page, bs, 8, &sets);
  if (pool == nullptr) return;
  size_t k = 0;
  int64_t new_pages = 0;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  for (auto _ : state) {
    DecodeSet& s = sets[k++ % sets.size()];
    const auto t0 = Clock::now();
    const kvpool_status st =
        kvalloc_decode(pool, s.seq.data(), s.seq.size(), s.last.data(), s.last.size(), s.out.data(), s.out.size());
    const auto t1 = Clock::now();
    if (!ok(state, st, "kvalloc_decode")) break;
    state.SetIterationTime(seconds_between(t0, t1));
    s.undo.clear();
    for (size_t i : s.crossing) s.undo.push_back(s.out[i]);
    new_pages += static_cast<int64_t>(s.undo.size());
    if (!ok(state, kvalloc_free(pool, s.undo.data(), s.undo.size()), "kvalloc_free (undo)")) break;
  }
  verify_steady(state, pool, before);
  state.SetItemsProcessed(state.iterations() * bs);
  state.counters["new_pages_per_call"] =
      benchmark::Counter(static_cast<double>(new_pages), benchmark::Counter::kAvgIterations);
}

// --- backup + restore ---------------------------------------------------------------

// Times kvalloc_backup + kvalloc_restore. With changes_bs > 0 a decode of that
// batch (untimed) runs in between, so restore undoes real changes (O(changes)).
void BM_BackupRestore(benchmark::State& state) {
  const int64_t page = state.range(0), bs = state.range(1);
  std::vector<DecodeSet> sets;
  kvpool* pool = setup_decode(state, page, std::max<int64_t>(bs, 1), 8, &sets);
  if (pool == nullptr) return;
  size_t k = 0;
  const size_t before = available(state, pool);
  if (state.error_occurred()) return;
  for (auto _ : state) {
    DecodeSet& s = sets[k++ % sets.size()];
    uint64_t token = 0;
    const auto t0 = Clock::now();
    const kvpool_status st_b = kvalloc_backup(pool, &token);
    const auto t1 = Clock::now();
    if (!ok(state, st_b, "kvalloc_backup")) break;
    if (bs > 0 && !ok(state,
                      kvalloc_decode(pool, s.seq.data(), s.seq.size(), s.last.data(), s.last.size(), s.out.data(),
                                     s.out.size()),
                      "kvalloc_decode (changes)")) {
      break;
    }
    const auto t2 = Clock::now();
    const kvpool_status st_r = kvalloc_restore(pool, token);
    const auto t3 = Clock::now();
    if (!ok(state, st_r, "kvalloc_restore")) break;
    state.SetIterationTime(seconds_between(t0, t1) + seconds_between(t2, t3));
  }
  verify_steady(state, pool, before);
  // Leave no snapshot active for later benchmarks on the same (cached) pool.
  if (!state.error_occurred()) ok(state, kvalloc_clear(pool), "kvalloc_clear");
}

// The floor of every manually timed row: two clock reads around nothing.
void BM_ManualTimerOverhead(benchmark::State& state) {
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const auto t1 = Clock::now();
    state.SetIterationTime(seconds_between(t0, t1));
  }
}

void paged_extend_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"page", "bs"});
  for (int64_t page : {16, 64}) {
    for (int64_t bs : {1, 32, 256}) b->Args({page, bs});
  }
}

}  // namespace

BENCHMARK(BM_ManualTimerOverhead)->Apply(kvbench::add_stats)->UseManualTime()->Unit(benchmark::kNanosecond);

BENCHMARK(BM_TokenAllocFree)
    ->ArgName("n")
    ->Arg(1)->Arg(16)->Arg(128)->Arg(256)->Arg(4096)->Arg(8192)
    ->Apply(kvbench::add_stats)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

#define KVBENCH_MANUAL(b) b->Apply(kvbench::add_stats)->UseManualTime()->Unit(benchmark::kMicrosecond)

KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_PagedExtend, short, Shape::kShort))->Apply(paged_extend_args);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_PagedExtend, anchor, Shape::kAnchor))->Apply(paged_extend_args);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_PagedFree, short, Shape::kShort))->Apply(paged_extend_args);
KVBENCH_MANUAL(BENCHMARK_CAPTURE(BM_PagedFree, anchor, Shape::kAnchor))->Apply(paged_extend_args);
KVBENCH_MANUAL(BENCHMARK(BM_PagedDecode))->ArgNames({"page", "bs"})->ArgsProduct({{16, 64}, {1, 64, 256, 1024}});
KVBENCH_MANUAL(BENCHMARK(BM_BackupRestore))->ArgNames({"page", "changes_bs"})->ArgsProduct({{16}, {0, 64, 256, 1024}});

KVBENCH_MAIN()
