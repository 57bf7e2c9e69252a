// The memcached backend (lib/storage/memcached_store.hpp) against real memcached
// servers started by the tests (tests/support/server_process.hpp): sealed pages
// of 100 bytes and of 8 MiB + 96 (split into parts), placement over several
// servers, replicas, servers killed, stopped and restarted, parts deleted or
// overwritten behind the backend's back, write-once, threads, and the counters.
#include <gtest/gtest.h>
#include <libmemcached/memcached.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "server_process.hpp"
#include "storage/blob_store.hpp"
#include "storage/memcached_store.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

namespace {

using kvp::storage::BlobResult;
using kvp::storage::BlobStats;
using kvp::storage::BlobStore;
using kvp::storage::PageCheck;
using kvtest::ServerProcess;

constexpr uint64_t kSmallPayload = 100 - kvp::storage::kPageHeaderBytes;  // a 100-byte stored page
constexpr uint64_t kLargePayload = 8ull << 20;                            // Llama-3.1-8B, page 64: 8 MiB + 96
// What a call bounded by its timeouts may take beyond them: the work itself on a loaded
// 2-CPU machine or in a sanitizer build, far below the unbounded waits these tests guard
// against (a 30 s retry, libmemcached's default timeouts of seconds).
constexpr double kSlackS = 1.5;

const kvp::storage::Fingerprint& fingerprint() {
  static const kvp::storage::Fingerprint fp = kvp::storage::fingerprint_of("memcached store test");
  return fp;
}

kvp::cache::Digest digest_of(uint32_t seed) {
  kvp::cache::Digest d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(seed * 131 + i * 7 + (seed >> 8));
  std::memcpy(d.data(), &seed, sizeof(seed));
  return d;
}

// A sealed page (header + payload) and its key.
struct Page {
  std::string key;
  std::vector<uint8_t> bytes;
  uint64_t payload = 0;
  kvp::cache::Digest digest{};
};

Page make_page(uint32_t seed, uint64_t payload) {
  Page p;
  p.digest = digest_of(seed);
  p.key = kvp::storage::page_key(fingerprint(), p.digest);
  p.payload = payload;
  p.bytes.resize(kvp::storage::stored_page_bytes(payload));
  std::mt19937_64 rng(seed);
  for (size_t i = kvp::storage::kPageHeaderBytes; i + 8 <= p.bytes.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(p.bytes.data() + i, &v, 8);
  }
  kvp::storage::seal_page(p.bytes.data(), payload, fingerprint(), p.digest);
  return p;
}

std::vector<Page> make_pages(uint32_t first, size_t n, uint64_t payload) {
  std::vector<Page> pages;
  for (size_t i = 0; i < n; ++i) pages.push_back(make_page(first + uint32_t(i), payload));
  return pages;
}

std::vector<BlobResult> put_pages(BlobStore& store, const std::vector<Page>& pages) {
  std::vector<std::string> keys;
  std::vector<const uint8_t*> values;
  std::vector<size_t> sizes;
  for (const Page& p : pages) {
    keys.push_back(p.key);
    values.push_back(p.bytes.data());
    sizes.push_back(p.bytes.size());
  }
  std::vector<BlobResult> out(pages.size(), BlobResult::kError);
  store.put(keys.data(), values.data(), sizes.data(), pages.size(), out.data());
  return out;
}

// Reads pages back into buffers of their size; the result of each, checked:
// kOk only with the exact bytes and a page that passes check_page.
struct ReadBack {
  std::vector<BlobResult> out;
  size_t ok = 0, miss = 0, error = 0;
  double seconds = 0;
};

ReadBack get_pages(BlobStore& store, const std::vector<Page>& pages) {
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<uint8_t*> dst;
  std::vector<size_t> capacity, sizes(pages.size(), 0);
  for (const Page& p : pages) {
    keys.push_back(p.key);
    buffers.emplace_back(p.bytes.size(), 0xee);
    capacity.push_back(p.bytes.size());
  }
  for (auto& b : buffers) dst.push_back(b.data());
  ReadBack r;
  r.out.assign(pages.size(), BlobResult::kError);
  const auto t0 = std::chrono::steady_clock::now();
  store.get(keys.data(), dst.data(), capacity.data(), pages.size(), sizes.data(), r.out.data());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < pages.size(); ++i) {
    switch (r.out[i]) {
      case BlobResult::kOk:
        r.ok++;
        EXPECT_EQ(sizes[i], pages[i].bytes.size()) << pages[i].key;
        EXPECT_TRUE(buffers[i] == pages[i].bytes) << "a hit with other bytes: " << pages[i].key;
        EXPECT_EQ(kvp::storage::check_page(buffers[i].data(), sizes[i], fingerprint(), pages[i].digest,
                                           pages[i].payload),
                  PageCheck::kOk);
        break;
      case BlobResult::kMiss: r.miss++; break;
      case BlobResult::kError: r.error++; break;
    }
  }
  return r;
}

size_t exists(BlobStore& store, const std::vector<Page>& pages) {
  std::vector<std::string> keys;
  for (const Page& p : pages) keys.push_back(p.key);
  return store.exists_prefix(keys.data(), keys.size());
}

// A plain libmemcached client on one server: what the tests do behind the backend's back.
class Raw {
 public:
  explicit Raw(int port) : mc_(memcached_create(nullptr)) { memcached_server_add(mc_, "127.0.0.1", in_port_t(port)); }
  ~Raw() { memcached_free(mc_); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  uint64_t items() {
    memcached_return_t rc;
    memcached_stat_st* st = memcached_stat(mc_, nullptr, &rc);
    const uint64_t n = st != nullptr && rc == MEMCACHED_SUCCESS ? st[0].curr_items : 0;
    memcached_stat_free(mc_, st);
    return n;
  }
  bool has(const std::string& key) { return memcached_exist(mc_, key.data(), key.size()) == MEMCACHED_SUCCESS; }
  std::vector<uint8_t> get(const std::string& key) {
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char* v = memcached_get(mc_, key.data(), key.size(), &len, &flags, &rc);
    std::vector<uint8_t> bytes(v, v + (v ? len : 0));
    free(v);
    return bytes;
  }
  bool set(const std::string& key, const std::vector<uint8_t>& bytes) {
    return memcached_set(mc_, key.data(), key.size(), reinterpret_cast<const char*>(bytes.data()), bytes.size(), 0,
                         0) == MEMCACHED_SUCCESS;
  }
  bool del(const std::string& key) { return memcached_delete(mc_, key.data(), key.size(), 0) == MEMCACHED_SUCCESS; }

 private:
  memcached_st* mc_;
};

class MemcachedStoreTest : public ::testing::Test {
 protected:
  void start(size_t n, const std::string& item_limit = "1m") {
    for (size_t i = 0; i < n; ++i) {
      std::string error;
      auto s = ServerProcess::memcached(&error, item_limit);
      ASSERT_TRUE(s) << error;
      servers_.push_back(std::move(s));
    }
  }
  kvp::config::StorageConfig config(int64_t replicas = 0, int64_t timeout_ms = 200, double retry_s = 2.0) {
    kvp::config::StorageConfig c;
    c.enabled = true;
    c.backend = "memcached";
    for (auto& s : servers_) c.servers.push_back(s->address());
    c.replicas = replicas;
    c.timeout_ms = timeout_ms;
    c.retry_timeout_s = retry_s;
    return c;
  }
  std::unique_ptr<BlobStore> open(const kvp::config::StorageConfig& c) {
    std::unique_ptr<BlobStore> store;
    const kvp::Status st = kvp::storage::open_memcached_store(c, &store);
    EXPECT_TRUE(st.is_ok()) << st.message();
    return store;
  }
  // The server (index) holding `key`, found with raw clients; -1 when none.
  int holder(const std::string& key) {
    for (size_t s = 0; s < servers_.size(); ++s) {
      if (servers_[s]->running() && Raw(servers_[s]->port()).has(key)) return int(s);
    }
    return -1;
  }

  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

TEST_F(MemcachedStoreTest, RoundTripsSmallAndSplitPages) {
  start(1);
  auto store = open(config());
  ASSERT_TRUE(store);
  EXPECT_EQ(store->describe(), "memcached:" + servers_[0]->address());
  std::vector<Page> pages = make_pages(1, 2, kSmallPayload);
  for (Page& p : make_pages(10, 2, kLargePayload)) pages.push_back(std::move(p));
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  const ReadBack r = get_pages(*store, pages);
  EXPECT_EQ(r.ok, 4u);

  // The large pages are split: 8 MiB + 96 over parts of 1 MiB - 1 KiB is 9 parts; the small ones are inline.
  Raw raw(servers_[0]->port());
  EXPECT_EQ(raw.items(), 2u + 2u * 10u);
  EXPECT_TRUE(raw.has(kvp::storage::memcached_part_key(pages[2].key, 8)));
  EXPECT_FALSE(raw.has(kvp::storage::memcached_part_key(pages[2].key, 9)));
  EXPECT_FALSE(raw.has(kvp::storage::memcached_part_key(pages[0].key, 0)));
  EXPECT_EQ(raw.get(pages[2].key).size(), kvp::storage::kMemcachedRecordHeaderBytes + 9 * 8);
  EXPECT_EQ(raw.get(pages[0].key).size(), kvp::storage::kMemcachedRecordHeaderBytes + 100);

  const BlobStats s = store->stats();
  const uint64_t bytes = 2 * 100 + 2 * (kLargePayload + 96);
  EXPECT_EQ(s.puts, 4u);
  EXPECT_EQ(s.put_bytes, bytes);
  EXPECT_EQ(s.gets, 4u);
  EXPECT_EQ(s.get_hits, 4u);
  EXPECT_EQ(s.get_bytes, bytes);
  EXPECT_EQ(s.get_misses + s.get_errors + s.put_errors + s.put_existing, 0u);
  EXPECT_EQ(s.timeouts + s.server_errors + s.partial_values + s.servers_ejected, 0u);
}

TEST_F(MemcachedStoreTest, ShortBufferGetsTheFullLengthAndAPrefix) {
  start(1);
  auto store = open(config());
  const Page big = make_page(3, kLargePayload), small = make_page(4, kSmallPayload);
  put_pages(*store, {big, small});
  const std::string keys[2] = {big.key, small.key};
  std::vector<uint8_t> a(3u << 20), b(10);
  uint8_t* dst[2] = {a.data(), b.data()};
  const size_t cap[2] = {a.size(), b.size()};
  size_t sizes[2] = {0, 0};
  BlobResult out[2];
  store->get(keys, dst, cap, 2, sizes, out);
  EXPECT_EQ(out[0], BlobResult::kOk);
  EXPECT_EQ(out[1], BlobResult::kOk);
  EXPECT_EQ(sizes[0], big.bytes.size());
  EXPECT_EQ(sizes[1], small.bytes.size());
  EXPECT_EQ(std::memcmp(a.data(), big.bytes.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp(b.data(), small.bytes.data(), b.size()), 0);
}

TEST_F(MemcachedStoreTest, LargerItemLimitMeansFewerParts) {
  start(1, "4m");  // item_size_max asked at open: parts of 4 MiB - 1 KiB
  auto store = open(config());
  const Page big = make_page(5, kLargePayload);
  EXPECT_EQ(put_pages(*store, {big})[0], BlobResult::kOk);
  Raw raw(servers_[0]->port());
  EXPECT_EQ(raw.items(), 1u + 3u);
  EXPECT_TRUE(raw.has(kvp::storage::memcached_part_key(big.key, 2)));
  EXPECT_EQ(get_pages(*store, {big}).ok, 1u);
}

TEST_F(MemcachedStoreTest, WriteOnceAndMisses) {
  start(1);
  auto store = open(config());
  const Page small = make_page(20, kSmallPayload), big = make_page(21, kLargePayload);
  EXPECT_EQ(put_pages(*store, {small, big}), std::vector<BlobResult>(2, BlobResult::kOk));
  // The same keys with other bytes: skipped (write-once), the first values stay.
  Page small2 = small, big2 = big;
  small2.bytes[150 % small2.bytes.size()] ^= 1;
  big2.bytes[1000] ^= 1;
  EXPECT_EQ(put_pages(*store, {small2, big2}), std::vector<BlobResult>(2, BlobResult::kOk));
  EXPECT_EQ(get_pages(*store, {small, big}).ok, 2u);
  const ReadBack miss = get_pages(*store, make_pages(900, 3, kSmallPayload));
  EXPECT_EQ(miss.miss, 3u);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 2u);
  EXPECT_EQ(s.put_existing, 2u);
  EXPECT_EQ(s.gets, 5u);
  EXPECT_EQ(s.get_hits, 2u);
  EXPECT_EQ(s.get_misses, 3u);
  EXPECT_EQ(s.partial_values + s.get_errors + s.server_errors + s.timeouts, 0u);
}

TEST_F(MemcachedStoreTest, ExistsPrefixCountsConsecutiveHits) {
  start(2);
  auto store = open(config());
  std::vector<Page> pages = make_pages(30, 6, kSmallPayload);
  pages[2] = make_page(31 + 100, kLargePayload);
  put_pages(*store, {pages[0], pages[1], pages[2], pages[3], pages[5]});
  EXPECT_EQ(exists(*store, pages), 4u);
  EXPECT_EQ(exists(*store, {pages[4], pages[0]}), 0u);
  EXPECT_EQ(exists(*store, {}), 0u);
  EXPECT_EQ(store->stats().exists_calls, 3u);
}

TEST_F(MemcachedStoreTest, KeysSpreadOverThreeServers) {
  start(3);
  auto store = open(config());
  const std::vector<Page> pages = make_pages(100, 90, kSmallPayload);
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  uint64_t total = 0;
  for (auto& s : servers_) {
    const uint64_t items = Raw(s->port()).items();
    EXPECT_GE(items, 10u) << s->address();  // ~30 each
    total += items;
  }
  EXPECT_EQ(total, 90u);
  EXPECT_EQ(get_pages(*store, pages).ok, 90u);
  EXPECT_EQ(store->describe(), "memcached:" + servers_[0]->address() + "," + servers_[1]->address() + "," +
                                   servers_[2]->address());
}

TEST_F(MemcachedStoreTest, LargeBatchSpansSeveralRequests) {
  start(1);
  auto store = open(config());
  // More keys than one `get` line carries (512), small pages and a split one.
  std::vector<Page> pages = make_pages(3000, 1100, kSmallPayload);
  pages.push_back(make_page(5000, kLargePayload));
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  EXPECT_EQ(get_pages(*store, pages).ok, pages.size());
  EXPECT_EQ(exists(*store, pages), pages.size());
  pages.insert(pages.begin() + 700, make_page(6000, kSmallPayload));  // never stored
  EXPECT_EQ(exists(*store, pages), 700u);
  const ReadBack r = get_pages(*store, pages);
  EXPECT_EQ(r.ok, pages.size() - 1);
  EXPECT_EQ(r.out[700], BlobResult::kMiss);
}

TEST_F(MemcachedStoreTest, ReplicasKeepEveryPageReadableWhenAServerDies) {
  start(3);
  auto store = open(config(/*replicas=*/1));
  std::vector<Page> pages = make_pages(200, 40, kSmallPayload);
  for (Page& p : make_pages(300, 4, kLargePayload)) pages.push_back(std::move(p));
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  // Two copies of every item: the records and parts add up to twice the items.
  uint64_t total = 0;
  for (auto& s : servers_) total += Raw(s->port()).items();
  EXPECT_EQ(total, 2u * (40 + 4 * 10));
  servers_[1]->kill();
  for (int call = 0; call < 3; ++call) {
    const ReadBack r = get_pages(*store, pages);
    EXPECT_EQ(r.ok, pages.size()) << "call " << call;
  }
  const BlobStats s = store->stats();
  // Refused twice (one per call until it left the ring), then ejected; no timeouts.
  EXPECT_EQ(s.server_errors, 2u);
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.timeouts, 0u);
  EXPECT_EQ(s.get_hits, 3 * pages.size());
}

TEST_F(MemcachedStoreTest, KilledServerGivesMissesThenIsUsedAgainAfterRetryTimeout) {
  start(3);
  const int64_t timeout_ms = 150;
  // retry_timeout_s well above the calls' time (a TSan build reads 8 MiB pages slowly).
  auto store = open(config(0, timeout_ms, /*retry_s=*/2.0));
  std::vector<Page> pages = make_pages(400, 30, kSmallPayload);
  for (Page& p : make_pages(500, 3, kLargePayload)) pages.push_back(std::move(p));
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  size_t on_dead = 0;
  for (const Page& p : pages) on_dead += holder(p.key) == 2 ? 1 : 0;
  ASSERT_GT(on_dead, 0u);

  // Killed mid-run: reads keep going, each bounded; the dead server's pages are
  // not hits (kError while it is tried, kMiss once it left the ring).
  for (int call = 0; call < 5; ++call) {
    if (call == 2) servers_[2]->kill();
    const ReadBack r = get_pages(*store, pages);
    EXPECT_LE(r.seconds, 4 * timeout_ms / 1000.0 + kSlackS) << "call " << call;
    if (call < 2) {
      EXPECT_EQ(r.ok, pages.size());
    } else {
      // A split page has parts on every server, so the dead one costs it too.
      EXPECT_GE(r.ok, pages.size() - on_dead - 3) << "call " << call;
      EXPECT_LT(r.ok, pages.size());
      if (call >= 4) {
        EXPECT_EQ(r.error, 0u) << "ejected: clean misses";
      }
    }
  }
  BlobStats s = store->stats();
  EXPECT_EQ(s.server_errors, 2u);
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.timeouts, 0u);

  // Back (empty) on the same port: after retry_timeout_s it is in the ring again.
  std::string error;
  ASSERT_TRUE(servers_[2]->restart(&error)) << error;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  const std::vector<Page> fresh = make_pages(600, 30, kSmallPayload);
  for (BlobResult r : put_pages(*store, fresh)) EXPECT_EQ(r, BlobResult::kOk);
  EXPECT_GT(Raw(servers_[2]->port()).items(), 0u);
  EXPECT_EQ(get_pages(*store, fresh).ok, fresh.size());
  s = store->stats();
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.server_errors, 2u);
}

TEST_F(MemcachedStoreTest, KillDuringReadsOfSplitPages) {
  start(3);
  const int64_t timeout_ms = 150;
  auto store = open(config(0, timeout_ms, /*retry_s=*/30));
  const std::vector<Page> pages = make_pages(1400, 4, kLargePayload);
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  // Which pages have an item (record or part) on the server that dies.
  std::vector<bool> touched(pages.size(), false);
  size_t lost = 0, partial = 0;  // partial: the record survives, a part does not
  for (size_t i = 0; i < pages.size(); ++i) {
    bool part_lost = false;
    for (uint32_t p = 0; p < 9; ++p) part_lost = part_lost || holder(kvp::storage::memcached_part_key(pages[i].key, p)) == 0;
    const bool record_lost = holder(pages[i].key) == 0;
    touched[i] = record_lost || part_lost;
    lost += touched[i] ? 1 : 0;
    partial += !record_lost && part_lost ? 1 : 0;
  }
  ASSERT_GT(lost, 0u);
  // Two readers while a server dies under them: every hit is whole (get_pages
  // checks the bytes and check_page), every call bounded.
  std::atomic<bool> stop{false}, killed{false};
  std::atomic<int> slow{0}, calls_after_kill{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      while (!stop) {
        const bool after = killed;
        const ReadBack r = get_pages(*store, pages);
        slow += r.seconds > 4 * timeout_ms / 1000.0 + kSlackS;
        calls_after_kill += after ? 1 : 0;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  servers_[0]->kill();
  killed = true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls_after_kill < 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(slow.load(), 0);
  EXPECT_GE(calls_after_kill.load(), 4);
  // The server is out of the ring: the pages it held a piece of are clean misses, the others whole.
  const ReadBack after = get_pages(*store, pages);
  for (size_t i = 0; i < pages.size(); ++i) {
    EXPECT_EQ(after.out[i], touched[i] ? BlobResult::kMiss : BlobResult::kOk) << i;
  }
  const BlobStats s = store->stats();
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_GE(s.server_errors, 2u);
  EXPECT_GE(s.partial_values, partial);
}

TEST_F(MemcachedStoreTest, StoppedServerTimesOutWithinTheBound) {
  start(2);
  const int64_t timeout_ms = 150;
  auto store = open(config(0, timeout_ms, /*retry_s=*/30));
  std::vector<Page> pages = make_pages(700, 20, kSmallPayload);
  pages.push_back(make_page(750, kLargePayload));
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  servers_[1]->pause();  // accepts connections, never answers
  for (int call = 0; call < 4; ++call) {
    const uint64_t timeouts_before = store->stats().timeouts;
    const ReadBack r = get_pages(*store, pages);
    EXPECT_LE(r.seconds, 4 * timeout_ms / 1000.0 + kSlackS) << "call " << call;
    EXPECT_LT(r.ok, pages.size());
    if (call >= 2) {
      EXPECT_EQ(r.error, 0u);
      // Ejected, nothing waits: no timeout is spent (counted, not timed: a loaded machine
      // can make the call itself take as long as one timeout).
      EXPECT_EQ(store->stats().timeouts, timeouts_before) << "ejected: nothing waits";
    }
  }
  // Puts while it is out of the ring land on the other server.
  const std::vector<Page> fresh = make_pages(800, 5, kSmallPayload);
  for (BlobResult r : put_pages(*store, fresh)) EXPECT_EQ(r, BlobResult::kOk);
  EXPECT_EQ(get_pages(*store, fresh).ok, fresh.size());
  const BlobStats s = store->stats();
  EXPECT_EQ(s.timeouts, 2u);
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.server_errors, 0u);
  servers_[1]->resume();
}

TEST_F(MemcachedStoreTest, StoppedServerBoundsPutsToo) {
  start(1);
  const int64_t timeout_ms = 150;
  auto store = open(config(0, timeout_ms));
  servers_[0]->pause();
  const std::vector<Page> pages = {make_page(850, kLargePayload), make_page(851, kSmallPayload)};
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<BlobResult> out = put_pages(*store, pages);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LE(seconds, 4 * timeout_ms / 1000.0 + kSlackS);
  EXPECT_EQ(out, std::vector<BlobResult>(2, BlobResult::kError));
  const BlobStats s = store->stats();
  EXPECT_EQ(s.put_errors, 2u);
  EXPECT_GE(s.timeouts, 1u);
  servers_[0]->resume();
}

TEST_F(MemcachedStoreTest, DeletedPartIsAMissNeverPartialData) {
  start(3);
  auto store = open(config());
  const std::vector<Page> pages = {make_page(900, kLargePayload), make_page(901, kLargePayload)};
  for (BlobResult r : put_pages(*store, pages)) EXPECT_EQ(r, BlobResult::kOk);
  const std::string part = kvp::storage::memcached_part_key(pages[0].key, 3);
  const int at = holder(part);
  ASSERT_GE(at, 0);
  ASSERT_TRUE(Raw(servers_[at]->port()).del(part));
  const ReadBack r = get_pages(*store, pages);
  EXPECT_EQ(r.out[0], BlobResult::kMiss);
  EXPECT_EQ(r.out[1], BlobResult::kOk);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.partial_values, 1u);
  EXPECT_EQ(s.get_misses, 1u);
  EXPECT_EQ(s.get_hits, 1u);
  // The manifest is there: exists_prefix does not read parts (a get decides).
  EXPECT_EQ(exists(*store, pages), 2u);
}

TEST_F(MemcachedStoreTest, CorruptedPartOrRecordIsCaught) {
  start(2);
  auto store = open(config());
  const Page big = make_page(950, kLargePayload), small = make_page(951, kSmallPayload);
  for (BlobResult r : put_pages(*store, {big, small})) EXPECT_EQ(r, BlobResult::kOk);
  // Other bytes of the same length under part 2 and under the small page's record.
  const std::string part = kvp::storage::memcached_part_key(big.key, 2);
  for (const std::string& key : {part, small.key}) {
    const int at = holder(key);
    ASSERT_GE(at, 0);
    Raw raw(servers_[at]->port());
    std::vector<uint8_t> bytes = raw.get(key);
    ASSERT_FALSE(bytes.empty());
    bytes[bytes.size() / 2] ^= 0x40;
    ASSERT_TRUE(raw.set(key, bytes));
  }
  // The backend's checksums catch both; had they not, check_page would (get_pages checks every hit).
  const ReadBack r = get_pages(*store, {big, small});
  EXPECT_EQ(r.miss, 2u);
  EXPECT_EQ(store->stats().partial_values, 2u);
}

TEST_F(MemcachedStoreTest, ConcurrentThreads) {
  start(3);
  // A generous timeout: this test is about threads, and under ThreadSanitizer on a busy
  // machine 8 MiB values can take longer than the default 200 ms (3 timeouts at load 10).
  auto store = open(config(1, /*timeout_ms=*/5000));
  const std::vector<Page> shared = make_pages(1000, 16, kSmallPayload);
  const Page big = make_page(1100, kLargePayload);
  constexpr int kThreads = 4, kRounds = 5;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<Page> own = make_pages(2000 + 100 * uint32_t(t), 8, kSmallPayload);
      for (int round = 0; round < kRounds; ++round) {
        for (BlobResult r : put_pages(*store, shared)) bad += r != BlobResult::kOk;
        for (BlobResult r : put_pages(*store, own)) bad += r != BlobResult::kOk;
        bad += put_pages(*store, {big})[0] != BlobResult::kOk;
        std::vector<Page> all = own;
        all.insert(all.end(), shared.begin(), shared.end());
        all.push_back(big);
        bad += int(all.size() - get_pages(*store, all).ok);
        bad += int(all.size() - exists(*store, all));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const BlobStats s = store->stats();
  const uint64_t put_calls = uint64_t(kThreads) * kRounds * (16 + 8 + 1);
  EXPECT_EQ(s.puts + s.put_existing, put_calls);
  EXPECT_EQ(s.puts, 16u + 1u + uint64_t(kThreads) * 8);  // every key stored once
  EXPECT_EQ(s.gets, put_calls);
  EXPECT_EQ(s.get_hits, put_calls);
  EXPECT_EQ(s.exists_calls, uint64_t(kThreads) * kRounds);
  EXPECT_EQ(s.put_errors + s.get_errors + s.timeouts + s.server_errors + s.partial_values, 0u);
}

TEST_F(MemcachedStoreTest, ClearFlushesEveryServer) {
  start(2);
  auto store = open(config());
  const std::vector<Page> pages = {make_page(1200, kSmallPayload), make_page(1201, kLargePayload)};
  put_pages(*store, pages);
  EXPECT_TRUE(store->clear().is_ok());
  EXPECT_EQ(get_pages(*store, pages).miss, 2u);
  EXPECT_EQ(exists(*store, pages), 0u);
  // Write-once does not outlive a clear: the pages can be stored again.
  put_pages(*store, pages);
  EXPECT_EQ(get_pages(*store, pages).ok, 2u);
  EXPECT_EQ(store->stats().puts, 4u);
  servers_[1]->kill();
  const kvp::Status st = store->clear();
  EXPECT_EQ(st.code(), KVPOOL_ERR_IO);
  EXPECT_NE(st.message().find(servers_[1]->address()), std::string::npos) << st.message();
}

TEST_F(MemcachedStoreTest, OpenChecksItsConfig) {
  std::unique_ptr<BlobStore> store;
  kvp::config::StorageConfig c;
  c.backend = "memcached";
  c.servers = {"127.0.0.1"};
  EXPECT_EQ(kvp::storage::open_memcached_store(c, &store).code(), KVPOOL_ERR_CONFIG);
  c.servers = {"127.0.0.1:0"};
  EXPECT_EQ(kvp::storage::open_memcached_store(c, &store).code(), KVPOOL_ERR_CONFIG);
  c.servers = {"127.0.0.1:11211"};
  c.replicas = 1;
  EXPECT_EQ(kvp::storage::open_memcached_store(c, &store).code(), KVPOOL_ERR_CONFIG);
  c.servers.clear();
  c.replicas = 0;
  EXPECT_EQ(kvp::storage::open_memcached_store(c, &store).code(), KVPOOL_ERR_CONFIG);
  EXPECT_FALSE(store);
}

TEST_F(MemcachedStoreTest, NoServerUpOpensAndFailsFast) {
  kvp::config::StorageConfig c;
  c.backend = "memcached";
  c.servers = {"127.0.0.1:" + std::to_string(ServerProcess::free_port())};
  c.timeout_ms = 150;
  std::unique_ptr<BlobStore> store;
  ASSERT_TRUE(kvp::storage::open_memcached_store(c, &store).is_ok());
  const Page p = make_page(1300, kSmallPayload);
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(put_pages(*store, {p})[0], BlobResult::kError);
    EXPECT_EQ(get_pages(*store, {p}).error, 1u);  // no server to ask: an error, not a miss
    EXPECT_EQ(exists(*store, {p}), 0u);
  }
  const BlobStats s = store->stats();
  EXPECT_EQ(s.put_errors, 3u);
  EXPECT_EQ(s.get_errors, 3u);
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.server_errors, 2u);
}

}  // namespace
