// Stream-ordered request-table kernels (kvreq_write_batch_async,
// kvreq_last_loc_async). Rows and lengths are device values: they are checked
// here and fault the pool instead of writing outside the table.
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include "alloc/device_kernels.hpp"
#include "device_common.cuh"
#include "util/fault_injection.hpp"

namespace kvp::devk {
namespace {

using backend::FaultRecord;

struct Sums {
  long long ext, pre;
};
struct SumsAdd {
  __device__ __forceinline__ Sums operator()(const Sums& a, const Sums& b) const {
    return Sums{a.ext + b.ext, a.pre + b.pre};
  }
};

constexpr int kThreads = 256;
constexpr int64_t kTokensPerBlock = 2048;

struct WriteParams {
  WriteBatchArgs a;
  TableView t;
  unsigned extend_blocks;  // blocks [0, extend_blocks) write the extend slots, the rest the prefix slots
};

// Grid over the slots to write (extend part, then prefix part), 2048 per
// block; per tile of 256 requests an exclusive sum gives each request's
// offset in the source array, and a binary search finds each slot's request
// (the layout of extend_kernel in device_pages.cu). Block 0 validates rows and
// lengths and compares the sums with the host's slot counts.
__global__ void __launch_bounds__(kThreads) write_batch_kernel(WriteParams p) {
  using Scan = cub::BlockScan<Sums, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int64_t s_off[kThreads], s_base[kThreads];
  if (block_faulted(p.t.fault)) return;
  const WriteBatchArgs& a = p.a;
  const int tid = static_cast<int>(threadIdx.x);
  const bool prefix_part = blockIdx.x >= p.extend_blocks;
  const int64_t block = prefix_part ? blockIdx.x - p.extend_blocks : blockIdx.x;
  const int64_t part_len = prefix_part ? a.prefix_len : a.extend_len;
  const int64_t* src = prefix_part ? a.prefix_slots : a.extend_slots;
  const int64_t b0 = block * kTokensPerBlock;
  const int64_t b1 = min(b0 + kTokensPerBlock, part_len);
  const bool validator = blockIdx.x == 0;
  Sums carry{0, 0};
  for (int64_t tile = 0; tile < a.batch; tile += kThreads) {
    const int64_t i = tile + tid;
    Sums mine{0, 0};
    int64_t base = 0;
    if (i < a.batch) {
      const int64_t row = a.rows[i], pre = a.prefix_lens[i], seq = a.seq_lens[i];
      if (row <= 0 || row >= p.t.rows) {
        if (validator) kvp_raise(p.t.fault, p.t.host_flag, backend::kFaultBadRow, backend::kOpWriteBatch, i, row, p.t.rows);
      } else if (pre < 0 || seq < pre) {
        if (validator) kvp_raise(p.t.fault, p.t.host_flag, backend::kFaultBadLength, backend::kOpWriteBatch, i, seq, pre);
      } else if (seq > p.t.context) {
        if (validator) kvp_raise(p.t.fault, p.t.host_flag, backend::kFaultBadColumns, backend::kOpWriteBatch, i, seq, p.t.context);
      } else {
        mine = Sums{seq - pre, pre};
        base = row * p.t.context + (prefix_part ? 0 : pre);  // table index of the request's first slot
      }
    }
    Sums excl, total;
    Scan(scan_tmp).ExclusiveScan(mine, excl, Sums{0, 0}, SumsAdd(), total);
    s_off[tid] = prefix_part ? carry.pre + excl.pre : carry.ext + excl.ext;
    s_base[tid] = base;
    __syncthreads();
    const int n = static_cast<int>(min(static_cast<int64_t>(kThreads), a.batch - tile));
    const int64_t start = prefix_part ? carry.pre : carry.ext;
    const int64_t lo = max(b0, start);
    const int64_t hi = min(b1, start + static_cast<int64_t>(prefix_part ? total.pre : total.ext));
    for (int64_t t = lo + tid; t < hi; t += kThreads) {
      int j = 0, k = n - 1;  // the last request of the tile whose offset is <= t
      while (j < k) {
        const int mid = (j + k + 1) / 2;
        if (s_off[mid] <= t) {
          j = mid;
        } else {
          k = mid - 1;
        }
      }
      const int64_t slot = src[t];
      if (slot < 0 || slot >= p.t.slot_limit) {
        kvp_raise(p.t.fault, p.t.host_flag, backend::kFaultSlotOutOfRange, backend::kOpWriteBatch, t, slot,
                  p.t.slot_limit);
        continue;
      }
      p.t.table[s_base[j] + (t - s_off[j])] = static_cast<int32_t>(slot);
    }
    carry = SumsAdd()(carry, total);
    __syncthreads();  // the tile's shared arrays are rewritten next
  }
  if (validator && tid == 0) {
    if (carry.ext != a.extend_len) {
      kvp_raise(p.t.fault, p.t.host_flag, backend::kFaultLengthMismatch, backend::kOpWriteBatch, -1, carry.ext,
                a.extend_len);
    } else if (a.prefix_slots != nullptr && carry.pre != a.prefix_len) {
      kvp_raise(p.t.fault, p.t.host_flag, backend::kFaultLengthMismatch, backend::kOpWriteBatch, -1, carry.pre,
                a.prefix_len);
    }
  }
}

__global__ void last_loc_kernel(TableView t, const int32_t* rows, const int64_t* prefix_lens, int64_t batch,
                                int64_t* out) {
  if (kvp_faulted(t.fault)) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < batch; i += stride) {
    const int64_t row = rows[i], pre = prefix_lens[i];
    if (row <= 0 || row >= t.rows) {
      kvp_raise(t.fault, t.host_flag, backend::kFaultBadRow, backend::kOpLastLoc, i, row, t.rows);
    } else if (pre < 0 || pre > t.context) {
      kvp_raise(t.fault, t.host_flag, backend::kFaultBadColumns, backend::kOpLastLoc, i, pre, t.context);
    } else {
      out[i] = pre == 0 ? -1 : static_cast<int64_t>(t.table[row * t.context + pre - 1]);
    }
  }
}

}  // namespace

Status write_batch(const TableView& t, const WriteBatchArgs& a, void* stream) {
  if (a.batch == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(use_device(t.device));
  const unsigned extend_blocks = blocks_for(a.extend_len, static_cast<int>(kTokensPerBlock), INT32_MAX);
  const unsigned prefix_blocks =
      a.prefix_slots == nullptr || a.prefix_len == 0 ? 0u : blocks_for(a.prefix_len, static_cast<int>(kTokensPerBlock), INT32_MAX);
  WriteParams p{a, t, extend_blocks};
  KVP_INJECTION_POINT("write_batch_kernel launch");
  write_batch_kernel<<<extend_blocks + prefix_blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return launch_status("write_batch kernel launch");
}

Status last_loc(const TableView& t, const int32_t* rows, const int64_t* prefix_lens, int64_t batch, int64_t* out,
                void* stream) {
  if (batch == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(use_device(t.device));
  KVP_INJECTION_POINT("last_loc_kernel launch");
  last_loc_kernel<<<blocks_for(batch, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(t, rows, prefix_lens, batch,
                                                                                         out);
  return launch_status("last_loc kernel launch");
}

}  // namespace kvp::devk
