// The device free-list engine (`pool.free_list` "device", device.h) must give
// the CPU allocator's slots exactly: random sequences of extend / decode /
// alloc / free / merge (fresh seed each run, printed) run on a CUDA pool and on
// a CPU pool, outputs poisoned (-7) before each call, and after every step
// the slots, the free and release lists and kvpool_check() must agree. Also
// the §2.4 example, the §8.2 GPU cases, the fault model and the request-table
// calls.
//
// KVPOOL_PARITY_DEVICE=cpu runs everything with a CPU pool in place of the
// CUDA one (arrays in host memory): a check of the test itself, also in
// builds without CUDA.
#ifdef KVPOOL_TEST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_env.hpp"

namespace {

using Slots = std::vector<int64_t>;

bool cpu_mode() {
  const char* d = std::getenv("KVPOOL_PARITY_DEVICE");
  return d != nullptr && std::strcmp(d, "cpu") == 0;
}

#define REQUIRE_SECOND_DEVICE()        \
  do {                                 \
    if (!cpu_mode()) {                 \
      KVPOOL_REQUIRE_CUDA_DEVICE();    \
    }                                  \
  } while (0)

uint64_t fresh_seed() {
  const uint64_t s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::printf("seed %llu\n", static_cast<unsigned long long>(s));
  return s;
}

// An mha pool whose allocator is what the tests look at (1 layer, tiny rows).
std::string config(int page, int64_t tokens, const char* mode, bool device, int rows = 64, int context = 4096) {
  std::string where = "\"device\": \"cpu\"";
  if (device) where = cpu_mode() ? "\"device\": \"cpu\"" : "\"device\": \"cuda:0\", \"free_list\": \"device\"";
  return R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {)" + where +
         R"(, "kv_dtype": "f32", "page_size": )" + std::to_string(page) + R"(, "max_total_tokens": )" +
         std::to_string(tokens) + R"(, "max_running_requests": )" + std::to_string(rows) +
         R"(, "max_context_len": )" + std::to_string(context) + R"(, "disaggregation_mode": ")" + mode + R"("}})";
}

// A "device" array: CUDA memory, or host memory in CPU mode.
template <class T>
class Arr {
 public:
  explicit Arr(size_t n) : n_(n) {
    if (cpu_mode()) {
      host_.assign(n == 0 ? 1 : n, T(-7));
    } else {
#ifdef KVPOOL_TEST_HAVE_CUDA
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev_), (n == 0 ? 1 : n) * sizeof(T)), cudaSuccess);
#else
      ADD_FAILURE() << "device arrays need a CUDA build";
#endif
    }
    poison();
  }
  explicit Arr(const std::vector<T>& v) : Arr(v.size()) { upload(v); }
  ~Arr() {
#ifdef KVPOOL_TEST_HAVE_CUDA
    if (dev_ != nullptr) cudaFree(dev_);
#endif
  }
  Arr(const Arr&) = delete;
  Arr& operator=(const Arr&) = delete;
  T* get() { return cpu_mode() ? host_.data() : dev_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& v) {
    ASSERT_LE(v.size(), n_);
    if (v.empty()) return;
    if (cpu_mode()) {
      std::copy(v.begin(), v.end(), host_.begin());
      return;
    }
#ifdef KVPOOL_TEST_HAVE_CUDA
    EXPECT_EQ(cudaMemcpy(dev_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
#endif
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    if (n_ == 0) return v;
    if (cpu_mode()) {
      std::copy(host_.begin(), host_.begin() + static_cast<std::ptrdiff_t>(n_), v.begin());
      return v;
    }
#ifdef KVPOOL_TEST_HAVE_CUDA
    EXPECT_EQ(cudaMemcpy(v.data(), dev_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
#endif
    return v;
  }
  void poison() { upload(std::vector<T>(n_, T(-7))); }

 private:
  size_t n_;
  std::vector<T> host_;
  T* dev_ = nullptr;
};

// The stream device work is enqueued on (a created, blocking stream; NULL in CPU mode).
class Stream {
 public:
  Stream() {
#ifdef KVPOOL_TEST_HAVE_CUDA
    if (!cpu_mode()) {
      EXPECT_EQ(cudaStreamCreate(&s_), cudaSuccess);
    }
#endif
  }
  ~Stream() {
#ifdef KVPOOL_TEST_HAVE_CUDA
    if (s_ != nullptr) cudaStreamDestroy(s_);
#endif
  }
  void* get() const { return s_; }

 private:
#ifdef KVPOOL_TEST_HAVE_CUDA
  cudaStream_t s_ = nullptr;
#else
  void* s_ = nullptr;
#endif
};

class PoolPtr {
 public:
  explicit PoolPtr(const std::string& json) {
    EXPECT_EQ(kvpool_create(json.data(), json.size(), &p_), KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  }
  ~PoolPtr() { kvpool_destroy(p_); }
  PoolPtr(const PoolPtr&) = delete;
  PoolPtr& operator=(const PoolPtr&) = delete;
  operator kvpool*() const { return p_; }

 private:
  kvpool* p_ = nullptr;
};

Slots list_of(kvpool* pool, int32_t list = KVALLOC_LIST_FREE) {
  size_t len = 0;
  Slots ids(1 << 20);
  EXPECT_EQ(kvalloc_free_list(pool, list, ids.data(), ids.size(), &len), KVPOOL_OK) << kvpool_last_error();
  ids.resize(len);
  return ids;
}

void expect_check(kvpool* pool) {
  char report[2048];
  EXPECT_EQ(kvpool_check(pool, report, sizeof(report)), KVPOOL_OK) << report << " / " << kvpool_last_error();
}

struct Result {
  kvpool_status status = KVPOOL_OK;
  Slots slots, new_pages;
  bool operator==(const Result& o) const { return status == o.status && slots == o.slots && new_pages == o.new_pages; }
};

std::ostream& operator<<(std::ostream& os, const Result& r) {
  os << "status " << r.status << " slots [";
  for (int64_t s : r.slots) os << s << ' ';
  os << "] new_pages [";
  for (int64_t s : r.new_pages) os << s << ' ';
  return os << "]";
}

// Every call on the device pool: device arrays, enqueue, synchronize, download.
class DevicePool {
 public:
  explicit DevicePool(const std::string& json) : pool_(json) {}
  kvpool* get() const { return pool_; }
  void* stream() const { return stream_.get(); }

  Result extend(const Slots& pre, const Slots& seq, const Slots& last) {
    size_t total = 0, pages = 0;
    for (size_t i = 0; i < pre.size(); ++i) total += static_cast<size_t>(seq[i] - pre[i]);
    EXPECT_EQ(kvalloc_extend_pages(pool_, pre.data(), seq.data(), pre.size(), &pages), KVPOOL_OK);
    Arr<int64_t> d_pre(pre), d_seq(seq), d_last(last), d_out(total), d_pages(pages);
    Result r;
    r.status = kvalloc_extend_async(pool_, pre.data(), seq.data(), pre.size(), d_pre.get(), d_seq.get(), d_last.get(),
                                    d_out.get(), total, d_pages.get(), pages, stream());
    EXPECT_EQ(kvpool_synchronize(pool_, stream()), KVPOOL_OK) << kvpool_last_error();
    r.slots = d_out.download();
    r.new_pages = d_pages.download();
    return r;
  }
  Result decode(const Slots& seq, const Slots& last) {
    Arr<int64_t> d_seq(seq), d_last(last), d_out(seq.size()), d_pages(seq.size());
    Result r;
    r.status = kvalloc_decode_async(pool_, seq.data(), seq.size(), d_seq.get(), d_last.get(), d_out.get(),
                                    d_pages.get(), seq.size(), stream());
    EXPECT_EQ(kvpool_synchronize(pool_, stream()), KVPOOL_OK) << kvpool_last_error();
    r.slots = d_out.download();
    r.new_pages = d_pages.download();
    return r;
  }
  Result alloc(size_t n) {
    Arr<int64_t> d_out(n);
    Result r;
    r.status = kvalloc_alloc_async(pool_, d_out.get(), n, stream());
    EXPECT_EQ(kvpool_synchronize(pool_, stream()), KVPOOL_OK) << kvpool_last_error();
    r.slots = d_out.download();
    return r;
  }
  kvpool_status free_pages(const Slots& pages) {
    Arr<int64_t> d(pages);
    const kvpool_status st = kvalloc_free_pages_async(pool_, d.get(), pages.size(), stream());
    EXPECT_EQ(kvpool_synchronize(pool_, stream()), KVPOOL_OK) << kvpool_last_error();
    return st;
  }

 private:
  PoolPtr pool_;
  Stream stream_;
};

// The same calls on the CPU reference pool (host pointers, same functions).
Result cpu_extend(kvpool* pool, const Slots& pre, const Slots& seq, const Slots& last) {
  size_t total = 0, pages = 0;
  for (size_t i = 0; i < pre.size(); ++i) total += static_cast<size_t>(seq[i] - pre[i]);
  EXPECT_EQ(kvalloc_extend_pages(pool, pre.data(), seq.data(), pre.size(), &pages), KVPOOL_OK);
  Result r;
  r.slots.assign(total, -7);
  r.new_pages.assign(pages, -7);
  r.status = kvalloc_extend_async(pool, pre.data(), seq.data(), pre.size(), pre.data(), seq.data(), last.data(),
                                  r.slots.data(), total, r.new_pages.data(), pages, nullptr);
  return r;
}

Result cpu_decode(kvpool* pool, const Slots& seq, const Slots& last) {
  Result r;
  r.slots.assign(seq.size(), -7);
  r.new_pages.assign(seq.size(), -7);
  r.status = kvalloc_decode_async(pool, seq.data(), seq.size(), seq.data(), last.data(), r.slots.data(),
                                  r.new_pages.data(), seq.size(), nullptr);
  return r;
}

Result cpu_alloc(kvpool* pool, size_t n) {
  Result r;
  r.slots.assign(n, -7);
  r.status = kvalloc_alloc_async(pool, r.slots.data(), n, nullptr);
  return r;
}

// --- random parity ------------------------------------------------------------

struct Request {
  int64_t len = 0;
  Slots slots;  // token order
  Slots pages;  // held pages, in the order they were taken
};

struct Workload {
  int page;
  const char* mode;
  int64_t tokens;
  int steps;
};

class DeviceAllocParity : public ::testing::TestWithParam<Workload> {};

TEST_P(DeviceAllocParity, SameSlotsAndListsAsTheCpuAllocator) {
  REQUIRE_SECOND_DEVICE();
  const Workload w = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("page " + std::to_string(w.page) + " mode " + w.mode + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto rand = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  PoolPtr cpu(config(w.page, w.tokens, w.mode, false));
  DevicePool dev(config(w.page, w.tokens, w.mode, true));
  const int64_t P = w.page;
  std::vector<Request> live;

  // Records the result of an allocation of `who` (extend or decode) in the model.
  auto record = [&](const std::vector<size_t>& who, const Slots& pre, const Slots& seq, const Result& r) {
    size_t o = 0, np = 0;
    for (size_t k = 0; k < who.size(); ++k) {
      Request& q = live[who[k]];
      for (int64_t t = pre[k]; t < seq[k]; ++t) {
        const int64_t slot = r.slots[o++];
        if (t % P == 0) {
          ASSERT_LT(np, r.new_pages.size());
          EXPECT_EQ(r.new_pages[np++], slot / P);
          q.pages.push_back(slot / P);
        }
        q.slots.push_back(slot);
      }
      q.len = seq[k];
    }
  };
  auto pick = [&](size_t n) {  // up to n distinct live requests
    std::vector<size_t> idx(live.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(std::min(n, idx.size()));
    return idx;
  };

  for (int step = 0; step < w.steps; ++step) {
    const int64_t op = rand(0, 19);
    std::string what;
    if (op <= 6) {  // extend: a mix of new and continued requests; sometimes a wide batch
      what = "extend";
      const bool wide = rand(0, 4) == 0;
      const int64_t n = wide ? rand(200, 400) : rand(1, 6);
      const int64_t max_ext = wide ? 2 * P : rand(0, 1) ? 3 * P : rand(1, 3000);
      std::vector<size_t> who = pick(static_cast<size_t>(rand(0, n)));
      while (static_cast<int64_t>(who.size()) < n) {
        live.emplace_back();
        who.push_back(live.size() - 1);
      }
      Slots pre, seq, last;
      for (size_t i : who) {
        pre.push_back(live[i].len);
        seq.push_back(live[i].len + rand(0, max_ext));
        last.push_back(live[i].len == 0 ? -1 : live[i].slots.back());
      }
      const Result a = dev.extend(pre, seq, last);
      const Result b = cpu_extend(cpu, pre, seq, last);
      ASSERT_EQ(a, b) << what;
      if (b.status == KVPOOL_OK) {
        record(who, pre, seq, b);
      } else {
        ASSERT_EQ(b.status, KVPOOL_ERR_OUT_OF_MEMORY);
        for (int64_t s : a.slots) ASSERT_EQ(s, -7);
      }
      live.erase(std::remove_if(live.begin(), live.end(), [](const Request& q) { return q.len == 0; }), live.end());
    } else if (op <= 10 && !live.empty()) {  // decode
      what = "decode";
      std::vector<size_t> who = pick(static_cast<size_t>(rand(1, static_cast<int64_t>(live.size()))));
      Slots pre, seq, last;
      for (size_t i : who) {
        pre.push_back(live[i].len);
        seq.push_back(live[i].len + 1);
        last.push_back(live[i].slots.back());
      }
      Result a = dev.decode(seq, last);
      Result b = cpu_decode(cpu, seq, last);
      ASSERT_EQ(a.status, b.status) << what;
      EXPECT_EQ(a.slots, b.slots) << what;
      if (b.status == KVPOOL_OK) {
        size_t taken = 0;
        for (size_t k = 0; k < seq.size(); ++k) taken += (P == 1 || seq[k] % P == 1) ? 1 : 0;
        a.new_pages.resize(taken);
        b.new_pages.resize(taken);
        EXPECT_EQ(a.new_pages, b.new_pages);
        record(who, pre, seq, b);
      }
    } else if (op <= 13 && !live.empty()) {  // finish some requests: one free of all their pages
      what = "free_pages";
      std::vector<size_t> who = pick(static_cast<size_t>(rand(1, std::max<int64_t>(1, static_cast<int64_t>(live.size()) / 2))));
      std::sort(who.rbegin(), who.rend());
      Slots pages;
      for (size_t i : who) {
        pages.insert(pages.end(), live[i].pages.begin(), live[i].pages.end());
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      }
      std::shuffle(pages.begin(), pages.end(), rng);
      ASSERT_EQ(dev.free_pages(pages), KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(kvalloc_free_pages_async(cpu, pages.data(), pages.size(), nullptr), KVPOOL_OK) << kvpool_last_error();
    } else if (op == 14 && !live.empty()) {  // host-array free of one request's slots (routed through the device)
      what = "kvalloc_free";
      const size_t i = static_cast<size_t>(rand(0, static_cast<int64_t>(live.size()) - 1));
      const Slots slots = live[i].slots;
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      ASSERT_EQ(kvalloc_free(dev.get(), slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(kvalloc_free(cpu, slots.data(), slots.size()), KVPOOL_OK) << kvpool_last_error();
    } else if (op <= 16) {  // alloc(n): whole pages
      what = "alloc";
      const size_t n = static_cast<size_t>(rand(0, 40) * P);
      const Result a = dev.alloc(n);
      const Result b = cpu_alloc(cpu, n);
      ASSERT_EQ(a, b) << what;
      if (b.status == KVPOOL_OK && n > 0) {
        Request q;
        q.len = static_cast<int64_t>(n);
        q.slots = b.slots;
        for (size_t t = 0; t < n; t += static_cast<size_t>(P)) q.pages.push_back(b.slots[t] / P);
        live.push_back(q);
      }
    } else if (op == 17) {  // host-array extend and decode on both pools
      what = "kvalloc_extend";
      live.emplace_back();
      const Slots pre{0}, seq{rand(1, 4 * P)}, last{-1};
      Slots a(static_cast<size_t>(seq[0]), -7), b(a.size(), -7);
      const kvpool_status sa = kvalloc_extend(dev.get(), pre.data(), 1, seq.data(), 1, last.data(), 1, a.data(), a.size());
      ASSERT_EQ(sa, kvalloc_extend(cpu, pre.data(), 1, seq.data(), 1, last.data(), 1, b.data(), b.size()));
      ASSERT_EQ(a, b);
      if (sa == KVPOOL_OK) {
        Result r;
        r.slots = b;
        for (int64_t t = 0; t < seq[0]; t += P) r.new_pages.push_back(b[static_cast<size_t>(t)] / P);
        record({live.size() - 1}, pre, seq, r);
        Request& q = live.back();
        const Slots s2{q.len + 1}, l2{q.slots.back()};
        Slots da(1, -7), db(1, -7);
        const kvpool_status sd = kvalloc_decode(dev.get(), s2.data(), 1, l2.data(), 1, da.data(), 1);
        ASSERT_EQ(sd, kvalloc_decode(cpu, s2.data(), 1, l2.data(), 1, db.data(), 1));
        ASSERT_EQ(da, db);
        if (sd == KVPOOL_OK) {
          if (q.len % P == 0) q.pages.push_back(da[0] / P);
          q.slots.push_back(da[0]);
          q.len += 1;
        }
      }
      live.erase(std::remove_if(live.begin(), live.end(), [](const Request& q) { return q.len == 0; }), live.end());
    } else {
      what = "merge_and_sort";
      ASSERT_EQ(kvalloc_merge_and_sort(dev.get()), KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(kvalloc_merge_and_sort(cpu), KVPOOL_OK);
    }
    ASSERT_EQ(list_of(dev.get()), list_of(cpu)) << "free list after " << what << " (step " << step << ")";
    ASSERT_EQ(list_of(dev.get(), KVALLOC_LIST_RELEASE), list_of(cpu, KVALLOC_LIST_RELEASE))
        << "release list after " << what << " (step " << step << ")";
    size_t av = 0, bv = 0;
    ASSERT_EQ(kvalloc_available(dev.get(), &av), KVPOOL_OK);
    ASSERT_EQ(kvalloc_available(cpu, &bv), KVPOOL_OK);
    ASSERT_EQ(av, bv);
    expect_check(dev.get());
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Workloads, DeviceAllocParity,
                         ::testing::Values(Workload{1, "none", 32768, 150}, Workload{1, "prefill", 32768, 150},
                                           Workload{16, "none", 65536, 150}, Workload{16, "prefill", 65536, 150},
                                           Workload{64, "none", 262144, 100}, Workload{4, "decode", 8192, 150}),
                         [](const ::testing::TestParamInfo<Workload>& info) {
                           return "page" + std::to_string(info.param.page) + "_" + info.param.mode;
                         });

// --- large batches (several tiles and blocks) ---------------------------------

TEST(DeviceAlloc, WideExtendAndDecodeBatches) {
  REQUIRE_SECOND_DEVICE();
  std::mt19937_64 rng(fresh_seed());
  const int64_t kTokens = 819200;  // a multiple of every page size used
  for (int page : {1, 16}) {
    PoolPtr cpu(config(page, kTokens, "none", false));
    DevicePool dev(config(page, kTokens, "none", true));
    // 2500 new requests, then one decode step for all of them (decode tiles of 1024).
    Slots pre(2500, 0), seq(2500), last(2500, -1);
    for (auto& s : seq) s = std::uniform_int_distribution<int64_t>(1, 40)(rng);
    const Result a = dev.extend(pre, seq, last), b = cpu_extend(cpu, pre, seq, last);
    ASSERT_EQ(a, b);
    Slots next(2500), last_slot(2500);
    size_t o = 0;
    for (size_t i = 0; i < 2500; ++i) {
      o += static_cast<size_t>(seq[i]);
      last_slot[i] = b.slots[o - 1];
      next[i] = seq[i] + 1;
    }
    const Result da = dev.decode(next, last_slot), db = cpu_decode(cpu, next, last_slot);
    ASSERT_EQ(da, db);
    // bs 256 with about 1000 tokens each (the benchmark's shape), continuing half of the requests above.
    Slots pre2(256), seq2(256), last2(256);
    for (size_t i = 0; i < 256; ++i) {
      const bool cont = i % 2 == 0;
      pre2[i] = cont ? next[i] : 0;
      last2[i] = cont ? da.slots[i] : -1;
      seq2[i] = pre2[i] + std::uniform_int_distribution<int64_t>(900, 1100)(rng);
    }
    ASSERT_EQ(dev.extend(pre2, seq2, last2), cpu_extend(cpu, pre2, seq2, last2));
    ASSERT_EQ(list_of(dev.get()), list_of(cpu));
    expect_check(dev.get());
    // Give everything back in one free (the radix-sort path for paged pools).
    Slots all;
    const Slots free_now = list_of(cpu);
    std::vector<uint8_t> is_free(static_cast<size_t>(kTokens / page + 1), 0);
    for (int64_t p : free_now) is_free[static_cast<size_t>(p)] = 1;
    for (size_t p = 1; p < is_free.size(); ++p) {
      if (!is_free[p]) all.push_back(static_cast<int64_t>(p));
    }
    std::shuffle(all.begin(), all.end(), rng);
    ASSERT_EQ(dev.free_pages(all), KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(kvalloc_free_pages_async(cpu, all.data(), all.size(), nullptr), KVPOOL_OK) << kvpool_last_error();
    ASSERT_EQ(list_of(dev.get()), list_of(cpu));
    expect_check(dev.get());
  }
}

// --- SGLANG_SEMANTICS §2.4 and §8.2 -------------------------------------------

TEST(DeviceAlloc, WorkedExampleOfSection2_4) {
  REQUIRE_SECOND_DEVICE();
  DevicePool dev(config(4, 64, "none", true));
  Slots all(64, -7);
  ASSERT_EQ(kvalloc_alloc(dev.get(), all.data(), 64), KVPOOL_OK) << kvpool_last_error();
  for (int64_t page : {11, 3, 7, 2, 9, 5}) {
    const int64_t slot = page * 4 + 1;
    ASSERT_EQ(kvalloc_free(dev.get(), &slot, 1), KVPOOL_OK) << kvpool_last_error();
  }
  ASSERT_EQ(list_of(dev.get()), (Slots{5, 9, 2, 7, 3, 11}));
  const Result e = dev.extend({6, 0, 8}, {13, 5, 10}, {45, -1, 55});
  ASSERT_EQ(e.status, KVPOOL_OK);
  EXPECT_EQ(e.slots, (Slots{46, 47, 20, 21, 22, 23, 36, 8, 9, 10, 11, 28, 12, 13}));
  EXPECT_EQ(e.new_pages, (Slots{5, 9, 2, 7, 3}));
  EXPECT_EQ(list_of(dev.get()), (Slots{11}));
  const Result d = dev.decode({7, 9, 12}, {25, 39, 62});
  ASSERT_EQ(d.status, KVPOOL_OK);
  EXPECT_EQ(d.slots, (Slots{26, 44, 63}));
  EXPECT_EQ(d.new_pages[0], 11);
  EXPECT_EQ(list_of(dev.get()), Slots{});
  const Result oom = dev.decode({13}, {63});
  EXPECT_EQ(oom.status, KVPOOL_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(oom.slots, Slots{-7});
  const Result big = dev.extend({0}, {30}, {-1});  // 8 pages, none free
  EXPECT_EQ(big.status, KVPOOL_ERR_OUT_OF_MEMORY);
  for (int64_t s : big.slots) EXPECT_EQ(s, -7);
  ASSERT_EQ(dev.free_pages(e.new_pages), KVPOOL_OK);
  EXPECT_EQ(list_of(dev.get()), (Slots{2, 3, 5, 7, 9}));
  expect_check(dev.get());
}

TEST(DeviceAlloc, GpuCasesOfSection8_2) {
  REQUIRE_SECOND_DEVICE();
  {  // fresh pool: pre 2, seq 11, last 1 -> [2,3] [4..7] [8,9,10]
    DevicePool dev(config(4, 64, "none", true));
    const Result e = dev.extend({2}, {11}, {1});
    ASSERT_EQ(e.status, KVPOOL_OK) << kvpool_last_error();
    EXPECT_EQ(e.slots, (Slots{2, 3, 4, 5, 6, 7, 8, 9, 10}));
    size_t av = 0;
    ASSERT_EQ(kvalloc_available(dev.get(), &av), KVPOOL_OK);
    EXPECT_EQ(av, 64u - 8u);
    // decode crossing a page boundary (seq 5, last 3) takes a page; inside a page (seq 4, last 2) none.
    const Result cross = dev.decode({5}, {3});
    ASSERT_EQ(cross.status, KVPOOL_OK);
    EXPECT_EQ(cross.slots, Slots{12});
    const Result inside = dev.decode({4}, {2});
    ASSERT_EQ(inside.status, KVPOOL_OK);
    EXPECT_EQ(inside.slots, Slots{3});
    ASSERT_EQ(kvalloc_available(dev.get(), &av), KVPOOL_OK);
    EXPECT_EQ(av, 64u - 12u);
    uint64_t token = 0;
    EXPECT_EQ(kvalloc_backup(dev.get(), &token), cpu_mode() ? KVPOOL_OK : KVPOOL_ERR_UNSUPPORTED);
    EXPECT_EQ(kvalloc_free_group_begin(dev.get()), cpu_mode() ? KVPOOL_OK : KVPOOL_ERR_UNSUPPORTED);
  }
  {  // need_sort: 16-slot pool, 32 tokens -> out of memory; a merge happens when the free list is short
    DevicePool dev(config(4, 16, "prefill", true));
    const Result oom = dev.extend({0}, {32}, {-1});
    EXPECT_EQ(oom.status, KVPOOL_ERR_OUT_OF_MEMORY);
    const Result all = dev.alloc(16);
    ASSERT_EQ(all.status, KVPOOL_OK);
    ASSERT_EQ(dev.free_pages({4, 2}), KVPOOL_OK);
    EXPECT_EQ(list_of(dev.get()), Slots{});
    EXPECT_EQ(list_of(dev.get(), KVALLOC_LIST_RELEASE), (Slots{2, 4}));
    // SGLang's merge hint (extend_num_tokens / page + bs + 1 > free pages) holds even for an empty batch.
    ASSERT_EQ(dev.extend({}, {}, {}).status, KVPOOL_OK);
    EXPECT_EQ(list_of(dev.get()), (Slots{2, 4}));
    EXPECT_EQ(list_of(dev.get(), KVALLOC_LIST_RELEASE), Slots{});
    const Result again = dev.extend({0}, {8}, {-1});
    ASSERT_EQ(again.status, KVPOOL_OK);
    EXPECT_EQ(again.slots, (Slots{8, 9, 10, 11, 16, 17, 18, 19}));
    EXPECT_EQ(list_of(dev.get(), KVALLOC_LIST_RELEASE), Slots{});
    // need_sort decode: 5 requests that all need a page, 4 pages -> out of memory
    ASSERT_EQ(dev.free_pages({1, 2, 3, 4}), KVPOOL_OK);
    const Result d = dev.decode({1, 5, 9, 13, 17}, {-1, 3, 7, 11, 15});
    EXPECT_EQ(d.status, KVPOOL_ERR_OUT_OF_MEMORY);
    for (int64_t s : d.slots) EXPECT_EQ(s, -7);
    expect_check(dev.get());
  }
}

// --- the fault model ------------------------------------------------------------

TEST(DeviceAlloc, FaultsStopThePoolUntilClear) {
  REQUIRE_SECOND_DEVICE();
  DevicePool dev(config(4, 64, "none", true));
  const Result held = dev.alloc(8);  // pages 1, 2
  ASSERT_EQ(held.status, KVPOOL_OK);
  ASSERT_EQ(dev.free_pages({1}), KVPOOL_OK);
  if (cpu_mode()) {  // the CPU pool reports a double free at once and changes nothing
    const int64_t twice = 1;
    EXPECT_EQ(kvalloc_free_pages_async(dev.get(), &twice, 1, nullptr), KVPOOL_ERR_INVALID_ARGUMENT);
    return;
  }
#ifdef KVPOOL_TEST_HAVE_CUDA
  Arr<int64_t> twice(Slots{1}), later(4);
  // A double free, then an allocation on the same stream: stream order runs the
  // allocation after the faulting free. The host sees the fault only once the
  // free has run, so the second call is either enqueued (and then does nothing
  // on the device) or already refused.
  ASSERT_EQ(kvalloc_free_pages_async(dev.get(), twice.get(), 1, dev.stream()), KVPOOL_OK) << kvpool_last_error();
  const kvpool_status second = kvalloc_alloc_async(dev.get(), later.get(), 4, dev.stream());
  EXPECT_TRUE(second == KVPOOL_OK || second == KVPOOL_ERR_DEVICE_FAULT) << second << " " << kvpool_last_error();
  EXPECT_EQ(kvpool_synchronize(dev.get(), dev.stream()), KVPOOL_ERR_DEVICE_FAULT);
  const std::string msg = kvpool_last_error();
  EXPECT_NE(msg.find("kvalloc_free_pages_async"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not allocated"), std::string::npos) << msg;
  EXPECT_EQ(later.download(), (Slots{-7, -7, -7, -7}));  // the allocation after the fault did nothing
  // Every later call reports the fault without doing anything.
  EXPECT_EQ(kvalloc_alloc_async(dev.get(), later.get(), 4, dev.stream()), KVPOOL_ERR_DEVICE_FAULT);
  int64_t slot = 0;
  EXPECT_EQ(kvalloc_alloc(dev.get(), &slot, 1), KVPOOL_ERR_DEVICE_FAULT);
  size_t len = 0;
  EXPECT_EQ(kvalloc_free_list(dev.get(), KVALLOC_LIST_FREE, nullptr, 0, &len), KVPOOL_ERR_DEVICE_FAULT);
  EXPECT_EQ(kvpool_check(dev.get(), nullptr, 0), KVPOOL_ERR_DEVICE_FAULT);
  // kvalloc_clear recovers: every page free, in order.
  ASSERT_EQ(kvalloc_clear(dev.get()), KVPOOL_OK) << kvpool_last_error();
  Slots fresh(16);
  for (size_t i = 0; i < 16; ++i) fresh[i] = static_cast<int64_t>(i) + 1;
  EXPECT_EQ(list_of(dev.get()), fresh);
  EXPECT_EQ(dev.alloc(4).slots, (Slots{4, 5, 6, 7}));
  expect_check(dev.get());

  // Other device-side checks: each faults, is reported, and clear recovers.
  struct Bad {
    const char* what;
    const char* expect;
  };
  auto faulted_with = [&](const char* expect) {
    EXPECT_EQ(kvpool_synchronize(dev.get(), dev.stream()), KVPOOL_ERR_DEVICE_FAULT) << expect;
    const std::string m = kvpool_last_error();
    EXPECT_NE(m.find(expect), std::string::npos) << m;
    ASSERT_EQ(kvalloc_clear(dev.get()), KVPOOL_OK);
  };
  {  // device lengths differ from the host copies
    const Slots pre{0}, seq{5}, other{6}, last{-1};
    Arr<int64_t> d_pre(pre), d_seq(other), d_last(last), out(5);
    ASSERT_EQ(kvalloc_extend_async(dev.get(), pre.data(), seq.data(), 1, d_pre.get(), d_seq.get(), d_last.get(),
                                   out.get(), 5, nullptr, 0, dev.stream()),
              KVPOOL_OK);
    faulted_with("host");
  }
  {  // last_loc that does not end the prefix
    const Slots pre{2}, seq{5}, last{6};
    Arr<int64_t> d_pre(pre), d_seq(seq), d_last(last), out(3);
    ASSERT_EQ(kvalloc_extend_async(dev.get(), pre.data(), seq.data(), 1, d_pre.get(), d_seq.get(), d_last.get(),
                                   out.get(), 3, nullptr, 0, dev.stream()),
              KVPOOL_OK);
    faulted_with("last_loc");
  }
  {  // decode with a bad last_loc
    const Slots seq{6}, last{9};
    Arr<int64_t> d_seq(seq), d_last(last), out(1);
    ASSERT_EQ(kvalloc_decode_async(dev.get(), seq.data(), 1, d_seq.get(), d_last.get(), out.get(), nullptr, 0,
                                   dev.stream()),
              KVPOOL_OK);
    faulted_with("last_loc");
  }
  {  // a length below 1 in a decode batch of two blocks (256 requests each): the request's own block
     // reports it, also when it is in the first block and the last one, which compares the totals,
     // would otherwise see them differ first. No request takes a page (seq 6, last_loc 4, page 4).
    for (const size_t bad : {size_t(5), size_t(290)}) {
      const Slots seq(300, 6), last(300, 4);
      Slots device_seq(seq);
      device_seq[bad] = 0;
      Arr<int64_t> d_seq(device_seq), d_last(last), out(300);
      ASSERT_EQ(kvalloc_decode_async(dev.get(), seq.data(), seq.size(), d_seq.get(), d_last.get(), out.get(), nullptr,
                                     0, dev.stream()),
                KVPOOL_OK);
      faulted_with(("element " + std::to_string(bad) + ": lengths (seq 0").c_str());
    }
  }
  {  // a page out of range, page 0, a page listed twice
    ASSERT_EQ(kvalloc_clear(dev.get()), KVPOOL_OK);
    ASSERT_EQ(dev.alloc(64).status, KVPOOL_OK);
    for (const Slots& bad : {Slots{17}, Slots{0}, Slots{3, 3}}) {
      Arr<int64_t> d(bad);
      ASSERT_EQ(kvalloc_free_pages_async(dev.get(), d.get(), bad.size(), dev.stream()), KVPOOL_OK);
      faulted_with(bad[0] == 0 ? "reserved" : bad.size() == 2 ? "twice" : "out of range");
      ASSERT_EQ(dev.alloc(64).status, KVPOOL_OK);
    }
  }
  {  // request table: a row out of range
    const std::vector<int32_t> rows{0};
    const Slots pre{0}, seq{2}, ext{5, 6};
    Arr<int32_t> d_rows(rows);
    Arr<int64_t> d_pre(pre), d_seq(seq), d_ext(ext);
    ASSERT_EQ(kvreq_write_batch_async(dev.get(), d_rows.get(), d_pre.get(), d_seq.get(), 1, nullptr, 0, d_ext.get(), 2,
                                      dev.stream()),
              KVPOOL_OK);
    faulted_with("row");
  }
  expect_check(dev.get());
#endif
}

// --- request table ----------------------------------------------------------------

TEST(DeviceReq, WriteBatchAndLastLocMatchTheCpu) {
  REQUIRE_SECOND_DEVICE();
  std::mt19937_64 rng(fresh_seed());
  auto rand = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int rows_n = 400, context = 64;
  // The request-table calls work on every CUDA pool (a host free list here).
  const std::string cuda_json = cpu_mode() ? config(16, 8192, "none", false, rows_n, context)
                                           : R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {"device": "cuda:0", "kv_dtype": "f32", "page_size": 16, "max_total_tokens": 8192, "max_running_requests": 400, "max_context_len": 64}})";
  PoolPtr cpu(config(16, 8192, "none", false, rows_n, context));
  PoolPtr dev(cuda_json);
  Stream stream;
  std::vector<int32_t> rows(static_cast<size_t>(rows_n)), rows_dev(rows.size());
  ASSERT_EQ(kvreq_alloc(cpu, rows.data(), rows.size()), KVPOOL_OK);
  ASSERT_EQ(kvreq_alloc(dev, rows_dev.data(), rows_dev.size()), KVPOOL_OK);
  ASSERT_EQ(rows, rows_dev);
  std::shuffle(rows.begin(), rows.end(), rng);
  for (int round = 0; round < 3; ++round) {
    const size_t batch = static_cast<size_t>(rand(1, rows_n));
    std::vector<int32_t> rb(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(batch));
    Slots pre(batch), seq(batch), prefix_slots, extend_slots;
    for (size_t i = 0; i < batch; ++i) {
      pre[i] = rand(0, context / 2);
      seq[i] = pre[i] + rand(0, context / 2);
      for (int64_t t = 0; t < pre[i]; ++t) prefix_slots.push_back(rand(0, 8192 + 15));
      for (int64_t t = pre[i]; t < seq[i]; ++t) extend_slots.push_back(rand(0, 8192 + 15));
    }
    const bool with_prefix = round != 1;
    Arr<int32_t> d_rows(rb);
    Arr<int64_t> d_pre(pre), d_seq(seq), d_prefix(prefix_slots), d_ext(extend_slots);
    ASSERT_EQ(kvreq_write_batch_async(dev, d_rows.get(), d_pre.get(), d_seq.get(), batch,
                                      with_prefix ? d_prefix.get() : nullptr, with_prefix ? prefix_slots.size() : 0,
                                      d_ext.get(), extend_slots.size(), stream.get()),
              KVPOOL_OK)
        << kvpool_last_error();
    ASSERT_EQ(kvreq_write_batch_async(cpu, rb.data(), pre.data(), seq.data(), batch,
                                      with_prefix ? prefix_slots.data() : nullptr, with_prefix ? prefix_slots.size() : 0,
                                      extend_slots.data(), extend_slots.size(), nullptr),
              KVPOOL_OK)
        << kvpool_last_error();
    Slots lens(batch);
    for (size_t i = 0; i < batch; ++i) lens[i] = rand(0, seq[i]);
    Arr<int64_t> d_lens(lens), d_last(batch);
    ASSERT_EQ(kvreq_last_loc_async(dev, d_rows.get(), d_lens.get(), batch, d_last.get(), stream.get()), KVPOOL_OK);
    ASSERT_EQ(kvpool_synchronize(dev, stream.get()), KVPOOL_OK) << kvpool_last_error();
    Slots cpu_last(batch, -7);
    ASSERT_EQ(kvreq_last_loc_async(cpu, rb.data(), lens.data(), batch, cpu_last.data(), nullptr), KVPOOL_OK);
    EXPECT_EQ(d_last.download(), cpu_last);
    for (size_t i = 0; i < batch; ++i) {
      Slots a(static_cast<size_t>(context), -7), b(a.size(), -7);
      ASSERT_EQ(kvreq_read(dev, rb[i], 0, a.data(), a.size()), KVPOOL_OK);
      ASSERT_EQ(kvreq_read(cpu, rb[i], 0, b.data(), b.size()), KVPOOL_OK);
      ASSERT_EQ(a, b) << "row " << rb[i];
    }
  }
}

TEST(DeviceAlloc, HostFreeListPoolsRefuseStreamOrderedAllocation) {
  if (cpu_mode()) GTEST_SKIP() << "CUDA pools only";
  KVPOOL_REQUIRE_CUDA_DEVICE();
  PoolPtr dev(R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {"device": "cuda:0", "kv_dtype": "f32", "page_size": 16, "max_total_tokens": 1024, "max_context_len": 64}})");
  Arr<int64_t> out(16);
  EXPECT_EQ(kvalloc_alloc_async(dev, out.get(), 16, nullptr), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kvpool_last_error()).find("free_list"), std::string::npos) << kvpool_last_error();
  // kvseq_* and radix_* run on a device free list too (its host mirror; gpu_seq_parity_test.cpp).
  PoolPtr devlist(config(16, 1024, "none", true));
  size_t a = 0, e = 0, p = 0, u = 0, c = 0;
  EXPECT_EQ(kvseq_accounting(devlist, &a, &e, &p, &u, &c), KVPOOL_OK) << kvpool_last_error();
  EXPECT_EQ(a, c);
}

}  // namespace
