#include "storage/file_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/resident_mapping.hpp"

namespace kvp::storage {
namespace {

constexpr char kValueSuffix[] = ".kvp";
constexpr size_t kValueSuffixLength = sizeof(kValueSuffix) - 1;
constexpr char kTempPrefix[] = ".kvptmp-";
constexpr size_t kTempPrefixLength = sizeof(kTempPrefix) - 1;
constexpr size_t kMaxKeyLength = 120;

bool is_key_char(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-'; }

// blob_store.hpp: 1..120 characters of [0-9a-z-]. Anything else (a '/', "..")
// could name a file outside the directory, so it is refused.
bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyLength) return false;
  for (char c : key) {
    if (!is_key_char(c)) return false;
  }
  return true;
}

std::string errno_text(int err) { return std::strerror(err); }

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t mtime_ns(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

timespec timespec_of(int64_t ns) {
  timespec ts{};
  ts.tv_sec = time_t(ns / 1000000000);
  ts.tv_nsec = long(ns % 1000000000);
  return ts;
}

// Sets a file's access and modification times to `stamp` (the shared LRU clock).
// Setting an explicit time needs the file's owner; other users who may write it
// get the kernel's current time instead; a failure only makes the LRU order coarser.
void touch_fd(int fd, int64_t stamp) {
  const timespec times[2] = {timespec_of(stamp), timespec_of(stamp)};
  if (futimens(fd, times) != 0 && (errno == EPERM || errno == EACCES)) (void)futimens(fd, nullptr);
}
void touch_path(const std::string& path, int64_t stamp) {
  const timespec times[2] = {timespec_of(stamp), timespec_of(stamp)};
  if (utimensat(AT_FDCWD, path.c_str(), times, 0) != 0 && (errno == EPERM || errno == EACCES)) {
    (void)utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
  }
}

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports close()'s own error (a network file system may report a failed write only there).
  int close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Owns a directory stream.
class Dir {
 public:
  explicit Dir(DIR* d) : d_(d) {}
  Dir(const Dir&) = delete;
  Dir& operator=(const Dir&) = delete;
  ~Dir() {
    if (d_ != nullptr) closedir(d_);
  }
  DIR* get() const { return d_; }

 private:
  DIR* d_;
};

// The spans of a pwritev/preadv loop not yet done. A call may move fewer bytes than
// asked; the spans are then copied (once) so that the first one can be shortened.
class SpanCursor {
 public:
  SpanCursor(const iovec* spans, int count) : spans_(spans), count_(count) {}
  const iovec* spans() const { return spans_; }
  int count() const { return count_; }
  void skip(size_t done) {
    while (count_ > 0 && done >= spans_->iov_len) {
      done -= spans_->iov_len;
      ++spans_;
      --count_;
    }
    if (count_ == 0 || done == 0) return;
    if (!owned_) {
      own_.assign(spans_, spans_ + count_);
      spans_ = own_.data();
      owned_ = true;
    }
    iovec* first = own_.data() + (spans_ - own_.data());
    first->iov_base = static_cast<uint8_t*>(first->iov_base) + done;
    first->iov_len -= done;
  }

 private:
  const iovec* spans_;
  int count_;
  std::vector<iovec> own_;
  bool owned_ = false;
};

// Writes the spans back to back at `offset` of fd, all of them; 0 or the errno of the failure.
int pwritev_all(int fd, const iovec* spans, int count, uint64_t offset) {
  SpanCursor rest(spans, count);
  while (rest.count() > 0) {
    const ssize_t w = ::pwritev(fd, rest.spans(), rest.count(), off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    offset += uint64_t(w);
    rest.skip(size_t(w));
  }
  return 0;
}

// Reads from `offset` of fd into the spans, back to back; *got = bytes read (fewer when
// the file ends first). 0 or an errno.
int preadv_all(int fd, const iovec* spans, int count, uint64_t offset, size_t* got) {
  SpanCursor rest(spans, count);
  size_t total = 0;
  while (rest.count() > 0) {
    const ssize_t r = ::preadv(fd, rest.spans(), rest.count(), off_t(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) break;
    offset += uint64_t(r);
    total += size_t(r);
    rest.skip(size_t(r));
  }
  *got = total;
  return 0;
}

// Values from this size on get their blocks reserved before they are written
// (fallocate): measured on ext4 (kernel 6.18, this project's 2-core VM), an 8 MiB
// value written in 1 MiB pieces then takes about as much CPU time as one plain
// write() of it (93 % of its throughput, 70-75 % without), as the pieces no longer
// each extend the file and reserve delayed-allocation blocks page by page. Small
// values skip the extra call.
constexpr uint64_t kPreallocateFrom = uint64_t(64) << 10;

// A value's writer on a temporary file: pwritev at the value's offsets, counting the bytes.
class FdWriter final : public ValueWriter {
 public:
  explicit FdWriter(int fd) : fd_(fd) {}
  bool write_at(uint64_t offset, const iovec* spans, int count) override {
    if (err_ != 0) return false;
    err_ = pwritev_all(fd_, spans, count, offset);
    if (err_ != 0) return false;
    for (int i = 0; i < count; ++i) written_ += spans[i].iov_len;
    return true;
  }
  int error() const { return err_; }
  uint64_t written() const { return written_; }

 private:
  int fd_;
  int err_ = 0;
  uint64_t written_ = 0;
};

// A value's reader on an open file of `size` bytes.
class FdReader final : public ValueReader {
 public:
  // `mappable`: mapped() may map the file (storage.mapped_reads).
  FdReader(int fd, uint64_t size, bool mappable) : fd_(fd), size_(size), map_tried_(!mappable) {}
  uint64_t size() const override { return size_; }
  const uint8_t* mapped() override {
    if (!map_tried_) {
      map_tried_ = true;
      mapping_.map(fd_, size_);
    }
    return mapping_.data();
  }
  bool read_at(uint64_t offset, const iovec* spans, int count, size_t* got) override {
    *got = 0;
    if (err_ != 0) return false;
    err_ = preadv_all(fd_, spans, count, offset, got);
    return err_ == 0;
  }
  int error() const { return err_; }

 private:
  int fd_;
  uint64_t size_;
  int err_ = 0;
  bool map_tried_;
  ResidentMapping mapping_;
};

// put()'s values: one span from the caller's buffer.
class BufferProducer final : public ValueProducer {
 public:
  BufferProducer(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool produce(ValueWriter& writer) override {
    if (size_ == 0) return true;
    iovec span{const_cast<uint8_t*>(data_), size_};
    return writer.write_at(0, &span, 1);
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

// mkdir -p with mode 0755; 0 or the errno of the failing component.
int make_directories(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    const std::string prefix = path.substr(0, at);
    if (::mkdir(prefix.c_str(), 0755) == 0 || errno == EEXIST) continue;
    const int err = errno;
    struct stat st {};
    if (::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return err;  // EACCES/EROFS on an existing parent is fine
  }
  return 0;
}

// Numbers temporary files: unique within the process (with pid and tid, in the directory).
std::atomic<uint64_t> temp_counter{0};

std::string temp_name() {
  char name[96];
  std::snprintf(name, sizeof(name), "%s%ld-%ld-%llu", kTempPrefix, long(getpid()), long(gettid()),
                static_cast<unsigned long long>(temp_counter.fetch_add(1, std::memory_order_relaxed)));
  return name;
}

struct Counters {
  std::atomic<uint64_t> puts{0}, put_bytes{0}, put_existing{0}, put_errors{0};
  std::atomic<uint64_t> gets{0}, get_hits{0}, get_bytes{0}, get_misses{0}, get_errors{0};
  std::atomic<uint64_t> exists_calls{0}, io_errors{0}, evicted{0}, evicted_bytes{0};
};

void add(std::atomic<uint64_t>& counter, uint64_t n = 1) { counter.fetch_add(n, std::memory_order_relaxed); }

class FileStore final : public BlobStore {
 public:
  FileStore(std::string dir, uint64_t max_bytes, bool mapped_reads, const FileStoreOptions& options)
      : dir_(std::move(dir)), max_bytes_(max_bytes), mapped_reads_(mapped_reads), options_(options) {}

  std::string describe() const override { return "file:" + dir_; }

  void put(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
           BlobResult* out) override {
    for (size_t i = 0; i < n; ++i) {
      try {
        out[i] = put_one(keys[i], values[i], sizes[i]);
      } catch (...) {  // bad_alloc of a path or of the index: this key fails, nothing escapes
        add(counters_.put_errors);
        out[i] = BlobResult::kError;
      }
    }
  }

  void get(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
           BlobResult* out) override {
    for (size_t i = 0; i < n; ++i) {
      add(counters_.gets);
      sizes[i] = 0;
      try {
        out[i] = get_one(keys[i], dst[i], capacity[i], &sizes[i]);
      } catch (...) {
        out[i] = BlobResult::kError;
      }
      count_get(out[i], sizes[i]);
    }
  }

  void count_get(BlobResult result, uint64_t size) {
    switch (result) {
      case BlobResult::kOk:
        add(counters_.get_hits);
        add(counters_.get_bytes, size);
        break;
      case BlobResult::kMiss: add(counters_.get_misses); break;
      case BlobResult::kError: add(counters_.get_errors); break;
    }
  }

  size_t exists_prefix(const std::string* keys, size_t n) override {
    add(counters_.exists_calls);
    size_t found = 0;
    try {
      for (; found < n; ++found) {
        if (!valid_key(keys[found])) break;
        struct stat st {};
        if (::stat(value_path(keys[found]).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) break;
      }
    } catch (...) {
    }
    return found;
  }

  bool streams() const override { return true; }

  BlobResult put_streamed(const std::string& key, uint64_t size, ValueProducer& producer) override {
    try {
      return store_value(key, size, producer);
    } catch (...) {  // bad_alloc of a path or of the index: this key fails, nothing escapes
      add(counters_.put_errors);
      return BlobResult::kError;
    }
  }

  BlobResult get_streamed(const std::string& key, ValueConsumer& consumer, uint64_t* size) override {
    add(counters_.gets);
    *size = 0;
    BlobResult out = BlobResult::kError;
    try {
      out = read_value(key, consumer, size);
    } catch (...) {
    }
    count_get(out, *size);
    return out;
  }

  Status clear() override {
    try {
      return clear_files();
    } catch (const std::exception& e) {
      return Status::internal(describe() + ": clear: " + e.what());
    }
  }

  BlobStats stats() const override {
    BlobStats s;
    const auto load = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
    s.puts = load(counters_.puts);
    s.put_bytes = load(counters_.put_bytes);
    s.put_existing = load(counters_.put_existing);
    s.put_errors = load(counters_.put_errors);
    s.gets = load(counters_.gets);
    s.get_hits = load(counters_.get_hits);
    s.get_bytes = load(counters_.get_bytes);
    s.get_misses = load(counters_.get_misses);
    s.get_errors = load(counters_.get_errors);
    s.exists_calls = load(counters_.exists_calls);
    s.io_errors = load(counters_.io_errors);
    s.evicted = load(counters_.evicted);
    s.evicted_bytes = load(counters_.evicted_bytes);
    return s;
  }

  // At open: removes stale temporary files and, when bounded, builds the index
  // and evicts down to the bound.
  Status open_scan() {
    std::vector<Scanned> found;
    const int64_t start = realtime_ns();
    KVPOOL_RETURN_IF_ERROR(scan(bounded(), &found));
    if (!bounded()) return Status::ok();
    std::lock_guard<std::mutex> lock(mu_);
    install_scan_locked(std::move(found), start);
    evict_locked();
    return Status::ok();
  }

 private:
  struct Scanned {
    std::string key;
    uint64_t bytes;
    int64_t stamp;
  };
  struct Entry {
    uint64_t bytes;
    int64_t stamp;
  };

  bool bounded() const { return max_bytes_ > 0; }
  std::string value_path(const std::string& key) const { return dir_ + "/" + key + kValueSuffix; }

  // A strictly increasing wall-clock time in ns: the stamp of one put or get.
  // Strictly increasing within the process so that its own uses are ordered
  // even when two fall in one clock tick.
  int64_t next_stamp() {
    const int64_t now = realtime_ns();
    int64_t last = last_stamp_.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t stamp = now > last ? now : last + 1;
      if (last_stamp_.compare_exchange_weak(last, stamp, std::memory_order_relaxed)) return stamp;
    }
  }

  // Creates a new temporary file; its path in *path. The fd, or -errno.
  int create_temp(std::string* path) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      *path = dir_ + "/" + temp_name();
      const int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) return fd;
      if (errno == EEXIST) continue;                     // a stale file of a process with our pid: next name
      if (errno == ENOENT && make_directories(dir_) == 0) continue;  // the directory was removed: recreate it
      return -errno;
    }
    return -EEXIST;
  }

  BlobResult io_failure() {
    add(counters_.io_errors);
    add(counters_.put_errors);
    return BlobResult::kError;
  }

  BlobResult put_one(const std::string& key, const uint8_t* value, size_t size) {
    if (size > 0 && value == nullptr) {
      add(counters_.put_errors);
      return BlobResult::kError;
    }
    BufferProducer producer(value, size);
    return store_value(key, size, producer);
  }

  // put() and put_streamed(): the write-once check, a temporary file the producer
  // writes, the rename into place.
  BlobResult store_value(const std::string& key, uint64_t size, ValueProducer& producer) {
    if (!valid_key(key) || (bounded() && size > max_bytes_)) {
      add(counters_.put_errors);  // a value larger than the whole bound is refused, not stored and evicted
      return BlobResult::kError;
    }
    const std::string path = value_path(key);
    bool replace = false;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode) && uint64_t(st.st_size) == size) return skip_existing(key, path, size);
      replace = S_ISREG(st.st_mode);  // a length no value of this key has: a damaged file, replaced
      if (!replace) return io_failure();
    } else if (errno != ENOENT) {
      return io_failure();
    }

    std::string temp;
    const int raw = create_temp(&temp);
    if (raw < 0) return io_failure();
    Fd fd(raw);
    const int64_t stamp = next_stamp();
    int err = 0;
    // A file system without fallocate (EOPNOTSUPP) just writes; a full disk fails here,
    // before any byte is written.
    if (size >= kPreallocateFrom && ::fallocate(fd.get(), 0, 0, off_t(size)) != 0 && errno != EOPNOTSUPP &&
        errno != ENOSYS) {
      err = errno;
    }
    bool abandoned = false;  // by the producer: no file system error
    FdWriter writer(fd.get());
    if (err == 0) {
      const bool produced = producer.produce(writer);
      err = writer.error();
      // The producer gave up, or wrote too little: the (preallocated) rest would read as zeros.
      abandoned = err == 0 && (!produced || writer.written() != size);
    }
    if (err == 0 && !abandoned) touch_fd(fd.get(), stamp);
    const int close_err = fd.close();
    if (err == 0) err = close_err;
    if (err != 0 || abandoned) {
      ::unlink(temp.c_str());
      if (err == 0) {
        add(counters_.put_errors);
        return BlobResult::kError;
      }
      return io_failure();
    }
    // Into place. A new key: never over a file another writer renamed there
    // meanwhile (RENAME_NOREPLACE, or link() where the file system lacks it),
    // so that two writers of one key count one put and one put_existing.
    if (replace) {
      err = ::rename(temp.c_str(), path.c_str()) == 0 ? 0 : errno;
    } else {
      err = renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0 ? 0 : errno;
      if (err == EINVAL || err == ENOSYS) {
        err = ::link(temp.c_str(), path.c_str()) == 0 ? 0 : errno;
        ::unlink(temp.c_str());
      }
    }
    if (err != 0) {
      ::unlink(temp.c_str());
      if (err == EEXIST) return skip_existing(key, path, size);
      return io_failure();
    }
    add(counters_.puts);
    add(counters_.put_bytes, size);
    if (bounded()) after_put(key, size, stamp);
    return BlobResult::kOk;
  }

  BlobResult skip_existing(const std::string& key, const std::string& path, size_t size) {
    add(counters_.put_existing);
    const int64_t stamp = next_stamp();
    touch_path(path, stamp);  // offered again: recently used
    if (bounded()) {
      std::lock_guard<std::mutex> lock(mu_);
      note_locked(key, size, stamp);
    }
    return BlobResult::kOk;
  }

  // Opens the value file of `key` for reading: kOk with the file in *raw (owned by the
  // caller) and its length in *length, kMiss when there is none, else kError.
  BlobResult open_value(const std::string& key, int* raw, uint64_t* length) {
    if (!valid_key(key)) return BlobResult::kError;
    const std::string path = value_path(key);
    *raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (*raw < 0) {
      if (errno == ENOENT) return BlobResult::kMiss;
      add(counters_.io_errors);
      return BlobResult::kError;
    }
    struct stat st {};
    if (::fstat(*raw, &st) != 0 || !S_ISREG(st.st_mode)) {
      add(counters_.io_errors);
      ::close(*raw);
      *raw = -1;
      return BlobResult::kError;
    }
    *length = uint64_t(st.st_size);
    return BlobResult::kOk;
  }

  // A read value is a use: its stamp moves to now (the shared LRU clock).
  void note_read(const std::string& key, int fd, uint64_t length) {
    const int64_t stamp = next_stamp();
    touch_fd(fd, stamp);
    if (bounded()) {
      std::lock_guard<std::mutex> lock(mu_);
      note_locked(key, length, stamp);
    }
  }

  BlobResult get_one(const std::string& key, uint8_t* dst, size_t capacity, size_t* size) {
    int raw = -1;
    uint64_t length = 0;
    const BlobResult opened = open_value(key, &raw, &length);
    if (opened != BlobResult::kOk) return opened;
    Fd fd(raw);
    const size_t want = length < capacity ? size_t(length) : capacity;
    size_t got = 0;
    if (want > 0) {
      if (dst == nullptr) return BlobResult::kError;
      const iovec span{dst, want};
      if (preadv_all(fd.get(), &span, 1, 0, &got) != 0) {
        add(counters_.io_errors);
        return BlobResult::kError;
      }
    }
    // The full length; when the file ended before `want` (cut short under us)
    // what was read, so that the caller sees a short value, never a whole one.
    *size = got < want ? got : size_t(length);
    note_read(key, fd.get(), length);
    return BlobResult::kOk;
  }

  BlobResult read_value(const std::string& key, ValueConsumer& consumer, uint64_t* size) {
    int raw = -1;
    uint64_t length = 0;
    const BlobResult opened = open_value(key, &raw, &length);
    if (opened != BlobResult::kOk) return opened;
    Fd fd(raw);
    FdReader reader(fd.get(), length, mapped_reads_);
    consumer.consume(reader);
    if (reader.error() != 0) {
      add(counters_.io_errors);
      return BlobResult::kError;
    }
    *size = length;
    note_read(key, fd.get(), length);
    return BlobResult::kOk;
  }

  // --- The LRU index (max_bytes > 0 only). ---

  // Records a use of `key` (its length and stamp); adds a key this process did not know.
  void note_locked(const std::string& key, uint64_t bytes, int64_t stamp) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      index_.emplace(key, Entry{bytes, stamp});
      lru_.emplace(stamp, key);
      total_ += bytes;
      return;
    }
    if (stamp < it->second.stamp) stamp = it->second.stamp;
    lru_.erase({it->second.stamp, key});
    lru_.emplace(stamp, key);
    total_ = total_ - it->second.bytes + bytes;
    it->second = Entry{bytes, stamp};
  }

  void drop_locked(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return;
    lru_.erase({it->second.stamp, key});
    total_ -= it->second.bytes;
    index_.erase(it);
  }

  void after_put(const std::string& key, uint64_t bytes, int64_t stamp) {
    std::unique_lock<std::mutex> lock(mu_);
    note_locked(key, bytes, stamp);
    // Scans cost one stat per file: spaced so that they take at most
    // max_scan_share of the time (5 times that when over the bound).
    const int64_t since_scan_ns = realtime_ns() - last_scan_ns_;
    const double share = options_.max_scan_share;
    const int64_t spacing_ns = share > 0 ? int64_t(double(scan_cost_ns_) / share) : 0;
    const int64_t period_ns = std::max(options_.rescan_period_ms * 1000000, spacing_ns);
    const int64_t over_ns = std::max(options_.min_rescan_interval_ms * 1000000, spacing_ns / 5);
    const bool due = since_scan_ns >= period_ns || (total_ > max_bytes_ && since_scan_ns >= over_ns);
    if (due && !scanning_) {
      scanning_ = true;
      lock.unlock();  // the scan stats every file: other threads keep reading and writing meanwhile
      std::vector<Scanned> found;
      const int64_t start = realtime_ns();
      Status st;
      try {
        st = scan(true, &found);
      } catch (...) {
        st = Status::internal("scan failed");
      }
      const int64_t cost = realtime_ns() - start;
      lock.lock();
      scanning_ = false;
      scan_cost_ns_ = cost > 0 ? cost : 0;
      if (st.is_ok()) {
        install_scan_locked(std::move(found), start);
      } else {
        last_scan_ns_ = start;  // counted in io_errors; tried again after the period, not on every put
      }
    }
    evict_locked();
  }

  // Replaces the index by a scan that began at `start`, keeping this process's
  // own uses since then (the scan may have missed them).
  void install_scan_locked(std::vector<Scanned> found, int64_t start) {
    std::unordered_map<std::string, Entry> index;
    std::set<std::pair<int64_t, std::string>> lru;
    uint64_t total = 0;
    index.reserve(found.size());
    for (Scanned& s : found) {
      lru.emplace(s.stamp, s.key);
      total += s.bytes;
      index.emplace(std::move(s.key), Entry{s.bytes, s.stamp});
    }
    for (auto it = lru_.rbegin(); it != lru_.rend() && it->first >= start; ++it) {
      const Entry& mine = index_.at(it->second);
      auto at = index.find(it->second);
      if (at == index.end()) {
        index.emplace(it->second, mine);
        lru.emplace(mine.stamp, it->second);
        total += mine.bytes;
      } else if (at->second.stamp < mine.stamp) {
        lru.erase({at->second.stamp, it->second});
        lru.emplace(mine.stamp, it->second);
        total = total - at->second.bytes + mine.bytes;
        at->second = mine;
      }
    }
    index_ = std::move(index);
    lru_ = std::move(lru);
    total_ = total;
    last_scan_ns_ = start;
  }

  // Evicts least recently used files until the index's total is within the bound.
  // Each candidate's mtime is read again first: a newer one means another process
  // used it since this one's index saw it, so it moves to its new place instead.
  void evict_locked() {
    while (total_ > max_bytes_ && !lru_.empty()) {
      const std::string key = lru_.begin()->second;
      const Entry entry = index_.at(key);
      const std::string path = value_path(key);
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) {
        if (errno != ENOENT) add(counters_.io_errors);
        drop_locked(key);  // already evicted by another process, or unreadable: forgotten
        continue;
      }
      if (mtime_ns(st) > entry.stamp || uint64_t(st.st_size) != entry.bytes) {
        note_locked(key, uint64_t(st.st_size), mtime_ns(st) > entry.stamp ? mtime_ns(st) : entry.stamp + 1);
        continue;
      }
      if (::unlink(path.c_str()) == 0) {
        add(counters_.evicted);
        add(counters_.evicted_bytes, uint64_t(st.st_size));
      } else if (errno != ENOENT) {
        add(counters_.io_errors);
      }
      drop_locked(key);
    }
  }

  // --- Directory scans. ---

  // Lists the directory: with `stat_values`, every value file's key, length and
  // mtime into *found. Removes stale temporary files on the way.
  Status scan(bool stat_values, std::vector<Scanned>* found) {
    Dir dir(::opendir(dir_.c_str()));
    if (dir.get() == nullptr) {
      // opendir allocates its buffer: a failed allocation is a host-memory shortage, not I/O.
      if (errno == ENOMEM) return Status(KVPOOL_ERR_HOST_MEMORY, describe() + ": out of host memory listing the directory");
      add(counters_.io_errors);
      return Status::io(describe() + ": cannot list the directory: " + errno_text(errno));
    }
    const int64_t now = realtime_ns();
    errno = 0;
    while (const dirent* e = ::readdir(dir.get())) {
      const char* name = e->d_name;
      if (is_file_store_temp_name(name)) {
        remove_if_stale(name, now);
      } else if (stat_values && is_file_store_value_name(name)) {
        struct stat st {};
        if (::fstatat(dirfd(dir.get()), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
          found->push_back(Scanned{std::string(name, std::strlen(name) - kValueSuffixLength),
                                   uint64_t(st.st_size), mtime_ns(st)});
        }
      }
      errno = 0;
    }
    if (errno != 0) {
      add(counters_.io_errors);
      return Status::io(describe() + ": cannot list the directory: " + errno_text(errno));
    }
    return Status::ok();
  }

  void remove_if_stale(const char* name, int64_t now) {
    const std::string path = dir_ + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return;
    if ((now - mtime_ns(st)) / 1000000000 < options_.stale_temp_age_s) return;  // a live writer's
    ::unlink(path.c_str());
  }

  Status clear_files() {
    Dir dir(::opendir(dir_.c_str()));
    if (dir.get() == nullptr) {
      add(counters_.io_errors);
      return Status::io(describe() + ": clear: cannot list the directory: " + errno_text(errno));
    }
    const int64_t now = realtime_ns();
    size_t failed = 0;
    std::string first_failure;
    errno = 0;
    while (const dirent* e = ::readdir(dir.get())) {
      const char* name = e->d_name;
      if (is_file_store_temp_name(name)) {
        remove_if_stale(name, now);
      } else if (is_file_store_value_name(name)) {
        if (::unlinkat(dirfd(dir.get()), name, 0) != 0 && errno != ENOENT) {
          add(counters_.io_errors);
          if (failed++ == 0) first_failure = std::string(name) + ": " + errno_text(errno);
        }
      }
      errno = 0;
    }
    const int list_err = errno;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.clear();
      lru_.clear();
      total_ = 0;
    }
    if (list_err != 0) {
      add(counters_.io_errors);
      return Status::io(describe() + ": clear: cannot list the directory: " + errno_text(list_err));
    }
    if (failed > 0) {
      return Status::io(describe() + ": clear: " + std::to_string(failed) +
                        " files could not be removed (first: " + first_failure + ")");
    }
    return Status::ok();
  }

  const std::string dir_;
  const uint64_t max_bytes_;
  const bool mapped_reads_;  // storage.mapped_reads: readers may map cached files
  const FileStoreOptions options_;
  Counters counters_;
  std::atomic<int64_t> last_stamp_{0};

  // The LRU index: every value file this process knows, by key, and in stamp order.
  std::mutex mu_;
  std::unordered_map<std::string, Entry> index_;
  std::set<std::pair<int64_t, std::string>> lru_;  // (stamp, key), least recently used first
  uint64_t total_ = 0;                              // bytes of the files in index_
  int64_t last_scan_ns_ = 0;
  int64_t scan_cost_ns_ = 0;  // how long the last scan took
  bool scanning_ = false;
};

}  // namespace

bool is_file_store_value_name(const char* name) {
  const size_t n = std::strlen(name);
  if (n <= kValueSuffixLength || n - kValueSuffixLength > kMaxKeyLength) return false;
  if (std::strcmp(name + n - kValueSuffixLength, kValueSuffix) != 0) return false;
  for (size_t i = 0; i + kValueSuffixLength < n; ++i) {
    if (!is_key_char(name[i])) return false;
  }
  return true;
}

bool is_file_store_temp_name(const char* name) {
  if (std::strncmp(name, kTempPrefix, kTempPrefixLength) != 0 || name[kTempPrefixLength] == '\0') return false;
  for (const char* c = name + kTempPrefixLength; *c != '\0'; ++c) {
    if (!((*c >= '0' && *c <= '9') || *c == '-')) return false;
  }
  return true;
}

Status open_file_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out) {
  return open_file_store(cfg, FileStoreOptions{}, out);
}

Status open_file_store(const config::StorageConfig& cfg, const FileStoreOptions& options,
                       std::unique_ptr<BlobStore>* out) {
  try {
    const std::string& path = cfg.path;
    const std::string where = "storage.path \"" + path + "\"";
    if (path.empty()) return Status::config("storage.path: the file backend needs a directory");
    if (cfg.max_bytes < 0) return Status::config("storage.max_bytes: must be >= 0");
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (const int err = make_directories(dir); err != 0) {
      return Status::config(where + ": cannot create the directory: " + errno_text(err));
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) {
      return Status::config(where + ": " + errno_text(errno));
    }
    if (!S_ISDIR(st.st_mode)) return Status::config(where + ": not a directory");
    // Writable: a probe file, the way a put writes (access() says yes to root on a read-only mount).
    const std::string probe_path = dir + "/" + temp_name();
    const int fd = ::open(probe_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    // A full disk is writable (eviction may make room): only the other failures refuse the path.
    if (fd < 0 && errno != ENOSPC && errno != EDQUOT) {
      return Status::config(where + ": the directory is not writable: " + errno_text(errno));
    }
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe_path.c_str());
    }
    auto store = std::make_unique<FileStore>(dir, uint64_t(cfg.max_bytes), cfg.mapped_reads, options);
    KVPOOL_RETURN_IF_ERROR(store->open_scan());
    *out = std::move(store);
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return Status(KVPOOL_ERR_HOST_MEMORY, "storage: file backend: out of host memory");
  } catch (const std::exception& e) {
    return Status::internal(std::string("storage: file backend: ") + e.what());
  }
}

}  // namespace kvp::storage
