/**
 * @file metrics.h
 * @brief A pool's counters and sizes as Prometheus text, ready to serve on /metrics.
 *
 * kvpool_metrics_text() writes the Prometheus text exposition format (version 0.0.4): for every
 * metric family a `# HELP` and a `# TYPE` line, then its samples. Every name starts with `kvpool_`
 * and ends in its unit (`_tokens`, `_bytes`, ...); counters end in `_total` and never decrease
 * while the pool lives. Labels: `tier` (device, host, storage), `direction` (device_to_host,
 * host_to_device, host_to_storage, storage_to_host), `operation`, `kind` and `reason`. A family
 * appears only when the pool has what it measures: host-tier families need a `host_cache`
 * section, storage families a `storage` section, cache families a radix prefix cache, and so
 * on. docs/services.md ("Metrics") lists every family, its labels and when it appears.
 *
 * The values are those of kvpool_get_stats(), radix_sizes(), kvhost_get_stats() and
 * kvstore_get_stats(), plus counters only this text has (prefix hits by tier, device
 * evictions, device faults).
 */
#ifndef KVPOOL_METRICS_H
#define KVPOOL_METRICS_H

#include <stddef.h>

#include "kvpool/export.h"
#include "kvpool/pool.h"
#include "kvpool/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief The pool's metrics in the Prometheus text format.
 * @param[in]  pool      A live pool.
 * @param[out] text      Receives the NUL-terminated text (may be NULL when @p text_cap is 0).
 * @param[in]  text_cap  Capacity of @p text in bytes, the terminating NUL included.
 * @param[out] text_len  Receives the length of the text in bytes, without the NUL; also on
 *                       #KVPOOL_ERR_BUFFER_TOO_SMALL, where it tells the capacity needed less one.
 * @return #KVPOOL_OK; #KVPOOL_ERR_BUFFER_TOO_SMALL (@p text_cap is at most *text_len; nothing is
 *         written to @p text); #KVPOOL_ERR_INVALID_ARGUMENT (NULL or foreign @p pool, NULL
 *         @p text_len, or NULL @p text with a non-zero @p text_cap).
 *
 * A read: it changes nothing in the pool and starts no copy (host-tier copies that inserts asked
 * for start at the next kvseq_* or tree call). Counters grow between calls, so a caller that
 * sizes its buffer from a first call should leave room (a few hundred bytes) for the second.
 * Cost: tens of microseconds (it formats the whole text); the text is a few kilobytes (about
 * 3 KiB for a plain pool, 8 KiB with host and storage tiers).
 * Thread safety: as the pool's other reads.
 */
KVPOOL_API kvpool_status kvpool_metrics_text(const kvpool *pool, char *text, size_t text_cap, size_t *text_len);

#ifdef __cplusplus
}
#endif

#endif /* KVPOOL_METRICS_H */
