// The driver of the failure-injection tests: every public call of a workload is
// made first on a twin pool without injection (the reference), then on the pool
// under test with its 1st, 2nd, ... host allocation failing, until a run reaches
// no injected failure. Each injected run that fails must return a clear status
// (KVPOOL_ERR_HOST_MEMORY naming the function, or the reference's own status)
// and leave the pool's public picture (tests/support/pool_state.hpp) unchanged
// and kvpool_check() passing; the run without injection must give exactly the
// reference's status, outputs and picture.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "../support/pool_state.hpp"
#include "alloc_injection.hpp"
#include "kvpool/kvpool.h"

namespace kvfault {

using Out = std::vector<int64_t>;

// Sticky mode: every allocation from the n-th on fails (arm_sticky), in all drivers.
// Set by KVFAULT_STICKY=1 in the environment (ctest runs the suite both ways).
inline bool& sticky() {
  static bool on = std::getenv("KVFAULT_STICKY") != nullptr;
  return on;
}
inline void arm_for(uint64_t n) {
  if (sticky()) {
    arm_sticky(n);
  } else {
    arm(n);
  }
}


// Measured numbers of one workload, printed as one line at the end of a test.
struct Summary {
  std::string name;
  uint64_t calls = 0;       // public calls driven through the injector
  uint64_t injected = 0;    // runs in which an allocation was made to fail
  uint64_t recovered = 0;   // ... and the call still succeeded (or failed only for its own reason)
  uint64_t max_allocs = 0;  // most allocations one call made
  void print() const {
    std::printf("[fault]%s %s: %llu calls, %llu injected failures (%llu recovered), at most %llu allocations per call%s\n",
                sticky() ? "[sticky]" : "", name.c_str(), static_cast<unsigned long long>(calls), static_cast<unsigned long long>(injected),
                static_cast<unsigned long long>(recovered), static_cast<unsigned long long>(max_allocs),
                counts_malloc() ? "" : " [operator new only]");
    std::fflush(stdout);
  }
};

// Makes the message buffer of kvpool_last_error() large, so that recording a
// message later never allocates, and lets the library make its one-time
// allocations (the handle registry), so that a failed call is checked for leaks
// exactly.
inline void widen_last_error() {
  const std::string path = "/nonexistent/" + std::string(2000, 'x');
  kvpool* p = nullptr;
  (void)kvpool_create_from_file(path.c_str(), &p);
  const std::string tiny = R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 1}, "pool": {"device": "cpu",
      "kv_dtype": "f32", "max_total_tokens": 8, "max_running_requests": 1, "max_context_len": 8}})";
  if (kvpool_create(tiny.data(), tiny.size(), &p) == KVPOOL_OK) kvpool_destroy(p);
}

inline bool check_ok(const kvpool* pool, std::string* report) {
  char buf[4096];
  const kvpool_status st = kvpool_check(pool, buf, sizeof(buf));
  *report = buf;
  return st == KVPOOL_OK;
}

// Checks a run that reached the injected failure and did not succeed.
inline void expect_clean_failure(const char* fn, kvpool_status st, kvpool_status reference, uint64_t n) {
  const std::string msg = kvpool_last_error();
  if (st != reference) {
    EXPECT_EQ(st, KVPOOL_ERR_HOST_MEMORY) << fn << " with allocation " << n << " failing: " << msg;
  }
  if (st == KVPOOL_ERR_HOST_MEMORY) {
    EXPECT_NE(msg.find(fn), std::string::npos) << fn << " with allocation " << n << " failing: message '" << msg
                                                << "' does not name the function";
  } else if (!sticky()) {  // with no memory left at all, a message may be lost (the status stays)
    EXPECT_FALSE(msg.empty()) << fn << " with allocation " << n << " failing: status " << st << " without a message";
  }
}

// A pool under test and its reference twin, made from the same configuration.
class Twin {
 public:
  explicit Twin(const std::string& json, std::string name) : Twin(json, json, std::move(name)) {}
  // Pools that must differ in a resource, not in behaviour (e.g. each its own storage directory).
  Twin(const std::string& json_a, const std::string& json_b, std::string name) {
    sum.name = std::move(name);
    EXPECT_EQ(kvpool_create(json_a.data(), json_a.size(), &a_), KVPOOL_OK) << kvpool_last_error() << "\n" << json_a;
    EXPECT_EQ(kvpool_create(json_b.data(), json_b.size(), &b_), KVPOOL_OK) << kvpool_last_error() << "\n" << json_b;
    widen_last_error();
  }
  ~Twin() {
    kvpool_destroy(a_);
    kvpool_destroy(b_);
  }
  Twin(const Twin&) = delete;
  Twin& operator=(const Twin&) = delete;

  kvpool* a() const { return a_; }  // under test
  kvpool* b() const { return b_; }  // reference
  bool ok() const { return a_ != nullptr && b_ != nullptr && !::testing::Test::HasFailure(); }

  // Seqs and rows the pictures describe (ids are the same in both pools).
  kvtest::PoolStateOptions opts;
  // More of the public picture, appended to pool_state's (e.g. buffer contents,
  // hybrid rows' state slots); made without injection.
  std::function<std::string(kvpool*)> extra;
  // Run on both pools, without injection, before every call: brings work the pool's own
  // threads do (e.g. storage backups) to the same point in both, so that the reference and
  // the pool under test start each call from the same state.
  std::function<void(kvpool*)> settle;
  Summary sum;

  std::string picture(kvpool* p) const {
    std::string s = kvtest::pool_state(p, opts);
    if (extra) s += extra(p);
    return s;
  }

  // Makes the call `f(pool, out)` on both pools as described above; `out` has
  // `out_len` entries (allocated here, before arming). Returns the reference's
  // status and, in *result, its outputs.
  template <class F>
  kvpool_status call(const char* fn, size_t out_len, F&& f, Out* result = nullptr) {
    Out out_b(out_len, -7), out_a(out_len, -7);
    if (settle) {
      settle(b_);
      settle(a_);
    }
    const kvpool_status ref = f(b_, out_b);
    const std::string before = picture(a_);
    ++sum.calls;
    for (uint64_t n = 1;; ++n) {
      std::fill(out_a.begin(), out_a.end(), -7);
      arm_for(n);
      const kvpool_status st = f(a_, out_a);
      const bool fired = disarm();
      if (!fired) {
        sum.max_allocs = std::max<uint64_t>(sum.max_allocs, n - 1);
        EXPECT_EQ(st, ref) << fn << " without injection: " << kvpool_last_error();
        EXPECT_EQ(out_a, out_b) << fn << ": outputs differ from the reference";
        break;
      }
      ++sum.injected;
      if (st == KVPOOL_OK || st == ref) {
        ++sum.recovered;  // the library coped with the failed allocation
        EXPECT_EQ(st, ref) << fn << " with allocation " << n << " failing";
        EXPECT_EQ(out_a, out_b) << fn << " with allocation " << n << " failing: outputs differ from the reference";
        if (st == KVPOOL_OK) break;  // the pool has moved on; nothing left to retry
      } else {
        expect_clean_failure(fn, st, ref, n);
      }
      const std::string after = picture(a_);
      EXPECT_EQ(after, before) << fn << " with allocation " << n << " failing changed the pool:\n"
                               << kvtest::first_difference(before, after);
      std::string report;
      EXPECT_TRUE(check_ok(a_, &report)) << fn << " with allocation " << n << " failing:\n" << report;
      if (::testing::Test::HasFailure()) return ref;
      if (n > 1000000) {
        ADD_FAILURE() << fn << ": more than a million allocations";
        return ref;
      }
    }
    const std::string pa = picture(a_), pb = picture(b_);
    EXPECT_EQ(pa, pb) << fn << ": the pool under test differs from the reference:\n" << kvtest::first_difference(pb, pa);
    if (result != nullptr) *result = out_b;
    return ref;
  }

 private:
  kvpool* a_ = nullptr;
  kvpool* b_ = nullptr;
};

}  // namespace kvfault
