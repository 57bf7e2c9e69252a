// Host launchers of the device free-list engine and the request-table
// kernels (cuda/device_pages.cu, cuda/device_req.cu; builds without CUDA link
// alloc/device_kernels_stub.cpp). They only enqueue work on a stream: every
// decision that can be taken on the host (capacity, ring positions, counts)
// was taken by the caller (alloc/device_pages.cpp, capi/device_api.cpp), and
// what only the device can check raises a fault (backend/device_fault.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/device_fault.hpp"
#include "util/status.hpp"

namespace kvp::devk {

// Position of a list in its ring: entries head, head+1, ... (mod num_pages).
struct RingPos {
  int64_t head = 0;
  int64_t count = 0;
};

// The device state of one pool's page allocator (fixed after construction).
struct PagesView {
  int64_t* free_ring = nullptr;     // num_pages entries
  int64_t* release_ring = nullptr;  // num_pages entries (need_sort)
  uint32_t* owned = nullptr;        // bit per page id 0..num_pages
  uint32_t* scratch_bits = nullptr; // same size; all zero between calls (sorting frees, merge)
  uint64_t* result = nullptr;       // one word: host-path validation result
  uint32_t* blocks_done = nullptr;  // merge: blocks that finished marking; zero between calls
  // The free list's position in device memory, stored by every kernel that moves it
  // (the host computes the new position) and read and advanced by the graph decode.
  RingPos* cursor = nullptr;
  int64_t num_pages = 0;            // ids 1..num_pages; ring capacity
  int64_t page_size = 1;
  int page_shift = 0;               // log2(page_size): a power of two (DevicePages::make checks)
  int64_t slot_limit = 0;           // (num_pages + 1) * page_size
  backend::FaultRecord* fault = nullptr;
  int* host_flag = nullptr;
  int device = 0;
};


struct ExtendArgs {
  const int64_t* prefix_lens;
  const int64_t* seq_lens;
  const int64_t* last_locs;
  int64_t batch;
  int64_t* out;
  int64_t out_len;  // host: sum of extends
  int64_t pages;    // host: pages taken
  int64_t sum_prefix;  // host: sum of prefix lengths
  int64_t* new_pages;  // optional
  int64_t max_extend;  // host: the longest extend (sizes the grid)
};

struct DecodeArgs {
  const int64_t* seq_lens;
  const int64_t* last_locs;
  int64_t batch;
  int64_t* out;
  int64_t pages;    // host: pages taken
  int64_t sum_seq;  // host: sum of the lengths (compared on the device)
  int64_t* new_pages;  // optional
};

// Makes the pool's device current (cheap when it already is).
Status use_device(int device);

// Page allocator. Each consumes the front of `free` (the caller then advances its counters);
// `next` is the free list's position afterwards, stored in the device cursor.
Status extend(const PagesView& v, RingPos free, RingPos next, const ExtendArgs& a, void* stream);
Status decode(const PagesView& v, RingPos free, RingPos next, const DecodeArgs& a, void* stream);
Status alloc(const PagesView& v, RingPos free, RingPos next, int64_t* out, int64_t pages, void* stream);
// The decode step of a captured graph: the position comes from the device cursor and the
// pages needed from the device lengths, both read when the kernel runs; a step that needs
// more pages than are free faults the pool (kFaultPastWatermark) and changes nothing.
// The host counters are not touched (see DevicePages::graph_advance).
Status decode_graph(const PagesView& v, const int64_t* seq_lens, const int64_t* last_locs, int64_t batch,
                    int64_t* out, void* stream);
// Gives `n` device page ids back into `ring` starting at ring position `start`:
// in the given order (append) or sorted ascending (prepend; `start` is then the new head).
// Ids must be allocated and distinct; otherwise the pool faults and nothing is written.
Status free_pages(const PagesView& v, const int64_t* pages, int64_t n, int64_t* ring, int64_t start, bool sorted,
                  RingPos next, void* stream);
// Free list := sorted(free U release), at ring positions 0.. of the free ring.
Status merge(const PagesView& v, RingPos free, RingPos release, void* stream);
// Ring 1..num_pages, nothing owned.
Status reset(const PagesView& v, void* stream);
// Host-path free check: index of the first of `pages` (device, in range) that is not owned, or -1.
// Synchronizes `stream`.
Status first_not_owned(const PagesView& v, const int64_t* pages, int64_t n, void* stream, int64_t* index);

// The request-to-token table (int32 entries, row-major rows x context).
struct TableView {
  int32_t* table = nullptr;
  int64_t rows = 0;  // including the reserved row 0
  int64_t context = 0;
  int64_t slot_limit = 0;
  backend::FaultRecord* fault = nullptr;
  int* host_flag = nullptr;
  int device = 0;
};

struct WriteBatchArgs {
  const int32_t* rows;
  const int64_t* prefix_lens;
  const int64_t* seq_lens;
  int64_t batch;
  const int64_t* prefix_slots;  // optional
  int64_t prefix_len;
  const int64_t* extend_slots;
  int64_t extend_len;
};

Status write_batch(const TableView& t, const WriteBatchArgs& a, void* stream);
Status last_loc(const TableView& t, const int32_t* rows, const int64_t* prefix_lens, int64_t batch, int64_t* out,
                void* stream);

}  // namespace kvp::devk
