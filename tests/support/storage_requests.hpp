// Requests the storage-tier tests drive through the C API (tests/storage, tests/gpu):
// a request that computes its prompt and finishes (its pages go to the host tier and on
// to storage), a prefetch run to its end, and a begin whose loaded prefix must hold the
// prompt's own KV. KV rows come from host_tier_kv.hpp (mha f32, 2 layers x 2 heads x 8).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "host_tier_kv.hpp"
#include "kvpool/kvpool.h"

namespace kvtest {

inline void expect_checked(kvpool* pool, const char* where = "") {
  char report[4096];
  EXPECT_EQ(kvpool_check(pool, report, sizeof report), KVPOOL_OK) << where << "\n" << report;
}

inline kvstore_stats storage_stats(kvpool* pool) {
  kvstore_stats s = KVSTORE_STATS_INIT;
  EXPECT_EQ(kvstore_get_stats(pool, &s), KVPOOL_OK) << kvpool_last_error();
  return s;
}

// A request computes `prompt` past its cached prefix (KV tagged by prefix) and finishes;
// returns the seconds its kvseq calls took. The finish's backups start at the next call
// (kvhost_poll without waiting here); with `flush`, kvstore_flush then waits until they
// are stored.
inline double serve_request(kvpool* pool, const std::vector<int32_t>& prompt, const char* extra_key = nullptr,
                            bool flush = true) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t seq = 0;
  size_t cached = 0;
  EXPECT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), extra_key, &seq, &cached), KVPOOL_OK)
      << kvpool_last_error();
  const int64_t chunk = static_cast<int64_t>(prompt.size() - cached);
  std::vector<int64_t> slots(static_cast<size_t>(chunk));
  EXPECT_EQ(kvseq_extend(pool, &seq, 1, &chunk, 1, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
  const std::vector<uint64_t> tags = prefix_tags(prompt, prompt.size());
  write_tier_kv(pool, slots, std::vector<uint64_t>(tags.begin() + static_cast<long>(cached), tags.end()));
  EXPECT_EQ(kvseq_finish(pool, seq, prompt.size()), KVPOOL_OK) << kvpool_last_error();
  size_t done = 0;
  EXPECT_EQ(kvhost_poll(pool, 0, &done), KVPOOL_OK) << kvpool_last_error();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (flush) {
    EXPECT_EQ(kvstore_flush(pool), KVPOOL_OK) << kvpool_last_error();
  }
  expect_checked(pool, "after serving a request");
  return took;
}

// Prefetches `prompt`, polls until nothing more lands (at most 10 s; kvpool_check after
// every poll: the pages in flight are accounted for) and ends it; returns the tokens
// inserted (0 when nothing started; *skipped gets the reason).
inline uint64_t prefetch_to_end(kvpool* pool, const std::vector<int32_t>& prompt, const char* extra_key = nullptr,
                                int32_t* skipped = nullptr) {
  uint64_t id = 0;
  int32_t why = -1;
  EXPECT_EQ(kvstore_prefetch(pool, prompt.data(), prompt.size(), extra_key, &id, &why), KVPOOL_OK)
      << kvpool_last_error();
  if (skipped != nullptr) *skipped = why;
  if (id == 0) return 0;
  EXPECT_EQ(why, KVSTORE_SKIP_NONE);
  kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    EXPECT_EQ(kvstore_prefetch_poll(pool, id, &info), KVPOOL_OK) << kvpool_last_error();
    expect_checked(pool, "while a prefetch runs");
    if (!info.done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } while (!info.done && std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(info.done) << "the prefetch ends within 10 s";
  uint64_t inserted = 0;
  EXPECT_EQ(kvstore_prefetch_end(pool, id, &inserted), KVPOOL_OK) << kvpool_last_error();
  expect_checked(pool, "after a prefetch");
  return inserted;
}

// kvseq_begin of `prompt`: the slots of its prefix (loaded from any tier) hold the
// prompt's own KV; the request is aborted again; returns its info.
inline kvseq_info begin_and_check_kv(kvpool* pool, const std::vector<int32_t>& prompt, const char* extra_key = nullptr) {
  uint64_t seq = 0;
  size_t cached = 0;
  EXPECT_EQ(kvseq_begin(pool, prompt.data(), prompt.size(), extra_key, &seq, &cached), KVPOOL_OK)
      << kvpool_last_error();
  const Held held = held_by(pool, seq, prompt.size());
  expect_tier_kv(pool, held.slots, prefix_tags(prompt, held.slots.size()), "after begin");
  EXPECT_EQ(kvseq_abort(pool, seq), KVPOOL_OK);
  expect_checked(pool, "after begin");
  return held.info;
}

}  // namespace kvtest
