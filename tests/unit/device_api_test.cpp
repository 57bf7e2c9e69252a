// device.h allocator and request-table calls on CPU pools: they take host
// pointers, run at once and must give exactly what the host calls of alloc.h
// and req.h give (the CPU pool is the reference the CUDA engine is tested
// against in tests/gpu/gpu_device_alloc_test.cpp). Bad input returns an error
// and changes nothing. Also the configuration checks of pool.free_list.
#include <algorithm>
#include <chrono>
#include <random>
#include <string>

#include "test_util.hpp"

namespace {

using kvtest::free_list;
using kvtest::Pool;
using Slots = std::vector<int64_t>;

struct Extended {
  Slots slots, new_pages;
};

kvpool_status extend_async(kvpool* pool, const Slots& pre, const Slots& seq, const Slots& last, Extended* out,
                           size_t pages_cap = SIZE_MAX) {
  size_t total = 0, pages = 0;
  for (size_t i = 0; i < pre.size(); ++i) total += static_cast<size_t>(seq[i] - pre[i]);
  if (kvalloc_extend_pages(pool, pre.data(), seq.data(), pre.size(), &pages) != KVPOOL_OK) pages = 0;
  out->slots.assign(total, -7);
  out->new_pages.assign(pages_cap == SIZE_MAX ? pages : pages_cap, -7);
  return kvalloc_extend_async(pool, pre.data(), seq.data(), pre.size(), pre.data(), seq.data(), last.data(),
                              out->slots.data(), out->slots.size(), out->new_pages.data(), out->new_pages.size(),
                              nullptr);
}

kvpool_status decode_async(kvpool* pool, const Slots& seq, const Slots& last, Extended* out) {
  out->slots.assign(seq.size(), -7);
  out->new_pages.assign(seq.size(), -7);
  const kvpool_status st = kvalloc_decode_async(pool, seq.data(), seq.size(), seq.data(), last.data(),
                                                out->slots.data(), out->new_pages.data(), out->new_pages.size(), nullptr);
  size_t taken = 0;
  for (int64_t p : out->new_pages) taken += p != -7 ? 1 : 0;
  out->new_pages.resize(taken);
  return st;
}

// Frees pages one call at a time, so the free list front is `pages` in this order.
void make_free_list_front(kvpool* pool, const Slots& pages_last_first, int page_size) {
  for (int64_t page : pages_last_first) kvtest::free_slots(pool, {page * page_size + 1});
}

TEST(DeviceApiOnCpu, WorkedExampleOfSection2_4) {
  Pool pool(kvtest::mha_config(4, 64));
  kvtest::alloc(pool, 64);
  make_free_list_front(pool, {11, 3, 7, 2, 9, 5}, 4);
  ASSERT_EQ(free_list(pool), (Slots{5, 9, 2, 7, 3, 11}));

  size_t pages = 0;
  const Slots pre{6, 0, 8}, seq{13, 5, 10};
  ASSERT_EQ(kvalloc_extend_pages(pool, pre.data(), seq.data(), 3, &pages), KVPOOL_OK);
  EXPECT_EQ(pages, 5u);
  Extended e;
  ASSERT_EQ(extend_async(pool, pre, seq, {45, -1, 55}, &e), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(e.slots, (Slots{46, 47, 20, 21, 22, 23, 36, 8, 9, 10, 11, 28, 12, 13}));
  EXPECT_EQ(e.new_pages, (Slots{5, 9, 2, 7, 3}));
  EXPECT_EQ(free_list(pool), (Slots{11}));

  Extended d;
  ASSERT_EQ(decode_async(pool, {7, 9, 12}, {25, 39, 62}, &d), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(d.slots, (Slots{26, 44, 63}));
  EXPECT_EQ(d.new_pages, (Slots{11}));
  EXPECT_EQ(free_list(pool), Slots{});

  EXPECT_EQ(decode_async(pool, {13}, {63}, &d), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(d.slots, Slots{-7});

  // The batch's new pages go back sorted to the front (paged order).
  ASSERT_EQ(kvalloc_free_pages_async(pool, e.new_pages.data(), e.new_pages.size(), nullptr), KVPOOL_OK)
      << kvpool_last_error();
  EXPECT_EQ(free_list(pool), (Slots{2, 3, 5, 7, 9}));
  EXPECT_EQ(kvpool_synchronize(pool, nullptr), KVPOOL_OK);
  kvtest::expect_consistent(pool);
}

TEST(DeviceApiOnCpu, TokenAllocatorFreesAppendInOrder) {
  Pool pool(kvtest::mha_config(1, 8));
  Slots slots(5, -7);
  ASSERT_EQ(kvalloc_alloc_async(pool, slots.data(), slots.size(), nullptr), KVPOOL_OK);
  EXPECT_EQ(slots, (Slots{1, 2, 3, 4, 5}));
  const Slots back{4, 2};
  ASSERT_EQ(kvalloc_free_pages_async(pool, back.data(), back.size(), nullptr), KVPOOL_OK);
  EXPECT_EQ(free_list(pool), (Slots{6, 7, 8, 4, 2}));
  size_t pages = 0;
  const Slots pre{0, 3}, seq{2, 4};
  ASSERT_EQ(kvalloc_extend_pages(pool, pre.data(), seq.data(), 2, &pages), KVPOOL_OK);
  EXPECT_EQ(pages, 3u);  // page size 1: one "page" per token
  Extended e;
  ASSERT_EQ(extend_async(pool, pre, seq, {-1, 3}, &e), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(e.slots, (Slots{6, 7, 8}));
  EXPECT_EQ(e.new_pages, e.slots);
}

// --- the same random workload through device.h and through alloc.h ------------

struct Request {
  int64_t len = 0;
  Slots slots;  // token order
  Slots pages;  // the pages it holds, in the order they were taken
};

class RandomParity : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

// Pool `a` is driven through the *_async calls, pool `b` through the host calls.
TEST_P(RandomParity, AsyncCallsMatchHostCalls) {
  const int page = std::get<0>(GetParam());
  const char* mode = std::get<1>(GetParam());
  const uint64_t seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  SCOPED_TRACE("page " + std::to_string(page) + " mode " + mode + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string json = kvtest::mha_config(page, 512, mode, 8, 256);
  Pool a(json), b(json);
  std::vector<Request> live;
  auto rand = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto same_lists = [&] {
    EXPECT_EQ(free_list(a), free_list(b));
    EXPECT_EQ(free_list(a, KVALLOC_LIST_RELEASE), free_list(b, KVALLOC_LIST_RELEASE));
  };
  for (int step = 0; step < 300; ++step) {
    const int64_t op = rand(0, 9);
    if (op <= 3) {  // extend: new requests and continued ones
      std::vector<size_t> who;
      Slots pre, seq, last;
      const int64_t n = rand(1, 4);
      for (int64_t k = 0; k < n; ++k) {
        const bool cont = !live.empty() && rand(0, 1) == 1;
        size_t idx = 0;
        if (cont) {
          idx = static_cast<size_t>(rand(0, static_cast<int64_t>(live.size()) - 1));
          if (std::find(who.begin(), who.end(), idx) != who.end()) continue;
        } else {
          live.emplace_back();
          idx = live.size() - 1;
        }
        who.push_back(idx);
        const Request& r = live[idx];
        pre.push_back(r.len);
        seq.push_back(r.len + rand(0, 3 * page));
        last.push_back(r.len == 0 ? -1 : r.slots.back());
      }
      Extended e;
      const kvpool_status sa = extend_async(a, pre, seq, last, &e);
      Slots out(e.slots.size(), -7);
      const kvpool_status sb = kvalloc_extend(b, pre.data(), pre.size(), seq.data(), seq.size(), last.data(),
                                              last.size(), out.data(), out.size());
      ASSERT_EQ(sa, sb) << kvpool_last_error();
      EXPECT_EQ(e.slots, out);
      if (sa == KVPOOL_OK) {
        size_t o = 0, np = 0;
        for (size_t k = 0; k < who.size(); ++k) {
          Request& r = live[who[k]];
          for (int64_t t = pre[k]; t < seq[k]; ++t) {
            const int64_t slot = out[o++];
            if (t % page == 0) {  // starts a new page
              ASSERT_LT(np, e.new_pages.size());
              EXPECT_EQ(e.new_pages[np++], slot / page);
              r.pages.push_back(slot / page);
            }
            r.slots.push_back(slot);
          }
          r.len = seq[k];
        }
        EXPECT_EQ(np, e.new_pages.size());
      } else {
        EXPECT_EQ(sa, KVPOOL_ERR_OUT_OF_MEMORY);
        for (int64_t v : e.slots) EXPECT_EQ(v, -7);
        live.erase(std::remove_if(live.begin(), live.end(), [](const Request& r) { return r.len == 0; }), live.end());
      }
    } else if (op <= 5 && !live.empty()) {  // decode the requests that have tokens
      std::vector<size_t> who;
      Slots seq, last;
      for (size_t i = 0; i < live.size(); ++i) {
        if (live[i].len == 0 || rand(0, 2) == 0) continue;
        who.push_back(i);
        seq.push_back(live[i].len + 1);
        last.push_back(live[i].slots.back());
      }
      Extended d;
      const kvpool_status sa = decode_async(a, seq, last, &d);
      Slots out(seq.size(), -7);
      const kvpool_status sb = kvalloc_decode(b, seq.data(), seq.size(), last.data(), last.size(), out.data(), out.size());
      ASSERT_EQ(sa, sb) << kvpool_last_error();
      EXPECT_EQ(d.slots, out);
      if (sa == KVPOOL_OK) {
        size_t np = 0;
        for (size_t k = 0; k < who.size(); ++k) {
          Request& r = live[who[k]];
          if ((seq[k] - 1) % page == 0) {
            ASSERT_LT(np, d.new_pages.size());
            EXPECT_EQ(d.new_pages[np++], out[k] / page);
            r.pages.push_back(out[k] / page);
          }
          r.slots.push_back(out[k]);
          r.len = seq[k];
        }
        EXPECT_EQ(np, d.new_pages.size());
      }
    } else if (op <= 7 && !live.empty()) {  // finish: a's pages vs b's slots
      const size_t idx = static_cast<size_t>(rand(0, static_cast<int64_t>(live.size()) - 1));
      const Request r = live[idx];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(idx));
      ASSERT_EQ(kvalloc_free_pages_async(a, r.pages.data(), r.pages.size(), nullptr), KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(kvalloc_free(b, r.slots.data(), r.slots.size()), KVPOOL_OK) << kvpool_last_error();
    } else if (op == 8) {  // alloc(n): a request whose tokens fill whole pages
      const size_t n = static_cast<size_t>(rand(0, 3) * page);
      Slots sa_out(n, -7), sb_out(n, -7);
      const kvpool_status sa = kvalloc_alloc_async(a, sa_out.data(), n, nullptr);
      ASSERT_EQ(sa, kvalloc_alloc(b, sb_out.data(), n));
      EXPECT_EQ(sa_out, sb_out);
      if (sa == KVPOOL_OK && n > 0) {
        Request r;
        r.len = static_cast<int64_t>(n);
        r.slots = sa_out;
        for (size_t t = 0; t < n; t += static_cast<size_t>(page)) r.pages.push_back(sa_out[t] / page);
        live.push_back(r);
      }
    } else {
      ASSERT_EQ(kvalloc_merge_and_sort(a), KVPOOL_OK);
      ASSERT_EQ(kvalloc_merge_and_sort(b), KVPOOL_OK);
    }
    same_lists();
    kvtest::expect_consistent(a);
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(PagesAndModes, RandomParity,
                         ::testing::Combine(::testing::Values(1, 4, 16), ::testing::Values("none", "prefill")),
                         [](const ::testing::TestParamInfo<std::tuple<int, const char*>>& info) {
                           return "page" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

// --- bad input: an error, nothing changed -------------------------------------

TEST(DeviceApiOnCpu, BadInputChangesNothing) {
  Pool pool(kvtest::mha_config(4, 64));
  const Slots held = kvtest::alloc(pool, 16);  // pages 1..4
  const Slots before = free_list(pool);
  const Slots pre{0}, seq{5}, last{-1};
  Slots slots(5, -7), pages(2, -7);
  auto unchanged = [&](kvpool_status got, kvpool_status want, const char* what) {
    EXPECT_EQ(got, want) << what << ": " << kvpool_last_error();
    EXPECT_EQ(free_list(pool), before) << what;
    for (int64_t s : slots) EXPECT_EQ(s, -7) << what;
  };
  int not_a_pool = 0;
  unchanged(kvalloc_extend_async(nullptr, pre.data(), seq.data(), 1, pre.data(), seq.data(), last.data(), slots.data(),
                                 5, nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "null pool");
  unchanged(kvalloc_extend_async(reinterpret_cast<kvpool*>(&not_a_pool), pre.data(), seq.data(), 1, pre.data(),
                                 seq.data(), last.data(), slots.data(), 5, nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "foreign handle");
  unchanged(kvalloc_extend_async(pool, nullptr, seq.data(), 1, pre.data(), seq.data(), last.data(), slots.data(), 5,
                                 nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "null host lengths");
  unchanged(kvalloc_extend_async(pool, pre.data(), seq.data(), 1, pre.data(), seq.data(), nullptr, slots.data(), 5,
                                 nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "null last_locs");
  unchanged(kvalloc_extend_async(pool, pre.data(), seq.data(), 1, pre.data(), seq.data(), last.data(), slots.data(), 4,
                                 nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "slots_len too small");
  unchanged(kvalloc_extend_async(pool, pre.data(), seq.data(), 1, pre.data(), seq.data(), last.data(), slots.data(), 5,
                                 pages.data(), 1, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "new_pages too small");
  const Slots other_seq{6};
  unchanged(kvalloc_extend_async(pool, pre.data(), seq.data(), 1, pre.data(), other_seq.data(), last.data(),
                                 slots.data(), 5, nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "host and device lengths differ");
  const Slots bad_last{3};
  unchanged(kvalloc_extend_async(pool, pre.data(), seq.data(), 1, pre.data(), seq.data(), bad_last.data(),
                                 slots.data(), 5, nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "last_loc for an empty prefix");
  const Slots huge{1000};
  Slots big(1000, -7);
  EXPECT_EQ(kvalloc_extend_async(pool, pre.data(), huge.data(), 1, pre.data(), huge.data(), last.data(), big.data(),
                                 big.size(), nullptr, 0, nullptr),
            KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(free_list(pool), before);
  for (int64_t s : big) EXPECT_EQ(s, -7);
  unchanged(kvalloc_decode_async(pool, seq.data(), 1, seq.data(), nullptr, slots.data(), nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "decode: null last_locs");
  const Slots zero{0};
  unchanged(kvalloc_decode_async(pool, zero.data(), 1, zero.data(), last.data(), slots.data(), nullptr, 0, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT, "decode: length 0");
  unchanged(kvalloc_alloc_async(pool, slots.data(), 5, nullptr), KVPOOL_ERR_INVALID_ARGUMENT, "alloc: not whole pages");
  unchanged(kvalloc_alloc_async(pool, nullptr, 4, nullptr), KVPOOL_ERR_INVALID_ARGUMENT, "alloc: null slots");
  Slots all(64, -7);
  EXPECT_EQ(kvalloc_alloc_async(pool, all.data(), all.size(), nullptr), KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(free_list(pool), before);

  // Frees: not allocated, listed twice, reserved, out of range.
  for (const Slots& bad : {Slots{5}, Slots{1, 1}, Slots{0}, Slots{99}, Slots{-1}, Slots{2, 6}}) {
    unchanged(kvalloc_free_pages_async(pool, bad.data(), bad.size(), nullptr), KVPOOL_ERR_INVALID_ARGUMENT, "free");
  }
  unchanged(kvalloc_free_pages_async(pool, nullptr, 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT, "free: null pages");
  EXPECT_EQ(kvalloc_free_pages_async(pool, nullptr, 0, nullptr), KVPOOL_OK);  // empty free: no-op
  EXPECT_EQ(free_list(pool), before);
  EXPECT_EQ(kvpool_synchronize(nullptr, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
  kvtest::expect_consistent(pool);
}

TEST(DeviceApiOnCpu, SwaPoolsHaveNoStreamOrderedAllocation) {
  Pool pool(kvtest::swa_config(64, 0.5));
  Slots slots(4, -7);
  EXPECT_EQ(kvalloc_alloc_async(pool, slots.data(), 4, nullptr), KVPOOL_ERR_UNSUPPORTED);
  size_t pages = 0;
  const Slots pre{0}, seq{4};
  EXPECT_EQ(kvalloc_extend_pages(pool, pre.data(), seq.data(), 1, &pages), KVPOOL_ERR_UNSUPPORTED);
}

// --- request table ------------------------------------------------------------

TEST(DeviceApiOnCpu, RequestTableCallsMatchHostCalls) {
  Pool a(kvtest::mha_config(4, 256)), b(kvtest::mha_config(4, 256));
  int32_t rows_a[3], rows_b[3];
  ASSERT_EQ(kvreq_alloc(a, rows_a, 3), KVPOOL_OK);
  ASSERT_EQ(kvreq_alloc(b, rows_b, 3), KVPOOL_OK);
  ASSERT_EQ(std::vector<int32_t>(rows_a, rows_a + 3), std::vector<int32_t>(rows_b, rows_b + 3));
  const Slots pre{2, 0, 3}, seq{5, 4, 3};
  const Slots prefix_slots{10, 11, 30, 31, 32};
  const Slots extend_slots{12, 13, 14, 40, 41, 42, 43};
  ASSERT_EQ(kvreq_write_batch_async(a, rows_a, pre.data(), seq.data(), 3, prefix_slots.data(), prefix_slots.size(),
                                    extend_slots.data(), extend_slots.size(), nullptr),
            KVPOOL_OK)
      << kvpool_last_error();
  ASSERT_EQ(kvreq_write_batch(b, rows_b, 3, pre.data(), 3, seq.data(), 3, prefix_slots.data(), prefix_slots.size(),
                              extend_slots.data(), extend_slots.size()),
            KVPOOL_OK);
  for (int r = 0; r < 3; ++r) {
    Slots ra(static_cast<size_t>(seq[static_cast<size_t>(r)]), -7), rb(ra.size(), -8);
    ASSERT_EQ(kvreq_read(a, rows_a[r], 0, ra.data(), ra.size()), KVPOOL_OK);
    ASSERT_EQ(kvreq_read(b, rows_b[r], 0, rb.data(), rb.size()), KVPOOL_OK);
    EXPECT_EQ(ra, rb);
  }
  const Slots lens{5, 1, 0};
  Slots la(3, -7), lb(3, -7);
  ASSERT_EQ(kvreq_last_loc_async(a, rows_a, lens.data(), 3, la.data(), nullptr), KVPOOL_OK);
  ASSERT_EQ(kvreq_last_loc(b, rows_b, 3, lens.data(), 3, lb.data(), 3), KVPOOL_OK);
  EXPECT_EQ(la, lb);
  EXPECT_EQ(la, (Slots{14, 40, -1}));

  // Without prefix slots only the extend part is written.
  const Slots pre2{5}, seq2{7}, ext2{50, 51};
  ASSERT_EQ(kvreq_write_batch_async(a, rows_a, pre2.data(), seq2.data(), 1, nullptr, 0, ext2.data(), 2, nullptr),
            KVPOOL_OK)
      << kvpool_last_error();
  Slots row(7, -7);
  ASSERT_EQ(kvreq_read(a, rows_a[0], 0, row.data(), 7), KVPOOL_OK);
  EXPECT_EQ(row, (Slots{10, 11, 12, 13, 14, 50, 51}));

  // Bad rows, lengths and slots write nothing.
  const int32_t bad_row[1] = {0};
  EXPECT_EQ(kvreq_write_batch_async(a, bad_row, pre2.data(), seq2.data(), 1, nullptr, 0, ext2.data(), 2, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kvreq_write_batch_async(a, rows_a, pre2.data(), seq2.data(), 1, nullptr, 0, ext2.data(), 1, nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);
  const Slots out_of_range{50, 100000};
  EXPECT_EQ(kvreq_write_batch_async(a, rows_a, pre2.data(), seq2.data(), 1, nullptr, 0, out_of_range.data(), 2,
                                    nullptr),
            KVPOOL_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(kvreq_read(a, rows_a[0], 0, row.data(), 7), KVPOOL_OK);
  EXPECT_EQ(row, (Slots{10, 11, 12, 13, 14, 50, 51}));
  EXPECT_EQ(kvreq_last_loc_async(a, bad_row, lens.data(), 1, la.data(), nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
}

// --- configuration ------------------------------------------------------------

std::string with_free_list(const std::string& json, const std::string& value) {
  std::string out = json;
  const std::string key = "\"pool\": {";
  out.replace(out.find(key), key.size(), key + "\"free_list\": " + value + ", ");
  return out;
}

TEST(DeviceApiConfig, FreeListChoices) {
  kvpool* pool = nullptr;
  const std::string host = with_free_list(kvtest::mha_config(4, 64), "\"host\"");
  ASSERT_EQ(kvpool_create(host.data(), host.size(), &pool), KVPOOL_OK) << kvpool_last_error();
  kvpool_destroy(pool);
  pool = nullptr;
  for (const char* bad : {"\"device\"", "\"gpu\"", "1"}) {
    const std::string json = with_free_list(kvtest::mha_config(4, 64), bad);
    EXPECT_EQ(kvpool_create(json.data(), json.size(), &pool), KVPOOL_ERR_CONFIG) << bad;
    EXPECT_EQ(pool, nullptr);
    EXPECT_NE(std::string(kvpool_last_error()).find("pool.free_list"), std::string::npos) << kvpool_last_error();
  }
  const std::string cpu_device = with_free_list(kvtest::mha_config(4, 64), "\"device\"");
  EXPECT_EQ(kvpool_create(cpu_device.data(), cpu_device.size(), &pool), KVPOOL_ERR_CONFIG);
  EXPECT_NE(std::string(kvpool_last_error()).find("cuda"), std::string::npos) << kvpool_last_error();
}

}  // namespace
