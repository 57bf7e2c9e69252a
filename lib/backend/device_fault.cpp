// Messages for device-side fault records (the record itself is in cuda/device_fault.cu).
#include "backend/device_fault.hpp"

namespace kvp::backend {

const char* fault_op_name(int32_t op) {
  switch (op) {
    case kOpExtend: return "kvalloc_extend_async";
    case kOpDecode: return "kvalloc_decode_async";
    case kOpAlloc: return "kvalloc_alloc_async";
    case kOpFreePages: return "kvalloc_free_pages_async";
    case kOpMerge: return "merge-and-sort of the deferred frees";
    case kOpWriteBatch: return "kvreq_write_batch_async";
    case kOpLastLoc: return "kvreq_last_loc_async";
    case kOpSetKv: return "kvpool_set_kv_async";
    case kOpSetMlaKv: return "kvpool_set_mla_kv_async";
    case kOpGetKv: return "kvpool_get_kv_async";
    case kOpMoveKv: return "kvpool_move_kv_async";
    case kOpHostCall: return "a host-array allocator call";
    case kOpMambaCopy: return "kvpool_mamba_copy_async";
    case kOpSeqWrite: return "the request-table writes of a kvseq_* call";
    case kOpDecodeGraph: return "kvalloc_decode_graph_async (a replayed decode step)";
    default: return "an unknown device operation";
  }
}

std::string describe_fault(const FaultRecord& r) {
  const std::string v = std::to_string(r.value), d = std::to_string(r.detail);
  std::string what;
  switch (r.code) {
    case kFaultOutOfRange: what = "value " + v + " is out of range (limit " + d + ")"; break;
    case kFaultNotAllocated: what = "id " + v + " is not allocated (freed twice, or never handed out)"; break;
    case kFaultDuplicate: what = "id " + v + " is listed twice in one call"; break;
    case kFaultLengthMismatch:
      what = "the device arrays sum to " + v + " but the host arrays to " + d +
             " (the *_host lengths must equal the device ones)";
      break;
    case kFaultBadLastLoc:
      what = "last_loc " + v + " does not end a prefix of " + d +
             " tokens (out of range, not -1 for an empty prefix, or (last_loc + 1) % page_size != prefix % page_size)";
      break;
    case kFaultBadLength: what = "lengths (seq " + v + ", prefix " + d + ") are negative or decreasing"; break;
    case kFaultBadRow: what = "row " + v + " is out of range (rows 1.." + std::to_string(r.detail - 1) + ")"; break;
    case kFaultBadColumns: what = "length " + v + " exceeds max_context_len " + d; break;
    case kFaultCorrupt: what = "page " + v + " was in the free list but is owned (internal error)"; break;
    case kFaultReservedId: what = "id 0 is reserved and never handed out"; break;
    case kFaultSlotOutOfRange: what = "slot " + v + " is out of range [0, " + d + ")"; break;
    case kFaultPastWatermark:
      what = "the decode step needs " + v + " new pages but only " + d +
             " are free: the graph was replayed past its watermark (kvalloc_decode_watermark); nothing was allocated";
      break;
    default: what = "fault code " + std::to_string(r.code) + " (value " + v + ", detail " + d + ")"; break;
  }
  std::string where = r.index >= 0 ? "element " + std::to_string(r.index) + ": " : "";
  return std::string("device fault in ") + fault_op_name(r.op) + ": " + where + what +
         "; the pool does no device work until kvalloc_clear()";
}

}  // namespace kvp::backend
