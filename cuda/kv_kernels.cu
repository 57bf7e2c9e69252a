// Kernels behind device.h's KV writes, reads and moves (lib/pool/kv_device.hpp).
// Each job is one launch (move: gather + scatter), stream-ordered, with no
// host synchronization. Conversions use the same scalar rules as the CPU
// backend (pool/dtype_convert.hpp), so the stored bytes are identical.
//
// Work split: a warp per row for byte copies (16-byte words), conversions
// (chunks of 8 values: one vector load and one vector store per lane and step)
// and nsa's packed rows (16 values per lane, 8 lanes per scale block), so
// caller arrays and stored rows move in full sectors and no index is divided;
// fp4 keeps a thread per 16-value block.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "device_fault.cuh"
#include "fp8_convert.cuh"
#include "pool/dtype_convert.hpp"
#include "pool/kv_device.hpp"
#include "util/fault_injection.hpp"

namespace kvp::pool::dev {
namespace {

namespace cvt = kvp::pool::cvt;

constexpr int kThreads = 256;

Status launch_status(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

unsigned blocks_for(uint64_t units) {
  const uint64_t b = (units + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535ull * 16 ? (b == 0 ? 1 : b) : 65535ull * 16);
}

using backend::FaultRecord;

__device__ __forceinline__ bool faulted(const FaultSink& f) {
  return kvp_faulted(static_cast<const FaultRecord*>(f.record));
}

// The slot of row i, or -1 (after raising the fault) when it is out of range.
__device__ __forceinline__ int64_t checked_slot(const int64_t* slots, uint64_t i, uint64_t limit,
                                                const FaultSink& f) {
  const int64_t s = slots[i];
  if (s < 0 || static_cast<uint64_t>(s) >= limit) {
    kvp_raise(static_cast<FaultRecord*>(f.record), f.host_flag, backend::kFaultSlotOutOfRange, f.op,
              static_cast<int64_t>(i), s, static_cast<int64_t>(limit));
    return -1;
  }
  return s;
}

// ---- element formats ---------------------------------------------------------
//
// Each format reads and writes one value at index j of a byte row (load / store)
// and converts a value to and from its bits (for the 8- to 64-byte chunks below).

struct F32 {
  static constexpr int kBytes = 4;
  __device__ static float from_bits(uint32_t b) { return cvt::bits_f32(b); }
  __device__ static uint32_t to_bits(float v) { return cvt::f32_bits(v); }
  __device__ static float load(const uint8_t* p, uint64_t j) { return reinterpret_cast<const float*>(p)[j]; }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { reinterpret_cast<float*>(p)[j] = v; }
};
struct F16 {
  static constexpr int kBytes = 2;
  __device__ static float from_bits(uint32_t b) { return cvt::f16_to_f32(static_cast<uint16_t>(b)); }
  __device__ static uint32_t to_bits(float v) { return cvt::f32_to_f16(v); }
  __device__ static float load(const uint8_t* p, uint64_t j) {
    return from_bits(reinterpret_cast<const uint16_t*>(p)[j]);
  }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { reinterpret_cast<uint16_t*>(p)[j] = cvt::f32_to_f16(v); }
};
struct BF16 {
  static constexpr int kBytes = 2;
  __device__ static float from_bits(uint32_t b) { return cvt::bf16_to_f32(static_cast<uint16_t>(b)); }
  __device__ static uint32_t to_bits(float v) { return cvt::f32_to_bf16(v); }
  __device__ static float load(const uint8_t* p, uint64_t j) {
    return from_bits(reinterpret_cast<const uint16_t*>(p)[j]);
  }
  __device__ static void store(uint8_t* p, uint64_t j, float v) {
    reinterpret_cast<uint16_t*>(p)[j] = cvt::f32_to_bf16(v);
  }
};
struct E4M3 {
  static constexpr int kBytes = 1;
  // no from_bits / to_bits: chunks convert pairs with the instructions (fp8_convert.cuh)
  __device__ static float load(const uint8_t* p, uint64_t j) { return cvt::e4m3_to_f32(p[j]); }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { p[j] = cvt::f32_to_e4m3(v); }
};
struct E5M2 {
  static constexpr int kBytes = 1;
  __device__ static float from_bits(uint32_t b) { return cvt::e5m2_to_f32(static_cast<uint8_t>(b)); }
  __device__ static uint32_t to_bits(float v) { return cvt::f32_to_e5m2(v); }
  __device__ static float load(const uint8_t* p, uint64_t j) { return cvt::e5m2_to_f32(p[j]); }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { p[j] = cvt::f32_to_e5m2(v); }
};

// ---- chunks: kN consecutive values of a row in one to four vector accesses -----------
//
// A chunk of kN values of format F is kN * F::kBytes bytes (8 to 64). Where its address
// allows, it moves as 16-byte words (8-byte for an 8-byte chunk); otherwise value by
// value. Either way the values are the format's own rules, so the bytes are the same.

template <class F, int kN>
struct Chunk {
  static constexpr int kBytes = kN * F::kBytes;
  static constexpr int kWords = kBytes / 4;  // 32-bit words
  static constexpr int kPerWord = 4 / F::kBytes;
  static_assert(kBytes == 8 || kBytes % 16 == 0, "chunks are 8 bytes or whole 16-byte words");
  __device__ static bool vector(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & (kBytes == 8 ? 7u : 15u)) == 0;
  }
  __device__ static uint32_t field(const uint32_t (&w)[kWords], int k) {
    if (kPerWord == 1) return w[k];
    const int shift = 32 / kPerWord * (k % kPerWord);
    return (w[k / kPerWord] >> shift) & (0xffffffffu >> (32 - 32 / kPerWord));
  }
};

template <class F, int kN>
__device__ __forceinline__ void load_chunk(const uint8_t* row, uint64_t j0, float (&v)[kN]) {
  using C = Chunk<F, kN>;
  const uint8_t* p = row + j0 * F::kBytes;
  if (C::vector(p)) {
    uint32_t w[C::kWords];
    if constexpr (C::kBytes == 8) {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      w[0] = q.x;
      w[1] = q.y;
    } else {
#pragma unroll
      for (int x = 0; x < C::kBytes / 16; ++x) {
        const uint4 q = reinterpret_cast<const uint4*>(p)[x];
        w[4 * x] = q.x;
        w[4 * x + 1] = q.y;
        w[4 * x + 2] = q.z;
        w[4 * x + 3] = q.w;
      }
    }
    if constexpr (std::is_same<F, E4M3>::value) {  // two values per conversion instruction
#pragma unroll
      for (int k = 0; k < kN; k += 2) e4m3_pair_to_f32(w[k / C::kPerWord] >> (8 * (k % C::kPerWord)), v[k], v[k + 1]);
    } else {
#pragma unroll
      for (int k = 0; k < kN; ++k) v[k] = F::from_bits(C::field(w, k));
    }
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k) v[k] = F::load(row, j0 + k);
  }
}

template <class F, int kN>
__device__ __forceinline__ void store_chunk(uint8_t* row, uint64_t j0, const float (&v)[kN]) {
  using C = Chunk<F, kN>;
  uint8_t* p = row + j0 * F::kBytes;
  if (C::vector(p)) {
    uint32_t w[C::kWords];
#pragma unroll
    for (int x = 0; x < C::kWords; ++x) w[x] = 0;
    if constexpr (std::is_same<F, E4M3>::value) {  // two values per conversion instruction
#pragma unroll
      for (int k = 0; k < kN; k += 2) w[k / C::kPerWord] |= e4m3_pair(v[k], v[k + 1]) << (8 * (k % C::kPerWord));
    } else {
#pragma unroll
      for (int k = 0; k < kN; ++k) w[k / C::kPerWord] |= F::to_bits(v[k]) << (32 / C::kPerWord * (k % C::kPerWord));
    }
    if constexpr (C::kBytes == 8) {
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    } else {
#pragma unroll
      for (int x = 0; x < C::kBytes / 16; ++x) {
        reinterpret_cast<uint4*>(p)[x] = make_uint4(w[4 * x], w[4 * x + 1], w[4 * x + 2], w[4 * x + 3]);
      }
    }
  } else {
#pragma unroll
    for (int k = 0; k < kN; ++k) F::store(row, j0 + k, v[k]);
  }
}

// The slot of warp-row i, or -1 after lane 0 raised the fault for an out-of-range slot.
__device__ __forceinline__ int64_t warp_slot(const int64_t* slots, uint64_t i, uint64_t limit, unsigned lane,
                                             const FaultSink& f) {
  const int64_t s = slots[i];
  if (s < 0 || static_cast<uint64_t>(s) >= limit) {
    if (lane == 0) {
      kvp_raise(static_cast<FaultRecord*>(f.record), f.host_flag, backend::kFaultSlotOutOfRange, f.op,
                static_cast<int64_t>(i), s, static_cast<int64_t>(limit));
    }
    return -1;
  }
  return s;
}

// Units of a row: part 0's first, then part 1's.
struct Units {
  uint64_t first, second;
  __host__ __device__ __forceinline__ uint64_t total() const { return first + second; }
};

// ---- byte copies ---------------------------------------------------------------

// One warp per row. A pass moves up to kPer words of each part per lane (lane l:
// words l, l + 32, ...), all loads before the stores; longer parts take more passes.
// A write loads the caller's row before it waits for the slot and the fault flag, so
// the three memory latencies overlap instead of adding up: with few rows (8,192 MLA
// rows are one row per warp, all resident at once) that chain is much of the kernel's
// time. kPer is the smallest power of two covering the longer part, at most 4, so
// short rows (MLA: 64 + 8 words of 16 bytes) keep few registers and full occupancy.
// Row and word indices are 32-bit and never divided.
constexpr int kWarpsPerBlock = kThreads / 32;

template <class Word, int kPer>
struct Pass {
  Word a[kPer], b[kPer];  // part 0's words, part 1's words
};

// Words `first + 32 u` of both parts (from0/from1 point at the lane's first word).
template <class Word, int kPer>
__device__ __forceinline__ void load_pass(Pass<Word, kPer>& t, const Word* from0, const Word* from1, uint32_t first,
                                          uint32_t words0, uint32_t words1) {
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const uint32_t w = first + 32u * u;
    if (w < words0) t.a[u] = __ldcs(from0 + 32u * u);  // streamed: each word is read once
    if (w < words1) t.b[u] = __ldcs(from1 + 32u * u);
  }
}

template <class Word, int kPer>
__device__ __forceinline__ void store_pass(const Pass<Word, kPer>& t, Word* to0, Word* to1, uint32_t first,
                                           uint32_t words0, uint32_t words1) {
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const uint32_t w = first + 32u * u;
    if (w < words0) __stcs(to0 + 32u * u, t.a[u]);  // streamed: keeps L2 for the rows still being read
    if (w < words1) __stcs(to1 + 32u * u, t.b[u]);
  }
}

template <class Word, bool kEncode, int kPer>
__global__ void __launch_bounds__(kThreads, kPer <= 2 ? (kEncode ? 8 : 6) : 4)
    copy_kernel(RowJob job, uint32_t words0, uint32_t words1, FaultSink fault) {
  const bool stop = faulted(fault);  // awaited just before the first access to stored rows
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t warps = uint64_t(gridDim.x) * kWarpsPerBlock;
  const uint32_t longest = words0 > words1 ? words0 : words1;
  const RowPart& p0 = job.part[0];
  const RowPart& p1 = job.part[1];
  for (uint64_t i = uint64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); i < job.n; i += warps) {
    const int64_t slot = job.slots[i];
    Word* u0 = reinterpret_cast<Word*>(static_cast<uint8_t*>(p0.user) + i * p0.row_bytes) + lane;
    Word* u1 = reinterpret_cast<Word*>(static_cast<uint8_t*>(p1.user) + i * p1.row_bytes) + lane;
    for (uint32_t pass = 0; pass < longest; pass += 32u * kPer) {
      Pass<Word, kPer> t;
      if (kEncode) load_pass(t, u0 + pass, u1 + pass, pass + lane, words0, words1);
      if (stop) return;  // no barriers: lanes may leave independently
      if (slot < 0 || static_cast<uint64_t>(slot) >= job.slot_limit) {
        if (lane == 0) {
          kvp_raise(static_cast<FaultRecord*>(fault.record), fault.host_flag, backend::kFaultSlotOutOfRange, fault.op,
                    static_cast<int64_t>(i), slot, static_cast<int64_t>(job.slot_limit));
        }
        break;
      }
      Word* s0 = reinterpret_cast<Word*>(p0.values + uint64_t(slot) * p0.value_stride + p0.value_offset) + lane + pass;
      Word* s1 = reinterpret_cast<Word*>(p1.values + uint64_t(slot) * p1.value_stride + p1.value_offset) + lane + pass;
      if (kEncode) {
        store_pass(t, s0, s1, pass + lane, words0, words1);
      } else {
        load_pass(t, s0, s1, pass + lane, words0, words1);
        store_pass(t, u0 + pass, u1 + pass, pass + lane, words0, words1);
      }
    }
  }
}

// ---- conversions: a warp per row, 8 values per lane and step -----------------------
//
// Lane l converts values 8l .. 8l + 7 of each part, then 256 further, as chunks (one
// 16-byte load of bf16 and one 8-byte store of fp8, for instance); a part's last
// elements % 8 values go one per lane. No index is divided.

constexpr int kConvChunk = 8;

template <class To, bool kDivide>
__device__ __forceinline__ void divide_and_store(uint8_t* dst, uint64_t j0, float (&v)[kConvChunk], float divisor) {
  if (kDivide) {
#pragma unroll
    for (int k = 0; k < kConvChunk; ++k) v[k] = div_pinned(v[k], divisor);
  }
  store_chunk<To, kConvChunk>(dst, j0, v);
}

template <class From, class To, bool kDivide>
__device__ __forceinline__ void convert_part(const uint8_t* src, uint8_t* dst, uint64_t elements, float divisor,
                                             unsigned lane) {
  constexpr uint64_t kStep = 32 * kConvChunk;
  const uint64_t whole = elements - elements % kConvChunk;
  uint64_t j0 = lane * kConvChunk;
  for (; j0 + kStep < whole; j0 += 2 * kStep) {  // two chunks a lane: both loads in flight at once
    float a[kConvChunk], b[kConvChunk];
    load_chunk<From, kConvChunk>(src, j0, a);
    load_chunk<From, kConvChunk>(src, j0 + kStep, b);
    divide_and_store<To, kDivide>(dst, j0, a, divisor);
    divide_and_store<To, kDivide>(dst, j0 + kStep, b, divisor);
  }
  if (j0 < whole) {
    float a[kConvChunk];
    load_chunk<From, kConvChunk>(src, j0, a);
    divide_and_store<To, kDivide>(dst, j0, a, divisor);
  }
  for (uint64_t j = whole + lane; j < elements; j += 32) {
    float x = From::load(src, j);
    if (kDivide) x = cvt::div_f32(x, divisor);
    To::store(dst, j, x);
  }
}

template <class In, class Out, bool kDivide>
__global__ void __launch_bounds__(kThreads) encode_kernel(RowJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = uint64_t(gridDim.x) * kWarpsPerBlock;
  for (uint64_t i = uint64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); i < job.n; i += warps) {
    const int64_t slot = warp_slot(job.slots, i, job.slot_limit, lane, fault);
    if (slot < 0) return;
    for (int p = 0; p < job.parts; ++p) {
      const RowPart& rp = job.part[p];
      convert_part<In, Out, kDivide>(static_cast<const uint8_t*>(rp.user) + i * rp.elements * In::kBytes,
                                     rp.values + uint64_t(slot) * rp.value_stride + rp.value_offset, rp.elements,
                                     rp.divisor, lane);
    }
  }
}

template <class Stored, class Out>
__global__ void __launch_bounds__(kThreads) decode_kernel(RowJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = uint64_t(gridDim.x) * kWarpsPerBlock;
  for (uint64_t i = uint64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); i < job.n; i += warps) {
    const int64_t slot = warp_slot(job.slots, i, job.slot_limit, lane, fault);
    if (slot < 0) return;
    for (int p = 0; p < job.parts; ++p) {
      const RowPart& rp = job.part[p];
      convert_part<Stored, Out, false>(rp.values + uint64_t(slot) * rp.value_stride + rp.value_offset,
                                       static_cast<uint8_t*>(rp.user) + i * rp.elements * Out::kBytes, rp.elements,
                                       1.0f, lane);
    }
  }
}

// One thread per 16-value block: quantise into 8 packed bytes and one scale byte.
template <class In, bool kDivide>
__global__ void encode_fp4_kernel(RowJob job, Units units, FaultSink fault) {
  if (faulted(fault)) return;
  const uint64_t per_row = units.total();
  const uint64_t total = job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t i = t / per_row;
    uint64_t b = t - i * per_row;
    const int64_t slot = checked_slot(job.slots, i, job.slot_limit, fault);
    if (slot < 0) return;
    const RowPart& p = b < units.first ? job.part[0] : job.part[1];
    if (b >= units.first) b -= units.first;
    const uint8_t* src = static_cast<const uint8_t*>(p.user) + i * p.elements * In::kBytes;
    float block[cvt::kFp4Block];
    for (int k = 0; k < cvt::kFp4Block; ++k) {
      float v = In::load(src, b * cvt::kFp4Block + k);
      if (kDivide) v = cvt::div_f32(v, p.divisor);
      block[k] = v;
    }
    uint8_t* values = p.values + uint64_t(slot) * p.value_stride + p.value_offset + b * (cvt::kFp4Block / 2);
    p.scales[uint64_t(slot) * p.scale_stride + p.scale_offset + b] = cvt::fp4_quantize_block(block, values);
  }
}

template <class Out>
__global__ void decode_fp4_kernel(RowJob job, Units units, FaultSink fault) {
  if (faulted(fault)) return;
  const uint64_t per_row = units.total();
  const uint64_t total = job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t i = t / per_row;
    uint64_t b = t - i * per_row;
    const int64_t slot = checked_slot(job.slots, i, job.slot_limit, fault);
    if (slot < 0) return;
    const RowPart& p = b < units.first ? job.part[0] : job.part[1];
    if (b >= units.first) b -= units.first;
    const uint8_t* values = p.values + uint64_t(slot) * p.value_stride + p.value_offset + b * (cvt::kFp4Block / 2);
    const float scale = cvt::e4m3_to_f32(p.scales[uint64_t(slot) * p.scale_stride + p.scale_offset + b]);
    uint8_t* dst = static_cast<uint8_t*>(p.user) + i * p.elements * Out::kBytes;
    for (int k = 0; k < cvt::kFp4Block / 2; ++k) {
      const uint8_t byte = values[k];
      const uint64_t j = b * cvt::kFp4Block + 2 * k;
      Out::store(dst, j, cvt::fp4_dequantize(byte & 0xfu, scale));
      Out::store(dst, j + 1, cvt::fp4_dequantize(byte >> 4, scale));
    }
  }
}

// ---- nsa packed rows: a warp per row, 16 values per lane ----------------------------
//
// A row is `lora` e4m3 values, one f32 scale per 128-value block, then the rope part as
// bf16. Each lane takes 16 consecutive values (one 16-byte store of e4m3, one or two
// 16-byte loads of the caller's row per pass of 512 values), so the 8 lanes of a block
// find its amax with three shuffles; the rope part goes a value per lane. The per-value
// rules are the CPU backend's (cvt::), so the bytes are the same; the amax, a maximum that
// skips NaN, does not depend on the order it is taken in.

constexpr int kNsaLaneValues = 16;
constexpr int kNsaLanesPerBlock = cvt::kNsaBlock / kNsaLaneValues;  // 8
constexpr uint64_t kNsaPass = 32 * kNsaLaneValues;                 // 512 values per warp pass

template <class In>
__global__ void encode_nsa_kernel(NsaJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = uint64_t(gridDim.x) * (blockDim.x / 32);
  const uint64_t blocks = job.lora / cvt::kNsaBlock;
  for (uint64_t i = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) / 32; i < job.n; i += warps) {
    const uint8_t* src = static_cast<const uint8_t*>(job.nope) + i * job.lora * In::kBytes;
    const int64_t slot = warp_slot(job.slots, i, job.slot_limit, lane, fault);
    if (slot < 0) return;  // the whole warp: it shares the row
    uint8_t* row = job.rows + uint64_t(slot) * job.row_stride;
    for (uint64_t pass = 0; pass < job.lora; pass += kNsaPass) {  // every lane runs every pass: shuffles
      const uint64_t j0 = pass + lane * kNsaLaneValues;
      const bool active = j0 < job.lora;  // lora is a multiple of 128: whole blocks drop out
      float v[kNsaLaneValues];
      float amax = 0.0f;
      if (active) {
        load_chunk<In, kNsaLaneValues>(src, j0, v);
#pragma unroll
        for (int k = 0; k < kNsaLaneValues; ++k) {
          const float a = cvt::abs_f32(v[k]);
          if (a > amax) amax = a;
        }
      }
#pragma unroll
      for (int d = 1; d < kNsaLanesPerBlock; d *= 2) {
        const float o = __shfl_xor_sync(0xffffffffu, amax, d);
        if (o > amax) amax = o;
      }
      if (!active) continue;
      const float scale = cvt::nsa_block_scale(amax);
#pragma unroll
      for (int k = 0; k < kNsaLaneValues; ++k) v[k] = div_pinned(v[k], scale);
      store_chunk<E4M3, kNsaLaneValues>(row, j0, v);
      if (lane % kNsaLanesPerBlock == 0) memcpy(row + job.lora + 4 * (j0 / cvt::kNsaBlock), &scale, 4);
    }
    const uint8_t* r = static_cast<const uint8_t*>(job.rope) + i * job.rope_dim * In::kBytes;
    uint8_t* out = row + job.lora + 4 * blocks;  // the rope values, stored as bf16 after the scales
    for (uint64_t j = lane; j < job.rope_dim; j += 32) BF16::store(out, j, In::load(r, j));
  }
}

template <class Out>
__global__ void decode_nsa_kernel(NsaJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps = uint64_t(gridDim.x) * (blockDim.x / 32);
  const uint64_t blocks = job.lora / cvt::kNsaBlock;
  for (uint64_t i = (blockIdx.x * uint64_t(blockDim.x) + threadIdx.x) / 32; i < job.n; i += warps) {
    const int64_t slot = warp_slot(job.slots, i, job.slot_limit, lane, fault);
    if (slot < 0) return;
    const uint8_t* row = job.rows + uint64_t(slot) * job.row_stride;
    uint8_t* d = static_cast<uint8_t*>(job.out) + i * (job.lora + job.rope_dim) * Out::kBytes;
    for (uint64_t j0 = lane * kNsaLaneValues; j0 < job.lora; j0 += kNsaPass) {
      float scale;
      memcpy(&scale, row + job.lora + 4 * (j0 / cvt::kNsaBlock), 4);
      float v[kNsaLaneValues];
      load_chunk<E4M3, kNsaLaneValues>(row, j0, v);
#pragma unroll
      for (int k = 0; k < kNsaLaneValues; ++k) v[k] = mul_pinned(v[k], scale);
      store_chunk<Out, kNsaLaneValues>(d, j0, v);
    }
    const uint8_t* r = row + job.lora + 4 * blocks;
    for (uint64_t j = lane; j < job.rope_dim; j += 32) Out::store(d, job.lora + j, BF16::load(r, j));
  }
}

// ---- move: mark, copy, write back -------------------------------------------------
//
// The CPU path's result: every source row is read before any destination row is
// written, and a destination named twice keeps the last pair's row. The mark kernel
// marks each destination slot with the largest pair index writing it and each source
// slot as read; from those marks every pair takes one route on the device:
//   skip:   a later pair writes the same destination, or the pair moves a row onto itself;
//   direct: nobody reads the destination, so the copy kernel moves the row in place;
//   staged: some pair reads the destination, so the copy kernel puts the row in scratch
//           and the write-back kernel, which runs after every read, stores it.
// The copy kernel writes only rows that no pair reads, so every read sees the old row;
// and each destination has one writer. Disjoint pairs (the common case) therefore move
// every byte once. The write-back kernel also clears the marks the call set, so the
// next call starts from zeros (no host state: a captured graph can replay the calls).

enum Route : uint8_t { kSkip = 0, kDirect = 1, kStaged = 2 };

__global__ void move_mark_kernel(MoveJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const MoveMarks& m = job.marks;
  if (blockIdx.x == 0 && threadIdx.x == 0) *m.staged = 0;  // the previous call's write-back has read it
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < job.n; i += uint64_t(gridDim.x) * blockDim.x) {
    const int64_t d = checked_slot(job.dst, i, job.slot_limit, fault);
    const int64_t s = checked_slot(job.src, i, job.slot_limit, fault);
    if (d < 0 || s < 0) return;  // the pool is faulted: the copy kernels move nothing
    atomicMax(m.writer + d, static_cast<uint32_t>(i + 1));
    m.read[s] = 1;
  }
}

// Marks were written by the mark kernel, which finished before the copy kernel started.
__device__ __forceinline__ Route route_of(const MoveMarks& m, uint64_t pair, int64_t s, int64_t d) {
  if (m.writer[d] != static_cast<uint32_t>(pair + 1) || s == d) return kSkip;
  return m.read[d] != 0 ? kStaged : kDirect;
}

// Cache hints: pool rows are touched once (streamed, so they do not push out of L2
// the rows still to be read); staged rows are read back by the next kernel (default).
template <class Word, bool kStreamed>
__device__ __forceinline__ Word load_word(const Word* p) {
  if (kStreamed) return __ldcs(p);
  return *p;
}
template <class Word, bool kStreamed>
__device__ __forceinline__ void store_word(Word* p, const Word& v) {
  if (kStreamed) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// A warp copies one row: lane l moves words l, l + 32, ..., each pass issuing all
// its loads (kMoveUnroll per lane) before its stores.
constexpr int kMoveUnroll = 4;

template <class Word, bool kStreamIn, bool kStreamOut>
__device__ __forceinline__ void copy_words(const uint8_t* from, uint8_t* to, uint32_t words, uint32_t lane) {
  const Word* f = reinterpret_cast<const Word*>(from);
  Word* t = reinterpret_cast<Word*>(to);
  for (uint32_t base = lane; base < words; base += 32u * kMoveUnroll) {
    Word tmp[kMoveUnroll];
#pragma unroll
    for (int u = 0; u < kMoveUnroll; ++u) {
      const uint32_t w = base + 32u * u;
      if (w < words) tmp[u] = load_word<Word, kStreamIn>(f + w);
    }
#pragma unroll
    for (int u = 0; u < kMoveUnroll; ++u) {
      const uint32_t w = base + 32u * u;
      if (w < words) store_word<Word, kStreamOut>(t + w, tmp[u]);
    }
  }
}

// The row's access width is the buffer's (the same for every lane: no divergence).
template <bool kStreamIn, bool kStreamOut>
__device__ __forceinline__ void copy_row(const uint8_t* from, uint8_t* to, uint64_t bytes, uint32_t word,
                                         uint32_t lane) {
  switch (word) {
    case 16: copy_words<int4, kStreamIn, kStreamOut>(from, to, static_cast<uint32_t>(bytes / 16), lane); break;
    case 8: copy_words<int2, kStreamIn, kStreamOut>(from, to, static_cast<uint32_t>(bytes / 8), lane); break;
    case 4: copy_words<int, kStreamIn, kStreamOut>(from, to, static_cast<uint32_t>(bytes / 4), lane); break;
    case 2: copy_words<short, kStreamIn, kStreamOut>(from, to, static_cast<uint32_t>(bytes / 2), lane); break;
    default: copy_words<char, kStreamIn, kStreamOut>(from, to, static_cast<uint32_t>(bytes), lane); break;
  }
}

__device__ __forceinline__ uint8_t* staged_row(const MoveJob& job, const MoveBuffer& b, uint64_t pair) {
  return job.scratch + job.n * b.scratch_prefix + pair * b.scratch_row;
}

__device__ __forceinline__ bool in_range(int64_t slot, uint64_t limit) {
  return slot >= 0 && static_cast<uint64_t>(slot) < limit;
}

// The copy kernel: a block takes one pair at a time (blocks stride over the pairs,
// grid.y splits the buffers) and records its route; its warps take the pair's rows in
// every buffer, a warp per row: direct rows in place, staged rows into scratch.
__global__ void __launch_bounds__(kThreads) move_copy_kernel(MoveJob job, FaultSink fault) {
  if (faulted(fault)) return;  // also set when the mark kernel found a bad slot: nothing moves
  const MoveMarks& m = job.marks;
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t first_buffer = uint64_t(blockIdx.y) * kWarpsPerBlock + (threadIdx.x >> 5);
  const uint64_t buffer_step = uint64_t(gridDim.y) * kWarpsPerBlock;
  const bool leader = threadIdx.x == 0 && blockIdx.y == 0;  // records the pair's route
  for (uint64_t i = blockIdx.x; i < job.n; i += gridDim.x) {
    const int64_t s = job.src[i], d = job.dst[i];
    const Route r = in_range(s, job.slot_limit) && in_range(d, job.slot_limit) ? route_of(m, i, s, d) : kSkip;
    if (leader) {
      job.routes[i] = r;
      if (r == kStaged) *m.staged = 1;
    }
    if (r == kSkip) continue;
    for (uint64_t b = first_buffer; b < job.count; b += buffer_step) {
      const MoveBuffer mb = job.buffers[b];
      const uint8_t* from = mb.base + uint64_t(s) * mb.row_bytes;
      if (r == kStaged) {
        copy_row<true, false>(from, staged_row(job, mb, i), mb.row_bytes, mb.word, lane);
      } else {
        copy_row<true, true>(from, mb.base + uint64_t(d) * mb.row_bytes, mb.row_bytes, mb.word, lane);
      }
    }
  }
}

// The write-back kernel: clears the marks of every pair (even on a faulted pool, so
// that the next call after kvalloc_clear starts from zeros), then stores the staged
// rows, a block per pair as in the copy kernel. It reads the routes, not the marks it clears.
__global__ void __launch_bounds__(kThreads) move_write_back_kernel(MoveJob job, FaultSink fault) {
  const MoveMarks& m = job.marks;
  const uint64_t threads = uint64_t(gridDim.x) * gridDim.y * blockDim.x;
  const uint64_t first = (uint64_t(blockIdx.y) * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  for (uint64_t i = first; i < job.n; i += threads) {
    const int64_t s = job.src[i], d = job.dst[i];
    if (in_range(d, job.slot_limit)) m.writer[d] = 0;
    if (in_range(s, job.slot_limit)) m.read[s] = 0;
  }
  if (faulted(fault) || *m.staged == 0) return;  // written by the copy kernel
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t first_buffer = uint64_t(blockIdx.y) * kWarpsPerBlock + (threadIdx.x >> 5);
  const uint64_t buffer_step = uint64_t(gridDim.y) * kWarpsPerBlock;
  for (uint64_t i = blockIdx.x; i < job.n; i += gridDim.x) {
    if (job.routes[i] != kStaged) continue;
    const int64_t d = job.dst[i];
    for (uint64_t b = first_buffer; b < job.count; b += buffer_step) {
      const MoveBuffer mb = job.buffers[b];
      copy_row<false, true>(staged_row(job, mb, i), mb.base + uint64_t(d) * mb.row_bytes, mb.row_bytes, mb.word, lane);
    }
  }
}

// ---- launch helpers ----------------------------------------------------------------

// Largest word (16, 8, 4, 2 or 1 bytes) that divides every address and size a byte copy touches.
int copy_word(const RowJob& job) {
  uint64_t bits = 16;
  for (int p = 0; p < job.parts; ++p) {
    const RowPart& r = job.part[p];
    bits |= reinterpret_cast<uintptr_t>(r.values) | r.value_stride | r.value_offset |
            reinterpret_cast<uintptr_t>(r.user) | r.row_bytes;
  }
  return static_cast<int>(bits & (~bits + 1));  // lowest set bit, at most 16
}

// Words of the longer part per lane and pass: 1, 2 or 4 (16-byte words only; the
// narrower words of unaligned rows take 4, their rows being short or rare).
int words_per_lane(int word, uint32_t w0, uint32_t w1) {
  const uint32_t longest = w0 > w1 ? w0 : w1;
  if (word != 16 || longest > 64) return 4;
  return longest > 32 ? 2 : 1;
}

template <class Word, bool kEncode>
void launch_copy_words(const RowJob& job, uint32_t w0, uint32_t w1, unsigned grid, cudaStream_t stream,
                       const FaultSink& fault) {
  copy_kernel<Word, kEncode, 4><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault);
}

template <bool kEncode>
Status launch_copy(const RowJob& job, cudaStream_t stream, const FaultSink& fault) {
  const int word = copy_word(job);
  const uint32_t w0 = static_cast<uint32_t>(job.part[0].row_bytes / word);
  const uint32_t w1 = job.parts > 1 ? static_cast<uint32_t>(job.part[1].row_bytes / word) : 0;
  const uint64_t blocks = (job.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 65535ull * 16 ? blocks : 65535ull * 16);
  KVP_INJECTION_POINT("kv copy kernel launch");
  switch (word) {
    case 16:
      switch (words_per_lane(word, w0, w1)) {
        case 1: copy_kernel<int4, kEncode, 1><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
        case 2: copy_kernel<int4, kEncode, 2><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
        default: copy_kernel<int4, kEncode, 4><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
      }
      break;
    case 8: launch_copy_words<int2, kEncode>(job, w0, w1, grid, stream, fault); break;
    case 4: launch_copy_words<int, kEncode>(job, w0, w1, grid, stream, fault); break;
    case 2: launch_copy_words<short, kEncode>(job, w0, w1, grid, stream, fault); break;
    default: launch_copy_words<char, kEncode>(job, w0, w1, grid, stream, fault); break;
  }
  return launch_status(kEncode ? "kv write kernel" : "kv read kernel");
}

Units value_units(const RowJob& job, bool fp4) {
  const uint64_t per = fp4 ? cvt::kFp4Block : 1;
  return Units{job.part[0].elements / per, job.parts > 1 ? job.part[1].elements / per : 0};
}

bool divides(const RowJob& job) {
  for (int p = 0; p < job.parts; ++p) {
    if (job.part[p].divisor != 1.0f) return true;
  }
  return false;
}

template <class In, bool kDivide>
void launch_encode_from(const RowJob& job, cudaStream_t stream, const FaultSink& fault) {
  const bool fp4 = job.stored == Codec::kFP4;
  const Units u = value_units(job, fp4);
  const unsigned grid = blocks_for(job.n * u.total());  // fp4: a thread per 16-value block
  const unsigned rows = blocks_for(job.n * 32);           // the others: a warp per row
  switch (job.stored) {
    case Codec::kF32: encode_kernel<In, F32, kDivide><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kF16: encode_kernel<In, F16, kDivide><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kBF16: encode_kernel<In, BF16, kDivide><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kE4M3: encode_kernel<In, E4M3, kDivide><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kE5M2: encode_kernel<In, E5M2, kDivide><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kFP4: encode_fp4_kernel<In, kDivide><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kRaw: break;
  }
}

template <class In>
void launch_encode_in(const RowJob& job, cudaStream_t stream, const FaultSink& fault) {
  // x / 1 == x for every x, so the division is skipped rather than changing results (as on the CPU).
  if (divides(job)) return launch_encode_from<In, true>(job, stream, fault);
  launch_encode_from<In, false>(job, stream, fault);
}

template <class Out>
void launch_decode_to(const RowJob& job, cudaStream_t stream, const FaultSink& fault) {
  const bool fp4 = job.stored == Codec::kFP4;
  const Units u = value_units(job, fp4);
  const unsigned grid = blocks_for(job.n * u.total());  // fp4: a thread per 16-value block
  const unsigned rows = blocks_for(job.n * 32);           // the others: a warp per row
  switch (job.stored) {
    case Codec::kF32: decode_kernel<F32, Out><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kF16: decode_kernel<F16, Out><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kBF16: decode_kernel<BF16, Out><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kE4M3: decode_kernel<E4M3, Out><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kE5M2: decode_kernel<E5M2, Out><<<rows, kThreads, 0, stream>>>(job, fault); break;
    case Codec::kFP4: decode_fp4_kernel<Out><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kRaw: break;
  }
}

// Calls fn(F32{}), fn(F16{}) or fn(BF16{}) for a caller-side format; false for any other.
template <class Fn>
bool with_wide(Codec c, Fn&& fn) {
  switch (c) {
    case Codec::kF32: fn(F32{}); return true;
    case Codec::kF16: fn(F16{}); return true;
    case Codec::kBF16: fn(BF16{}); return true;
    default: return false;
  }
}

}  // namespace

Status encode_rows(const RowJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  if (job.user == Codec::kRaw) return launch_copy<true>(job, s, fault);
  KVP_INJECTION_POINT("kv write kernel launch");
  if (!with_wide(job.user, [&](auto in) { launch_encode_in<decltype(in)>(job, s, fault); })) {
    return Status::internal("encode_rows: caller format must be raw, f32, f16 or bf16");
  }
  return launch_status("kv write kernel");
}

Status decode_rows(const RowJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  if (job.user == Codec::kRaw) return launch_copy<false>(job, s, fault);
  KVP_INJECTION_POINT("kv read kernel launch");
  if (!with_wide(job.user, [&](auto out) { launch_decode_to<decltype(out)>(job, s, fault); })) {
    return Status::internal("decode_rows: caller format must be raw, f32, f16 or bf16");
  }
  return launch_status("kv read kernel");
}

Status encode_nsa(const NsaJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = blocks_for(job.n * 32);  // a warp per row
  KVP_INJECTION_POINT("nsa write kernel launch");
  if (!with_wide(job.user, [&](auto in) { encode_nsa_kernel<decltype(in)><<<grid, kThreads, 0, s>>>(job, fault); })) {
    return Status::internal("encode_nsa: caller format must be f32, f16 or bf16");
  }
  return launch_status("nsa write kernel");
}

Status decode_nsa(const NsaJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = blocks_for(job.n * 32);  // a warp per row
  KVP_INJECTION_POINT("nsa read kernel launch");
  if (!with_wide(job.user, [&](auto out) { decode_nsa_kernel<decltype(out)><<<grid, kThreads, 0, s>>>(job, fault); })) {
    return Status::internal("decode_nsa: caller format must be f32, f16 or bf16");
  }
  return launch_status("nsa read kernel");
}

// Blocks of the copy kernels: one per pair (up to 2^20, then they stride), and when
// there are few pairs, the buffers split over grid.y so that about 2,048 blocks (a
// few per multiprocessor) still share the work. The write-back kernel has at most
// 2,048 blocks along x: with no staged row, its blocks only clear marks.
dim3 move_grid(const MoveJob& job, uint64_t most) {
  const uint64_t x = job.n < most ? job.n : most;
  const uint64_t slices = (job.count + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const uint64_t wanted = (2048 + x - 1) / x;
  const uint64_t y = wanted < slices ? wanted : slices;
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y < 1 ? 1 : y));
}

Status move_rows(const MoveJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0 || job.count == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  // Every failure point comes before the first launch: a failed call moves nothing
  // and leaves no marks.
  KVP_INJECTION_POINT("move_kv mark kernel launch");
  KVP_INJECTION_POINT("move_kv copy kernel launch");
  KVP_INJECTION_POINT("move_kv write-back kernel launch");
  move_mark_kernel<<<blocks_for(job.n), kThreads, 0, s>>>(job, fault);
  move_copy_kernel<<<move_grid(job, 1u << 20), kThreads, 0, s>>>(job, fault);
  move_write_back_kernel<<<move_grid(job, 2048), kThreads, 0, s>>>(job, fault);
  return launch_status("kv move kernels");
}

}  // namespace kvp::pool::dev
