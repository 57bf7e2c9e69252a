// Device-side faults of one CUDA pool (device.h, "Errors found on the device").
//
// A kernel that finds bad input it cannot report through a return value (a
// page freed twice, device lengths that differ from the host ones, a slot out
// of range) records the first problem in a small record in device memory and
// sets a flag in mapped pinned host memory. The record is what every later
// kernel checks first (an L2 hit, no PCIe traffic): a faulted pool does
// nothing more. The flag is what the host checks at the start of every call
// (a plain load, no synchronization). kvpool_synchronize() waits for the
// stream and turns the record into KVPOOL_ERR_DEVICE_FAULT with a message.
//
// Kernels raise faults through cuda/device_fault.cuh (kvp_raise()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/status.hpp"

namespace kvp::backend {

// What went wrong. Values are stored on the device; append only.
enum FaultCode : int32_t {
  kFaultNone = 0,
  kFaultOutOfRange = 1,       // value outside [lo, hi): detail = hi
  kFaultNotAllocated = 2,     // page/slot freed that is not allocated (double free): value = the id
  kFaultDuplicate = 3,        // the same id twice in one call: value = the id
  kFaultLengthMismatch = 4,   // a device sum differs from the host one: value = device, detail = host
  kFaultBadLastLoc = 5,       // last_loc does not end the prefix: value = last_loc, detail = prefix length
  kFaultBadLength = 6,        // a negative length or seq < prefix: value = seq, detail = prefix
  kFaultBadRow = 7,           // request-table row out of range: value = row, detail = rows
  kFaultBadColumns = 8,       // columns past max_context_len: value = length, detail = max_context_len
  kFaultCorrupt = 9,          // free-list page already owned (internal): value = page
  kFaultReservedId = 10,      // id 0 (reserved padding page/slot): value = 0
  kFaultSlotOutOfRange = 11,  // a KV slot outside [0, slot limit): value = slot, detail = limit
  kFaultPastWatermark = 12,   // a graph decode step needs more pages than are free: value = need, detail = free
};

// Which call enqueued the faulting kernel. Append only.
enum FaultOp : int32_t {
  kOpNone = 0,
  kOpExtend = 1,      // kvalloc_extend_async
  kOpDecode = 2,      // kvalloc_decode_async
  kOpAlloc = 3,       // kvalloc_alloc_async
  kOpFreePages = 4,   // kvalloc_free_pages_async
  kOpMerge = 5,       // merge-and-sort of the deferred frees
  kOpWriteBatch = 6,  // kvreq_write_batch_async
  kOpLastLoc = 7,     // kvreq_last_loc_async
  kOpSetKv = 8,       // kvpool_set_kv_async
  kOpSetMlaKv = 9,    // kvpool_set_mla_kv_async
  kOpGetKv = 10,      // kvpool_get_kv_async
  kOpMoveKv = 11,     // kvpool_move_kv_async
  kOpHostCall = 12,   // a synchronous host-array call routed through the device engine
  kOpMambaCopy = 13,  // kvpool_mamba_copy_async
  kOpSeqWrite = 14,   // the request-table writes of a kvseq_* call
  kOpDecodeGraph = 15,  // kvalloc_decode_graph_async (a replayed decode step)
};

// The record in device memory. `code` is written first (atomicCAS from 0): the
// first fault wins and later ones are dropped.
struct FaultRecord {
  int32_t code;
  int32_t op;
  int64_t index;   // element index in the call's array (request, page, slot...), -1 if none
  int64_t value;   // the offending value
  int64_t detail;  // a second number the message needs (a bound, the host value...)
};

// "kvalloc_free_pages_async: element 3: page 17 is not allocated (freed twice, or never handed out)".
std::string describe_fault(const FaultRecord& r);
const char* fault_op_name(int32_t op);

// Owns the record (device memory) and the flag (mapped pinned host memory) of one pool.
class DeviceFault {
 public:
  // KVPOOL_ERR_UNSUPPORTED in builds without CUDA.
  static Status make(int device, std::unique_ptr<DeviceFault>* out);
  ~DeviceFault();
  DeviceFault(const DeviceFault&) = delete;
  DeviceFault& operator=(const DeviceFault&) = delete;

  // Device pointer of the record: pass it to kernels.
  FaultRecord* record() const { return record_; }
  // Device-visible pointer of the mapped host flag: pass it to kernels.
  int* host_flag() const { return device_flag_; }
  // True once a kernel raised a fault (a plain load of mapped host memory; no synchronization).
  bool raised() const { return *static_cast<volatile const int*>(host_flag_) != 0; }

  // KVPOOL_ERR_DEVICE_FAULT with the record's message when raised(), else OK.
  // Reads the record from the device (a small synchronous copy; only on the error path).
  Status status(const char* function) const;
  // cudaStreamSynchronize(stream), then a CUDA error, the fault, or OK.
  Status status_after_sync(void* stream) const;
  // Forgets the fault: zeroes the record and the flag after the device is idle.
  Status clear();

 private:
  DeviceFault() = default;
  [[maybe_unused]] int device_ = 0;  // used by the CUDA build (cuda/device_fault.cu) only
  FaultRecord* record_ = nullptr;  // device memory
  int* host_flag_ = nullptr;       // pinned, mapped
  int* device_flag_ = nullptr;     // the same flag as the device sees it
};

}  // namespace kvp::backend
