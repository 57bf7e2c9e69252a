// The CUDA half of req::TableWrites: kvseq's request-table writes staged in
// mapped pinned host memory, which the kernel reads directly, so that a call
// costs one kernel launch and one event record on the caller's stream (a copy
// to device memory first would add an enqueue and change nothing: the bytes
// cross PCIe once either way). A decode step stages compact cells (row and
// column, 8 bytes, plus its 4-byte slot) instead of a 16-byte run per request.
// Four staging sets rotate, each released by an event, so that the host never
// waits unless the device is four calls behind.
// Sets grow geometrically; a grown set's old buffers are freed only with the
// writer, because cudaFreeHost waits for the whole device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "alloc/device_kernels.hpp"
#include "device_common.cuh"
#include "req/table_writes.hpp"
#include "util/fault_injection.hpp"

namespace kvp::req {
namespace {

using devk::cuda_status;

struct ApplyParams {
  int32_t* table;
  int64_t rows, context, slot_limit;
  const TableRun* runs;
  int64_t n_runs;
  const TableCell* cells;
  int64_t n_cells;
  int64_t cells_offset;  // cell c's value is values[cells_offset + c]
  const int32_t* values;
  int64_t n_values;
  int64_t* out;
  int64_t out_n;
  backend::FaultRecord* fault;
  int* host_flag;
};

// A warp per run (grid-stride), a thread per cell, then every thread copies part of
// `out`. The host checked the runs' rows, columns and slots, and the cells' bounds;
// the kernel checks bounds again so that a bad run or cell can only fault the pool,
// never write outside the table.
__global__ void apply_runs_kernel(ApplyParams p) {
  if (kvp_faulted(p.fault)) return;
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int lane = static_cast<int>(threadIdx.x & 31);
  for (int64_t r = thread >> 5; r < p.n_runs; r += threads >> 5) {
    const TableRun run = p.runs[r];
    if (run.row <= 0 || run.row >= p.rows) {
      if (lane == 0) kvp_raise(p.fault, p.host_flag, backend::kFaultBadRow, backend::kOpSeqWrite, r, run.row, p.rows);
      continue;
    }
    if (run.start < 0 || run.count < 0 || run.start + static_cast<int64_t>(run.count) > p.context ||
        run.offset < 0 || run.offset + static_cast<int64_t>(run.count) > p.n_values) {
      if (lane == 0) {
        kvp_raise(p.fault, p.host_flag, backend::kFaultBadColumns, backend::kOpSeqWrite, r,
                  static_cast<int64_t>(run.start) + run.count, p.context);
      }
      continue;
    }
    int32_t* dst = p.table + run.row * p.context + run.start;
    const int32_t* src = p.values + run.offset;
    for (int k = lane; k < run.count; k += 32) {
      const int32_t v = src[k];
      if (v < 0 || v >= p.slot_limit) {
        kvp_raise(p.fault, p.host_flag, backend::kFaultSlotOutOfRange, backend::kOpSeqWrite, run.offset + k, v,
                  p.slot_limit);
      } else {
        dst[k] = v;
      }
    }
  }
  for (int64_t c = thread; c < p.n_cells; c += threads) {
    const TableCell cell = p.cells[c];
    const int64_t v_at = p.cells_offset + c;
    if (cell.row <= 0 || cell.row >= p.rows) {
      kvp_raise(p.fault, p.host_flag, backend::kFaultBadRow, backend::kOpSeqWrite, c, cell.row, p.rows);
      continue;
    }
    if (cell.column < 0 || cell.column >= p.context || v_at >= p.n_values) {
      kvp_raise(p.fault, p.host_flag, backend::kFaultBadColumns, backend::kOpSeqWrite, c,
                static_cast<int64_t>(cell.column) + 1, p.context);
      continue;
    }
    const int32_t v = p.values[v_at];
    if (v < 0 || v >= p.slot_limit) {
      kvp_raise(p.fault, p.host_flag, backend::kFaultSlotOutOfRange, backend::kOpSeqWrite, v_at, v, p.slot_limit);
    } else {
      p.table[static_cast<int64_t>(cell.row) * p.context + cell.column] = v;
    }
  }
  for (int64_t i = thread; i < p.out_n; i += threads) p.out[i] = p.values[i];
}

class DeviceTableWrites final : public TableWrites {
 public:
  DeviceTableWrites(RequestTable* table, backend::DeviceFault* fault, int device)
      : table_(table), fault_(fault), device_(device) {}
  ~DeviceTableWrites() override {
    for (Staging& s : sets_) release(&s);
    for (void* p : retired_) cudaFreeHost(p);
  }

  Status reserve(size_t runs, size_t values) override { return reserve_staging(runs, 0, values); }
  Status reserve_cells(size_t cells) override { return reserve_staging(0, cells, cells); }

  Status add(int32_t row, size_t start, const int64_t* slots, size_t n) override {
    KVPOOL_RETURN_IF_ERROR(table_->check_columns(row, start, n));
    if (n == 0) return Status::ok();
    Staging& s = sets_[current_];
    if (s.runs.capacity < n_runs_ + 1 || s.values.capacity < n_values_ + n) {
      return Status::internal("table writes staged beyond their reservation");
    }
    KVPOOL_RETURN_IF_ERROR(table_->narrow_slots(slots, n, static_cast<int32_t*>(s.values.host) + n_values_));
    static_cast<TableRun*>(s.runs.host)[n_runs_++] =
        TableRun{row, static_cast<int32_t>(start), static_cast<int32_t>(n), static_cast<int32_t>(n_values_)};
    n_values_ += n;
    return Status::ok();
  }

  Status add_cells(const TableCell* cells, const int64_t* slots, size_t n) override {
    // One pass copies the cells, narrows the slots (the int32 cast is exact for a slot in
    // range) and tests the bounds; a batch with a cell out of bounds is dropped with
    // add()'s message for its first such cell (the caller discards the call's writes).
    return stage_cells(n, [&](TableCell* staged, int32_t* values) {
      const CellBounds bounds(table_->rows(), table_->max_context_len(), table_->slot_limit());
      bool inside = true;
      for (size_t i = 0; i < n; ++i) {
        inside &= bounds.holds(cells[i], slots[i]);
        staged[i] = cells[i];
        values[i] = static_cast<int32_t>(slots[i]);
      }
      if (!inside) {
        for (size_t i = 0;; ++i) {
          if (!bounds.holds(cells[i], slots[i])) return table_->cell_error(cells[i], slots[i]);
        }
      }
      return Status::ok();
    });
  }

  Status add_checked_cells(const TableCell* cells, const int64_t* slots, size_t n) override {
    return stage_cells(n, [&](TableCell* staged, int32_t* values) {
      std::memcpy(staged, cells, n * sizeof(TableCell));
      for (size_t i = 0; i < n; ++i) values[i] = static_cast<int32_t>(slots[i]);  // below slot_limit: exact
      return Status::ok();
    });
  }

  Status flush(void* stream, const int64_t*, int64_t* out, size_t out_n) override {
    const size_t runs = n_runs_, cells = n_cells_, values = n_values_;
    n_runs_ = n_cells_ = n_values_ = 0;
    if (runs == 0 && cells == 0 && (out == nullptr || out_n == 0)) return Status::ok();
    if (out_n > values) return Status::internal("more output slots than staged values");
    KVPOOL_RETURN_IF_ERROR(devk::use_device(device_));
    Staging& s = sets_[current_];
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    ApplyParams p{};
    p.table = table_->memory().as<int32_t>();
    p.rows = table_->rows();
    p.context = table_->max_context_len();
    p.slot_limit = table_->slot_limit();
    p.runs = static_cast<const TableRun*>(s.runs.device);  // the mapped pinned buffers
    p.n_runs = static_cast<int64_t>(runs);
    p.cells = static_cast<const TableCell*>(s.cells.device);
    p.n_cells = static_cast<int64_t>(cells);
    p.cells_offset = static_cast<int64_t>(cells_offset_);
    p.values = static_cast<const int32_t*>(s.values.device);
    p.n_values = static_cast<int64_t>(values);
    p.out = out;
    p.out_n = out == nullptr ? 0 : static_cast<int64_t>(out_n);
    p.fault = fault_->record();
    p.host_flag = fault_->host_flag();
    const int64_t warps_blocks = (static_cast<int64_t>(runs) + 7) / 8, out_blocks = (p.out_n + 255) / 256;
    const int64_t cell_blocks = (p.n_cells + 255) / 256;
    const unsigned blocks =
        static_cast<unsigned>(std::clamp<int64_t>(std::max({warps_blocks, cell_blocks, out_blocks}), 1, 1024));
    KVP_INJECTION_POINT("apply_runs_kernel launch");
    apply_runs_kernel<<<blocks, 256, 0, st>>>(p);
    KVPOOL_RETURN_IF_ERROR(devk::launch_status("apply_runs kernel launch"));
    // The kernel is enqueued: the call has succeeded. If the event cannot be recorded,
    // the set is released by a whole-device wait instead.
    s.in_flight = true;
    if (cudaEventRecord(s.done, st) != cudaSuccess) {
      (void)cudaGetLastError();
      s.in_flight = cudaDeviceSynchronize() != cudaSuccess;
    }
    current_ = (current_ + 1) % kSets;
    return Status::ok();
  }

  void discard() override { n_runs_ = n_cells_ = n_values_ = 0; }
  bool deferred() const override { return true; }

  Status init() {
    KVPOOL_RETURN_IF_ERROR(devk::use_device(device_));
    for (Staging& s : sets_) {
      KVP_INJECTION_POINT("table staging event");
      KVPOOL_RETURN_IF_ERROR(
          cuda_status(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "cudaEventCreate (table staging)"));
    }
    return Status::ok();
  }

 private:
  struct Region {
    void* host = nullptr;    // pinned, mapped
    void* device = nullptr;  // the same memory as the device sees it
    size_t capacity = 0;     // elements
  };
  struct Staging {
    Region runs, cells, values;
    cudaEvent_t done = nullptr;
    bool in_flight = false;
  };
  static constexpr int kSets = 4;

  Status reserve_staging(size_t runs, size_t cells, size_t values) {
    KVPOOL_RETURN_IF_ERROR(devk::use_device(device_));
    Staging& s = sets_[current_];
    // A new call: the set's last copies must be done.
    if (n_runs_ == 0 && n_cells_ == 0 && n_values_ == 0 && s.in_flight) {
      KVPOOL_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(s.done), "cudaEventSynchronize (table staging)"));
      s.in_flight = false;
    }
    // Every set grows together: a set reached for the first time later would otherwise
    // pin fresh memory in the middle of a run.
    for (int k = 0; k < kSets; ++k) {
      const int i = (current_ + k) % kSets;  // the current set first: its staged entries are kept
      KVPOOL_RETURN_IF_ERROR(grow(&sets_[i].runs, n_runs_ + runs, sizeof(TableRun), k == 0 ? n_runs_ : 0));
      KVPOOL_RETURN_IF_ERROR(grow(&sets_[i].cells, n_cells_ + cells, sizeof(TableCell), k == 0 ? n_cells_ : 0));
      KVPOOL_RETURN_IF_ERROR(grow(&sets_[i].values, n_values_ + values, sizeof(int32_t), k == 0 ? n_values_ : 0));
    }
    return Status::ok();
  }

  // Grows a region to at least `need` elements (geometrically), keeping its first `staged`
  // elements. The old buffer is retired, not freed: a kernel may still read it.
  Status grow(Region* r, size_t need, size_t elem, size_t staged) {
    if (need <= r->capacity) return Status::ok();
    const size_t capacity = std::max({need, 2 * r->capacity, size_t{4096}});
    reserve_retired();
    void* host = nullptr;
    void* device = nullptr;
    KVP_INJECTION_POINT("table staging host allocation");
    KVPOOL_RETURN_IF_ERROR(
        cuda_status(cudaHostAlloc(&host, capacity * elem, cudaHostAllocMapped), "cudaHostAlloc (table staging)"));
    const Status st = cuda_status(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer (table staging)");
    if (!st.is_ok()) {
      cudaFreeHost(host);
      return st;
    }
    if (staged > 0) std::memcpy(host, r->host, staged * elem);
    if (r->host != nullptr) retired_.push_back(r->host);  // room reserved above: no allocation
    r->host = host;
    r->device = device;
    r->capacity = capacity;
    return Status::ok();
  }

  // Stages `n` cells: fill(cells, values) writes them and their int32 slots where they go in
  // the current set; nothing is counted as staged if it fails.
  template <class Fill>
  Status stage_cells(size_t n, Fill fill) {
    if (n == 0) return Status::ok();
    Staging& s = sets_[current_];
    if (s.cells.capacity < n_cells_ + n || s.values.capacity < n_values_ + n) {
      return Status::internal("table writes staged beyond their reservation");
    }
    // The cells' values must stay one contiguous part of the values (the kernel finds
    // cell c's at cells_offset + c): no run may come between two batches of cells.
    if (n_cells_ > 0 && cells_offset_ + n_cells_ != n_values_) {
      return Status::internal("table cells staged apart from the earlier cells");
    }
    KVPOOL_RETURN_IF_ERROR(fill(static_cast<TableCell*>(s.cells.host) + n_cells_,
                                static_cast<int32_t*>(s.values.host) + n_values_));
    if (n_cells_ == 0) cells_offset_ = n_values_;
    n_cells_ += n;
    n_values_ += n;
    return Status::ok();
  }

  // Room for one more retired buffer, taken before a new buffer exists (so that
  // recording the old one cannot fail).
  void reserve_retired() {
    if (retired_.capacity() == retired_.size()) retired_.reserve(2 * retired_.size() + 8);
  }

  void release(Staging* s) {
    if (s->in_flight) cudaEventSynchronize(s->done);
    cudaFreeHost(s->runs.host);
    cudaFreeHost(s->cells.host);
    cudaFreeHost(s->values.host);
    if (s->done != nullptr) cudaEventDestroy(s->done);
  }

  RequestTable* table_;
  backend::DeviceFault* fault_;
  int device_;
  Staging sets_[kSets];
  int current_ = 0;
  size_t n_runs_ = 0, n_cells_ = 0, n_values_ = 0;  // staged in sets_[current_]
  size_t cells_offset_ = 0;                         // the values index of the first staged cell
  std::vector<void*> retired_;  // outgrown staging buffers (cudaFreeHost would wait for the device)
};

}  // namespace

Status make_device_table_writes(RequestTable* table, backend::DeviceFault* fault, int device,
                                std::unique_ptr<TableWrites>* out) {
  std::unique_ptr<DeviceTableWrites> w(new DeviceTableWrites(table, fault, device));
  KVPOOL_RETURN_IF_ERROR(w->init());
  *out = std::move(w);
  return Status::ok();
}

}  // namespace kvp::req
