// Device-side KV row jobs behind device.h's set/get/move calls. KvBuffers
// validates everything the host can see and describes the work here as plain
// structs; cuda/kv_kernels.cu runs each job as one kernel launch on the
// caller's stream. Slot ranges live in device memory, so the kernels check
// them and raise a pool fault instead of writing out of bounds.
#pragma once

#include <cstdint>

#include "util/status.hpp"

namespace kvp::pool::dev {

// Caller-side or stored element formats a kernel converts between. kRaw copies
// bytes unchanged (the caller's data has the stored format).
enum class Codec : int32_t { kRaw, kF32, kF16, kBF16, kE4M3, kE5M2, kFP4 };

// Where a kernel reports a device-side fault (see backend/device_fault.hpp).
struct FaultSink {
  void* record = nullptr;     // device FaultRecord
  int* host_flag = nullptr;   // mapped pinned flag, device view
  int32_t op = 0;             // the operation code recorded with a fault
};

// One caller array <-> one part of the stored rows. Caller rows are dense:
// row i starts at `user + i * elements * sizeof(user format)` (raw: `i * row_bytes`).
struct RowPart {
  void* user = nullptr;           // device array of the caller
  uint8_t* values = nullptr;      // stored buffer base (slot-indexed rows)
  uint64_t value_stride = 0;      // bytes per stored row
  uint64_t value_offset = 0;      // bytes into the stored row where this part starts
  uint8_t* scales = nullptr;      // fp4 block scales (slot-indexed rows), else null
  uint64_t scale_stride = 0;
  uint64_t scale_offset = 0;
  uint64_t elements = 0;          // values of this part per row (raw: unused)
  uint64_t row_bytes = 0;         // raw: bytes of this part per row
  float divisor = 1.0f;           // encode: each value is divided by it (skipped when 1)
};

// Rows `slots[0..n)` of up to two parts (K and V, or nope and rope).
struct RowJob {
  const int64_t* slots = nullptr;  // device
  uint64_t n = 0;
  uint64_t slot_limit = 0;         // valid slots are [0, slot_limit)
  Codec user = Codec::kRaw;        // caller format (kRaw: same as stored)
  Codec stored = Codec::kBF16;
  RowPart part[2];
  int parts = 1;
};

// nsa fp8 packed rows: [lora fp8][lora/128 f32 scales][rope bf16].
struct NsaJob {
  const int64_t* slots = nullptr;
  uint64_t n = 0;
  uint64_t slot_limit = 0;
  Codec user = Codec::kBF16;
  const void* nope = nullptr;      // encode: caller nope rows
  const void* rope = nullptr;      // encode: caller rope rows
  void* out = nullptr;             // decode: caller rows of lora + rope values
  uint8_t* rows = nullptr;
  uint64_t row_stride = 0;
  uint64_t lora = 0, rope_dim = 0;
};

// One slot-indexed buffer that move_kv relocates rows in (rows are dense: the stride is row_bytes).
struct MoveBuffer {
  uint8_t* base;
  uint64_t row_bytes;
  uint64_t scratch_row;     // row_bytes rounded up to 16, so every staged row starts 16-byte aligned
  uint64_t scratch_prefix;  // sum of scratch_row of the buffers before it: its staged rows sit at scratch + n * prefix
  uint32_t word;            // bytes per access: the largest of 16, 8, 4, 2, 1 dividing base and row_bytes
};

// Per-slot marks of move_kv (device memory, zero-filled). The mark kernel sets them
// and the write-back kernel of the same call clears the ones it set, so each call
// starts from zeros without any host state (a captured graph may replay the launches).
struct MoveMarks {
  uint32_t* writer = nullptr;  // slot -> 1 + the largest pair index writing the slot (0: none)
  uint32_t* read = nullptr;    // slot -> 1 when some pair reads the slot
  uint32_t* staged = nullptr;  // one word: 1 when some pair of the call was staged
};

// Moves `n` rows of each of `count` buffers (device table) from `src` to `dst` slots with
// the CPU path's result: every source row is read before any destination row is written,
// and a destination named twice keeps the last pair's row. Three launches, whatever the
// pairs: mark (validates the slots, marks writers and readers), copy (rows whose
// destination nobody reads go directly, the others into `scratch`), write-back (the
// staged rows, then clears the marks).
struct MoveJob {
  const int64_t* dst = nullptr;
  const int64_t* src = nullptr;
  uint64_t n = 0;                       // < 2^32 - 1 (pair indices + 1 are 32-bit marks)
  uint64_t slot_limit = 0;
  const MoveBuffer* buffers = nullptr;  // device
  uint64_t count = 0;
  uint8_t* scratch = nullptr;           // device, n * sum(scratch_row) staged row bytes
  uint8_t* routes = nullptr;            // device, n bytes: each pair's route, from the copy kernel
  MoveMarks marks;
};

// Each returns a CUDA launch error as a status; device-side problems fault the pool.
Status encode_rows(const RowJob& job, void* stream, const FaultSink& fault);
Status decode_rows(const RowJob& job, void* stream, const FaultSink& fault);
Status encode_nsa(const NsaJob& job, void* stream, const FaultSink& fault);
Status decode_nsa(const NsaJob& job, void* stream, const FaultSink& fault);
Status move_rows(const MoveJob& job, void* stream, const FaultSink& fault);

}  // namespace kvp::pool::dev
