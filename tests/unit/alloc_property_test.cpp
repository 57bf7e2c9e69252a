// Randomized property tests: thousands of random allocator operations, each
// compared with a small reference model written here from SGLANG_SEMANTICS §1–§2
// (independently of the library's three-part extend), with kvpool_check() after
// every step.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "test_util.hpp"

namespace {

using Slots = std::vector<int64_t>;

// The reference: free list order, deferred frees, groups, snapshots.
struct RefAllocator {
  int64_t page = 1, pages = 0;
  bool need_sort = false;
  Slots free, release, group;
  bool in_group = false;
  std::set<int64_t> held;

  void clear() {
    free.clear();
    for (int64_t p = 1; p <= pages; ++p) free.push_back(p);
    release.clear();
    group.clear();
    in_group = false;
    held.clear();
  }
  size_t available() const { return (free.size() + release.size()) * static_cast<size_t>(page); }
  void merge() {
    if (release.empty()) return;
    free.insert(free.end(), release.begin(), release.end());
    std::sort(free.begin(), free.end());
    release.clear();
  }
  int64_t take_page() {
    const int64_t p = free.front();
    free.erase(free.begin());
    held.insert(p);
    return p;
  }
  void insert(Slots ids) {
    Slots& target = need_sort ? release : free;
    if (page == 1) {
      target.insert(target.end(), ids.begin(), ids.end());
    } else {
      std::sort(ids.begin(), ids.end());
      target.insert(target.begin(), ids.begin(), ids.end());
    }
  }
  // Returns false (and changes nothing) for an invalid free.
  bool free_slots(const Slots& slots) {
    Slots ids;
    for (int64_t s : slots) ids.push_back(s / page);
    if (page > 1) {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    } else if (std::set<int64_t>(ids.begin(), ids.end()).size() != ids.size()) {
      return false;
    }
    for (int64_t id : ids) {
      if (held.count(id) == 0) return false;
    }
    for (int64_t id : ids) held.erase(id);
    if (in_group) {
      group.insert(group.end(), ids.begin(), ids.end());
    } else {
      insert(ids);
    }
    return true;
  }
  // Naive per-token extend: a token at a page start takes the next free page,
  // any other token follows the previous one.
  bool extend(const Slots& pre, const Slots& seq, const Slots& last, Slots* out) {
    size_t need = 0, total = 0;
    for (size_t i = 0; i < pre.size(); ++i) {
      for (int64_t t = pre[i]; t < seq[i]; ++t) need += (t % page == 0) ? 1 : 0;
      total += static_cast<size_t>(seq[i] - pre[i]);
    }
    if (need > free.size() + release.size()) return false;
    if (need_sort && total / static_cast<size_t>(page) + pre.size() + 1 > free.size()) merge();
    out->clear();
    for (size_t i = 0; i < pre.size(); ++i) {
      int64_t prev = last[i];
      for (int64_t t = pre[i]; t < seq[i]; ++t) {
        prev = (t % page == 0) ? take_page() * page : prev + 1;
        out->push_back(prev);
      }
    }
    return true;
  }
  bool decode(const Slots& seq, const Slots& last, Slots* out) {
    size_t need = 0;
    for (int64_t s : seq) need += ((s - 1) % page == 0) ? 1 : 0;
    if (need > free.size() + release.size()) return false;
    if (need_sort && seq.size() > free.size()) merge();
    out->clear();
    for (size_t i = 0; i < seq.size(); ++i) out->push_back((seq[i] - 1) % page == 0 ? take_page() * page : last[i] + 1);
    return true;
  }
};

// The driver's view: live requests and the slots they own.
struct World {
  RefAllocator ref;
  std::map<int, Slots> requests;  // id -> slots in token order
  int next_id = 0;
};

class PropertyTest : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(PropertyTest, RandomOperationsMatchTheReference) {
  const int page = std::get<0>(GetParam());
  const char* mode = std::get<1>(GetParam());
  const int64_t pages = 24;
  kvtest::Pool pool(kvtest::mha_config(page, pages * page, mode));
  World w;
  w.ref.page = page;
  w.ref.pages = pages;
  w.ref.need_sort = std::string(mode) != "none";
  w.ref.clear();
  World saved;
  uint64_t token = 0;
  bool have_snapshot = false;
  std::mt19937_64 rng(1234 + page * 7 + (w.ref.need_sort ? 1 : 0));
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::map<std::string, int> seen;
  Slots freed_before;  // slots of finished requests, for double-free attempts

  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(pick(100));
    std::string what;
    if (op < 30) {  // extend a batch: new requests and continuing ones (chunked prefill)
      what = "extend";
      Slots pre, seq, last;
      std::vector<int> ids;
      const size_t batch = 1 + pick(4);
      for (size_t b = 0; b < batch; ++b) {
        const bool cont = !w.requests.empty() && pick(2) == 0;
        int id = cont ? std::next(w.requests.begin(), static_cast<long>(pick(w.requests.size())))->first : -1;
        if (std::find(ids.begin(), ids.end(), id) != ids.end()) id = -1;
        const int64_t len = id >= 0 ? static_cast<int64_t>(w.requests[id].size()) : 0;
        pre.push_back(len);
        seq.push_back(len + static_cast<int64_t>(pick(3 * static_cast<size_t>(page) + 2)));
        last.push_back(len > 0 ? w.requests[id].back() : -1);
        ids.push_back(id);
      }
      Slots expected, got(0);
      size_t total = 0;
      for (size_t i = 0; i < batch; ++i) total += static_cast<size_t>(seq[i] - pre[i]);
      got.assign(total, -1);
      const bool ok = w.ref.extend(pre, seq, last, &expected);
      const kvpool_status st = kvalloc_extend(pool, pre.data(), batch, seq.data(), batch, last.data(), batch,
                                              got.data(), got.size());
      ASSERT_EQ(st, ok ? KVPOOL_OK : KVPOOL_ERR_OUT_OF_MEMORY) << "step " << step << ": " << kvpool_last_error();
      if (ok) {
        ASSERT_EQ(got, expected) << "step " << step;
        size_t o = 0;
        for (size_t i = 0; i < batch; ++i) {
          int id = ids[i] >= 0 ? ids[i] : w.next_id++;
          for (int64_t t = pre[i]; t < seq[i]; ++t) w.requests[id].push_back(got[o++]);
        }
      }
    } else if (op < 50 && !w.requests.empty()) {  // decode some running requests
      what = "decode";
      Slots seq, last;
      std::vector<int> ids;
      for (auto& [id, slots] : w.requests) {
        if (slots.empty() || pick(2) == 0) continue;
        ids.push_back(id);
        seq.push_back(static_cast<int64_t>(slots.size()) + 1);
        last.push_back(slots.back());
      }
      Slots expected, got(seq.size(), -1);
      const bool ok = w.ref.decode(seq, last, &expected);
      const kvpool_status st =
          kvalloc_decode(pool, seq.data(), seq.size(), last.data(), last.size(), got.data(), got.size());
      ASSERT_EQ(st, ok ? KVPOOL_OK : KVPOOL_ERR_OUT_OF_MEMORY) << "step " << step << ": " << kvpool_last_error();
      if (ok) {
        ASSERT_EQ(got, expected) << "step " << step;
        for (size_t i = 0; i < ids.size(); ++i) w.requests[ids[i]].push_back(got[i]);
      }
    } else if (op < 70 && !w.requests.empty()) {  // finish a request: free all its slots
      what = "free";
      auto it = std::next(w.requests.begin(), static_cast<long>(pick(w.requests.size())));
      Slots slots = it->second;
      std::shuffle(slots.begin(), slots.end(), rng);
      ASSERT_TRUE(w.ref.free_slots(slots) || slots.empty());
      ASSERT_EQ(kvalloc_free(pool, slots.data(), slots.size()), KVPOOL_OK) << "step " << step << kvpool_last_error();
      freed_before.insert(freed_before.end(), slots.begin(), slots.end());
      w.requests.erase(it);
    } else if (op < 75 && !freed_before.empty()) {  // a double free (or a free of a reallocated slot's page)
      what = "bad-free";
      Slots slots{freed_before[pick(freed_before.size())]};
      const bool ok = w.ref.free_slots(slots);
      if (ok) {
        // The page was handed out again: the free is legal; forget whoever owned it.
        ASSERT_EQ(kvalloc_free(pool, slots.data(), 1), KVPOOL_OK) << "step " << step;
        for (auto it = w.requests.begin(); it != w.requests.end();) {
          bool owns = false;
          for (int64_t s : it->second) owns = owns || s / page == slots[0] / page;
          if (owns) {
            // The rest of its pages go back too, so the world stays consistent.
            Slots rest;
            for (int64_t s : it->second) {
              if (s / page != slots[0] / page) rest.push_back(s);
            }
            ASSERT_TRUE(w.ref.free_slots(rest) || rest.empty());
            ASSERT_EQ(kvalloc_free(pool, rest.data(), rest.size()), KVPOOL_OK);
            it = w.requests.erase(it);
          } else {
            ++it;
          }
        }
      } else {
        ASSERT_EQ(kvalloc_free(pool, slots.data(), 1), KVPOOL_ERR_INVALID_ARGUMENT) << "step " << step;
      }
    } else if (op < 80) {  // snapshot
      if (w.ref.in_group) continue;
      what = "backup";
      ASSERT_EQ(kvalloc_backup(pool, &token), KVPOOL_OK);
      saved = w;
      have_snapshot = true;
    } else if (op < 85 && have_snapshot && !w.ref.in_group) {  // revert to it
      what = "restore";
      ASSERT_EQ(kvalloc_restore(pool, token), KVPOOL_OK) << kvpool_last_error();
      w = saved;
    } else if (op < 92) {  // open or close a free group
      what = w.ref.in_group ? "group-end" : "group-begin";
      if (w.ref.in_group) {
        ASSERT_EQ(kvalloc_free_group_end(pool), KVPOOL_OK);
        w.ref.in_group = false;
        if (!w.ref.group.empty()) w.ref.insert(w.ref.group);
        w.ref.group.clear();
      } else {
        ASSERT_EQ(kvalloc_free_group_begin(pool), KVPOOL_OK);
        w.ref.in_group = true;
      }
    } else if (op < 96) {
      what = "merge";
      ASSERT_EQ(kvalloc_merge_and_sort(pool), KVPOOL_OK);
      w.ref.merge();
    } else if (op < 98) {  // a plain page-granular allocation, kept as a request
      what = "alloc";
      const size_t n = pick(4) * static_cast<size_t>(page);
      Slots got(n, -1);
      const bool fits = n / static_cast<size_t>(page) <= w.ref.free.size() + w.ref.release.size();
      ASSERT_EQ(kvalloc_alloc(pool, got.data(), n), fits ? KVPOOL_OK : KVPOOL_ERR_OUT_OF_MEMORY) << "step " << step;
      if (fits && n > 0) {
        if (w.ref.need_sort && n / static_cast<size_t>(page) > w.ref.free.size()) w.ref.merge();
        Slots expected;
        for (size_t p = 0; p < n / static_cast<size_t>(page); ++p) {
          const int64_t base = w.ref.take_page() * page;
          for (int j = 0; j < page; ++j) expected.push_back(base + j);
        }
        ASSERT_EQ(got, expected) << "step " << step;
        w.requests[w.next_id++] = got;
      }
    } else {
      what = "clear";
      if (w.ref.in_group) continue;
      ASSERT_EQ(kvalloc_clear(pool), KVPOOL_OK);
      w.ref.clear();
      w.requests.clear();
      freed_before.clear();
      have_snapshot = false;
    }
    ++seen[what];
    ASSERT_EQ(kvtest::free_list(pool), w.ref.free) << "step " << step << " after " << what;
    ASSERT_EQ(kvtest::free_list(pool, KVALLOC_LIST_RELEASE), w.ref.release) << "step " << step << " after " << what;
    ASSERT_EQ(kvtest::available(pool), w.ref.available()) << "step " << step << " after " << what;
    char report[2048];
    ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << "step " << step << " after " << what << ": " << report;
  }
  // Every kind of operation really ran.
  for (const char* op : {"extend", "decode", "free", "bad-free", "backup", "restore", "group-begin", "group-end",
                         "merge", "alloc"}) {
    EXPECT_GT(seen[op], 0) << op;
  }
}

INSTANTIATE_TEST_SUITE_P(Allocators, PropertyTest,
                         ::testing::Combine(::testing::Values(1, 4, 16), ::testing::Values("none", "decode")));

}  // namespace
