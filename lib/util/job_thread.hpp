// A thread that runs the jobs handed to it, one at a time, in the order given.
//
// Its user is the CUDA host tier (cuda/host_transfer.cu): the copy engines cost the
// host about 0.6 µs per DMA operation to enqueue (cudaMemcpyBatchAsync;
// docs/performance.md), 2-5 ms for a 4,096-token load of 32 layers. A transfer hands
// that enqueueing to this thread and returns in microseconds; everything the engine
// waits on is stream-ordered (a stream wait on a flag the job writes), so nothing
// depends on when the thread gets to it. Plain C++, so that its tests run (and run
// under ThreadSanitizer) without a GPU: tests/threads/job_thread_test.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace kvp::util {

class JobThread {
 public:
  // A unit of work; its owner reuses it once done() (run() has returned).
  class Job {
   public:
    virtual ~Job() = default;
    bool done() const { return !busy_.load(std::memory_order_acquire); }

   protected:
    virtual void run() = 0;

   private:
    friend class JobThread;
    std::atomic<bool> busy_{false};
  };

  // Starts the thread (std::system_error if it cannot).
  JobThread() : thread_([this] { loop(); }) {}

  // Runs the jobs still queued, then ends the thread.
  ~JobThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  JobThread(const JobThread&) = delete;
  JobThread& operator=(const JobThread&) = delete;

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
  void loop() {
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

}  // namespace kvp::util
