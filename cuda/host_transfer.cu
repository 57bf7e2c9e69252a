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
// kernels by cudaMemcpyBatchAsync of the runs contiguous on both sides: faster for
// loads (a host read by the SMs fetches less per PCIe request than a DMA engine
// does), but the host pays per run. Measured: docs/performance.md.
#include <cuda.h>  // types and constants of cuStreamWaitValue32 only: no link to libcuda
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "host/host_transfer.hpp"
#include "host_copy.cuh"

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

using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// cuStreamWaitValue32 (the v2 memory operations, always on since CUDA 12.0), or NULL.
StreamWaitValue32 driver_wait_value32() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t e = cudaGetDriverEntryPoint("cuStreamWaitValue32", &fn, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<StreamWaitValue32>(fn);
}

// A run contiguous on both sides, for the copy engines.
struct Run {
  uint8_t* dst;
  const uint8_t* src;
  size_t bytes;
};

class CudaTransfer final : public HostTransfer {
 public:
  CudaTransfer(const HostPool* pool, int device, const CudaTransferOptions& o)
      : pool_(pool), g_(pool->geometry()), device_(device), options_(o) {}

  ~CudaTransfer() override {
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
    backup_path_ = load_path_ = options_.path;
    if (options_.path == CopyPath::kAuto) {
      backup_path_ = auto_path(g_.layout, options_.direct, true);
      load_path_ = auto_path(g_.layout, options_.direct, false);
    }
    group_ = options_.layer_group == 0 ? kDefaultLayerGroup : std::min(options_.layer_group, g_.layers);
    groups_ = (g_.layers + group_ - 1) / group_;
    KVP_CUDA(cudaSetDevice(device_), "cudaSetDevice (host tier)");
    KVP_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
    unroll_ = options_.copy_unroll == 0 ? cudak::kCopyUnroll : options_.copy_unroll;
    if (copy_kernel(unroll_, false) == nullptr) {
      return Status::invalid("copy_unroll " + std::to_string(unroll_) + ": 4, 8 or 16");
    }
    KVPOOL_RETURN_IF_ERROR(build_parts());  // the parts' pieces decide the kernel's build
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
    if (load_path_ == CopyPath::kKernel && !options_.layer_events) wait_value_ = driver_wait_value32();
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
    KVP_CUDA(cudaSetDevice(device_), "cudaSetDevice (host tier backup)");
    if (n == 0) return next_ticket(write_, ticket);  // nothing to copy, a ticket all the same
    KVPOOL_RETURN_IF_ERROR(follow_compute(write_, "backup"));
    uint64_t t = 0;
    if (backup_path_ == CopyPath::kCopyEngine) {
      runs_.clear();
      for (uint32_t l = 0; l < g_.layers; ++l) add_runs(device_pages, host_pages, n, l, true);
      KVPOOL_RETURN_IF_ERROR(copy_runs(write_, "cudaMemcpyBatchAsync (host tier backup)"));
      KVPOOL_RETURN_IF_ERROR(next_ticket(write_, &t));
    } else {
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
    KVP_CUDA(cudaSetDevice(device_), "cudaSetDevice (host tier load)");
    // Even an empty load marks every layer of the set done (after the compute stream's
    // work), so that a batch that waits on the set never waits on an older load.
    KVPOOL_RETURN_IF_ERROR(follow_compute(load_, "load"));
    uint64_t t = 0;
    if (wait_value_ != nullptr) {
      // One kernel, every layer; its blocks store seq to the set's layer flags.
      Staging* s = nullptr;
      KVPOOL_RETURN_IF_ERROR(stage(host_pages, device_pages, n, &s));
      const unsigned seq = load_seq_[set] == UINT32_MAX ? 1 : load_seq_[set] + 1;  // 0: never loaded
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
          add_runs(device_pages, host_pages, n, l, false);
        }
        KVPOOL_RETURN_IF_ERROR(copy_runs(load_, "cudaMemcpyBatchAsync (host tier load)"));
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
    const cudaError_t e = cudaEventQuery(tickets_[ticket % kTickets]);
    if (e == cudaErrorNotReady) return false;
    (void)cudaGetLastError();  // an error is reported by wait(); here the copy is over either way
    return true;
  }

  Status wait(uint64_t ticket) override {
    if (ticket == 0 || ticket > last_ticket_ || last_ticket_ - ticket >= kTickets) return Status::ok();
    return cuda_error(cudaEventSynchronize(tickets_[ticket % kTickets]), "cudaEventSynchronize (host tier wait)");
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

  // io_backend "kernel": the kernel. "direct": per layout and direction the path with the
  // higher bandwidth measured (docs/performance.md, "Host tier transfers"): the copy engines
  // for loads of layer_first and page_first_direct (one run per page and layer), the
  // kernel for backups (the engines were slower there) and for the layouts whose runs
  // are single rows or head pieces.
  static CopyPath auto_path(HostLayout layout, bool direct, bool backup) {
    if (!direct || backup) return CopyPath::kKernel;
    return layout == HostLayout::kLayerFirst || layout == HostLayout::kPageFirstDirect ? CopyPath::kCopyEngine
                                                                                       : CopyPath::kKernel;
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

  // The copy-engine runs of one tiered layer, merged where both sides continue.
  void add_runs(const int64_t* device_pages, const int64_t* host_pages, size_t n, uint32_t l, bool to_host) {
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
            uint8_t* dst = to_host ? hst : d;
            const uint8_t* src = to_host ? d : hst;
            if (!runs_.empty() && runs_.back().dst + runs_.back().bytes == dst &&
                runs_.back().src + runs_.back().bytes == src) {
              runs_.back().bytes += piece;
            } else {
              runs_.push_back(Run{dst, src, piece});
            }
          }
        }
      }
    }
  }

  Status copy_runs(cudaStream_t stream, const char* what) {
    if (runs_.empty()) return Status::ok();
    dsts_.resize(runs_.size());
    srcs_.resize(runs_.size());
    sizes_.resize(runs_.size());
    for (size_t k = 0; k < runs_.size(); ++k) {
      dsts_[k] = runs_[k].dst;
      srcs_[k] = runs_[k].src;
      sizes_[k] = runs_[k].bytes;
    }
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // the source is written by earlier work on the stream
    size_t attr_index = 0;
    return cuda_error(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(), runs_.size(), &attr,
                                           &attr_index, 1, stream),
                      what);
  }

  // Records the next ticket's event on `stream`. A ticket event is reused kTickets tickets
  // later; if that copy is still running then (kTickets copies in flight), wait for it so
  // that "older tickets are finished" stays true.
  Status next_ticket(cudaStream_t stream, uint64_t* out) {
    const uint64_t t = last_ticket_ + 1;
    cudaEvent_t e = tickets_[t % kTickets];
    if (t > kTickets && cudaEventQuery(e) == cudaErrorNotReady) {
      KVP_CUDA(cudaEventSynchronize(e), "cudaEventSynchronize (host tier ticket reuse)");
    }
    KVP_CUDA(cudaEventRecord(e, stream), "cudaEventRecord (host tier ticket)");
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
  // The flag path (stream memory operations): cuStreamWaitValue32, per tiered layer the
  // count of finished work pieces (then the kernel's sweep counters), per set and layer the
  // flag, per set the last load's number.
  StreamWaitValue32 wait_value_ = nullptr;
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
  std::vector<Run> runs_;
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
  uint64_t last_ticket_ = 0;
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
