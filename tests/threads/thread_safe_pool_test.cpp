// A thread-safe pool (pool.thread_safe: true) hammered from many threads at once: every
// call may come from any thread. Label `threads`: scripts/sanitize.sh runs these under
// ThreadSanitizer, which proves the lock covers what the calls touch (the read-only
// queries, which share the lock, included).
//
//   - HammeredFromManyThreads: 8 workers mix kvseq requests with shared prefixes
//     (begin / extend / decode / finish / abort), direct radix match / insert / lock /
//     evict, kvalloc alloc / free, KV writes and reads, and every read-only query, while
//     2 readers check invariants all the time (stats never show more held than capacity,
//     the accounting never exceeds it, the tree's sizes add up, kvpool_check passes).
//     Afterwards the accounting identity holds exactly, kvpool_check passes, and evicting
//     the whole tree gives every slot back.
//   - EveryKvseqFamily: the kvseq part on mha (page 1), swa and hybrid_linear pools.
//   - StorageCallbacksAreRefusedNotDeadlocked: a custom storage backend whose callbacks
//     call back into the pool from the storage threads while other threads flush: each
//     such call fails with KVPOOL_ERR_UNSUPPORTED at once (it would otherwise wait for a
//     lock that a flush holds while it waits for that callback).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/host_tier_kv.hpp"
#include "seq_test_util.hpp"

namespace {

constexpr int kWorkers = 8;
constexpr int kReaders = 2;

// mha f32 (2 layers x 2 heads x 8), a radix cache, thread_safe on.
std::string mha_safe(int page, int64_t tokens) {
  return R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": )" +
         std::to_string(page) + R"(, "max_total_tokens": )" + std::to_string(tokens) +
         R"(, "max_running_requests": 64, "max_context_len": 512, "thread_safe": true}, "prefix_cache": {"kind": "radix"}})";
}

// The test utilities' configs with "thread_safe": true added to their pool section.
std::string with_thread_safe(std::string json) {
  const size_t at = json.find("\"pool\": {");
  EXPECT_NE(at, std::string::npos) << json;
  json.insert(at + std::strlen("\"pool\": {"), "\"thread_safe\": true, ");
  return json;
}

// Runs workers(t) on kWorkers threads and readers(r, done) on kReaders threads, all started together.
template <class Worker, class Reader>
void run_threads(Worker worker, Reader reader) {
  std::atomic<int> ready{0};
  std::atomic<bool> done{false};
  std::atomic<int> working{kWorkers};
  std::vector<std::thread> threads;
  const int all = kWorkers + kReaders;
  auto start = [&] {
    ready.fetch_add(1);
    while (ready.load() < all) std::this_thread::yield();
  };
  for (int t = 0; t < kWorkers; ++t) {
    threads.emplace_back([&, t] {
      start();
      worker(t);
      if (working.fetch_sub(1) == 1) done = true;
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      start();
      reader(r, done);
    });
  }
  for (auto& th : threads) th.join();
}

// The invariants a reader may check at any moment, each from one call (one consistent state).
void check_invariants(kvpool* pool, bool has_radix, int round) {
  kvpool_stats s = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(pool, &s), KVPOOL_OK) << kvpool_last_error();
  EXPECT_LE(s.token_held, s.token_capacity);
  EXPECT_LE(s.token_available, s.token_capacity);
  EXPECT_EQ(s.token_held + s.token_available + s.token_pending, s.token_capacity) << "no free groups are open";
  EXPECT_LE(s.req_available, s.req_capacity);
  size_t available = 0, evictable = 0, protected_len = 0, uncached = 0, capacity = 0;
  ASSERT_EQ(kvseq_accounting(pool, &available, &evictable, &protected_len, &uncached, &capacity), KVPOOL_OK)
      << kvpool_last_error();
  // Exact without direct allocations; slots that workers hold through kvalloc_alloc make it less.
  EXPECT_LE(available + evictable + protected_len + uncached, capacity);
  if (has_radix) {
    size_t e = 0, p = 0, total = 0;
    ASSERT_EQ(radix_sizes(pool, &e, &p, &total), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(e + p, total);
  }
  if (round % 16 == 0) {
    char report[2048];
    EXPECT_EQ(kvpool_check(pool, report, sizeof report), KVPOOL_OK) << report;
  }
}

// A prompt: one of 4 shared family prefixes (`shared` tokens), then tokens of its own.
kvtest::Tokens prompt_for(std::mt19937& rng, int thread, int step, int shared) {
  const int family = static_cast<int>(rng() % 4);
  kvtest::Tokens t = kvtest::range(10000 * (family + 1), shared);
  const kvtest::Tokens own = kvtest::range(1000000 + 100000 * thread + 100 * step, 2 + static_cast<int32_t>(rng() % 20));
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

// One worker's kvseq requests: up to 3 live at a time, each begun, extended to its prompt,
// decoded a few tokens one call at a time and finished (or aborted on OUT_OF_MEMORY).
class SeqWorker {
 public:
  // `write_kv`: KV rows of layers 0 and 1 (2 heads x 8 f32) are written and read back after each extend.
  SeqWorker(kvpool* pool, int thread, int shared, bool write_kv)
      : pool_(pool), thread_(thread), shared_(shared), write_kv_(write_kv), rng_(1234u + static_cast<unsigned>(thread)) {}

  void step(int i) {
    if (live_.size() < 3 && (live_.empty() || rng_() % 3 == 0)) return begin(i);
    Live& r = live_[rng_() % live_.size()];
    if (!r.extended) return extend(r);
    if (r.decodes > 0) return decode(r);
    finish(r);
  }

  // Finishes whatever is still live.
  void drain() {
    while (!live_.empty()) {
      Live& r = live_.back();
      if (r.extended) {
        finish(r);
      } else {
        abort(r);
      }
    }
  }

  std::map<std::string, int>& seen() { return seen_; }

 private:
  struct Live {
    uint64_t seq = 0;
    kvtest::Tokens prompt;
    size_t cached = 0;
    bool extended = false;
    int decodes = 0;
  };

  void begin(int i) {
    Live r;
    r.prompt = prompt_for(rng_, thread_, i, shared_);
    const kvpool_status st = kvseq_begin(pool_, r.prompt.data(), r.prompt.size(), nullptr, &r.seq, &r.cached);
    if (st == KVPOOL_ERR_OUT_OF_MEMORY) {  // no request row free
      ++seen_["begin-oom"];
      return;
    }
    ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    ++seen_["begin"];
    if (r.cached > 0) ++seen_["prefix-hit"];
    r.decodes = 1 + static_cast<int>(rng_() % 4);
    live_.push_back(r);
  }

  void extend(Live& r) {
    const int64_t chunk = static_cast<int64_t>(r.prompt.size() - r.cached);
    kvtest::Slots slots;
    const kvpool_status st = kvtest::seq_extend(pool_, {r.seq}, {chunk}, &slots);
    if (st == KVPOOL_ERR_OUT_OF_MEMORY) {
      ++seen_["extend-oom"];
      return abort(r);
    }
    ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    ++seen_["extend"];
    r.extended = true;
    if (!write_kv_) return;
    // KV of the new tokens the request still holds, read back at once. Not all of `slots`:
    // where another thread cached the same tokens first, the extend freed its duplicates
    // (docs/prefix_cache.md), which any thread's next allocation may take and write.
    std::vector<int64_t> held(r.prompt.size());
    size_t n = 0;
    ASSERT_EQ(kvseq_get_slots(pool_, r.seq, held.data(), held.size(), &n), KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(n, r.prompt.size());
    std::vector<int64_t> own;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (held[r.cached + i] == slots[i]) own.push_back(slots[i]);
    }
    if (own.size() < slots.size()) ++seen_["extend-duplicates"];
    const std::vector<uint64_t> tags(own.size(), static_cast<uint64_t>(thread_));
    kvtest::write_tier_kv(pool_, own, tags);
    kvtest::expect_tier_kv(pool_, own, tags, "thread " + std::to_string(thread_));
  }

  void decode(Live& r) {
    const int32_t token = 7;
    int64_t slot = -1;
    const kvpool_status st = kvseq_decode(pool_, &r.seq, 1, &token, 1, &slot, 1);
    if (st == KVPOOL_ERR_OUT_OF_MEMORY) {
      ++seen_["decode-oom"];
      return abort(r);
    }
    ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    EXPECT_GT(slot, 0);
    ++seen_["decode"];
    --r.decodes;
  }

  void finish(Live& r) {
    kvseq_info info = KVSEQ_INFO_INIT;
    ASSERT_EQ(kvseq_get_info(pool_, r.seq, &info), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(info.tokens, info.computed);
    size_t n = 0;
    std::vector<int64_t> slots(info.computed);
    ASSERT_EQ(kvseq_get_slots(pool_, r.seq, slots.data(), slots.size(), &n), KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(n, info.computed);
    ASSERT_EQ(kvseq_finish(pool_, r.seq, info.computed), KVPOOL_OK) << kvpool_last_error();
    ++seen_["finish"];
    forget(r);
  }

  void abort(Live& r) {
    ASSERT_EQ(kvseq_abort(pool_, r.seq), KVPOOL_OK) << kvpool_last_error();
    ++seen_["abort"];
    forget(r);
  }

  void forget(Live& r) {
    const uint64_t seq = r.seq;
    for (size_t i = 0; i < live_.size(); ++i) {
      if (live_[i].seq == seq) {
        live_.erase(live_.begin() + static_cast<long>(i));
        return;
      }
    }
  }

  kvpool* pool_;
  int thread_;
  int shared_;
  bool write_kv_;
  std::mt19937 rng_;
  std::vector<Live> live_;
  std::map<std::string, int> seen_;
};

// Direct radix and allocator calls on an mha pool of page size `page`.
void radix_step(kvpool* pool, std::mt19937& rng, int thread, int step, int page, std::map<std::string, int>& seen) {
  const int op = static_cast<int>(rng() % 5);
  if (op == 0) {  // insert freshly allocated pages under a family prefix; free what the tree had
    kvtest::Tokens key = prompt_for(rng, thread, step, 16);
    key.resize(key.size() / static_cast<size_t>(page) * static_cast<size_t>(page));
    std::vector<int64_t> slots(key.size());
    const kvpool_status st = kvalloc_alloc(pool, slots.data(), slots.size());
    if (st == KVPOOL_ERR_OUT_OF_MEMORY) {
      ++seen["alloc-oom"];
      return;
    }
    ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    size_t prefix = 0;
    uint64_t node = 0;
    ASSERT_EQ(radix_insert(pool, key.data(), key.size(), slots.data(), slots.size(), nullptr, 0, &prefix, &node),
              KVPOOL_OK)
        << kvpool_last_error();
    ASSERT_EQ(kvalloc_free(pool, slots.data(), prefix), KVPOOL_OK) << kvpool_last_error();
    ++seen["insert"];
  } else if (op == 1) {  // match a family prefix, lock and unlock its node
    const kvtest::Tokens key = prompt_for(rng, thread, step, 16);
    std::vector<int64_t> slots(key.size());
    size_t matched = 0;
    uint64_t node = 0;
    ASSERT_EQ(radix_match(pool, key.data(), key.size(), nullptr, slots.data(), slots.size(), &matched, &node), KVPOOL_OK)
        << kvpool_last_error();
    for (size_t i = 0; i < matched; ++i) EXPECT_GT(slots[i], 0);
    if (matched > 0) {
      ++seen["match-hit"];
      // Another thread may have evicted the node since the match: a stale handle is refused.
      const kvpool_status st = radix_lock(pool, node);
      if (st == KVPOOL_ERR_INVALID_ARGUMENT) {
        ++seen["stale-node"];
        return;
      }
      ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(radix_unlock(pool, node), KVPOOL_OK) << kvpool_last_error();
    }
  } else if (op == 2) {
    size_t evicted = 0;
    ASSERT_EQ(radix_evict(pool, static_cast<size_t>(page) * (1 + rng() % 8), &evicted), KVPOOL_OK) << kvpool_last_error();
    ++seen["evict"];
  } else if (op == 3) {  // allocator churn: one page and back
    std::vector<int64_t> slots(static_cast<size_t>(page));
    const kvpool_status st = kvalloc_alloc(pool, slots.data(), slots.size());
    if (st == KVPOOL_ERR_OUT_OF_MEMORY) return;
    ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(kvalloc_free(pool, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
    ++seen["alloc-free"];
  } else {  // the cheap read-only queries
    size_t tokens = 0;
    ASSERT_EQ(kvalloc_available(pool, &tokens), KVPOOL_OK) << kvpool_last_error();
    int32_t kind = -1;
    ASSERT_EQ(kvalloc_get_kind(pool, &kind), KVPOOL_OK);
    size_t rows = 0;
    ASSERT_EQ(kvreq_available(pool, &rows), KVPOOL_OK);
    kvpool_buffer buffer = KVPOOL_BUFFER_INIT;
    ASSERT_EQ(kvpool_get_buffer(pool, KVPOOL_BUFFER_K, 0, &buffer), KVPOOL_OK) << kvpool_last_error();
    ++seen["queries"];
  }
}

// Readers: invariants and the stateless page hash, until every worker is done.
void reader_loop(kvpool* pool, bool has_radix, const std::atomic<bool>& done) {
  const kvtest::Tokens tokens = kvtest::range(5, 16);
  uint8_t expected[32];
  ASSERT_EQ(radix_page_hash(tokens.data(), tokens.size(), nullptr, 0, expected, sizeof expected, nullptr), KVPOOL_OK);
  for (int round = 0; !done.load(); ++round) {
    check_invariants(pool, has_radix, round);
    uint8_t digest[32];
    ASSERT_EQ(radix_page_hash(tokens.data(), tokens.size(), nullptr, 0, digest, sizeof digest, nullptr), KVPOOL_OK);
    EXPECT_EQ(std::memcmp(digest, expected, sizeof digest), 0);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// After the threads: the accounting identity exactly, the self-check, and (radix) every
// slot back once the tree is evicted.
void expect_settled(kvpool* pool, bool evict_all) {
  EXPECT_TRUE(kvtest::accounting_holds(pool, "after the threads"));
  if (!evict_all) return;
  kvpool_stats s = KVPOOL_STATS_INIT;
  ASSERT_EQ(kvpool_get_stats(pool, &s), KVPOOL_OK);
  size_t evicted = 0;
  ASSERT_EQ(radix_evict(pool, s.token_capacity, &evicted), KVPOOL_OK) << kvpool_last_error();
  ASSERT_EQ(kvpool_get_stats(pool, &s), KVPOOL_OK);
  EXPECT_EQ(s.token_held, 0u) << "every slot is the allocator's again";
  EXPECT_EQ(s.token_available, s.token_capacity);
  EXPECT_EQ(s.req_available, s.req_capacity);
  EXPECT_TRUE(kvtest::accounting_holds(pool, "after evicting everything"));
}

TEST(ThreadSafePool, HammeredFromManyThreads) {
  constexpr int kPage = 4;
  constexpr int kSteps = 1000;
  kvtest::Pool pool(mha_safe(kPage, 2048));
  ASSERT_NE(pool.get(), nullptr);
  std::mutex mutex;
  std::map<std::string, int> seen;
  run_threads(
      [&](int t) {
        SeqWorker seqs(pool, t, 16, true);
        std::mt19937 rng(99u + static_cast<unsigned>(t));
        std::map<std::string, int> mine;
        for (int i = 0; i < kSteps && !::testing::Test::HasFatalFailure(); ++i) {
          if (rng() % 3 == 0) {
            radix_step(pool, rng, t, i, kPage, mine);
          } else {
            seqs.step(i);
          }
        }
        seqs.drain();
        std::lock_guard<std::mutex> lock(mutex);
        for (const auto& [k, v] : mine) seen[k] += v;
        for (const auto& [k, v] : seqs.seen()) seen[k] += v;
      },
      [&](int, const std::atomic<bool>& done) { reader_loop(pool, true, done); });
  std::string counts;
  for (const auto& [k, v] : seen) counts += " " + k + "=" + std::to_string(v);
  std::printf("operations:%s\n", counts.c_str());
  for (const char* op : {"begin", "extend", "decode", "finish", "prefix-hit", "insert", "match-hit", "evict",
                         "alloc-free", "queries"}) {
    EXPECT_GT(seen[op], 0) << op << " never happened";
  }
  expect_settled(pool, true);
}

// The kvseq mix alone on the other families (their Sequences, trees and allocators).
class EveryKvseqFamily : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryKvseqFamily, HammeredFromManyThreads) {
  const std::string family = GetParam();
  std::string json;
  if (family == "mha") json = mha_safe(1, 1024);
  if (family == "swa") json = with_thread_safe(kvtest::swa_radix_config(1024, 512, 8, 32, 512));
  if (family == "hybrid") json = with_thread_safe(kvtest::hybrid_radix_config(1024, 160, 32, 512));
  kvtest::Pool pool(json);
  ASSERT_NE(pool.get(), nullptr);
  std::atomic<int> finished{0};
  run_threads(
      [&](int t) {
        SeqWorker seqs(pool, t, 12, family != "hybrid");
        for (int i = 0; i < 200 && !::testing::Test::HasFatalFailure(); ++i) seqs.step(i);
        seqs.drain();
        finished += seqs.seen()["finish"];
      },
      [&](int, const std::atomic<bool>& done) { reader_loop(pool, true, done); });
  EXPECT_GT(finished.load(), 0);
  expect_settled(pool, false);
}

INSTANTIATE_TEST_SUITE_P(Families, EveryKvseqFamily, ::testing::Values("mha", "swa", "hybrid"));

// ---- storage tier: library threads and user callbacks --------------------------------

struct ReentrantBackend {
  std::mutex mu;
  std::map<std::string, std::vector<uint8_t>> values;
  std::atomic<kvpool*> pool{nullptr};
  std::atomic<int> calls{0}, refused{0}, other{0};
  std::mutex message_mu;
  std::string message;

  // A callback calls back into its pool (storage.h forbids it): refused at once.
  void call_back() {
    kvpool* p = pool.load();
    if (p == nullptr) return;
    ++calls;
    kvpool_stats s = KVPOOL_STATS_INIT;
    const kvpool_status st = kvpool_get_stats(p, &s);
    if (st == KVPOOL_ERR_UNSUPPORTED) {
      ++refused;
      std::lock_guard<std::mutex> lock(message_mu);
      message = kvpool_last_error();
    } else {
      ++other;
    }
  }
};

void re_put(void* user, const char* const* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
            int32_t* results) {
  auto* b = static_cast<ReentrantBackend*>(user);
  b->call_back();
  std::lock_guard<std::mutex> lock(b->mu);
  for (size_t i = 0; i < n; ++i) {
    b->values.emplace(keys[i], std::vector<uint8_t>(values[i], values[i] + sizes[i]));
    results[i] = KVSTORE_OK;
  }
}

void re_get(void* user, const char* const* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
            int32_t* results) {
  auto* b = static_cast<ReentrantBackend*>(user);
  b->call_back();
  std::lock_guard<std::mutex> lock(b->mu);
  for (size_t i = 0; i < n; ++i) {
    const auto it = b->values.find(keys[i]);
    if (it == b->values.end()) {
      results[i] = KVSTORE_MISS;
      continue;
    }
    const size_t m = std::min(it->second.size(), capacity[i]);
    std::memcpy(dst[i], it->second.data(), m);
    sizes[i] = it->second.size();
    results[i] = KVSTORE_OK;
  }
}

size_t re_exists(void* user, const char* const* keys, size_t n) {
  auto* b = static_cast<ReentrantBackend*>(user);
  b->call_back();
  std::lock_guard<std::mutex> lock(b->mu);
  size_t found = 0;
  while (found < n && b->values.count(keys[found]) != 0) ++found;
  return found;
}

int32_t re_clear(void* user) {
  auto* b = static_cast<ReentrantBackend*>(user);
  b->call_back();  // on the thread of kvstore_clear(), which holds the pool's lock
  std::lock_guard<std::mutex> lock(b->mu);
  b->values.clear();
  return KVSTORE_OK;
}

TEST(ThreadSafePool, StorageCallbacksAreRefusedNotDeadlocked) {
  ReentrantBackend b;
  kvstore_backend table{};
  table.struct_size = sizeof table;
  table.user = &b;
  table.put = re_put;
  table.get = re_get;
  table.exists_prefix = re_exists;
  table.clear = re_clear;
  const std::string json =
      R"({"model": {"name": "tiny", "num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 4, "max_total_tokens": 256, "max_running_requests": 16, "max_context_len": 128, "thread_safe": true},
      "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 4, "headroom_bytes": 0},
      "storage": {"backend": "custom", "prefetch_threshold_tokens": 8}})";
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create_with_storage(json.data(), json.size(), &table, &pool), KVPOOL_OK) << kvpool_last_error();
  b.pool = pool;
  run_threads(
      [&](int t) {
        std::mt19937 rng(7u + static_cast<unsigned>(t));
        for (int i = 0; i < 30 && !::testing::Test::HasFatalFailure(); ++i) {
          const int op = static_cast<int>(rng() % 4);
          kvtest::Tokens prompt = prompt_for(rng, t, i, 16);
          if (op == 0) {
            ASSERT_EQ(kvstore_flush(pool), KVPOOL_OK) << kvpool_last_error();  // waits for the storage threads
          } else if (op == 1) {
            uint64_t id = 0;
            int32_t skipped = 0;
            ASSERT_EQ(kvstore_prefetch(pool, prompt.data(), prompt.size(), nullptr, &id, &skipped), KVPOOL_OK)
                << kvpool_last_error();
            if (id != 0) {
              kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
              ASSERT_EQ(kvstore_prefetch_poll(pool, id, &info), KVPOOL_OK) << kvpool_last_error();
              uint64_t inserted = 0;
              ASSERT_EQ(kvstore_prefetch_end(pool, id, &inserted), KVPOOL_OK) << kvpool_last_error();
            }
          } else if (op == 2 && t == 0 && i % 10 == 0) {
            ASSERT_EQ(kvstore_clear(pool), KVPOOL_OK) << kvpool_last_error();
          } else {  // a request that computes its prompt and finishes: host copies, then backups
            uint64_t seq = 0;
            size_t cached = 0;
            const kvpool_status st = kvseq_begin(pool, prompt.data(), prompt.size(), nullptr, &seq, &cached);
            if (st == KVPOOL_ERR_OUT_OF_MEMORY) continue;
            ASSERT_EQ(st, KVPOOL_OK) << kvpool_last_error();
            const int64_t chunk = static_cast<int64_t>(prompt.size() - cached);
            std::vector<int64_t> slots(static_cast<size_t>(chunk));
            const kvpool_status ext = kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size());
            if (ext == KVPOOL_ERR_OUT_OF_MEMORY) {
              ASSERT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
              continue;
            }
            ASSERT_EQ(ext, KVPOOL_OK) << kvpool_last_error();
            ASSERT_EQ(kvseq_finish(pool, seq, prompt.size()), KVPOOL_OK) << kvpool_last_error();
            size_t done = 0;
            ASSERT_EQ(kvhost_poll(pool, 0, &done), KVPOOL_OK) << kvpool_last_error();
          }
        }
      },
      [&](int, const std::atomic<bool>& done) {
        for (int round = 0; !done.load(); ++round) {
          kvstore_stats s = KVSTORE_STATS_INIT;
          ASSERT_EQ(kvstore_get_stats(pool, &s), KVPOOL_OK) << kvpool_last_error();
          kvhost_stats h = KVHOST_STATS_INIT;
          ASSERT_EQ(kvhost_get_stats(pool, &h), KVPOOL_OK) << kvpool_last_error();
          EXPECT_LE(h.used_tokens, h.capacity_tokens);
          check_invariants(pool, true, round);
          if (::testing::Test::HasFatalFailure()) return;
        }
      });
  ASSERT_EQ(kvstore_flush(pool), KVPOOL_OK) << kvpool_last_error();
  kvstore_stats s = KVSTORE_STATS_INIT;
  ASSERT_EQ(kvstore_get_stats(pool, &s), KVPOOL_OK) << kvpool_last_error();
  EXPECT_GT(s.store_puts, 0u) << "the storage threads ran callbacks";
  EXPECT_GT(b.calls.load(), 0);
  EXPECT_EQ(b.refused.load(), b.calls.load()) << "every call from a callback is refused";
  EXPECT_EQ(b.other.load(), 0);
  EXPECT_NE(b.message.find("kvpool_get_stats: called from inside a kvpool callback"), std::string::npos) << b.message;
  b.pool = nullptr;
  char report[4096];
  EXPECT_EQ(kvpool_check(pool, report, sizeof report), KVPOOL_OK) << report;
  kvpool_destroy(pool);
}

// Without the key a pool has no lock: a callback's call is not refused (storage.h still
// forbids it; here nothing else runs, so it is harmless) -- the key is off by default.
TEST(ThreadSafePool, OffByDefault) {
  ReentrantBackend b;
  kvstore_backend table{};
  table.struct_size = sizeof table;
  table.user = &b;
  table.put = re_put;
  table.get = re_get;
  table.exists_prefix = re_exists;
  table.clear = re_clear;
  const std::string json =
      R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32", "page_size": 4,
      "max_total_tokens": 256, "max_running_requests": 8, "max_context_len": 128},
      "host_cache": {"ratio": 4, "headroom_bytes": 0}, "storage": {"backend": "custom"}})";
  kvpool* pool = nullptr;
  ASSERT_EQ(kvpool_create_with_storage(json.data(), json.size(), &table, &pool), KVPOOL_OK) << kvpool_last_error();
  b.pool = pool;
  ASSERT_EQ(kvstore_clear(pool), KVPOOL_OK) << kvpool_last_error();  // the callback runs on this thread
  EXPECT_EQ(b.calls.load(), 1);
  EXPECT_EQ(b.other.load(), 1) << "not refused: " << b.message;
  b.pool = nullptr;
  kvpool_destroy(pool);

  // The same pool with "thread_safe": true refuses it.
  std::string safe = json;
  safe.insert(safe.find("\"page_size\""), "\"thread_safe\": true, ");
  ASSERT_EQ(kvpool_create_with_storage(safe.data(), safe.size(), &table, &pool), KVPOOL_OK) << kvpool_last_error();
  b.pool = pool;
  ASSERT_EQ(kvstore_clear(pool), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(b.refused.load(), 1);
  EXPECT_NE(b.message.find("kvpool_get_stats: called from inside a kvpool callback"), std::string::npos) << b.message;
  b.pool = nullptr;
  kvpool_destroy(pool);
}

// A malformed value fails the configuration with a precise message.
TEST(ThreadSafePool, KeyMustBeABoolean) {
  for (const char* bad : {"\"yes\"", "1", "null", "[true]"}) {
    const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"max_total_tokens": 64,
        "max_context_len": 64, "thread_safe": )" + std::string(bad) + "}}";
    kvpool* pool = nullptr;
    EXPECT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_ERR_CONFIG) << bad;
    EXPECT_EQ(pool, nullptr);
    const std::string message = kvpool_last_error();
    EXPECT_NE(message.find("$.pool.thread_safe: got "), std::string::npos) << message;
    EXPECT_NE(message.find(", expected true or false"), std::string::npos) << message;
  }
}

}  // namespace
