// The storage tier's `file` backend: one directory, one file per value
// (docs/storage-file.md). It stores opaque bytes; the page format
// (page_format.hpp) seals and checks them above it.
//
// - A value lives in `<path>/<key>.kvp`. It is written to a temporary file of the
//   same directory (`.kvptmp-<pid>-<tid>-<n>`) and renamed into place, so a reader
//   sees either no file or the whole value, from any process. Write-once: a key
//   whose file exists is skipped (put_existing), unless that file's length
//   differs from the value's, which only a damaged file can have (the same key
//   always means the same bytes): it is then replaced.
// - No fsync: this is a cache. After a power loss (not a process crash, which
//   rename makes harmless) a file may come back short; check_page reads it as
//   truncated, a miss, and the next put of its key replaces it.
// - `max_bytes` > 0 bounds the bytes of the page files, least recently used
//   first out. The shared LRU clock is each file's mtime: a put and every get set
//   it to the current time, so processes sharing the directory see each other's
//   use. Each process keeps an index of the files (built by a directory scan,
//   updated by its own puts, gets and evictions, and rescanned at most every
//   rescan period while it writes) and re-checks a file's mtime before evicting
//   it. Across processes the bound is approximate: the directory may exceed it by
//   what the other processes wrote since this one's last scan.
// - Failures (ENOSPC, EIO, EFBIG, ...) are kError for that key, counted in
//   io_errors; the temporary file is removed, nothing half-written stays.
#pragma once

#include <cstdint>
#include <memory>

#include "config/config.hpp"
#include "storage/blob_store.hpp"
#include "util/status.hpp"

namespace kvp::storage {

// Tunables of the file backend; the defaults are what open_file_store(cfg) uses.
struct FileStoreOptions {
  // With max_bytes > 0, a put rescans the directory (every value file's length and
  // mtime) when its last scan is older than this, or older than
  // min_rescan_interval_ms when its own count says the bound is exceeded. Both
  // grow with the directory, so that scans take at most max_scan_share of the
  // time (5 times that when over the bound; 0: no such spacing).
  int64_t rescan_period_ms = 5000;
  int64_t min_rescan_interval_ms = 1000;
  double max_scan_share = 0.01;
  // Temporary files older than this are a crashed writer's: scans and clear() remove them.
  int64_t stale_temp_age_s = 3600;
};

// Opens (creating it and its parents, mode 0755, when missing) the directory
// cfg.path. KVPOOL_ERR_CONFIG when the path is empty, cannot be created, is not a
// directory or is not writable (a probe file is created and removed); with
// cfg.max_bytes > 0 the directory is scanned and, when over the bound, evicted.
Status open_file_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);
Status open_file_store(const config::StorageConfig& cfg, const FileStoreOptions& options,
                       std::unique_ptr<BlobStore>* out);

// Whether a directory entry's name is one the backend writes: a value
// ("<key>.kvp", the key as blob_store.hpp allows) or a temporary file
// (".kvptmp-<pid>-<tid>-<n>"). Scans and clear() touch only such files.
bool is_file_store_value_name(const char* name);
bool is_file_store_temp_name(const char* name);

}  // namespace kvp::storage
