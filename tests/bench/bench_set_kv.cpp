// kvpool_set_kv / kvpool_get_kv bandwidth (SGLang's set_kv_buffer and the
// reads of the CPU backend), each against a plain memcpy of the same bytes
// timed in the same run.
//
// Pool: mha, 2 layers x 8 KV heads x 128 head_dim (Llama-3-8B-like per-rank
// shape), 131072 slots; layer 1 is written / read. Rows: n random distinct
// slots (n = 8192 or 65536, so the pool holds >= 2x n).
//
// "The same bytes" is the pool side: bytes counted = the K+V bytes as stored
// in the pool (n x 8 x 128 x sizeof(pool dtype) x 2), written by set_kv or
// read by get_kv. The memcpy reference copies that many bytes contiguously
// (two halves, like K and V). A conversion's caller side can be wider (f32
// into a bf16 pool reads 2x the bytes it writes); it is reported as
// caller_bytes_per_call, and the comparison does not credit it. fp4 rows
// count their values and their scales (two values a byte, one scale byte per
// 16 values); nsa's packed fp8 rows (BM_SetMlaKV / BM_GetNsa) the packed row.
//
// The machine these run on is shared, so the reference is measured inside
// every iteration, right before the call: counter vs_memcpy = median memcpy
// time / median call time over the iterations (>= 1 means as fast as memcpy).
// vs_memcpy_cpu is the same ratio of thread CPU times, which leaves out the
// time the thread waited for a core on a loaded machine (memory stalls count).
// vs_memcpy_traffic credits a conversion with the bytes it moves: memcpy moves
// 2 x bytes_per_call (read + write), the call bytes_per_call +
// caller_bytes_per_call, so it is vs_memcpy x (pool + caller bytes) / (2 x
// pool bytes); it equals vs_memcpy for same-type rows.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench_common.hpp"

// Resolved at run time so that this file builds (and links) against a
// libkvpool that does not export kvpool_set_kv yet; the benchmark then skips
// itself. With the function present this is an ordinary call.
#pragma weak kvpool_set_kv
#pragma weak kvpool_get_kv

namespace {

using kvbench::ok;

constexpr int64_t kHeads = 8;
constexpr int64_t kHeadDim = 128;
constexpr int64_t kPoolTokens = 131072;  // >= 2 x the largest slot count
constexpr int32_t kLayer = 1;
constexpr int64_t kRowElems = kHeads * kHeadDim;

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32: return 4;
    case KVPOOL_DTYPE_F16:
    case KVPOOL_DTYPE_BF16: return 2;
    default: return 1;  // fp8 (fp4: see pool_row_bytes)
  }
}

// Bytes of one K (or V) row as stored: fp4 keeps two values per byte and one
// e4m3 scale per 16 values in a separate buffer.
int64_t pool_row_bytes(int32_t dtype) {
  if (dtype == KVPOOL_DTYPE_FP4_E2M1) return kRowElems / 2 + kRowElems / 16;
  return kRowElems * static_cast<int64_t>(dtype_size(dtype));
}

const char* dtype_json(int32_t dtype) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32: return "f32";
    case KVPOOL_DTYPE_F16: return "f16";
    case KVPOOL_DTYPE_BF16: return "bf16";
    case KVPOOL_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case KVPOOL_DTYPE_FP4_E2M1: return "fp4_e2m1";
    default: return "fp8_e5m2";
  }
}

std::string pool_json(int32_t kv_dtype) {
  return std::string(R"({"model": {"num_layers": 2, "kv_heads": )") + std::to_string(kHeads) +
         R"(, "head_dim": )" + std::to_string(kHeadDim) + R"(}, "pool": {"kv_dtype": ")" + dtype_json(kv_dtype) +
         R"(", "page_size": 1, "max_total_tokens": )" + std::to_string(kPoolTokens) +
         R"(, "max_running_requests": 8, "max_context_len": 64}})";
}

// Source values in [-2, 2) (finite in every dtype, no fp8 overflow), from a
// cheap deterministic generator (the buffers are hundreds of MiB).
float value_at(uint64_t i, uint64_t salt) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<float>(x & 0xffff) / 16384.0f - 2.0f;
}

uint16_t to_bf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);  // round to nearest even
}

// K or V source data of n rows, cached per (n, dtype, which).
const std::vector<uint8_t>& source(int64_t n, int32_t dtype, int which) {
  static std::map<std::tuple<int64_t, int32_t, int>, std::vector<uint8_t>> cache;
  auto key = std::make_tuple(n, dtype, which);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const uint64_t elems = static_cast<uint64_t>(n * kRowElems);
  std::vector<uint8_t> bytes(elems * dtype_size(dtype));
  const uint64_t salt = kvbench::kSeed + static_cast<uint64_t>(which);
  if (dtype == KVPOOL_DTYPE_F32) {
    float* p = reinterpret_cast<float*>(bytes.data());
    for (uint64_t i = 0; i < elems; ++i) p[i] = value_at(i, salt);
  } else if (dtype == KVPOOL_DTYPE_BF16) {
    uint16_t* p = reinterpret_cast<uint16_t*>(bytes.data());
    for (uint64_t i = 0; i < elems; ++i) p[i] = to_bf16(value_at(i, salt));
  } else {  // fp8 rows as stored: any byte but the NaN codes (0x7f, 0xff in both fp8 formats' worst case)
    for (uint64_t i = 0; i < elems; ++i) {
      const uint8_t b = static_cast<uint8_t>(to_bf16(value_at(i, salt)) >> 4);
      bytes[i] = (b & 0x7f) == 0x7f ? static_cast<uint8_t>(b - 1) : b;
    }
  }
  return cache.emplace(key, std::move(bytes)).first->second;
}

// n random distinct slots in [1, kPoolTokens] (slot 0 is padding), fixed seed.
const std::vector<int64_t>& slots_for(int64_t n) {
  static std::map<int64_t, std::vector<int64_t>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  std::vector<int64_t> all(kPoolTokens);
  std::iota(all.begin(), all.end(), int64_t{1});
  std::mt19937_64 rng(kvbench::kSeed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(n));
  return cache.emplace(n, std::move(all)).first->second;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The reference: `bytes` copied as two contiguous halves (like K and V),
// buffers faulted in once and kept for the process.
struct MemcpyReference {
  std::vector<uint8_t> src, dst;
  explicit MemcpyReference(size_t bytes) : src(bytes, 1), dst(bytes, 0) {}
  // Returns wall seconds; adds the thread's CPU seconds to *cpu.
  double run(double* cpu) {
    const double c0 = thread_cpu_seconds();
    const auto t0 = kvbench::Clock::now();
    const size_t half = src.size() / 2;
    std::memcpy(dst.data(), src.data(), half);
    std::memcpy(dst.data() + half, src.data() + half, src.size() - half);
    benchmark::ClobberMemory();
    const double wall = kvbench::seconds_between(t0, kvbench::Clock::now());
    *cpu = thread_cpu_seconds() - c0;
    return wall;
  }
  static MemcpyReference& of(size_t bytes) {
    static std::map<size_t, MemcpyReference> cache;
    return cache.try_emplace(bytes, bytes).first->second;
  }
};

// Times `call` (manual time) and the memcpy of `pool_bytes` in every iteration.
template <class Call>
void timed_against_memcpy(benchmark::State& state, int64_t pool_bytes, int64_t caller_bytes, Call call) {
  MemcpyReference& ref = MemcpyReference::of(static_cast<size_t>(pool_bytes));
  std::vector<double> mine, theirs, mine_cpu, theirs_cpu;
  for (auto _ : state) {
    double ref_cpu = 0.0;
    theirs.push_back(ref.run(&ref_cpu));
    theirs_cpu.push_back(ref_cpu);
    const double c0 = thread_cpu_seconds();
    const auto t0 = kvbench::Clock::now();
    if (!call()) break;
    benchmark::ClobberMemory();
    const double t = kvbench::seconds_between(t0, kvbench::Clock::now());
    mine_cpu.push_back(thread_cpu_seconds() - c0);
    mine.push_back(t);
    state.SetIterationTime(t);
  }
  state.SetBytesProcessed(state.iterations() * pool_bytes);
  state.counters["bytes_per_call"] = static_cast<double>(pool_bytes);
  state.counters["caller_bytes_per_call"] = static_cast<double>(caller_bytes);
  const double m = median(mine), r = median(theirs);
  state.counters["memcpy_GBps"] = r > 0 ? static_cast<double>(pool_bytes) / r / 1e9 : 0.0;
  state.counters["vs_memcpy"] = m > 0 ? r / m : 0.0;
  state.counters["vs_memcpy_traffic"] =
      m > 0 ? r / m * static_cast<double>(pool_bytes + caller_bytes) / (2.0 * static_cast<double>(pool_bytes)) : 0.0;
  const double mc = median(mine_cpu), rc = median(theirs_cpu);
  state.counters["vs_memcpy_cpu"] = mc > 0 ? rc / mc : 0.0;
}

void BM_SetKV(benchmark::State& state, int32_t pool_dtype, int32_t src_dtype) {
  const int64_t n = state.range(0);
  if (&kvpool_set_kv == nullptr) {
    state.SkipWithError("kvpool_set_kv is not exported by this libkvpool build (not implemented yet)");
    return;
  }
  kvpool* pool = kvbench::PoolCache::get(state, pool_json(pool_dtype));
  if (pool == nullptr) return;
  const std::vector<int64_t>& slots = slots_for(n);
  const std::vector<uint8_t>& k = source(n, src_dtype, 0);
  const std::vector<uint8_t>& v = source(n, src_dtype, 1);
  const int64_t written = n * pool_row_bytes(pool_dtype) * 2;
  timed_against_memcpy(state, written, static_cast<int64_t>(k.size() + v.size()), [&] {
    const kvpool_status st = kvpool_set_kv(pool, kLayer, slots.data(), slots.size(), k.data(), k.size(), v.data(),
                                           v.size(), src_dtype, 1.0f, 1.0f);
    return ok(state, st, "kvpool_set_kv");
  });
}

// get_kv of the rows set_kv writes (filled once, from bf16 values, before timing).
void BM_GetKV(benchmark::State& state, int32_t pool_dtype, int32_t dst_dtype) {
  const int64_t n = state.range(0);
  if (&kvpool_get_kv == nullptr) {
    state.SkipWithError("kvpool_get_kv is not exported by this libkvpool build");
    return;
  }
  kvpool* pool = kvbench::PoolCache::get(state, pool_json(pool_dtype));
  if (pool == nullptr) return;
  const std::vector<int64_t>& slots = slots_for(n);
  const std::vector<uint8_t>& k = source(n, KVPOOL_DTYPE_BF16, 0);
  const std::vector<uint8_t>& v = source(n, KVPOOL_DTYPE_BF16, 1);
  if (!ok(state, kvpool_set_kv(pool, kLayer, slots.data(), slots.size(), k.data(), k.size(), v.data(), v.size(),
                               KVPOOL_DTYPE_BF16, 1.0f, 1.0f),
          "kvpool_set_kv")) {
    return;
  }
  const size_t out_bytes = static_cast<size_t>(n * kRowElems) * dtype_size(dst_dtype);
  std::vector<uint8_t> k_out(out_bytes, 0), v_out(out_bytes, 0);  // faulted in before timing
  const int64_t read = n * pool_row_bytes(pool_dtype) * 2;
  timed_against_memcpy(state, read, static_cast<int64_t>(2 * out_bytes), [&] {
    const kvpool_status st = kvpool_get_kv(pool, kLayer, slots.data(), slots.size(), k_out.data(), out_bytes,
                                           v_out.data(), out_bytes, dst_dtype);
    return ok(state, st, "kvpool_get_kv");
  });
}

// nsa's packed fp8 rows (DeepSeek-V3.2's shape: 512 nope values as e4m3 with
// one f32 scale per 128, 64 rope values as bf16: 656 bytes a row), written by
// kvpool_set_mla_kv from bf16 and read by kvpool_get_kv to bf16 or f32. The
// pool side is the packed rows (no V); the caller side nope + rope values.
constexpr int64_t kNsaLora = 512, kNsaRope = 64, kNsaPacked = kNsaLora + kNsaLora / 128 * 4 + kNsaRope * 2;

std::string nsa_pool_json() {
  return std::string(R"({"model": {"num_layers": 2, "attention": "nsa", "kv_lora_rank": )") +
         std::to_string(kNsaLora) + R"(, "qk_rope_head_dim": )" + std::to_string(kNsaRope) +
         R"(, "index_head_dim": 128}, "pool": {"kv_dtype": "fp8_e4m3", "page_size": 64, "max_total_tokens": )" +
         std::to_string(kPoolTokens) + R"(, "max_running_requests": 8, "max_context_len": 64}})";
}

// The nope and rope values of n rows from bf16 (the K and V sources' first bytes).
bool set_nsa_rows(benchmark::State& state, kvpool* pool, int64_t n) {
  const std::vector<int64_t>& slots = slots_for(n);
  const std::vector<uint8_t>& nope = source(n, KVPOOL_DTYPE_BF16, 0);
  const std::vector<uint8_t>& rope = source(n, KVPOOL_DTYPE_BF16, 1);
  const kvpool_status st =
      kvpool_set_mla_kv(pool, kLayer, slots.data(), slots.size(), nope.data(), static_cast<size_t>(n * kNsaLora * 2),
                        rope.data(), static_cast<size_t>(n * kNsaRope * 2), KVPOOL_DTYPE_BF16);
  return ok(state, st, "kvpool_set_mla_kv");
}

void BM_SetNsa(benchmark::State& state) {
  const int64_t n = state.range(0);
  kvpool* pool = kvbench::PoolCache::get(state, nsa_pool_json());
  if (pool == nullptr) return;
  timed_against_memcpy(state, n * kNsaPacked, n * (kNsaLora + kNsaRope) * 2,
                       [&] { return set_nsa_rows(state, pool, n); });
}

void BM_GetNsa(benchmark::State& state, int32_t dst_dtype) {
  const int64_t n = state.range(0);
  kvpool* pool = kvbench::PoolCache::get(state, nsa_pool_json());
  if (pool == nullptr || !set_nsa_rows(state, pool, n)) return;
  const std::vector<int64_t>& slots = slots_for(n);
  const size_t out_bytes = static_cast<size_t>(n * (kNsaLora + kNsaRope)) * dtype_size(dst_dtype);
  std::vector<uint8_t> out(out_bytes, 0);  // faulted in before timing
  timed_against_memcpy(state, n * kNsaPacked, static_cast<int64_t>(out_bytes), [&] {
    const kvpool_status st =
        kvpool_get_kv(pool, kLayer, slots.data(), slots.size(), out.data(), out_bytes, nullptr, 0, dst_dtype);
    return ok(state, st, "kvpool_get_kv");
  });
}

// Reference alone: memcpy of the same K+V byte count (two contiguous copies of
// half each, like K and V), source and destination already faulted in.
void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  const size_t half = bytes / 2;
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), half);
    std::memcpy(dst.data() + half, src.data() + half, bytes - half);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
  state.counters["bytes_per_call"] = static_cast<double>(bytes);
}

constexpr int64_t kRowBytesBf16 = kRowElems * 2;

}  // namespace

#define KVBENCH_SETKV(name, pool_dt, src_dt)                                                   \
  BENCHMARK_CAPTURE(BM_SetKV, name, pool_dt, src_dt)                                            \
      ->Apply(kvbench::add_stats)                                                               \
      ->ArgName("slots")                                                                        \
      ->Arg(8192)                                                                               \
      ->Arg(65536)                                                                              \
      ->UseManualTime()                                                                         \
      ->Unit(benchmark::kMicrosecond)

KVBENCH_SETKV(bf16_from_bf16, KVPOOL_DTYPE_BF16, KVPOOL_DTYPE_BF16);
KVBENCH_SETKV(bf16_from_f32, KVPOOL_DTYPE_BF16, KVPOOL_DTYPE_F32);
KVBENCH_SETKV(fp8_e4m3_from_bf16, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_BF16);

// More pairs, 8192 slots only.
#define KVBENCH_KV8K(fn, name, pool_dt, other_dt)                                              \
  BENCHMARK_CAPTURE(fn, name, pool_dt, other_dt)                                                \
      ->Apply(kvbench::add_stats)                                                               \
      ->ArgName("slots")                                                                        \
      ->Arg(8192)                                                                               \
      ->UseManualTime()                                                                         \
      ->Unit(benchmark::kMicrosecond)

KVBENCH_KV8K(BM_SetKV, fp8_e4m3_from_fp8_e4m3, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_FP8_E4M3);
KVBENCH_KV8K(BM_SetKV, fp8_e4m3_from_f32, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_F32);
KVBENCH_KV8K(BM_SetKV, fp8_e5m2_from_bf16, KVPOOL_DTYPE_FP8_E5M2, KVPOOL_DTYPE_BF16);
KVBENCH_KV8K(BM_GetKV, bf16_to_bf16, KVPOOL_DTYPE_BF16, KVPOOL_DTYPE_BF16);
KVBENCH_KV8K(BM_GetKV, bf16_to_f32, KVPOOL_DTYPE_BF16, KVPOOL_DTYPE_F32);
KVBENCH_KV8K(BM_GetKV, fp8_e4m3_to_fp8_e4m3, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_FP8_E4M3);
KVBENCH_KV8K(BM_GetKV, fp8_e4m3_to_bf16, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_BF16);
KVBENCH_KV8K(BM_GetKV, fp8_e4m3_to_f32, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_F32);
KVBENCH_KV8K(BM_GetKV, fp8_e5m2_to_bf16, KVPOOL_DTYPE_FP8_E5M2, KVPOOL_DTYPE_BF16);

KVBENCH_KV8K(BM_SetKV, fp4_e2m1_from_bf16, KVPOOL_DTYPE_FP4_E2M1, KVPOOL_DTYPE_BF16);
KVBENCH_KV8K(BM_GetKV, fp4_e2m1_to_bf16, KVPOOL_DTYPE_FP4_E2M1, KVPOOL_DTYPE_BF16);

BENCHMARK(BM_SetNsa)->Name("BM_SetMlaKV/nsa_fp8_from_bf16")->Apply(kvbench::add_stats)->ArgName("slots")->Arg(8192)
    ->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GetNsa, nsa_fp8_to_bf16, KVPOOL_DTYPE_BF16)->Apply(kvbench::add_stats)->ArgName("slots")
    ->Arg(8192)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_GetNsa, nsa_fp8_to_f32, KVPOOL_DTYPE_F32)->Apply(kvbench::add_stats)->ArgName("slots")
    ->Arg(8192)->UseManualTime()->Unit(benchmark::kMicrosecond);

// The byte counts the set_kv rows write: bf16 pool (2 B) and fp8 pool (1 B), K+V.
BENCHMARK(BM_Memcpy)
    ->Apply(kvbench::add_stats)
    ->ArgName("bytes")
    ->Arg(8192 * kRowBytesBf16)
    ->Arg(8192 * kRowBytesBf16 * 2)
    ->Arg(65536 * kRowBytesBf16)
    ->Arg(65536 * kRowBytesBf16 * 2)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

KVBENCH_MAIN()
