// The device free-list engine of a CUDA pool with `pool.free_list` "device":
// the host half. The free list (and the release list of need_sort pools) is a
// ring of page ids in device memory, ownership is a bitmap in device memory;
// the host keeps only each list's head and length. That is enough to decide
// capacity (KVPOOL_ERR_OUT_OF_MEMORY before anything is enqueued), to know
// where in the ring a batch's pages are and where freed pages go, and to
// decide when the deferred frees must be merged, with O(batch) host work and
// no device-to-host copy. The kernels (cuda/device_pages.cu) compute exactly
// the slots of PagedAllocator / IdAllocator for the same operations: token
// allocators (page size 1) append freed ids at the back, paged allocators put
// them sorted at the front, need_sort pools defer them to the release list.
//
// The *_async members take device pointers and enqueue on `stream`; the
// *_host members take host arrays, validate them fully on the host (and
// ownership on the device), run the same kernels and wait.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alloc/device_kernels.hpp"
#include "alloc/paged_allocator.hpp"
#include "backend/backend.hpp"
#include "backend/device_fault.hpp"
#include "util/status.hpp"

namespace kvp::alloc {

// What an extend batch takes, from the host-side lengths.
struct ExtendNeed {
  uint64_t tokens = 0;      // sum of seq - prefix
  uint64_t pages = 0;       // free-list entries taken (tokens for page size 1)
  uint64_t sum_prefix = 0;  // sum of the prefix lengths
  uint64_t max_extend = 0;  // the longest extend: the kernel's grid covers it
};

// Checks prefix >= 0 and seq >= prefix and sums the need (O(batch), no division
// when the page size is a power of two).
Status extend_need(const int64_t* prefix_lens, const int64_t* seq_lens, size_t batch, int64_t page_size,
                   ExtendNeed* out);
// Pages a decode batch takes (seq >= 1 checked); also the sum of the lengths.
Status decode_need(const int64_t* seq_lens, size_t batch, int64_t page_size, uint64_t* pages, uint64_t* sum_seq);

// Pages that `steps` consecutive decode steps take, the first with lengths `seq_lens`
// (each >= 1, including the new token; each step adds one token per request).
Status decode_steps_pages(const int64_t* seq_lens, size_t batch, int64_t page_size, uint64_t steps, uint64_t* pages);
// The most such steps that `free_pages` pages cover (the watermark of a captured decode).
Status decode_watermark(const int64_t* seq_lens, size_t batch, int64_t page_size, uint64_t free_pages,
                        uint64_t* steps);

class DevicePages {
 public:
  static Status make(backend::Backend* backend, int device, int64_t num_pages, int64_t page_size, bool need_sort,
                     backend::DeviceFault* fault, std::unique_ptr<DevicePages>* out);

  int64_t page_size() const { return view_.page_size; }
  int64_t num_pages() const { return view_.num_pages; }
  int64_t slot_limit() const { return view_.slot_limit; }
  bool need_sort() const { return need_sort_; }
  const char* what() const { return view_.page_size == 1 ? "slot" : "page"; }
  size_t free_count() const { return static_cast<size_t>(free_.count); }
  size_t release_count() const { return static_cast<size_t>(release_.count); }
  size_t available_pages() const { return free_count() + release_count(); }
  size_t held_pages() const { return static_cast<size_t>(num_pages()) - available_pages(); }
  size_t available_tokens() const { return available_pages() * static_cast<size_t>(page_size()); }

  // --- stream-ordered (device arrays) ---------------------------------------
  // `need` from extend_need() on the host copies of the lengths.
  Status extend_async(const ExtendNeed& need, size_t batch, const int64_t* prefix_lens, const int64_t* seq_lens,
                      const int64_t* last_locs, int64_t* slots, int64_t* new_pages, void* stream);
  Status decode_async(uint64_t pages, uint64_t sum_seq, size_t batch, const int64_t* seq_lens,
                      const int64_t* last_locs, int64_t* slots, int64_t* new_pages, void* stream);
  Status alloc_async(int64_t* slots, size_t n, void* stream);
  Status free_pages_async(const int64_t* pages, size_t n, void* stream);
  // Folds the release list into the free list, sorted (a no-op when it is empty).
  Status merge_async(void* stream);

  // --- CUDA graphs: a decode step captured once and replayed ------------------
  // Enqueues a decode whose position, page count and capacity check come from device
  // memory when it runs (devk::decode_graph); host counters are left alone. Not for
  // need_sort pools (a replay cannot merge the release list).
  Status decode_graph_async(size_t batch, const int64_t* seq_lens, const int64_t* last_locs, int64_t* slots,
                            void* stream);
  // Records that `steps` graph decode steps ran: the host counters advance as the device cursor did.
  Status graph_advance(const int64_t* seq_lens, size_t batch, uint64_t steps);

  // --- synchronous (host arrays); validation and messages as the CPU allocator ---
  Status alloc_host(int64_t* out, size_t n);
  Status free_host(const PagedAllocator& geometry, const int64_t* slots, size_t n);
  // `r` was validated by PagedAllocator::check_extend.
  Status extend_host(const ExtendRequest& r, int64_t* out, size_t out_len);
  Status decode_host(const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t* out);
  Status merge_host();
  // Ring 1..N, nothing owned, nothing deferred; waits for the device.
  Status clear();
  // The free (or release) list, front first.
  Status list(bool release, std::vector<int64_t>* out) const;
  // Makes the device lists equal to the given ones (every other page owned): the
  // host mirror's lists, after kvseq_* / radix_* changed them (capi/device_mirror.hpp).
  // Synchronous; on failure the device lists are as before.
  Status load(const std::vector<int64_t>& free, const std::vector<int64_t>& release);
  // Ownership invariant (every page free exactly once or owned); appends problems to `report`.
  Status check(std::string* report, size_t max_lines, size_t* problems) const;

 private:
  DevicePages() = default;
  // Merges first when SGLang would: the deferred list is not empty and `hint`
  // (a batch-specific upper bound) or the exact need exceeds the free list.
  Status prepare(uint64_t pages, bool hint, void* stream);
  void consume(uint64_t pages);
  // The free list's position after taking `pages` from its front.
  devk::RingPos after_take(uint64_t pages) const;
  Status scratch(size_t words, int64_t** out);
  Status upload(int64_t* device, const int64_t* host, size_t n);
  // Copies up to three host arrays of `n` entries (a null ends the list) to `device`, back to
  // back, in one transfer.
  Status upload_packed(std::array<const int64_t*, 3> arrays, size_t n, int64_t* device);
  Status download(int64_t* host, const int64_t* device, size_t n) const;
  Status sync() const;
  Status read_ring(const int64_t* ring, devk::RingPos pos, std::vector<int64_t>* out) const;

  backend::Backend* backend_ = nullptr;
  bool need_sort_ = false;
  devk::PagesView view_;
  devk::RingPos free_, release_;
  backend::DeviceMemory free_ring_, release_ring_, owned_, scratch_bits_, result_, cursor_;
  backend::DeviceMemory host_scratch_;  // host-array calls: inputs and outputs on the device
  std::vector<int64_t> host_pack_;      // host-array calls: their inputs packed for one upload
};

}  // namespace kvp::alloc
