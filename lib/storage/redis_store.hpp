// The storage tier's redis backend (docs/storage-redis.md): pages as plain
// string values of one redis server, or of a primary and its replicas.
//
// - servers[0] is the primary: every write goes there, as SET key value NX
//   (write-once: a nil reply means the key exists, counted as put_existing and
//   reported kOk). servers[1..] are replicas (replicaof the primary), read only
//   when the primary fails or times out for a key; a replica may lag, so a miss
//   there is a miss.
// - A batch is one pipelined round trip per server: put(), get() and
//   exists_prefix() append one command per key, then read one reply per key.
//   exists_prefix() asks EXISTS, never fetches values. get() receives values
//   straight into the caller's buffers; put() sends values of 64 KiB or more
//   straight from them.
// - Every wait (connect, each send, each receive) is bounded by timeout_ms. A
//   connection that fails or times out is dropped and its server is skipped
//   (taken out of the rotation, counted in servers_ejected) for kRetryAfterMs;
//   the first call after that connects again.
// - Connections: a small pool per server (a redisContext serves one thread at a
//   time); a call takes one, or opens one when none is idle.
// - clear() deletes the keys under kvpool's prefix ("kvp1-*", SCAN + UNLINK on
//   the primary), never FLUSHALL: the server may hold other data.
// - Cluster mode is not supported: hiredis 0.14 does not follow MOVED/ASK. open
//   refuses a primary that reports cluster_enabled:1; a MOVED reply met later is
//   a server error (counted), never silently taken for a miss.
//
// Without hiredis at build time (no libhiredis-dev), open returns
// KVPOOL_ERR_UNSUPPORTED (redis_store_stub.cpp).
#pragma once

#include <memory>

#include "config/config.hpp"
#include "storage/blob_store.hpp"
#include "util/status.hpp"

namespace kvp::storage {

// How long a server whose connection failed or timed out is skipped before the
// next call tries it again.
constexpr int kRedisRetryAfterMs = 1000;

// Opens the backend of cfg.servers ("host:port", primary first) with a wait
// bound of cfg.timeout_ms. The servers need not be up: an unreachable one is
// tried again on later calls. KVPOOL_ERR_CONFIG for a bad server list or
// timeout; KVPOOL_ERR_UNSUPPORTED for a primary in cluster mode or a build
// without hiredis.
Status open_redis_store(const config::StorageConfig& cfg, std::unique_ptr<BlobStore>* out);

}  // namespace kvp::storage
