#include "storage/storage_tier.hpp"

#include <algorithm>
#include <new>
#include <system_error>
#include <thread>

#include "storage/page_codec.hpp"
#include "storage/page_stream.hpp"
#include "storage/segment_copier.hpp"
#include "util/log.hpp"

namespace kvp::storage {
namespace {

constexpr size_t kBatchPages = 128;               // SGLang's storage_batch_size
constexpr size_t kStagingBytes = size_t(64) << 20;  // per thread

// ", 3 put errors" when `now` grew past `before`.
void add_growth(std::string* out, uint64_t before, uint64_t now, const char* what) {
  if (now > before) *out += ", " + std::to_string(now - before) + " " + what;
}

const char* check_name(PageCheck check) {
  return check == PageCheck::kTruncated ? "truncated" : check == PageCheck::kCorrupt ? "damaged" : "foreign";
}

}  // namespace

void StorageTier::report_backend(const char* during) noexcept {
  if (!log::enabled(KVPOOL_LOG_WARN)) return;
  const BlobStats now = store_->stats();
  std::string found;
  try {  // building the message may run out of memory: then there is no report this time
    std::lock_guard<std::mutex> lk(report_mu_);
    add_growth(&found, reported_.put_errors, now.put_errors, "put errors");
    add_growth(&found, reported_.get_errors, now.get_errors, "get errors");
    add_growth(&found, reported_.timeouts, now.timeouts, "timeouts");
    add_growth(&found, reported_.server_errors, now.server_errors, "server errors");
    add_growth(&found, reported_.io_errors, now.io_errors, "file system errors");
    add_growth(&found, reported_.servers_ejected, now.servers_ejected, "servers taken out of rotation");
    add_growth(&found, reported_.partial_values, now.partial_values, "values with a part missing");
    reported_ = now;
  } catch (...) {  // reported_ kept: the next report covers these failures too
    return;
  }
  if (found.empty()) return;
  KVPOOL_LOG(KVPOOL_LOG_WARN, std::string("storage backend, ") + during + ": since the last report" + found +
                                  " (kvstore_get_stats has the totals)");
}

StorageTier::StorageTier(std::unique_ptr<BlobStore> store, const host::HostGeometry& geometry, uint8_t* host)
    : store_(std::move(store)),
      g_(geometry),
      host_(host),
      payload_bytes_(page_payload_bytes(geometry)),
      stored_bytes_(stored_page_bytes(payload_bytes_)) {}

void StorageTier::start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (started_) return;
  std::thread backup([this] { backup_loop(); });
  try {
    prefetch_thread_ = std::thread([this] { prefetch_loop(); });
  } catch (...) {  // both or neither: stop the first one again
    stopping_ = true;
    backup_wake_.notify_all();
    mu_.unlock();
    backup.join();
    mu_.lock();
    stopping_ = false;
    throw;
  }
  backup_thread_ = std::move(backup);
  started_ = true;
}

StorageTier::~StorageTier() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  backup_wake_.notify_all();
  prefetch_wake_.notify_all();
  if (backup_thread_.joinable()) backup_thread_.join();
  if (prefetch_thread_.joinable()) prefetch_thread_.join();
}

size_t StorageTier::batch_pages() const {
  return std::max<size_t>(1, std::min(kBatchPages, kStagingBytes / stored_bytes_));
}

uint64_t StorageTier::backup(std::vector<int64_t> pages, std::vector<cache::Digest> digests, const Fingerprint& fp) {
  start();
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    id = next_id_;
    // The backup thread reports every job it ends in finished_backups_, and must not fail
    // to: room for this job's id is made here, where a failure only refuses the backup.
    finished_backups_.reserve(finished_backups_.size() + backups_.size() + (backup_running_ ? 1 : 0) + 1);
    backups_.push_back(BackupJob{id, std::move(pages), std::move(digests), fp});  // may throw: no id used
    ++next_id_;
  }
  counters_.backups.fetch_add(1, std::memory_order_relaxed);
  backup_wake_.notify_one();
  return id;
}

void StorageTier::take_finished_backups(std::vector<uint64_t>* ids) {
  std::lock_guard<std::mutex> lk(mu_);
  ids->insert(ids->end(), finished_backups_.begin(), finished_backups_.end());
  finished_backups_.clear();
}

size_t StorageTier::backups_queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return backups_.size() + (backup_running_ ? 1 : 0);
}

void StorageTier::backup_loop() {
  for (;;) {
    BackupJob job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      backup_wake_.wait(lk, [this] { return stopping_ || !backups_.empty(); });
      if (stopping_) return;
      job = std::move(backups_.front());
      backups_.pop_front();
      backup_running_ = true;
    }
    // An exception must not leave this thread (std::terminate would end the engine's
    // process): a job that runs out of memory ends as a failed backup, and the loop goes on.
    const uint64_t stored = counters_.backup_pages.load(std::memory_order_relaxed);
    const uint64_t failed = counters_.backup_pages_failed.load(std::memory_order_relaxed);
    try {
      run_backup(job);
    } catch (...) {
      fail_backup(job, stored, failed);
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      finished_backups_.push_back(job.id);  // within the capacity backup() reserved: never throws
      backup_running_ = false;
    }
    idle_.notify_all();
  }
}

// The pages of the job not counted yet (stored or failed: only this thread adds to those
// two counters, so what they grew by since `stored` and `failed` is the job's) are counted
// failed, as when a batch fails; pages of the batch under way that reached the backend
// before the failure count as failed too (a later backup finds them: put_existing).
void StorageTier::fail_backup(const BackupJob& job, uint64_t stored, uint64_t failed) noexcept {
  const uint64_t counted = counters_.backup_pages.load(std::memory_order_relaxed) - stored +
                           counters_.backup_pages_failed.load(std::memory_order_relaxed) - failed;
  const uint64_t n = job.pages.size();
  if (counted < n) counters_.backup_pages_failed.fetch_add(n - counted, std::memory_order_relaxed);
  KVPOOL_LOG(KVPOOL_LOG_WARN, "storage backup of " + std::to_string(n) + " pages stopped: out of host memory, " +
                                  std::to_string(n - std::min(counted, n)) + " pages not stored");
}

void StorageTier::run_backup(const BackupJob& job) {
  if (store_->streams()) {
    run_backup_streamed(job);
    return;
  }
  // Staging for the job's pages only, up to a batch: a one-page job of 8 MiB pages would
  // otherwise fault in 56 MiB the first time (bench_storage_file's staged tier rows).
  const size_t n = job.pages.size(), per = std::min(batch_pages(), n);
  uint8_t* const staging = backup_staging_.reserve(per * stored_bytes_);
  if (staging == nullptr) {
    counters_.backup_pages_failed.fetch_add(n, std::memory_order_relaxed);
    KVPOOL_LOG(KVPOOL_LOG_WARN, "storage backup of " + std::to_string(n) +
                                    " pages not stored: no memory to stage them in");
    return;
  }
  std::vector<std::string> keys(per);
  std::vector<const uint8_t*> values(per);
  std::vector<size_t> sizes(per, stored_bytes_);
  std::vector<BlobResult> results(per);
  for (size_t i = 0; i < per; ++i) values[i] = staging + i * stored_bytes_;
  for (size_t start = 0; start < n && !stopping_; start += per) {
    const size_t k = std::min(per, n - start);
    for (size_t i = 0; i < k; ++i) {
      uint8_t* page = staging + i * stored_bytes_;
      const uint64_t hash = gather_checked(job.pages[start + i], page + kPageHeaderBytes);
      seal_page_hashed(page, payload_bytes_, hash, job.fp, job.digests[start + i]);
      keys[i] = page_key(job.fp, job.digests[start + i]);
    }
    store_->put(keys.data(), values.data(), sizes.data(), k, results.data());
    const size_t ok = size_t(std::count(results.begin(), results.begin() + long(k), BlobResult::kOk));
    counters_.backup_pages.fetch_add(ok, std::memory_order_relaxed);
    counters_.backup_bytes.fetch_add(ok * stored_bytes_, std::memory_order_relaxed);
    report_backend("storing pages");
    if (ok < k) {  // as SGLang: a job stops at its first failed batch; the rest is not tried
      counters_.backup_pages_failed.fetch_add(n - start - ok, std::memory_order_relaxed);
      KVPOOL_LOG(KVPOOL_LOG_WARN, "storage backup of " + std::to_string(n) + " pages stopped: " +
                                      std::to_string(k - ok) + " of a batch of " + std::to_string(k) +
                                      " failed to store, " + std::to_string(n - start - ok) + " pages not stored");
      return;
    }
  }
}

// Each page goes straight from its host page to the backend (page_stream.hpp): no
// staging copy, and the checksum is computed on chunks that the write then copies
// while they are still in the cache. Batches as above: a batch with a failed page
// ends the job.
void StorageTier::run_backup_streamed(const BackupJob& job) {
  const size_t n = job.pages.size();
  SegmentCopier* copier = segment_copier(&backup_copier_);
  // Pages that the host scatters in short runs are gathered by the copier into staging and
  // written from there (write_stored_page); without the memory they are written as they lie.
  uint8_t* staging = copier != nullptr && has_short_runs(g_) ? backup_staging_.reserve(payload_bytes_) : nullptr;
  std::string key;
  for (size_t start = 0; start < n && !stopping_; start += kBatchPages) {
    const size_t k = std::min(kBatchPages, n - start);
    size_t ok = 0;
    for (size_t i = start; i < start + k; ++i) {
      key = page_key(job.fp, job.digests[i]);
      StoredPageProducer producer(g_, host_, job.pages[i], job.fp, job.digests[i], copier, staging);
      if (store_->put_streamed(key, stored_bytes_, producer) == BlobResult::kOk) ++ok;
    }
    counters_.backup_pages.fetch_add(ok, std::memory_order_relaxed);
    counters_.backup_bytes.fetch_add(ok * stored_bytes_, std::memory_order_relaxed);
    report_backend("storing pages");
    if (ok < k) {
      counters_.backup_pages_failed.fetch_add(n - start - ok, std::memory_order_relaxed);
      KVPOOL_LOG(KVPOOL_LOG_WARN, "storage backup of " + std::to_string(n) + " pages stopped: " +
                                      std::to_string(k - ok) + " of a batch of " + std::to_string(k) +
                                      " failed to store, " + std::to_string(n - start - ok) + " pages not stored");
      return;
    }
  }
}

StorageTier::StagedPrefetch StorageTier::stage_prefetch(std::vector<cache::Digest> digests, const Fingerprint& fp,
                                                        size_t min_pages) {
  start();
  StagedPrefetch staged;
  staged.job = std::make_shared<PrefetchJob>();
  PrefetchJob& job = *staged.job;
  job.pages.resize(digests.size());
  job.digests = std::move(digests);
  job.fp = fp;
  job.min_pages = min_pages;
  staged.pages = job.pages.data();
  // The map node is made now and inserted by commit_prefetch() without allocating.
  std::map<uint64_t, std::shared_ptr<PrefetchJob>> made;
  made.emplace(0, staged.job);
  staged.entry = made.extract(made.begin());
  std::lock_guard<std::mutex> lk(mu_);
  prefetch_queue_.reserve(prefetch_queue_.size() + 1);  // only the caller's thread adds jobs
  return staged;
}

uint64_t StorageTier::commit_prefetch(StagedPrefetch staged) noexcept {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    id = next_id_++;
    staged.job->id = id;
    staged.entry.key() = id;
    prefetch_jobs_.insert(std::move(staged.entry));
    prefetch_queue_.push_back(std::move(staged.job));  // within the capacity stage_prefetch() reserved
  }
  counters_.prefetches.fetch_add(1, std::memory_order_relaxed);
  prefetch_wake_.notify_one();
  return id;
}

StorageTier::Progress StorageTier::progress(uint64_t id) const {
  Progress p;
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = prefetch_jobs_.find(id);
  if (it == prefetch_jobs_.end()) return p;
  const PrefetchJob& job = *it->second;
  p.known = true;
  p.done = job.done.load(std::memory_order_acquire);
  p.revoked = job.revoked.load(std::memory_order_acquire);
  p.searched = job.searched.load(std::memory_order_acquire);
  p.hit_pages = job.hit_pages.load(std::memory_order_acquire);
  p.loaded_pages = job.loaded.load(std::memory_order_acquire);
  p.pages = job.pages.size();
  return p;
}

void StorageTier::reserve_finish(size_t pages) {
  std::lock_guard<std::mutex> lk(mu_);
  released_.reserve(released_.size() + pages);
  letting_go_.reserve(letting_go_.size() + 1);
}

size_t StorageTier::finish_prefetch(uint64_t id, size_t keep) {
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = prefetch_jobs_.find(id);
  if (it == prefetch_jobs_.end()) return 0;
  std::shared_ptr<PrefetchJob> job = it->second;
  prefetch_jobs_.erase(it);
  job->stop.store(true, std::memory_order_release);
  const auto queued = std::find(prefetch_queue_.begin(), prefetch_queue_.end(), job);
  const bool never_started = queued != prefetch_queue_.end();
  if (never_started) prefetch_queue_.erase(queued);
  // Read after `stop`: the worker publishes a page only after writing it, so pages
  // [0, taken) are whole; it may still write pages past them until it is done.
  job->taken = std::min(keep, job->loaded.load(std::memory_order_acquire));
  if (never_started || job->done.load(std::memory_order_acquire)) {
    released_.insert(released_.end(), job->pages.begin() + long(job->taken), job->pages.end());
  } else {
    letting_go_.push_back(job);
  }
  return job->taken;
}

void StorageTier::take_released(std::vector<int64_t>* pages) {
  std::lock_guard<std::mutex> lk(mu_);
  size_t kept = 0;
  for (auto& job : letting_go_) {
    if (job->done.load(std::memory_order_acquire)) {
      released_.insert(released_.end(), job->pages.begin() + long(job->taken), job->pages.end());
    } else {
      letting_go_[kept++] = std::move(job);
    }
  }
  letting_go_.resize(kept);
  pages->insert(pages->end(), released_.begin(), released_.end());
  released_.clear();
}

void StorageTier::prefetch_loop() {
  for (;;) {
    std::shared_ptr<PrefetchJob> job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      prefetch_wake_.wait(lk, [this] { return stopping_ || !prefetch_queue_.empty(); });
      if (stopping_) return;
      job = std::move(prefetch_queue_.front());
      prefetch_queue_.erase(prefetch_queue_.begin());  // a handful of queued jobs at most
      prefetch_running_ = true;
    }
    try {  // as backup_loop(): nothing may leave the thread
      run_prefetch(*job);
    } catch (...) {
      fail_prefetch(*job);
    }
    job->done.store(true, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lk(mu_);
      prefetch_running_ = false;
    }
    idle_.notify_all();
  }
}

// Out of memory (the keys, a batch's vectors): the job ends with the pages it loaded, a
// checked prefix, and counts one read failure, as when it finds no memory to stage pages in.
// A job that ran out before its search ends searched, with nothing found.
void StorageTier::fail_prefetch(PrefetchJob& job) noexcept {
  counters_.read_failures.fetch_add(1, std::memory_order_relaxed);
  job.searched.store(true, std::memory_order_release);
  KVPOOL_LOG(KVPOOL_LOG_WARN, "storage prefetch stopped: out of host memory; " +
                                  std::to_string(job.loaded.load(std::memory_order_acquire)) + " pages loaded");
}

void StorageTier::run_prefetch(PrefetchJob& job) {
  const size_t n = job.pages.size();
  std::vector<std::string> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = page_key(job.fp, job.digests[i]);
  // How far the stored prefix goes: existence first, in batches, so a short hit reads nothing.
  size_t hits = 0;
  for (size_t start = 0; start < n && !stopping_ && !job.stop.load(std::memory_order_acquire);
       start += kBatchPages) {
    const size_t k = std::min(kBatchPages, n - start);
    const size_t found = store_->exists_prefix(keys.data() + start, k);
    report_backend("looking pages up");
    hits += found;
    if (found < k) break;
  }
  job.hit_pages.store(hits, std::memory_order_release);
  job.searched.store(true, std::memory_order_release);
  counters_.prefetch_hit_pages.fetch_add(hits, std::memory_order_relaxed);
  if (hits == 0 || hits < job.min_pages) {
    job.revoked.store(true, std::memory_order_release);
    counters_.prefetches_revoked.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (store_->streams()) {
    load_streamed(job, keys, hits);
    return;
  }
  const size_t per = std::min(batch_pages(), hits);  // staging for the hits only, up to a batch
  uint8_t* const staging = prefetch_staging_.reserve(per * stored_bytes_);
  if (staging == nullptr) {  // nothing read: the prefix ends before its first page
    counters_.read_failures.fetch_add(1, std::memory_order_relaxed);
    KVPOOL_LOG(KVPOOL_LOG_WARN, "storage prefetch: no memory to stage the pages in; nothing loaded");
    return;
  }
  std::vector<uint8_t*> dst(per);
  std::vector<size_t> capacity(per, stored_bytes_), sizes(per);
  std::vector<BlobResult> results(per);
  for (size_t i = 0; i < per; ++i) dst[i] = staging + i * stored_bytes_;
  for (size_t start = 0; start < hits; start += per) {
    if (stopping_ || job.stop.load(std::memory_order_acquire)) return;
    const size_t k = std::min(per, hits - start);
    store_->get(keys.data() + start, dst.data(), capacity.data(), k, sizes.data(), results.data());
    report_backend("reading pages");
    for (size_t i = 0; i < k; ++i) {
      if (results[i] != BlobResult::kOk) {  // gone since exists, or failed: the prefix ends here
        counters_.read_failures.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      // The header first; the payload is checked as it is copied into the host page, which
      // is published (loaded) only when its checksum matched.
      uint64_t expected = 0;
      PageCheck check = check_page_header(dst[i], sizes[i], job.fp, job.digests[start + i], payload_bytes_, &expected);
      if (check == PageCheck::kOk && scatter_checked(job.pages[start + i], dst[i] + kPageHeaderBytes) != expected) {
        check = PageCheck::kCorrupt;
      }
      if (check != PageCheck::kOk) {
        count_rejected(check);
        return;
      }
      job.loaded.store(start + i + 1, std::memory_order_release);
      counters_.prefetch_pages.fetch_add(1, std::memory_order_relaxed);
      counters_.prefetch_bytes.fetch_add(sizes[i], std::memory_order_relaxed);
    }
  }
}

void StorageTier::count_rejected(PageCheck check) {
  auto& counter = check == PageCheck::kTruncated ? counters_.pages_truncated
                  : check == PageCheck::kCorrupt ? counters_.pages_corrupt
                                                 : counters_.pages_foreign;
  counter.fetch_add(1, std::memory_order_relaxed);
  KVPOOL_LOG(KVPOOL_LOG_WARN, std::string("storage prefetch: a stored page was rejected (") + check_name(check) +
                                  "); the prefetch stops there and the page is not loaded");
}

// Each page straight from the backend into its host page, checked as it lands
// (page_stream.hpp); the page is published only when every check passed. A page
// that fails leaves garbage in its host page, which is not published: the caller
// gets it back through take_released() and frees it.
void StorageTier::load_streamed(PrefetchJob& job, const std::vector<std::string>& keys, size_t hits) {
  PayloadHasher* hasher = payload_hasher();
  SegmentCopier* copier = segment_copier(&prefetch_copier_);
  for (size_t i = 0; i < hits; ++i) {
    if (stopping_ || job.stop.load(std::memory_order_acquire)) return;
    StoredPageConsumer consumer(g_, host_, job.pages[i], job.fp, job.digests[i], hasher, copier);
    uint64_t size = 0;
    const BlobResult result = store_->get_streamed(keys[i], consumer, &size);
    report_backend("reading pages");
    if (result != BlobResult::kOk) {  // gone since exists, or failed: the prefix ends here
      counters_.read_failures.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (consumer.check() != PageCheck::kOk) {
      count_rejected(consumer.check());
      return;
    }
    job.loaded.store(i + 1, std::memory_order_release);
    counters_.prefetch_pages.fetch_add(1, std::memory_order_relaxed);
    counters_.prefetch_bytes.fetch_add(size, std::memory_order_relaxed);
  }
}

// A second core to hash on, and spare ones for the rest of the process: measured on 16 CPUs
// (a win of 30 points) and 2 (none, at best), not in between.
bool StorageTier::pipelined_reads_by_default() { return std::thread::hardware_concurrency() >= 4; }

// The prefetch thread's hasher, started on first use; null when reads are not pipelined
// (turned off, pages too small to overlap, one core, or no thread to be had).
PayloadHasher* StorageTier::payload_hasher() {
  if (!pipelined_reads_.load(std::memory_order_relaxed) || payload_bytes_ < kPipelinedReadFrom) return nullptr;
  if (hasher_ == nullptr && !hasher_tried_) {
    hasher_tried_ = true;
    try {
      if (PayloadHasher::worthwhile()) hasher_ = std::make_unique<PayloadHasher>();
    } catch (const std::system_error&) {
    } catch (const std::bad_alloc&) {
    }
  }
  return hasher_.get();
}

// A worker thread's copier, started on first use; null when segment copies are off, pages
// are too small to share, the machine has one CPU, or no thread was to be had.
SegmentCopier* StorageTier::segment_copier(CopierSlot* slot) {
  if (!segment_copies_.load(std::memory_order_relaxed) || payload_bytes_ < kSegmentCopyFrom) return nullptr;
  if (slot->copier == nullptr && !slot->tried) {
    slot->tried = true;
    try {
      if (SegmentCopier::worthwhile()) slot->copier = std::make_unique<SegmentCopier>();
    } catch (const std::system_error&) {
    } catch (const std::bad_alloc&) {
    }
  }
  return slot->copier.get();
}

// A staged value's payload into host page `page` (the prefetch thread), with its copier
// where there is one; the payload checksum.
uint64_t StorageTier::scatter_checked(int64_t page, const uint8_t* payload) {
  if (SegmentCopier* copier = segment_copier(&prefetch_copier_)) {
    try {
      return copier->copy(g_, host_, page, payload);
    } catch (const std::bad_alloc&) {  // nothing copied: alone, then
    }
  }
  return scatter_page_hashed(g_, host_, page, payload);
}

// Host page `page` into a staged value's payload (the backup thread), the same way.
uint64_t StorageTier::gather_checked(int64_t page, uint8_t* payload) {
  if (SegmentCopier* copier = segment_copier(&backup_copier_)) {
    try {
      return copier->gather(g_, host_, page, payload);
    } catch (const std::bad_alloc&) {
    }
  }
  return gather_page_hashed(g_, host_, page, payload);
}

StorageTierStats StorageTier::stats() const {
  StorageTierStats s;
  const auto r = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  s.backups = r(counters_.backups);
  s.backup_pages = r(counters_.backup_pages);
  s.backup_pages_failed = r(counters_.backup_pages_failed);
  s.backup_bytes = r(counters_.backup_bytes);
  s.prefetches = r(counters_.prefetches);
  s.prefetches_revoked = r(counters_.prefetches_revoked);
  s.prefetch_hit_pages = r(counters_.prefetch_hit_pages);
  s.prefetch_pages = r(counters_.prefetch_pages);
  s.prefetch_bytes = r(counters_.prefetch_bytes);
  s.pages_corrupt = r(counters_.pages_corrupt);
  s.pages_truncated = r(counters_.pages_truncated);
  s.pages_foreign = r(counters_.pages_foreign);
  s.read_failures = r(counters_.read_failures);
  return s;
}

void StorageTier::wait_idle() {
  std::unique_lock<std::mutex> lk(mu_);
  idle_.wait(lk, [this] {
    return backups_.empty() && !backup_running_ && prefetch_queue_.empty() && !prefetch_running_;
  });
}

}  // namespace kvp::storage
