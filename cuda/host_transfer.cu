// The CUDA HostTransfer (SGLANG_SEMANTICS §1.17, §5.7): backups device -> host on a
// write stream, loads host -> device on a load stream, both ordered after the work
// already enqueued on the compute stream, and nothing on the host ever waits for
// the device except wait(ticket).
//
// Per call the host checks the page ids, copies them into a pinned staging slot (a
// ring that grows instead of waiting for a slot still in use), then enqueues an
// event on the compute stream and a wait for it, and:
//   backup: one kernel for every tiered layer, part and page (cuda/host_copy.cuh),
//           reading the ids from the mapped staging slot;
//   load:   one kernel for every layer, reading the ids from the mapped slot; its
//           blocks (a few: kLoadBlocks) take the work pieces in order from a
//           counter, layer 0 first, and the block that completes a layer stores the
//           load's sequence number to the set's flag of the layer in device memory
//           (SGLang's LayerDoneCounter); wait_layer enqueues a stream wait on that
//           flag (cuStreamWaitValue32, from the driver through
//           cudaGetDriverEntryPoint: the library links the static runtime only).
//           Where stream memory operations are missing, the event path: a copy of
//           the ids to the device, then one CUDA graph of the load set, captured
//           once, per layer (group) the kernel and the set's event of it, waited on
//           with cudaStreamWaitEvent;
// then the ticket's event. The copy-engine path (CopyPath::kCopyEngine) replaces the
// kernels by batched DMA operations (copy_runs.hpp): faster for loads (a host read by
// the SMs fetches less per PCIe request than a DMA engine does), but the host pays
// ~0.6 µs per operation. So the call hands the page ids to a thread of the transfer
// (util/job_thread.hpp) and returns: that thread makes the stream follow the compute
// stream's event recorded by the call, enqueues the operations layer by layer, writes
// the set's flag of each layer after its copies (cuStreamWriteValue32) and records the
// ticket's event. Where stream memory operations are missing the call enqueues the
// copies itself, with an event per layer group. Measured: docs/performance.md.
#include <cuda.h>  // types and constants of cuStreamWaitValue32 only: no link to libcuda
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "copy_runs.hpp"
#include "host/host_transfer.hpp"
#include "host_copy.cuh"
#include "util/job_thread.hpp"

namespace kvp::host {
namespace {

using cudak::CopyArgs;
using cudak::PartCopy;

constexpr int kMaxParts = 8;
constexpr size_t kTickets = 256;        // tickets remembered; older ones are finished
constexpr size_t kInitialIdPages = 4096;  // device id buffers grow from here
constexpr uint32_t kDefaultLayerGroup = 1;
// Blocks of a kernel load that marks layers: 32 in all, at least 16 per part (16 KiB
// pieces: 512 KiB in flight for K and V). The SMs' reads of pinned memory reach ~92 % of
// the link whatever the grid, from 16 blocks to every resident one (264); what the grid
// decides is how much waits in the link's queue ahead of a layer's last piece, and so
// when layer 0 lands: ~0.4 ms after the call with 16-32 blocks, 0.7-1.0 ms with 264
// (4 MiB in flight). Too few blocks starve the link (each block waits for all its loads
// before its next piece): 8 blocks gave 38-44 GB/s on two hosts, 16 blocks page_head
// 47.8 against 50.8. docs/performance.md, "Host tier transfers".
constexpr uint64_t kLoadBlocks = 32;
constexpr uint64_t kLoadBlocksPerPart = 16;
// The smallest operation "direct" loads give the copy engines. Whole 128 KiB pages load at
// 52.5-53.3 GB/s; rows of 32 KiB reached 51 (2D operations), of 2 KiB 24, where the copy
// kernel loads at ~51 (page size 1 included: 46-50). tests/bench/gpu_probe_copy_engine_rows.cu.
constexpr uint64_t kCopyEngineMinRun = 64 * 1024;

Status cuda_error(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::cuda(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

#define KVP_CUDA(call, what) KVPOOL_RETURN_IF_ERROR(cuda_error((call), what))

using CopyKernel = void (*)(CopyArgs);

// The copy kernel of `unroll` loads in flight per thread (4, 8 or 16), or NULL; `grouped`:
// the build that copies several small items per piece (PartCopy::pages_per_piece).
CopyKernel copy_kernel(uint32_t unroll, bool grouped) {
  switch (unroll) {
    case 4: return grouped ? cudak::host_copy_kernel<4, true> : cudak::host_copy_kernel<4, false>;
    case 8: return grouped ? cudak::host_copy_kernel<8, true> : cudak::host_copy_kernel<8, false>;
    case 16: return grouped ? cudak::host_copy_kernel<16, true> : cudak::host_copy_kernel<16, false>;
    default: return nullptr;
  }
}

uint32_t widest_access(uint64_t v) {
  for (uint32_t w = 16; w > 1; w /= 2) {
    if (v % w == 0) return w;
  }
  return 1;
}

// cuStreamWaitValue32 and cuStreamWriteValue32 have this signature.
using StreamValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// A stream memory operation of the driver (the v2 ones, always on since CUDA 12.0), or NULL.
StreamValue32 driver_stream_op(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<StreamValue32>(fn);
}

class CudaTransfer final : public HostTransfer {
 public:
  CudaTransfer(const HostPool* pool, int device, const CudaTransferOptions& o)
      : pool_(pool), g_(pool->geometry()), device_(device), options_(o) {}

  ~CudaTransfer() override {
    enqueuer_.reset();  // enqueues the jobs still queued (their memory is freed below, after the syncs)
    if (cudaSetDevice(device_) != cudaSuccess) return;
    // Every enqueued copy must end before the memory it uses goes away.
    if (write_ != nullptr) cudaStreamSynchronize(write_);
    if (load_ != nullptr) cudaStreamSynchronize(load_);
    for (auto& set : graphs_) {
      if (set != nullptr) cudaGraphExecDestroy(set);
    }
    for (cudaGraphExec_t g : retired_graphs_) cudaGraphExecDestroy(g);
    for (Staging& s : staging_) cudaFreeHost(s.host);
    for (void* p : retired_) cudaFree(p);
    for (void* p : retired_host_) cudaFreeHost(p);
    cudaFree(load_ids_.ptr);
    cudaFree(parts_dev_);
    cudaFree(bases_dev_);
    cudaFree(layer_done_dev_);
    cudaFree(layer_flags_);
    for (cudaEvent_t e : tickets_) cudaEventDestroy(e);
    for (cudaEvent_t e : follow_) cudaEventDestroy(e);
    for (auto& set : layer_done_) {
      for (cudaEvent_t e : set) cudaEventDestroy(e);
    }
    if (compute_done_ != nullptr) cudaEventDestroy(compute_done_);
    if (write_ != nullptr) cudaStreamDestroy(write_);
    if (load_ != nullptr) cudaStreamDestroy(load_);
  }

  Status init() {
    if (!pool_->pinned()) return Status::invalid("the CUDA host tier needs pinned host memory");
    if (g_.parts.empty() || g_.parts.size() > kMaxParts || g_.layers == 0 || g_.pages == 0) {
      return Status::invalid("host tier geometry: " + std::to_string(g_.parts.size()) + " parts (1.." +
                             std::to_string(kMaxParts) + ") of " + std::to_string(g_.layers) + " layers");
    }
    device_pages_ = g_.device_pages();
    if (device_pages_ == 0) return Status::invalid("host tier geometry: no device rows (TierPart::device_rows)");
    group_ = options_.layer_group == 0 ? kDefaultLayerGroup : std::min(options_.layer_group, g_.layers);
    groups_ = (g_.layers + group_ - 1) / group_;
    KVP_CUDA(cudaSetDevice(device_), "cudaSetDevice (host tier)");
    KVP_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
    unroll_ = options_.copy_unroll == 0 ? cudak::kCopyUnroll : options_.copy_unroll;
    if (copy_kernel(unroll_, false) == nullptr) {
      return Status::invalid("copy_unroll " + std::to_string(unroll_) + ": 4, 8 or 16");
    }
    KVPOOL_RETURN_IF_ERROR(build_parts());  // the parts' pieces decide the kernel's build
    backup_path_ = load_path_ = options_.path;
    if (options_.path == CopyPath::kAuto) {
      backup_path_ = auto_path(true);
      load_path_ = auto_path(false);
    }
    bool grouped = false;
    for (const PartCopy& pc : parts_) grouped = grouped || pc.pages_per_piece > 1;
    kernel_ = copy_kernel(unroll_, grouped);
    // Load the kernel now: with lazy loading (the default) its first launch would load the
    // module then, which can wait for the work running on the device.
    cudaFuncAttributes attr{};
    KVP_CUDA(cudaFuncGetAttributes(&attr, kernel_), "cudaFuncGetAttributes (host tier kernel)");
    int per_sm = 0;
    KVP_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, cudak::kCopyThreads, 0),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor (host tier kernel)");
    resident_ = static_cast<uint64_t>(std::max(per_sm, 1)) * static_cast<uint64_t>(sms_);
    const uint64_t parts = g_.parts.size();
    load_blocks_ = options_.load_blocks != 0 ? options_.load_blocks
                                             : std::max(kLoadBlocksPerPart, (kLoadBlocks + parts - 1) / parts);
    load_blocks_ = std::min(load_blocks_, std::max<uint64_t>(resident_ / parts, 1));
    KVP_CUDA(cudaStreamCreateWithFlags(&write_, cudaStreamNonBlocking), "cudaStreamCreate (host tier write)");
    KVP_CUDA(cudaStreamCreateWithFlags(&load_, cudaStreamNonBlocking), "cudaStreamCreate (host tier load)");
    KVP_CUDA(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming), "cudaEventCreate (host tier)");
    tickets_.assign(kTickets, nullptr);
    for (cudaEvent_t& e : tickets_) KVP_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    // Loads mark their layers in device memory (the kernel's blocks, or the enqueue
    // thread's flag writes after each layer's copies) unless layer_events asks for events.
    if (!options_.layer_events) {
      wait_value_ = driver_stream_op("cuStreamWaitValue32");
      if (load_path_ == CopyPath::kCopyEngine) {
        write_value_ = driver_stream_op("cuStreamWriteValue32");
        if (write_value_ == nullptr) wait_value_ = nullptr;
      }
    }
    if (backup_path_ == CopyPath::kCopyEngine || (load_path_ == CopyPath::kCopyEngine && wait_value_ != nullptr)) {
      KVPOOL_RETURN_IF_ERROR(start_enqueuer());
    }
    if (wait_value_ == nullptr) {
      for (auto& set : layer_done_) {
        set.assign(groups_, nullptr);
        for (cudaEvent_t& e : set) KVP_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      }
    }
    if (wait_value_ != nullptr) {  // loads mark layers in device memory
      const size_t counters = (g_.layers + kMaxParts + 1) * sizeof(unsigned long long);  // layers, then the sweep
      KVP_CUDA(cudaMalloc(&layer_done_dev_, counters), "cudaMalloc (host tier layers)");
      KVP_CUDA(cudaMemset(layer_done_dev_, 0, counters), "cudaMemset (host tier layers)");
      KVP_CUDA(cudaMalloc(&layer_flags_, kLoadSets * g_.layers * sizeof(unsigned)), "cudaMalloc (host tier flags)");
      KVP_CUDA(cudaMemset(layer_flags_, 0, kLoadSets * g_.layers * sizeof(unsigned)), "cudaMemset (host tier flags)");
      KVP_CUDA(cudaDeviceSynchronize(), "cudaDeviceSynchronize (host tier init)");  // the memsets ran
    } else {
      KVPOOL_RETURN_IF_ERROR(grow_ids(&load_ids_, kInitialIdPages));
      if (load_path_ == CopyPath::kKernel) KVPOOL_RETURN_IF_ERROR(capture_load_graphs());
    }
    return Status::ok();
  }

  Status set_compute_stream(void* stream) override {
    compute_ = static_cast<cudaStream_t>(stream);
    return Status::ok();
  }

  Status backup(const int64_t* device_pages, const int64_t* host_pages, size_t n, uint64_t* ticket) override {
    KVPOOL_RETURN_IF_ERROR(check_pages(device_pages, host_pages, n, ticket, "backup"));
    KVPOOL_RETURN_IF_ERROR(enqueuer_error());
    KVP_CUDA(cudaSetDevice(device_), "cudaSetDevice (host tier backup)");
    if (n == 0) return next_ticket(write_, ticket);  // nothing to copy, a ticket all the same
    uint64_t t = 0;
    if (backup_path_ == CopyPath::kCopyEngine) {
      KVPOOL_RETURN_IF_ERROR(hand_over(device_pages, host_pages, n, -1, 0, &t));
    } else {
      KVPOOL_RETURN_IF_ERROR(follow_compute(write_, "backup"));
      // The kernel reads the ids straight from the pinned slot: one enqueue fewer than a
      // copy to the device, and a few µs of latency per block against ~10 ms of copying.
      Staging* s = nullptr;
      KVPOOL_RETURN_IF_ERROR(stage(host_pages, device_pages, n, &s));
      CopyArgs a{parts_dev_, s->device, 0, g_.layers, 1, nullptr, nullptr, nullptr, 0, 0};
      launch_copy(a, static_cast<uint64_t>(n) * g_.layers, static_cast<uint64_t>(sms_) * 16, write_);
      Status st = cuda_error(cudaGetLastError(), "host_copy_kernel launch (host tier backup)");
      if (st.is_ok()) st = next_ticket(write_, &t);
      if (!st.is_ok()) return retire(s, st);
      s->ticket = t;
    }
    to_host_ += n * page_bytes_;
    *ticket = t;
    return Status::ok();
  }

  Status load(const int64_t* host_pages, const int64_t* device_pages, size_t n, int set, uint64_t* ticket) override {
    if (set < 0 || set >= kLoadSets) {
      return Status::invalid("load set " + std::to_string(set) + " is not in [0, " + std::to_string(kLoadSets) + ")");
    }
    KVPOOL_RETURN_IF_ERROR(check_pages(device_pages, host_pages, n, ticket, "load"));
    KVPOOL_RETURN_IF_ERROR(enqueuer_error());
    KVP_CUDA(cudaSetDevice(device_), "cudaSetDevice (host tier load)");
    // Even an empty load marks every layer of the set done (after the compute stream's
    // work), so that a batch that waits on the set never waits on an older load.
    uint64_t t = 0;
    if (load_path_ == CopyPath::kCopyEngine && wait_value_ != nullptr) {
      const unsigned seq = next_seq(set);
      KVPOOL_RETURN_IF_ERROR(hand_over(device_pages, host_pages, n, set, seq, &t));
      load_seq_[set] = seq;
      to_device_ += n * page_bytes_;
      *ticket = t;
      return Status::ok();
    }
    KVPOOL_RETURN_IF_ERROR(follow_compute(load_, "load"));
    if (wait_value_ != nullptr) {
      // One kernel, every layer; its blocks store seq to the set's layer flags.
      Staging* s = nullptr;
      KVPOOL_RETURN_IF_ERROR(stage(host_pages, device_pages, n, &s));
      const unsigned seq = next_seq(set);
      CopyArgs a{parts_dev_,   s->device, 0, g_.layers, 0, layer_done_dev_, layer_done_dev_ + g_.layers,
                 layer_flags_ + set * g_.layers, seq, pieces_per_layer(n)};
      // A few blocks (kLoadBlocks): they take the pieces in order, layer 0 first (one block
      // marks an empty load).
      if (n == 0) {
        kernel_<<<1, cudak::kCopyThreads, 0, load_>>>(a);
      } else {
        launch_copy(a, static_cast<uint64_t>(n) * g_.layers, load_blocks_, load_);
      }
      Status st = cuda_error(cudaGetLastError(), "host_copy_kernel launch (host tier load)");
      if (!st.is_ok()) return retire(s, st);
      load_seq_[set] = seq;  // only a load that was enqueued is waited for
      st = next_ticket(load_, &t);
      if (!st.is_ok()) return retire(s, st);
      s->ticket = t;
    } else if (load_path_ == CopyPath::kCopyEngine || n == 0) {
      for (uint32_t grp = 0; grp < groups_; ++grp) {
        runs_.clear();
        for (uint32_t l = grp * group_; l < std::min(g_.layers, (grp + 1) * group_); ++l) {
          add_runs(&runs_, device_pages, host_pages, n, l, false);
        }
        KVP_CUDA(runs_.enqueue(load_), "cudaMemcpyBatchAsync (host tier load)");
        KVP_CUDA(cudaEventRecord(layer_done_[set][grp], load_), "cudaEventRecord (host tier layer done)");
      }
      KVPOOL_RETURN_IF_ERROR(next_ticket(load_, &t));
    } else {
      Staging* s = nullptr;
      KVPOOL_RETURN_IF_ERROR(stage(host_pages, device_pages, n, &s));
      if (n > load_ids_.pages) {  // the graphs read the id buffer: a new one means new graphs
        KVPOOL_RETURN_IF_ERROR(grow_ids(&load_ids_, n));
        KVPOOL_RETURN_IF_ERROR(capture_load_graphs());
      }
      Status st = upload_ids(&load_ids_, s, n, load_, "load");
      if (st.is_ok()) st = cuda_error(cudaGraphLaunch(graphs_[set], load_), "cudaGraphLaunch (host tier load)");
      if (st.is_ok()) st = next_ticket(load_, &t);
      if (!st.is_ok()) return retire(s, st);
      s->ticket = t;
    }
    to_device_ += n * page_bytes_;
    *ticket = t;
    return Status::ok();
  }

  bool finished(uint64_t ticket) override {
    if (ticket == 0 || ticket > last_ticket_ || last_ticket_ - ticket >= kTickets) return true;
    if (!recorded(ticket)) return false;  // still with the enqueue thread
    const cudaError_t e = cudaEventQuery(tickets_[ticket % kTickets]);
    if (e == cudaErrorNotReady) return false;
    (void)cudaGetLastError();  // an error is reported by wait(); here the copy is over either way
    return true;
  }

  Status wait(uint64_t ticket) override {
    if (ticket == 0 || ticket > last_ticket_ || last_ticket_ - ticket >= kTickets) return Status::ok();
    wait_recorded(ticket);
    KVP_CUDA(cudaEventSynchronize(tickets_[ticket % kTickets]), "cudaEventSynchronize (host tier wait)");
    return enqueuer_error();
  }

  Status wait_layer(int set, uint32_t layer, void* stream) override {
    if (set < 0 || set >= kLoadSets || layer >= g_.layers) {
      return Status::invalid("wait_layer: set " + std::to_string(set) + " / layer " + std::to_string(layer) +
                             " out of range (" + std::to_string(kLoadSets) + " sets, " + std::to_string(g_.layers) +
                             " tiered layers)");
    }
    cudaStream_t st = stream != nullptr ? static_cast<cudaStream_t>(stream) : compute_;
    if (wait_value_ != nullptr) {
      // Cyclic >=: a flag still holding an older load's number does not pass, a later load's does
      // (that load ran after this one on the load stream). Never loaded: nothing to wait for.
      const unsigned seq = load_seq_[set];
      if (seq == 0) return Status::ok();
      const CUresult r = wait_value_(reinterpret_cast<CUstream>(st),
                                     reinterpret_cast<CUdeviceptr>(layer_flags_ + set * g_.layers + layer), seq,
                                     CU_STREAM_WAIT_VALUE_GEQ);
      if (r != CUDA_SUCCESS) {
        return Status::cuda("cuStreamWaitValue32 (host tier layer): CUresult " + std::to_string(static_cast<int>(r)));
      }
      return Status::ok();
    }
    return cuda_error(cudaStreamWaitEvent(st, layer_done_[set][layer / group_], 0),
                      "cudaStreamWaitEvent (host tier layer)");
  }

  uint64_t bytes_to_host() const override { return to_host_; }
  uint64_t bytes_to_device() const override { return to_device_; }

 private:
  // A pinned slot holding one call's ids until the copy to the device has run.
  struct Staging {
    int64_t* host = nullptr;
    const int64_t* device = nullptr;  // the same memory as the device addresses it
    size_t capacity = 0;  // int64 entries
    uint64_t ticket = 0;  // the call that used it last (0: never)
  };
  struct IdBuffer {
    int64_t* ptr = nullptr;  // [n, host pages, device pages]
    size_t pages = 0;
  };

  // io_backend "kernel": the kernel. "direct": per direction the path with the higher
  // bandwidth measured (docs/performance.md, stop 29): the copy engines for loads whose
  // every part moves at least kCopyEngineMinRun bytes per operation (whole pages of
  // layer_first or page_first_direct: 128 KiB for Llama's rows at page 64); the kernel for
  // backups (the engines were slower there) and for loads of single rows or head pieces
  // (page_first, page_head, small pages, padded device rows, per-page parts).
  CopyPath auto_path(bool backup) const {
    if (!options_.direct || backup) return CopyPath::kKernel;
    for (size_t p = 0; p < g_.parts.size(); ++p) {
      if (g_.page_run_bytes(p) < kCopyEngineMinRun) return CopyPath::kKernel;
    }
    return CopyPath::kCopyEngine;
  }

  // The kernel's strides, read off HostGeometry::offset(), and checked to be affine
  // at the far corner (a layout the kernel cannot express is refused here, not copied wrong).
  Status build_parts() {
    std::vector<PartCopy> parts(g_.parts.size());
    std::vector<uint64_t> bases;
    const uint64_t P = g_.page_size, L = g_.layers;
    uint8_t* data = pool_->data();
    page_bytes_ = 0;
    max_chunks_ = 1;
    for (size_t p = 0; p < g_.parts.size(); ++p) {
      const TierPart& tp = g_.parts[p];
      if (tp.device_base.size() != L || tp.item_bytes == 0) {
        return Status::invalid("host tier part " + std::to_string(p) + ": " + std::to_string(tp.device_base.size()) +
                               " device layers for " + std::to_string(L) + " tiered layers, " +
                               std::to_string(tp.item_bytes) + "-byte items");
      }
      PartCopy& pc = parts[p];
      pc.rows = tp.per_page ? 1 : static_cast<uint32_t>(P);
      pc.pieces = g_.pieces(p);
      const uint64_t piece = g_.piece_bytes(p);
      const uint64_t o0 = g_.offset(p, 0, 0, 0);
      pc.host_page = (tp.per_page ? g_.offset(p, 1, 0, 0) : g_.offset(p, P, 0, 0)) - o0;
      pc.host_layer = L > 1 ? g_.offset(p, 0, 1, 0) - o0 : 0;
      pc.host_row = pc.rows > 1 ? g_.offset(p, 1, 0, 0) - o0 : 0;
      pc.host_piece = pc.pieces > 1 ? g_.offset(p, 0, 0, 1) - o0 : 0;
      const uint64_t last_page = g_.pages - 1, last_row = pc.rows - 1;
      const uint64_t far = g_.offset(p, tp.per_page ? last_page : last_page * P + last_row, g_.layers - 1, pc.pieces - 1);
      if (far != o0 + last_page * pc.host_page + (L - 1) * pc.host_layer + last_row * pc.host_row +
                     (pc.pieces - 1) * pc.host_piece) {
        return Status::internal(std::string("host layout ") + host_layout_name(g_.layout) + " is not affine for part " +
                                std::to_string(p));
      }
      pc.host = data + o0;
      pc.dev_row = tp.device_stride;
      pc.dev_page = tp.per_page ? tp.device_stride : tp.device_stride * P;
      pc.dev_piece = piece;
      uint64_t align = piece | tp.device_stride | reinterpret_cast<uintptr_t>(pc.host) | pc.host_page | pc.host_layer |
                       pc.host_row | pc.host_piece;
      for (uint8_t* b : tp.device_base) {
        if (b == nullptr) return Status::invalid("host tier part " + std::to_string(p) + ": a NULL device layer");
        align |= reinterpret_cast<uintptr_t>(b);
      }
      pc.width = widest_access(align);
      pc.units = static_cast<uint32_t>(piece / pc.width);
      pc.units_shift = (pc.units & (pc.units - 1)) == 0 ? __builtin_ctz(pc.units) : -1;
      const uint64_t item_units = static_cast<uint64_t>(pc.rows) * pc.pieces * pc.units;
      if (item_units > UINT32_MAX / 2) return Status::invalid("host tier page of one layer too large");
      pc.item_units = static_cast<uint32_t>(item_units);
      pc.item_shift = (pc.item_units & (pc.item_units - 1)) == 0 ? __builtin_ctz(pc.item_units) : -1;
      pc.chunks = (pc.item_units + cudak::chunk_units(unroll_) - 1) / cudak::chunk_units(unroll_);
      // Small items (a token's row at page size 1) go several to a piece: measured ~4x the
      // load bandwidth of one row per piece for 1-2 KiB rows (docs/performance.md).
      pc.pages_per_piece = pc.chunks == 1 ? std::max<uint32_t>(1, cudak::chunk_units(unroll_) / pc.item_units) : 1;
      max_chunks_ = std::max<uint64_t>(max_chunks_, pc.chunks);
      page_bytes_ += static_cast<uint64_t>(pc.rows) * tp.item_bytes * L;
      for (uint8_t* b : tp.device_base) bases.push_back(reinterpret_cast<uintptr_t>(b));
    }
    KVP_CUDA(cudaMalloc(&bases_dev_, bases.size() * sizeof(uint64_t)), "cudaMalloc (host tier layer table)");
    KVP_CUDA(cudaMemcpy(bases_dev_, bases.data(), bases.size() * sizeof(uint64_t), cudaMemcpyHostToDevice),
             "cudaMemcpy (host tier layer table)");
    for (size_t p = 0; p < parts.size(); ++p) parts[p].dev_base = bases_dev_ + p * L;
    KVP_CUDA(cudaMalloc(&parts_dev_, parts.size() * sizeof(PartCopy)), "cudaMalloc (host tier parts)");
    KVP_CUDA(cudaMemcpy(parts_dev_, parts.data(), parts.size() * sizeof(PartCopy), cudaMemcpyHostToDevice),
             "cudaMemcpy (host tier parts)");
    parts_ = std::move(parts);
    return Status::ok();
  }

  Status check_pages(const int64_t* device_pages, const int64_t* host_pages, size_t n, const uint64_t* ticket,
                     const char* what) const {
    if (ticket == nullptr) return Status::invalid(std::string(what) + ": ticket is NULL");
    if (n > 0 && (device_pages == nullptr || host_pages == nullptr)) {
      return Status::invalid(std::string(what) + ": NULL page list");
    }
    const int64_t dev_limit = static_cast<int64_t>(device_pages_);
    const int64_t host_limit = static_cast<int64_t>(g_.pages);
    for (size_t i = 0; i < n; ++i) {
      if (device_pages[i] < 0 || device_pages[i] >= dev_limit) {
        return Status::invalid(std::string(what) + ": device page " + std::to_string(device_pages[i]) + " (entry " +
                               std::to_string(i) + ") is not in [0, " + std::to_string(dev_limit) + ")");
      }
      if (host_pages[i] < 0 || host_pages[i] >= host_limit) {
        return Status::invalid(std::string(what) + ": host page " + std::to_string(host_pages[i]) + " (entry " +
                               std::to_string(i) + ") is not in [0, " + std::to_string(host_limit) + ")");
      }
    }
    return Status::ok();
  }

  // `stream` starts after everything enqueued so far on the compute stream (the KV writes).
  Status follow_compute(cudaStream_t stream, const char* what) {
    cudaError_t e = cudaEventRecord(compute_done_, compute_);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(stream, compute_done_, 0);
    return cuda_error(e, (std::string("cudaEventRecord/cudaStreamWaitEvent (host tier ") + what + ")").c_str());
  }

  // A free pinned slot (its last call's ids have reached the device), grown to fit, or
  // a new slot when every slot is still in flight: the host never waits here.
  Status stage(const int64_t* host_pages, const int64_t* device_pages, size_t n, Staging** out) {
    const size_t need = 1 + 2 * n;
    Staging* s = nullptr;
    for (size_t k = 0; k < staging_.size() && s == nullptr; ++k) {
      Staging& c = staging_[(staging_next_ + k) % staging_.size()];
      if (finished(c.ticket)) s = &c;
    }
    if (s == nullptr) {
      if (staging_.size() == staging_.capacity()) staging_.reserve(staging_.size() * 2 + 4);
      staging_.emplace_back();  // pointers into staging_ are not kept across calls
      s = &staging_.back();
    }
    staging_next_ = static_cast<size_t>(s - staging_.data() + 1) % staging_.size();
    if (s->capacity < need) {
      const size_t capacity = std::max(need, std::max<size_t>(2 * s->capacity, 1 + 2 * kInitialIdPages));
      int64_t* host = nullptr;
      KVP_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), capacity * sizeof(int64_t),
                             cudaHostAllocMapped | cudaHostAllocPortable),
               "cudaHostAlloc (host tier staging)");
      void* device = nullptr;
      const cudaError_t e = cudaHostGetDevicePointer(&device, host, 0);
      if (e != cudaSuccess) {
        cudaFreeHost(host);  // never used by the device: no wait
        return cuda_error(e, "cudaHostGetDevicePointer (host tier staging)");
      }
      s->device = static_cast<const int64_t*>(device);
      // cudaFreeHost would wait for the whole device: the old slot is freed with the transfer.
      if (s->host != nullptr) retired_host_.push_back(s->host);
      s->host = host;
      s->capacity = capacity;
    }
    s->host[0] = static_cast<int64_t>(n);
    std::memcpy(s->host + 1, host_pages, n * sizeof(int64_t));
    std::memcpy(s->host + 1 + n, device_pages, n * sizeof(int64_t));
    *out = s;
    return Status::ok();
  }

  // A call failed after the device may have started reading slot `s`, and no ticket
  // guards it: the slot's memory is set aside (freed with the transfer), the slot starts empty.
  Status retire(Staging* s, Status failure) {
    retired_host_.push_back(s->host);
    *s = Staging{};
    return failure;
  }

  Status grow_ids(IdBuffer* b, size_t pages) {
    if (pages <= b->pages && b->ptr != nullptr) return Status::ok();
    const size_t grown = std::max(pages, 2 * b->pages);
    int64_t* p = nullptr;
    KVP_CUDA(cudaMalloc(reinterpret_cast<void**>(&p), (1 + 2 * grown) * sizeof(int64_t)), "cudaMalloc (host tier ids)");
    // Kernels still queued may read the old buffer: it is freed with the transfer
    // (cudaFree would also wait for the whole device).
    if (b->ptr != nullptr) retired_.push_back(b->ptr);
    b->ptr = p;
    b->pages = grown;
    return Status::ok();
  }

  Status upload_ids(IdBuffer* b, Staging* s, size_t n, cudaStream_t stream, const char* what) {
    KVPOOL_RETURN_IF_ERROR(grow_ids(b, n));
    return cuda_error(cudaMemcpyAsync(b->ptr, s->host, (1 + 2 * n) * sizeof(int64_t), cudaMemcpyHostToDevice, stream),
                      (std::string("cudaMemcpyAsync (host tier ") + what + " ids)").c_str());
  }

  // One graph per load set: per group of tiered layers the kernel, then the set's event of
  // the group. The grid is fixed (n is read on the device), so a load of any size replays it.
  Status capture_load_graphs() {
    for (int set = 0; set < kLoadSets; ++set) {
      if (graphs_[set] != nullptr) {  // a launch of it may still run: destroyed with the transfer
        retired_graphs_.push_back(graphs_[set]);
        graphs_[set] = nullptr;
      }
      KVP_CUDA(cudaStreamBeginCapture(load_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture (host tier)");
      cudaError_t e = cudaSuccess;
      for (uint32_t grp = 0; grp < groups_ && e == cudaSuccess; ++grp) {
        const uint32_t first = grp * group_, count = std::min(g_.layers - first, group_);
        CopyArgs a{parts_dev_, load_ids_.ptr, first, count, 0, nullptr, nullptr, nullptr, 0, 0};
        launch_copy(a, 0, static_cast<uint64_t>(sms_) * 4, load_);
        e = cudaGetLastError();
        if (e == cudaSuccess) e = cudaEventRecordWithFlags(layer_done_[set][grp], load_, cudaEventRecordExternal);
      }
      cudaGraph_t graph = nullptr;
      const cudaError_t end = cudaStreamEndCapture(load_, &graph);
      if (e == cudaSuccess) e = end;
      if (e == cudaSuccess) e = cudaGraphInstantiate(&graphs_[set], graph, 0);
      if (graph != nullptr) cudaGraphDestroy(graph);
      KVP_CUDA(e, "capturing the host tier load graph");
    }
    return Status::ok();
  }

  // The kernel's work pieces of one tiered layer of an n-page copy, every part.
  unsigned long long pieces_per_layer(size_t n) const {
    unsigned long long pieces = 0;
    for (const PartCopy& pc : parts_) pieces += (n + pc.pages_per_piece - 1) / pc.pages_per_piece * pc.chunks;
    return pieces;
  }

  // Enqueues the copy kernel over `items` (page, layer) items on at most `cap` blocks per
  // part; 0 items: `cap` blocks for any n (the load graphs, which read n on the device).
  void launch_copy(const CopyArgs& a, uint64_t items, uint64_t cap, cudaStream_t stream) {
    cap = std::max<uint64_t>(cap, 1);
    const unsigned blocks = static_cast<unsigned>(items == 0 ? cap : std::min(items * max_chunks_, cap));
    kernel_<<<dim3(blocks, static_cast<unsigned>(g_.parts.size())), cudak::kCopyThreads, 0, stream>>>(a);
  }

  // The copy engines' pieces of one tiered layer, into `runs` (which merges them).
  void add_runs(CopyRuns* runs, const int64_t* device_pages, const int64_t* host_pages, size_t n, uint32_t l,
                bool to_host) const {
    for (size_t p = 0; p < parts_.size(); ++p) {
      const PartCopy& pc = parts_[p];
      const TierPart& tp = g_.parts[p];
      const uint64_t piece = g_.piece_bytes(p);
      for (size_t i = 0; i < n; ++i) {
        uint8_t* dev = tp.device_base[l] + static_cast<uint64_t>(device_pages[i]) * pc.dev_page;
        uint8_t* host = pc.host + static_cast<uint64_t>(host_pages[i]) * pc.host_page + l * pc.host_layer;
        for (uint32_t r = 0; r < pc.rows; ++r) {
          for (uint32_t h = 0; h < pc.pieces; ++h) {
            uint8_t* d = dev + r * pc.dev_row + h * pc.dev_piece;
            uint8_t* hst = host + r * pc.host_row + h * pc.host_piece;
            runs->add(to_host ? hst : d, to_host ? d : hst, piece);
          }
        }
      }
    }
  }

  // A copy-engine transfer handed to the enqueue thread (the page ids are copied).
  struct CopyJob final : util::JobThread::Job {
    CudaTransfer* owner = nullptr;
    int set = -1;  // the load set; -1: a backup
    unsigned seq = 0;  // the load's number, written to the set's layer flags
    uint64_t ticket = 0;
    std::vector<int64_t> device_pages, host_pages;
    void run() override { owner->enqueue_job(*this); }
  };

  Status start_enqueuer() {
    try {
      enqueuer_.reset(new util::JobThread);
    } catch (const std::exception& e) {
      return Status::internal(std::string("host tier: cannot start the copy-engine enqueue thread: ") + e.what());
    }
    follow_.assign(kTickets, nullptr);
    for (cudaEvent_t& e : follow_) KVP_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return Status::ok();
  }

  // The first failure of the enqueue thread's calls (sticky: the copies after it may not
  // have been made), or OK.
  Status enqueuer_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    return enqueuer_error_;
  }

  unsigned next_seq(int set) const { return load_seq_[set] == UINT32_MAX ? 1 : load_seq_[set] + 1; }  // 0: never

  // Has the event of `ticket` been recorded (by the call, or by the enqueue thread)?
  bool recorded(uint64_t ticket) const {
    return recorded_[ticket % kTickets].load(std::memory_order_acquire) == ticket;
  }
  void wait_recorded(uint64_t ticket) {
    if (enqueuer_ != nullptr && !recorded(ticket)) enqueuer_->wait_until([&] { return recorded(ticket); });
  }

  // Gives the enqueue thread a copy of the ids of ticket `*out` (set -1: a backup, else
  // the load set and its number). Nothing is changed unless this returns OK.
  Status hand_over(const int64_t* device_pages, const int64_t* host_pages, size_t n, int set, unsigned seq,
                   uint64_t* out) {
    const uint64_t t = last_ticket_ + 1;
    KVPOOL_RETURN_IF_ERROR(free_ticket_slot(t));
    CopyJob* job = nullptr;
    try {
      for (auto& j : jobs_) {
        if (j->done()) {
          job = j.get();
          break;
        }
      }
      if (job == nullptr) {
        jobs_.emplace_back(new CopyJob);
        job = jobs_.back().get();
      }
      job->device_pages.assign(device_pages, device_pages + n);
      job->host_pages.assign(host_pages, host_pages + n);
    } catch (const std::bad_alloc&) {
      return Status::out_of_memory("host tier: no memory for a copy-engine job of " + std::to_string(n) + " pages");
    }
    job->owner = this;
    job->set = set;
    job->seq = seq;
    job->ticket = t;
    // The copies follow the compute stream's work enqueued before this call: an event
    // per ticket, so that a later call's record cannot move the point the thread waits for.
    KVP_CUDA(cudaEventRecord(follow_[t % kTickets], compute_), "cudaEventRecord (host tier copy-engine job)");
    try {
      enqueuer_->submit(job);
    } catch (const std::bad_alloc&) {
      return Status::out_of_memory("host tier: no memory to queue a copy-engine job");
    }
    last_ticket_ = t;
    *out = t;
    return Status::ok();
  }

  // On the enqueue thread: the job's stream waits for its compute event, then per layer
  // group the copies (and, for a load, the group's layer flags), then the ticket's event.
  // A failure (or no memory for the operations' arrays) is kept for the calls to report;
  // the flags and the ticket are still written, so that no stream or host waits forever.
  void enqueue_job(const CopyJob& job) {
    const bool backup = job.set < 0;
    cudaStream_t stream = backup ? write_ : load_;
    const size_t n = job.device_pages.size();
    cudaError_t e = cudaSetDevice(device_);  // the thread's current device (cheap once set)
    const char* what = "cudaSetDevice (host tier copy-engine job)";
    if (e == cudaSuccess) {
      e = cudaStreamWaitEvent(stream, follow_[job.ticket % kTickets], 0);
      what = "cudaStreamWaitEvent (host tier copy-engine job)";
    }
    bool no_memory = false;  // for the operations' arrays (a throw here would end the process)
    const uint32_t group = backup ? g_.layers : group_;
    for (uint32_t first = 0; first < g_.layers; first += group) {
      const uint32_t end = std::min(g_.layers, first + group);
      if (e == cudaSuccess && !no_memory) {
        try {
          job_runs_.clear();
          for (uint32_t l = first; l < end; ++l) {
            add_runs(&job_runs_, job.device_pages.data(), job.host_pages.data(), n, l, backup);
          }
          e = job_runs_.enqueue(stream);
          what = "cudaMemcpyBatchAsync (host tier copy engines)";
        } catch (const std::bad_alloc&) {
          no_memory = true;
        }
      }
      for (uint32_t l = first; !backup && l < end; ++l) {
        const CUresult r = write_value_(reinterpret_cast<CUstream>(stream),
                                        reinterpret_cast<CUdeviceptr>(layer_flags_ + job.set * g_.layers + l), job.seq,
                                        CU_STREAM_WRITE_VALUE_DEFAULT);
        if (r != CUDA_SUCCESS && e == cudaSuccess) {
          e = cudaErrorUnknown;
          what = "cuStreamWriteValue32 (host tier layer flag)";
        }
      }
    }
    const cudaError_t recorded_event = cudaEventRecord(tickets_[job.ticket % kTickets], stream);
    if (e == cudaSuccess && recorded_event != cudaSuccess) {
      e = recorded_event;
      what = "cudaEventRecord (host tier copy-engine ticket)";
    }
    if (e != cudaSuccess || no_memory) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (enqueuer_error_.is_ok()) {
        const std::string ticket = ", ticket " + std::to_string(job.ticket);
        enqueuer_error_ = e != cudaSuccess
                              ? cuda_error(e, (std::string(what) + ticket).c_str())
                              : Status::out_of_memory("host tier copy engines: no memory for the DMA operations" + ticket);
      }
    }
    recorded_[job.ticket % kTickets].store(job.ticket, std::memory_order_release);
  }

  // Before ticket t reuses its slot's events: the ticket kTickets before it must be over,
  // so that "older tickets are finished" stays true (waits only with kTickets copies in flight).
  Status free_ticket_slot(uint64_t t) {
    if (t <= kTickets) return Status::ok();
    const uint64_t old = t - kTickets;
    wait_recorded(old);
    cudaEvent_t e = tickets_[t % kTickets];
    if (cudaEventQuery(e) == cudaErrorNotReady) {
      KVP_CUDA(cudaEventSynchronize(e), "cudaEventSynchronize (host tier ticket reuse)");
    }
    return Status::ok();
  }

  // Records the next ticket's event on `stream`.
  Status next_ticket(cudaStream_t stream, uint64_t* out) {
    const uint64_t t = last_ticket_ + 1;
    KVPOOL_RETURN_IF_ERROR(free_ticket_slot(t));
    KVP_CUDA(cudaEventRecord(tickets_[t % kTickets], stream), "cudaEventRecord (host tier ticket)");
    recorded_[t % kTickets].store(t, std::memory_order_release);
    last_ticket_ = t;
    *out = t;
    return Status::ok();
  }

  const HostPool* pool_;
  const HostGeometry& g_;
  int device_;
  CudaTransferOptions options_;
  uint64_t device_pages_ = 0;  // device page ids are below this (the geometry's device rows / P)
  CopyPath backup_path_ = CopyPath::kKernel, load_path_ = CopyPath::kKernel;
  uint32_t group_ = 1, groups_ = 1;  // tiered layers per load launch / layer-done event, and their count
  int sms_ = 1;
  uint64_t resident_ = 1;  // copy kernel blocks resident at once on the device
  uint64_t load_blocks_ = 1;  // blocks per part of a kernel load that marks layers
  uint32_t unroll_ = cudak::kCopyUnroll;
  CopyKernel kernel_ = nullptr;
  cudaStream_t compute_ = nullptr;  // the legacy default stream until set_compute_stream
  cudaStream_t write_ = nullptr, load_ = nullptr;
  cudaEvent_t compute_done_ = nullptr;
  std::vector<cudaEvent_t> tickets_;
  std::vector<cudaEvent_t> layer_done_[kLoadSets];
  cudaGraphExec_t graphs_[kLoadSets] = {};
  std::vector<PartCopy> parts_;  // host copy of parts_dev_ (the copy-engine path's runs)
  PartCopy* parts_dev_ = nullptr;
  uint64_t* bases_dev_ = nullptr;
  uint64_t max_chunks_ = 1;  // host_copy_kernel work pieces per item, largest part
  // The flag path (stream memory operations): cuStreamWaitValue32 (and the copy engines'
  // cuStreamWriteValue32), per tiered layer the
  // count of finished work pieces (then the kernel's sweep counters), per set and layer the
  // flag, per set the last load's number.
  StreamValue32 wait_value_ = nullptr;
  StreamValue32 write_value_ = nullptr;
  unsigned long long* layer_done_dev_ = nullptr;
  unsigned* layer_flags_ = nullptr;
  unsigned load_seq_[kLoadSets] = {};
  uint64_t page_bytes_ = 0;  // bytes of one page, all layers and parts
  IdBuffer load_ids_;  // what the load graphs read (the event path)
  std::vector<Staging> staging_;
  size_t staging_next_ = 0;
  std::vector<void*> retired_;       // outgrown device id buffers
  std::vector<void*> retired_host_;  // outgrown staging slots
  std::vector<cudaGraphExec_t> retired_graphs_;  // load graphs of an outgrown id buffer
  CopyRuns runs_;  // the copy engines' operations of a call (the event path)
  uint64_t last_ticket_ = 0;
  // Per ticket slot, the ticket whose event was recorded there last: the enqueue thread
  // records its jobs' tickets after the call has returned.
  std::unique_ptr<std::atomic<uint64_t>[]> recorded_{new std::atomic<uint64_t>[kTickets]()};
  // The copy-engine jobs (copy_runs.hpp, util/job_thread.hpp): per ticket slot the compute
  // stream's event the job follows, the jobs (reused once run), the thread's operations,
  // and its first failure.
  std::vector<cudaEvent_t> follow_;
  std::vector<std::unique_ptr<CopyJob>> jobs_;
  CopyRuns job_runs_;
  std::mutex error_mutex_;
  Status enqueuer_error_ = Status::ok();
  std::unique_ptr<util::JobThread> enqueuer_;  // last: its thread uses the members above
  uint64_t to_host_ = 0, to_device_ = 0;
};

}  // namespace

Status make_cuda_transfer(const HostPool* pool, int device, const CudaTransferOptions& options,
                          std::unique_ptr<HostTransfer>* out) {
  if (pool == nullptr || out == nullptr) return Status::invalid("make_cuda_transfer: NULL pool or output");
  std::unique_ptr<CudaTransfer> t(new CudaTransfer(pool, device, options));
  KVPOOL_RETURN_IF_ERROR(t->init());
  *out = std::move(t);
  return Status::ok();
}

}  // namespace kvp::host
