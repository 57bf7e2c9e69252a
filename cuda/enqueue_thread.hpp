// A thread that makes the CUDA calls of the jobs handed to it, in the order given.
//
// The copy engines cost the host about 0.6 µs per DMA operation to enqueue
// (cudaMemcpyBatchAsync; docs/performance.md, "Host tier transfers"): 2-3 ms for a
// 4,096-token load of 32 layers. A transfer hands such a job to this thread and
// returns in microseconds; everything the engine waits on is stream-ordered (a stream
// wait on a flag the job writes), so nothing depends on when the thread gets to it.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace kvp::host {

class EnqueueThread {
 public:
  // A unit of work; its owner reuses it once done() (run() has returned).
  class Job {
   public:
    virtual ~Job() = default;
    bool done() const { return !busy_.load(std::memory_order_acquire); }

   protected:
    virtual void run() = 0;

   private:
    friend class EnqueueThread;
    std::atomic<bool> busy_{false};
  };

  explicit EnqueueThread(int device) : thread_([this, device] { loop(device); }) {}

  // Runs the jobs still queued, then ends the thread.
  ~EnqueueThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  EnqueueThread(const EnqueueThread&) = delete;
  EnqueueThread& operator=(const EnqueueThread&) = delete;

  // Queues `job` (not done until it has run). Throws std::bad_alloc only, with nothing queued.
  void submit(Job* job) {
    bool sleeping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(job);  // may throw: busy_ is set after
      job->busy_.store(true, std::memory_order_release);
      sleeping = sleeping_;
    }
    // Outside the lock, so that the thread does not wake into a held mutex; and only when
    // it sleeps: a busy thread takes the job after the one it runs.
    if (sleeping) wake_.notify_one();
  }

  // Blocks until `ready()` holds; it is re-checked after every job.
  template <class Ready>
  void wait_until(Ready ready) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, ready);
  }

 private:
  void loop(int device) {
    (void)cudaSetDevice(device);  // a failure shows in the jobs' own calls
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      sleeping_ = true;
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      sleeping_ = false;
      if (queue_.empty()) return;  // stop_, and nothing left
      Job* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      job->run();
      lock.lock();
      job->busy_.store(false, std::memory_order_release);
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;  // a job or stop_
  std::condition_variable done_;  // a job ran
  std::deque<Job*> queue_;
  bool stop_ = false;
  bool sleeping_ = false;  // the thread waits on wake_ (set and read under mutex_)
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace kvp::host
