// kvseq: the ownership-safe request API (SGLANG_SEMANTICS §1.14, §3.9, §3.10, §1.19).
#include <algorithm>
#include <map>
#include <numeric>
#include <random>

#include "test_util.hpp"

namespace {

using kvtest::Pool;
using Tokens = std::vector<int32_t>;
using Slots = std::vector<int64_t>;

std::string config(int page, int64_t tokens, const char* kind = "radix", int requests = 16, int context = 256) {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": )" + std::to_string(requests) + R"(, "max_context_len": )" +
         std::to_string(context) + R"(}, "prefix_cache": {"kind": ")" + kind + R"("}})";
}

uint64_t begin(kvpool* pool, const Tokens& tokens, size_t* cached = nullptr, const char* extra = nullptr) {
  uint64_t seq = 0;
  size_t hit = 0;
  EXPECT_EQ(kvseq_begin(pool, tokens.data(), tokens.size(), extra, &seq, &hit), KVPOOL_OK) << kvpool_last_error();
  if (cached != nullptr) *cached = hit;
  return seq;
}

kvpool_status extend(kvpool* pool, std::vector<uint64_t> seqs, std::vector<int64_t> chunks, Slots* out = nullptr) {
  Slots slots(static_cast<size_t>(std::accumulate(chunks.begin(), chunks.end(), int64_t{0})), -1);
  const kvpool_status st = kvseq_extend(pool, seqs.data(), seqs.size(), chunks.data(), chunks.size(), slots.data(), slots.size());
  if (out != nullptr) *out = slots;
  return st;
}

kvseq_info info(kvpool* pool, uint64_t seq) {
  kvseq_info i = KVSEQ_INFO_INIT;
  EXPECT_EQ(kvseq_get_info(pool, seq, &i), KVPOOL_OK) << kvpool_last_error();
  return i;
}

Slots slots_of(kvpool* pool, uint64_t seq) {
  Slots s(4096);
  size_t n = 0;
  EXPECT_EQ(kvseq_get_slots(pool, seq, s.data(), s.size(), &n), KVPOOL_OK);
  s.resize(n);
  return s;
}

// The §1.19 invariant: available + evictable + protected + uncached == capacity.
void expect_accounting(kvpool* pool) {
  size_t available = 0, evictable = 0, protected_len = 0, uncached = 0, capacity = 0;
  ASSERT_EQ(kvseq_accounting(pool, &available, &evictable, &protected_len, &uncached, &capacity), KVPOOL_OK);
  EXPECT_EQ(available + evictable + protected_len + uncached, capacity)
      << available << " + " << evictable << " + " << protected_len << " + " << uncached;
  kvtest::expect_consistent(pool);
}

Tokens range(int32_t from, int32_t n) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), from);
  return t;
}

TEST(Kvseq, PrefillDecodeFinishThenReuse) {
  Pool pool(config(4, 128));
  const Tokens prompt = range(100, 10);
  size_t cached = 99;
  const uint64_t a = begin(pool, prompt, &cached);
  EXPECT_EQ(cached, 0u);
  Slots slots;
  ASSERT_EQ(extend(pool, {a}, {10}, &slots), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(slots.size(), 10u);
  EXPECT_EQ(info(pool, a).cached, 8u);  // the two whole pages went to the tree
  EXPECT_GE(info(pool, a).row, 1);
  expect_accounting(pool);
  Slots d(1);
  int32_t token = 555;
  ASSERT_EQ(kvseq_decode(pool, &a, 1, &token, 1, d.data(), 1), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(d[0], slots[9] + 1);  // same page
  EXPECT_EQ(info(pool, a).tokens, 11u);
  expect_accounting(pool);
  ASSERT_EQ(kvseq_finish(pool, a, 11), KVPOOL_OK) << kvpool_last_error();
  size_t evictable = 0, prot = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &prot, &total), KVPOOL_OK);
  EXPECT_EQ(total, 8u);  // 11 committed tokens: two whole pages cached, the partial page freed
  EXPECT_EQ(prot, 0u);
  EXPECT_EQ(kvtest::available(pool), 128u - 8u);
  expect_accounting(pool);

  // A second request with the same prompt reuses the cached pages.
  const uint64_t b = begin(pool, prompt, &cached);
  EXPECT_EQ(cached, 8u);
  EXPECT_EQ(slots_of(pool, b), Slots(slots.begin(), slots.begin() + 8));
  ASSERT_EQ(extend(pool, {b}, {2}), KVPOOL_OK);
  EXPECT_EQ(info(pool, b).computed, 10u);
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
  EXPECT_EQ(kvseq_abort(pool, b), KVPOOL_ERR_INVALID_ARGUMENT);  // already gone
  expect_accounting(pool);
}

TEST(Kvseq, AtLeastOneTokenIsComputed) {
  Pool pool(config(1, 64));
  const Tokens prompt = range(1, 6);
  const uint64_t a = begin(pool, prompt);
  ASSERT_EQ(extend(pool, {a}, {6}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 6), KVPOOL_OK);
  size_t cached = 0;
  const uint64_t b = begin(pool, prompt, &cached);
  EXPECT_EQ(cached, 5u);  // the whole prompt is cached, but the last token must be computed
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
}

TEST(Kvseq, ConcurrentRequestsShareChunkedPrefill) {
  Pool pool(config(4, 256));
  const Tokens prompt = range(7, 24);
  const uint64_t a = begin(pool, prompt);
  ASSERT_EQ(extend(pool, {a}, {12}), KVPOOL_OK);  // first chunk: 12 tokens, 3 pages cached at once
  size_t cached = 0;
  const uint64_t b = begin(pool, prompt, &cached);
  EXPECT_EQ(cached, 12u);  // b reuses a's first chunk while a is still running
  ASSERT_EQ(extend(pool, {a, b}, {12, 12}), KVPOOL_OK);
  // b computed the same second chunk: when it was inserted, a's pages were there first.
  EXPECT_EQ(slots_of(pool, a), slots_of(pool, b));
  expect_accounting(pool);
  ASSERT_EQ(kvseq_finish(pool, a, 24), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, b, 24), KVPOOL_OK);
  size_t evictable = 0, prot = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &prot, &total), KVPOOL_OK);
  EXPECT_EQ(total, 24u);
  EXPECT_EQ(kvtest::available(pool), 256u - 24u);  // no duplicate kept
  expect_accounting(pool);
}

// One batch whose later requests recompute pages an earlier one caches first (as an engine's
// prompts sharing a prefix, begun together): each later request ends up with the tree's
// slots for the shared pages and its own for the rest, its row says the same, and the
// slots the allocator returned for its duplicates are free again.
TEST(Kvseq, DuplicatesInOneBatchTakeTheTreesSlots) {
  Pool pool(config(16, 512));
  const Tokens shared = range(1000, 40);  // two whole pages and 8 tokens of a third
  std::vector<uint64_t> ids;
  for (int32_t tail : {0, 1, 2}) {
    Tokens prompt = shared;
    const Tokens own = range(5000 + 100 * tail, 20);
    prompt.insert(prompt.end(), own.begin(), own.end());
    size_t cached = 99;
    ids.push_back(begin(pool, prompt, &cached));
    EXPECT_EQ(cached, 0u);  // nothing cached yet: all three compute the shared part
  }
  Slots out;
  ASSERT_EQ(extend(pool, ids, {60, 60, 60}, &out), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(out.size(), 180u);
  const Slots a = slots_of(pool, ids[0]);
  EXPECT_EQ(a, Slots(out.begin(), out.begin() + 60));  // the first one caches its own
  for (size_t k = 1; k < 3; ++k) {
    const Slots mine(out.begin() + static_cast<std::ptrdiff_t>(60 * k), out.begin() + static_cast<std::ptrdiff_t>(60 * k + 60));
    const Slots held = slots_of(pool, ids[k]);
    ASSERT_EQ(held.size(), 60u);
    EXPECT_EQ(Slots(held.begin(), held.begin() + 32), Slots(a.begin(), a.begin() + 32)) << k;  // the tree's pages
    EXPECT_EQ(Slots(held.begin() + 32, held.end()), Slots(mine.begin() + 32, mine.end())) << k;  // its own after them
    EXPECT_NE(mine[0], a[0]) << k;  // it was given pages of its own for the shared part
    EXPECT_EQ(info(pool, ids[k]).cached, 48u);
  }
  // Held: a's 4 pages, 2 more pages each for b and c (their duplicated pages went back).
  EXPECT_EQ(kvtest::available(pool), 512u - 16u * (4 + 2 + 2));
  expect_accounting(pool);
  for (uint64_t id : ids) ASSERT_EQ(kvseq_abort(pool, id), KVPOOL_OK);
  expect_accounting(pool);
}

TEST(Kvseq, OutOfMemoryEvictsFirstAndOtherwiseChangesNothing) {
  Pool pool(config(4, 32));
  const uint64_t a = begin(pool, range(1, 16));
  ASSERT_EQ(extend(pool, {a}, {16}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 16), KVPOOL_OK);  // 16 tokens cached, evictable
  const uint64_t b = begin(pool, range(100, 24));
  ASSERT_EQ(extend(pool, {b}, {24}), KVPOOL_OK) << kvpool_last_error();  // needs 8 pages: evicts 2 of a's
  expect_accounting(pool);
  const uint64_t c = begin(pool, range(200, 20));
  Slots out;
  const Slots before = kvtest::free_list(pool);
  EXPECT_EQ(extend(pool, {c}, {20}, &out), KVPOOL_ERR_OUT_OF_MEMORY);  // b's pages are locked/held
  EXPECT_EQ(kvtest::free_list(pool), before);
  EXPECT_EQ(info(pool, c).computed, 0u);
  EXPECT_EQ(info(pool, c).row, -1);
  expect_accounting(pool);
  size_t cached = 0;
  ASSERT_EQ(kvseq_retract(pool, b, &cached), KVPOOL_OK);  // memory pressure: release b, keep its tokens
  EXPECT_EQ(cached, 20u);  // its pages were cached during prefill, so 5 of its 6 pages match again (23 of 24 tokens)
  expect_accounting(pool);
}

// prefix_cache.evict_rule: the default evicts only what an allocation lacks; "sglang" evicts
// SGLang's whole scheduler estimate (the chunk plus a page per request) as soon as fewer
// slots are free than that estimate, even when the allocation itself fits (spec §1.14).
TEST(Kvseq, EvictRuleShortfallOrSglangEstimate) {
  for (const char* rule : {"shortfall", "sglang"}) {
    std::string json = config(4, 32);
    json.replace(json.find(R"("kind": "radix")"), 15, std::string(R"("kind": "radix", "evict_rule": ")") + rule + "\"");
    Pool pool(json);
    const uint64_t a = begin(pool, range(1, 16));
    ASSERT_EQ(extend(pool, {a}, {16}), KVPOOL_OK);
    ASSERT_EQ(kvseq_finish(pool, a, 16), KVPOOL_OK);  // 16 tokens cached and evictable, 16 free
    const uint64_t b = begin(pool, range(100, 13));
    ASSERT_EQ(extend(pool, {b}, {13}), KVPOOL_OK) << kvpool_last_error();  // 4 pages: fits in the 16 free
    size_t available = 0, evictable = 0, protected_len = 0, uncached = 0, capacity = 0;
    ASSERT_EQ(kvseq_accounting(pool, &available, &evictable, &protected_len, &uncached, &capacity), KVPOOL_OK);
    if (std::string(rule) == "shortfall") {
      EXPECT_EQ(evictable, 16u) << "nothing was short, nothing goes";
      EXPECT_EQ(available, 0u);
    } else {
      EXPECT_EQ(evictable, 0u) << "13 + 4 > 16 free: SGLang evicts 17 tokens (a's whole node)";
      EXPECT_EQ(available, 16u);
    }
    expect_accounting(pool);
    // Decode: the estimate is a page per request. b holds 13 of its 16 slots' page: no new page needed,
    // and nothing more is evictable either way.
    ASSERT_EQ(kvseq_finish(pool, b, 13), KVPOOL_OK);
    expect_accounting(pool);
  }
}

// Found by the API fuzzer: inside an open free group, evicted slots only become free when the
// group ends, so evicting could not make room; extend evicted anyway and then failed.
TEST(Kvseq, OutOfMemoryInsideAFreeGroupEvictsNothing) {
  Pool pool(config(4, 32));
  const uint64_t a = begin(pool, range(1, 32));
  ASSERT_EQ(extend(pool, {a}, {32}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 32), KVPOOL_OK);  // every page cached and evictable, none free
  ASSERT_EQ(kvalloc_free_group_begin(pool), KVPOOL_OK);
  const uint64_t b = begin(pool, range(100, 8));
  size_t evictable = 0, protected_len = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &evictable, &protected_len, &total), KVPOOL_OK);
  EXPECT_EQ(evictable, 32u);
  EXPECT_EQ(extend(pool, {b}, {8}), KVPOOL_ERR_OUT_OF_MEMORY);
  ASSERT_EQ(radix_sizes(pool, &evictable, &protected_len, &total), KVPOOL_OK);
  EXPECT_EQ(evictable, 32u) << "a failed extend evicted";
  kvtest::expect_consistent(pool);
  ASSERT_EQ(kvalloc_free_group_end(pool), KVPOOL_OK);
  EXPECT_EQ(extend(pool, {b}, {8}), KVPOOL_OK) << kvpool_last_error();  // outside the group eviction helps again
  expect_accounting(pool);
}

TEST(Kvseq, RetractReleasesWithoutInsert) {
  Pool pool(config(4, 64));
  const Tokens prompt = range(1, 12);
  const uint64_t a = begin(pool, prompt);
  ASSERT_EQ(extend(pool, {a}, {12}), KVPOOL_OK);
  int32_t t = 9;
  Slots d(1);
  ASSERT_EQ(kvseq_decode(pool, &a, 1, &t, 1, d.data(), 1), KVPOOL_OK);
  size_t cached = 0;
  ASSERT_EQ(kvseq_retract(pool, a, &cached), KVPOOL_OK);
  EXPECT_EQ(cached, 12u);  // the prompt pages were cached during prefill; the decoded token was not
  EXPECT_EQ(info(pool, a).row, -1);
  EXPECT_EQ(info(pool, a).tokens, 13u);  // tokens are kept
  EXPECT_EQ(info(pool, a).computed, 12u);
  ASSERT_EQ(extend(pool, {a}, {1}), KVPOOL_OK);  // recompute only what is missing
  ASSERT_EQ(kvseq_finish(pool, a, 13), KVPOOL_OK);
  expect_accounting(pool);
}

TEST(Kvseq, FinishFreesDuplicatesOfPagesCachedMeanwhile) {
  Pool pool(config(2, 64));
  const Tokens prompt = range(1, 4);
  const uint64_t a = begin(pool, prompt);
  const uint64_t b = begin(pool, prompt);
  ASSERT_EQ(extend(pool, {a, b}, {4, 4}), KVPOOL_OK);
  for (int32_t t : {7, 8}) {  // both generate the same two tokens
    std::vector<uint64_t> seqs{a, b};
    Tokens toks{t, t};
    Slots out(2);
    ASSERT_EQ(kvseq_decode(pool, seqs.data(), 2, toks.data(), 2, out.data(), 2), KVPOOL_OK);
  }
  ASSERT_EQ(kvseq_finish(pool, a, 6), KVPOOL_OK);
  const size_t before = kvtest::available(pool);
  ASSERT_EQ(kvseq_finish(pool, b, 6), KVPOOL_OK);  // b's page for [7, 8] duplicates a's
  EXPECT_EQ(kvtest::available(pool), before + 2 + 0u);
  size_t e = 0, p = 0, total = 0;
  ASSERT_EQ(radix_sizes(pool, &e, &p, &total), KVPOOL_OK);
  EXPECT_EQ(total, 6u);
  EXPECT_EQ(kvtest::available(pool), 64u - 6u);
  expect_accounting(pool);
}

TEST(Kvseq, ChunkCacheSharesNothing) {
  Pool pool(config(4, 64, "chunk"));
  const uint64_t a = begin(pool, range(1, 10));
  ASSERT_EQ(extend(pool, {a}, {10}), KVPOOL_OK);
  ASSERT_EQ(kvseq_finish(pool, a, 10), KVPOOL_OK);
  EXPECT_EQ(kvtest::available(pool), 64u);  // everything freed
  size_t cached = 9;
  const uint64_t b = begin(pool, range(1, 10), &cached);
  EXPECT_EQ(cached, 0u);
  size_t e = 0, p = 0, total = 0;
  EXPECT_EQ(radix_sizes(pool, &e, &p, &total), KVPOOL_ERR_UNSUPPORTED);
  expect_accounting(pool);
  ASSERT_EQ(kvseq_abort(pool, b), KVPOOL_OK);
}

TEST(Kvseq, BadInputs) {
  Pool pool(config(4, 64));
  uint64_t seq = 0;
  size_t cached = 0;
  Tokens t{1, 2, 3};
  EXPECT_EQ(kvseq_begin(pool, t.data(), 0, nullptr, &seq, &cached), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_begin(pool, nullptr, 3, nullptr, &seq, &cached), KVPOOL_ERR_INVALID_ARGUMENT);
  Tokens too_long(257, 1);
  EXPECT_EQ(kvseq_begin(pool, too_long.data(), too_long.size(), nullptr, &seq, &cached), KVPOOL_ERR_INVALID_ARGUMENT);
  const uint64_t a = begin(pool, t);
  EXPECT_EQ(extend(pool, {a}, {4}), KVPOOL_ERR_INVALID_ARGUMENT);  // more than the prompt
  EXPECT_EQ(extend(pool, {a}, {0}), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(extend(pool, {a, a}, {1, 1}), KVPOOL_ERR_INVALID_ARGUMENT);  // listed twice
  EXPECT_EQ(extend(pool, {a + 100}, {1}), KVPOOL_ERR_INVALID_ARGUMENT);
  int64_t chunk = 3;
  Slots out(2);
  EXPECT_EQ(kvseq_extend(pool, &a, 1, &chunk, 1, out.data(), 2), KVPOOL_ERR_INVALID_ARGUMENT);  // wrong output length
  int32_t token = 1;
  EXPECT_EQ(kvseq_decode(pool, &a, 1, &token, 1, out.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT);  // not prefilled
  ASSERT_EQ(extend(pool, {a}, {3}), KVPOOL_OK);
  EXPECT_EQ(kvseq_finish(pool, a, 4), KVPOOL_ERR_INVALID_ARGUMENT);  // more than computed
  kvseq_info small = KVSEQ_INFO_INIT;
  small.struct_size = 4;
  EXPECT_EQ(kvseq_get_info(pool, a, &small), KVPOOL_ERR_INVALID_ARGUMENT);
  size_t n = 0;
  EXPECT_EQ(kvseq_get_slots(pool, a, out.data(), 2, &n), KVPOOL_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(kvseq_retract(pool, a, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvseq_accounting(pool, nullptr, &n, &n, &n, &n), KVPOOL_ERR_INVALID_ARGUMENT);
  expect_accounting(pool);
  ASSERT_EQ(kvseq_finish(pool, a, 3), KVPOOL_OK);
  Pool swa(kvtest::swa_config(16, 1.0));
  EXPECT_EQ(kvseq_begin(swa, t.data(), 3, nullptr, &seq, &cached), KVPOOL_OK);  // swa pools have kvseq too
  EXPECT_EQ(kvseq_begin(swa, t.data(), 0, nullptr, &seq, &cached), KVPOOL_ERR_INVALID_ARGUMENT);
}

// Thousands of random steps with many requests under memory pressure.
TEST(Kvseq, RandomWorkloadKeepsOwnershipAndAccounting) {
  for (int page : {1, 4, 16}) {
    Pool pool(config(page, 48 * page, "radix", 8, 512));
    std::mt19937 rng(static_cast<unsigned>(page));
    std::vector<uint64_t> live;
    std::map<std::string, int> seen;
    for (int step = 0; step < 2500; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 3 && live.size() < 10) {  // a new request sharing one of a few prefixes
        Tokens prompt;
        const int family = static_cast<int>(rng() % 4);
        const int shared = static_cast<int>(rng() % (3 * page + 4));
        for (int i = 0; i < shared; ++i) prompt.push_back(family * 1000 + i);
        const int own = 1 + static_cast<int>(rng() % (2 * page + 2));
        for (int i = 0; i < own; ++i) prompt.push_back(static_cast<int32_t>(rng() % 50000) + 100000);
        live.push_back(begin(pool, prompt));
        ++seen["begin"];
      } else if (op < 6 && !live.empty()) {  // prefill chunks for some requests
        std::vector<uint64_t> batch;
        std::vector<int64_t> chunks;
        for (uint64_t s : live) {
          const kvseq_info i = info(pool, s);
          if (i.computed < i.tokens && rng() % 2 == 0) {
            batch.push_back(s);
            chunks.push_back(1 + static_cast<int64_t>(rng() % (i.tokens - i.computed)));
          }
        }
        if (batch.empty()) continue;
        const kvpool_status st = extend(pool, batch, chunks);
        ASSERT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
        ++seen[st == KVPOOL_OK ? "extend" : "extend-oom"];
      } else if (op < 8 && !live.empty()) {  // decode the fully computed ones
        std::vector<uint64_t> batch;
        for (uint64_t s : live) {
          const kvseq_info i = info(pool, s);
          if (i.computed == i.tokens && i.row >= 0 && i.tokens < 500) batch.push_back(s);
        }
        if (batch.empty()) continue;
        Tokens toks(batch.size());
        for (auto& t : toks) t = static_cast<int32_t>(rng() % 2);  // few values: requests often decode alike
        Slots out(batch.size());
        const kvpool_status st = kvseq_decode(pool, batch.data(), batch.size(), toks.data(), toks.size(), out.data(), out.size());
        ASSERT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
        ++seen[st == KVPOOL_OK ? "decode" : "decode-oom"];
        if (st == KVPOOL_ERR_OUT_OF_MEMORY) {  // retract the request with the most tokens, as a scheduler would
          size_t cached = 0;
          ASSERT_EQ(kvseq_retract(pool, batch.back(), &cached), KVPOOL_OK);
          ++seen["retract"];
        }
      } else if (!live.empty()) {  // finish or abort one
        const size_t k = rng() % live.size();
        const kvseq_info i = info(pool, live[k]);
        if (rng() % 4 == 0) {
          ASSERT_EQ(kvseq_abort(pool, live[k]), KVPOOL_OK);
          ++seen["abort"];
        } else {
          ASSERT_EQ(kvseq_finish(pool, live[k], i.computed - (i.computed > 0 ? rng() % 2 : 0)), KVPOOL_OK) << kvpool_last_error();
          ++seen["finish"];
        }
        live.erase(live.begin() + static_cast<long>(k));
      }
      size_t available = 0, evictable = 0, protected_len = 0, uncached = 0, capacity = 0;
      ASSERT_EQ(kvseq_accounting(pool, &available, &evictable, &protected_len, &uncached, &capacity), KVPOOL_OK);
      ASSERT_EQ(available + evictable + protected_len + uncached, capacity) << "page " << page << " step " << step;
      char report[4096];
      ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << "page " << page << " step " << step << "\n" << report;
    }
    for (const char* op : {"begin", "extend", "extend-oom", "decode", "finish", "abort"}) EXPECT_GT(seen[op], 0) << op << " page " << page;
    for (uint64_t s : live) ASSERT_EQ(kvseq_abort(pool, s), KVPOOL_OK);
    expect_accounting(pool);
  }
}

}  // namespace
