// The storage tier's file backend against plain file I/O (issue 13's goal: a
// put and a get of 8 MiB pages run at >= 80 % of a plain sequential write and
// read of the same bytes in the same directory).
//
//   write/plain                   open(O_CREAT|O_TRUNC), write(), close() of each page to its own file
//   write/file_store              BlobStore::put of the same sealed pages (temp file + rename)
//   write/file_store+seal_page    seal_page (XXH3 of the payload) over a finished buffer, then put
//   read/plain                    open(), read() of the whole file, close()
//   read/file_store               BlobStore::get into one buffer
//   read/file_store+check_page    get then check_page over a finished buffer
//   read/file_store+into_host     get into a buffer, then check the header and copy the
//                                 payload into a host-tier page, hashing it on the way
//                                 (scatter_page_hashed): the tier's path for backends that
//                                 do not stream (memcached, redis, callbacks)
//   tier_write, tier_read         the tier's real path for host-tier pages, each iteration
//                                 against plain I/O of the same bytes
//                                 (bench_storage_file_tier.cpp)
//
// Every row moves `pages` pages of 8 MiB per iteration (manual time: only the
// I/O is timed; the files of a write row are removed between iterations, so each
// write creates new files, as a put does). The directory: $KVBENCH_STORAGE_DIR,
// else /tmp (a fresh subdirectory, removed at the end). After the runs a table
// gives each backend row's throughput as a fraction of its plain row, by real
// time and by process CPU time. A steady comparison:
//   bench_storage_file --benchmark_repetitions=10 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "host/host_geometry.hpp"
#include "storage/file_store.hpp"
#include "storage/page_codec.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"

// bench_storage_file_tier.cpp: the tier's real path (host pages <-> files) against plain I/O.
void register_tier_path_benchmarks(const std::string& dir);

namespace {

using Clock = std::chrono::steady_clock;
using kvp::storage::BlobResult;
using kvp::storage::BlobStore;

constexpr size_t kPageBytes = 8u << 20;
constexpr size_t kPayload = kPageBytes - kvp::storage::kPageHeaderBytes;

struct Bench {
  std::string dir;
  std::unique_ptr<BlobStore> store;
  kvp::storage::Fingerprint fp = kvp::storage::fingerprint_of("bench_storage_file");
  std::vector<std::vector<uint8_t>> pages;
  std::vector<kvp::cache::Digest> digests;
  std::vector<std::string> keys;
  std::vector<uint8_t> read_buffer = std::vector<uint8_t>(kPageBytes);
  std::string error;

  // Pages [0, n): sealed, with their keys.
  void ensure_pages(size_t n) {
    while (pages.size() < n) {
      const uint32_t i = uint32_t(pages.size());
      kvp::cache::Digest d{};
      for (size_t b = 0; b < d.size(); ++b) d[b] = uint8_t(i * 37 + b);
      std::vector<uint8_t> page(kPageBytes);
      uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
      for (size_t b = kvp::storage::kPageHeaderBytes; b + 8 <= page.size(); b += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        std::memcpy(page.data() + b, &x, 8);
      }
      kvp::storage::seal_page(page.data(), kPayload, fp, d);
      pages.push_back(std::move(page));
      digests.push_back(d);
      keys.push_back(kvp::storage::page_key(fp, d));
    }
  }
  std::string plain_path(size_t i) const { return dir + "/plain-" + std::to_string(i) + ".dat"; }
};

Bench& bench() {
  static Bench b;
  return b;
}

bool write_plain(const std::string& path, const std::vector<uint8_t>& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  return ::close(fd) == 0 && done == data.size();
}

bool read_plain(const std::string& path, uint8_t* dst, size_t n) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, dst + done, n - done);
    if (r <= 0) break;
    done += size_t(r);
  }
  ::close(fd);
  return done == n;
}

enum class Variant { kPlain, kStore, kStoreFormat, kStoreIntoHost };

// A host tier of one page whose payload is exactly the bench pages' (one per-page row of
// kPayload bytes): where kStoreIntoHost lands its pages.
struct OnePageHost {
  kvp::host::HostGeometry g;
  std::vector<uint8_t> bytes;
  OnePageHost() {
    g.layout = kvp::host::HostLayout::kPageFirst;
    g.page_size = 1;
    g.pages = 1;
    g.layers = 1;
    g.parts.resize(1);
    g.parts[0].item_bytes = kPayload;
    g.parts[0].per_page = true;
    (void)kvp::host::finish_geometry(&g);
    bytes.assign(g.bytes, uint8_t(1));  // touched: no page faults while timed
  }
};

void BM_Write(benchmark::State& state, Variant variant) {
  Bench& b = bench();
  const size_t n = size_t(state.range(0));
  b.ensure_pages(n);
  std::vector<const uint8_t*> values(n);
  std::vector<size_t> sizes(n, kPageBytes);
  std::vector<BlobResult> out(n);
  for (size_t i = 0; i < n; ++i) values[i] = b.pages[i].data();
  // The read rows leave their files: start from an empty directory.
  for (size_t i = 0; i < n; ++i) ::unlink(b.plain_path(i).c_str());
  if (!b.store->clear().is_ok()) {
    state.SkipWithError("clear failed");
    return;
  }
  const uint64_t existing_before = b.store->stats().put_existing;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    bool ok = true;
    if (variant == Variant::kPlain) {
      for (size_t i = 0; i < n; ++i) ok = write_plain(b.plain_path(i), b.pages[i]) && ok;
    } else {
      if (variant == Variant::kStoreFormat) {
        for (size_t i = 0; i < n; ++i) kvp::storage::seal_page(b.pages[i].data(), kPayload, b.fp, b.digests[i]);
      }
      b.store->put(b.keys.data(), values.data(), sizes.data(), n, out.data());
      for (size_t i = 0; i < n; ++i) ok = ok && out[i] == BlobResult::kOk;
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!ok) {
      state.SkipWithError("a write failed");
      break;
    }
    // New files next time (a put of an existing key would be skipped).
    if (variant == Variant::kPlain) {
      for (size_t i = 0; i < n; ++i) ::unlink(b.plain_path(i).c_str());
    } else if (!b.store->clear().is_ok()) {
      state.SkipWithError("clear failed");
      break;
    }
  }
  if (b.store->stats().put_existing != existing_before) state.SkipWithError("a put was skipped");
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * kPageBytes));
}

void BM_Read(benchmark::State& state, Variant variant) {
  Bench& b = bench();
  const size_t n = size_t(state.range(0));
  b.ensure_pages(n);
  // The files to read, written once (kept in the page cache, as a plain reader's would be).
  for (size_t i = 0; i < n; ++i) {
    bool ok = true;
    if (variant == Variant::kPlain) {
      ok = write_plain(b.plain_path(i), b.pages[i]);
    } else {
      const uint8_t* v = b.pages[i].data();
      BlobResult r = BlobResult::kError;
      b.store->put(&b.keys[i], &v, &kPageBytes, 1, &r);
      ok = r == BlobResult::kOk;
    }
    if (!ok) {
      state.SkipWithError("setup write failed");
      return;
    }
  }
  uint8_t* dst = b.read_buffer.data();
  const size_t capacity = b.read_buffer.size();
  std::unique_ptr<OnePageHost> host;
  if (variant == Variant::kStoreIntoHost) host = std::make_unique<OnePageHost>();
  for (auto _ : state) {
    const auto t0 = Clock::now();
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      if (variant == Variant::kPlain) {
        ok = read_plain(b.plain_path(i), dst, kPageBytes) && ok;
      } else {
        size_t size = 0;
        BlobResult r = BlobResult::kError;
        b.store->get(&b.keys[i], &dst, &capacity, 1, &size, &r);
        ok = ok && r == BlobResult::kOk && size == kPageBytes;
        if (variant == Variant::kStoreFormat) {
          ok = ok && kvp::storage::check_page(dst, size, b.fp, b.digests[i], kPayload) ==
                         kvp::storage::PageCheck::kOk;
        }
        if (variant == Variant::kStoreIntoHost) {  // as StorageTier::run_prefetch does
          uint64_t expected = 0;
          ok = ok && kvp::storage::check_page_header(dst, size, b.fp, b.digests[i], kPayload, &expected) ==
                         kvp::storage::PageCheck::kOk;
          ok = ok && kvp::storage::scatter_page_hashed(host->g, host->bytes.data(), 0,
                                                       dst + kvp::storage::kPageHeaderBytes) == expected;
        }
      }
      benchmark::DoNotOptimize(dst);
      benchmark::ClobberMemory();
    }
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    if (!ok) {
      state.SkipWithError("a read failed");
      break;
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * kPageBytes));
}

// The console table, then each backend row's throughput as a fraction of its
// plain row (medians when --benchmark_repetitions > 1).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      if (r.run_name.str().compare(0, 5, "tier_") == 0) {  // ratios of the same run, as counters
        const auto ratio = r.counters.find("ratio"), cpu = r.counters.find("ratio_cpu");
        if (ratio == r.counters.end() || cpu == r.counters.end()) continue;
        Ratios& t = tier_[r.run_name.str()];
        if (r.run_type == Run::RT_Aggregate) {
          if (r.aggregate_name == "median") t.median = {ratio->second.value, cpu->second.value};
        } else {
          t.sum.first += ratio->second.value;
          t.sum.second += cpu->second.value;
          t.runs += 1;
        }
        continue;
      }
      Times& t = times_[r.run_name.str()];
      if (r.run_type == Run::RT_Aggregate) {
        if (r.aggregate_name == "median") t.median = {r.GetAdjustedRealTime(), r.GetAdjustedCPUTime()};
      } else {
        t.sum.first += r.GetAdjustedRealTime();
        t.sum.second += r.GetAdjustedCPUTime();
        t.runs += 1;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Real time is what the goal is about; process CPU time (user + system: the
  // kernel's copies) is steadier on a loaded machine.
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nthroughput of the file backend / plain file I/O, same bytes, same directory\n"
                "(medians with --benchmark_repetitions > 1, else means):\n");
    std::printf("  %-5s %-22s %-22s %8s %8s\n", "op", "variant", "args", "real", "cpu");
    for (const char* op : {"write", "read"}) {
      for (const char* what : {"file_store", op[0] == 'w' ? "file_store+seal_page" : "file_store+check_page",
                               op[0] == 'w' ? "" : "file_store+into_host"}) {
        if (*what == '\0') continue;
        for (const auto& kv : times_) {
          const std::string prefix = std::string(op) + "/" + what + "/";
          if (kv.first.compare(0, prefix.size(), prefix) != 0) continue;
          const std::string args = kv.first.substr(prefix.size());
          const auto plain = times_.find(std::string(op) + "/plain/" + args);
          if (plain == times_.end() || !kv.second.known() || !plain->second.known()) continue;
          const std::pair<double, double> mine = kv.second.time(), base = plain->second.time();
          std::printf("  %-5s %-22s %-22s %7.1f%% %7.1f%%\n", op, what, args.c_str(), 100.0 * base.first / mine.first,
                      100.0 * base.second / mine.second);
        }
      }
    }
    std::printf("\nthe tier's path (host pages <-> checked stored pages <-> files) / plain file I/O of the same\n"
                "bytes, both in every iteration (medians of the ratios with --benchmark_repetitions > 1, else means):\n");
    std::printf("  %-56s %8s %8s\n", "row", "real", "cpu");
    for (const auto& kv : tier_) {
      const std::pair<double, double> r = kv.second.median.first > 0
                                               ? kv.second.median
                                               : std::make_pair(kv.second.sum.first / kv.second.runs,
                                                                kv.second.sum.second / kv.second.runs);
      std::printf("  %-56s %7.1f%% %7.1f%%\n", kv.first.c_str(), 100.0 * r.first, 100.0 * r.second);
    }
  }

 private:
  struct Times {
    std::pair<double, double> sum{0, 0}, median{0, 0};  // (real, cpu) per iteration
    int runs = 0;
    bool known() const { return runs > 0 || median.first > 0; }
    std::pair<double, double> time() const {
      if (median.first > 0) return median;
      return {sum.first / runs, sum.second / runs};
    }
  };
  std::map<std::string, Times> times_;
  struct Ratios {
    std::pair<double, double> sum{0, 0}, median{0, 0};  // (ratio, ratio_cpu)
    int runs = 0;
  };
  std::map<std::string, Ratios> tier_;
};

}  // namespace

int main(int argc, char** argv) {
  // A warm-up of 0.2 s per row unless the command line chooses one (the first
  // writes of a run fault in page-cache memory that later ones reuse).
  std::vector<char*> args(argv, argv + argc);
  static char warmup[] = "--benchmark_min_warmup_time=0.2";
  bool has_warmup = false;
  for (int i = 1; i < argc; ++i) has_warmup = has_warmup || std::strncmp(argv[i], "--benchmark_min_warmup_time", 27) == 0;
  if (!has_warmup) args.insert(args.begin() + 1, warmup);
  int n = int(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  Bench& b = bench();
  const char* base = std::getenv("KVBENCH_STORAGE_DIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/kvpool-bench-file-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "bench_storage_file: cannot create a directory under %s\n", base ? base : "/tmp");
    return 1;
  }
  b.dir = tmpl;
  kvp::config::StorageConfig cfg;
  cfg.enabled = true;
  cfg.path = b.dir;
  const kvp::Status st = kvp::storage::open_file_store(cfg, &b.store);
  if (!st.is_ok()) {
    std::fprintf(stderr, "bench_storage_file: %s\n", st.message().c_str());
    return 1;
  }
  struct Row {
    const char* name;
    void (*fn)(benchmark::State&, Variant);
    Variant variant;
  };
  const Row rows[] = {
      {"write/plain", BM_Write, Variant::kPlain},
      {"write/file_store", BM_Write, Variant::kStore},
      {"write/file_store+seal_page", BM_Write, Variant::kStoreFormat},
      {"read/plain", BM_Read, Variant::kPlain},
      {"read/file_store", BM_Read, Variant::kStore},
      {"read/file_store+check_page", BM_Read, Variant::kStoreFormat},
      {"read/file_store+into_host", BM_Read, Variant::kStoreIntoHost},
  };
  for (const Row& row : rows) {
    benchmark::RegisterBenchmark(row.name, row.fn, row.variant)
        ->ArgName("pages")
        ->Arg(8)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  register_tier_path_benchmarks(b.dir);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  b.store.reset();
  nftw(
      b.dir.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16,
      FTW_DEPTH | FTW_PHYS);
  return 0;
}
