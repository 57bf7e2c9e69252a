// The redis storage backend (lib/storage/redis_store.hpp) against bare hiredis:
// one get() of 64 pages of 8 MiB + 96 bytes, and the same keys read by a plain
// pipelined GET loop on one hiredis connection (append 64, read 64), with and
// without copying each value into its page buffer. Both run in the same process
// against one redis-server child (tests/support/server_process.hpp) on loopback;
// the last line is the backend's median time over the bare loop's, with copies
// (the same work: the pages end up in the caller's buffers) and without.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server_process.hpp"
#include "storage/redis_store.hpp"

namespace {

constexpr size_t kPages = 64;
constexpr size_t kPageBytes = (size_t(8) << 20) + 96;

struct Fixture {
  std::unique_ptr<kvtest::ServerProcess> server;
  std::unique_ptr<kvp::storage::BlobStore> store;
  std::vector<std::string> keys;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<uint8_t*> dst;
  std::vector<size_t> capacity;
  std::string error;

  Fixture() {
    server = kvtest::ServerProcess::redis(&error);
    if (!server) return;
    kvp::config::StorageConfig cfg;
    cfg.backend = "redis";
    cfg.servers = {server->address()};
    cfg.timeout_ms = 5000;
    const kvp::Status st = kvp::storage::open_redis_store(cfg, &store);
    if (!st.is_ok()) {
      error = st.message();
      return;
    }
    std::vector<uint8_t> value(kPageBytes);
    uint32_t x = 12345;
    for (uint8_t& b : value) b = uint8_t((x = x * 1664525u + 1013904223u) >> 24);
    std::vector<const uint8_t*> values;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < kPages; ++i) {
      char key[128];
      std::snprintf(key, sizeof(key), "kvp1-%032x-%064zx", 0xbe9c4u, i);
      keys.push_back(key);
      values.push_back(value.data());
      sizes.push_back(value.size());
    }
    std::vector<kvp::storage::BlobResult> out(kPages);
    store->put(keys.data(), values.data(), sizes.data(), kPages, out.data());
    for (kvp::storage::BlobResult r : out) {
      if (r != kvp::storage::BlobResult::kOk) error = "put failed";
    }
    bufs.assign(kPages, std::vector<uint8_t>(kPageBytes, 0));  // touched: no page faults in the timed loops
    for (auto& b : bufs) {
      dst.push_back(b.data());
      capacity.push_back(b.size());
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_BackendGet(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  std::vector<size_t> sizes(kPages);
  std::vector<kvp::storage::BlobResult> out(kPages);
  for (auto _ : state) {
    f.store->get(f.keys.data(), f.dst.data(), f.capacity.data(), kPages, sizes.data(), out.data());
    for (size_t i = 0; i < kPages; ++i) {
      if (out[i] != kvp::storage::BlobResult::kOk || sizes[i] != kPageBytes) {
        state.SkipWithError("backend get failed");
        return;
      }
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kPages * kPageBytes));
}

void BM_HiredisPipelinedGet(benchmark::State& state) {
  Fixture& f = fixture();
  if (!f.error.empty()) {
    state.SkipWithError(f.error.c_str());
    return;
  }
  const bool copy = state.range(0) != 0;
  redisContext* c = redisConnect("127.0.0.1", f.server->port());
  if (c == nullptr || c->err != 0) {
    state.SkipWithError("connect failed");
    if (c != nullptr) redisFree(c);
    return;
  }
  for (auto _ : state) {
    for (const std::string& k : f.keys) redisAppendCommand(c, "GET %b", k.data(), k.size());
    for (size_t i = 0; i < kPages; ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK || static_cast<redisReply*>(r)->type != REDIS_REPLY_STRING) {
        state.SkipWithError("GET failed");
        break;
      }
      const redisReply* reply = static_cast<redisReply*>(r);
      if (copy) std::memcpy(f.dst[i], reply->str, size_t(reply->len));
      benchmark::DoNotOptimize(reply->str);
      freeReplyObject(r);
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations() * kPages * kPageBytes));
  redisFree(c);
}

BENCHMARK(BM_BackendGet)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_HiredisPipelinedGet)->ArgName("copy")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The console output plus, at the end, the backend's time over the bare loop's.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type == Run::RT_Iteration && r.iterations > 0) {
        seconds_[r.benchmark_name()].push_back(r.real_accumulated_time / double(r.iterations));
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    const double backend = median("BM_BackendGet/real_time");
    const double bare = median("BM_HiredisPipelinedGet/copy:1/real_time");
    const double bare_nocopy = median("BM_HiredisPipelinedGet/copy:0/real_time");
    if (backend > 0 && bare > 0 && bare_nocopy > 0) {
      std::printf("median ratio backend/bare-with-copy %.3f, backend/bare-without-copy %.3f\n", backend / bare,
                  backend / bare_nocopy);
    }
  }

 private:
  double median(const std::string& name) {
    auto it = seconds_.find(name);
    if (it == seconds_.end() || it->second.empty()) return 0;
    std::vector<double>& v = it->second;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  }

  std::map<std::string, std::vector<double>> seconds_;  // seconds per iteration of each repetition
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
