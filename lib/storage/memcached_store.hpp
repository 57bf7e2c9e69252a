// The storage tier's memcached backend (config storage.backend = "memcached";
// docs/storage-memcached.md): a BlobStore over a list of memcached servers.
//
// - Placement: kvpool's own consistent-hash ring (ketama style: 160 points per
//   server, XXH3 of "host:port#i"), one libmemcached handle per server. A key
//   lives on the first server of the ring at or after its hash and, with
//   `replicas` = r, also on the next r distinct servers. Reads try those
//   servers in ring order and fall back to the next one when a server misses,
//   fails, or holds a damaged copy.
// - Failures: a server that fails twice in a row (timeout, refused, reset) is
//   ejected: it leaves the ring (its keys fall to the next servers) for
//   `retry_timeout_s`, then is tried again; one more failure ejects it again.
//   Within one call a server that failed is not asked again. Every wait
//   (connect, send, receive) is bounded by `timeout_ms`.
// - Values larger than one memcached item (the servers' item_size_max, asked
//   at open) are split: `<key>` holds a manifest (length, part size, XXH3 of
//   every part), the parts live under `<key>.p<i>`, each placed by its own key.
//   A small value is stored inline under `<key>` behind the same header. A read
//   is whole or a miss (partial_values), never a short value.
// - Write-once: the record under `<key>` is written last, with memcached's
//   `add` (NOT_STORED: the key exists, counted as put_existing).
//
// Why not libmemcached's own ketama, replicas and auto-eject: its replicas need
// the binary protocol (deprecated by memcached 1.6) and read only a replica
// chosen by its own rules, its eject/retry bookkeeping counts in whole seconds
// and is kept per memcached_st (so every clone in a pool relearns a dead
// server), and it reports no counters. The per-server handles keep
// libmemcached's protocol, pipelining (one mget per server per round) and
// timeouts, and leave placement and health to this backend, which the tests
// check against real servers (tests/storage/memcached_store_test.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "config/config.hpp"
#include "storage/blob_store.hpp"
#include "util/status.hpp"

namespace kvp::storage {

// Opens the backend over cfg.servers (cfg.replicas, cfg.timeout_ms,
// cfg.retry_timeout_s). The servers need not be up: open asks each that answers
// for its item size limit (the smallest wins; 1 MiB when none answers) and
// never fails for an unreachable server. KVPOOL_ERR_CONFIG for a malformed
// server address or replicas outside [0, servers); KVPOOL_ERR_UNSUPPORTED when
// kvpool was built without libmemcached.
Status open_memcached_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);

// The key of part `index` of a split value stored under `key` ("<key>.p<index>").
std::string memcached_part_key(const std::string& key, uint32_t index);

// Bytes of the header in front of every record under `<key>` (an inline value or a manifest).
constexpr size_t kMemcachedRecordHeaderBytes = 32;
// Room left in an item for memcached's own item header, the key and the flags.
constexpr size_t kMemcachedItemOverheadBytes = 1024;

}  // namespace kvp::storage
