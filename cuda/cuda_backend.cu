// The CUDA backend's memory primitives: device allocations, zeroing, host
// transfers and batched row copies (one kernel launch per batch). Calls are
// synchronous: they return when the device work is done.
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "util/fault_injection.hpp"
#include "kvpool/buffers.h"

namespace kvp::backend {
namespace {

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

#define KVPOOL_CUDA_TRY(expr, what) KVPOOL_RETURN_IF_ERROR(cuda_status((expr), (what)))

// Rows longer than this are split into pieces of this many bytes, one block each: a mamba
// state's row is megabytes, which one block of 128 threads copies in about a millisecond.
constexpr size_t kRowPiece = 32 << 10;

// One block per piece of a row (grid-stride over all rows' pieces); 16-byte words when
// everything is aligned.
__global__ void copy_rows_kernel(char* dst, size_t dst_stride, const int64_t* dst_rows, const char* src,
                                 size_t src_stride, const int64_t* src_rows, size_t row_bytes, size_t n,
                                 size_t pieces, bool vectorized) {
  for (size_t t = blockIdx.x; t < n * pieces; t += gridDim.x) {
    const size_t i = t / pieces, from = (t % pieces) * kRowPiece;
    const size_t to = row_bytes - from < kRowPiece ? row_bytes : from + kRowPiece;
    const size_t d = dst_rows != nullptr ? static_cast<size_t>(dst_rows[i]) : i;
    const size_t s = src_rows != nullptr ? static_cast<size_t>(src_rows[i]) : i;
    char* out = dst + d * dst_stride;
    const char* in = src + s * src_stride;
    if (vectorized) {
      for (size_t w = from / 16 + threadIdx.x; w < to / 16; w += blockDim.x) {
        reinterpret_cast<int4*>(out)[w] = reinterpret_cast<const int4*>(in)[w];
      }
    } else {
      for (size_t b = from + threadIdx.x; b < to; b += blockDim.x) out[b] = in[b];
    }
  }
}

bool aligned16(const void* p, size_t stride, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride % 16 == 0 && bytes % 16 == 0;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  ~CudaBackend() override {
    if (index_scratch_ != nullptr || staging_ != nullptr || pinned_[0] != nullptr) {
      cudaSetDevice(device_);
      if (index_scratch_ != nullptr) cudaFree(index_scratch_);
      if (staging_ != nullptr) cudaFree(staging_);
      for (int i = 0; i < 2; ++i) {
        if (pinned_[i] != nullptr) cudaFreeHost(pinned_[i]);
        if (pinned_done_[i] != nullptr) cudaEventDestroy(pinned_done_[i]);
      }
    }
  }

  int device_type() const override { return KVPOOL_DEVICE_CUDA; }
  int device_id() const override { return device_; }
  const char* name() const override { return "cuda"; }

  Status allocate(size_t bytes, void** out) override {
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    KVP_INJECTION_POINT("cudaMalloc");
    cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return Status::cuda("cannot allocate " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device_) +
                          " (cudaErrorMemoryAllocation)");
    }
    KVPOOL_CUDA_TRY(e, "cudaMalloc");
    // cudaMemset of device memory returns before it runs, on the legacy default stream,
    // which a caller's non-blocking stream does not wait for: a kernel the caller enqueues
    // right after kvpool_create could run first and have its rows zeroed. Memory is taken
    // when a pool is built or a buffer grows, never per step, so waiting here is cheap.
    e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) e = cudaStreamSynchronize(0);
    if (e != cudaSuccess) cudaFree(p);
    KVPOOL_CUDA_TRY(e, "cudaMemset");
    *out = p;
    return Status::ok();
  }
  void deallocate(void* p) noexcept override {
    cudaSetDevice(device_);
    cudaFree(p);
  }
  // Pinned, portable (page-locked for every device and context), so the tier's copy
  // kernels and DMA reach it without staging. cudaHostAlloc memory is 256-byte aligned.
  Status allocate_host(size_t bytes, void** out) override {
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    KVP_INJECTION_POINT("cudaHostAlloc (host tier)");
    const cudaError_t e = cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return Status(KVPOOL_ERR_HOST_MEMORY, "cannot allocate " + std::to_string(bytes) +
                                                " bytes of pinned host memory for the host tier (cudaHostAlloc: "
                                                "cudaErrorMemoryAllocation)");
    }
    KVPOOL_CUDA_TRY(e, "cudaHostAlloc (host tier)");
    *out = p;
    return Status::ok();
  }
  void deallocate_host(void* p) noexcept override { cudaFreeHost(p); }
  Status zero(void* dst, size_t bytes) override {
    KVP_INJECTION_POINT("cudaMemset");
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    KVPOOL_CUDA_TRY(cudaMemset(dst, 0, bytes), "cudaMemset");
    return Status::ok();
  }
  Status zero_rows(void* dst, size_t stride, size_t row_bytes, size_t n) override {
    if (n == 0 || row_bytes == 0) return Status::ok();
    KVP_INJECTION_POINT("cudaMemset2D");
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    KVPOOL_CUDA_TRY(cudaMemset2D(dst, stride, 0, row_bytes, n), "cudaMemset2D");
    return Status::ok();
  }
  Status copy_rows(const RowCopy& given) override {
    if (given.n == 0 || given.row_bytes == 0) return Status::ok();
    // Blocks run in any order: drop all but the last copy into a repeated
    // destination row, which is what the CPU backend's sequential loop leaves.
    const RowCopy c = last_writes_only(given);
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    // Upload the host index arrays into one device scratch buffer.
    const size_t index_bytes = c.n * sizeof(int64_t);
    KVPOOL_RETURN_IF_ERROR(reserve_indices(2 * index_bytes));
    int64_t* dst_rows = nullptr;
    int64_t* src_rows = nullptr;
    if (c.dst_rows != nullptr) {
      dst_rows = index_scratch_;
      KVPOOL_CUDA_TRY(cudaMemcpy(dst_rows, c.dst_rows, index_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    if (c.src_rows != nullptr) {
      src_rows = index_scratch_ + c.n;
      KVPOOL_CUDA_TRY(cudaMemcpy(src_rows, c.src_rows, index_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    const bool vectorized = aligned16(c.dst, c.dst_stride, c.row_bytes) && aligned16(c.src, c.src_stride, c.row_bytes);
    const size_t pieces = (c.row_bytes + kRowPiece - 1) / kRowPiece, work = c.n * pieces;
    const unsigned blocks = static_cast<unsigned>(work < 65535 ? work : 65535);
    KVP_INJECTION_POINT("copy_rows launch");
    copy_rows_kernel<<<blocks, 128>>>(static_cast<char*>(c.dst), c.dst_stride, dst_rows,
                                      static_cast<const char*>(c.src), c.src_stride, src_rows, c.row_bytes, c.n,
                                      pieces, vectorized);
    KVPOOL_CUDA_TRY(cudaGetLastError(), "copy_rows launch");
    // Done on return, as the CPU backend's copy is. The legacy stream only: a wait for the
    // whole device would also wait for the host tier's copies and the engine's own streams.
    KVPOOL_CUDA_TRY(cudaStreamSynchronize(0), "copy_rows");
    return Status::ok();
  }
  // Host rows go through a compact device staging buffer (one 2D copy that
  // drops the host pitch), then one row-copy kernel scatters them.
  Status scatter_from_host(const RowCopy& c) override {
    if (c.n == 0 || c.row_bytes == 0) return Status::ok();
    if (c.src_rows != nullptr || c.src_stride < c.row_bytes) {
      return Status::internal("scatter_from_host: host rows must be 0..n-1 with a stride of at least row_bytes");
    }
    KVP_INJECTION_POINT("scatter_from_host copy");
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    KVPOOL_RETURN_IF_ERROR(reserve_staging(c.n * c.row_bytes));
    KVPOOL_RETURN_IF_ERROR(pitched_copy(staging_, c.row_bytes, c.src, c.src_stride, c.row_bytes, c.n,
                                        cudaMemcpyHostToDevice));
    RowCopy d = c;
    d.src = staging_;
    d.src_stride = c.row_bytes;
    return copy_rows(d);
  }
  // The reverse: gather into the staging buffer, then one 2D copy to the host rows.
  Status gather_to_host(const RowCopy& c) override {
    if (c.n == 0 || c.row_bytes == 0) return Status::ok();
    if (c.dst_rows != nullptr || c.dst_stride < c.row_bytes) {
      return Status::internal("gather_to_host: host rows must be 0..n-1 with a stride of at least row_bytes");
    }
    KVP_INJECTION_POINT("gather_to_host copy");
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    KVPOOL_RETURN_IF_ERROR(reserve_staging(c.n * c.row_bytes));
    RowCopy d = c;
    d.dst = staging_;
    d.dst_stride = c.row_bytes;
    KVPOOL_RETURN_IF_ERROR(copy_rows(d));
    return pitched_copy(c.dst, c.dst_stride, staging_, c.row_bytes, c.row_bytes, c.n, cudaMemcpyDeviceToHost);
  }
  Status to_host(void* host, const void* device, size_t bytes) override {
    KVP_INJECTION_POINT("cudaMemcpy to host");
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    KVPOOL_CUDA_TRY(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return Status::ok();
  }
  Status from_host(void* device, const void* host, size_t bytes) override {
    KVP_INJECTION_POINT("cudaMemcpy from host");
    KVPOOL_CUDA_TRY(cudaSetDevice(device_), "cudaSetDevice");
    KVPOOL_CUDA_TRY(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy from host");
    return Status::ok();
  }

 private:
  Status reserve_indices(size_t bytes) {
    if (bytes <= index_capacity_) return Status::ok();
    if (index_scratch_ != nullptr) cudaFree(index_scratch_);
    index_scratch_ = nullptr;
    index_capacity_ = 0;
    KVP_INJECTION_POINT("cudaMalloc (row indices)");
    KVPOOL_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&index_scratch_), bytes), "cudaMalloc (row indices)");
    index_capacity_ = bytes;
    return Status::ok();
  }

  // `c` unchanged when its destination rows are distinct (one O(n) pass over a
  // reused hash set); otherwise the copies whose destination row is not named
  // again later, with explicit source rows.
  RowCopy last_writes_only(const RowCopy& c) {
    if (c.dst_rows == nullptr || c.n < 2) return c;
    size_t cap = 16;
    while (cap < 2 * c.n) cap <<= 1;
    if (seen_.size() < cap) {
      seen_.assign(cap, Seen{});
      generation_ = 0;
    }
    const auto insert = [&](int64_t row) {  // true if `row` was not yet in this generation
      size_t h = static_cast<size_t>((static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
      while (seen_[h].generation == generation_) {
        if (seen_[h].row == row) return false;
        h = (h + 1) & (cap - 1);
      }
      seen_[h] = Seen{row, generation_};
      return true;
    };
    ++generation_;
    bool repeated = false;
    for (size_t i = 0; i < c.n && !repeated; ++i) repeated = !insert(c.dst_rows[i]);
    if (!repeated) return c;
    ++generation_;
    kept_dst_.clear();
    kept_src_.clear();
    for (size_t i = c.n; i-- > 0;) {
      if (!insert(c.dst_rows[i])) continue;
      kept_dst_.push_back(c.dst_rows[i]);
      kept_src_.push_back(c.src_rows != nullptr ? c.src_rows[i] : static_cast<int64_t>(i));
    }
    RowCopy out = c;
    out.dst_rows = kept_dst_.data();
    out.src_rows = kept_src_.data();
    out.n = kept_dst_.size();
    return out;
  }

  Status reserve_staging(size_t bytes) {
    if (bytes <= staging_capacity_) return Status::ok();
    if (staging_ != nullptr) cudaFree(staging_);
    staging_ = nullptr;
    staging_capacity_ = 0;
    KVP_INJECTION_POINT("cudaMalloc (row staging)");
    KVPOOL_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&staging_), bytes), "cudaMalloc (row staging)");
    staging_capacity_ = bytes;
    return Status::ok();
  }
  // Rows of `width` bytes between two pitches. Dense host transfers go through
  // pinned staging in chunks (below); pitched ones are one 2D copy.
  Status pitched_copy(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                      cudaMemcpyKind kind) {
    if (dpitch == width && spitch == width) {
      const size_t bytes = width * height;
      if (bytes >= kPinnedMin) return kind == cudaMemcpyDeviceToHost ? staged_to_host(dst, src, bytes)
                                                                     : staged_from_host(dst, src, bytes);
      KVPOOL_CUDA_TRY(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy (rows)");
    } else {
      KVPOOL_CUDA_TRY(cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind), "cudaMemcpy2D (rows)");
    }
    return Status::ok();
  }

  // ---- pinned staging: two host buffers, so the DMA of one chunk overlaps the
  // host memcpy of the other (pageable memory cannot be a DMA target) ----
  static constexpr size_t kPinnedChunk = size_t(8) << 20;
  static constexpr size_t kPinnedMin = size_t(1) << 20;  // smaller copies: plain cudaMemcpy

  Status reserve_pinned() {
    if (pinned_done_[1] != nullptr) return Status::ok();  // set last: everything before it exists
    for (int i = 0; i < 2; ++i) {
      if (pinned_[i] == nullptr) {
        KVP_INJECTION_POINT("cudaHostAlloc (pinned staging)");
        KVPOOL_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&pinned_[i]), kPinnedChunk, cudaHostAllocDefault),
                        "cudaHostAlloc (pinned staging)");
      }
      if (pinned_done_[i] == nullptr) {
        KVPOOL_CUDA_TRY(cudaEventCreateWithFlags(&pinned_done_[i], cudaEventDisableTiming), "cudaEventCreate");
      }
    }
    return Status::ok();
  }

  Status staged_to_host(void* dst, const void* src, size_t bytes) {
    KVPOOL_RETURN_IF_ERROR(reserve_pinned());
    auto* out = static_cast<char*>(dst);
    const auto* in = static_cast<const char*>(src);
    size_t prev_off = 0, prev_len = 0;
    int k = 0;
    for (size_t off = 0; off < bytes; off += kPinnedChunk, ++k) {
      const size_t len = bytes - off < kPinnedChunk ? bytes - off : kPinnedChunk;
      KVPOOL_CUDA_TRY(cudaMemcpyAsync(pinned_[k % 2], in + off, len, cudaMemcpyDeviceToHost, 0), "cudaMemcpyAsync");
      KVPOOL_CUDA_TRY(cudaEventRecord(pinned_done_[k % 2], 0), "cudaEventRecord");
      if (prev_len > 0) {  // drain the previous chunk while this one is in flight
        KVPOOL_CUDA_TRY(cudaEventSynchronize(pinned_done_[(k + 1) % 2]), "cudaEventSynchronize");
        std::memcpy(out + prev_off, pinned_[(k + 1) % 2], prev_len);
      }
      prev_off = off;
      prev_len = len;
    }
    KVPOOL_CUDA_TRY(cudaEventSynchronize(pinned_done_[(k + 1) % 2]), "cudaEventSynchronize");
    std::memcpy(out + prev_off, pinned_[(k + 1) % 2], prev_len);
    return Status::ok();
  }

  Status staged_from_host(void* dst, const void* src, size_t bytes) {
    KVPOOL_RETURN_IF_ERROR(reserve_pinned());
    auto* out = static_cast<char*>(dst);
    const auto* in = static_cast<const char*>(src);
    int k = 0;
    for (size_t off = 0; off < bytes; off += kPinnedChunk, ++k) {
      const size_t len = bytes - off < kPinnedChunk ? bytes - off : kPinnedChunk;
      if (k >= 2) {  // this buffer's previous DMA must be done before it is refilled
        KVPOOL_CUDA_TRY(cudaEventSynchronize(pinned_done_[k % 2]), "cudaEventSynchronize");
      }
      std::memcpy(pinned_[k % 2], in + off, len);
      KVPOOL_CUDA_TRY(cudaMemcpyAsync(out + off, pinned_[k % 2], len, cudaMemcpyHostToDevice, 0), "cudaMemcpyAsync");
      KVPOOL_CUDA_TRY(cudaEventRecord(pinned_done_[k % 2], 0), "cudaEventRecord");
    }
    KVPOOL_CUDA_TRY(cudaStreamSynchronize(0), "cudaStreamSynchronize");
    return Status::ok();
  }

  int device_;
  char* pinned_[2] = {nullptr, nullptr};
  cudaEvent_t pinned_done_[2] = {nullptr, nullptr};
  int64_t* index_scratch_ = nullptr;
  size_t index_capacity_ = 0;
  char* staging_ = nullptr;
  size_t staging_capacity_ = 0;
  // last_writes_only(): an open-addressing set whose entries count as present
  // only in the current generation, so it never needs clearing.
  struct Seen {
    int64_t row = 0;
    uint64_t generation = 0;
  };
  std::vector<Seen> seen_;
  uint64_t generation_ = 0;
  std::vector<int64_t> kept_dst_, kept_src_;
};

}  // namespace

Status make_cuda_backend(int device, std::unique_ptr<Backend>* out) {
  *out = std::make_unique<CudaBackend>(device);
  return Status::ok();
}

}  // namespace kvp::backend
