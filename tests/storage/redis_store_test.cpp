// The redis backend (lib/storage/redis_store.hpp) against real redis-server
// children (tests/support/server_process.hpp): sealed pages round trip, write
// once, pipelined batches, a primary with a replica, servers killed, paused and
// restarted, values damaged behind the backend's back, clear(), threads, and the
// counters of each.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "server_process.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"
#include "storage/redis_store.hpp"

namespace {

using kvp::storage::BlobResult;
using kvp::storage::BlobStats;
using kvp::storage::BlobStore;
using kvp::storage::PageCheck;
using kvtest::ServerProcess;
using Clock = std::chrono::steady_clock;

constexpr size_t kLargePayload = size_t(8) << 20;  // an 8 MiB page: 8 MiB + 96 bytes stored

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const kvp::storage::Fingerprint& fingerprint() {
  static const kvp::storage::Fingerprint fp = kvp::storage::fingerprint_of("redis-store-test");
  return fp;
}

// A sealed page: payload bytes derived from `seed`, its digest from `seed` as one token.
struct Page {
  kvp::cache::Digest digest;
  std::string key;
  std::vector<uint8_t> bytes;
  uint64_t payload = 0;
};

Page make_page(int32_t seed, uint64_t payload) {
  Page p;
  p.digest = kvp::cache::page_digest(nullptr, &seed, 1);
  p.key = kvp::storage::page_key(fingerprint(), p.digest);
  p.payload = payload;
  p.bytes.resize(kvp::storage::stored_page_bytes(payload));
  uint32_t x = uint32_t(seed) * 2654435761u + 1;
  for (uint64_t i = 0; i < payload; ++i) {
    x = x * 1664525u + 1013904223u;
    p.bytes[kvp::storage::kPageHeaderBytes + i] = uint8_t(x >> 24);
  }
  kvp::storage::seal_page(p.bytes.data(), payload, fingerprint(), p.digest);
  return p;
}

PageCheck check(const Page& p, const std::vector<uint8_t>& got, size_t size) {
  return kvp::storage::check_page(got.data(), size, fingerprint(), p.digest, p.payload);
}

std::unique_ptr<ServerProcess> redis(const std::vector<std::string>& extra = {}, int port = 0) {
  std::string error;
  auto p = ServerProcess::redis(&error, extra, port);
  EXPECT_NE(p, nullptr) << error;
  return p;
}

// A replica of the server on `primary_port`. Its copy of the primary's snapshot goes to /tmp, not the
// working directory (replica_snapshot() names it; the test removes it).
std::string replica_snapshot(int primary_port) {
  return "kvpool-redis-test-replica-of-" + std::to_string(primary_port) + ".rdb";
}
std::vector<std::string> replica_of(int primary_port) {
  return {"--replicaof", "127.0.0.1", std::to_string(primary_port), "--dir", "/tmp", "--dbfilename",
          replica_snapshot(primary_port)};
}
struct RemoveReplicaSnapshot {  // declared before the replica: runs after it is stopped
  int primary_port;
  ~RemoveReplicaSnapshot() { std::remove(("/tmp/" + replica_snapshot(primary_port)).c_str()); }
};

std::unique_ptr<BlobStore> open_store(const std::vector<std::string>& servers, int64_t timeout_ms = 2000) {
  kvp::config::StorageConfig cfg;
  cfg.enabled = true;
  cfg.backend = "redis";
  cfg.servers = servers;
  cfg.timeout_ms = timeout_ms;
  std::unique_ptr<BlobStore> store;
  const kvp::Status st = kvp::storage::open_redis_store(cfg, &store);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return store;
}

// A plain hiredis client, the "someone else" of these tests.
class Raw {
 public:
  explicit Raw(int port) : c_(redisConnect("127.0.0.1", port)) {}
  ~Raw() {
    if (c_ != nullptr) redisFree(c_);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  // The reply as text: a string's bytes, an integer's digits, "(nil)", "ERR:<message>", "OK" for a status.
  std::string run(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      len.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c_, int(argv.size()), argv.data(), len.data()));
    if (r == nullptr) return "CONNECTION:" + std::string(c_->errstr);
    std::string s;
    switch (r->type) {
      case REDIS_REPLY_STRING:
      case REDIS_REPLY_STATUS: s.assign(r->str, size_t(r->len)); break;
      case REDIS_REPLY_INTEGER: s = std::to_string(r->integer); break;
      case REDIS_REPLY_NIL: s = "(nil)"; break;
      case REDIS_REPLY_ERROR: s = "ERR:" + std::string(r->str, size_t(r->len)); break;
      default: s = "(array of " + std::to_string(r->elements) + ")"; break;
    }
    freeReplyObject(r);
    return s;
  }

  // A counter of INFO stats ("total_reads_processed": the read events of the server's clients).
  long stat(const std::string& name) {
    const std::string info = run({"INFO", "stats"});
    const size_t at = info.find(name + ":");
    return at == std::string::npos ? -1 : std::stol(info.substr(at + name.size() + 1));
  }

  // calls= of one command in INFO commandstats (0 when never called).
  long calls(const std::string& command) {
    const std::string info = run({"INFO", "commandstats"});
    const std::string tag = "cmdstat_" + command + ":calls=";
    const size_t at = info.find(tag);
    return at == std::string::npos ? 0 : std::stol(info.substr(at + tag.size()));
  }

 private:
  redisContext* c_;
};

struct Batch {
  std::vector<std::string> keys;
  std::vector<const uint8_t*> values;
  std::vector<size_t> sizes;
  explicit Batch(const std::vector<Page>& pages) {
    for (const Page& p : pages) {
      keys.push_back(p.key);
      values.push_back(p.bytes.data());
      sizes.push_back(p.bytes.size());
    }
  }
};

std::vector<BlobResult> put_all(BlobStore& s, const std::vector<Page>& pages) {
  Batch b(pages);
  std::vector<BlobResult> out(pages.size(), BlobResult::kMiss);
  s.put(b.keys.data(), b.values.data(), b.sizes.data(), pages.size(), out.data());
  return out;
}

struct Got {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<size_t> sizes;
  std::vector<BlobResult> out;
};

// Reads every page into a buffer of its own stored size (plus `extra` bytes).
Got get_all(BlobStore& s, const std::vector<Page>& pages, size_t extra = 0) {
  Got g;
  std::vector<std::string> keys;
  std::vector<uint8_t*> dst;
  std::vector<size_t> cap;
  g.bufs.resize(pages.size());
  for (size_t i = 0; i < pages.size(); ++i) {
    keys.push_back(pages[i].key);
    g.bufs[i].assign(pages[i].bytes.size() + extra, 0);
    dst.push_back(g.bufs[i].data());
    cap.push_back(g.bufs[i].size());
  }
  g.sizes.assign(pages.size(), 12345);
  g.out.assign(pages.size(), BlobResult::kOk);
  s.get(keys.data(), dst.data(), cap.data(), pages.size(), g.sizes.data(), g.out.data());
  return g;
}

size_t exists(BlobStore& s, const std::vector<Page>& pages) {
  std::vector<std::string> keys;
  for (const Page& p : pages) keys.push_back(p.key);
  return s.exists_prefix(keys.data(), keys.size());
}

std::vector<Page> small_pages(int32_t first, size_t n) {
  std::vector<Page> pages;
  for (int32_t seed = first; seed < first + int32_t(n); ++seed) pages.push_back(make_page(seed, 4 + uint64_t(seed % 7)));
  return pages;
}

void expect_all(const std::vector<BlobResult>& out, BlobResult want) {
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], want) << "key " << i;
}

void sleep_past_backoff() {
  std::this_thread::sleep_for(std::chrono::milliseconds(kvp::storage::kRedisRetryAfterMs + 100));
}

TEST(RedisStore, RoundTripsSealedPagesOf100BytesAnd8MiB) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->describe(), "redis:" + server->address());

  const std::vector<Page> pages = {make_page(1, 4), make_page(2, kLargePayload)};
  ASSERT_EQ(pages[0].bytes.size(), 100u);
  ASSERT_EQ(pages[1].bytes.size(), kLargePayload + 96);
  expect_all(put_all(*store, pages), BlobResult::kOk);
  EXPECT_EQ(exists(*store, pages), 2u);

  Got g = get_all(*store, pages);
  for (size_t i = 0; i < pages.size(); ++i) {
    ASSERT_EQ(g.out[i], BlobResult::kOk);
    EXPECT_EQ(g.sizes[i], pages[i].bytes.size());
    EXPECT_EQ(check(pages[i], g.bufs[i], g.sizes[i]), PageCheck::kOk);
    EXPECT_EQ(g.bufs[i], pages[i].bytes);
  }
  // A buffer too small: the full length is reported, only capacity bytes copied.
  {
    std::string key = pages[1].key;
    std::vector<uint8_t> small(1000, 0xEE);
    uint8_t* dst = small.data();
    size_t cap = 900, size = 0;
    BlobResult r = BlobResult::kError;
    store->get(&key, &dst, &cap, 1, &size, &r);
    EXPECT_EQ(r, BlobResult::kOk);
    EXPECT_EQ(size, pages[1].bytes.size());
    EXPECT_EQ(0, std::memcmp(small.data(), pages[1].bytes.data(), 900));
    EXPECT_EQ(small[900], 0xEE);
  }
  // A missing key is a miss.
  const Page absent = make_page(3, 4);
  Got m = get_all(*store, {absent});
  EXPECT_EQ(m.out[0], BlobResult::kMiss);
  EXPECT_EQ(m.sizes[0], 0u);

  // Mixed in one batch: values straddle the receive buffer, nil replies between them.
  const std::vector<Page> mixed = {pages[0], absent, pages[1], pages[0], absent, pages[1], pages[0]};
  Got x = get_all(*store, mixed);
  for (size_t i = 0; i < mixed.size(); ++i) {
    if (mixed[i].key == absent.key) {
      EXPECT_EQ(x.out[i], BlobResult::kMiss) << i;
    } else {
      ASSERT_EQ(x.out[i], BlobResult::kOk) << i;
      EXPECT_EQ(x.bufs[i], mixed[i].bytes) << i;
    }
  }

  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 2u);
  EXPECT_EQ(s.put_bytes, 100u + kLargePayload + 96);
  EXPECT_EQ(s.put_existing, 0u);
  EXPECT_EQ(s.put_errors, 0u);
  EXPECT_EQ(s.gets, 11u);
  EXPECT_EQ(s.get_hits, 8u);
  EXPECT_EQ(s.get_bytes, 4 * 100u + 4 * (kLargePayload + 96));
  EXPECT_EQ(s.get_misses, 3u);
  EXPECT_EQ(s.get_errors, 0u);
  EXPECT_EQ(s.exists_calls, 1u);
  EXPECT_EQ(s.timeouts + s.server_errors + s.servers_ejected, 0u);
}

// Values below 64 KiB are buffered with their command, larger ones sent from the caller's buffer: one
// pipelined batch of both, around the boundary, and again (write-once after a direct send).
TEST(RedisStore, MixedBatchesOfSmallAndLargeValues) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  const uint64_t k64 = 64 << 10;
  const std::vector<Page> pages = {make_page(9000, 4),           make_page(9001, k64 - 96 - 1),
                                   make_page(9002, k64 - 96),    make_page(9003, 4),
                                   make_page(9004, size_t(1) << 20), make_page(9005, kLargePayload),
                                   make_page(9006, 100)};
  expect_all(put_all(*store, pages), BlobResult::kOk);
  EXPECT_EQ(exists(*store, pages), pages.size());
  Got g = get_all(*store, pages);
  for (size_t i = 0; i < pages.size(); ++i) {
    ASSERT_EQ(g.out[i], BlobResult::kOk) << i;
    EXPECT_EQ(g.sizes[i], pages[i].bytes.size()) << i;
    EXPECT_EQ(check(pages[i], g.bufs[i], g.sizes[i]), PageCheck::kOk) << i;
  }
  expect_all(put_all(*store, pages), BlobResult::kOk);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, pages.size());
  EXPECT_EQ(s.put_existing, pages.size());
  EXPECT_EQ(s.put_errors + s.server_errors + s.timeouts, 0u);
}

TEST(RedisStore, WriteOnce) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  const Page p = make_page(10, 64);
  expect_all(put_all(*store, {p}), BlobResult::kOk);
  expect_all(put_all(*store, {p}), BlobResult::kOk);  // exists: skipped, still kOk
  Page other = make_page(11, 64);
  other.key = p.key;  // different bytes under the same key: never replaces the first
  expect_all(put_all(*store, {other}), BlobResult::kOk);
  Got g = get_all(*store, {p});
  ASSERT_EQ(g.out[0], BlobResult::kOk);
  EXPECT_EQ(g.bufs[0], p.bytes);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 1u);
  EXPECT_EQ(s.put_bytes, p.bytes.size());
  EXPECT_EQ(s.put_existing, 2u);
  EXPECT_EQ(s.put_errors, 0u);
}

TEST(RedisStore, PipelinedBatchesOf256Keys) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  Raw raw(server->port());
  std::vector<Page> pages = small_pages(1000, 256);
  expect_all(put_all(*store, pages), BlobResult::kOk);
  EXPECT_EQ(raw.calls("set"), 256);
  EXPECT_EQ(exists(*store, pages), 256u);
  EXPECT_EQ(raw.calls("exists"), 256);
  EXPECT_EQ(raw.calls("get"), 0);  // exists_prefix never fetches a value
  // Pipelined: the 256 GETs reach the server in a few reads (one per command would be 256). The raw
  // client's own INFO commands are one read each.
  const long reads_before = raw.stat("total_reads_processed");
  Got g = get_all(*store, pages);
  const long reads = raw.stat("total_reads_processed") - reads_before - 1;
  EXPECT_GE(reads, 1);
  EXPECT_LE(reads, 16);
  for (size_t i = 0; i < pages.size(); ++i) {
    ASSERT_EQ(g.out[i], BlobResult::kOk) << i;
    EXPECT_EQ(check(pages[i], g.bufs[i], g.sizes[i]), PageCheck::kOk) << i;
  }
  EXPECT_EQ(raw.calls("get"), 256);
  // exists_prefix counts from the start to the first missing key.
  raw.run({"DEL", pages[100].key});
  EXPECT_EQ(exists(*store, pages), 100u);
  Got h = get_all(*store, pages);
  for (size_t i = 0; i < pages.size(); ++i) EXPECT_EQ(h.out[i], i == 100 ? BlobResult::kMiss : BlobResult::kOk);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 256u);
  EXPECT_EQ(s.gets, 512u);
  EXPECT_EQ(s.get_hits, 511u);
  EXPECT_EQ(s.get_misses, 1u);
  EXPECT_EQ(s.exists_calls, 2u);
  EXPECT_EQ(store->exists_prefix(nullptr, 0), 0u);
}

TEST(RedisStore, ErrorRepliesAreServerErrorsNotMisses) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  Raw raw(server->port());
  const std::vector<Page> pages = small_pages(2000, 3);
  raw.run({"LPUSH", pages[1].key, "not a string"});  // GET answers WRONGTYPE
  expect_all(put_all(*store, {pages[0], pages[2]}), BlobResult::kOk);
  Got g = get_all(*store, pages);
  EXPECT_EQ(g.out[0], BlobResult::kOk);
  EXPECT_EQ(g.out[1], BlobResult::kError);  // the others' results are not hidden
  EXPECT_EQ(g.out[2], BlobResult::kOk);
  BlobStats s = store->stats();
  EXPECT_EQ(s.get_errors, 1u);
  EXPECT_EQ(s.server_errors, 1u);
  EXPECT_EQ(s.servers_ejected, 0u);  // an error reply leaves the connection usable

  // A replica named as the primary answers writes with READONLY (it need not have synced).
  const RemoveReplicaSnapshot snapshot{server->port()};
  auto replica = redis(replica_of(server->port()));
  ASSERT_NE(replica, nullptr);
  auto wrong = open_store({replica->address()});
  const std::vector<Page> more = small_pages(2100, 2);
  expect_all(put_all(*wrong, more), BlobResult::kError);
  s = wrong->stats();
  EXPECT_EQ(s.put_errors, 2u);
  EXPECT_EQ(s.server_errors, 2u);
  EXPECT_EQ(s.puts, 0u);
}

// Waits until the replica on `replica_port` holds `keys` keys. (WAIT on a raw connection would not do:
// it waits for that connection's own writes only.)
void wait_replicated(int replica_port, size_t keys) {
  Raw replica(replica_port);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (replica.run({"DBSIZE"}) == std::to_string(keys)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "the replica did not receive " << keys << " keys within 10 s";
}

void wait_link_up(int replica_port) {
  Raw replica(replica_port);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    if (replica.run({"INFO", "replication"}).find("master_link_status:up") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "the replica did not sync within 10 s";
}

TEST(RedisStore, ReplicaServesReadsWhenThePrimaryStopsOrDies) {
  auto primary = redis({"--repl-diskless-sync-delay", "0"});  // the replica's first sync at once, not after 5 s
  ASSERT_NE(primary, nullptr);
  const RemoveReplicaSnapshot snapshot{primary->port()};
  auto replica = redis(replica_of(primary->port()));
  ASSERT_NE(replica, nullptr);
  wait_link_up(replica->port());
  auto store = open_store({primary->address(), replica->address()}, 200);
  EXPECT_EQ(store->describe(), "redis:" + primary->address() + "," + replica->address());
  const std::vector<Page> small = small_pages(3000, 16);
  const Page large = make_page(3100, kLargePayload);
  std::vector<Page> pages = small;
  pages.push_back(large);
  expect_all(put_all(*store, pages), BlobResult::kOk);
  wait_replicated(replica->port(), pages.size());

  // With the primary up, a miss there is final: the replica is not asked.
  Raw raw_replica(replica->port());
  const long replica_gets = raw_replica.calls("get");
  const Page absent = make_page(3200, 4);
  EXPECT_EQ(get_all(*store, {absent}).out[0], BlobResult::kMiss);
  EXPECT_EQ(raw_replica.calls("get"), replica_gets);

  // Reads the small pages; returns the milliseconds it took. (The large page is read last: its transfer
  // is slow under sanitizers and on a loaded machine, and would blur the back-off's timing.)
  const auto read_all = [&](const char* when) {
    const auto t0 = Clock::now();
    Got g = get_all(*store, small);
    const double ms = ms_since(t0);
    for (size_t i = 0; i < small.size(); ++i) {
      EXPECT_EQ(g.out[i], BlobResult::kOk) << when << ", page " << i;
      EXPECT_EQ(check(small[i], g.bufs[i], g.sizes[i]), PageCheck::kOk) << when << ", page " << i;
    }
    return ms;
  };
  constexpr double kTimeoutMs = 200;
  // The primary stopped: one timeout, then the replica answers.
  primary->pause();
  const double waited = read_all("primary stopped");
  EXPECT_GE(waited, kTimeoutMs * 0.9);
  EXPECT_LT(waited, kTimeoutMs + 300.0);
  BlobStats s = store->stats();
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.servers_ejected, 1u);

  // Killed, still in its back-off: skipped with no wait.
  primary->kill();
  const auto t0 = Clock::now();
  EXPECT_LT(read_all("primary in its back-off"), 100.0);
  EXPECT_EQ(exists(*store, pages), pages.size());
  EXPECT_LT(ms_since(t0), 500.0);  // still in the back-off: the counts below assume it
  // After it: refused, once, and the replica answers.
  sleep_past_backoff();
  EXPECT_LT(read_all("primary killed"), kTimeoutMs * 0.9);
  // Writes have nowhere to go.
  expect_all(put_all(*store, small_pages(3300, 2)), BlobResult::kError);
  s = store->stats();
  EXPECT_EQ(s.get_hits, 3 * small.size());
  EXPECT_EQ(s.get_errors, 0u);
  EXPECT_EQ(s.put_errors, 2u);
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.server_errors, 1u);  // the primary's refused connection, once: then it is skipped
  EXPECT_EQ(s.servers_ejected, 2u);
  // The large page too, from the replica (the primary is skipped or refused: counts not checked).
  Got g = get_all(*store, {large});
  EXPECT_EQ(g.out[0], BlobResult::kOk);
  EXPECT_EQ(check(large, g.bufs[0], g.sizes[0]), PageCheck::kOk);
}

TEST(RedisStore, KilledServerFailsFastAndIsUsedAgainAfterTheBackoff) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  constexpr int64_t kTimeoutMs = 200;
  auto store = open_store({server->address()}, kTimeoutMs);
  const std::vector<Page> pages = small_pages(4000, 8);
  expect_all(put_all(*store, pages), BlobResult::kOk);

  server->kill();
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    Got g = get_all(*store, pages);
    EXPECT_LT(ms_since(t0), double(kTimeoutMs));
    expect_all(g.out, BlobResult::kError);
    t0 = Clock::now();
    EXPECT_EQ(exists(*store, pages), 0u);
    expect_all(put_all(*store, pages), BlobResult::kError);
    EXPECT_LT(ms_since(t0), double(kTimeoutMs));
  }
  BlobStats s = store->stats();
  EXPECT_EQ(s.server_errors, 1u);  // then skipped during the back-off
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.get_errors, 24u);
  EXPECT_EQ(s.put_errors, 24u);
  EXPECT_EQ(s.timeouts, 0u);

  std::string error;
  ASSERT_TRUE(server->restart(&error)) << error;  // same port, empty
  sleep_past_backoff();
  expect_all(put_all(*store, pages), BlobResult::kOk);
  Got g = get_all(*store, pages);
  for (size_t i = 0; i < pages.size(); ++i) EXPECT_EQ(check(pages[i], g.bufs[i], g.sizes[i]), PageCheck::kOk);
  s = store->stats();
  EXPECT_EQ(s.puts, 16u);
  EXPECT_EQ(s.server_errors, 1u);
}

// Writing to a connection the server has closed raises SIGPIPE, whose default action ends the process:
// the backend must not let it reach the application.
TEST(RedisStore, WritesToADeadServerRaiseNoSigpipe) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()}, 200);
  const std::vector<Page> pages = {make_page(4500, kLargePayload), make_page(4501, kLargePayload),
                                   make_page(4502, kLargePayload)};
  expect_all(put_all(*store, {pages[0]}), BlobResult::kOk);
  server->kill();  // the pooled connection is now closed at the other end
  expect_all(put_all(*store, pages), BlobResult::kError);
  sigset_t mask, pending;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, nullptr, &mask), 0);
  EXPECT_EQ(sigismember(&mask, SIGPIPE), 0);  // the thread's mask is as it was
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);  // and nothing is left to deliver
  // A restarted server: the pooled connection is stale, sends fail on it, then a new one works.
  std::string error;
  ASSERT_TRUE(server->restart(&error)) << error;
  sleep_past_backoff();
  expect_all(put_all(*store, pages), BlobResult::kOk);
  const BlobStats s = store->stats();
  EXPECT_EQ(s.puts, 4u);
  EXPECT_EQ(s.put_errors, 3u);
  EXPECT_EQ(s.server_errors, 1u);
}

TEST(RedisStore, PausedServerTimesOutWithinTheBound) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  constexpr int64_t kTimeoutMs = 150;
  auto store = open_store({server->address()}, kTimeoutMs);
  const std::vector<Page> pages = small_pages(5000, 4);
  expect_all(put_all(*store, pages), BlobResult::kOk);
  // What an 8 MiB put costs here without waiting (sending it, and under sanitizers formatting it).
  const Page large = make_page(5100, kLargePayload), large2 = make_page(5101, kLargePayload);
  auto t0 = Clock::now();
  expect_all(put_all(*store, {large2}), BlobResult::kOk);
  const double large_put_ms = ms_since(t0);

  server->pause();  // accepts, never answers
  t0 = Clock::now();
  Got g = get_all(*store, pages);
  double waited = ms_since(t0);
  EXPECT_GE(waited, kTimeoutMs * 0.9);
  EXPECT_LT(waited, kTimeoutMs + 250.0);
  expect_all(g.out, BlobResult::kError);
  BlobStats s = store->stats();
  EXPECT_EQ(s.timeouts, 1u);
  EXPECT_EQ(s.servers_ejected, 1u);
  EXPECT_EQ(s.server_errors, 0u);

  // In the back-off: no wait at all.
  t0 = Clock::now();
  EXPECT_EQ(exists(*store, pages), 0u);
  EXPECT_LT(ms_since(t0), 50.0);

  // After it: a new connection (the kernel still accepts it), then one more timeout.
  sleep_past_backoff();
  t0 = Clock::now();
  EXPECT_EQ(exists(*store, pages), 0u);
  waited = ms_since(t0);
  EXPECT_GE(waited, kTimeoutMs * 0.9);
  EXPECT_LT(waited, kTimeoutMs + 250.0);

  // An 8 MiB put to the paused server: the send stalls once the socket buffers are full.
  sleep_past_backoff();
  t0 = Clock::now();
  expect_all(put_all(*store, {large}), BlobResult::kError);
  waited = ms_since(t0);
  EXPECT_LT(waited, 2 * large_put_ms + kTimeoutMs + 250.0);  // twice: that baseline varies under load
  s = store->stats();
  EXPECT_EQ(s.timeouts, 3u);
  EXPECT_EQ(s.servers_ejected, 3u);
  EXPECT_EQ(s.server_errors, 0u);
  EXPECT_EQ(s.get_errors, 4u);
  EXPECT_EQ(s.put_errors, 1u);
  EXPECT_EQ(s.puts, 5u);

  server->resume();
  sleep_past_backoff();
  Got back = get_all(*store, pages);
  expect_all(back.out, BlobResult::kOk);
}

TEST(RedisStore, DamagedValuesAreReturnedAndRejectedByCheckPage) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  Raw raw(server->port());
  const std::vector<Page> pages = {make_page(6000, 4096), make_page(6001, 4096), make_page(6002, 4096)};
  expect_all(put_all(*store, pages), BlobResult::kOk);
  // Page 0: a payload byte overwritten in place. Page 1: replaced by its first 1000 bytes.
  EXPECT_EQ(raw.run({"SETRANGE", pages[0].key, "500", "X"}), std::to_string(pages[0].bytes.size()));
  EXPECT_EQ(raw.run({"SET", pages[1].key, std::string(pages[1].bytes.begin(), pages[1].bytes.begin() + 1000)}),
            "OK");
  // Page 2: one trailing byte appended.
  EXPECT_EQ(raw.run({"APPEND", pages[2].key, "Z"}), std::to_string(pages[2].bytes.size() + 1));

  Got g = get_all(*store, pages, 16);
  // The backend returns what the server holds, whole, with its true length ...
  expect_all(g.out, BlobResult::kOk);
  EXPECT_EQ(g.sizes[0], pages[0].bytes.size());
  EXPECT_EQ(g.bufs[0][500], 'X');
  EXPECT_EQ(g.sizes[1], 1000u);
  EXPECT_EQ(0, std::memcmp(g.bufs[1].data(), pages[1].bytes.data(), 1000));
  EXPECT_EQ(g.sizes[2], pages[2].bytes.size() + 1);
  // ... and the page format above it rejects each.
  EXPECT_EQ(check(pages[0], g.bufs[0], g.sizes[0]), PageCheck::kCorrupt);
  EXPECT_EQ(check(pages[1], g.bufs[1], g.sizes[1]), PageCheck::kTruncated);
  EXPECT_EQ(check(pages[2], g.bufs[2], g.sizes[2]), PageCheck::kCorrupt);
}

TEST(RedisStore, ClearRemovesOnlyKvpoolKeys) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  Raw raw(server->port());
  EXPECT_EQ(raw.run({"SET", "someone-else:key", "theirs"}), "OK");
  EXPECT_EQ(raw.run({"SET", "kvp2-not-ours-either", "x"}), "OK");
  const std::vector<Page> pages = small_pages(7000, 2500);  // several SCAN steps
  expect_all(put_all(*store, pages), BlobResult::kOk);
  EXPECT_EQ(raw.run({"DBSIZE"}), "2502");
  const kvp::Status st = store->clear();
  EXPECT_TRUE(st.is_ok()) << st.message();
  EXPECT_EQ(raw.run({"DBSIZE"}), "2");
  EXPECT_EQ(raw.run({"GET", "someone-else:key"}), "theirs");
  EXPECT_EQ(exists(*store, pages), 0u);
  EXPECT_EQ(raw.calls("flushall") + raw.calls("flushdb"), 0);
  // Stored again after a clear.
  expect_all(put_all(*store, {pages[0]}), BlobResult::kOk);
  EXPECT_EQ(store->stats().puts, 2501u);

  server->kill();
  const kvp::Status down = store->clear();
  EXPECT_EQ(down.code(), KVPOOL_ERR_IO);
  EXPECT_NE(down.message().find(server->address()), std::string::npos) << down.message();
  // Back after the back-off; restarted again behind the store's back, its pooled connection is stale.
  std::string error;
  ASSERT_TRUE(server->restart(&error)) << error;
  sleep_past_backoff();
  expect_all(put_all(*store, {pages[0]}), BlobResult::kOk);
  ASSERT_TRUE(server->restart(&error)) << error;
  Raw raw2(server->port());
  EXPECT_EQ(raw2.run({"SET", "kvp1-x", "y"}), "OK");
  const kvp::Status again = store->clear();
  EXPECT_TRUE(again.is_ok()) << again.message();
  EXPECT_EQ(raw2.run({"DBSIZE"}), "0");
  EXPECT_EQ(store->stats().server_errors, 1u);  // the refused connection of the first clear() only
}

TEST(RedisStore, ConcurrentThreads) {
  auto server = redis();
  ASSERT_NE(server, nullptr);
  auto store = open_store({server->address()});
  constexpr int kThreads = 6, kRounds = 30, kBatch = 16;
  // Thread t writes pages [t*kBatch/2 + r*..]: neighbours overlap by half a batch, so keys race.
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const std::vector<Page> pages = small_pages(100000 + r * 1000 + t * kBatch / 2, kBatch);
        for (BlobResult x : put_all(*store, pages)) bad += x != BlobResult::kOk;
        if (exists(*store, pages) != pages.size()) ++bad;
        Got g = get_all(*store, pages);
        for (size_t i = 0; i < pages.size(); ++i) {
          bad += g.out[i] != BlobResult::kOk || check(pages[i], g.bufs[i], g.sizes[i]) != PageCheck::kOk;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  const BlobStats s = store->stats();
  const uint64_t distinct = uint64_t(kRounds) * ((kThreads - 1) * kBatch / 2 + kBatch);
  EXPECT_EQ(s.puts, distinct);
  EXPECT_EQ(s.puts + s.put_existing, uint64_t(kThreads) * kRounds * kBatch);
  EXPECT_EQ(s.gets, uint64_t(kThreads) * kRounds * kBatch);
  EXPECT_EQ(s.get_hits, s.gets);
  EXPECT_EQ(s.exists_calls, uint64_t(kThreads) * kRounds);
  EXPECT_EQ(s.put_errors + s.get_errors + s.timeouts + s.server_errors, 0u);
}

TEST(RedisStore, OpenChecksItsConfiguration) {
  kvp::config::StorageConfig cfg;
  cfg.backend = "redis";
  std::unique_ptr<BlobStore> store;
  EXPECT_EQ(kvp::storage::open_redis_store(cfg, &store).code(), KVPOOL_ERR_CONFIG);
  cfg.servers = {"no-port"};
  EXPECT_EQ(kvp::storage::open_redis_store(cfg, &store).code(), KVPOOL_ERR_CONFIG);
  cfg.servers = {"127.0.0.1:6379"};
  cfg.timeout_ms = 0;
  EXPECT_EQ(kvp::storage::open_redis_store(cfg, &store).code(), KVPOOL_ERR_CONFIG);
  EXPECT_EQ(store, nullptr);

  // A server down at open is not an error: its keys fail until it comes up.
  const int port = ServerProcess::free_port();
  auto down = open_store({"127.0.0.1:" + std::to_string(port)}, 200);
  ASSERT_NE(down, nullptr);
  expect_all(put_all(*down, small_pages(8000, 2)), BlobResult::kError);
  auto server = redis({}, port);
  ASSERT_NE(server, nullptr);
  sleep_past_backoff();
  expect_all(put_all(*down, small_pages(8000, 2)), BlobResult::kOk);
}

TEST(RedisStore, ClusterModeIsRefused) {
  const int port = ServerProcess::free_port();
  const std::string nodes = "/tmp/kvpool-redis-test-nodes-" + std::to_string(port) + ".conf";
  // The cluster bus on a port of its own (by default port + 10000, which may be taken or past 65535).
  const int bus = ServerProcess::free_port();
  auto server = redis(
      {"--cluster-enabled", "yes", "--cluster-config-file", nodes, "--cluster-port", std::to_string(bus)}, port);
  ASSERT_NE(server, nullptr);
  kvp::config::StorageConfig cfg;
  cfg.backend = "redis";
  cfg.servers = {server->address()};
  std::unique_ptr<BlobStore> store;
  const kvp::Status st = kvp::storage::open_redis_store(cfg, &store);
  EXPECT_EQ(st.code(), KVPOOL_ERR_UNSUPPORTED);
  EXPECT_NE(st.message().find("cluster mode"), std::string::npos) << st.message();
  server->kill();
  std::remove(nodes.c_str());
}

}  // namespace
