// The storage tier's real path on the file backend against plain file I/O of the same
// bytes (issue 13, item 6): host-tier pages -> header + checksum -> files, and files ->
// checked -> host-tier pages, as StorageTier runs them (its backup and prefetch
// threads), for one and for eight 8 MiB pages of Llama-3.1-8B's KV (32 layers, K and
// V rows of 8 heads x 128 bf16, page 64: 8 MiB of payload, 96 bytes of header).
//
//   tier_write/layout:L/pages:N   StorageTier::backup of N host pages until finished,
//                                 against open(O_CREAT|O_TRUNC) + write() + close() of
//                                 the same stored bytes (sealed once at setup) to N files
//   tier_read/layout:L/pages:N    StorageTier::prefetch of the N stored pages into N other
//                                 host pages until landed, against open() + read() +
//                                 close() of the N plain files into N buffers
//
// Both sides of a row run in every iteration, in alternating order, in the same
// directory; the time of each is measured separately (wall and process CPU time,
// which includes the tier's threads). Page cache: a write row removes both sides'
// files between iterations (untimed), so each writes new files; a read row reads
// files written at its setup, so both read from the page cache. Manual time is the
// tier's; the counters give throughputs and ratio = plain time / tier time (the
// goal: >= 0.80), ratio_cpu the same by CPU time. L: 0 layer_first, 1 page_first,
// 2 page_first_direct. S: 1 the file backend as the tier uses it (streamed: host
// pages straight to and from the files), 0 the same backend with its streamed calls
// hidden, so that the tier stages pages in memory as it does for memcached and redis
// (and as it did for files before): the before/after of the same run. P (tier_read,
// streamed): 1 each page is hashed on the tier's PayloadHasher thread while the rest of it
// is read (page_stream.hpp; StorageTier::set_pipelined_reads), 0 read, then hashed, on the
// prefetch thread: both in the same run. M (tier_read, streamed): 1 the file backend copies each
// cached page file from a mapping, hashing each 4 KiB piece right after its copy
// (storage.mapped_reads, the default; P then does not matter), 0 it reads with preadv.
// Mapped files and staged values (S 0) of 2 MiB and more are copied by the prefetch thread
// and the tier's SegmentCopier thread together (StorageTier::set_segment_copies, the
// default; segment_copier.hpp).
//
//   tier_read_cold/...            tier_read with the destinations of both sides rotating
//                                 over kColdRotations sets (128 MiB of destination pages per
//                                 side for one page), so that neither side reads into memory
//                                 still in the cache. In tier_read the plain side reads into
//                                 the same buffer every iteration, which stays cached; a
//                                 prefetch's host pages are not the ones it wrote last time.
//                                 A supplementary reference, not the goal's (docs/performance.md,
//                                 stop 26).
//   tier_read_alone/...           tier_read's staged and mapped rows with segment copies
//                                 off: the prefetch thread copies alone (before/after).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "../support/unstreamed_store.hpp"
#include "host/host_geometry.hpp"
#include "storage/file_store.hpp"
#include "storage/page_codec.hpp"
#include "storage/page_format.hpp"
#include "storage/page_key.hpp"
#include "storage/storage_tier.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using kvp::host::HostLayout;

double process_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

std::string g_dir;  // set by register_tier_path_benchmarks

// tier_read_cold: destination sets per side, each side's sets together well past what this
// project's 2-core VM keeps in its caches (64 MiB of destinations already did not stay there).
constexpr size_t kColdRotations = 16;

bool write_file(const std::string& path, const uint8_t* data, size_t n) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, data + done, n - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  return ::close(fd) == 0 && done == n;
}

bool read_file(const std::string& path, uint8_t* dst, size_t n) {
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

// One row's world: a host buffer of N sources and R sets of N prefetch destinations, a
// StorageTier on a file store in the bench directory, the stored bytes of the N source
// pages for the plain side, and R sets of N buffers it reads into (R = 1 but for the
// tier_read_cold rows).
struct World {
  kvp::host::HostGeometry g;
  std::vector<uint8_t> host;
  std::unique_ptr<kvp::storage::StorageTier> tier;
  kvp::storage::Fingerprint fp = kvp::storage::fingerprint_of("bench_storage_file tier path");
  std::vector<kvp::cache::Digest> digests;
  std::vector<int64_t> sources;
  std::vector<std::vector<int64_t>> destinations;  // per set
  std::vector<std::vector<uint8_t>> stored;  // the sealed pages, byte for byte what the tier writes
  std::vector<std::vector<std::vector<uint8_t>>> plain_dst;  // per set, per page
  size_t stored_bytes = 0;
  std::string error;

  World(HostLayout layout, size_t n, bool streamed, bool pipelined = false, bool mapped = false, size_t sets = 1,
        bool copies = true) {
    g.layout = layout;
    g.page_size = 64;
    g.layers = 32;
    g.pages = n + sets * n;
    g.parts.resize(2);  // K, V: 8 heads x 128 bf16 per token and layer
    for (auto& part : g.parts) {
      part.item_bytes = 8 * 128 * 2;
      part.heads = 8;
    }
    error = kvp::host::finish_geometry(&g);
    if (!error.empty()) return;
    host.resize(g.bytes);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t b = 0; b + 8 <= host.size(); b += 8) {  // every byte touched: no page faults while timed
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(host.data() + b, &x, 8);
    }
    const uint64_t payload = kvp::storage::page_payload_bytes(g);
    stored_bytes = kvp::storage::stored_page_bytes(payload);
    destinations.resize(sets);
    plain_dst.resize(sets);
    for (size_t s = 0; s < sets; ++s) {
      for (size_t i = 0; i < n; ++i) {
        destinations[s].push_back(int64_t(n + s * n + i));
        plain_dst[s].emplace_back(stored_bytes, uint8_t(1));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      kvp::cache::Digest d{};
      for (size_t b = 0; b < d.size(); ++b) d[b] = uint8_t(i * 41 + b + size_t(layout) * 7);
      digests.push_back(d);
      sources.push_back(int64_t(i));
      std::vector<uint8_t> page(stored_bytes);
      const uint64_t hash = kvp::storage::gather_page_hashed(g, host.data(), int64_t(i), page.data() + 96);
      kvp::storage::seal_page_hashed(page.data(), payload, hash, fp, d);
      stored.push_back(std::move(page));
    }
    kvp::config::StorageConfig cfg;
    cfg.enabled = true;
    cfg.path = g_dir;
    cfg.mapped_reads = mapped;
    std::unique_ptr<kvp::storage::BlobStore> store;
    const kvp::Status st = kvp::storage::open_file_store(cfg, &store);
    if (!st.is_ok()) {
      error = st.message();
      return;
    }
    if (!streamed) store = std::make_unique<kvtest::UnstreamedStore>(std::move(store));
    tier = std::make_unique<kvp::storage::StorageTier>(std::move(store), g, host.data());
    tier->set_pipelined_reads(pipelined);
    tier->set_segment_copies(copies);
    this->pipelined = pipelined;
    this->mapped = mapped;
  }
  bool pipelined = false, mapped = false;
  std::string plain_path(size_t i) const { return g_dir + "/tier-plain-" + std::to_string(i) + ".dat"; }
};

HostLayout layout_of(int64_t arg) {
  return arg == 0 ? HostLayout::kLayerFirst : arg == 1 ? HostLayout::kPageFirst : HostLayout::kPageFirstDirect;
}

// Wall and CPU seconds of one side of a row.
struct Side {
  double wall = 0, cpu = 0;
  template <class Fn>
  bool time(Fn&& fn) {
    const auto t0 = Clock::now();
    const double c0 = process_cpu_s();
    const bool ok = fn();
    cpu += process_cpu_s() - c0;
    const double w = std::chrono::duration<double>(Clock::now() - t0).count();
    wall += w;
    last = w;
    return ok;
  }
  double last = 0;
};

void report(benchmark::State& state, const World& w, const Side& plain, const Side& tier, size_t n) {
  const double bytes = double(state.iterations()) * double(n * w.stored_bytes);
  state.SetLabel(std::string(kvp::host::host_layout_name(w.g.layout)) +
                 (w.tier->store().streams()
                      ? (w.mapped ? " streamed mapped" : w.pipelined ? " streamed pipelined" : " streamed")
                      : " staged"));
  state.SetBytesProcessed(int64_t(bytes));
  if (plain.wall <= 0 || tier.wall <= 0) return;
  state.counters["plain_GBps"] = bytes / plain.wall / 1e9;
  state.counters["tier_GBps"] = bytes / tier.wall / 1e9;
  state.counters["ratio"] = plain.wall / tier.wall;
  state.counters["ratio_cpu"] = plain.cpu / tier.cpu;
}

void BM_TierWrite(benchmark::State& state) {
  const size_t n = size_t(state.range(1));
  World w(layout_of(state.range(0)), n, state.range(2) != 0);
  if (!w.error.empty()) {
    state.SkipWithError(w.error.c_str());
    return;
  }
  kvp::storage::StorageTier& tier = *w.tier;
  Side plain, mine;
  std::vector<uint64_t> finished;
  uint64_t iteration = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) ::unlink(w.plain_path(i).c_str());
    if (!tier.store().clear().is_ok()) {
      state.SkipWithError("clear failed");
      break;
    }
    const uint64_t stored_before = tier.store().stats().puts;
    const auto run_plain = [&] {
      return plain.time([&] {
        bool ok = true;
        for (size_t i = 0; i < n; ++i) ok = write_file(w.plain_path(i), w.stored[i].data(), w.stored_bytes) && ok;
        return ok;
      });
    };
    const auto run_tier = [&] {
      return mine.time([&] {
        tier.backup(w.sources, w.digests, w.fp);
        tier.wait_idle();
        finished.clear();
        tier.take_finished_backups(&finished);
        return finished.size() == 1;
      });
    };
    const bool ok = (iteration++ % 2 == 0) ? run_plain() && run_tier() : run_tier() && run_plain();
    state.SetIterationTime(mine.last);
    if (!ok || tier.store().stats().puts != stored_before + n) {
      state.SkipWithError("a write failed");
      break;
    }
  }
  // The tier wrote exactly the plain side's bytes.
  for (size_t i = 0; i < n && !state.error_occurred(); ++i) {
    std::vector<uint8_t> back(w.stored_bytes + 1);
    const std::string key = kvp::storage::page_key(w.fp, w.digests[i]);
    uint8_t* dst = back.data();
    const size_t cap = back.size();
    size_t size = 0;
    kvp::storage::BlobResult r = kvp::storage::BlobResult::kError;
    tier.store().get(&key, &dst, &cap, 1, &size, &r);
    if (r != kvp::storage::BlobResult::kOk || size != w.stored_bytes ||
        std::memcmp(back.data(), w.stored[i].data(), size) != 0) {
      state.SkipWithError("the stored page differs from seal_page's");
    }
  }
  for (size_t i = 0; i < n; ++i) ::unlink(w.plain_path(i).c_str());
  (void)tier.store().clear();
  report(state, w, plain, mine, n);
}

// `sets`: destination sets both sides rotate over (1: tier_read, kColdRotations: tier_read_cold).
// `copies`: StorageTier::set_segment_copies (false: tier_read_alone).
void BM_TierRead(benchmark::State& state, size_t sets, bool copies) {
  const size_t n = size_t(state.range(1));
  World w(layout_of(state.range(0)), n, state.range(2) != 0, state.range(3) != 0, state.range(4) != 0, sets, copies);
  if (!w.error.empty()) {
    state.SkipWithError(w.error.c_str());
    return;
  }
  kvp::storage::StorageTier& tier = *w.tier;
  // The files to read, written once by each side (both in the page cache).
  (void)tier.store().clear();
  tier.backup(w.sources, w.digests, w.fp);
  tier.wait_idle();
  std::vector<uint64_t> finished;
  tier.take_finished_backups(&finished);
  bool ok = tier.stats().backup_pages == n;
  for (size_t i = 0; i < n; ++i) ok = write_file(w.plain_path(i), w.stored[i].data(), w.stored_bytes) && ok;
  if (!ok) {
    state.SkipWithError("setup write failed");
    return;
  }
  Side plain, mine;
  std::vector<int64_t> released;
  uint64_t iteration = 0;
  for (auto _ : state) {
    const size_t set = size_t(iteration % sets);
    const auto run_plain = [&] {
      return plain.time([&] {
        bool good = true;
        for (size_t i = 0; i < n; ++i) {
          good = read_file(w.plain_path(i), w.plain_dst[set][i].data(), w.stored_bytes) && good;
        }
        return good;
      });
    };
    const auto run_tier = [&] {
      return mine.time([&] {
        kvp::storage::StorageTier::StagedPrefetch staged = tier.stage_prefetch(w.digests, w.fp, 1);
        std::copy(w.destinations[set].begin(), w.destinations[set].end(), staged.pages);
        const uint64_t id = tier.commit_prefetch(std::move(staged));
        tier.wait_idle();
        const size_t landed = tier.finish_prefetch(id);
        released.clear();
        tier.take_released(&released);
        return landed == n;
      });
    };
    ok = (iteration++ % 2 == 0) ? run_plain() && run_tier() : run_tier() && run_plain();
    state.SetIterationTime(mine.last);
    if (!ok) {
      state.SkipWithError("a read failed");
      break;
    }
  }
  // The host pages of every set used now hold the stored payloads.
  std::vector<uint8_t> payload(w.stored_bytes - 96);
  for (size_t s = 0; s < std::min<uint64_t>(sets, iteration) && !state.error_occurred(); ++s) {
    for (size_t i = 0; i < n && !state.error_occurred(); ++i) {
      kvp::storage::gather_page_hashed(w.g, w.host.data(), w.destinations[s][i], payload.data());
      if (std::memcmp(payload.data(), w.stored[i].data() + 96, payload.size()) != 0) {
        state.SkipWithError("a prefetched page differs from the stored one");
      }
    }
  }
  for (size_t i = 0; i < n; ++i) ::unlink(w.plain_path(i).c_str());
  (void)tier.store().clear();
  report(state, w, plain, mine, n);
}

}  // namespace

// Called by bench_storage_file's main with its directory.
void register_tier_path_benchmarks(const std::string& dir) {
  g_dir = dir;
  benchmark::RegisterBenchmark("tier_write", BM_TierWrite)
      ->ArgNames({"layout", "pages", "streamed"})
      ->ArgsProduct({{0, 1, 2}, {1, 8}, {0, 1}})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  // Reads: staged, streamed (read then hash), streamed and pipelined (hash beside the reads),
  // streamed from a mapping of the cached file (copy and hash piece by piece; the default).
  benchmark::RegisterBenchmark("tier_read", BM_TierRead, size_t(1), true)
      ->ArgNames({"layout", "pages", "streamed", "pipelined", "mapped"})
      ->Apply([](benchmark::internal::Benchmark* b) {
        for (const int64_t layout : {0, 1, 2}) {
          for (const int64_t pages : {1, 8}) {
            for (const auto& how : {std::array<int64_t, 3>{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 0, 1}}) {
              b->Args({layout, pages, how[0], how[1], how[2]});
            }
          }
        }
      })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  // One page, streamed from a mapping (the default path on this VM), into destinations that
  // are not in the cache, on both sides.
  benchmark::RegisterBenchmark("tier_read_cold", BM_TierRead, kColdRotations, true)
      ->ArgNames({"layout", "pages", "streamed", "pipelined", "mapped"})
      ->ArgsProduct({{0, 1, 2}, {1}, {1}, {0}, {1}})
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  // The rows a SegmentCopier serves (mapped files, staged values), with segment copies off:
  // the prefetch thread copies alone, as before them.
  benchmark::RegisterBenchmark("tier_read_alone", BM_TierRead, size_t(1), false)
      ->ArgNames({"layout", "pages", "streamed", "pipelined", "mapped"})
      ->Apply([](benchmark::internal::Benchmark* b) {
        for (const int64_t layout : {0, 1, 2}) {
          for (const int64_t pages : {1, 8}) {
            b->Args({layout, pages, 0, 0, 0});
            b->Args({layout, pages, 1, 0, 1});
          }
        }
      })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}
