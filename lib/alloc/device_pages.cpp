#include "alloc/device_pages.hpp"

#include <algorithm>

#include "alloc/ownership_check.hpp"

namespace kvp::alloc {
namespace {

int page_shift_of(int64_t page) {
  if (page <= 0 || (page & (page - 1)) != 0) return -1;
  int s = 0;
  while ((int64_t{1} << s) < page) ++s;
  return s;
}

std::string at(size_t i) { return "request " + std::to_string(i) + ": "; }

// The slot-level checks of PagedAllocator::decode, with its messages.
Status check_decode(const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t P, int64_t slot_limit) {
  for (size_t i = 0; i < batch; ++i) {
    const int64_t seq = seq_lens[i], last = last_locs[i];
    if (seq < 1) return Status::invalid(at(i) + "sequence length " + std::to_string(seq) + " is below 1");
    if (seq == 1 && last != -1) {
      return Status::invalid(at(i) + "last_loc is " + std::to_string(last) + " for a first token, expected -1");
    }
    if (seq > 1 && (last < 0 || last >= slot_limit)) {
      return Status::invalid(at(i) + "last_loc " + std::to_string(last) + " is out of range [0, " +
                             std::to_string(slot_limit) + ")");
    }
    if (P > 1 && (last + 2) % P != seq % P) {
      return Status::invalid(at(i) + "last_loc " + std::to_string(last) + " is not the slot of token " +
                             std::to_string(seq - 2) + ": (last_loc + 2) % page_size must equal seq % page_size");
    }
  }
  return Status::ok();
}

}  // namespace

namespace {
constexpr uint64_t kMaxExtend = 65535ull * 1024;
}  // namespace

Status extend_need(const int64_t* prefix_lens, const int64_t* seq_lens, size_t batch, int64_t page_size,
                   ExtendNeed* out) {
  const int shift = page_shift_of(page_size);
  uint64_t tokens = 0, pages = 0, sum_prefix = 0, max_extend = 0;
  for (size_t i = 0; i < batch; ++i) {
    const int64_t pre = prefix_lens[i], seq = seq_lens[i];
    if (pre < 0) return Status::invalid(at(i) + "prefix length " + std::to_string(pre) + " is negative");
    if (seq < pre) {
      return Status::invalid(at(i) + "sequence length " + std::to_string(seq) + " is below its prefix length " +
                             std::to_string(pre));
    }
    tokens += static_cast<uint64_t>(seq - pre);
    if (static_cast<uint64_t>(seq - pre) > max_extend) max_extend = static_cast<uint64_t>(seq - pre);
    sum_prefix += static_cast<uint64_t>(pre);
    if (shift >= 0) {
      pages += static_cast<uint64_t>(((seq + page_size - 1) >> shift) - ((pre + page_size - 1) >> shift));
    } else {
      pages += static_cast<uint64_t>((seq + page_size - 1) / page_size - (pre + page_size - 1) / page_size);
    }
  }
  *out = ExtendNeed{tokens, pages, sum_prefix, max_extend};
  return Status::ok();
}

Status decode_need(const int64_t* seq_lens, size_t batch, int64_t page_size, uint64_t* pages, uint64_t* sum_seq) {
  // One branch-free pass (it vectorises: this loop is most of a large batch's host
  // time), then the check; the element is looked up only on the error path.
  const int shift = page_shift_of(page_size);
  const uint64_t mask = shift >= 0 ? static_cast<uint64_t>(page_size - 1) : 0;
  uint64_t need = 0, sum = 0;
  int64_t lowest = INT64_MAX;
  if (page_size == 1) {
    need = batch;
    for (size_t i = 0; i < batch; ++i) {
      sum += static_cast<uint64_t>(seq_lens[i]);
      lowest = std::min(lowest, seq_lens[i]);
    }
  } else if (shift >= 0) {
    for (size_t i = 0; i < batch; ++i) {
      const int64_t seq = seq_lens[i];
      sum += static_cast<uint64_t>(seq);
      lowest = std::min(lowest, seq);
      need += (static_cast<uint64_t>(seq) & mask) == 1 ? 1 : 0;
    }
  } else {
    for (size_t i = 0; i < batch; ++i) {
      const int64_t seq = seq_lens[i];
      sum += static_cast<uint64_t>(seq);
      lowest = std::min(lowest, seq);
      need += seq % page_size == 1 ? 1 : 0;
    }
  }
  if (batch > 0 && lowest < 1) {
    for (size_t i = 0; i < batch; ++i) {
      if (seq_lens[i] < 1) {
        return Status::invalid(at(i) + "sequence length " + std::to_string(seq_lens[i]) + " is below 1");
      }
    }
  }
  *pages = need;
  *sum_seq = sum;
  return Status::ok();
}

Status decode_steps_pages(const int64_t* seq_lens, size_t batch, int64_t page_size, uint64_t steps, uint64_t* pages) {
  const uint64_t P = static_cast<uint64_t>(page_size);
  // Lengths 1, P + 1, 2P + 1, ... start a page: count(x) of them in [1, x].
  auto count = [P](uint64_t x) { return x == 0 ? 0 : (x - 1) / P + 1; };
  uint64_t total = 0;
  for (size_t i = 0; i < batch; ++i) {
    if (seq_lens[i] < 1) return Status::invalid(at(i) + "sequence length " + std::to_string(seq_lens[i]) + " is below 1");
    const uint64_t s0 = static_cast<uint64_t>(seq_lens[i]);
    total += count(s0 + steps - 1) - count(s0 - 1);
  }
  *pages = total;
  return Status::ok();
}

Status decode_watermark(const int64_t* seq_lens, size_t batch, int64_t page_size, uint64_t free_pages,
                        uint64_t* steps) {
  if (batch == 0) return Status::invalid("an empty batch takes no pages: its watermark is unbounded");
  uint64_t pages = 0;
  KVPOOL_RETURN_IF_ERROR(decode_steps_pages(seq_lens, batch, page_size, 0, &pages));  // checks the lengths
  // Every P steps each request takes at least one page: `hi` steps cannot fit.
  const uint64_t P = static_cast<uint64_t>(page_size);
  uint64_t lo = 0, hi = (free_pages / batch + 1) * P + 1;
  while (lo + 1 < hi) {  // invariant: lo steps fit, hi steps do not
    const uint64_t mid = lo + (hi - lo) / 2;
    KVPOOL_RETURN_IF_ERROR(decode_steps_pages(seq_lens, batch, page_size, mid, &pages));
    (pages <= free_pages ? lo : hi) = mid;
  }
  *steps = lo;
  return Status::ok();
}

Status DevicePages::make(backend::Backend* backend, int device, int64_t num_pages, int64_t page_size, bool need_sort,
                         backend::DeviceFault* fault, std::unique_ptr<DevicePages>* out) {
  // The kernels' page arithmetic is shifts only (cuda/device_common.cuh); the config
  // admits no other page size, so this guards direct constructions.
  if (page_shift_of(page_size) < 0) {
    return Status::invalid("the device free list needs a power-of-two page size, not " + std::to_string(page_size));
  }
  std::unique_ptr<DevicePages> d(new DevicePages());
  d->backend_ = backend;
  d->need_sort_ = need_sort;
  devk::PagesView& v = d->view_;
  v.num_pages = num_pages;
  v.page_size = page_size;
  v.page_shift = page_shift_of(page_size);
  v.slot_limit = (num_pages + 1) * page_size;
  v.fault = fault->record();
  v.host_flag = fault->host_flag();
  v.device = device;
  const size_t ring_bytes = static_cast<size_t>(num_pages) * sizeof(int64_t);
  const size_t bitmap_bytes = static_cast<size_t>(num_pages / 32 + 1) * sizeof(uint32_t);
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, ring_bytes, &d->free_ring_));
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, bitmap_bytes, &d->owned_));
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, bitmap_bytes, &d->scratch_bits_));
  // Two words: the host-path validation result, then the merge kernel's block counter.
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, 2 * sizeof(uint64_t), &d->result_));
  KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, sizeof(devk::RingPos), &d->cursor_));
  if (need_sort) KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend, ring_bytes, &d->release_ring_));
  v.free_ring = d->free_ring_.as<int64_t>();
  v.release_ring = need_sort ? d->release_ring_.as<int64_t>() : nullptr;
  v.owned = d->owned_.as<uint32_t>();
  v.scratch_bits = d->scratch_bits_.as<uint32_t>();
  v.result = d->result_.as<uint64_t>();
  v.blocks_done = reinterpret_cast<uint32_t*>(v.result + 1);
  v.cursor = d->cursor_.as<devk::RingPos>();
  KVPOOL_RETURN_IF_ERROR(d->clear());
  *out = std::move(d);
  return Status::ok();
}

// --- counters -----------------------------------------------------------------

Status DevicePages::prepare(uint64_t pages, bool hint, void* stream) {
  if (need_sort_ && release_.count > 0 && (hint || pages > static_cast<uint64_t>(free_.count))) {
    return merge_async(stream);
  }
  return Status::ok();
}

devk::RingPos DevicePages::after_take(uint64_t pages) const {
  const int64_t n = static_cast<int64_t>(pages);
  return devk::RingPos{(free_.head + n) % num_pages(), free_.count - n};
}

void DevicePages::consume(uint64_t pages) {
  const int64_t n = static_cast<int64_t>(pages);
  free_.head = (free_.head + n) % num_pages();
  free_.count -= n;
}

Status DevicePages::merge_async(void* stream) {
  if (release_.count == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(devk::merge(view_, free_, release_, stream));
  free_ = devk::RingPos{0, free_.count + release_.count};
  release_ = devk::RingPos{};
  return Status::ok();
}

// --- stream-ordered -------------------------------------------------------------

Status DevicePages::extend_async(const ExtendNeed& need, size_t batch, const int64_t* prefix_lens,
                                 const int64_t* seq_lens, const int64_t* last_locs, int64_t* slots,
                                 int64_t* new_pages, void* stream) {
  const uint64_t P = static_cast<uint64_t>(page_size());
  if (need.pages > available_pages()) {
    return Status::out_of_memory("extend needs " + std::to_string(need.pages * P) + " slots (" +
                                 std::to_string(need.pages) + " pages), " + std::to_string(available_tokens()) +
                                 " available");
  }
  if (need.max_extend > kMaxExtend) {  // the kernel's grid has 65535 chunks of 1024 tokens per request
    return Status::invalid("an extend of " + std::to_string(need.max_extend) + " tokens exceeds the " +
                           std::to_string(kMaxExtend) + " one call can allocate for one request");
  }
  // Before the empty-batch return: SGLang's hint merges even for an empty batch when the free list is empty.
  KVPOOL_RETURN_IF_ERROR(prepare(need.pages, need.tokens / P + batch + 1 > static_cast<uint64_t>(free_.count), stream));
  if (batch == 0) return Status::ok();
  devk::ExtendArgs a{prefix_lens,
                     seq_lens,
                     last_locs,
                     static_cast<int64_t>(batch),
                     slots,
                     static_cast<int64_t>(need.tokens),
                     static_cast<int64_t>(need.pages),
                     static_cast<int64_t>(need.sum_prefix),
                     new_pages,
                     static_cast<int64_t>(need.max_extend)};
  KVPOOL_RETURN_IF_ERROR(devk::extend(view_, free_, after_take(need.pages), a, stream));
  consume(need.pages);
  return Status::ok();
}

Status DevicePages::decode_async(uint64_t pages, uint64_t sum_seq, size_t batch, const int64_t* seq_lens,
                                 const int64_t* last_locs, int64_t* slots, int64_t* new_pages, void* stream) {
  if (pages > available_pages()) {
    return Status::out_of_memory("decode needs " + std::to_string(pages) + " new pages, " +
                                 std::to_string(available_pages()) + " available");
  }
  if (batch == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(prepare(pages, batch > static_cast<size_t>(free_.count), stream));
  devk::DecodeArgs a{seq_lens,   last_locs, static_cast<int64_t>(batch), slots, static_cast<int64_t>(pages),
                     static_cast<int64_t>(sum_seq), new_pages};
  KVPOOL_RETURN_IF_ERROR(devk::decode(view_, free_, after_take(pages), a, stream));
  consume(pages);
  return Status::ok();
}

Status DevicePages::alloc_async(int64_t* slots, size_t n, void* stream) {
  const size_t P = static_cast<size_t>(page_size());
  if (n % P != 0) {
    return Status::invalid("allocation of " + std::to_string(n) + " slots is not a multiple of page_size " +
                           std::to_string(P));
  }
  const uint64_t pages = n / P;
  if (pages > available_pages()) {
    return Status::out_of_memory("need " + std::to_string(n) + " slots, " + std::to_string(available_tokens()) +
                                 " available");
  }
  if (pages == 0) return Status::ok();
  KVPOOL_RETURN_IF_ERROR(prepare(pages, false, stream));
  KVPOOL_RETURN_IF_ERROR(devk::alloc(view_, free_, after_take(pages), slots, static_cast<int64_t>(pages), stream));
  consume(pages);
  return Status::ok();
}

Status DevicePages::free_pages_async(const int64_t* pages, size_t n, void* stream) {
  if (n == 0) return Status::ok();
  if (n > held_pages()) {
    return Status::invalid("freeing " + std::to_string(n) + " " + what() + "s but only " +
                           std::to_string(held_pages()) + " are allocated (one is freed twice or was never handed out)");
  }
  devk::RingPos& target = need_sort_ ? release_ : free_;
  int64_t* ring = need_sort_ ? view_.release_ring : view_.free_ring;
  const int64_t count = static_cast<int64_t>(n);
  const bool sorted = page_size() > 1;
  // Append after the last entry (FIFO), or prepend: the new head is n entries before the old one.
  const int64_t start = sorted ? (target.head - count % num_pages() + num_pages()) % num_pages()
                               : (target.head + target.count) % num_pages();
  devk::RingPos next = free_;  // a release list leaves the free list where it is
  if (!need_sort_) next = devk::RingPos{sorted ? start : free_.head, free_.count + count};
  KVPOOL_RETURN_IF_ERROR(devk::free_pages(view_, pages, count, ring, start, sorted, next, stream));
  if (sorted) target.head = start;
  target.count += count;
  return Status::ok();
}

// --- synchronous ----------------------------------------------------------------

Status DevicePages::scratch(size_t words, int64_t** out) {
  const size_t bytes = (words == 0 ? 1 : words) * sizeof(int64_t);
  if (host_scratch_.bytes() < bytes) {
    host_scratch_.reset();
    KVPOOL_RETURN_IF_ERROR(backend::DeviceMemory::make(backend_, bytes, &host_scratch_));
  }
  *out = host_scratch_.as<int64_t>();
  return Status::ok();
}

Status DevicePages::upload(int64_t* device, const int64_t* host, size_t n) {
  if (n == 0) return Status::ok();
  return backend_->from_host(device, host, n * sizeof(int64_t));
}

Status DevicePages::download(int64_t* host, const int64_t* device, size_t n) const {
  if (n == 0) return Status::ok();
  return backend_->to_host(host, device, n * sizeof(int64_t));
}

Status DevicePages::sync() const {
  // A synchronous copy on the legacy stream waits for the enqueued work.
  int64_t ignored = 0;
  return backend_->to_host(&ignored, view_.result, sizeof(ignored));
}

Status DevicePages::alloc_host(int64_t* out, size_t n) {
  int64_t* d = nullptr;
  KVPOOL_RETURN_IF_ERROR(scratch(n, &d));
  KVPOOL_RETURN_IF_ERROR(alloc_async(d, n, nullptr));
  return download(out, d, n);
}

Status DevicePages::free_host(const PagedAllocator& geometry, const int64_t* slots, size_t n) {
  if (n == 0) return Status::ok();
  // The CPU allocator's order of checks: ranges (and, paged, slots to pages),
  // then ownership in input order, then repeats.
  std::vector<int64_t> ids;
  size_t range_error = n;  // token: index of the first reserved or out-of-range id
  Status range_status;
  if (page_size() > 1) {
    KVPOOL_RETURN_IF_ERROR(geometry.slots_to_pages(slots, n, &ids));
  } else {
    ids.assign(slots, slots + n);
    for (size_t i = 0; i < n && range_error == n; ++i) {
      const int64_t id = ids[i];
      if (id == 0) {
        range_error = i;
        range_status = Status::invalid("slot 0 is reserved and never handed out");
      } else if (id < 0 || id > num_pages()) {
        range_error = i;
        range_status = Status::invalid("slot " + std::to_string(id) + " is out of range [1, " +
                                       std::to_string(num_pages()) + "]");
      }
    }
  }
  const size_t checked = std::min(range_error, ids.size());
  int64_t* d = nullptr;
  KVPOOL_RETURN_IF_ERROR(scratch(ids.size(), &d));
  KVPOOL_RETURN_IF_ERROR(upload(d, ids.data(), checked));
  int64_t bad = -1;
  KVPOOL_RETURN_IF_ERROR(devk::first_not_owned(view_, d, static_cast<int64_t>(checked), nullptr, &bad));
  if (bad >= 0) {
    return Status::invalid(std::string(what()) + " " + std::to_string(ids[static_cast<size_t>(bad)]) +
                           " is not allocated (freed twice, or never handed out)");
  }
  if (range_error < n) return range_status;
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  if (page_size() > 1) {
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    ids = sorted;  // the kernel sorts too; ascending input is its cheapest case
  } else {
    const auto repeat = std::adjacent_find(sorted.begin(), sorted.end());
    if (repeat != sorted.end()) return Status::invalid("slot " + std::to_string(*repeat) + " is listed twice in one free");
  }
  KVPOOL_RETURN_IF_ERROR(upload(d, ids.data(), ids.size()));
  KVPOOL_RETURN_IF_ERROR(free_pages_async(d, ids.size(), nullptr));
  return sync();
}

Status DevicePages::extend_host(const ExtendRequest& r, int64_t* out, size_t out_len) {
  ExtendNeed need;
  KVPOOL_RETURN_IF_ERROR(extend_need(r.prefix_lens, r.seq_lens, r.batch, page_size(), &need));
  if (need.pages > available_pages()) return extend_async(need, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  int64_t* d = nullptr;
  KVPOOL_RETURN_IF_ERROR(scratch(3 * r.batch + out_len, &d));
  KVPOOL_RETURN_IF_ERROR(upload_packed({r.prefix_lens, r.seq_lens, r.last_locs}, r.batch, d));
  KVPOOL_RETURN_IF_ERROR(
      extend_async(need, r.batch, d, d + r.batch, d + 2 * r.batch, d + 3 * r.batch, nullptr, nullptr));
  return download(out, d + 3 * r.batch, out_len);
}

Status DevicePages::decode_host(const int64_t* seq_lens, const int64_t* last_locs, size_t batch, int64_t* out) {
  KVPOOL_RETURN_IF_ERROR(check_decode(seq_lens, last_locs, batch, page_size(), slot_limit()));
  uint64_t pages = 0, sum = 0;
  KVPOOL_RETURN_IF_ERROR(decode_need(seq_lens, batch, page_size(), &pages, &sum));
  if (pages > available_pages()) return decode_async(pages, sum, 0, nullptr, nullptr, nullptr, nullptr, nullptr);
  int64_t* d = nullptr;
  KVPOOL_RETURN_IF_ERROR(scratch(3 * batch, &d));
  KVPOOL_RETURN_IF_ERROR(upload_packed({seq_lens, last_locs, nullptr}, batch, d));
  KVPOOL_RETURN_IF_ERROR(decode_async(pages, sum, batch, d, d + batch, d + 2 * batch, nullptr, nullptr));
  return download(out, d + 2 * batch, batch);
}

Status DevicePages::upload_packed(std::array<const int64_t*, 3> arrays, size_t n, int64_t* device) {
  // One synchronous copy instead of one per array: each cudaMemcpy from pageable memory
  // costs several microseconds whatever its size, which dominated these calls.
  size_t parts = 0;
  host_pack_.resize(3 * n);  // keeps its capacity: no allocation once the largest batch was seen
  for (const int64_t* a : arrays) {
    if (a == nullptr) break;
    std::copy(a, a + n, host_pack_.begin() + static_cast<std::ptrdiff_t>(parts * n));
    ++parts;
  }
  return upload(device, host_pack_.data(), parts * n);
}

Status DevicePages::merge_host() {
  KVPOOL_RETURN_IF_ERROR(merge_async(nullptr));
  return sync();
}

Status DevicePages::clear() {
  KVPOOL_RETURN_IF_ERROR(devk::reset(view_, nullptr));
  free_ = devk::RingPos{0, num_pages()};
  release_ = devk::RingPos{};
  return sync();
}

Status DevicePages::read_ring(const int64_t* ring, devk::RingPos pos, std::vector<int64_t>* out) const {
  out->resize(static_cast<size_t>(pos.count));
  if (pos.count == 0) return Status::ok();
  const int64_t first = std::min(pos.count, num_pages() - pos.head);  // up to the end of the ring, then from 0
  KVPOOL_RETURN_IF_ERROR(download(out->data(), ring + pos.head, static_cast<size_t>(first)));
  return download(out->data() + first, ring, static_cast<size_t>(pos.count - first));
}

Status DevicePages::list(bool release, std::vector<int64_t>* out) const {
  if (release) {
    if (!need_sort_) {
      out->clear();
      return Status::ok();
    }
    return read_ring(view_.release_ring, release_, out);
  }
  return read_ring(view_.free_ring, free_, out);
}

// --- CUDA graphs -----------------------------------------------------------------

Status DevicePages::decode_graph_async(size_t batch, const int64_t* seq_lens, const int64_t* last_locs,
                                       int64_t* slots, void* stream) {
  if (need_sort_) {
    return Status::unsupported("a graph decode cannot merge deferred frees: not available with need_sort "
                               "(disaggregation_mode other than \"none\")");
  }
  return devk::decode_graph(view_, seq_lens, last_locs, static_cast<int64_t>(batch), slots, stream);
}

Status DevicePages::graph_advance(const int64_t* seq_lens, size_t batch, uint64_t steps) {
  uint64_t pages = 0;
  KVPOOL_RETURN_IF_ERROR(decode_steps_pages(seq_lens, batch, page_size(), steps, &pages));
  if (pages > static_cast<uint64_t>(free_.count)) {
    return Status::invalid(std::to_string(steps) + " decode steps take " + std::to_string(pages) + " pages but only " +
                           std::to_string(free_.count) +
                           " were free: a replay past the watermark faulted the pool (kvpool_synchronize)");
  }
  consume(pages);
  return Status::ok();
}

Status DevicePages::load(const std::vector<int64_t>& free, const std::vector<int64_t>& release) {
  if (!release.empty() && !need_sort_) return Status::internal("a release list without need_sort");
  const int64_t n = num_pages();
  if (static_cast<int64_t>(free.size() + release.size()) > n) return Status::internal("more free pages than pages");
  std::vector<uint32_t> bits(static_cast<size_t>(n / 32 + 1), 0);
  for (int64_t id = 1; id <= n; ++id) bits[static_cast<size_t>(id / 32)] |= 1u << (id % 32);
  for (const std::vector<int64_t>* list : {&free, &release}) {
    for (int64_t id : *list) {
      if (id < 1 || id > n) return Status::internal("page " + std::to_string(id) + " out of range in a mirrored list");
      bits[static_cast<size_t>(id / 32)] &= ~(1u << (id % 32));
    }
  }
  // The rings first: until the positions below change, nothing reads the entries written.
  KVPOOL_RETURN_IF_ERROR(upload(view_.free_ring, free.data(), free.size()));
  if (need_sort_) KVPOOL_RETURN_IF_ERROR(upload(view_.release_ring, release.data(), release.size()));
  KVPOOL_RETURN_IF_ERROR(backend_->from_host(view_.owned, bits.data(), bits.size() * sizeof(uint32_t)));
  const devk::RingPos cursor{0, static_cast<int64_t>(free.size())};
  KVPOOL_RETURN_IF_ERROR(backend_->from_host(view_.cursor, &cursor, sizeof(cursor)));
  free_ = cursor;
  release_ = devk::RingPos{0, static_cast<int64_t>(release.size())};
  return Status::ok();
}

Status DevicePages::check(std::string* report, size_t max_lines, size_t* problems) const {
  OwnershipView view;
  view.what = what();
  view.num_ids = num_pages();
  KVPOOL_RETURN_IF_ERROR(list(false, &view.free));
  KVPOOL_RETURN_IF_ERROR(list(true, &view.release));
  std::vector<uint32_t> bits(static_cast<size_t>(num_pages() / 32 + 1));
  KVPOOL_RETURN_IF_ERROR(backend_->to_host(bits.data(), view_.owned, bits.size() * sizeof(uint32_t)));
  std::vector<uint8_t> owned(static_cast<size_t>(num_pages()) + 1);
  for (size_t id = 0; id < owned.size(); ++id) owned[id] = (bits[id / 32] >> (id % 32)) & 1u;
  view.owned = &owned;
  view.held_counter = held_pages();
  *problems = check_ownership(view, report, max_lines);
  return Status::ok();
}

}  // namespace kvp::alloc
