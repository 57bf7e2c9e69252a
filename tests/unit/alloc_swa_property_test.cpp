// Randomized property test of the swa allocator against a reference model:
// two FIFO pools and a full-to-window mapping (SGLANG_SEMANTICS §1.5), with
// snapshots that also revert the mapping, and kvpool_check() after every step.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "test_util.hpp"

namespace {

using Slots = std::vector<int64_t>;

struct RefSwa {
  Slots full_free, swa_free;
  std::map<int64_t, int64_t> mapping;  // held full slot -> window slot (absent = 0)
  std::set<int64_t> held;

  RefSwa(int64_t full, int64_t swa) {
    for (int64_t i = 1; i <= full; ++i) full_free.push_back(i);
    for (int64_t i = 1; i <= swa; ++i) swa_free.push_back(i);
  }
  bool alloc(size_t n, Slots* out) {
    if (n > full_free.size() || n > swa_free.size()) return false;
    out->assign(full_free.begin(), full_free.begin() + static_cast<long>(n));
    for (size_t i = 0; i < n; ++i) {
      mapping[(*out)[i]] = swa_free[i];
      held.insert((*out)[i]);
    }
    full_free.erase(full_free.begin(), full_free.begin() + static_cast<long>(n));
    swa_free.erase(swa_free.begin(), swa_free.begin() + static_cast<long>(n));
    return true;
  }
  void drop_window(const Slots& slots) {
    for (int64_t s : slots) {
      auto it = mapping.find(s);
      if (it == mapping.end()) continue;
      swa_free.push_back(it->second);
      mapping.erase(it);
    }
  }
  void free(const Slots& slots) {
    for (int64_t s : slots) {
      held.erase(s);
      full_free.push_back(s);
    }
    drop_window(slots);
  }
  int64_t window_of(int64_t s) const {
    auto it = mapping.find(s);
    return it == mapping.end() ? 0 : it->second;
  }
};

TEST(SwaProperty, RandomOperationsMatchTheReference) {
  kvtest::Pool pool(kvtest::swa_config(40, 0.5));  // 4 layers: 53 full, 26 window slots
  size_t full_n = 0, swa_n = 0;
  ASSERT_EQ(kvalloc_swa_available(pool, &full_n, &swa_n), KVPOOL_OK);
  RefSwa ref(static_cast<int64_t>(full_n), static_cast<int64_t>(swa_n));
  std::vector<Slots> requests;
  RefSwa saved = ref;
  std::vector<Slots> saved_requests;
  uint64_t token = 0;
  bool have_snapshot = false;
  std::mt19937_64 rng(99);
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 35) {
      const size_t n = rng() % 6;
      Slots expected, got(n, -1);
      const bool ok = ref.alloc(n, &expected);
      ASSERT_EQ(kvalloc_alloc(pool, got.data(), n), ok ? KVPOOL_OK : KVPOOL_ERR_OUT_OF_MEMORY) << step;
      if (ok) {
        ASSERT_EQ(got, expected) << step;
        if (n > 0) requests.push_back(got);
      }
    } else if (op < 60 && !requests.empty()) {
      const size_t i = rng() % requests.size();
      ASSERT_EQ(kvalloc_free(pool, requests[i].data(), requests[i].size()), KVPOOL_OK) << step << kvpool_last_error();
      ref.free(requests[i]);
      requests.erase(requests.begin() + static_cast<long>(i));
    } else if (op < 75 && !requests.empty()) {  // the oldest tokens of a request slide out of the window
      Slots& r = requests[rng() % requests.size()];
      const Slots old(r.begin(), r.begin() + static_cast<long>(rng() % (r.size() + 1)));
      ASSERT_EQ(kvalloc_free_swa(pool, old.data(), old.size()), KVPOOL_OK) << step << kvpool_last_error();
      ref.drop_window(old);
    } else if (op < 82) {
      ASSERT_EQ(kvalloc_backup(pool, &token), KVPOOL_OK);
      saved = ref;
      saved_requests = requests;
      have_snapshot = true;
    } else if (op < 88 && have_snapshot) {
      ASSERT_EQ(kvalloc_restore(pool, token), KVPOOL_OK);
      ref = saved;
      requests = saved_requests;
    } else if (op < 92) {  // a free of something not held is rejected and changes nothing
      int64_t bad = 1 + static_cast<int64_t>(rng() % full_n);
      if (ref.held.count(bad) == 0) {
        ASSERT_EQ(kvalloc_free(pool, &bad, 1), KVPOOL_ERR_INVALID_ARGUMENT) << step;
        ASSERT_EQ(kvalloc_free_swa(pool, &bad, 1), KVPOOL_ERR_INVALID_ARGUMENT) << step;
      }
    }
    ASSERT_EQ(kvtest::free_list(pool), ref.full_free) << "step " << step;
    ASSERT_EQ(kvtest::free_list(pool, KVALLOC_LIST_SWA_FREE), ref.swa_free) << "step " << step;
    Slots all(full_n);
    for (size_t i = 0; i < full_n; ++i) all[i] = static_cast<int64_t>(i) + 1;
    Slots windows(full_n);
    ASSERT_EQ(kvalloc_translate_swa(pool, all.data(), all.size(), windows.data(), windows.size()), KVPOOL_OK);
    for (size_t i = 0; i < full_n; ++i) ASSERT_EQ(windows[i], ref.window_of(all[i])) << "step " << step << " slot " << all[i];
    char report[2048];
    ASSERT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << "step " << step << ": " << report;
  }
}

}  // namespace
