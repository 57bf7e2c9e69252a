// Recurrent-state slots of hybrid linear-attention models (SGLang's MambaPool)
// and the row-to-state mapping of the hybrid request table
// (HybridReqToTokenPool). States live in backend memory laid out as
// [mamba_layer][slot][state], slot 0 reserved; allocation zeroes a slot.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "alloc/id_allocator.hpp"
#include "backend/backend.hpp"
#include "mamba/mamba_device.hpp"
#include "util/status.hpp"

namespace kvp::mamba {

struct MambaShape {
  std::vector<int> layers;       // global ids of the mamba layers held, in order
  int64_t slots = 0;             // usable slots (slot 0 comes on top)
  uint64_t conv_bytes = 0;       // per slot and layer
  uint64_t ssm_bytes = 0;        // per slot and layer
  int64_t draft_tokens = 0;      // speculative intermediate buffers (0 = none)
  int64_t spec_slots = 0;        // rows of the intermediate buffers (running requests)
  bool ping_pong = false;        // extra_buffer strategy: two snapshot slots per request
};

class MambaPool {
 public:
  static Status make(backend::Backend* backend, const MambaShape& shape, int64_t request_rows,
                     std::unique_ptr<MambaPool>* out);

  const MambaShape& shape() const { return shape_; }
  alloc::IdAllocator& ids() { return slots_; }
  const alloc::IdAllocator& ids() const { return slots_; }
  // Index of a global layer among the mamba layers, or -1.
  int layer_index(int layer) const;

  Status alloc(int32_t* out, size_t n);
  // Slot ids only, not zeroed (the stream-ordered alloc zeroes them on the device).
  Status take(int32_t* out, size_t n);
  // The ids take(n) would hand out, without taking them (OUT_OF_MEMORY changes
  // nothing); commit_take(n) then takes exactly those. Lets a caller enqueue the
  // device work first, so that a failed launch leaves the free list untouched.
  Status peek(int32_t* out, size_t n);
  void commit_take(size_t n) { slots_.consume(n); }
  // INVALID_ARGUMENT unless `slot` is allocated.
  Status check_owned(int32_t slot, const char* what) const { return check_slot(slot, what); }
  // The state buffers as the device kernels see them (mamba/mamba_device.hpp).
  dev::States device_states() const;
  // Public free: refuses slots that a request row still holds.
  Status free_unattached(const int32_t* slots, size_t n);
  Status copy(int32_t src, int32_t dst);
  Status fork(int32_t src, int32_t* dst);
  Status write(int layer, int32_t slot, const void* conv, size_t conv_bytes, const void* ssm, size_t ssm_bytes);
  Status read(int layer, int32_t slot, void* conv, size_t conv_bytes, void* ssm, size_t ssm_bytes) const;

  // Hybrid request rows (the rows themselves belong to the RequestTable).
  Status check_reuse(const int32_t* reuse, size_t n, size_t* new_slots) const;
  Status attach(const int32_t* rows, const int32_t* reuse, size_t n, int32_t* slots_out);
  Status check_detach(const int32_t* rows, size_t n, bool free_state, int32_t keep) const;
  Status detach(const int32_t* rows, size_t n, bool free_state, int32_t keep);
  int32_t slot_of_row(int32_t row) const { return row_slot_[static_cast<size_t>(row)]; }
  // True if a request row maps to `slot` (as its state or a ping-pong slot).
  bool attached(int32_t slot) const;
  std::array<int32_t, 2> ping_pong_of_row(int32_t row) const { return ping_pong_[static_cast<size_t>(row)]; }

  const backend::DeviceMemory& conv_memory() const { return conv_; }
  const backend::DeviceMemory& ssm_memory() const { return ssm_; }
  const backend::DeviceMemory& intermediate_conv() const { return inter_conv_; }
  const backend::DeviceMemory& intermediate_ssm() const { return inter_ssm_; }
  uint64_t bytes() const { return conv_.bytes() + ssm_.bytes() + inter_conv_.bytes() + inter_ssm_.bytes(); }

  void clear();
  size_t check(std::string* report, size_t max_lines, const alloc::IdAllocator& rows) const;

 private:
  MambaPool(backend::Backend* backend, const MambaShape& shape, int64_t request_rows);
  Status check_slot(int32_t slot, const char* what) const;
  Status free(const int32_t* slots, size_t n);
  Status zero_slot(int64_t slot);
  char* conv_at(size_t layer, int64_t slot) const;
  char* ssm_at(size_t layer, int64_t slot) const;
  size_t layer_stride(size_t row_bytes) const;  // bytes between a slot's rows of two layers
  size_t slots_per_request() const { return shape_.ping_pong ? 3 : 1; }

  backend::Backend* backend_;
  MambaShape shape_;
  alloc::IdAllocator slots_;
  backend::DeviceMemory conv_, ssm_, inter_conv_, inter_ssm_;
  std::vector<int32_t> row_slot_;                   // -1 = none
  std::vector<std::array<int32_t, 2>> ping_pong_;   // -1 = none
  // Ping-pong slots of states kept past their row, by state slot ({-1, -1} = none). Sized at
  // creation, so that detach records a kept pair without allocating after a row changed.
  std::vector<std::array<int32_t, 2>> kept_;
  std::vector<int64_t> scratch_;
};

}  // namespace kvp::mamba
