#include "storage/segment_copier.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "storage/page_codec.hpp"
#include "storage/page_stream.hpp"
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

// Spins while `busy()` holds, for at most kSpinForCopier (the clock read every 64 turns).
template <class Busy>
void spin_while(Busy&& busy) {
  const auto spin_until = std::chrono::steady_clock::now() + kSpinForCopier;
  for (unsigned k = 0; busy(); ++k) {
    if (k % 64 == 63 && std::chrono::steady_clock::now() > spin_until) return;
    cpu_relax();
  }
}

}  // namespace

// Keeps the copier off the posting thread's CPU. On the project's 2-core VM the kernel
// woke the copier on the CPU of the thread that posted the page, 2-3 us after the post, while
// the other CPU stayed idle: one of the two then waited for the CPU while the other did every
// segment (instrumented: a backup's eight segments all by one thread, ~0.7 of a plain write
// for a page_first page; with the copier kept off the poster's CPU, ~0.95). The copier's
// allowed CPUs are set again only when the poster runs on another CPU than at the last post
// (sched_getcpu is a vDSO read): one pthread_setaffinity_np per move, not per page. Failure
// (a cpuset that changed) is ignored: the copy is correct on any CPU.
class CopierPlacement {
 public:
  CopierPlacement() {
    CPU_ZERO(&allowed_);
    if (sched_getaffinity(0, sizeof(allowed_), &allowed_) != 0) CPU_ZERO(&allowed_);
  }
  void keep_off_this_cpu(std::thread& copier) {
    const int cpu = sched_getcpu();
    if (cpu < 0 || cpu == excluded_ || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed_)) return;
    cpu_set_t others = allowed_;
    CPU_CLR(cpu, &others);
    if (CPU_COUNT(&others) == 0) return;
    excluded_ = cpu;
    (void)pthread_setaffinity_np(copier.native_handle(), sizeof(others), &others);
  }

 private:
  cpu_set_t allowed_;  // the creating thread's CPUs
  int excluded_ = -1;  // the CPU the copier is kept off now
};

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
  SegmentWork work = SegmentWork::kScatter;
  const host::HostGeometry* g = nullptr;
  uint8_t* host = nullptr;
  int64_t page = 0;
  uint8_t* payload = nullptr;
  uint64_t payload_bytes = 0;
  size_t segments = 0;
  std::atomic<size_t> next{0};   // the next segment to take
  // Per segment (room for `room` of each): its digest, written by the thread that did it,
  // and whether it is done (its bytes, digest and fence before the flag).
  std::vector<uint64_t> digests;
  std::unique_ptr<std::atomic<bool>[]> done;
  size_t room = 0;
  std::atomic<int> waiting_for_segment{0};  // wait_segment() sleeps: notify `left` after each segment

  std::thread thread;
  CopierPlacement placement;  // the posting thread's only

  void do_segment(size_t s) {
    const uint64_t begin = s * kPayloadSegmentBytes, end = std::min(begin + kPayloadSegmentBytes, payload_bytes);
    Xxh3Stream hash;
    switch (work) {
      case SegmentWork::kScatter: scatter_payload_range(*g, host, page, payload, begin, end, &hash); break;
      case SegmentWork::kGather: gather_payload_range(*g, host, page, payload, begin, end, &hash); break;
      case SegmentWork::kHash: hash_payload_range(*g, host, page, begin, end, &hash); break;
    }
    digests[s] = hash.digest();
    util::stream_fence();  // scatter's streamed stores before whoever reads the page next
    // Sequentially consistent, as wait_segment's count and check: one of the two threads
    // sees the other's store (a waiter that missed the flag is seen, and woken).
    done[s].store(true);
    if (waiting_for_segment.load() > 0) {
      std::lock_guard<std::mutex> lk(mu);  // the waiter checks the flag under mu: no lost wake-up
      left.notify_all();
    }
  }

  // Takes segments until none is left; returns how many this thread did.
  size_t copy_segments() {
    size_t mine = 0;
    for (size_t s = next.fetch_add(1, std::memory_order_relaxed); s < segments;
         s = next.fetch_add(1, std::memory_order_relaxed)) {
      do_segment(s);
      ++mine;
    }
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
      copier_in.store(false, std::memory_order_release);  // after the digests and the fences
      left.notify_all();
    }
  }
};

SegmentCopier::SegmentCopier() : shared_(std::make_unique<Shared>()) {
  constexpr size_t kInitialRoom = 64;  // pages of up to 64 MiB without growing
  shared_->digests.resize(kInitialRoom);
  shared_->done.reset(new std::atomic<bool>[kInitialRoom]);
  shared_->room = kInitialRoom;
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

void SegmentCopier::post(SegmentWork work, const host::HostGeometry& g, uint8_t* host, int64_t page,
                         uint8_t* payload) {
  Shared& s = *shared_;
  const uint64_t bytes = page_payload_bytes(g);
  const size_t segments = size_t((bytes + kPayloadSegmentBytes - 1) / kPayloadSegmentBytes);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.room < segments) {  // may throw: nothing posted yet
      std::unique_ptr<std::atomic<bool>[]> done(new std::atomic<bool>[segments]);
      s.digests.resize(segments);
      s.done = std::move(done);
      s.room = segments;
    }
    for (size_t k = 0; k < segments; ++k) s.done[k].store(false, std::memory_order_relaxed);
    s.work = work;
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
  s.placement.keep_off_this_cpu(s.thread);  // before the wake-up places the copier
  s.wake.notify_one();
}

uint64_t SegmentCopier::finish() {
  Shared& s = *shared_;
  s.copy_segments();
  // The copier is in its last segment, or never took the page (asleep, or not run yet).
  spin_while([&s] { return s.copier_in.load(std::memory_order_acquire); });
  {
    std::unique_lock<std::mutex> lk(s.mu);
    if (s.taken < s.posted) {
      s.taken = s.posted;  // withdrawn: every segment is done, the copier must not take the page
    } else {
      s.left.wait(lk, [&s] { return !s.copier_in.load(std::memory_order_acquire); });
    }
  }
  PayloadHash hash;
  hash.add_segment_digests(s.digests.data(), s.segments);
  return hash.digest();
}

void SegmentCopier::wait_segment(size_t segment) {
  Shared& s = *shared_;
  while (!s.done[segment].load(std::memory_order_acquire)) {
    const size_t next = s.next.fetch_add(1, std::memory_order_relaxed);
    if (next < s.segments) {  // this thread would wait: it does the next segment itself
      s.do_segment(next);
      continue;
    }
    // Every segment is taken: the copier is on this one. Spin briefly, then sleep.
    spin_while([&s, segment] { return !s.done[segment].load(std::memory_order_acquire); });
    std::unique_lock<std::mutex> lk(s.mu);
    s.waiting_for_segment.fetch_add(1);
    s.left.wait(lk, [&s, segment] { return s.done[segment].load(); });
    s.waiting_for_segment.fetch_sub(1);
  }
}

bool SegmentCopier::copier_cpus(cpu_set_t* out) const {
  return pthread_getaffinity_np(const_cast<std::thread&>(shared_->thread).native_handle(), sizeof(*out), out) == 0;
}

bool SegmentCopier::segment_done(size_t segment) const { return shared_->done[segment].load(); }

size_t SegmentCopier::last_copier_segments() const {
  std::lock_guard<std::mutex> lk(shared_->mu);
  return shared_->copier_segments;
}

bool SegmentCopier::worthwhile() { return PayloadHasher::worthwhile(); }  // the same question

}  // namespace kvp::storage
