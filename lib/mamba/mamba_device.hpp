// Device-side mamba state jobs behind device.h's kvpool_mamba_*_async calls:
// zeroing new slots and copying states slot to slot across every layer, one
// launch each (cuda/mamba_kernels.cu), on the caller's stream.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pool/kv_device.hpp"
#include "util/status.hpp"

namespace kvp::mamba::dev {

// The state buffers, laid out [layer][slot][state] with slot 0 reserved.
struct States {
  uint8_t* conv = nullptr;
  uint8_t* ssm = nullptr;
  uint64_t conv_bytes = 0;  // per layer and slot
  uint64_t ssm_bytes = 0;
  uint64_t rows = 0;        // slots per layer, slot 0 included
  uint32_t layers = 0;
};

// Host-known slot ids travel in the launch parameters (no upload, no sync).
constexpr int kInlineSlots = 128;

// Zeroes every state of `slots` (host ids, checked by the caller).
Status zero_slots(const States& s, const int32_t* slots, size_t n, void* stream);
// dst <- src for host-known, checked ids.
Status copy_slot(const States& s, int32_t src, int32_t dst, void* stream);
// dst[i] <- src[i] for device arrays; ids outside [1, rows) fault the pool.
Status copy_slots(const States& s, const int32_t* src, const int32_t* dst, size_t n, void* stream,
                  const pool::dev::FaultSink& fault);

}  // namespace kvp::mamba::dev
