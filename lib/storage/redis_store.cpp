// The redis backend (redis_store.hpp): hiredis' blocking API, one pipelined
// round trip per batch and server, a small connection pool per server.
#include "storage/redis_store.hpp"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace kvp::storage {
namespace {

using Clock = std::chrono::steady_clock;

// Idle connections kept per server; a call that finds none opens one, and one
// returned to a full pool is closed.
constexpr size_t kMaxIdle = 8;
// Commands are sent once this many bytes are buffered, so a batch of 8 MiB
// pages never holds more than about one page of command text in memory.
constexpr size_t kFlushBytes = size_t(1) << 20;
// Values from this size on are sent from the caller's buffer, not copied into
// hiredis' (which would copy them twice: formatting, then buffering).
constexpr size_t kDirectSendBytes = size_t(64) << 10;
// Keys per SCAN step and per UNLINK of clear().
constexpr const char* kScanCount = "1000";
// Every key kvpool writes (page_key.hpp: "kvp1-<fingerprint>-<digest>").
constexpr const char* kKeyPattern = "kvp1-*";

void free_context(redisContext* c) {
  if (c != nullptr) redisFree(c);
}

// Whether the failure of `c` was a wait that ran out (SO_RCVTIMEO/SO_SNDTIMEO or
// the connect timeout) rather than a refused, reset or closed connection.
bool timed_out(const redisContext* c, int saved_errno) {
  if (c == nullptr || c->err != REDIS_ERR_IO) return false;
  if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT) return true;
  return std::strstr(c->errstr, "timed out") != nullptr || std::strstr(c->errstr, "temporarily unavailable") != nullptr;
}

// Holds SIGPIPE off the calling thread while it lives. hiredis sends with
// write(), which raises SIGPIPE on a connection the server has closed, and the
// signal's default action ends the process: the application's, not ours to end.
// The thread's mask blocks it meanwhile; one raised in that time is taken off
// the thread's pending set before the mask is restored (write() reports EPIPE).
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    already_pending_ = sigismember(&pending, SIGPIPE) == 1;  // not ours: left as it is
  }
  ~NoSigpipe() {
    if (!already_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_{}, old_{};
  bool already_pending_ = false;
};

// Reads GET replies straight from the socket into the caller's page buffers.
// hiredis' reader would receive a value 16 KiB at a time into a growing buffer,
// copy it into a reply object, and the backend would copy it once more; here a
// value's bytes go from the socket to dst[i] with one recv() per socket buffer.
// Used only while hiredis' own reader holds nothing (every reply before was
// read whole), on a blocking socket whose receive timeout is the backend's.
class DirectReader {
 public:
  enum class Reply : uint8_t { kValue, kNil, kError, kBroken };

  explicit DirectReader(int fd) : fd_(fd), buf_(kBufBytes) {}

  // One GET reply: a value (its first min(length, capacity) bytes copied into
  // dst, *length its full length), nil, or an error reply; kBroken when the
  // connection failed (*timeout: a wait ran out) or spoke something else.
  Reply get(uint8_t* dst, size_t capacity, size_t* length, bool* timeout) {
    std::string head;
    if (!line(&head, timeout)) return Reply::kBroken;
    if (head.size() >= 1 && head[0] == '-') return Reply::kError;
    if (head.size() < 2 || head[0] != '$') return Reply::kBroken;
    if (head == "$-1") return Reply::kNil;
    uint64_t n = 0;
    for (size_t i = 1; i < head.size(); ++i) {
      if (head[i] < '0' || head[i] > '9' || n > (uint64_t(1) << 40)) return Reply::kBroken;
      n = n * 10 + uint64_t(head[i] - '0');
    }
    const size_t copied = size_t(std::min<uint64_t>(n, capacity));
    if (!take(dst, copied, timeout) || !take(nullptr, size_t(n) - copied, timeout)) return Reply::kBroken;
    char crlf[2];
    if (!take(reinterpret_cast<uint8_t*>(crlf), 2, timeout) || crlf[0] != '\r' || crlf[1] != '\n') {
      return Reply::kBroken;
    }
    *length = size_t(n);
    return Reply::kValue;
  }

  // Whether every byte received so far was a reply's (after the last reply of a trip).
  bool drained() const { return begin_ == end_; }

 private:
  static constexpr size_t kBufBytes = size_t(64) << 10;
  static constexpr size_t kMaxLine = 4096;

  // Receives at most `room` bytes into `at`; false on a closed connection, an error or a timeout.
  bool receive(uint8_t* at, size_t room, size_t* got, bool* timeout) {
    for (;;) {
      const ssize_t r = ::recv(fd_, at, room, 0);
      if (r > 0) {
        *got = size_t(r);
        return true;
      }
      if (r < 0 && errno == EINTR) continue;
      *timeout = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      return false;
    }
  }

  // The next line, without its CRLF.
  bool line(std::string* out, bool* timeout) {
    for (;;) {
      for (size_t i = begin_; i + 1 < end_; ++i) {
        if (buf_[i] == '\r' && buf_[i + 1] == '\n') {
          out->assign(reinterpret_cast<const char*>(buf_.data() + begin_), i - begin_);
          begin_ = i + 2;
          return true;
        }
      }
      if (end_ - begin_ > kMaxLine) return false;
      if (begin_ > 0) {  // keep the partial line at the front
        std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      }
      size_t got = 0;
      if (!receive(buf_.data() + end_, buf_.size() - end_, &got, timeout)) return false;
      end_ += got;
    }
  }

  // The next n bytes into dst (nullptr: dropped): first those already received, then straight from the socket.
  bool take(uint8_t* dst, size_t n, bool* timeout) {
    const size_t have = std::min(n, end_ - begin_);
    if (dst != nullptr) std::memcpy(dst, buf_.data() + begin_, have);
    begin_ += have;
    size_t done = have;
    while (done < n) {
      size_t got = 0;
      if (dst != nullptr) {
        if (!receive(dst + done, n - done, &got, timeout)) return false;
      } else if (!receive(buf_.data(), std::min(n - done, buf_.size()), &got, timeout)) {
        return false;
      }
      done += got;
    }
    if (begin_ == end_) begin_ = end_ = 0;
    return true;
  }

  int fd_;
  std::vector<uint8_t> buf_;
  size_t begin_ = 0, end_ = 0;  // received bytes not yet taken: buf_[begin_, end_)
};

struct Server {
  std::string host;
  int port = 0;
  std::string address;  // as configured, for describe() and messages
  std::mutex mu;
  std::vector<redisContext*> idle;  // guarded by mu
  Clock::time_point retry_at{};     // guarded by mu: skipped until then
};

// How one server's part of a batch ended.
enum class TripEnd : uint8_t {
  kDone,     // every reply read
  kSkipped,  // the server is in its back-off: nothing sent
  kTimeout,  // a wait ran out (connect, send or receive)
  kFailed,   // refused, reset, closed, or a protocol error
};

class RedisStore final : public BlobStore {
 public:
  RedisStore(std::vector<std::unique_ptr<Server>> servers, int timeout_ms)
      : servers_(std::move(servers)), timeout_ms_(timeout_ms) {}

  ~RedisStore() override {
    for (auto& s : servers_) {
      for (redisContext* c : s->idle) free_context(c);
    }
  }

  std::string describe() const override {
    std::string d = "redis:";
    for (size_t i = 0; i < servers_.size(); ++i) d += (i ? "," : "") + servers_[i]->address;
    return d;
  }

  void put(const std::string* keys, const uint8_t* const* values, const size_t* sizes, size_t n,
           BlobResult* out) override {
    BlobStats d;
    for (size_t i = 0; i < n; ++i) out[i] = BlobResult::kError;
    const auto append = [&](redisContext* c, size_t i, bool* timeout) {
      if (sizes[i] < kDirectSendBytes) {
        const char* argv[4] = {"SET", keys[i].data(), reinterpret_cast<const char*>(values[i]), "NX"};
        const size_t len[4] = {3, keys[i].size(), sizes[i], 2};
        if (redisAppendCommandArgv(c, 4, argv, len) != REDIS_OK) return size_t(0);
        return sizes[i] + keys[i].size() + 32;
      }
      // A large value goes from the caller's buffer to the socket: the command's head through
      // hiredis' buffer (sent first, with everything buffered before it), the value, the tail.
      const std::string head = "*4\r\n$3\r\nSET\r\n$" + std::to_string(keys[i].size()) + "\r\n" + keys[i] +
                               "\r\n$" + std::to_string(sizes[i]) + "\r\n";
      static constexpr char kTail[] = "\r\n$2\r\nNX\r\n";
      if (redisAppendFormattedCommand(c, head.data(), head.size()) != REDIS_OK) return size_t(0);
      if (!flush(c, timeout)) {
        *timeout = *timeout || timed_out(c, errno);
        return size_t(0);
      }
      if (!send_all(c->fd, values[i], sizes[i], timeout)) return size_t(0);
      if (redisAppendFormattedCommand(c, kTail, sizeof(kTail) - 1) != REDIS_OK) return size_t(0);
      return sizeof(kTail) - 1;
    };
    const auto read = [&](redisContext* c, size_t i, bool* timeout) {
      void* reply = nullptr;
      if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr) {
        *timeout = timed_out(c, errno);
        return false;
      }
      const redisReply* r = static_cast<const redisReply*>(reply);
      if (r->type == REDIS_REPLY_STATUS && r->len == 2 && std::memcmp(r->str, "OK", 2) == 0) {
        out[i] = BlobResult::kOk;
        d.puts++;
        d.put_bytes += sizes[i];
      } else if (r->type == REDIS_REPLY_NIL) {  // NX: the key already holds its (same) value
        out[i] = BlobResult::kOk;
        d.put_existing++;
      } else {  // an error reply (OOM, READONLY, MOVED, ...) or an unexpected type
        d.server_errors++;
      }
      freeReplyObject(reply);
      return true;
    };
    size_t taken = 0;
    try {
      trip(*servers_[0], n, append, read, &d, &taken);
    } catch (...) {  // bad_alloc (a command's head): the keys not confirmed stay kError; nothing escapes
    }
    for (size_t i = 0; i < n; ++i) d.put_errors += out[i] == BlobResult::kError;
    merge(d);
  }

  void get(const std::string* keys, uint8_t* const* dst, const size_t* capacity, size_t n, size_t* sizes,
           BlobResult* out) override {
    BlobStats d;
    d.gets = n;
    for (size_t i = 0; i < n; ++i) {
      out[i] = BlobResult::kError;
      sizes[i] = 0;
    }
    std::unique_ptr<DirectReader> reader;
    try {  // bad_alloc (the reader, a reply's line): the keys not read stay kError; nothing escapes
      on_each_server("GET", keys, n, &d,
                     [&](redisContext* c, size_t i, bool first, bool last, bool* timeout, bool* answered) {
                       if (first) {
                         if (c->reader->pos != c->reader->len) return false;  // never: every reply was read whole
                         reader = std::make_unique<DirectReader>(c->fd);
                       }
                       size_t len = 0;
                       switch (reader->get(dst[i], capacity[i], &len, timeout)) {
                         case DirectReader::Reply::kValue:
                           sizes[i] = len;
                           out[i] = BlobResult::kOk;
                           d.get_hits++;
                           d.get_bytes += len;
                           break;
                         case DirectReader::Reply::kNil:
                           out[i] = BlobResult::kMiss;
                           d.get_misses++;
                           break;
                         case DirectReader::Reply::kError:  // the next server may answer
                           d.server_errors++;
                           *answered = false;
                           break;
                         case DirectReader::Reply::kBroken: return false;
                       }
                       return !last || reader->drained();
                     });
    } catch (...) {
    }
    for (size_t i = 0; i < n; ++i) d.get_errors += out[i] == BlobResult::kError;
    merge(d);
  }

  size_t exists_prefix(const std::string* keys, size_t n) override {
    BlobStats d;
    d.exists_calls = 1;
    size_t hits = 0;
    try {  // bad_alloc: the keys count as missing (none asked about); nothing escapes
      std::vector<uint8_t> found(n, 0);
      on_each_server("EXISTS", keys, n, &d,
                     [&](redisContext* c, size_t i, bool, bool, bool* timeout, bool* answered) {
                       void* reply = nullptr;
                       if (redisGetReply(c, &reply) != REDIS_OK || reply == nullptr) {
                         *timeout = timed_out(c, errno);
                         return false;
                       }
                       const redisReply* r = static_cast<const redisReply*>(reply);
                       if (r->type == REDIS_REPLY_INTEGER) {
                         found[i] = r->integer > 0;
                       } else {  // an error reply: the next server may answer
                         d.server_errors++;
                         *answered = false;
                       }
                       freeReplyObject(reply);
                       return true;
                     });
      while (hits < n && found[hits]) ++hits;
    } catch (...) {
      hits = 0;
    }
    merge(d);
    return hits;
  }

  Status clear() override {
    Server& s = *servers_[0];
    BlobStats d;
    redisContext* c = nullptr;
    bool reused = false;
    const NoSigpipe no_sigpipe;
    TripEnd got = acquire(s, &c, &reused, &d);
    if (got == TripEnd::kDone && reused) {  // a pooled connection may have died while idle: PING it
      redisReply* r = command(c, 1, std::array<const char*, 1>{"PING"}.data(), nullptr);
      if (r != nullptr) {
        freeReplyObject(r);
      } else if (timed_out(c, errno)) {
        got = fail(s, c, true, &d);
      } else {  // stale: not counted, a new connection
        free_context(c);
        got = acquire(s, &c, &reused, &d);
      }
    }
    if (got != TripEnd::kDone) {
      merge(d);
      return Status::io("redis " + s.address + ": clear failed: " +
                        (got == TripEnd::kSkipped ? "the server is down (tried again after its back-off)"
                                                  : "cannot connect (refused or timed out)"));
    }
    std::string cursor = "0";
    std::string failure;
    do {
      const char* scan[6] = {"SCAN", cursor.c_str(), "MATCH", kKeyPattern, "COUNT", kScanCount};
      redisReply* r = command(c, 6, scan, nullptr);
      if (r == nullptr) break;
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
          r->element[1]->type != REDIS_REPLY_ARRAY) {
        failure = r->type == REDIS_REPLY_ERROR ? std::string(r->str, size_t(r->len)) : "unexpected SCAN reply";
        freeReplyObject(r);
        break;
      }
      cursor.assign(r->element[0]->str, size_t(r->element[0]->len));
      const redisReply* found = r->element[1];
      if (found->elements > 0) {
        std::vector<const char*> argv{"UNLINK"};
        std::vector<size_t> len{6};
        for (size_t i = 0; i < found->elements; ++i) {
          argv.push_back(found->element[i]->str);
          len.push_back(size_t(found->element[i]->len));
        }
        redisReply* u = command(c, int(argv.size()), argv.data(), len.data());
        if (u != nullptr && u->type == REDIS_REPLY_ERROR) failure.assign(u->str, size_t(u->len));
        if (u != nullptr) freeReplyObject(u);
        if (u == nullptr || !failure.empty()) {
          freeReplyObject(r);
          break;
        }
      }
      freeReplyObject(r);
    } while (cursor != "0");
    Status st;
    if (c->err != 0) {
      const bool timeout = timed_out(c, errno);
      st = Status::io("redis " + s.address + ": clear failed: " + c->errstr);
      fail(s, c, timeout, &d);
    } else {
      if (!failure.empty()) {
        d.server_errors++;
        st = Status::io("redis " + s.address + ": clear failed: " + failure);
      }
      release(s, c);
    }
    merge(d);
    return st;
  }

  BlobStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

 private:
  template <class Append, class Read>
  TripEnd trip(Server& s, size_t count, const Append& append, const Read& read, BlobStats* d, size_t* taken);


  // A read of keys [0, n), one "cmd key" each: the primary first, then each
  // replica for the keys the servers before it could not answer.
  // read(c, i, first, last, &timeout, &answered) reads key i's reply (first and
  // last of the trip); false when the connection failed; answered = false for a
  // reply that the next server may not give (an error reply).
  template <class Read>
  void on_each_server(const char* cmd, const std::string* keys, size_t n, BlobStats* d, const Read& read) {
    std::vector<size_t> todo(n);
    for (size_t i = 0; i < n; ++i) todo[i] = i;
    std::vector<size_t> next;
    const size_t cmd_len = std::strlen(cmd);
    for (auto& s : servers_) {
      if (todo.empty()) break;
      next.clear();
      size_t taken = 0;
      trip(
          *s, todo.size(),
          [&](redisContext* c, size_t j, bool*) {
            const std::string& key = keys[todo[j]];
            const char* argv[2] = {cmd, key.data()};
            const size_t len[2] = {cmd_len, key.size()};
            return redisAppendCommandArgv(c, 2, argv, len) == REDIS_OK ? key.size() + 24 : size_t(0);
          },
          [&](redisContext* c, size_t j, bool* timeout) {
            bool answered = true;
            if (!read(c, todo[j], j == 0, j + 1 == todo.size(), timeout, &answered)) return false;
            if (!answered) next.push_back(todo[j]);
            return true;
          },
          d, &taken);
      next.insert(next.end(), todo.begin() + long(taken), todo.end());
      todo.swap(next);
    }
  }

  // A connection to s: an idle one (*reused) or a new one. Counts a failed connect.
  TripEnd acquire(Server& s, redisContext** out, bool* reused, BlobStats* d) {
    *out = nullptr;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (Clock::now() < s.retry_at) return TripEnd::kSkipped;
      if (!s.idle.empty()) {
        *out = s.idle.back();
        s.idle.pop_back();
        *reused = true;
        return TripEnd::kDone;
      }
    }
    *reused = false;
    const timeval tv = timeout();
    redisContext* c = redisConnectWithTimeout(s.host.c_str(), s.port, tv);
    const int saved_errno = errno;
    if (c != nullptr && c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
      redisEnableKeepAlive(c);
      *out = c;
      return TripEnd::kDone;
    }
    return fail(s, c, timed_out(c, saved_errno), d);
  }

  // Never throws: a connection the pool has no room for is closed.
  void release(Server& s, redisContext* c) noexcept {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (s.idle.size() < kMaxIdle) {
        try {
          s.idle.push_back(c);
          return;
        } catch (const std::bad_alloc&) {
        }
      }
    }
    free_context(c);
  }

  // Drops a failed connection (nullptr: none was made), takes s out of the
  // rotation for kRedisRetryAfterMs with its idle connections (the server is
  // likely gone for them too), and counts the failure. hiredis out of memory (no
  // context at all, or REDIS_ERR_OOM) is this process's failure, not the server's:
  // the connection is dropped (a command may be half-buffered) and s stays in the
  // rotation, so the next call works once memory is back.
  TripEnd fail(Server& s, redisContext* c, bool timeout, BlobStats* d) {
    const bool out_of_memory = c == nullptr || c->err == REDIS_ERR_OOM;
    free_context(c);
    if (out_of_memory) return TripEnd::kFailed;
    std::vector<redisContext*> drop;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      const Clock::time_point now = Clock::now();
      if (s.retry_at <= now) d->servers_ejected++;
      s.retry_at = now + std::chrono::milliseconds(kRedisRetryAfterMs);
      drop.swap(s.idle);
    }
    for (redisContext* x : drop) free_context(x);
    if (timeout) {
      d->timeouts++;
      return TripEnd::kTimeout;
    }
    d->server_errors++;
    return TripEnd::kFailed;
  }

  // One blocking command (argvlen nullptr: C strings); nullptr when the connection failed.
  static redisReply* command(redisContext* c, int argc, const char** argv, const size_t* argvlen) {
    std::vector<size_t> len;
    if (argvlen == nullptr) {
      for (int i = 0; i < argc; ++i) len.push_back(std::strlen(argv[i]));
      argvlen = len.data();
    }
    return static_cast<redisReply*>(redisCommandArgv(c, argc, argv, argvlen));
  }

  // Sends everything c has buffered. False when the connection failed, or when
  // one send waited a whole timeout without finishing (*stalled: the server has
  // stopped reading; the socket's send timeout alone would let a trickle of
  // progress stretch the wait over several timeouts).
  bool flush(redisContext* c, bool* stalled) const {
    int done = 0;
    while (!done) {
      const Clock::time_point t0 = Clock::now();
      if (redisBufferWrite(c, &done) != REDIS_OK) return false;
      if (!done && Clock::now() - t0 >= std::chrono::milliseconds(timeout_ms_)) {
        *stalled = true;
        return false;
      }
    }
    return true;
  }

  // Sends n bytes on the connection's socket (MSG_NOSIGNAL: no SIGPIPE). False
  // when the connection failed, or a send waited a whole timeout without
  // finishing (*timeout, as flush()).
  bool send_all(int fd, const uint8_t* p, size_t n, bool* timeout) const {
    size_t done = 0;
    while (done < n) {
      const Clock::time_point t0 = Clock::now();
      const ssize_t w = ::send(fd, p + done, n - done, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno == EINTR) continue;
        *timeout = errno == EAGAIN || errno == EWOULDBLOCK;
        return false;
      }
      done += size_t(w);
      if (done < n && Clock::now() - t0 >= std::chrono::milliseconds(timeout_ms_)) {
        *timeout = true;
        return false;
      }
    }
    return true;
  }

  timeval timeout() const {
    timeval tv{};
    tv.tv_sec = timeout_ms_ / 1000;
    tv.tv_usec = (timeout_ms_ % 1000) * 1000;
    return tv;
  }

  void merge(const BlobStats& d) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.puts += d.puts;
    stats_.put_bytes += d.put_bytes;
    stats_.put_existing += d.put_existing;
    stats_.put_errors += d.put_errors;
    stats_.gets += d.gets;
    stats_.get_hits += d.get_hits;
    stats_.get_bytes += d.get_bytes;
    stats_.get_misses += d.get_misses;
    stats_.get_errors += d.get_errors;
    stats_.exists_calls += d.exists_calls;
    stats_.timeouts += d.timeouts;
    stats_.server_errors += d.server_errors;
    stats_.servers_ejected += d.servers_ejected;
  }

  std::vector<std::unique_ptr<Server>> servers_;  // [0]: the primary
  int timeout_ms_;
  mutable std::mutex stats_mu_;
  BlobStats stats_;  // guarded by stats_mu_
};

// One pipelined round trip to s: append(c, i, &timeout) for i < count (returns
// the bytes it left in hiredis' buffer, 0 on failure), then read(c, i, &timeout) of each reply (false: the
// connection failed; timeout: a wait ran out). *taken: the replies read, all
// `count` on kDone, the first *taken of them otherwise. A
// connection from the pool that turns out dead before any reply (the server
// restarted, or closed it while idle) is replaced by a new one once: every
// command here is idempotent (a repeated SET NX finds its key).
template <class Append, class Read>
TripEnd RedisStore::trip(Server& s, size_t count, const Append& append, const Read& read, BlobStats* d,
                         size_t* taken) {
  *taken = 0;
  if (count == 0) return TripEnd::kDone;
  const NoSigpipe no_sigpipe;
  for (int attempt = 0;; ++attempt) {
    redisContext* c = nullptr;
    bool reused = false;
    const TripEnd got = acquire(s, &c, &reused, d);
    if (got != TripEnd::kDone) return got;
    bool ok = true, timeout = false;
    try {
      size_t buffered = 0;
      for (size_t i = 0; i < count && ok; ++i) {
        const size_t bytes = append(c, i, &timeout);
        ok = bytes > 0;
        buffered += bytes;
        if (ok && (buffered >= kFlushBytes || i + 1 == count)) {
          ok = flush(c, &timeout);
          buffered = 0;
        }
      }
      if (!ok && !timeout) timeout = timed_out(c, errno);
      for (size_t i = 0; i < count && ok; ++i) {
        ok = read(c, i, &timeout);
        if (ok) ++*taken;
      }
    } catch (...) {  // bad_alloc mid-trip: replies may be unread, so the connection cannot go back to the pool
      free_context(c);
      throw;
    }
    if (ok) {
      release(s, c);
      return TripEnd::kDone;
    }
    if (reused && attempt == 0 && *taken == 0 && !timeout) {
      free_context(c);  // a stale pooled connection: not counted, try a fresh one
      std::vector<redisContext*> drop;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        drop.swap(s.idle);
      }
      for (redisContext* x : drop) free_context(x);
      continue;
    }
    return fail(s, c, timeout, d);
  }
}

// "host:port" (config_parse.cpp checked the form; "[v6]:port" too).
bool split_address(const std::string& a, std::string* host, int* port) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = a.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  int p = 0;
  for (size_t i = colon + 1; i < a.size(); ++i) {
    if (a[i] < '0' || a[i] > '9' || p > 65535) return false;
    p = p * 10 + (a[i] - '0');
  }
  *port = p;
  return !host->empty() && p >= 1 && p <= 65535;
}

// Whether the server at s (reachable now) runs in cluster mode; false when it
// cannot be asked (a server down at open is not an error).
bool in_cluster_mode(const Server& s, int timeout_ms) {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  const NoSigpipe no_sigpipe;
  redisContext* c = redisConnectWithTimeout(s.host.c_str(), s.port, tv);
  bool cluster = false;
  if (c != nullptr && c->err == 0 && redisSetTimeout(c, tv) == REDIS_OK) {
    redisReply* r = static_cast<redisReply*>(redisCommand(c, "INFO cluster"));
    if (r != nullptr && r->type == REDIS_REPLY_STRING) {
      cluster = std::strstr(r->str, "cluster_enabled:1") != nullptr;
    }
    if (r != nullptr) freeReplyObject(r);
  }
  free_context(c);
  return cluster;
}

}  // namespace

Status open_redis_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out) {
  if (cfg.servers.empty()) {
    return Status::config("storage backend \"redis\": servers is empty, expected the primary's \"host:port\"");
  }
  if (cfg.timeout_ms < 1 || cfg.timeout_ms > 600000) {
    return Status::config("storage backend \"redis\": timeout_ms " + std::to_string(cfg.timeout_ms) +
                          ", expected [1, 600000]");
  }
  std::vector<std::unique_ptr<Server>> servers;
  for (const std::string& a : cfg.servers) {
    auto s = std::make_unique<Server>();
    if (!split_address(a, &s->host, &s->port)) {
      return Status::config("storage backend \"redis\": server \"" + a + "\", expected \"host:port\"");
    }
    s->address = a;
    servers.push_back(std::move(s));
  }
  if (in_cluster_mode(*servers[0], int(cfg.timeout_ms))) {
    return Status::unsupported("storage backend \"redis\": " + cfg.servers[0] +
                               " runs in cluster mode, which kvpool does not support (hiredis 0.14 does not "
                               "follow MOVED/ASK redirections); use a standalone primary with replicas");
  }
  *out = std::make_unique<RedisStore>(std::move(servers), int(cfg.timeout_ms));
  return Status::ok();
}

}  // namespace kvp::storage
