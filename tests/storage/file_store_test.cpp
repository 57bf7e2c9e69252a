// The storage tier's file backend (lib/storage/file_store.hpp) on a real
// temporary directory: round trips of sealed pages, write-once, damaged files,
// the LRU bound (within a process and across processes sharing the directory),
// concurrent writers, failing writes and the exact counters.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.hpp"
#include "storage/file_store.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

namespace {

using kvp::cache::Digest;
using kvp::storage::BlobResult;
using kvp::storage::BlobStats;
using kvp::storage::BlobStore;
using kvp::storage::check_page;
using kvp::storage::FileStoreOptions;
using kvp::storage::Fingerprint;
using kvp::storage::PageCheck;

using kvtest::names_in;
using kvtest::TempDir;

const Fingerprint& fingerprint() {
  static const Fingerprint fp = kvp::storage::fingerprint_of("file store test model");
  return fp;
}

Digest digest_of(uint32_t seed) {
  Digest d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(seed * 131 + i * 7 + (seed >> 8));
  d[0] = uint8_t(seed);
  d[1] = uint8_t(seed >> 8);
  return d;
}

std::string key_of(uint32_t seed) { return kvp::storage::page_key(fingerprint(), digest_of(seed)); }

// A sealed page of `payload` bytes whose payload depends on `seed`.
std::vector<uint8_t> page_of(uint32_t seed, size_t payload) {
  std::vector<uint8_t> page(kvp::storage::stored_page_bytes(payload));
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = kvp::storage::kPageHeaderBytes; i < page.size(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    page[i] = uint8_t(x);
  }
  kvp::storage::seal_page(page.data(), payload, fingerprint(), digest_of(seed));
  return page;
}

kvp::config::StorageConfig config_of(const std::string& dir, int64_t max_bytes = 0) {
  kvp::config::StorageConfig cfg;
  cfg.enabled = true;
  cfg.backend = "file";
  cfg.path = dir;
  cfg.max_bytes = max_bytes;
  return cfg;
}

std::unique_ptr<BlobStore> open_store(const std::string& dir, int64_t max_bytes = 0,
                                      const FileStoreOptions& options = FileStoreOptions{}) {
  std::unique_ptr<BlobStore> store;
  const kvp::Status st = kvp::storage::open_file_store(config_of(dir, max_bytes), options, &store);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return store;
}

BlobResult put1(BlobStore* store, const std::string& key, const std::vector<uint8_t>& value) {
  const uint8_t* data = value.data();
  const size_t size = value.size();
  BlobResult r = BlobResult::kError;
  store->put(&key, &data, &size, 1, &r);
  return r;
}

// Reads a value into a buffer of `capacity` bytes (the value's size, by default 16 MiB).
BlobResult get1(BlobStore* store, const std::string& key, std::vector<uint8_t>* value,
                size_t capacity = 16u << 20) {
  value->assign(capacity, 0xee);
  uint8_t* dst = value->data();
  size_t size = 0;
  BlobResult r = BlobResult::kError;
  store->get(&key, &dst, &capacity, 1, &size, &r);
  if (r == BlobResult::kOk) value->resize(size < capacity ? size : capacity);
  if (r == BlobResult::kOk && size > capacity) value->push_back(0);  // marks "longer than the buffer"
  return r;
}

PageCheck check(uint32_t seed, const std::vector<uint8_t>& value, size_t payload) {
  return check_page(value.data(), value.size(), fingerprint(), digest_of(seed), payload);
}

std::string value_file(const std::string& dir, const std::string& key) { return dir + "/" + key + ".kvp"; }

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void write_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

void set_mtime_ago(const std::string& path, int64_t seconds) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  timespec times[2] = {now, now};
  times[0].tv_sec -= seconds;
  times[1].tv_sec -= seconds;
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// Runs `body` in a child process; returns its exit status (0: success).
template <class F>
int in_child(F body) {
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = body();
    } catch (...) {
    }
    _exit(code);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

constexpr size_t kSmallPayload = 4000;

TEST(FileStore, OpenCreatesTheDirectoryAndDescribesIt) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/a/b/cache";
  std::unique_ptr<BlobStore> store = open_store(dir + "/");
  ASSERT_NE(store, nullptr);
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(store->describe(), "file:" + dir);
  EXPECT_TRUE(names_in(dir).empty()) << "the writability probe is removed";
}

TEST(FileStore, OpenRefusesWhatCannotBeADirectory) {
  TempDir tmp;
  std::unique_ptr<BlobStore> store;
  kvp::Status st = kvp::storage::open_file_store(config_of(""), &store);
  EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG);

  const std::string file = tmp.path() + "/plain-file";
  write_file(file, "x");
  st = kvp::storage::open_file_store(config_of(file), &store);
  EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG);
  EXPECT_NE(st.message().find("not a directory"), std::string::npos) << st.message();

  st = kvp::storage::open_file_store(config_of(file + "/sub"), &store);
  EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG);
  EXPECT_NE(st.message().find("cannot create"), std::string::npos) << st.message();
  EXPECT_EQ(store, nullptr);

  if (geteuid() != 0) {  // root writes to a 0555 directory anyway
    const std::string ro = tmp.path() + "/read-only";
    ASSERT_EQ(mkdir(ro.c_str(), 0555), 0);
    st = kvp::storage::open_file_store(config_of(ro), &store);
    EXPECT_EQ(st.code(), KVPOOL_ERR_CONFIG);
    EXPECT_NE(st.message().find("not writable"), std::string::npos) << st.message();
  }
}

TEST(FileStore, SealedPagesRoundTripWithExactCounters) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  constexpr size_t kPages = 5;
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> pages;
  std::vector<const uint8_t*> values;
  std::vector<size_t> sizes;
  for (uint32_t i = 0; i < kPages; ++i) {
    keys.push_back(key_of(i));
    pages.push_back(page_of(i, kSmallPayload));
  }
  for (const auto& p : pages) {
    values.push_back(p.data());
    sizes.push_back(p.size());
  }
  EXPECT_EQ(store->exists_prefix(keys.data(), kPages), 0u);
  BlobResult out[kPages];
  store->put(keys.data(), values.data(), sizes.data(), kPages, out);
  for (BlobResult r : out) EXPECT_EQ(r, BlobResult::kOk);
  EXPECT_EQ(store->exists_prefix(keys.data(), kPages), kPages);
  for (uint32_t i = 0; i < kPages; ++i) EXPECT_TRUE(file_exists(value_file(tmp.path(), keys[i])));

  std::vector<std::vector<uint8_t>> back(kPages, std::vector<uint8_t>(pages[0].size() + 100));
  std::vector<uint8_t*> dst;
  std::vector<size_t> capacity, got(kPages, 0);
  for (auto& b : back) {
    dst.push_back(b.data());
    capacity.push_back(b.size());
  }
  store->get(keys.data(), dst.data(), capacity.data(), kPages, got.data(), out);
  for (uint32_t i = 0; i < kPages; ++i) {
    EXPECT_EQ(out[i], BlobResult::kOk);
    ASSERT_EQ(got[i], pages[i].size());
    back[i].resize(got[i]);
    EXPECT_EQ(check(i, back[i], kSmallPayload), PageCheck::kOk);
    EXPECT_EQ(back[i], pages[i]);
  }

  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, kPages);
  EXPECT_EQ(s.put_bytes, kPages * pages[0].size());
  EXPECT_EQ(s.put_existing, 0u);
  EXPECT_EQ(s.put_errors, 0u);
  EXPECT_EQ(s.gets, kPages);
  EXPECT_EQ(s.get_hits, kPages);
  EXPECT_EQ(s.get_bytes, kPages * pages[0].size());
  EXPECT_EQ(s.get_misses, 0u);
  EXPECT_EQ(s.get_errors, 0u);
  EXPECT_EQ(s.exists_calls, 2u);
  EXPECT_EQ(s.io_errors, 0u);
  EXPECT_EQ(s.evicted, 0u);
  EXPECT_EQ(s.timeouts + s.server_errors + s.partial_values + s.servers_ejected, 0u);
}

TEST(FileStore, ExistsPrefixStopsAtTheFirstMissAndMissesAreCounted) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  std::vector<std::string> keys = {key_of(0), key_of(1), key_of(2), key_of(3)};
  for (uint32_t i : {0u, 1u, 3u}) ASSERT_EQ(put1(store.get(), keys[i], page_of(i, 100)), BlobResult::kOk);
  EXPECT_EQ(store->exists_prefix(keys.data(), 4), 2u);
  EXPECT_EQ(store->exists_prefix(keys.data() + 3, 1), 1u);
  EXPECT_EQ(store->exists_prefix(keys.data(), 0), 0u);

  std::vector<uint8_t> v;
  EXPECT_EQ(get1(store.get(), keys[2], &v), BlobResult::kMiss);
  EXPECT_EQ(get1(store.get(), key_of(77), &v), BlobResult::kMiss);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.gets, 2u);
  EXPECT_EQ(s.get_misses, 2u);
  EXPECT_EQ(s.get_hits, 0u);
  EXPECT_EQ(s.exists_calls, 3u);
  EXPECT_EQ(s.io_errors, 0u);
}

TEST(FileStore, KeysOutsideTheContractAreRefusedAndNeverLeaveTheDirectory) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/store";
  auto store = open_store(dir);
  const std::vector<uint8_t> v = {1, 2, 3};
  for (const std::string& bad : {std::string(), std::string("../escape"), std::string("UPPER"),
                                 std::string("a/b"), std::string(121, 'a')}) {
    EXPECT_EQ(put1(store.get(), bad, v), BlobResult::kError) << bad;
    std::vector<uint8_t> back;
    EXPECT_EQ(get1(store.get(), bad, &back), BlobResult::kError) << bad;
    EXPECT_EQ(store->exists_prefix(&bad, 1), 0u) << bad;
  }
  EXPECT_EQ(put1(store.get(), std::string(120, 'a'), v), BlobResult::kOk);
  EXPECT_FALSE(file_exists(tmp.path() + "/escape.kvp"));
  EXPECT_EQ(names_in(dir), std::vector<std::string>{std::string(120, 'a') + ".kvp"});
  const BlobStats s = store->stats();
  EXPECT_EQ(s.put_errors, 5u);
  EXPECT_EQ(s.get_errors, 5u);
  EXPECT_EQ(s.io_errors, 0u) << "a bad key is not a file system error";
  EXPECT_EQ(s.puts, 1u);
}

TEST(FileStore, WriteOnceSkipsAnExistingKey) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::string key = key_of(5);
  const std::vector<uint8_t> first = page_of(5, kSmallPayload);
  std::vector<uint8_t> other = first;
  other.back() ^= 0xff;  // same length, other bytes: the store must keep the first
  EXPECT_EQ(put1(store.get(), key, first), BlobResult::kOk);
  EXPECT_EQ(put1(store.get(), key, other), BlobResult::kOk);
  std::vector<uint8_t> back;
  ASSERT_EQ(get1(store.get(), key, &back), BlobResult::kOk);
  EXPECT_EQ(back, first);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.put_existing, 1u);
  EXPECT_EQ(s.put_bytes, first.size());
  EXPECT_EQ(names_in(tmp.path()).size(), 1u) << "no temporary file stays";
}

TEST(FileStore, ValuesOfZeroOneAndEightMebibytes) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::vector<uint8_t> empty;
  const std::vector<uint8_t> one = {0x5a};
  const std::vector<uint8_t> big = page_of(8, (8u << 20) - kvp::storage::kPageHeaderBytes);
  ASSERT_EQ(big.size(), 8u << 20);
  // A 0-byte value may come with a null pointer.
  {
    const std::string key = "zero";
    const uint8_t* data = nullptr;
    const size_t size = 0;
    BlobResult r = BlobResult::kError;
    store->put(&key, &data, &size, 1, &r);
    EXPECT_EQ(r, BlobResult::kOk);
  }
  EXPECT_EQ(put1(store.get(), "one", one), BlobResult::kOk);
  EXPECT_EQ(put1(store.get(), key_of(8), big), BlobResult::kOk);

  std::vector<uint8_t> back;
  ASSERT_EQ(get1(store.get(), "zero", &back), BlobResult::kOk);
  EXPECT_TRUE(back.empty());
  ASSERT_EQ(get1(store.get(), "one", &back), BlobResult::kOk);
  EXPECT_EQ(back, one);
  ASSERT_EQ(get1(store.get(), key_of(8), &back), BlobResult::kOk);
  EXPECT_EQ(back.size(), big.size());
  EXPECT_EQ(check(8, back, big.size() - kvp::storage::kPageHeaderBytes), PageCheck::kOk);
  EXPECT_EQ(back, big);

  // A buffer too small: kOk with the full length, only the capacity copied.
  {
    const std::string key = key_of(8);
    std::vector<uint8_t> small(1000, 0);
    uint8_t* dst = small.data();
    const size_t capacity = 999;
    size_t size = 0;
    BlobResult r = BlobResult::kError;
    store->get(&key, &dst, &capacity, 1, &size, &r);
    EXPECT_EQ(r, BlobResult::kOk);
    EXPECT_EQ(size, big.size());
    EXPECT_TRUE(std::equal(small.begin(), small.begin() + 999, big.begin()));
    EXPECT_EQ(small[999], 0) << "nothing written past the capacity";
    EXPECT_NE(check_page(small.data(), size < capacity ? size : capacity, fingerprint(), digest_of(8),
                         big.size() - kvp::storage::kPageHeaderBytes),
              PageCheck::kOk);
  }
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 3u);
  EXPECT_EQ(s.put_bytes, 1 + big.size());
  EXPECT_EQ(s.get_hits, 4u);
  EXPECT_EQ(s.get_bytes, 1 + 2 * big.size());
}

TEST(FileStore, ATruncatedFileReadsShortAndIsReplacedByTheNextPut) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::string key = key_of(3);
  const std::vector<uint8_t> page = page_of(3, kSmallPayload);
  ASSERT_EQ(put1(store.get(), key, page), BlobResult::kOk);
  ASSERT_EQ(truncate(value_file(tmp.path(), key).c_str(), off_t(page.size() - 10)), 0);

  std::vector<uint8_t> back;
  ASSERT_EQ(get1(store.get(), key, &back), BlobResult::kOk);
  EXPECT_EQ(back.size(), page.size() - 10);
  EXPECT_EQ(check(3, back, kSmallPayload), PageCheck::kTruncated);

  ASSERT_EQ(truncate(value_file(tmp.path(), key).c_str(), 50), 0);  // shorter than the header
  ASSERT_EQ(get1(store.get(), key, &back), BlobResult::kOk);
  EXPECT_EQ(back.size(), 50u);
  EXPECT_EQ(check(3, back, kSmallPayload), PageCheck::kTruncated);

  // The same key always means the same bytes, so a file of another length is
  // damaged: the next put replaces it.
  EXPECT_EQ(put1(store.get(), key, page), BlobResult::kOk);
  ASSERT_EQ(get1(store.get(), key, &back), BlobResult::kOk);
  EXPECT_EQ(check(3, back, kSmallPayload), PageCheck::kOk);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 2u);
  EXPECT_EQ(s.put_existing, 0u);
  EXPECT_EQ(s.io_errors, 0u);
}

TEST(FileStore, ACorruptedByteIsFoundByCheckPage) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::string key = key_of(4);
  const std::vector<uint8_t> page = page_of(4, kSmallPayload);
  ASSERT_EQ(put1(store.get(), key, page), BlobResult::kOk);
  for (const size_t at : {size_t(20), page.size() - 1}) {  // in the header, in the payload
    const int fd = open(value_file(tmp.path(), key).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t b = 0;
    ASSERT_EQ(pread(fd, &b, 1, off_t(at)), 1);
    b ^= 0x01;
    ASSERT_EQ(pwrite(fd, &b, 1, off_t(at)), 1);
    close(fd);
    std::vector<uint8_t> back;
    ASSERT_EQ(get1(store.get(), key, &back), BlobResult::kOk);
    EXPECT_EQ(back.size(), page.size());
    EXPECT_EQ(check(4, back, kSmallPayload), PageCheck::kCorrupt) << "byte " << at;
  }
}

// max_bytes holds exactly kFit values of this size.
constexpr size_t kValueBytes = 1000;
constexpr int64_t kFit = 10;

std::vector<uint8_t> value_of(uint32_t seed) { return std::vector<uint8_t>(kValueBytes, uint8_t(seed)); }

TEST(FileStore, EvictsLeastRecentlyUsedValuesToStayWithinTheBound) {
  TempDir tmp;
  auto store = open_store(tmp.path(), kFit * int64_t(kValueBytes));
  for (uint32_t i = 0; i < kFit; ++i) ASSERT_EQ(put1(store.get(), key_of(i), value_of(i)), BlobResult::kOk);
  EXPECT_EQ(store->stats().evicted, 0u);
  std::vector<uint8_t> back;
  ASSERT_EQ(get1(store.get(), key_of(0), &back), BlobResult::kOk);  // 0 is now the most recently used
  ASSERT_EQ(put1(store.get(), key_of(1), value_of(1)), BlobResult::kOk);  // put_existing refreshes 1 too

  ASSERT_EQ(put1(store.get(), key_of(100), value_of(100)), BlobResult::kOk);
  EXPECT_FALSE(file_exists(value_file(tmp.path(), key_of(2)))) << "2 was the least recently used";
  for (uint32_t i : {0u, 1u, 3u, 9u, 100u}) EXPECT_TRUE(file_exists(value_file(tmp.path(), key_of(i)))) << i;
  ASSERT_EQ(put1(store.get(), key_of(101), value_of(101)), BlobResult::kOk);
  EXPECT_FALSE(file_exists(value_file(tmp.path(), key_of(3))));
  EXPECT_EQ(get1(store.get(), key_of(2), &back), BlobResult::kMiss);

  BlobStats s = store->stats();
  EXPECT_EQ(s.evicted, 2u);
  EXPECT_EQ(s.evicted_bytes, 2 * kValueBytes);
  EXPECT_EQ(names_in(tmp.path()).size(), size_t(kFit));

  // A value larger than the whole bound is refused (it would evict everything, itself included).
  EXPECT_EQ(put1(store.get(), key_of(200), std::vector<uint8_t>(kFit * kValueBytes + 1)), BlobResult::kError);
  s = store->stats();
  EXPECT_EQ(s.put_errors, 1u);
  EXPECT_EQ(s.io_errors, 0u);
  EXPECT_EQ(names_in(tmp.path()).size(), size_t(kFit));
}

TEST(FileStore, OpeningWithASmallerBoundEvictsTheOldestFiles) {
  TempDir tmp;
  {
    auto store = open_store(tmp.path());
    for (uint32_t i = 0; i < kFit; ++i) ASSERT_EQ(put1(store.get(), key_of(i), value_of(i)), BlobResult::kOk);
    std::vector<uint8_t> back;
    ASSERT_EQ(get1(store.get(), key_of(0), &back), BlobResult::kOk);  // unbounded stores keep the clock too
  }
  auto store = open_store(tmp.path(), 4 * int64_t(kValueBytes));
  const BlobStats s = store->stats();
  EXPECT_EQ(s.evicted, 6u);
  EXPECT_EQ(s.evicted_bytes, 6 * kValueBytes);
  for (uint32_t i : {0u, 7u, 8u, 9u}) EXPECT_TRUE(file_exists(value_file(tmp.path(), key_of(i)))) << i;
  EXPECT_EQ(names_in(tmp.path()).size(), 4u);
}

TEST(FileStore, AGetInAnotherProcessRefreshesAValueInTheSharedLru) {
  TempDir tmp;
  auto store = open_store(tmp.path(), kFit * int64_t(kValueBytes));
  for (uint32_t i = 0; i < kFit; ++i) ASSERT_EQ(put1(store.get(), key_of(i), value_of(i)), BlobResult::kOk);
  // Another process reads 0: this process's index still has 0 as its oldest.
  const int child = in_child([&] {
    auto other = open_store(tmp.path(), kFit * int64_t(kValueBytes));
    std::vector<uint8_t> back;
    return get1(other.get(), key_of(0), &back) == BlobResult::kOk && back == value_of(0) ? 0 : 1;
  });
  ASSERT_EQ(child, 0);
  ASSERT_EQ(put1(store.get(), key_of(100), value_of(100)), BlobResult::kOk);
  EXPECT_TRUE(file_exists(value_file(tmp.path(), key_of(0)))) << "used by the other process";
  EXPECT_FALSE(file_exists(value_file(tmp.path(), key_of(1))));
  EXPECT_EQ(store->stats().evicted, 1u);
}

TEST(FileStore, ARescanSeesTheValuesOfOtherProcesses) {
  TempDir tmp;
  FileStoreOptions options;
  options.rescan_period_ms = 0;  // every put rescans
  options.min_rescan_interval_ms = 0;
  options.max_scan_share = 0;
  auto store = open_store(tmp.path(), kFit * int64_t(kValueBytes), options);
  ASSERT_EQ(put1(store.get(), key_of(0), value_of(0)), BlobResult::kOk);
  const int child = in_child([&] {
    auto other = open_store(tmp.path());  // unbounded: writes past the bound
    for (uint32_t i = 1; i < 2 * kFit; ++i) {
      if (put1(other.get(), key_of(i), value_of(i)) != BlobResult::kOk) return 1;
    }
    return 0;
  });
  ASSERT_EQ(child, 0);
  EXPECT_EQ(names_in(tmp.path()).size(), size_t(2 * kFit));
  ASSERT_EQ(put1(store.get(), key_of(100), value_of(100)), BlobResult::kOk);
  EXPECT_EQ(names_in(tmp.path()).size(), size_t(kFit));
  EXPECT_EQ(store->stats().evicted, size_t(kFit + 1));
  EXPECT_FALSE(file_exists(value_file(tmp.path(), key_of(0)))) << "the oldest";
  EXPECT_TRUE(file_exists(value_file(tmp.path(), key_of(100))));
  EXPECT_TRUE(file_exists(value_file(tmp.path(), key_of(2 * kFit - 1))));
}

TEST(FileStore, AChildWritesAndTheParentReads) {
  TempDir tmp;
  constexpr uint32_t kPages = 16;
  const int child = in_child([&] {
    auto store = open_store(tmp.path());
    for (uint32_t i = 0; i < kPages; ++i) {
      if (put1(store.get(), key_of(i), page_of(i, 64 << 10)) != BlobResult::kOk) return 1;
    }
    return 0;
  });
  ASSERT_EQ(child, 0);
  auto store = open_store(tmp.path());
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < kPages; ++i) keys.push_back(key_of(i));
  EXPECT_EQ(store->exists_prefix(keys.data(), kPages), kPages);
  for (uint32_t i = 0; i < kPages; ++i) {
    std::vector<uint8_t> back;
    ASSERT_EQ(get1(store.get(), keys[i], &back), BlobResult::kOk);
    EXPECT_EQ(check(i, back, 64 << 10), PageCheck::kOk);
  }
}

TEST(FileStore, TwoProcessesWritingTheSameKeysLeaveOnlyWholePages) {
  TempDir tmp;
  constexpr uint32_t kPages = 48;
  constexpr size_t kPayload = 256 << 10;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    auto store = open_store(tmp.path());
    int bad = 0;
    for (uint32_t i = 0; i < kPages; ++i) {
      if (put1(store.get(), key_of(i), page_of(i, kPayload)) != BlobResult::kOk) ++bad;
    }
    uint64_t puts = store->stats().puts;
    if (write(pipefd[1], &puts, sizeof(puts)) != ssize_t(sizeof(puts))) ++bad;
    _exit(bad == 0 ? 0 : 1);
  }
  close(pipefd[1]);
  auto store = open_store(tmp.path());
  size_t whole = 0;
  for (uint32_t round = 0; round < 2; ++round) {
    for (uint32_t i = 0; i < kPages; ++i) {
      const uint32_t k = round == 0 ? kPages - 1 - i : i;  // meet the child in the middle, then read all
      if (round == 0) {
        ASSERT_EQ(put1(store.get(), key_of(k), page_of(k, kPayload)), BlobResult::kOk);
      }
      std::vector<uint8_t> back;
      const BlobResult r = get1(store.get(), key_of(k), &back);
      ASSERT_EQ(r, BlobResult::kOk);
      ASSERT_EQ(check(k, back, kPayload), PageCheck::kOk) << k;
      ++whole;
    }
  }
  uint64_t child_puts = 0;
  ASSERT_EQ(read(pipefd[0], &child_puts, sizeof(child_puts)), ssize_t(sizeof(child_puts)));
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(whole, 2u * kPages);
  // Each key was stored exactly once, by one of the two.
  EXPECT_EQ(store->stats().puts + child_puts, kPages);
  EXPECT_EQ(store->stats().puts + store->stats().put_existing, kPages);
  EXPECT_EQ(names_in(tmp.path()).size(), size_t(kPages)) << "no temporary file stays";
}

TEST(FileStore, ThreadsShareOneStore) {
  TempDir tmp;
  FileStoreOptions options;
  options.rescan_period_ms = 0;  // scans, evictions, puts and gets all at once
  options.min_rescan_interval_ms = 0;
  options.max_scan_share = 0;
  constexpr size_t kPayload = 3000;
  const size_t page_bytes = kvp::storage::stored_page_bytes(kPayload);
  constexpr uint32_t kKeys = 64;
  auto store = open_store(tmp.path(), int64_t(24 * page_bytes), options);
  std::vector<std::vector<uint8_t>> pages;
  for (uint32_t i = 0; i < kKeys; ++i) pages.push_back(page_of(i, kPayload));
  std::atomic<uint64_t> hits{0}, bad{0}, calls{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      uint32_t x = t * 7919 + 1;
      for (int step = 0; step < 400; ++step) {
        x = x * 1103515245 + 12345;
        const uint32_t k = (x >> 8) % kKeys;
        const std::string key = key_of(k);
        if ((x >> 20) % 3 == 0) {
          if (put1(store.get(), key, pages[k]) != BlobResult::kOk) bad.fetch_add(1);
        } else if ((x >> 20) % 3 == 1) {
          std::vector<uint8_t> back;
          const BlobResult r = get1(store.get(), key, &back, page_bytes);
          if (r == BlobResult::kOk) {
            hits.fetch_add(1);
            if (check(k, back, kPayload) != PageCheck::kOk) bad.fetch_add(1);
          } else if (r != BlobResult::kMiss) {
            bad.fetch_add(1);
          }
          calls.fetch_add(1);
        } else {
          const std::string keys[2] = {key, key_of((k + 1) % kKeys)};
          (void)store->exists_prefix(keys, 2);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.gets, calls.load());
  EXPECT_EQ(s.get_hits, hits.load());
  EXPECT_EQ(s.get_hits + s.get_misses, s.gets);
  EXPECT_EQ(s.get_errors + s.put_errors + s.io_errors, 0u);
  EXPECT_GT(s.evicted, 0u);
  EXPECT_EQ(s.evicted_bytes, s.evicted * page_bytes);
  size_t values = 0;
  for (const std::string& name : names_in(tmp.path())) {
    EXPECT_TRUE(kvp::storage::is_file_store_value_name(name.c_str())) << name;
    ++values;
  }
  EXPECT_LE(values * page_bytes, 24 * page_bytes);
}

// RLIMIT_FSIZE makes writes past `limit` bytes fail with EFBIG (SIGXFSZ ignored):
// a failing disk that works for root too, unlike a read-only directory.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t limit) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit r = saved_;
    r.rlim_cur = limit;
    ok_ = setrlimit(RLIMIT_FSIZE, &r) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  sighandler_t old_handler_{};
  bool ok_ = false;
};

TEST(FileStore, AFailingWriteIsAnErrorAndLeavesNoFile) {
  TempDir tmp;
  auto store = open_store(tmp.path(), 1 << 20);
  const std::vector<uint8_t> small = page_of(1, 1000);
  const std::vector<uint8_t> big = page_of(2, 64 << 10);
  {
    FileSizeLimit limit(8192);
    ASSERT_TRUE(limit.ok());
    const std::string keys[2] = {key_of(2), key_of(1)};
    const uint8_t* values[2] = {big.data(), small.data()};
    const size_t sizes[2] = {big.size(), small.size()};
    BlobResult out[2];
    store->put(keys, values, sizes, 2, out);
    EXPECT_EQ(out[0], BlobResult::kError);
    EXPECT_EQ(out[1], BlobResult::kOk) << "one key's failure does not hide the others";
  }
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{key_of(1) + ".kvp"}) << "no temporary file stays";
  std::vector<uint8_t> back;
  EXPECT_EQ(get1(store.get(), key_of(2), &back), BlobResult::kMiss);
  BlobStats s = store->stats();
  EXPECT_EQ(s.put_errors, 1u);
  EXPECT_EQ(s.io_errors, 1u);
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.put_bytes, small.size());
  // The disk works again: the same put succeeds.
  EXPECT_EQ(put1(store.get(), key_of(2), big), BlobResult::kOk);
  ASSERT_EQ(get1(store.get(), key_of(2), &back), BlobResult::kOk);
  EXPECT_EQ(check(2, back, 64 << 10), PageCheck::kOk);
  s = store->stats();
  EXPECT_EQ(s.puts, 2u);
  EXPECT_EQ(s.io_errors, 1u);
}

TEST(FileStore, AnUnreadableValueIsAnIoError) {
  TempDir tmp;
  auto store = open_store(tmp.path());
  const std::string key = key_of(6);
  ASSERT_EQ(mkdir(value_file(tmp.path(), key).c_str(), 0755), 0);  // not a regular file
  std::vector<uint8_t> back;
  EXPECT_EQ(get1(store.get(), key, &back), BlobResult::kError);
  EXPECT_EQ(put1(store.get(), key, page_of(6, 10)), BlobResult::kError);
  EXPECT_EQ(store->exists_prefix(&key, 1), 0u);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.get_errors, 1u);
  EXPECT_EQ(s.put_errors, 1u);
  EXPECT_EQ(s.io_errors, 2u);
}

TEST(FileStore, ClearRemovesOnlyTheBackendsOwnFiles) {
  TempDir tmp;
  auto store = open_store(tmp.path(), 1 << 20);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(put1(store.get(), key_of(i), value_of(i)), BlobResult::kOk);
  const std::string stale = tmp.path() + "/.kvptmp-12345-12345-7";
  const std::string live = tmp.path() + "/.kvptmp-12346-12346-8";
  write_file(stale, "partial");
  set_mtime_ago(stale, 2 * 3600);
  write_file(live, "being written");
  for (const char* other : {"/notes.txt", "/KVP1-ABC.kvp", "/a.b.kvp", "/.kvptmp-x", "/kvp"}) {
    write_file(tmp.path() + other, "not ours");
  }
  ASSERT_TRUE(store->clear().is_ok());
  EXPECT_EQ(names_in(tmp.path()),
            (std::vector<std::string>{".kvptmp-12346-12346-8", ".kvptmp-x", "KVP1-ABC.kvp", "a.b.kvp", "kvp",
                                      "notes.txt"}));
  // The index is empty too: four new values fit again without eviction.
  std::vector<uint8_t> back;
  EXPECT_EQ(get1(store.get(), key_of(0), &back), BlobResult::kMiss);
  EXPECT_EQ(store->stats().evicted, 0u);
}

TEST(FileStore, OpenRemovesStaleTemporaryFilesOnly) {
  TempDir tmp;
  const std::string stale = tmp.path() + "/.kvptmp-1-1-1";
  const std::string live = tmp.path() + "/.kvptmp-2-2-2";
  write_file(stale, "crashed writer");
  set_mtime_ago(stale, 2 * 3600);
  write_file(live, "live writer");
  auto store = open_store(tmp.path());
  EXPECT_EQ(names_in(tmp.path()), std::vector<std::string>{".kvptmp-2-2-2"});
}

TEST(FileStore, TheDirectoryIsRecreatedWhenRemoved) {
  TempDir tmp;
  const std::string dir = tmp.path() + "/cache";
  auto store = open_store(dir);
  ASSERT_EQ(rmdir(dir.c_str()), 0);
  EXPECT_EQ(put1(store.get(), key_of(1), value_of(1)), BlobResult::kOk);
  EXPECT_TRUE(file_exists(value_file(dir, key_of(1))));
}

TEST(FileStore, NamesOfTheBackend) {
  using kvp::storage::is_file_store_temp_name;
  using kvp::storage::is_file_store_value_name;
  EXPECT_TRUE(is_file_store_value_name((key_of(1) + ".kvp").c_str()));
  EXPECT_TRUE(is_file_store_value_name("a.kvp"));
  EXPECT_FALSE(is_file_store_value_name(".kvp"));
  EXPECT_FALSE(is_file_store_value_name("A.kvp"));
  EXPECT_FALSE(is_file_store_value_name("a.kvp.bak"));
  EXPECT_FALSE(is_file_store_value_name((std::string(121, 'a') + ".kvp").c_str()));
  EXPECT_TRUE(is_file_store_temp_name(".kvptmp-1-2-3"));
  EXPECT_FALSE(is_file_store_temp_name(".kvptmp-"));
  EXPECT_FALSE(is_file_store_temp_name(".kvptmp-1-a"));
  EXPECT_FALSE(is_file_store_temp_name("kvptmp-1-2-3"));
}

}  // namespace
