// kvpool_set_kv bandwidth (SGLang's set_kv_buffer on the CPU backend), and a
// plain memcpy of the same number of bytes as the reference.
//
// Pool: mha, 2 layers x 8 KV heads x 128 head_dim (Llama-3-8B-like per-rank
// shape), 131072 slots; layer 1 is written. Destinations: n random distinct
// slots (n = 8192 or 65536, so the pool holds >= 2x n). Bytes counted =
// K+V bytes *written* (n x 8 x 128 x sizeof(pool dtype) x 2); the source
// bytes read are reported as src_bytes_per_call.
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
    default: return 1;  // fp8 (fp4 is not benchmarked)
  }
}

const char* dtype_json(int32_t dtype) {
  switch (dtype) {
    case KVPOOL_DTYPE_F32: return "f32";
    case KVPOOL_DTYPE_F16: return "f16";
    case KVPOOL_DTYPE_BF16: return "bf16";
    case KVPOOL_DTYPE_FP8_E4M3: return "fp8_e4m3";
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
  } else {  // bf16
    uint16_t* p = reinterpret_cast<uint16_t*>(bytes.data());
    for (uint64_t i = 0; i < elems; ++i) p[i] = to_bf16(value_at(i, salt));
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
  for (auto _ : state) {
    const kvpool_status st = kvpool_set_kv(pool, kLayer, slots.data(), slots.size(), k.data(), k.size(), v.data(),
                                           v.size(), src_dtype, 1.0f, 1.0f);
    if (!ok(state, st, "kvpool_set_kv")) break;
    benchmark::ClobberMemory();
  }
  const int64_t written = n * kRowElems * static_cast<int64_t>(dtype_size(pool_dtype)) * 2;
  state.SetBytesProcessed(state.iterations() * written);
  state.counters["bytes_per_call"] = static_cast<double>(written);
  state.counters["src_bytes_per_call"] = static_cast<double>(k.size() + v.size());
}

// Reference: memcpy of the same K+V byte count (two contiguous copies of half
// each, like K and V), source and destination already faulted in.
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
      ->UseRealTime()                                                                           \
      ->Unit(benchmark::kMicrosecond)

KVBENCH_SETKV(bf16_from_bf16, KVPOOL_DTYPE_BF16, KVPOOL_DTYPE_BF16);
KVBENCH_SETKV(bf16_from_f32, KVPOOL_DTYPE_BF16, KVPOOL_DTYPE_F32);
KVBENCH_SETKV(fp8_e4m3_from_bf16, KVPOOL_DTYPE_FP8_E4M3, KVPOOL_DTYPE_BF16);

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
