// Real storage servers for the storage tier's tests: starts memcached or
// redis-server as a child process on a free loopback port, waits until it
// accepts connections, and lets a test stop (SIGSTOP: the socket still accepts
// but nothing answers), resume, kill and restart it. No mocks: the backends are
// tested against the servers Debian ships (scripts/setup.sh installs them).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kvtest {

class ServerProcess {
 public:
  // A port on 127.0.0.1 that nothing listens on right now (the kernel's choice for port 0).
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    if (fd >= 0) ::close(fd);
    return port;
  }

  // Whether 127.0.0.1:port accepts a TCP connection now.
  static bool accepts(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(fd);
    return ok;
  }

  // memcached on a free port (item limit `item_limit` bytes, e.g. "1m"), or nullptr with *error set.
  static std::unique_ptr<ServerProcess> memcached(std::string* error, const std::string& item_limit = "1m",
                                                  int port = 0) {
    if (port == 0) port = free_port();
    // -u root: memcached refuses to run as root without it (CI runs as root); -U 0: no UDP.
    return start({"memcached", "-l", "127.0.0.1", "-p", std::to_string(port), "-U", "0", "-m", "256", "-I",
                  item_limit, "-u", "root"},
                 port, error);
  }

  // redis-server on a free port, no persistence, or nullptr with *error set. `extra`: more arguments
  // (e.g. {"--replicaof", "127.0.0.1", "6379"}).
  static std::unique_ptr<ServerProcess> redis(std::string* error, const std::vector<std::string>& extra = {},
                                              int port = 0) {
    if (port == 0) port = free_port();
    std::vector<std::string> argv = {"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--protected-mode", "no"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return start(argv, port, error);
  }

  // Runs argv (argv[0] found on PATH) and waits up to 10 s for it to accept on `port`.
  static std::unique_ptr<ServerProcess> start(const std::vector<std::string>& argv, int port, std::string* error) {
    std::unique_ptr<ServerProcess> p(new ServerProcess(argv, port));
    if (!p->launch(error)) return nullptr;
    return p;
  }

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  ~ServerProcess() { kill(); }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }

  // SIGSTOP: the kernel still completes TCP handshakes (backlog), but the server never answers.
  void pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }
  // SIGKILL and reap; the port is free again afterwards.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  // Starts the same command on the same port again (an empty server).
  bool restart(std::string* error) {
    kill();
    return launch(error);
  }

 private:
  ServerProcess(std::vector<std::string> argv, int port) : argv_(std::move(argv)), port_(port) {}

  bool launch(std::string* error) {
    if (port_ <= 0) {
      *error = "no free loopback port";
      return false;
    }
    std::vector<char*> args;
    for (std::string& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    std::fflush(nullptr);  // else the child's freopen writes the parent's buffered output a second time
    const pid_t pid = ::fork();
    if (pid < 0) {
      *error = "fork failed";
      return false;
    }
    if (pid == 0) {
      // Child: quiet, and its own process group so a test runner's signals do not reach it twice.
      ::setpgid(0, 0);
      if (freopen("/dev/null", "w", stdout) == nullptr || freopen("/dev/null", "w", stderr) == nullptr) _exit(126);
      ::execvp(args[0], args.data());
      _exit(127);
    }
    pid_ = pid;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (accepts(port_)) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = argv_[0] + " exited at start (status " + std::to_string(status) + "); is it installed?";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill();
    *error = argv_[0] + " did not accept on port " + std::to_string(port_) + " within 10 s";
    return false;
  }

  std::vector<std::string> argv_;
  int port_;
  pid_t pid_ = -1;
};

}  // namespace kvtest
