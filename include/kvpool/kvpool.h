/**
 * @file kvpool.h
 * @brief Umbrella header of the kvpool C ABI: include this one.
 *
 * kvpool manages the KV-cache memory of LLM inference engines. All public
 * functions use the prefixes kvpool_, kvalloc_, kvreq_, kvseq_, radix_,
 * kvhost_ and kvstore_; all return a ::kvpool_status when they can fail.
 */
#ifndef KVPOOL_KVPOOL_H
#define KVPOOL_KVPOOL_H

#include "kvpool/export.h"
#include "kvpool/version.h"
#include "kvpool/status.h"
#include "kvpool/pool.h"
#include "kvpool/plan.h"
#include "kvpool/req.h"
#include "kvpool/alloc.h"
#include "kvpool/buffers.h"
#include "kvpool/mamba.h"
#include "kvpool/check.h"
#include "kvpool/radix.h"
#include "kvpool/host.h"
#include "kvpool/storage.h"
#include "kvpool/seq.h"
#include "kvpool/device.h"
#include "kvpool/metrics.h"
#include "kvpool/log.h"

#endif /* KVPOOL_KVPOOL_H */
