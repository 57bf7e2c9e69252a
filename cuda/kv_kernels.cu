// Kernels behind device.h's KV writes, reads and moves (lib/pool/kv_device.hpp).
// Each job is one launch (move: gather + scatter), stream-ordered, with no
// host synchronization. Conversions use the same scalar rules as the CPU
// backend (pool/dtype_convert.hpp), so the stored bytes are identical.
//
// Work split: one thread per unit of a row, consecutive threads on
// consecutive units of the same row, so caller arrays and stored rows are
// read and written in full 32-byte sectors. A unit is a 16-byte word for byte
// copies (the common same-dtype write), one value for conversions, and one
// 16-value block for fp4.
#include <cuda_runtime.h>

#include <string>

#include "device_fault.cuh"
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

struct F32 {
  static constexpr int kBytes = 4;
  __device__ static float load(const uint8_t* p, uint64_t j) { return reinterpret_cast<const float*>(p)[j]; }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { reinterpret_cast<float*>(p)[j] = v; }
};
struct F16 {
  static constexpr int kBytes = 2;
  __device__ static float load(const uint8_t* p, uint64_t j) {
    return cvt::f16_to_f32(reinterpret_cast<const uint16_t*>(p)[j]);
  }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { reinterpret_cast<uint16_t*>(p)[j] = cvt::f32_to_f16(v); }
};
struct BF16 {
  static constexpr int kBytes = 2;
  __device__ static float load(const uint8_t* p, uint64_t j) {
    return cvt::bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[j]);
  }
  __device__ static void store(uint8_t* p, uint64_t j, float v) {
    reinterpret_cast<uint16_t*>(p)[j] = cvt::f32_to_bf16(v);
  }
};
struct E4M3 {  // stored only: no kBytes
  __device__ static float load(const uint8_t* p, uint64_t j) { return cvt::e4m3_to_f32(p[j]); }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { p[j] = cvt::f32_to_e4m3(v); }
};
struct E5M2 {
  __device__ static float load(const uint8_t* p, uint64_t j) { return cvt::e5m2_to_f32(p[j]); }
  __device__ static void store(uint8_t* p, uint64_t j, float v) { p[j] = cvt::f32_to_e5m2(v); }
};

// Units of a row: part 0's first, then part 1's.
struct Units {
  uint64_t first, second;
  __host__ __device__ __forceinline__ uint64_t total() const { return first + second; }
};

// ---- byte copies ---------------------------------------------------------------

// One warp per row: lane l moves words l, l + 32, ... of part 0 and then part 1,
// all loads of a row issued before its stores (up to kCopyUnroll words in
// flight per lane). Row and word indices are 32-bit and never divided, so the
// kernel stays bound by memory, not by index arithmetic.
constexpr int kCopyUnroll = 8;
constexpr int kWarpsPerBlock = kThreads / 32;

template <class Word, bool kEncode>
__global__ void __launch_bounds__(kThreads) copy_kernel(RowJob job, uint32_t words0, uint32_t words1,
                                                        FaultSink fault) {
  if (faulted(fault)) return;  // no barriers below: lanes may leave independently
  const uint32_t lane = threadIdx.x & 31u;
  const uint64_t warps = uint64_t(gridDim.x) * kWarpsPerBlock;
  const uint32_t words = words0 + words1;
  for (uint64_t i = uint64_t(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5); i < job.n; i += warps) {
    const int64_t slot = job.slots[i];
    if (slot < 0 || static_cast<uint64_t>(slot) >= job.slot_limit) {
      if (lane == 0) {
        kvp_raise(static_cast<FaultRecord*>(fault.record), fault.host_flag, backend::kFaultSlotOutOfRange, fault.op,
                  static_cast<int64_t>(i), slot, static_cast<int64_t>(job.slot_limit));
      }
      continue;
    }
    const RowPart& p0 = job.part[0];
    const RowPart& p1 = job.part[1];
    Word* s0 = reinterpret_cast<Word*>(p0.values + uint64_t(slot) * p0.value_stride + p0.value_offset);
    Word* u0 = reinterpret_cast<Word*>(static_cast<uint8_t*>(p0.user) + i * p0.row_bytes);
    Word* s1 = reinterpret_cast<Word*>(p1.values + uint64_t(slot) * p1.value_stride + p1.value_offset);
    Word* u1 = reinterpret_cast<Word*>(static_cast<uint8_t*>(p1.user) + i * p1.row_bytes);
    for (uint32_t base = lane; base < words; base += 32u * kCopyUnroll) {
      Word tmp[kCopyUnroll];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        const uint32_t w = base + 32u * u;
        if (w < words) {
          const Word* from = kEncode ? (w < words0 ? u0 + w : u1 + (w - words0))
                                     : (w < words0 ? s0 + w : s1 + (w - words0));
          tmp[u] = __ldcs(from);  // streamed: each caller word is read once
        }
      }
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        const uint32_t w = base + 32u * u;
        if (w < words) {
          Word* to = kEncode ? (w < words0 ? s0 + w : s1 + (w - words0)) : (w < words0 ? u0 + w : u1 + (w - words0));
          __stcs(to, tmp[u]);  // streamed: keeps L2 for the rows still being read
        }
      }
    }
  }
}

// ---- conversions ---------------------------------------------------------------

template <class In, class Out, bool kDivide>
__global__ void encode_kernel(RowJob job, Units units, FaultSink fault) {
  if (faulted(fault)) return;
  const uint64_t per_row = units.total();
  const uint64_t total = job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t i = t / per_row;
    uint64_t j = t - i * per_row;
    const int64_t slot = checked_slot(job.slots, i, job.slot_limit, fault);
    if (slot < 0) return;
    const RowPart& p = j < units.first ? job.part[0] : job.part[1];
    if (j >= units.first) j -= units.first;
    float v = In::load(static_cast<const uint8_t*>(p.user) + i * p.elements * In::kBytes, j);
    if (kDivide) v = cvt::div_f32(v, p.divisor);
    Out::store(p.values + uint64_t(slot) * p.value_stride + p.value_offset, j, v);
  }
}

template <class Stored, class Out>
__global__ void decode_kernel(RowJob job, Units units, FaultSink fault) {
  if (faulted(fault)) return;
  const uint64_t per_row = units.total();
  const uint64_t total = job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t i = t / per_row;
    uint64_t j = t - i * per_row;
    const int64_t slot = checked_slot(job.slots, i, job.slot_limit, fault);
    if (slot < 0) return;
    const RowPart& p = j < units.first ? job.part[0] : job.part[1];
    if (j >= units.first) j -= units.first;
    const float v = Stored::load(p.values + uint64_t(slot) * p.value_stride + p.value_offset, j);
    Out::store(static_cast<uint8_t*>(p.user) + i * p.elements * Out::kBytes, j, v);
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

// ---- nsa packed rows: one thread per 128-value block (plus one for the rope part) ----

template <class In>
__global__ void encode_nsa_kernel(NsaJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const uint64_t blocks = job.lora / cvt::kNsaBlock;
  const uint64_t per_row = blocks + 1;
  const uint64_t total = job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t i = t / per_row;
    const uint64_t b = t - i * per_row;
    const int64_t slot = checked_slot(job.slots, i, job.slot_limit, fault);
    if (slot < 0) return;
    uint8_t* row = job.rows + uint64_t(slot) * job.row_stride;
    if (b == blocks) {  // the rope values, stored as bf16 after the scales
      const uint8_t* r = static_cast<const uint8_t*>(job.rope) + i * job.rope_dim * In::kBytes;
      uint8_t* out = row + job.lora + 4 * blocks;
      for (uint64_t j = 0; j < job.rope_dim; ++j) BF16::store(out, j, In::load(r, j));
      continue;
    }
    const uint8_t* s = static_cast<const uint8_t*>(job.nope) + i * job.lora * In::kBytes;
    const uint64_t first = b * cvt::kNsaBlock;
    float amax = 0.0f;
    for (int k = 0; k < cvt::kNsaBlock; ++k) {
      const float a = cvt::abs_f32(In::load(s, first + k));
      if (a > amax) amax = a;
    }
    const float scale = cvt::nsa_block_scale(amax);
    for (int k = 0; k < cvt::kNsaBlock; ++k) row[first + k] = cvt::f32_to_e4m3(cvt::div_f32(In::load(s, first + k), scale));
    memcpy(row + job.lora + 4 * b, &scale, 4);
  }
}

template <class Out>
__global__ void decode_nsa_kernel(NsaJob job, FaultSink fault) {
  if (faulted(fault)) return;
  const uint64_t blocks = job.lora / cvt::kNsaBlock;
  const uint64_t per_row = blocks + 1;
  const uint64_t total = job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t i = t / per_row;
    const uint64_t b = t - i * per_row;
    const int64_t slot = checked_slot(job.slots, i, job.slot_limit, fault);
    if (slot < 0) return;
    const uint8_t* row = job.rows + uint64_t(slot) * job.row_stride;
    uint8_t* d = static_cast<uint8_t*>(job.out) + i * (job.lora + job.rope_dim) * Out::kBytes;
    if (b == blocks) {
      const uint8_t* r = row + job.lora + 4 * blocks;
      for (uint64_t j = 0; j < job.rope_dim; ++j) Out::store(d, job.lora + j, BF16::load(r, j));
      continue;
    }
    float scale;
    memcpy(&scale, row + job.lora + 4 * b, 4);
    for (int k = 0; k < cvt::kNsaBlock; ++k) {
      const uint64_t j = b * cvt::kNsaBlock + k;
      Out::store(d, j, cvt::mul_f32(cvt::e4m3_to_f32(row[j]), scale));
    }
  }
}

// ---- move: gather every buffer's source rows, then scatter ------------------------

template <bool kGather>
__global__ void move_kernel(MoveJob job, FaultSink fault) {
  if (faulted(fault)) return;
  // One thread per byte of the widest row of each (buffer, row): moves are small and rare.
  const uint64_t per_row = job.widest_row;
  const uint64_t total = job.count * job.n * per_row;
  for (uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; t < total; t += uint64_t(gridDim.x) * blockDim.x) {
    const uint64_t byte = t % per_row;
    const uint64_t rest = t / per_row;
    const uint64_t i = rest % job.n;
    const uint64_t buf = rest / job.n;
    const MoveBuffer mb = job.buffers[buf];
    if (byte >= mb.row_bytes) continue;
    uint8_t* staged = job.scratch + job.n * mb.scratch_prefix + i * mb.row_bytes + byte;
    if (kGather) {
      const int64_t s = checked_slot(job.src, i, job.slot_limit, fault);
      if (s < 0) return;
      *staged = mb.base[uint64_t(s) * mb.stride + byte];
    } else {
      const int64_t d = checked_slot(job.dst, i, job.slot_limit, fault);
      if (d < 0) return;
      mb.base[uint64_t(d) * mb.stride + byte] = *staged;
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

template <bool kEncode>
Status launch_copy(const RowJob& job, cudaStream_t stream, const FaultSink& fault) {
  const int word = copy_word(job);
  const uint32_t w0 = static_cast<uint32_t>(job.part[0].row_bytes / word);
  const uint32_t w1 = job.parts > 1 ? static_cast<uint32_t>(job.part[1].row_bytes / word) : 0;
  const uint64_t blocks = (job.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const unsigned grid = static_cast<unsigned>(blocks < 65535ull * 16 ? blocks : 65535ull * 16);
  KVP_INJECTION_POINT("kv copy kernel launch");
  switch (word) {
    case 16: copy_kernel<int4, kEncode><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
    case 8: copy_kernel<int2, kEncode><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
    case 4: copy_kernel<int, kEncode><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
    case 2: copy_kernel<short, kEncode><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
    default: copy_kernel<char, kEncode><<<grid, kThreads, 0, stream>>>(job, w0, w1, fault); break;
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
  const unsigned grid = blocks_for(job.n * u.total());
  switch (job.stored) {
    case Codec::kF32: encode_kernel<In, F32, kDivide><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kF16: encode_kernel<In, F16, kDivide><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kBF16: encode_kernel<In, BF16, kDivide><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kE4M3: encode_kernel<In, E4M3, kDivide><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kE5M2: encode_kernel<In, E5M2, kDivide><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
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
  const unsigned grid = blocks_for(job.n * u.total());
  switch (job.stored) {
    case Codec::kF32: decode_kernel<F32, Out><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kF16: decode_kernel<F16, Out><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kBF16: decode_kernel<BF16, Out><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kE4M3: decode_kernel<E4M3, Out><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
    case Codec::kE5M2: decode_kernel<E5M2, Out><<<grid, kThreads, 0, stream>>>(job, u, fault); break;
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
  const unsigned grid = blocks_for(job.n * (job.lora / cvt::kNsaBlock + 1));
  KVP_INJECTION_POINT("nsa write kernel launch");
  if (!with_wide(job.user, [&](auto in) { encode_nsa_kernel<decltype(in)><<<grid, kThreads, 0, s>>>(job, fault); })) {
    return Status::internal("encode_nsa: caller format must be f32, f16 or bf16");
  }
  return launch_status("nsa write kernel");
}

Status decode_nsa(const NsaJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = blocks_for(job.n * (job.lora / cvt::kNsaBlock + 1));
  KVP_INJECTION_POINT("nsa read kernel launch");
  if (!with_wide(job.user, [&](auto out) { decode_nsa_kernel<decltype(out)><<<grid, kThreads, 0, s>>>(job, fault); })) {
    return Status::internal("decode_nsa: caller format must be f32, f16 or bf16");
  }
  return launch_status("nsa read kernel");
}

Status move_rows(const MoveJob& job, void* stream, const FaultSink& fault) {
  if (job.n == 0 || job.count == 0) return Status::ok();
  auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = blocks_for(job.count * job.n * job.widest_row);
  KVP_INJECTION_POINT("move_kernel launch");
  move_kernel<true><<<grid, kThreads, 0, s>>>(job, fault);
  KVP_INJECTION_POINT("move_kernel launch");
  move_kernel<false><<<grid, kThreads, 0, s>>>(job, fault);
  return launch_status("kv move kernel");
}

}  // namespace kvp::pool::dev
