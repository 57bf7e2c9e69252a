// util::JobThread (lib/util/job_thread.hpp), the thread that enqueues the CUDA host
// tier's copy-engine work: jobs run one at a time in the order submitted, see what the
// submitter wrote into them, can be reused once done, and a thread destroyed with jobs
// queued runs them first. Label `threads`: also run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "util/job_thread.hpp"

namespace {

using kvp::util::JobThread;

// Appends its payload to a log only the job thread writes (read after the jobs are done).
class LogJob final : public JobThread::Job {
 public:
  LogJob(std::vector<int>* log, std::atomic<int>* ran) : log_(log), ran_(ran) {}
  int payload = 0;          // written by the submitter before submit()
  int sleep_us = 0;
  std::vector<int> seen;    // the payloads this job ran with, in order

 protected:
  void run() override {
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    log_->push_back(payload);
    seen.push_back(payload);
    ran_->fetch_add(1, std::memory_order_release);
  }

 private:
  std::vector<int>* log_;
  std::atomic<int>* ran_;
};

// Blocks the job thread until `open` is set.
class GateJob final : public JobThread::Job {
 public:
  std::atomic<bool> open{false};

 protected:
  void run() override {
    while (!open.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
};

TEST(JobThread, RunsJobsInOrderAndWaitSeesThem) {
  std::vector<int> log;
  std::atomic<int> ran{0};
  std::vector<std::unique_ptr<LogJob>> jobs;
  JobThread thread;
  for (int i = 0; i < 200; ++i) {
    jobs.emplace_back(new LogJob(&log, &ran));
    jobs.back()->payload = i;
    jobs.back()->sleep_us = i % 17 == 0 ? 200 : 0;  // some jobs make the next ones queue up
    thread.submit(jobs.back().get());
  }
  thread.wait_until([&] { return ran.load(std::memory_order_acquire) == 200; });
  for (const auto& j : jobs) EXPECT_TRUE(j->done());
  ASSERT_EQ(log.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(log[static_cast<size_t>(i)], i);
}

TEST(JobThread, AJobIsNotDoneUntilItRanAndCanBeReused) {
  std::vector<int> log;
  std::atomic<int> ran{0};
  LogJob job(&log, &ran);
  GateJob gate;
  JobThread thread;
  EXPECT_TRUE(job.done());  // never submitted
  thread.submit(&gate);
  job.payload = 1;
  thread.submit(&job);
  EXPECT_FALSE(job.done());  // queued behind the closed gate
  EXPECT_FALSE(gate.done());
  gate.open.store(true, std::memory_order_release);
  thread.wait_until([&] { return job.done(); });
  EXPECT_EQ(ran.load(), 1);
  // Reused with a new payload, a few times; each run sees the payload written before its submit.
  for (int k = 2; k < 6; ++k) {
    job.payload = k;
    thread.submit(&job);
    thread.wait_until([&] { return job.done(); });
  }
  EXPECT_EQ(job.seen, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(JobThread, DestroyedWithJobsQueuedRunsThemFirst) {
  std::vector<int> log;
  std::atomic<int> ran{0};
  std::vector<std::unique_ptr<LogJob>> jobs;
  GateJob gate;
  std::thread opener;
  {
    JobThread thread;
    thread.submit(&gate);
    for (int i = 0; i < 50; ++i) {
      jobs.emplace_back(new LogJob(&log, &ran));
      jobs.back()->payload = i;
      thread.submit(jobs.back().get());
    }
    EXPECT_EQ(ran.load(), 0);  // all behind the gate
    // The gate opens while the destructor below already waits for the thread.
    opener = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate.open.store(true, std::memory_order_release);
    });
  }
  opener.join();
  EXPECT_EQ(ran.load(), 50);
  ASSERT_EQ(log.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(log[static_cast<size_t>(i)], i);
  for (const auto& j : jobs) EXPECT_TRUE(j->done());
  EXPECT_TRUE(gate.done());
}

TEST(JobThread, SubmittersOnSeveralThreadsInTurn) {
  // The transfer's calls are not thread-safe, but a thread-safe pool may make them from
  // different threads one after another: hand-offs from changing threads stay ordered.
  std::vector<int> log;
  std::atomic<int> ran{0};
  std::vector<std::unique_ptr<LogJob>> jobs;
  for (int i = 0; i < 40; ++i) jobs.emplace_back(new LogJob(&log, &ran));
  JobThread thread;
  for (int t = 0; t < 4; ++t) {
    std::thread submitter([&, t] {
      for (int i = 0; i < 10; ++i) {
        LogJob* j = jobs[static_cast<size_t>(t * 10 + i)].get();
        j->payload = t * 10 + i;
        thread.submit(j);
      }
    });
    submitter.join();
  }
  thread.wait_until([&] { return ran.load(std::memory_order_acquire) == 40; });
  ASSERT_EQ(log.size(), 40u);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(log[static_cast<size_t>(i)], i);
}

}  // namespace
