// Failure injection over the random kvseq workload (begin / extend / decode /
// finish / abort / retract) on every pool family that has requests.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.hpp"
#include "../unit/seq_test_util.hpp"
#include "fault_driver.hpp"

namespace {

using kvfault::Out;
using kvfault::Twin;
using kvtest::Tokens;

struct Shape {
  size_t max_live;
  int shared, own;
  int64_t max_chunk;
  bool prefetch = false;  // kvstore_prefetch (and its end) before every begin: pools with storage
};

void refresh(Twin& t, const std::vector<uint64_t>& live) { t.opts.seqs = live; }

kvseq_info info(kvpool* pool, uint64_t seq) {
  kvseq_info i = KVSEQ_INFO_INIT;
  EXPECT_EQ(kvseq_get_info(pool, seq, &i), KVPOOL_OK) << kvpool_last_error();
  return i;
}

// Waits (up to 10 s) until the storage thread has finished prefetch `id` of `pool`.
void wait_prefetch(kvpool* pool, uint64_t id) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  kvstore_prefetch_info i = KVSTORE_PREFETCH_INFO_INIT;
  while (kvstore_prefetch_poll(pool, id, &i) == KVPOOL_OK && i.done == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_NE(i.done, 0) << "prefetch " << id << " did not finish: " << kvpool_last_error();
}

// SGLang's arrival flow for a prompt: kvstore_prefetch, the reads finish (waited for in
// both pools alike, so the outcome does not depend on timing), kvstore_prefetch_end.
void prefetch(Twin& t, const Tokens& prompt, std::map<std::string, int>& seen) {
  Out started;
  t.call(
      "kvstore_prefetch", 2,
      [&](kvpool* p, Out& o) {
        uint64_t id = 0;
        int32_t skipped = -1;
        const kvpool_status s = kvstore_prefetch(p, prompt.data(), prompt.size(), nullptr, &id, &skipped);
        o[0] = static_cast<int64_t>(id);
        o[1] = skipped;
        return s;
      },
      &started);
  const uint64_t id = static_cast<uint64_t>(started[0]);
  if (id == 0) {
    ++seen["prefetch-skipped"];
    return;
  }
  wait_prefetch(t.a(), id);
  wait_prefetch(t.b(), id);
  Out inserted;
  EXPECT_EQ(t.call(
                "kvstore_prefetch_end", 1,
                [&](kvpool* p, Out& o) {
                  uint64_t n = 0;
                  const kvpool_status s = kvstore_prefetch_end(p, id, &n);
                  o[0] = static_cast<int64_t>(n);
                  return s;
                },
                &inserted),
            KVPOOL_OK);
  ++seen[inserted[0] > 0 ? "prefetch-hit" : "prefetch-empty"];
}

// kvtest::random_workload's steps, each public call driven through the injector.
std::map<std::string, int> run(Twin& t, unsigned seed, int steps, const Shape& shape) {
  std::mt19937 rng(seed);
  std::vector<uint64_t> live;
  std::map<std::string, int> seen;
  for (int step = 0; step < steps && t.ok(); ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 3 && live.size() < shape.max_live) {
      Tokens prompt;
      const int family = static_cast<int>(rng() % 4), n_shared = static_cast<int>(rng() % static_cast<unsigned>(shape.shared));
      for (int i = 0; i < n_shared; ++i) prompt.push_back(family * 1000 + i);
      const int n_own = 1 + static_cast<int>(rng() % static_cast<unsigned>(shape.own));
      for (int i = 0; i < n_own; ++i) prompt.push_back(static_cast<int32_t>(rng() % 3) + 100000);
      if (shape.prefetch) prefetch(t, prompt, seen);
      Out out;
      const kvpool_status st = t.call(
          "kvseq_begin", 2,
          [&](kvpool* p, Out& o) {
            uint64_t seq = 0;
            size_t cached = 0;
            const kvpool_status s = kvseq_begin(p, prompt.data(), prompt.size(), nullptr, &seq, &cached);
            o[0] = static_cast<int64_t>(seq);
            o[1] = static_cast<int64_t>(cached);
            return s;
          },
          &out);
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      if (st == KVPOOL_OK) live.push_back(static_cast<uint64_t>(out[0]));
      ++seen[st == KVPOOL_OK ? "begin" : "begin-oom"];
    } else if (op < 6 && !live.empty()) {
      std::vector<uint64_t> batch;
      std::vector<int64_t> chunks;
      for (uint64_t s : live) {
        const kvseq_info i = info(t.b(), s);
        if (i.computed < i.tokens && rng() % 2 == 0) {
          batch.push_back(s);
          int64_t chunk = 1 + static_cast<int64_t>(rng() % (i.tokens - i.computed));
          if (shape.max_chunk > 0 && chunk > shape.max_chunk) chunk = shape.max_chunk;
          chunks.push_back(chunk);
        }
      }
      if (batch.empty()) continue;
      const size_t total = static_cast<size_t>(std::accumulate(chunks.begin(), chunks.end(), int64_t{0}));
      const kvpool_status st = t.call("kvseq_extend", total, [&](kvpool* p, Out& o) {
        return kvseq_extend(p, batch.data(), batch.size(), chunks.data(), chunks.size(), o.data(), o.size());
      });
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      ++seen[st == KVPOOL_OK ? "extend" : "extend-oom"];
    } else if (op < 8 && !live.empty()) {
      std::vector<uint64_t> batch;
      for (uint64_t s : live) {
        const kvseq_info i = info(t.b(), s);
        if (i.computed == i.tokens && i.row >= 0 && i.tokens < 500) batch.push_back(s);
      }
      if (batch.empty()) continue;
      Tokens toks(batch.size());
      for (auto& x : toks) x = static_cast<int32_t>(rng() % 2);
      const kvpool_status st = t.call("kvseq_decode", batch.size(), [&](kvpool* p, Out& o) {
        return kvseq_decode(p, batch.data(), batch.size(), toks.data(), toks.size(), o.data(), o.size());
      });
      EXPECT_TRUE(st == KVPOOL_OK || st == KVPOOL_ERR_OUT_OF_MEMORY) << kvpool_last_error();
      ++seen[st == KVPOOL_OK ? "decode" : "decode-oom"];
      if (st == KVPOOL_ERR_OUT_OF_MEMORY) {
        const uint64_t victim = batch.back();
        EXPECT_EQ(t.call("kvseq_retract", 1,
                         [&](kvpool* p, Out& o) {
                           size_t cached = 0;
                           const kvpool_status s = kvseq_retract(p, victim, &cached);
                           o[0] = static_cast<int64_t>(cached);
                           return s;
                         }),
                  KVPOOL_OK);
        ++seen["retract"];
      }
    } else if (!live.empty()) {
      const size_t k = rng() % live.size();
      const uint64_t seq = live[k];
      const kvseq_info i = info(t.b(), seq);
      if (rng() % 4 == 0) {
        EXPECT_EQ(t.call("kvseq_abort", 0, [&](kvpool* p, Out&) { return kvseq_abort(p, seq); }), KVPOOL_OK);
        ++seen["abort"];
      } else {
        const size_t committed = i.computed - (i.computed > 0 && rng() % 3 == 0 ? 1 : 0);
        EXPECT_EQ(t.call("kvseq_finish", 0, [&](kvpool* p, Out&) { return kvseq_finish(p, seq, committed); }),
                  KVPOOL_OK);
        ++seen["finish"];
      }
      live.erase(live.begin() + static_cast<long>(k));
    }
    refresh(t, live);
  }
  for (uint64_t s : live) {
    EXPECT_EQ(t.call("kvseq_abort", 0, [&](kvpool* p, Out&) { return kvseq_abort(p, s); }), KVPOOL_OK);
  }
  t.opts.seqs.clear();
  EXPECT_TRUE(kvtest::accounting_holds(t.a(), t.sum.name + " end"));
  return seen;
}

void expect_ops(std::map<std::string, int>& seen, std::initializer_list<const char*> ops, const std::string& name) {
  for (const char* op : ops) EXPECT_GT(seen[op], 0) << name << ": no " << op;
}

// Without a prefix tree: the request layer and the allocators alone.
TEST(FaultSeq, MhaPage1NoCache) {
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 1, "max_total_tokens": 48, "max_running_requests": 8, "max_context_len": 512},
      "prefix_cache": {"kind": "none"}})";
  Twin t(json, "kvseq mha page 1 no cache");
  auto seen = run(t, 1, 400, {10, 7, 3, 0});
  expect_ops(seen, {"begin", "extend", "extend-oom", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

TEST(FaultSeq, MhaPage16NoCache) {
  const std::string json = R"({"model": {"num_layers": 2, "kv_heads": 2, "head_dim": 8}, "pool": {"kv_dtype": "f32",
      "page_size": 16, "max_total_tokens": 768, "max_running_requests": 8, "max_context_len": 512},
      "prefix_cache": {"kind": "none"}})";
  Twin t(json, "kvseq mha page 16 no cache");
  auto seen = run(t, 16, 400, {10, 52, 34, 0});
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

TEST(FaultSeq, MhaPage1Radix) {
  Twin t(kvtest::mha_config(1, 48, "none", 8, 512), "kvseq mha page 1 radix");
  auto seen = run(t, 1, 400, {10, 7, 3, 0});
  expect_ops(seen, {"begin", "extend", "extend-oom", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

TEST(FaultSeq, MhaPage16Radix) {
  Twin t(kvtest::mha_config(16, 48 * 16, "none", 8, 512), "kvseq mha page 16 radix");
  auto seen = run(t, 16, 400, {10, 52, 34, 0});
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

// The host tier on: begins load host-only prefixes back (device eviction and copies
// inside kvseq_begin), extends note backups that a later call starts. The picture adds
// the tier's sizes and counters, so a failed call must leave those unchanged too. The
// copies a successful call starts afterwards are best effort (an allocation failure
// there leaves them pending, the call's result stands), so the picture first starts
// whatever is pending (kvhost_poll, without injection) in both pools alike.
void run_host_tier(const char* policy) {
  std::string json = kvtest::mha_config(4, 48 * 4, "none", 8, 512);
  json.insert(json.size() - 1, std::string(R"(, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 3, "headroom_bytes": 0,
      "write_policy": ")") + policy + "\"}");
  Twin t(json, std::string("kvseq mha page 4 host tier ") + policy);
  t.extra = [](kvpool* p) {
    if (kvhost_poll(p, 0, nullptr) != KVPOOL_OK) return std::string(" poll: ") + kvpool_last_error();
    kvhost_stats s = KVHOST_STATS_INIT;
    if (kvhost_get_stats(p, &s) != KVPOOL_OK) return std::string(" host: ") + kvpool_last_error();
    return " host used " + std::to_string(s.used_tokens) + " host-only " + std::to_string(s.host_only_tokens) +
           " backups " + std::to_string(s.backup_tokens) + " loads " + std::to_string(s.load_tokens);
  };
  auto seen = run(t, 4, 400, {10, 28, 12, 0});
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  kvhost_stats s = KVHOST_STATS_INIT;
  ASSERT_EQ(kvhost_get_stats(t.a(), &s), KVPOOL_OK);
  EXPECT_GT(s.load_tokens, 0u) << "the workload must load prefixes back from the host";
  t.sum.print();
}

TEST(FaultSeq, MhaPage4HostTierWriteThrough) { run_host_tier("write_through"); }

// A kvseq workload on a tiered pool: a backup that ran out of memory inside a successful
// call is retried by kvhost_poll, so the picture first retries (without injection) in both
// pools alike. With KV events on, the picture counts the queued events too: a failed call
// queues none.
std::string queued_events(kvpool* p) {
  size_t events = 0, tokens = 0;
  radix_event none{};
  int32_t no_token = 0;
  const kvpool_status st = radix_take_events(p, &none, 0, &events, &no_token, 0, &tokens);
  if (st != KVPOOL_OK && st != KVPOOL_ERR_BUFFER_TOO_SMALL) return std::string(" events: ") + kvpool_last_error();
  return " events " + std::to_string(events) + "/" + std::to_string(tokens);
}

// Every tiered workload must copy nodes to the host (under write_back: at device eviction),
// so that a policy whose copies never ran cannot pass unnoticed; with `loads`, it must also
// load prefixes back from the host, with `host_evicts`, evict host-only nodes to make room.
void run_tiered(std::string json, const std::string& name, unsigned seed, const Shape& shape, bool events, bool loads,
                bool host_evicts = false) {
  if (events) json.replace(json.find(R"("kind": "radix")"), 15, R"("kind": "radix", "events": true)");
  Twin t(json, name + (events ? " + events" : ""));
  t.extra = [events](kvpool* p) {
    if (kvhost_poll(p, 0, nullptr) != KVPOOL_OK) return std::string(" poll: ") + kvpool_last_error();
    kvhost_stats s = KVHOST_STATS_INIT;
    if (kvhost_get_stats(p, &s) != KVPOOL_OK) return std::string(" host: ") + kvpool_last_error();
    return " host used " + std::to_string(s.used_tokens) + " host-only " + std::to_string(s.host_only_tokens) +
           " backups " + std::to_string(s.backup_tokens) + " loads " + std::to_string(s.load_tokens) +
           (events ? queued_events(p) : std::string());
  };
  auto seen = run(t, seed, 400, shape);
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  kvhost_stats s = KVHOST_STATS_INIT;
  ASSERT_EQ(kvhost_get_stats(t.a(), &s), KVPOOL_OK);
  EXPECT_GT(s.backup_tokens, 0u) << "the workload must copy nodes to the host";
  if (loads) {
    EXPECT_GT(s.load_tokens, 0u) << "the workload must load prefixes back from the host";
  }
  if (host_evicts) {
    EXPECT_GT(s.host_evicted_tokens, 0u) << "the workload must fill the host tier and evict from it";
  }
  std::printf("[fault] %s: host backup tokens %llu load tokens %llu host-evicted tokens %llu\n", t.sum.name.c_str(),
              static_cast<unsigned long long>(s.backup_tokens), static_cast<unsigned long long>(s.load_tokens),
              static_cast<unsigned long long>(s.host_evicted_tokens));
  if (events) {
    EXPECT_NE(queued_events(t.a()), " events 0/0") << "the workload must queue KV events";
  }
  t.sum.print();
}

// hybrid_linear with the host tier: the mamba radix tree's full-attention KV is tiered
// (copies made and waited for inside inserts and begins), states stay on the device.
// 48 KV tokens for prompts of up to 24 + 12 tokens keep the device full, so that device
// eviction keeps nodes on the host (under write_back it copies them there first) and
// begins load them back; 40 states leave host-only nodes theirs, so a match can end there.
// Under write_through_selective its prompts are rarely hit twice before the device evicts
// them: nothing long enough to load reaches the host.
// `host_full`: a host tier barely larger than the device's (ratio 1.1), so that it fills
// and a write_back copy at device eviction first evicts host-only nodes; seed 9 also has a
// begin whose load-back evicts and then restores (the restore's events once grew the
// queue after that eviction).
void run_hybrid_host_tier(const char* policy, bool events = false, bool host_full = false) {
  std::string json = kvtest::hybrid_radix_config(48, 40, 4, 512);
  json.insert(json.size() - 1, std::string(R"(, "host_cache": {"ratio": )") + (host_full ? "1.1" : "3") +
                                   R"(, "headroom_bytes": 0, "write_policy": ")" + policy + "\"}");
  run_tiered(json, std::string("kvseq hybrid_linear host tier ") + policy + (host_full ? " host full" : ""),
             host_full ? 9 : 1, {24, 24, 12, 5}, events, std::string(policy) != "write_through_selective", host_full);
}

TEST(FaultSeq, HybridLinearHostTierWriteThrough) { run_hybrid_host_tier("write_through"); }
TEST(FaultSeq, HybridLinearHostTierWriteBack) { run_hybrid_host_tier("write_back"); }
TEST(FaultSeq, HybridLinearHostTierWriteThroughEvents) { run_hybrid_host_tier("write_through", true); }
TEST(FaultSeq, HybridLinearHostTierWriteBackEvents) { run_hybrid_host_tier("write_back", true); }
TEST(FaultSeq, HybridLinearHostTierWriteThroughSelective) { run_hybrid_host_tier("write_through_selective"); }
// A full host tier: the write_back copy inside device eviction first evicts host-only
// nodes (their HostRemoved events included), which must not allocate either.
TEST(FaultSeq, HybridLinearHostTierWriteBackHostFull) { run_hybrid_host_tier("write_back", false, true); }
TEST(FaultSeq, HybridLinearHostTierWriteBackHostFullEvents) { run_hybrid_host_tier("write_back", true, true); }
TEST(FaultSeq, MhaPage4HostTierWriteBack) { run_host_tier("write_back"); }

// The storage tier on top (file backend, each pool its own directory): kvseq calls queue
// backups after the host copies land, and every begin is preceded by a prefetch and its
// end. The storage threads' own work is outside the injection (it counts the calling
// thread's allocations only); settle flushes it before each call in both pools, so the
// backups have landed alike. The picture adds the counters the calls change themselves.
TEST(FaultSeq, MhaPage4HostTierStorage) {
  kvtest::TempDir dir_a, dir_b;
  auto config = [](const std::string& dir) {
    std::string json = kvtest::mha_config(4, 48 * 4, "none", 8, 512);
    json.insert(json.size() - 1, R"(, "prefix_cache": {"kind": "radix"}, "host_cache": {"ratio": 1.25, "headroom_bytes": 0,
        "layout": "page_first", "write_policy": "write_through"}, "storage": {"backend": "file", "path": ")" + dir +
                                     R"(", "prefetch_threshold_tokens": 4}})");
    return json;
  };
  Twin t(config(dir_a.path()), config(dir_b.path()), "kvseq mha page 4 host tier + file storage");
  t.settle = [](kvpool* p) { EXPECT_EQ(kvstore_flush(p), KVPOOL_OK) << kvpool_last_error(); };
  t.extra = [](kvpool* p) {
    kvhost_stats h = KVHOST_STATS_INIT;
    kvstore_stats s = KVSTORE_STATS_INIT;
    if (kvhost_get_stats(p, &h) != KVPOOL_OK || kvstore_get_stats(p, &s) != KVPOOL_OK) {
      return std::string(" stats: ") + kvpool_last_error();
    }
    return " host used " + std::to_string(h.used_tokens) + " host-only " + std::to_string(h.host_only_tokens) +
           " backups " + std::to_string(s.backups) + "/" + std::to_string(s.backup_tokens) + " prefetches " +
           std::to_string(s.prefetches) + " skipped " + std::to_string(s.prefetches_skipped) + " running " +
           std::to_string(s.prefetches_running) + " asked " + std::to_string(s.prefetch_tokens) + " inserted " +
           std::to_string(s.prefetch_inserted_tokens) + " dropped " + std::to_string(s.prefetch_dropped_tokens) +
           " storage hits " + std::to_string(s.storage_hit_tokens);
  };
  Shape shape{10, 28, 12, 0};
  shape.prefetch = true;
  auto seen = run(t, 5, 1000, shape);
  expect_ops(seen, {"begin", "extend", "decode", "finish", "prefetch-hit"}, t.sum.name);
  kvstore_stats s = KVSTORE_STATS_INIT;
  ASSERT_EQ(kvstore_get_stats(t.a(), &s), KVPOOL_OK);
  EXPECT_GT(s.storage_hit_tokens, 0u) << "requests must load prefixes that came from storage";
  t.sum.print();
}

TEST(FaultSeq, SwaNoCache) {
  Twin t(kvtest::swa_radix_config(96, 48, 4, 8, 512, "none"), "kvseq swa no cache");
  auto seen = run(t, 4, 400, {9, 16, 8, 5});
  expect_ops(seen, {"begin", "extend", "extend-oom", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

TEST(FaultSeq, HybridLinearMambaNoCache) {
  Twin t(kvtest::hybrid_radix_config(96, 20, 4, 512, "none"), "kvseq hybrid_linear no cache");
  auto seen = run(t, 7, 400, {24, 12, 6, 5});
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

// With their trees: SwaSequences::allocate frees out-of-window slots and then
// inserts, MambaSequences::cache_unfinished forks a state and then inserts, so
// both reserve the trees' memory before their first change.
TEST(FaultSeq, Swa) {
  Twin t(kvtest::swa_radix_config(96, 48, 4, 8, 512), "kvseq swa radix");
  auto seen = run(t, 4, 400, {9, 16, 8, 5});
  expect_ops(seen, {"begin", "extend", "extend-oom", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

TEST(FaultSeq, HybridLinearMamba) {
  Twin t(kvtest::hybrid_radix_config(96, 20, 4, 512), "kvseq hybrid_linear mamba radix");
  auto seen = run(t, 7, 400, {24, 12, 6, 5});
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

// swa with the host tier: begins load host-only chains back (a planned split of the top
// live node, device eviction, two host pools), inserts copy window tails. Prompts of up to
// 24 shared tokens make the chains that come back long enough to load under every policy.
// `host_full`: as run_hybrid_host_tier's.
void run_swa_host_tier(const char* policy, bool events = false, bool host_full = false, unsigned seed = 2) {
  std::string json = kvtest::swa_radix_config(96, 48, 4, 8, 512);
  json.insert(json.size() - 1, std::string(R"(, "host_cache": {"ratio": )") + (host_full ? "1.1" : "3") +
                                   R"(, "headroom_bytes": 0, "write_policy": ")" + policy + "\"}");
  run_tiered(json, std::string("kvseq swa host tier ") + policy + (host_full ? " host full" : ""), seed, {9, 24, 8, 5},
             events, true, host_full);
}

TEST(FaultSeq, SwaHostTierWriteThrough) { run_swa_host_tier("write_through"); }
TEST(FaultSeq, SwaHostTierWriteThroughEvents) { run_swa_host_tier("write_through", true); }
// write_back: device eviction copies a node's path to the host before it frees the device
// slots. That copy runs inside an eviction already under way, so it must not allocate (a
// node whose copy failed would be deleted, not kept: the call would succeed with another
// tree than the reference's, which the driver reports).
TEST(FaultSeq, SwaHostTierWriteBack) { run_swa_host_tier("write_back"); }
TEST(FaultSeq, SwaHostTierWriteBackEvents) { run_swa_host_tier("write_back", true); }
TEST(FaultSeq, SwaHostTierWriteThroughSelective) { run_swa_host_tier("write_through_selective"); }
// A full host tier: make_host_room evicts host-only nodes inside the write_back copy.
TEST(FaultSeq, SwaHostTierWriteBackHostFull) { run_swa_host_tier("write_back", false, true); }
TEST(FaultSeq, SwaHostTierWriteBackHostFullEvents) { run_swa_host_tier("write_back", true, true); }
// Seed 149 has a kvseq_begin whose load-back evicts for room but still cannot load: the
// eviction tombstoned the window above the first match's end (a device tombstone between
// that end and the host chain left it unpinned), and the begin, which locked that end, was
// refused after the eviction's changes (no injection needed). The begin now matches again.
TEST(FaultSeq, SwaHostTierWriteBackHostFullLoadNotMade) { run_swa_host_tier("write_back", false, true, 149); }

TEST(FaultSeq, Mla) {
  const std::string json =
      R"({"model": {"num_layers": 2, "attention": "mla", "kv_lora_rank": 16, "qk_rope_head_dim": 8},
          "pool": {"kv_dtype": "f32", "page_size": 4, "max_total_tokens": 192, "max_running_requests": 8,
                   "max_context_len": 512}, "prefix_cache": {"kind": "radix", "eviction": "lru"}})";
  Twin t(json, "kvseq mla page 4 radix");
  auto seen = run(t, 3, 400, {10, 13, 9, 0});
  expect_ops(seen, {"begin", "extend", "decode", "finish", "abort"}, t.sum.name);
  t.sum.print();
}

}  // namespace
