#include "storage/segment_copier.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/page_codec.hpp"
#include "storage/payload_hash.hpp"
#include "util/stream_copy.hpp"

namespace kvp::storage {
namespace {

// How long the reading thread spins for the copier to finish its last segment before it
// sleeps: a segment takes 40-80 us on the machines measured, and waking a sleeping thread
// costs about as much on a VM whose idle CPUs halt.
constexpr std::chrono::microseconds kSpinForCopier{200};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

struct SegmentCopier::Shared {
  std::mutex mu;
  std::condition_variable wake;  // the copier: a page was posted, or stop
  std::condition_variable left;  // the reading thread: the copier left its page
  uint64_t posted = 0;           // pages posted
  uint64_t taken = 0;            // pages the copier took, or the reading thread withdrew
  bool stopping = false;
  std::atomic<bool> copier_in{false};  // the copier is on a page
  size_t copier_segments = 0;          // the copier's segments of the last page

  // The posted page (set under mu, before posted grows).
  const host::HostGeometry* g = nullptr;
  uint8_t* host = nullptr;
  int64_t page = 0;
  const uint8_t* payload = nullptr;
  uint64_t payload_bytes = 0;
  size_t segments = 0;
  std::atomic<size_t> next{0};   // the next segment to take
  std::vector<uint64_t> digests;  // one per segment; each written by the thread that copied it

  std::thread thread;

  // Takes segments until none is left; returns how many this thread copied. The stores
  // are fenced before the return.
  size_t copy_segments() {
    size_t mine = 0;
    for (size_t s = next.fetch_add(1, std::memory_order_relaxed); s < segments;
         s = next.fetch_add(1, std::memory_order_relaxed)) {
      const uint64_t begin = s * kPayloadSegmentBytes, end = std::min(begin + kPayloadSegmentBytes, payload_bytes);
      Xxh3Stream hash;
      scatter_payload_range(*g, host, page, payload, begin, end, &hash);
      digests[s] = hash.digest();
      ++mine;
    }
    util::stream_fence();
    return mine;
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      wake.wait(lk, [this] { return stopping || taken < posted; });
      if (stopping) return;
      taken = posted;
      copier_in.store(true, std::memory_order_relaxed);
      lk.unlock();
      const size_t mine = copy_segments();
      lk.lock();
      copier_segments = mine;
      copier_in.store(false, std::memory_order_release);  // after the digests and the fence
      left.notify_one();
    }
  }
};

SegmentCopier::SegmentCopier() : shared_(std::make_unique<Shared>()) {
  shared_->digests.reserve(64);  // 64 MiB pages without growing
  Shared* s = shared_.get();
  shared_->thread = std::thread([s] { s->run(); });
}

SegmentCopier::~SegmentCopier() {
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    shared_->stopping = true;
  }
  shared_->wake.notify_one();
  shared_->thread.join();
}

uint64_t SegmentCopier::copy(const host::HostGeometry& g, uint8_t* host, int64_t page, const uint8_t* payload) {
  Shared& s = *shared_;
  const uint64_t bytes = page_payload_bytes(g);
  const size_t segments = size_t((bytes + kPayloadSegmentBytes - 1) / kPayloadSegmentBytes);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.digests.size() < segments) s.digests.resize(segments);  // may throw: nothing posted yet
    s.g = &g;
    s.host = host;
    s.page = page;
    s.payload = payload;
    s.payload_bytes = bytes;
    s.segments = segments;
    s.next.store(0, std::memory_order_relaxed);
    s.copier_segments = 0;
    ++s.posted;
  }
  s.wake.notify_one();
  s.copy_segments();
  // The copier is in its last segment, or never took the page (asleep, or not run yet).
  const auto spin_until = std::chrono::steady_clock::now() + kSpinForCopier;
  for (unsigned k = 0; s.copier_in.load(std::memory_order_acquire); ++k) {
    if (k % 64 == 63 && std::chrono::steady_clock::now() > spin_until) break;
    cpu_relax();
  }
  {
    std::unique_lock<std::mutex> lk(s.mu);
    if (s.taken < s.posted) {
      s.taken = s.posted;  // withdrawn: every segment is copied, the copier must not take the page
    } else {
      s.left.wait(lk, [&s] { return !s.copier_in.load(std::memory_order_acquire); });
    }
  }
  PayloadHash hash;
  hash.add_segment_digests(s.digests.data(), segments);
  return hash.digest();
}

size_t SegmentCopier::last_copier_segments() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->copier_segments;
}

bool SegmentCopier::worthwhile() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return std::thread::hardware_concurrency() > 1;
  return CPU_COUNT(&cpus) > 1;
}

}  // namespace kvp::storage
