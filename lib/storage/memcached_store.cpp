// The memcached backend (memcached_store.hpp gives the design; the record
// format is below). libmemcached does the protocol: one memcached_st per
// server, so a batch is one `get k1 k2 ...` per server per round (memcached_mget
// + memcached_fetch_result), and its connect, poll and socket timeouts bound
// every wait. Placement, replicas, ejection and the counters are ours.
//
// Record under `<key>` (little-endian), kMemcachedRecordHeaderBytes = 32:
//
//   offset  bytes  field
//        0      4  magic "KVMC"
//        4      1  format version (1)
//        5      1  kind: 1 inline (the value follows), 2 manifest (part checksums follow)
//        6      2  reserved, 0
//        8      8  the value's length
//       16      4  parts (inline: 1)
//       20      4  bytes per part (the last part holds the rest; inline: the length)
//       24      8  XXH3-64 of the body, seeded with XXH3-64 of bytes [0, 24)
//       32      …  body: inline, the value; manifest, one XXH3-64 per part
//
// Part i of a split value is stored bare under `<key>.p<i>`: bytes
// [i * part size, min((i + 1) * part size, length)) of the value.
#include "storage/memcached_store.hpp"

#include <libmemcached/memcached.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <vector>

namespace kvp::storage {
namespace {

constexpr uint32_t kRingPointsPerServer = 160;  // ketama's count: an even spread over a few servers
constexpr int kEjectAfterFailures = 2;          // consecutive failed round trips that eject a server
// Keys of one `get` line. libmemcached sends the whole request before it reads
// a reply, and once memcached's replies back up it stops reading: the request
// must fit in the kernel's socket buffers or both sides wait for a timeout.
// 512 keys of at most 128 bytes (key, ".p<i>", space) are 64 KiB, under Linux's
// default 128 KiB receive buffer (net.ipv4.tcp_rmem) alone.
constexpr size_t kMaxKeysPerRequest = 512;
constexpr size_t kDefaultItemLimit = size_t(1) << 20;  // memcached's default -I, when no server answers at open
constexpr size_t kMaxKeyLength = 120;                   // blob_store.hpp; a part key adds ".p<i>"
constexpr uint32_t kRecordPart = UINT32_MAX;            // Item::part of the record under `<key>`
constexpr uint64_t kMaxValueBytes = uint64_t(1) << 40;  // a longer value in a record is damage, not a page

constexpr char kMagic[4] = {'K', 'V', 'M', 'C'};
constexpr uint8_t kFormatVersion = 1;
constexpr uint8_t kInline = 1, kManifest = 2;
constexpr size_t kHeaderBytes = kMemcachedRecordHeaderBytes;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class T>
void store_le(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof(T));  // x86-64 and aarch64 Linux are little-endian
}
template <class T>
T load_le(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

struct RecordHeader {
  uint8_t kind = 0;
  uint64_t length = 0;
  uint32_t parts = 0;
  uint32_t part_bytes = 0;
};

uint64_t record_check(const uint8_t* header, const uint8_t* body, size_t body_bytes) {
  return XXH3_64bits_withSeed(body, body_bytes, XXH3_64bits(header, 24));
}

// Writes the header of a record whose body (body_bytes) already follows it at rec + kHeaderBytes.
void seal_record(uint8_t* rec, uint8_t kind, uint64_t length, uint32_t parts, uint32_t part_bytes,
                 size_t body_bytes) {
  std::memcpy(rec, kMagic, sizeof(kMagic));
  rec[4] = kFormatVersion;
  rec[5] = kind;
  rec[6] = rec[7] = 0;
  store_le<uint64_t>(rec + 8, length);
  store_le<uint32_t>(rec + 16, parts);
  store_le<uint32_t>(rec + 20, part_bytes);
  store_le<uint64_t>(rec + 24, record_check(rec, rec + kHeaderBytes, body_bytes));
}

// Whether rec (len bytes) is a whole, consistent record; fills *h.
bool open_record(const uint8_t* rec, size_t len, RecordHeader* h) {
  if (len < kHeaderBytes || std::memcmp(rec, kMagic, sizeof(kMagic)) != 0 || rec[4] != kFormatVersion) return false;
  h->kind = rec[5];
  h->length = load_le<uint64_t>(rec + 8);
  h->parts = load_le<uint32_t>(rec + 16);
  h->part_bytes = load_le<uint32_t>(rec + 20);
  const size_t body = len - kHeaderBytes;
  if (h->length > kMaxValueBytes) return false;
  if (h->kind == kInline) {
    if (h->parts != 1 || h->length != body || h->part_bytes != h->length) return false;
  } else if (h->kind == kManifest) {
    if (h->part_bytes == 0 || h->parts == 0 || body != size_t(h->parts) * 8) return false;
    if ((h->length + h->part_bytes - 1) / h->part_bytes != h->parts) return false;
  } else {
    return false;
  }
  return load_le<uint64_t>(rec + 24) == record_check(rec, rec + kHeaderBytes, body);
}

bool valid_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxKeyLength) return false;
  for (char ch : key) {
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || ch == '-')) return false;
  }
  return true;
}

// "host:port" or "[v6]:port".
bool split_address(const std::string& address, std::string* host, in_port_t* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 >= address.size()) return false;
  std::string h = address.substr(0, colon);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') return false;
    h = h.substr(1, h.size() - 2);
  }
  unsigned long p = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    const char ch = address[i];
    if (ch < '0' || ch > '9') return false;
    p = p * 10 + unsigned(ch - '0');
    if (p > 65535) return false;
  }
  if (p == 0) return false;
  *host = h;
  *port = in_port_t(p);
  return true;
}

enum class Reply : uint8_t {
  kOk,        // stored, or the fetch ended normally
  kExists,    // add: NOT_STORED (the key holds a value)
  kRejected,  // the server answered with an error (object too large, out of memory): counted, not ejected
  kTimeout,   // waited a whole timeout: a failure of the server
  kFailed,    // refused, reset, protocol error: a failure of the server
};

Reply classify(memcached_return_t rc) {
  switch (rc) {
    case MEMCACHED_SUCCESS:
    case MEMCACHED_STORED:
    case MEMCACHED_END:
    case MEMCACHED_NOTFOUND:
      return Reply::kOk;
    case MEMCACHED_NOTSTORED:
    case MEMCACHED_DATA_EXISTS:
      return Reply::kExists;
    case MEMCACHED_E2BIG:
    case MEMCACHED_SERVER_ERROR:
    case MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE:
    case MEMCACHED_CLIENT_ERROR:
      return Reply::kRejected;
    case MEMCACHED_TIMEOUT:
      return Reply::kTimeout;
    default:
      return Reply::kFailed;
  }
}

// One libmemcached handle on one server, with the result it fetches into.
struct Conn {
  memcached_st* mc = nullptr;
  std::unique_ptr<memcached_result_st> result;
  bool ready = false;  // connected and answered (a fresh handle asks `version` first)

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() { close(); }
  void close() {
    if (result) memcached_result_free(result.get());
    result.reset();
    if (mc != nullptr) memcached_free(mc);
    mc = nullptr;
    ready = false;
  }
};

// One stored item a call reads: the record of a value or one of its parts.
struct Item {
  uint32_t key_at = 0, key_len = 0;  // in Client::keys
  uint32_t value = 0;                // index of the value in the call
  uint32_t part = kRecordPart;
  uint32_t places_at = 0;  // in Client::places
  uint8_t places = 0;      // servers holding a copy, in the order they are asked
  bool hit = false;
  bool saw_error = false;   // a server that should hold it failed
  bool saw_damage = false;  // a copy did not match its header or manifest
};

// What a get() learned of one value.
struct ValueRead {
  bool manifest = false;
  bool done = false;  // read whole (inline)
  uint64_t length = 0;
  uint32_t parts = 0, part_bytes = 0;
  size_t sums_at = 0;  // in Client::sums
};

// A pooled set of handles (one per server) and the scratch of one call; one thread at a time.
struct Client {
  std::vector<Conn> conns;
  std::vector<uint8_t> failed;  // per server: failed during this call, not asked again
  std::vector<Item> items;
  std::string keys;
  std::vector<uint32_t> places;
  std::vector<std::vector<uint32_t>> asked;  // per server: the items of this round
  std::vector<uint8_t> sent;
  std::vector<const char*> key_ptrs;
  std::vector<size_t> key_lens;
  std::vector<ValueRead> reads;
  std::vector<uint64_t> sums;
  std::vector<uint8_t> record;
};

struct ServerHealth {
  std::atomic<int> failures{0};            // consecutive failed round trips
  std::atomic<int64_t> ejected_until{0};   // steady-clock ns; in the ring again from then on
};

class MemcachedStore final : public BlobStore {
 public:
  MemcachedStore(std::vector<std::string> addresses, std::vector<std::string> hosts, std::vector<in_port_t> ports,
                 const config::StorageConfig& cfg)
      : addresses_(std::move(addresses)),
        hosts_(std::move(hosts)),
        ports_(std::move(ports)),
        replicas_(size_t(cfg.replicas)),
        timeout_ms_(uint64_t(cfg.timeout_ms)),
        retry_ns_(int64_t(cfg.retry_timeout_s * 1e9)),
        health_(addresses_.size()) {
    for (uint32_t s = 0; s < addresses_.size(); ++s) {
      for (uint32_t i = 0; i < kRingPointsPerServer; ++i) {
        const std::string point = addresses_[s] + "#" + std::to_string(i);
        ring_.push_back({XXH3_64bits(point.data(), point.size()), s});
      }
    }
    std::sort(ring_.begin(), ring_.end());
  }

  // Asks every server that answers for its item size limit; the smallest sets the part size.
  void probe_item_limit() {
    size_t limit = 0;
    Lease c(this);
    for (size_t s = 0; s < addresses_.size(); ++s) {
      Conn& conn = c->conns[s];
      if (conn.mc == nullptr) continue;
      size_t item_max = 0;
      const memcached_return_t rc = memcached_stat_execute(conn.mc, "settings", &on_setting, &item_max);
      if (rc == MEMCACHED_SUCCESS && item_max > 0) limit = limit == 0 ? item_max : std::min(limit, item_max);
      conn.close();  // a failed probe leaves no state behind; the next call reconnects
    }
    item_limit_ = limit == 0 ? kDefaultItemLimit : limit;
    part_bytes_ = item_limit_ > 2 * kMemcachedItemOverheadBytes ? item_limit_ - kMemcachedItemOverheadBytes
                                                                 : item_limit_ / 2;
    part_bytes_ = std::min<size_t>(part_bytes_, UINT32_MAX);
  }

  ~MemcachedStore() override = default;

  std::string describe() const override {
    std::string d = "memcached:";
    for (size_t s = 0; s < addresses_.size(); ++s) d += (s ? "," : "") + addresses_[s];
    return d;
  }

  void put(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
           BlobResult* out) override {
    try {
      put_batch(keys, values, sizes, n, out);
    } catch (...) {  // bad_alloc: nothing escapes a BlobStore
      for (size_t i = 0; i < n; ++i) out[i] = BlobResult::kError;
      put_errors_ += n;
    }
  }

  void get(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
           BlobResult* out) override {
    gets_ += n;
    try {
      get_batch(keys, dst, capacity, n, sizes, out);
    } catch (...) {
      for (size_t i = 0; i < n; ++i) out[i] = BlobResult::kError;
      get_errors_ += n;
    }
  }

  size_t exists_prefix(const std::string* keys, size_t n) override {
    exists_calls_++;
    try {
      return exists_batch(keys, n);
    } catch (...) {
      return 0;
    }
  }

  Status clear() override {
    try {
      Lease c(this);
      std::string failed;
      for (size_t s = 0; s < addresses_.size(); ++s) {
        memcached_return_t rc = ready(*c, s);
        if (rc == MEMCACHED_SUCCESS) rc = memcached_flush(c->conns[s].mc, 0);
        if (rc != MEMCACHED_SUCCESS) {
          failed += (failed.empty() ? "" : ", ") + addresses_[s] + " (" + memcached_strerror(nullptr, rc) + ")";
          fail_server(*c, s, rc);
        } else {
          succeeded(s);
        }
      }
      if (!failed.empty()) return Status::io("memcached flush_all failed on " + failed);
      return Status::ok();
    } catch (const std::bad_alloc&) {
      return Status(KVPOOL_ERR_HOST_MEMORY, "memcached clear: out of host memory");
    }
  }

  BlobStats stats() const override {
    BlobStats s;
    s.puts = puts_.load();
    s.put_bytes = put_bytes_.load();
    s.put_existing = put_existing_.load();
    s.put_errors = put_errors_.load();
    s.gets = gets_.load();
    s.get_hits = get_hits_.load();
    s.get_bytes = get_bytes_.load();
    s.get_misses = get_misses_.load();
    s.get_errors = get_errors_.load();
    s.exists_calls = exists_calls_.load();
    s.timeouts = timeouts_.load();
    s.server_errors = server_errors_.load();
    s.partial_values = partial_values_.load();
    s.servers_ejected = servers_ejected_.load();
    return s;
  }

 private:
  // A Client borrowed from the pool for one call. A call that throws (std::bad_alloc, caught
  // by put / get / exists_prefix) may leave a connection mid-request (an mget whose replies
  // were not read): its client is closed, not pooled.
  class Lease {
   public:
    explicit Lease(MemcachedStore* store)
        : store_(store), client_(store->acquire()), exceptions_(std::uncaught_exceptions()) {}
    ~Lease() {
      if (std::uncaught_exceptions() == exceptions_) store_->release(std::move(client_));
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Client* operator->() { return client_.get(); }
    Client& operator*() { return *client_; }

   private:
    MemcachedStore* store_;
    std::unique_ptr<Client> client_;
    int exceptions_;  // in flight when the lease began
  };

  static memcached_return_t on_setting(const memcached_instance_st*, const char* key, size_t key_length,
                                       const char* value, size_t value_length, void* context) {
    if (key_length == 13 && std::memcmp(key, "item_size_max", 13) == 0) {
      size_t v = 0;
      for (size_t i = 0; i < value_length && value[i] >= '0' && value[i] <= '9'; ++i) v = v * 10 + size_t(value[i] - '0');
      *static_cast<size_t*>(context) = v;
    }
    return MEMCACHED_SUCCESS;
  }

  std::unique_ptr<Client> acquire() {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (!pool_.empty()) {
        std::unique_ptr<Client> c = std::move(pool_.back());
        pool_.pop_back();
        return c;
      }
    }
    auto c = std::make_unique<Client>();
    c->conns = std::vector<Conn>(addresses_.size());
    for (size_t s = 0; s < addresses_.size(); ++s) open_conn(c->conns[s], s);
    c->failed.assign(addresses_.size(), 0);
    c->asked.resize(addresses_.size());
    c->sent.assign(addresses_.size(), 0);
    return c;
  }

  // Never throws (a Lease's destructor calls it): a client the pool has no room for is closed.
  void release(std::unique_ptr<Client> c) noexcept {
    if (!c) return;
    std::lock_guard<std::mutex> lock(pool_mu_);
    try {
      pool_.push_back(std::move(c));
    } catch (const std::bad_alloc&) {  // c still owns the client, which closes its connections
    }
  }

  // A fresh handle on server s. Its timeouts bound every wait; libmemcached's own
  // backoff state never outlives an operation because a failed handle is replaced.
  void open_conn(Conn& conn, size_t s) {
    conn.close();
    // The result first: a bad_alloc here leaves no handle behind (made after the handle, it
    // leaked the handle; found by storage_thread_faults_test under LeakSanitizer).
    auto result = std::make_unique<memcached_result_st>();
    memcached_st* mc = memcached_create(nullptr);
    if (mc == nullptr) return;
    const uint64_t ms = timeout_ms_;
    if (memcached_server_add(mc, hosts_[s].c_str(), ports_[s]) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_NO_BLOCK, 1) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_CONNECT_TIMEOUT, ms) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_POLL_TIMEOUT, ms) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_SND_TIMEOUT, ms * 1000) != MEMCACHED_SUCCESS ||
        memcached_behavior_set(mc, MEMCACHED_BEHAVIOR_RCV_TIMEOUT, ms * 1000) != MEMCACHED_SUCCESS) {
      memcached_free(mc);
      return;
    }
    if (memcached_result_create(mc, result.get()) == nullptr) {
      memcached_free(mc);
      return;
    }
    conn.mc = mc;
    conn.result = std::move(result);
  }

  // Connects a fresh handle and checks that the server answers (`version`), so
  // a dead server fails once here rather than once per key inside an mget.
  memcached_return_t ready(Client& c, size_t s) {
    Conn& conn = c.conns[s];
    if (conn.ready) return MEMCACHED_SUCCESS;
    if (conn.mc == nullptr) open_conn(conn, s);
    if (conn.mc == nullptr) return MEMCACHED_MEMORY_ALLOCATION_FAILURE;
    memcached_return_t rc = memcached_version(conn.mc);
    if (rc != MEMCACHED_SUCCESS) {
      const memcached_return_t why = memcached_server_error_return(memcached_server_instance_by_position(conn.mc, 0));
      return why != MEMCACHED_SUCCESS ? why : rc;
    }
    conn.ready = true;
    return MEMCACHED_SUCCESS;
  }

  // A failed round trip to server s: counted, the handle replaced, the server
  // not asked again in this call, and ejected after kEjectAfterFailures in a row.
  void fail_server(Client& c, size_t s, memcached_return_t rc) {
    c.failed[s] = 1;
    open_conn(c.conns[s], s);
    const Reply r = classify(rc);
    if (r == Reply::kRejected) {  // the server is alive; only this request failed
      server_errors_++;
      return;
    }
    if (r == Reply::kTimeout) {
      timeouts_++;
    } else {
      server_errors_++;
    }
    ServerHealth& h = health_[s];
    if (h.failures.fetch_add(1) + 1 < kEjectAfterFailures) return;
    std::lock_guard<std::mutex> lock(eject_mu_);
    const int64_t now = now_ns();
    if (h.ejected_until.load() <= now) {
      h.ejected_until.store(now + retry_ns_);
      servers_ejected_++;
    }
  }

  void succeeded(size_t s) {
    if (health_[s].failures.load(std::memory_order_relaxed) != 0) health_[s].failures.store(0);
  }

  void begin_call(Client& c) {
    std::fill(c.failed.begin(), c.failed.end(), 0);
    c.items.clear();
    c.keys.clear();
    c.places.clear();
    c.reads.clear();
    c.sums.clear();
  }

  // Servers in the ring now (not ejected), counted once per call.
  size_t live_servers(int64_t now) const {
    size_t live = 0;
    for (const ServerHealth& h : health_) live += h.ejected_until.load() <= now ? 1 : 0;
    return live;
  }

  // Adds an item: its key (appended to c.keys) and the servers of its copies:
  // the first 1 + replicas distinct live servers of the ring from the key's hash.
  void add_item(Client& c, const char* key, size_t key_len, uint32_t part, uint32_t value, int64_t now,
                size_t live) {
    Item it;
    it.key_at = uint32_t(c.keys.size());
    c.keys.append(key, key_len);
    if (part != kRecordPart) {
      char suffix[16];
      const int len = std::snprintf(suffix, sizeof(suffix), ".p%u", part);
      c.keys.append(suffix, size_t(len));
    }
    it.key_len = uint32_t(c.keys.size() - it.key_at);
    it.value = value;
    it.part = part;
    it.places_at = uint32_t(c.places.size());
    const size_t want = std::min(replicas_ + 1, live);
    if (want > 0) {
      const uint64_t hash = XXH3_64bits(c.keys.data() + it.key_at, it.key_len);
      size_t at = size_t(std::lower_bound(ring_.begin(), ring_.end(), std::make_pair(hash, uint32_t(0))) -
                         ring_.begin());
      for (size_t step = 0; step < ring_.size() && it.places < want; ++step, ++at) {
        const uint32_t s = ring_[at % ring_.size()].second;
        if (health_[s].ejected_until.load(std::memory_order_relaxed) > now) continue;
        const auto first = c.places.begin() + it.places_at;
        if (std::find(first, c.places.end(), s) != c.places.end()) continue;
        c.places.push_back(s);
        it.places++;
      }
    }
    it.saw_error = it.places == 0;  // every server ejected: cannot ask
    c.items.push_back(it);
  }

  // Reads items [first, c.items.size()), round by round: round k asks every item
  // not yet read of its k-th server, one `get` per server (in chunks of
  // kMaxKeysPerRequest keys), all servers' requests sent before any reply is read.
  // accept(item, bytes, length) says whether a copy is good; a bad one is tried on
  // the next server.
  template <class Accept>
  void fetch(Client& c, size_t first, Accept&& accept) {
    const size_t servers = addresses_.size();
    for (size_t round = 0; round <= replicas_; ++round) {
      size_t longest = 0;
      for (auto& a : c.asked) a.clear();
      for (size_t i = first; i < c.items.size(); ++i) {
        Item& it = c.items[i];
        if (it.hit || round >= it.places) continue;
        const uint32_t s = c.places[it.places_at + round];
        if (c.failed[s]) {
          it.saw_error = true;
          continue;
        }
        c.asked[s].push_back(uint32_t(i));
        longest = std::max(longest, c.asked[s].size());
      }
      if (longest == 0) continue;
      for (size_t from = 0; from < longest; from += kMaxKeysPerRequest) {
        for (size_t s = 0; s < servers; ++s) {
          c.sent[s] = 0;
          if (c.asked[s].size() <= from || c.failed[s]) continue;
          const size_t to = std::min(c.asked[s].size(), from + kMaxKeysPerRequest);
          memcached_return_t rc = ready(c, s);
          if (rc == MEMCACHED_SUCCESS) {
            c.key_ptrs.clear();
            c.key_lens.clear();
            for (size_t k = from; k < to; ++k) {
              const Item& it = c.items[c.asked[s][k]];
              c.key_ptrs.push_back(c.keys.data() + it.key_at);
              c.key_lens.push_back(it.key_len);
            }
            rc = memcached_mget(c.conns[s].mc, c.key_ptrs.data(), c.key_lens.data(), to - from);
          }
          if (rc == MEMCACHED_SUCCESS) {
            c.sent[s] = 1;
          } else {
            fail_server(c, s, rc);
            for (size_t k = from; k < c.asked[s].size(); ++k) c.items[c.asked[s][k]].saw_error = true;
          }
        }
        for (size_t s = 0; s < servers; ++s) {
          if (c.sent[s]) receive(c, s, from, std::min(c.asked[s].size(), from + kMaxKeysPerRequest), accept);
        }
      }
    }
  }

  // Reads the replies to the `get` of c.asked[s][from, to). memcached answers
  // in the order asked (misses left out), so a forward cursor finds each item.
  template <class Accept>
  void receive(Client& c, size_t s, size_t from, size_t to, Accept& accept) {
    Conn& conn = c.conns[s];
    size_t cursor = from;
    memcached_return_t rc = MEMCACHED_SUCCESS;
    for (;;) {
      memcached_result_st* r = memcached_fetch_result(conn.mc, conn.result.get(), &rc);
      if (r == nullptr) break;
      const char* key = memcached_result_key_value(r);
      const size_t key_len = memcached_result_key_length(r);
      Item* found = nullptr;
      for (size_t step = 0; step < to - from; ++step) {
        const size_t k = from + (cursor - from + step) % (to - from);
        Item& it = c.items[c.asked[s][k]];
        if (it.key_len == key_len && std::memcmp(c.keys.data() + it.key_at, key, key_len) == 0 && !it.hit) {
          found = &it;
          cursor = k + 1 < to ? k + 1 : from;
          break;
        }
      }
      if (found == nullptr) continue;  // not asked (cannot happen) or asked twice: the first copy counts
      const auto* bytes = reinterpret_cast<const uint8_t*>(memcached_result_value(r));
      if (accept(*found, bytes, memcached_result_length(r))) {
        found->hit = true;
      } else {
        found->saw_damage = true;
      }
    }
    if (classify(rc) == Reply::kOk) {
      succeeded(s);
      return;
    }
    fail_server(c, s, rc);
    for (size_t k = from; k < to; ++k) {
      Item& it = c.items[c.asked[s][k]];
      if (!it.hit) it.saw_error = true;
    }
  }

  // Stores one item on every server of its placement (set, or add for a record).
  // Returns the copies stored; *first says how the first server that answered
  // answered (kOk stored, kExists: add found the key; kFailed: none answered),
  // which decides put vs put_existing when several writers race on replicas.
  size_t store_item(Client& c, const Item& it, const uint8_t* data, size_t len, bool add, Reply* first) {
    size_t stored = 0;
    *first = Reply::kFailed;
    const char* key = c.keys.data() + it.key_at;
    for (uint8_t p = 0; p < it.places; ++p) {
      const uint32_t s = c.places[it.places_at + p];
      if (c.failed[s]) continue;
      memcached_return_t rc = ready(c, s);
      if (rc == MEMCACHED_SUCCESS) {
        memcached_st* mc = c.conns[s].mc;
        const char* v = reinterpret_cast<const char*>(data);
        rc = add ? memcached_add(mc, key, it.key_len, v, len, 0, 0) : memcached_set(mc, key, it.key_len, v, len, 0, 0);
      }
      switch (classify(rc)) {
        case Reply::kOk:
          stored++;
          if (*first == Reply::kFailed) *first = Reply::kOk;
          succeeded(s);
          break;
        case Reply::kExists:
          if (*first == Reply::kFailed) *first = Reply::kExists;
          succeeded(s);
          break;
        default:
          fail_server(c, s, rc);
          break;
      }
    }
    return stored;
  }

  void put_batch(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
                 BlobResult* out) {
    Lease lease(this);
    Client& c = *lease;
    begin_call(c);
    const int64_t now = now_ns();
    const size_t live = live_servers(now);
    const size_t part_bytes = part_bytes_;
    // Split values: is the record there already? One fetch for all of them, so
    // an existing page's parts are not sent again.
    c.reads.assign(n, ValueRead{});
    for (size_t i = 0; i < n; ++i) {
      if (!valid_key(keys[i])) continue;
      if (sizes[i] + kHeaderBytes > part_bytes) add_item(c, keys[i].data(), keys[i].size(), kRecordPart, uint32_t(i), now, live);
    }
    fetch(c, 0, [](const Item&, const uint8_t* bytes, size_t len) {
      RecordHeader h;
      return open_record(bytes, len, &h);
    });
    for (const Item& it : c.items) c.reads[it.value].done = it.hit;
    for (size_t i = 0; i < n; ++i) {
      if (!valid_key(keys[i])) {
        out[i] = BlobResult::kError;
        put_errors_++;
        continue;
      }
      if (c.reads[i].done) {
        out[i] = BlobResult::kOk;
        put_existing_++;
        continue;
      }
      const size_t len = sizes[i];
      const bool split = len + kHeaderBytes > part_bytes;
      bool ok = true;
      Reply first = Reply::kFailed;
      c.record.clear();
      if (split) {
        const size_t parts = (len + part_bytes - 1) / part_bytes;
        if (parts > UINT32_MAX) ok = false;
        c.record.resize(kHeaderBytes + parts * 8);
        for (size_t p = 0; ok && p < parts; ++p) {
          const size_t at = p * part_bytes, bytes = std::min(part_bytes, len - at);
          store_le<uint64_t>(c.record.data() + kHeaderBytes + p * 8, XXH3_64bits(values[i] + at, bytes));
          add_item(c, keys[i].data(), keys[i].size(), uint32_t(p), uint32_t(i), now, live);
          Reply part_first;
          if (store_item(c, c.items.back(), values[i] + at, bytes, false, &part_first) == 0) ok = false;
        }
        if (ok) seal_record(c.record.data(), kManifest, len, uint32_t(parts), uint32_t(part_bytes), parts * 8);
      } else {
        c.record.resize(kHeaderBytes + len);
        if (len > 0) std::memcpy(c.record.data() + kHeaderBytes, values[i], len);
        seal_record(c.record.data(), kInline, len, 1, uint32_t(len), len);
      }
      if (ok) {
        add_item(c, keys[i].data(), keys[i].size(), kRecordPart, uint32_t(i), now, live);
        store_item(c, c.items.back(), c.record.data(), c.record.size(), true, &first);
      }
      if (first == Reply::kOk) {
        out[i] = BlobResult::kOk;
        puts_++;
        put_bytes_ += len;
      } else if (first == Reply::kExists) {
        out[i] = BlobResult::kOk;
        put_existing_++;
      } else {
        out[i] = BlobResult::kError;
        put_errors_++;
      }
    }
  }

  void get_batch(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
                 BlobResult* out) {
    Lease lease(this);
    Client& c = *lease;
    begin_call(c);
    const int64_t now = now_ns();
    const size_t live = live_servers(now);
    c.reads.assign(n, ValueRead{});
    for (size_t i = 0; i < n; ++i) {
      sizes[i] = 0;
      if (valid_key(keys[i])) add_item(c, keys[i].data(), keys[i].size(), kRecordPart, uint32_t(i), now, live);
    }
    const size_t records = c.items.size();
    // Round 1: the records. An inline value is copied out; a manifest is kept.
    fetch(c, 0, [&](const Item& it, const uint8_t* bytes, size_t len) {
      RecordHeader h;
      if (!open_record(bytes, len, &h)) return false;
      ValueRead& v = c.reads[it.value];
      v.length = h.length;
      if (h.kind == kInline) {
        std::memcpy(dst[it.value], bytes + kHeaderBytes, std::min<size_t>(h.length, capacity[it.value]));
        v.done = true;
      } else {
        v.manifest = true;
        v.parts = h.parts;
        v.part_bytes = h.part_bytes;
        v.sums_at = c.sums.size();
        for (uint32_t p = 0; p < h.parts; ++p) c.sums.push_back(load_le<uint64_t>(bytes + kHeaderBytes + p * 8));
      }
      return true;
    });
    // Round 2: every part of every manifest found, in one fetch.
    for (size_t r = 0; r < records; ++r) {
      const Item rec = c.items[r];
      if (!rec.hit || !c.reads[rec.value].manifest) continue;
      for (uint32_t p = 0; p < c.reads[rec.value].parts; ++p) {
        add_item(c, keys[rec.value].data(), keys[rec.value].size(), p, rec.value, now, live);
      }
    }
    fetch(c, records, [&](const Item& it, const uint8_t* bytes, size_t len) {
      const ValueRead& v = c.reads[it.value];
      const uint64_t at = uint64_t(it.part) * v.part_bytes;
      const size_t expect = size_t(std::min<uint64_t>(v.part_bytes, v.length - at));
      if (len != expect || XXH3_64bits(bytes, len) != c.sums[v.sums_at + it.part]) return false;
      if (at < capacity[it.value]) {
        std::memcpy(dst[it.value] + at, bytes, std::min<size_t>(len, capacity[it.value] - at));
      }
      return true;
    });
    // Outcomes: whole, or a miss (partial when a part is lost or damaged), or an error.
    size_t next_part = records;
    size_t r = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!valid_key(keys[i])) {
        out[i] = BlobResult::kError;
        get_errors_++;
        continue;
      }
      const Item rec = c.items[r++];
      const ValueRead& v = c.reads[i];
      BlobResult result;
      bool partial = false;
      if (rec.hit && v.manifest) {
        bool missing = false, error = false;
        for (uint32_t p = 0; p < v.parts; ++p) {
          const Item& part = c.items[next_part++];
          if (part.hit) continue;
          if (part.saw_damage || !part.saw_error) missing = true;
          else error = true;
        }
        result = missing ? BlobResult::kMiss : error ? BlobResult::kError : BlobResult::kOk;
        partial = missing;
      } else if (rec.hit) {
        result = BlobResult::kOk;
      } else if (rec.saw_damage) {
        result = BlobResult::kMiss;
        partial = true;
      } else {
        result = rec.saw_error ? BlobResult::kError : BlobResult::kMiss;
      }
      out[i] = result;
      if (result == BlobResult::kOk) {
        sizes[i] = size_t(v.length);
        get_hits_++;
        get_bytes_ += v.length;
      } else if (result == BlobResult::kMiss) {
        get_misses_++;
        if (partial) partial_values_++;
      } else {
        get_errors_++;
      }
    }
  }

  size_t exists_batch(const std::string* keys, size_t n) {
    Lease lease(this);
    Client& c = *lease;
    begin_call(c);
    const int64_t now = now_ns();
    const size_t live = live_servers(now);
    size_t asked = 0;
    while (asked < n && valid_key(keys[asked])) {
      add_item(c, keys[asked].data(), keys[asked].size(), kRecordPart, uint32_t(asked), now, live);
      asked++;
    }
    fetch(c, 0, [](const Item&, const uint8_t* bytes, size_t len) {
      RecordHeader h;
      return open_record(bytes, len, &h);
    });
    size_t hits = 0;
    while (hits < asked && c.items[hits].hit) hits++;
    return hits;
  }

  const std::vector<std::string> addresses_;
  const std::vector<std::string> hosts_;
  const std::vector<in_port_t> ports_;
  const size_t replicas_;
  const uint64_t timeout_ms_;
  const int64_t retry_ns_;
  std::vector<std::pair<uint64_t, uint32_t>> ring_;  // (point, server), sorted
  std::vector<ServerHealth> health_;
  std::mutex eject_mu_;
  size_t item_limit_ = kDefaultItemLimit;
  size_t part_bytes_ = kDefaultItemLimit - kMemcachedItemOverheadBytes;

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Client>> pool_;

  std::atomic<uint64_t> puts_{0}, put_bytes_{0}, put_existing_{0}, put_errors_{0};
  std::atomic<uint64_t> gets_{0}, get_hits_{0}, get_bytes_{0}, get_misses_{0}, get_errors_{0};
  std::atomic<uint64_t> exists_calls_{0}, timeouts_{0}, server_errors_{0}, partial_values_{0}, servers_ejected_{0};
};

}  // namespace

std::string memcached_part_key(const std::string& key, uint32_t index) {
  return key + ".p" + std::to_string(index);
}

Status open_memcached_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out) {
  try {
    if (cfg.servers.empty()) return Status::config("storage.servers: memcached needs at least one \"host:port\"");
    std::vector<std::string> hosts;
    std::vector<in_port_t> ports;
    for (size_t i = 0; i < cfg.servers.size(); ++i) {
      std::string host;
      in_port_t port = 0;
      if (!split_address(cfg.servers[i], &host, &port)) {
        return Status::config("storage.servers[" + std::to_string(i) + "]: got \"" + cfg.servers[i] +
                              "\", expected \"host:port\"");
      }
      hosts.push_back(host);
      ports.push_back(port);
    }
    if (cfg.replicas < 0 || size_t(cfg.replicas) >= cfg.servers.size()) {
      return Status::config("storage.replicas: got " + std::to_string(cfg.replicas) + ", expected 0 to " +
                            std::to_string(cfg.servers.size() - 1) + " (fewer than the servers)");
    }
    if (cfg.timeout_ms < 1) return Status::config("storage.timeout_ms: expected at least 1");
    if (!(cfg.retry_timeout_s >= 0)) return Status::config("storage.retry_timeout_s: expected at least 0");
    auto store = std::make_unique<MemcachedStore>(cfg.servers, std::move(hosts), std::move(ports), cfg);
    store->probe_item_limit();
    *out = std::move(store);
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return Status(KVPOOL_ERR_HOST_MEMORY, "opening the memcached store: out of host memory");
  }
}

}  // namespace kvp::storage
