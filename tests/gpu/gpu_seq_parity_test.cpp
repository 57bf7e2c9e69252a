// kvseq_* and radix_* on every backend and free list give the same results: one
// random request workload (chunked prefill, shared prefixes, decode, finish,
// abort, retract, eviction under pressure) runs in lock step on
//   - a CPU pool (host-array calls: the reference),
//   - a CUDA pool with the host free list (host-array calls),
//   - a CUDA pool with the host free list (kvseq_*_async, device output arrays),
//   - a CUDA pool with the device free list (kvseq_*_async: its host mirror),
// and every status, every slot returned, the accounting and kvpool_check() are
// compared after every step; every live request's table row is read back and
// compared with its slots every few steps. The seed is printed.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_env.hpp"

namespace {

using Slots = std::vector<int64_t>;

struct PoolDeleter {
  void operator()(kvpool* p) const { kvpool_destroy(p); }
};
using PoolPtr = std::unique_ptr<kvpool, PoolDeleter>;

PoolPtr make_pool(const std::string& json) {
  kvpool* p = nullptr;
  EXPECT_EQ(kvpool_create(json.data(), json.size(), &p), KVPOOL_OK) << kvpool_last_error() << "\n" << json;
  return PoolPtr(p);
}

// page > 0: an mha pool of that page size; page 0: hybrid_linear (mamba states); page -1: swa.
std::string config(int64_t page, const char* device_part) {
  std::string model = R"({"model": {"num_layers": 1, "kv_heads": 1, "head_dim": 8}, "pool": {)";
  std::string extra = R"("page_size": )" + std::to_string(page) + ", ";
  if (page == 0) {
    model = R"({"model": {"num_layers": 4, "attention": "hybrid_linear", "kv_heads": 2, "head_dim": 8,
      "full_attention_layers": [3], "mamba": {"conv_shape": [4, 3], "ssm_shape": [2, 4, 4],
      "conv_dtype": "f32", "ssm_dtype": "f32"}}, "pool": {)";
    extra = R"("mamba_cache_size": 160, )";
  } else if (page < 0) {
    model = R"({"model": {"num_layers": 4, "attention": "swa", "kv_heads": 2, "head_dim": 8, "sliding_window": 8,
      "swa_layer_pattern": "SF"}, "pool": {)";
    extra = R"("swa_full_tokens_ratio": 0.5, )";
  }
  return model + std::string(device_part) + R"("kv_dtype": "f32", )" + extra +
         R"("max_total_tokens": 3072, "max_context_len": 512, "max_running_requests": 24},)"
         R"( "prefix_cache": {"kind": "radix", "eviction": "lru"}})";
}

// One pool of the comparison and how it is called.
struct Lane {
  const char* name;
  PoolPtr pool;
  bool async = false;  // kvseq_*_async with a device output array
};

class DeviceSlots {
 public:
  explicit DeviceSlots(size_t cap) : cap_(cap) { EXPECT_EQ(cudaMalloc(&ptr_, cap * sizeof(int64_t)), cudaSuccess); }
  ~DeviceSlots() { cudaFree(ptr_); }
  int64_t* get() { return static_cast<int64_t*>(ptr_); }
  Slots download(size_t n) const {
    Slots v(n);
    if (n > 0) {
      EXPECT_EQ(cudaMemcpy(v.data(), ptr_, n * sizeof(int64_t), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return v;
  }
  void poison() { EXPECT_EQ(cudaMemset(ptr_, 0xff, cap_ * sizeof(int64_t)), cudaSuccess); }

 private:
  void* ptr_ = nullptr;
  size_t cap_;
};

struct Outcome {
  kvpool_status status;
  Slots slots;
  bool operator==(const Outcome& o) const { return status == o.status && slots == o.slots; }
};

std::string show(const Outcome& o) {
  std::string s = "status " + std::to_string(o.status) + " slots [";
  for (size_t i = 0; i < o.slots.size() && i < 12; ++i) s += std::to_string(o.slots[i]) + " ";
  return s + (o.slots.size() > 12 ? "...]" : "]");
}

class SeqParity {
 public:
  SeqParity(int64_t page, uint64_t seed) : rng_(seed), device_out_(4096) {
    lanes_.push_back({"cpu", make_pool(config(page, R"("device": "cpu", )")), false});
    lanes_.push_back({"cuda host list", make_pool(config(page, R"("device": "cuda:0", )")), false});
    lanes_.push_back({"cuda host list, async", make_pool(config(page, R"("device": "cuda:0", )")), true});
    if (page >= 0) {  // swa pools have no device free list (docs/cuda.md)
      lanes_.push_back({"cuda device list, async",
                        make_pool(config(page, R"("device": "cuda:0", "free_list": "device", )")), true});
    }
    EXPECT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    for (int g = 0; g < 4; ++g) prefixes_.push_back(tokens(static_cast<size_t>(rand(16, 160))));
  }
  ~SeqParity() { cudaStreamDestroy(stream_); }

  void run(int steps) {
    for (int step = 0; step < steps && !::testing::Test::HasFatalFailure(); ++step) {
      step_ = step;
      const int op = static_cast<int>(rand(0, 99));
      if (op < 22 || live_.size() < 2) {
        begin();
      } else if (op < 50) {
        extend();
      } else if (op < 75) {
        decode();
      } else if (op < 85) {
        finish();
      } else if (op < 90) {
        abort_one();
      } else if (op < 95) {
        retract();
      } else {
        evict();
      }
      check_all(step % 8 == 0);
    }
    while (!live_.empty()) {
      finish();
      check_all(false);
    }
  }

 private:
  int64_t rand(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  std::vector<int32_t> tokens(size_t n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rand(0, 50000));
    return t;
  }

  // Runs `call` on every lane and requires the same outcome as the CPU pool's.
  template <class Call>
  Outcome all(const char* what, Call call) {
    Outcome first{};
    for (size_t l = 0; l < lanes_.size(); ++l) {
      const Outcome o = call(lanes_[l]);
      if (l == 0) {
        first = o;
      } else {
        EXPECT_TRUE(o == first) << what << " at step " << step_ << ": " << lanes_[l].name << " gave " << show(o)
                                << ", cpu " << show(first) << " (" << kvpool_last_error() << ")";
      }
    }
    return first;
  }

  void begin() {
    std::vector<int32_t> t = prefixes_[static_cast<size_t>(rand(0, 3))];
    t.resize(static_cast<size_t>(rand(1, static_cast<int64_t>(t.size()))));
    const std::vector<int32_t> tail = tokens(static_cast<size_t>(rand(1, 200)));
    t.insert(t.end(), tail.begin(), tail.end());
    uint64_t id = 0;
    const Outcome o = all("kvseq_begin", [&](Lane& l) {
      size_t cached = 0;
      const kvpool_status st = kvseq_begin(l.pool.get(), t.data(), t.size(), nullptr, &id, &cached);
      return Outcome{st, {static_cast<int64_t>(id), static_cast<int64_t>(cached)}};
    });
    if (o.status == KVPOOL_OK) live_.push_back(Live{id, t.size()});
  }

  kvseq_info info(uint64_t id) {
    kvseq_info i = KVSEQ_INFO_INIT;
    EXPECT_EQ(kvseq_get_info(lanes_[0].pool.get(), id, &i), KVPOOL_OK);
    return i;
  }

  // A call that writes slots: the async lanes get them in a poisoned device array.
  template <class Sync, class Async>
  Outcome with_slots(const char* what, size_t n, Sync sync, Async async) {
    return all(what, [&](Lane& l) {
      Slots out(n, -7);
      kvpool_status st;
      if (l.async) {
        device_out_.poison();
        st = async(l.pool.get(), device_out_.get(), n);
        EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        if (st == KVPOOL_OK) out = device_out_.download(n);
      } else {
        st = sync(l.pool.get(), out.data(), n);
      }
      if (st != KVPOOL_OK) out.clear();
      return Outcome{st, out};
    });
  }

  void extend() {
    std::vector<uint64_t> ids;
    std::vector<int64_t> chunks;
    size_t total = 0;
    for (const Live& r : live_) {
      const kvseq_info i = info(r.id);
      if (i.computed >= i.tokens || ids.size() >= 4 || rand(0, 2) == 0) continue;
      const int64_t left = static_cast<int64_t>(i.tokens - i.computed);
      const int64_t chunk = rand(0, 1) == 0 ? left : rand(1, left);  // whole prompts and chunked prefill
      ids.push_back(r.id);
      chunks.push_back(chunk);
      total += static_cast<size_t>(chunk);
    }
    if (ids.empty()) return;
    with_slots(
        "kvseq_extend", total,
        [&](kvpool* p, int64_t* out, size_t n) {
          return kvseq_extend(p, ids.data(), ids.size(), chunks.data(), chunks.size(), out, n);
        },
        [&](kvpool* p, int64_t* out, size_t n) {
          return kvseq_extend_async(p, ids.data(), ids.size(), chunks.data(), chunks.size(), out, n, stream_);
        });
  }

  void decode() {
    std::vector<uint64_t> ids;
    for (const Live& r : live_) {
      const kvseq_info i = info(r.id);
      if (i.row >= 0 && i.computed == i.tokens && i.tokens < 500) ids.push_back(r.id);
    }
    if (ids.empty()) return;
    const std::vector<int32_t> toks = tokens(ids.size());
    with_slots(
        "kvseq_decode", ids.size(),
        [&](kvpool* p, int64_t* out, size_t n) { return kvseq_decode(p, ids.data(), ids.size(), toks.data(), n, out, n); },
        [&](kvpool* p, int64_t* out, size_t n) {
          return kvseq_decode_async(p, ids.data(), ids.size(), toks.data(), n, out, n, stream_);
        });
  }

  size_t pick() { return static_cast<size_t>(rand(0, static_cast<int64_t>(live_.size()) - 1)); }

  void finish() {
    if (live_.empty()) return;
    const size_t k = pick();
    const uint64_t id = live_[k].id;
    const kvseq_info i = info(id);
    const size_t committed = static_cast<size_t>(rand(0, static_cast<int64_t>(i.computed)));
    all("kvseq_finish", [&](Lane& l) { return Outcome{kvseq_finish(l.pool.get(), id, committed), {}}; });
    live_.erase(live_.begin() + static_cast<long>(k));
  }

  void abort_one() {
    if (live_.empty()) return;
    const size_t k = pick();
    const uint64_t id = live_[k].id;
    all("kvseq_abort", [&](Lane& l) { return Outcome{kvseq_abort(l.pool.get(), id), {}}; });
    live_.erase(live_.begin() + static_cast<long>(k));
  }

  void retract() {
    if (live_.empty()) return;
    const uint64_t id = live_[pick()].id;
    all("kvseq_retract", [&](Lane& l) {
      size_t cached = 0;
      const kvpool_status st = kvseq_retract(l.pool.get(), id, &cached);
      return Outcome{st, {static_cast<int64_t>(cached)}};
    });
  }

  void evict() {
    const size_t want = static_cast<size_t>(rand(1, 600));
    all("radix_evict", [&](Lane& l) {
      size_t evicted = 0;
      const kvpool_status st = radix_evict(l.pool.get(), want, &evicted);
      return Outcome{st, {static_cast<int64_t>(evicted)}};
    });
  }

  void check_all(bool rows) {
    all("accounting", [&](Lane& l) {
      size_t a = 0, e = 0, p = 0, u = 0, c = 0;
      const kvpool_status st = kvseq_accounting(l.pool.get(), &a, &e, &p, &u, &c);
      return Outcome{st, {int64_t(a), int64_t(e), int64_t(p), int64_t(u), int64_t(c)}};
    });
    for (Lane& l : lanes_) {
      char report[512];
      EXPECT_EQ(kvpool_check(l.pool.get(), report, sizeof(report)), KVPOOL_OK)
          << l.name << " at step " << step_ << ": " << report;
    }
    if (!rows) return;
    for (const Live& r : live_) {  // the table rows the attention kernels read
      all("table row", [&](Lane& l) {
        kvseq_info i = KVSEQ_INFO_INIT;
        EXPECT_EQ(kvseq_get_info(l.pool.get(), r.id, &i), KVPOOL_OK);
        Slots slots(i.computed), row(i.computed, -7);
        size_t n = 0;
        EXPECT_EQ(kvseq_get_slots(l.pool.get(), r.id, slots.data(), slots.size(), &n), KVPOOL_OK);
        if (i.row >= 0 && !row.empty()) {
          EXPECT_EQ(kvreq_read(l.pool.get(), i.row, 0, row.data(), row.size()), KVPOOL_OK) << kvpool_last_error();
          EXPECT_EQ(row, slots) << l.name << ": request " << r.id << " row " << i.row << " at step " << step_;
        }
        return Outcome{KVPOOL_OK, slots};
      });
    }
  }

  struct Live {
    uint64_t id;
    size_t prompt;
  };
  std::mt19937_64 rng_;
  std::vector<Lane> lanes_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::vector<Live> live_;
  DeviceSlots device_out_;
  cudaStream_t stream_ = nullptr;
  int step_ = 0;
};

uint64_t seed_now() {
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

TEST(SeqParity, EveryBackendAndFreeListGivesTheSameSlots) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  for (int64_t page : {1, 16, 0, -1}) {  // mha page 1 and 16, hybrid_linear, swa
    const uint64_t seed = seed_now();
    std::printf("kvseq parity: %s, seed %llu\n", page > 0 ? ("mha page " + std::to_string(page)).c_str() : page == 0 ? "hybrid_linear" : "swa",
                static_cast<unsigned long long>(seed));
    SeqParity t(page, seed);
    t.run(600);
    if (::testing::Test::HasFailure()) return;
  }
}

// The device free list's two copies: kvseq_* on the host mirror, kvalloc_*_async on
// the device lists, interleaved; a CPU pool doing the same is the reference.
TEST(SeqParity, DeviceListMirrorFollowsDeviceCalls) {
  KVPOOL_REQUIRE_CUDA_DEVICE();
  for (int64_t page : {1, 16}) {
    PoolPtr cpu = make_pool(config(page, R"("device": "cpu", )"));
    PoolPtr dev = make_pool(config(page, R"("device": "cuda:0", "free_list": "device", )"));
    std::mt19937_64 rng(static_cast<uint64_t>(page));
    DeviceSlots d_slots(256), d_pages(256);
    for (int round = 0; round < 40; ++round) {
      // kvseq on both: a request, extended and finished (its pages go to the tree).
      std::vector<int32_t> prompt(static_cast<size_t>(16 + rng() % 100));
      for (auto& x : prompt) x = static_cast<int32_t>(rng() % 1000);
      uint64_t ids[2] = {0, 0};
      size_t cached[2] = {0, 0};
      kvpool* pools[2] = {cpu.get(), dev.get()};
      Slots got[2];
      for (int k = 0; k < 2; ++k) {
        ASSERT_EQ(kvseq_begin(pools[k], prompt.data(), prompt.size(), nullptr, &ids[k], &cached[k]), KVPOOL_OK);
        const int64_t chunk = static_cast<int64_t>(prompt.size() - cached[k]);
        got[k].assign(static_cast<size_t>(chunk), -1);
        ASSERT_EQ(kvseq_extend(pools[k], &ids[k], 1, &chunk, 1, got[k].data(), got[k].size()), KVPOOL_OK)
            << kvpool_last_error();
        ASSERT_EQ(kvseq_finish(pools[k], ids[k], prompt.size()), KVPOOL_OK);
      }
      ASSERT_EQ(got[0], got[1]) << "round " << round;
      // Device-side allocation on both: pages taken with kvalloc_alloc_async, then given back.
      const size_t n = static_cast<size_t>(page) * (1 + rng() % 4);
      Slots cpu_slots(n);
      ASSERT_EQ(kvalloc_alloc_async(cpu.get(), cpu_slots.data(), n, nullptr), KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(kvalloc_alloc_async(dev.get(), d_slots.get(), n, nullptr), KVPOOL_OK) << kvpool_last_error();
      ASSERT_EQ(d_slots.download(n), cpu_slots) << "round " << round;
      Slots cpu_pages;
      for (size_t i = 0; i < n; i += static_cast<size_t>(page)) cpu_pages.push_back(cpu_slots[i] / page);
      std::shuffle(cpu_pages.begin(), cpu_pages.end(), rng);
      ASSERT_EQ(cudaMemcpy(d_pages.get(), cpu_pages.data(), cpu_pages.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(kvalloc_free_pages_async(cpu.get(), cpu_pages.data(), cpu_pages.size(), nullptr), KVPOOL_OK);
      ASSERT_EQ(kvalloc_free_pages_async(dev.get(), d_pages.get(), cpu_pages.size(), nullptr), KVPOOL_OK);
      // The lists agree (read through whichever copy is current) and both pools pass their checks.
      for (int32_t list : {KVALLOC_LIST_FREE}) {
        size_t len[2] = {0, 0};
        Slots ids_out[2] = {Slots(4096), Slots(4096)};
        for (int k = 0; k < 2; ++k) {
          ASSERT_EQ(kvalloc_free_list(pools[k], list, ids_out[k].data(), ids_out[k].size(), &len[k]), KVPOOL_OK);
          ids_out[k].resize(len[k]);
        }
        ASSERT_EQ(ids_out[0], ids_out[1]) << "round " << round;
      }
      for (kvpool* p : pools) {
        char report[512];
        ASSERT_EQ(kvpool_check(p, report, sizeof(report)), KVPOOL_OK) << report;
      }
    }
  }
}

}  // namespace
