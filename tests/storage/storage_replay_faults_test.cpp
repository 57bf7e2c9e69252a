// kvpool-replay against real memcached (two servers: two nodes of the ring) and
// redis-server processes (tests/support/server_process.hpp) while a server is killed and
// restarted on its port, stopped (SIGSTOP: it accepts but never answers) and resumed, or
// stopped until the replay ends. The replay runs as a child process, as a user runs it;
// the faults land at points of its progress: the replay stops itself (--stop-at, SIGSTOP)
// once given numbers of requests have finished, and the fault is made while it is stopped,
// so they hit a replay that is using the store at the same point of the trace whatever the
// machine's speed or load. Each run must exit 0
// within a bounded time (a hang is killed and fails the test), its --json report must show
// the fault in the store counters, the hits by tier must add up, a run with faults must not
// match fewer tokens than the same trace without any store (faults are misses only), and
// the server must take pages again once it is back.
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/server_process.hpp"

namespace {

using kvtest::ServerProcess;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Requests replayed per run: long enough that a fault at a fifth of the run still leaves
// most of it to run against the faulted store (a fault-free run takes 0.5-2 s here).
constexpr int kRequests = 400;
// The faults start once a fifth of the requests have finished and (where they end) last for
// a tenth more.
constexpr int kFaultAt = kRequests / 5;
constexpr int kFaultFor = kRequests / 10;
// A replay that has not exited this long after it started is hung: killed, and the test fails.
// A run here takes 0.5-8 s (most of it the test's own pauses); the margin is for sanitizer
// builds run in parallel (scripts/sanitize.sh address runs this test too).
constexpr double kReplayDeadlineS = 60.0;
// Backend timeouts of the runs (storage section of the --config file; --storage keeps them):
// short, so a stopped server costs a tenth of a second per try, not the default second.
constexpr int kTimeoutMs = 100;
constexpr double kMemcachedRetryS = 0.2;
// How long a server that came back stays skipped: memcached's retry_timeout_s above,
// redis' fixed back-off (kRedisRetryAfterMs, 1 s); waited out with the replay stopped, so
// that what follows talks to the server again.
double backoff_s(const std::string& backend) { return backend == "memcached" ? kMemcachedRetryS + 0.1 : 1.1; }

// kvpool-replay running as a child process: stdout (the --json report) and stderr (its
// progress bar, shown when a test fails) are collected, and its self-stops are seen through
// waitpid.
class ReplayProcess {
 public:
  explicit ReplayProcess(const std::vector<std::string>& args) : start_(Clock::now()) {
    int out[2], err[2];
    // Close-on-exec: the servers the test (re)starts later must not inherit the replay's pipes.
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return;
    std::vector<std::string> argv = {KVPOOL_REPLAY_EXE};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that dies (or times out in ctest) takes it along
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::close(out[0]), ::close(out[1]), ::close(err[0]), ::close(err[1]);
      ::execv(cargv[0], cargv.data());
      _exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    ::fcntl(out_fd_, F_SETFL, O_NONBLOCK);
    ::fcntl(err_fd_, F_SETFL, O_NONBLOCK);
  }
  ReplayProcess(const ReplayProcess&) = delete;
  ReplayProcess& operator=(const ReplayProcess&) = delete;
  ~ReplayProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }

  bool started() const { return pid_ > 0; }
  double elapsed() const { return seconds_since(start_); }
  const std::string& stdout_text() const { return out_; }
  const std::string& stderr_text() const { return err_; }

  // The replay runs with --stop-at: it stops itself (SIGSTOP, all its threads) once the given
  // numbers of requests have finished, so a fault made while it is stopped lands at a known
  // point of its progress, and wall time passes for it as for the servers. (Freezing it from
  // here when its progress bar showed a count was too coarse: a fast replay finishes hundreds
  // of requests between two redraws, and a loaded machine delays the freeze further.)
  // Waits for its next self-stop. False if it exited first or the deadline passed.
  bool reach_stop() {
    while (!stopped_) {
      if (exited_ || elapsed() > kReplayDeadlineS) return false;
      pump(20);
    }
    return true;
  }
  // Resumes a stopped replay.
  void thaw() {
    stopped_ = false;
    ::kill(pid_, SIGCONT);
  }

  // Waits for the exit, until the deadline; a replay still running then is killed (hung).
  // Returns the exit status, or -1 when killed or not exited normally.
  int wait_exit() {
    while (!exited_ && elapsed() < kReplayDeadlineS) pump(50);
    if (!exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      exited_ = true;
      hung_ = true;
      return -1;
    }
    while (pump(0)) {
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }
  bool hung() const { return hung_; }

 private:
  // One poll of both pipes (up to `ms`), then a reap check. True if it read anything.
  bool pump(int ms) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    bool got = false;
    if (::poll(fds, 2, ms) > 0) {
      got |= drain(out_fd_, &out_);
      got |= drain(err_fd_, &err_);
    }
    int status = 0;
    if (!exited_ && ::waitpid(pid_, &status, WNOHANG | WUNTRACED) == pid_) {
      if (WIFSTOPPED(status)) {
        stopped_ = true;
      } else {
        exited_ = true;
        status_ = status;
      }
    }
    return got;
  }

  static bool drain(int fd, std::string* to) {
    char buf[4096];
    bool got = false;
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        to->append(buf, size_t(n));
        got = true;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return got;
      }
    }
  }

  Clock::time_point start_;
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  int status_ = 0;
  bool exited_ = false, hung_ = false, stopped_ = false;
  std::string out_, err_;
};

// One command to a server on 127.0.0.1:port and its reply up to `end` (a plain socket: the
// test must not depend on the client libraries it is testing). "" on any failure.
std::string ask(int port, const std::string& command, const std::string& end) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(uint16_t(port));
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::send(fd, command.data(), command.size(), MSG_NOSIGNAL) == ssize_t(command.size())) {
    char buf[4096];
    while (reply.find(end) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, size_t(n));
    }
  }
  ::close(fd);
  return reply;
}

// Values the server holds now (memcached curr_items, redis DBSIZE): the replay's pages;
// -1 if the server did not answer.
long stored_values(const std::string& backend, int port) {
  if (backend == "memcached") {
    const std::string r = ask(port, "stats\r\n", "END\r\n");
    const size_t at = r.find("STAT curr_items ");
    return at == std::string::npos ? -1 : std::atol(r.c_str() + at + 16);
  }
  const std::string r = ask(port, "DBSIZE\r\n", "\r\n");
  return r.size() > 1 && r[0] == ':' ? std::atol(r.c_str() + 1) : -1;
}

// The replay's --config: the built-in tiny model plus the storage section's timeouts
// (--storage then names the servers and keeps these keys).
std::string write_config(const std::string& backend) {
  const std::string path = ::testing::TempDir() + "kvpool_replay_faults_" + backend + "_" +
                           std::to_string(::getpid()) + ".json";
  std::ofstream f(path);
  f << R"({"version": 1, "model": {"name": "replay-tiny", "num_layers": 1, "attention": "mha", "kv_heads": 1,)"
    << R"( "head_dim": 1}, "pool": {"device": "cpu", "kv_dtype": "f16", "page_size": 16},)"
    << R"( "prefix_cache": {"kind": "radix", "eviction": "lru"}, "storage": {"backend": ")" << backend
    << R"(", "timeout_ms": )" << kTimeoutMs
    << (backend == "memcached" ? R"(, "retry_timeout_s": )" + std::to_string(kMemcachedRetryS) : "") << "}}";
  return path;
}

// The run of replay.storage_file (a device pool and a host tier far smaller than the
// working set, so that storage serves hits) at page 256 instead of 64: a quarter of the
// pages to store, which makes the memcached runs 3-4x faster here; with a progress bar.
std::vector<std::string> replay_args(const std::string& config, const std::string& storage, const std::string& stops) {
  std::vector<std::string> a = {"--trace",  KVPOOL_REPLAY_TRACE, "--config", config, "--max-requests",
                                std::to_string(kRequests), "--capacity-tokens", "40k", "--host-capacity-tokens",
                                "100k", "--page-size", "256", "--prompts-only", "--concurrency", "4", "--json",
                                "--progress"};
  if (!storage.empty()) a.insert(a.end(), {"--storage", storage});
  if (!stops.empty()) a.insert(a.end(), {"--stop-at", stops});
  return a;
}

struct Report {
  bool parsed = false;
  std::string check;
  bool storage = false;
  double matched = 0, device_hits = 0, host_hits = 0, storage_hits = 0;
  double timeouts = 0, server_errors = 0, ejected = 0, put_errors = 0, get_errors = 0, failures = 0;
};

Report parse_report(const std::string& json) {
  Report r;
  cJSON* root = cJSON_Parse(json.c_str());
  if (root == nullptr) return r;
  const auto num = [&](const char* key) {
    const cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1.0;  // -1: missing, fails every bound below
  };
  const cJSON* check = cJSON_GetObjectItemCaseSensitive(root, "check");
  r.check = cJSON_IsString(check) ? check->valuestring : "";
  r.storage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "storage"));
  r.matched = num("matched_tokens");
  r.device_hits = num("device_hit_tokens");
  r.host_hits = num("host_hit_tokens");
  r.storage_hits = num("storage_hit_tokens");
  r.timeouts = num("storage_timeouts");
  r.server_errors = num("storage_server_errors");
  r.ejected = num("storage_servers_ejected");
  r.put_errors = num("storage_put_errors");
  r.get_errors = num("storage_get_errors");
  r.failures = num("storage_failures");
  r.parsed = r.matched >= 0 && r.device_hits >= 0 && r.host_hits >= 0 && r.storage_hits >= 0 && r.timeouts >= 0 &&
             r.server_errors >= 0 && r.ejected >= 0 && r.put_errors >= 0 && r.get_errors >= 0 && r.failures >= 0;
  cJSON_Delete(root);
  return r;
}

// Tokens the same run matches with no store at all (device and host tiers only): a run
// whose store fails may lose storage hits, never fall below this. Computed once.
double matched_without_storage() {
  static double matched = -1;
  if (matched < 0) {
    // The tiny model without a storage section (the faulted runs' config has one).
    const std::string plain = ::testing::TempDir() + "kvpool_replay_faults_plain_" + std::to_string(::getpid()) + ".json";
    std::ofstream(plain) << R"({"version": 1, "model": {"name": "replay-tiny", "num_layers": 1, "attention": "mha",)"
                         << R"( "kv_heads": 1, "head_dim": 1}, "pool": {"device": "cpu", "kv_dtype": "f16",)"
                         << R"( "page_size": 16}, "prefix_cache": {"kind": "radix", "eviction": "lru"}})";
    ReplayProcess replay(replay_args(plain, "", ""));
    EXPECT_EQ(replay.wait_exit(), 0) << replay.stderr_text();
    const Report r = parse_report(replay.stdout_text());
    EXPECT_TRUE(r.parsed) << replay.stdout_text();
    EXPECT_FALSE(r.storage);
    matched = r.matched;
    std::remove(plain.c_str());
  }
  return matched;
}

class ReplayFaults : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    backend_ = GetParam();
    std::string error;
    // memcached: two servers, the first is faulted and the second keeps serving its share
    // of the ring; redis: the one primary is faulted (nothing else serves).
    const int servers = backend_ == "memcached" ? 2 : 1;
    for (int i = 0; i < servers; ++i) {
      servers_.push_back(backend_ == "memcached" ? ServerProcess::memcached(&error) : ServerProcess::redis(&error));
      ASSERT_NE(servers_.back(), nullptr) << error;
    }
    spec_ = backend_ + ":";
    for (size_t i = 0; i < servers_.size(); ++i) spec_ += (i ? "," : "") + servers_[i]->address();
    config_ = write_config(backend_);
  }
  void TearDown() override { std::remove(config_.c_str()); }

  ServerProcess& faulted() { return *servers_[0]; }
  long stored() { return stored_values(backend_, faulted().port()); }

  // The replay's stop points: a fifth of its requests (the fault), and with `then_more` a
  // tenth more (the fault's end).
  static std::string stops(bool then_more) {
    return std::to_string(kFaultAt) + (then_more ? "," + std::to_string(kFaultAt + kFaultFor) : "");
  }

  // The replay stopped at a fifth of its requests, with pages on the server that is about to
  // fail (the fault lands while the store is in use, not before it was).
  void reach_first_fault(ReplayProcess& replay) {
    ASSERT_TRUE(replay.started());
    ASSERT_TRUE(replay.reach_stop()) << "replay ended or hung before the fault\n" << replay.stderr_text();
    EXPECT_GT(stored(), 0) << "the server got no pages before its fault";
  }

  // From the fault's start to its end: the replay runs a tenth of its requests against the
  // faulted server and stops again.
  void run_through_fault(ReplayProcess& replay, const char* what) {
    replay.thaw();
    ASSERT_TRUE(replay.reach_stop()) << "the replay ended or hung with the server " << what << "\n"
                                     << replay.stderr_text();
  }

  // Waits for the exit and checks the report: exit 0 within the deadline, kvpool_check ok,
  // hits by tier adding up, no fewer matched tokens than without a store. Returns it.
  Report finish(ReplayProcess& replay) {
    const int rc = replay.wait_exit();
    EXPECT_FALSE(replay.hung()) << "the replay hung: killed after " << kReplayDeadlineS << " s";
    EXPECT_EQ(rc, 0) << replay.stderr_text();
    const Report r = parse_report(replay.stdout_text());
    EXPECT_TRUE(r.parsed) << "not the expected --json report: " << replay.stdout_text();
    EXPECT_EQ(r.check, "ok");
    EXPECT_TRUE(r.storage);
    EXPECT_EQ(r.device_hits + r.host_hits + r.storage_hits, r.matched) << "hits by tier must add up";
    EXPECT_GE(r.matched, matched_without_storage()) << "a failing store loses storage hits only";
    EXPECT_GT(r.storage_hits, 0) << "the store served nothing even before the fault";
    std::printf("[ %s ] %.2f s: matched %.0f (device %.0f, host %.0f, storage %.0f; %.0f without a store); "
                "timeouts %.0f, server errors %.0f, ejected %.0f, put errors %.0f, get errors %.0f, failures %.0f\n",
                backend_.c_str(), replay.elapsed(), r.matched, r.device_hits, r.host_hits, r.storage_hits,
                matched_without_storage(), r.timeouts, r.server_errors, r.ejected, r.put_errors, r.get_errors,
                r.failures);
    return r;
  }

  std::string backend_, spec_, config_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

// Killed mid-replay (refused connections, a dead node ejected), then restarted empty on the
// same port: the replay goes on with misses, and the new server takes pages again.
TEST_P(ReplayFaults, ServerKilledAndRestarted) {
  ReplayProcess replay(replay_args(config_, spec_, stops(true)));
  ASSERT_NO_FATAL_FAILURE(reach_first_fault(replay));
  faulted().kill();
  ASSERT_NO_FATAL_FAILURE(run_through_fault(replay, "dead"));
  std::string error;
  ASSERT_TRUE(faulted().restart(&error)) << error;
  std::printf("[ %s ] killed for requests %d to %d\n", backend_.c_str(), kFaultAt, kFaultAt + kFaultFor);
  sleep_s(backoff_s(backend_));
  replay.thaw();
  const Report r = finish(replay);
  EXPECT_GT(r.server_errors + r.timeouts, 0) << "the dead server shows in the counters";
  EXPECT_GT(r.ejected, 0);
  // redis: the one primary is dead, so backups fail. memcached: whether a backup reached the
  // dead node before a get ejected it (then the ring sends everything to the live one) is
  // timing, not behaviour; the errors and the ejection above are what must show.
  if (backend_ == "redis") {
    EXPECT_GT(r.put_errors + r.failures, 0) << "backups to the dead server failed";
  }
  EXPECT_GT(stored(), 0) << "the restarted server took no pages";
}

// Stopped (accepts, never answers) for part of the run, then resumed: every wait ends at
// the timeout, the replay goes on, and the server takes pages again afterwards.
TEST_P(ReplayFaults, ServerStoppedThenResumed) {
  ReplayProcess replay(replay_args(config_, spec_, stops(true)));
  ASSERT_NO_FATAL_FAILURE(reach_first_fault(replay));
  faulted().pause();
  const auto stopped = Clock::now();
  ASSERT_NO_FATAL_FAILURE(run_through_fault(replay, "stopped"));
  faulted().resume();
  std::printf("[ %s ] stopped for %.2f s, requests %d to %d\n", backend_.c_str(), seconds_since(stopped), kFaultAt,
              kFaultAt + kFaultFor);
  // What the server holds once it has worked off what reached it while stopped.
  sleep_s(backoff_s(backend_));
  const long before = stored();
  replay.thaw();
  const Report r = finish(replay);
  EXPECT_GT(r.timeouts, 0) << "a stopped server shows as timeouts";
  EXPECT_GT(r.ejected, 0);
  EXPECT_GT(stored(), before) << "the resumed server took no pages";
}

// Stopped until the replay ends, then killed: the rest of the run, its final flush and the
// pool's destruction all wait at most a timeout per try.
TEST_P(ReplayFaults, ServerStoppedUntilTheEnd) {
  ReplayProcess replay(replay_args(config_, spec_, stops(false)));
  ASSERT_NO_FATAL_FAILURE(reach_first_fault(replay));
  faulted().pause();
  replay.thaw();
  const Report r = finish(replay);
  faulted().kill();
  EXPECT_GT(r.timeouts, 0) << "a stopped server shows as timeouts";
  EXPECT_GT(r.ejected, 0);
}

INSTANTIATE_TEST_SUITE_P(Servers, ReplayFaults, ::testing::Values("memcached", "redis"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
