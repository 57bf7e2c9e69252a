// The storage tier's engine (SGLANG_SEMANTICS §5.5): backups host -> storage and
// prefetches storage -> host, each on its own background thread, so that no
// caller's thread ever waits on storage I/O (with set_pipelined_reads, the prefetch
// thread adds a third, its PayloadHasher, to hash pages beside the reads: page_stream.hpp).
//
// The tier does not own host pages. A backup reads pages its caller keeps held
// (pinned) until the backup is reported finished; a prefetch writes pages its
// caller allocated and keeps until the prefetch is finished. Progress is read
// without blocking; finishing a prefetch takes the pages that have landed (always
// a prefix of the asked pages, each one checked) and leaves the rest to the
// worker, whose release the caller sees through take_released().
//
// Pages go in batches of at most 128 pages (SGLang's storage_batch_size) and at
// most 64 MiB of staging memory per thread (or one page, if larger), kept from one
// job to the next (staging_buffer.hpp); backends that stream (the file backend)
// take each page straight from or into its host page, without staging.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cache/page_hash.hpp"
#include "host/host_geometry.hpp"
#include "storage/blob_store.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"
#include "storage/page_stream.hpp"
#include "storage/staging_buffer.hpp"

namespace kvp::storage {

// Counters of the tier (monotonic), beside the backend's own (BlobStats).
struct StorageTierStats {
  uint64_t backups = 0;               // backup jobs queued
  uint64_t backup_pages = 0;          // pages the backend stored (or already had)
  uint64_t backup_pages_failed = 0;   // pages the backend failed to store (the job stops at its first failed batch)
  uint64_t backup_bytes = 0;          // stored bytes written
  uint64_t prefetches = 0;            // prefetch jobs started
  uint64_t prefetches_revoked = 0;    // ... dropped: fewer consecutive pages in storage than the threshold
  uint64_t prefetch_hit_pages = 0;    // pages found in storage (consecutive from each job's start)
  uint64_t prefetch_pages = 0;        // pages read, checked and written to the host tier
  uint64_t prefetch_bytes = 0;        // stored bytes read
  uint64_t pages_corrupt = 0;         // read pages rejected: damaged (checksum, magic, trailing bytes)
  uint64_t pages_truncated = 0;       // ... shorter than they must be
  uint64_t pages_foreign = 0;         // ... written by another model, layout version or key
  uint64_t read_failures = 0;         // pages the backend could not read (error or gone since exists)
};

class StorageTier {
 public:
  // `host`: the host tier's buffer, laid out by `geometry`. The two threads start with the
  // first job (start()): a pool that never uses the tier runs none.
  StorageTier(std::unique_ptr<BlobStore> store, const host::HostGeometry& geometry, uint8_t* host);
  // Stops the threads after their current batch; queued jobs are dropped.
  ~StorageTier();
  StorageTier(const StorageTier&) = delete;
  StorageTier& operator=(const StorageTier&) = delete;

  BlobStore& store() { return *store_; }
  // Starts the threads if they are not running (throws std::system_error when the system
  // cannot; nothing changed then). backup() and prefetch() call it first.
  void start();
  uint64_t payload_bytes() const { return payload_bytes_; }

  // ---- backups: host pages -> storage ----
  // Queues host pages `pages` with their digests (same count) in namespace `fp`; the pages
  // must stay as they are until take_finished_backups() reports the returned id.
  uint64_t backup(std::vector<int64_t> pages, std::vector<cache::Digest> digests, const Fingerprint& fp);
  // Ids of backups finished since the last call (their pages may change again).
  void take_finished_backups(std::vector<uint64_t>* ids);
  size_t backups_queued() const;

  // ---- prefetches: storage -> host pages ----
  // Reads the stored pages of `digests` (in namespace `fp`) into host pages `pages` (same
  // count), consecutive from the first, stopping at the first page not stored, failing to
  // read or failing a check. With fewer than `min_pages` consecutive stored pages the job is
  // revoked (reads nothing). The pages belong to the job until finish_prefetch().
  //
  // In two steps, so that a caller can allocate everything before it changes anything:
  // stage_prefetch() makes the job (start()s the threads; may throw, then nothing changed)
  // with room for `digests.size()` pages in StagedPrefetch::pages, which the caller fills;
  // commit_prefetch() queues it (allocates nothing) and returns its id. A staged job that
  // is never committed is simply dropped.
  struct PrefetchJob;  // defined below; the caller only carries it from stage to commit
  struct StagedPrefetch {
    std::shared_ptr<PrefetchJob> job;
    int64_t* pages = nullptr;  // the job's host pages, to fill before commit_prefetch()
    std::map<uint64_t, std::shared_ptr<PrefetchJob>>::node_type entry;  // its place in prefetch_jobs_
  };
  StagedPrefetch stage_prefetch(std::vector<cache::Digest> digests, const Fingerprint& fp, size_t min_pages);
  uint64_t commit_prefetch(StagedPrefetch staged) noexcept;
  struct Progress {
    bool known = false;      // the id names a job not yet finished
    bool done = false;       // the worker is through with it (all read, stopped, or revoked)
    bool revoked = false;
    size_t hit_pages = 0;    // consecutive stored pages found (valid once `searched`)
    bool searched = false;
    size_t loaded_pages = 0;  // pages [0, loaded) are in the host tier, checked
    size_t pages = 0;         // pages asked for
  };
  Progress progress(uint64_t id) const;
  // Ends the job now, without waiting: returns the pages landed so far, at most `keep` (a
  // prefix of the asked ones, now the caller's again, with their data). The other pages
  // come back through take_released() once the worker no longer writes them (at once if
  // done). Allocates nothing after reserve_finish() for a job of at least that many pages.
  size_t finish_prefetch(uint64_t id, size_t keep = SIZE_MAX);
  // Makes room for finish_prefetch() of a job of `pages` pages (may throw std::bad_alloc;
  // then nothing changed), so that a caller can end a prefetch without a failure halfway.
  void reserve_finish(size_t pages);
  // Host pages of finished prefetches that the worker has let go of.
  void take_released(std::vector<int64_t>* pages);

  // Whether streamed prefetches (the file backend) hash each page on a thread of their own
  // while the rest of it is read (page_stream.hpp's PayloadHasher, started with the first
  // such page; never on a machine with one core). On by default where the machine has at
  // least 4 CPUs (pipelined_reads_by_default): there it took reads from 63 % to 94 % of a
  // plain read; on the project's 2-core VM it did not pay (docs/storage-file.md). Off, each
  // page is read, then hashed, on the prefetch thread. Benchmarks compare the two; tests
  // cover both.
  void set_pipelined_reads(bool on) { pipelined_reads_.store(on, std::memory_order_relaxed); }
  static bool pipelined_reads_by_default();

  // Whether a prefetched page of at least kSegmentCopyFrom bytes that is already in memory
  // (a cached file the backend maps, or a staged value of memcached and redis) is copied
  // into its host page by the prefetch thread and a second thread together
  // (segment_copier.hpp, started with the first such page; never on a machine with one
  // CPU). On by default: on the project's 2-core VM it took a one-page read from 0.64-0.67
  // to 0.88-0.98 of a plain read() (docs/performance.md). Before pipelined reads where both
  // apply. Backups use a copier of their own: staged pages are gathered by two threads, and
  // streamed ones hashed on the copier's while the backup thread writes. Off, each worker
  // thread works alone, as before. Benchmarks compare the two; tests cover both.
  void set_segment_copies(bool on) { segment_copies_.store(on, std::memory_order_relaxed); }

  StorageTierStats stats() const;
  // Blocks until both queues are empty and no batch runs (tests, pool teardown of a finished run).
  void wait_idle();

  // Declared public above (StagedPrefetch carries one); its members are the tier's business.
  struct PrefetchJob {
    uint64_t id;
    std::vector<int64_t> pages;
    std::vector<cache::Digest> digests;
    Fingerprint fp;
    size_t min_pages;
    std::atomic<bool> stop{false};
    std::atomic<bool> searched{false};
    std::atomic<bool> revoked{false};
    std::atomic<bool> done{false};
    std::atomic<size_t> hit_pages{0};
    std::atomic<size_t> loaded{0};
    size_t taken = SIZE_MAX;  // finish_prefetch: pages [taken, size) wait for the worker to let go (main thread only)
  };

 private:
  // A worker thread's SegmentCopier, and whether making it was tried.
  struct CopierSlot {
    std::unique_ptr<SegmentCopier> copier;
    bool tried = false;
  };
  struct BackupJob {
    uint64_t id;
    std::vector<int64_t> pages;
    std::vector<cache::Digest> digests;
    Fingerprint fp;
  };
  void backup_loop();
  void prefetch_loop();
  void run_backup(const BackupJob& job);
  void run_prefetch(PrefetchJob& job);
  // A job whose work threw (std::bad_alloc): counted and reported as a failed job; the
  // loops then finish it as any other (ids, flags, idle_), so no wait hangs on it.
  void fail_backup(const BackupJob& job, uint64_t stored, uint64_t failed) noexcept;
  void fail_prefetch(PrefetchJob& job) noexcept;
  // Backends with streamed calls (file): pages move without the staging buffers.
  void run_backup_streamed(const BackupJob& job);
  void load_streamed(PrefetchJob& job, const std::vector<std::string>& keys, size_t hits);
  void count_rejected(PageCheck check);
  PayloadHasher* payload_hasher();
  SegmentCopier* segment_copier(CopierSlot* slot);
  uint64_t scatter_checked(int64_t page, const uint8_t* payload);
  uint64_t gather_checked(int64_t page, uint8_t* payload);
  size_t batch_pages() const;
  // Log (kvpool/log.h): the backend's failures since the last report, after a batch of
  // either thread; `during` names what the batch did. Cheap when no callback takes warnings.
  void report_backend(const char* during) noexcept;

  // The backend's counters as last reported (under report_mu_).
  std::mutex report_mu_;
  BlobStats reported_;

  std::unique_ptr<BlobStore> store_;
  host::HostGeometry g_;
  uint8_t* host_;
  uint64_t payload_bytes_;
  size_t stored_bytes_;

  mutable std::mutex mu_;
  // One wake-up per thread: a prefetch wakes only the prefetch thread (a shared one woke the
  // backup thread too, which then contended for mu_ with the prefetch it had no part in: a
  // context switch per job on a 2-core machine). idle_: wait_idle().
  std::condition_variable backup_wake_, prefetch_wake_, idle_;
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;
  std::deque<BackupJob> backups_;
  std::vector<uint64_t> finished_backups_;
  bool backup_running_ = false;
  // A vector, not a deque: stage_prefetch() reserves the slot commit_prefetch() fills.
  std::vector<std::shared_ptr<PrefetchJob>> prefetch_queue_;
  std::map<uint64_t, std::shared_ptr<PrefetchJob>> prefetch_jobs_;  // not yet finished by the caller
  std::vector<std::shared_ptr<PrefetchJob>> letting_go_;            // finished by the caller, worker not done
  std::vector<int64_t> released_;                                    // pages given back, for take_released()
  bool prefetch_running_ = false;

  struct Counters {
    std::atomic<uint64_t> backups{0}, backup_pages{0}, backup_pages_failed{0}, backup_bytes{0};
    std::atomic<uint64_t> prefetches{0}, prefetches_revoked{0}, prefetch_hit_pages{0}, prefetch_pages{0},
        prefetch_bytes{0};
    std::atomic<uint64_t> pages_corrupt{0}, pages_truncated{0}, pages_foreign{0}, read_failures{0};
  } counters_;

  std::atomic<bool> pipelined_reads_{pipelined_reads_by_default()};
  // The prefetch thread's PayloadHasher (its own; made with its first streamed page of at least
  // kPipelinedReadFrom bytes); stopped after that thread, in the destructor.
  std::unique_ptr<PayloadHasher> hasher_;
  bool hasher_tried_ = false;  // not tried again when it failed (one core, no thread): the reads work without it
  std::atomic<bool> segment_copies_{true};
  // Each worker thread's SegmentCopier (made with its first page of at least kSegmentCopyFrom
  // bytes; not tried again when that failed); stopped after that thread, in the destructor.
  CopierSlot backup_copier_, prefetch_copier_;

  // Staging for backends that do not stream: each thread's own.
  StagingBuffer backup_staging_, prefetch_staging_;

  bool started_ = false;  // under mu_
  std::thread backup_thread_, prefetch_thread_;
};

}  // namespace kvp::storage
