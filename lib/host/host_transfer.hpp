// Copies between the device KV buffers and the host tier (SGLANG_SEMANTICS §1.17, §5.7).
//
// Work is given in whole pages: device page d is slots [d*P, d*P + P), host page h
// host tokens [h*P, h*P + P) (P = 1: a page is a token). A backup copies every
// tiered layer device -> host; a load copies host -> device layer by layer and marks
// each layer done in one of three rotating load sets (SGLang's LayerDoneCounter), so
// an engine's compute stream waits for layer l only.
//
// CPU pools copy with memcpy inside the call: every ticket is finished on return.
// CUDA pools enqueue a constant number of launches per call on the tier's write or
// load stream, ordered after the work already on the compute stream
// (set_compute_stream; default: the legacy default stream), and never synchronise
// except in wait(). A kernel load marks each layer done in device memory and
// wait_layer enqueues a stream wait on it (cuStreamWaitValue32); the copy engines, and
// the kernel where stream memory operations are missing, record an event per layer group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/backend.hpp"
#include "host/host_pool.hpp"
#include "util/status.hpp"

namespace kvp::host {

constexpr int kLoadSets = 3;

class HostTransfer {
 public:
  virtual ~HostTransfer() = default;
  // The stream whose KV writes a backup must follow and which loads are waited on by default.
  virtual Status set_compute_stream(void* stream) = 0;
  // device pages -> host pages, all tiered layers. *ticket identifies the copy.
  virtual Status backup(const int64_t* device_pages, const int64_t* host_pages, size_t n, uint64_t* ticket) = 0;
  // host pages -> device pages as load set `set` (0 .. kLoadSets-1), layer by layer.
  virtual Status load(const int64_t* host_pages, const int64_t* device_pages, size_t n, int set, uint64_t* ticket) = 0;
  // Non-blocking: has the copy of `ticket` completed? (Unknown or older tickets: true.)
  virtual bool finished(uint64_t ticket) = 0;
  // Blocks until the copy of `ticket` has completed.
  virtual Status wait(uint64_t ticket) = 0;
  // Makes `stream` (NULL: the compute stream) wait until tiered layer `layer` of the last
  // load of `set` has landed; nothing on the host blocks. CPU pools: nothing to wait for.
  // The wait is for the load enqueued last before this call: `stream` must not be capturing
  // a graph (a replay would wait for that load again, not for a later one).
  virtual Status wait_layer(int set, uint32_t layer, void* stream) = 0;
  // Bytes moved so far each way.
  virtual uint64_t bytes_to_host() const = 0;
  virtual uint64_t bytes_to_device() const = 0;
};

// memcpy between host-addressable device buffers (CPU pools) and the host pool. With
// `defer_completion` a copy is done in the call but reported finished only after a few
// finished() queries or a wait() (host_cache.defer_completion: tests of in-flight copies).
std::unique_ptr<HostTransfer> make_cpu_transfer(const HostPool* pool, bool defer_completion = false);

// How a CUDA transfer copies (make_cuda_transfer).
enum class CopyPath : int32_t {
  // io_backend "kernel": the copy kernel. "direct": per direction the path measured faster
  // (docs/performance.md): copy engines for loads whose operations move whole pages of at
  // least 64 KiB (layer_first / page_first_direct, dense rows), else the kernel.
  kAuto,
  kKernel,      // the copy kernel (SMs read/write pinned host memory through unified addressing)
  kCopyEngine,  // cudaMemcpyBatchAsync of the contiguous runs (the DMA engines; no SM time)
};

struct CudaTransferOptions {
  bool direct = false;        // host_cache.io_backend "direct" (page_first_direct requires it)
  CopyPath path = CopyPath::kAuto;  // tests and benchmarks force one path (both directions)
  // The event path only (copy engines, or layer_events): tiered layers per load launch and
  // per layer-done event (0: 1). Larger groups cost the host less per load (one graph node
  // pair per group) and the engine more latency before its first layer can start
  // (docs/performance.md, "Host tier transfers"). Kernel loads that mark layers in device
  // memory mark every layer, in one launch.
  uint32_t layer_group = 0;
  // Kernel loads through the event path (per layer group a graph node pair) even where
  // stream memory operations work: the fallback where they don't, forced for tests.
  bool layer_events = false;
  // Tuning of the copy kernel (0: the defaults; benchmarks and tests set them, see
  // docs/performance.md): blocks per part of a kernel load that marks layers in device
  // memory (at most as many as fit at once), and 16-byte loads in flight per thread, both
  // directions (4, 8 or 16; a block's work piece is 4 KiB per load).
  uint32_t load_blocks = 0;
  uint32_t copy_unroll = 0;
};

// CUDA pools (cuda/host_transfer.cu): the copy kernel for every layout, copy engines
// where faster. The pool's memory must be pinned (device-addressable). Calls are not
// thread-safe, and the compute stream must not be capturing a graph during a call.
// KVPOOL_ERR_UNSUPPORTED in builds without CUDA.
Status make_cuda_transfer(const HostPool* pool, int device, const CudaTransferOptions& options,
                          std::unique_ptr<HostTransfer>* out);

}  // namespace kvp::host
