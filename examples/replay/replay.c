/*
 * The replay scheduler: continuous batching over kvseq_*, in steps.
 *
 * Each step (docs/replay.md explains the choices):
 *   1. admit: while fewer than `concurrency` requests run, take the oldest
 *      waiting request (retracted or put back), else the next trace arrival,
 *      and kvseq_begin it (a new request's cached length is its prefix hit);
 *      it starts if free + evictable memory covers what all running requests
 *      and it still need to finish (or if nothing runs), else it waits
 *      (--admission greedy skips that test);
 *   2. prefill: every running request whose tokens are not all computed gets
 *      one kvseq_extend chunk, oldest first; the first out-of-memory stops the
 *      prefills and admissions (the rest wait for memory, first come first served);
 *   3. decode: one batched kvseq_decode appends a token to every request whose
 *      tokens are computed and that still has output to produce; out-of-memory
 *      retracts the running request with the most tokens and tries again;
 *   4. finish: requests that produced output_length tokens are kvseq_finish'ed.
 * A request that cannot run even alone is aborted and counted as oom_skipped;
 * a step in which nothing moves retracts the largest request, so the loop
 * always terminates.
 *
 * Evictions: before each allocating call the replay frees what the call needs
 * with radix_evict(), under the same rule kvseq uses internally (evict only if
 * enough is evictable), so kvseq never has to evict and every evicted token is
 * counted exactly.
 */
#define _POSIX_C_SOURCE 200809L
#include "replay.h"

#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvpool/kvpool.h>

/* A request between its first kvseq_begin and its finish. */
typedef struct live {
  size_t idx;        /* position in the trace */
  uint64_t seq;      /* kvseq id; 0 while not begun (after unpin_waiting) */
  uint32_t tokens;   /* prompt + decoded so far */
  uint32_t computed; /* tokens that have slots */
  uint32_t decoded;
} live;

typedef struct list {
  live *v;
  size_t n, cap;
} list;

typedef struct sched {
  const replay_params *p;
  const trace *t;
  kvpool *pool;
  replay_result *res;
  uint32_t page;
  int host;        /* the pool has a host tier (kvhost_get_stats answers) */
  int storage;     /* the pool has a storage tier (kvstore_get_stats answers) */
  list running;    /* in admission order */
  list waiting;    /* begun or retracted requests, oldest (smallest idx) first */
  int stalled;     /* a prefill waited for memory last step */
  struct sched *group; /* the instances run together (--instances), this one included */
  size_t group_n;
  size_t next;     /* next trace arrival */
  size_t done;     /* finished or skipped */
  uint8_t *seen;   /* block ids of the requests begun so far */
  int32_t *tokens; /* scratch: one request's token ids */
  int64_t *slots;  /* scratch: slots of one extend or match */
  uint64_t *batch_seqs;
  int32_t *batch_tokens;
  int64_t *batch_slots;
  size_t *batch_pos; /* running index of each batch entry */
  char *err;
  size_t err_cap;
} sched;

static int fail(sched *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, s->err_cap, fmt, ap);
  va_end(ap);
  return 1;
}

static int api_fail(sched *s, const char *call, kvpool_status st) {
  return fail(s, "%s: %s: %s", call, kvpool_status_string(st), kvpool_last_error());
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t pages_for(uint64_t tokens, uint32_t page) { return (tokens + page - 1) / page; }

static int list_push(list *l, live r) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    live *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) return 1;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = r;
  return 0;
}

static void list_remove(list *l, size_t i) {
  memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof *l->v);
  --l->n;
}

/* Waiting requests resume oldest first: keep the list sorted by trace index. */
static int wait_push(sched *s, live r) {
  if (list_push(&s->waiting, r)) return fail(s, "out of memory");
  size_t i = s->waiting.n - 1;
  while (i > 0 && s->waiting.v[i - 1].idx > r.idx) {
    s->waiting.v[i] = s->waiting.v[i - 1];
    --i;
  }
  s->waiting.v[i] = r;
  return 0;
}

static uint32_t output_len(const sched *s, const live *r) { return s->t->reqs[r->idx].output_len; }

/* Blocks of a request counted as prefix hits when the tree holds its first `matched`
 * tokens. Block j (tokens [512j, e)) is a hit when the tree holds all of it that whole
 * pages of the prompt reach, min(e, floor_page(L)), and - for a block that reaches
 * into the prompt's partial last page, which a paged tree never holds - when an
 * earlier request had the same block id (equal ids mean equal content and prefix).
 * With an unbounded cache this is exactly the trace's hash-id reuse (64.0%) at every
 * page size up to 512. */
static uint64_t count_hit_blocks(const trace *t, const trace_request *r, uint64_t matched, uint32_t page,
                                 const uint8_t *seen) {
  const uint64_t whole = r->input_len - r->input_len % page;
  uint64_t hits = 0;
  for (uint32_t j = 0; j < r->num_blocks; ++j) {
    uint64_t end = (uint64_t)(j + 1) * TRACE_BLOCK_TOKENS;
    if (end > r->input_len) end = r->input_len;
    const uint64_t need = end < whole ? end : whole;
    if (matched < need) break;  /* need grows with j */
    if (end > whole && !seen[t->block_ids[r->block_off + j]]) break;
    ++hits;
  }
  return hits;
}

/* Device tokens the tree holds (evictable + protected). */
static int tree_tokens(sched *s, uint64_t *out) {
  size_t available, evictable, protected_len, uncached, capacity;
  kvpool_status st = kvseq_accounting(s->pool, &available, &evictable, &protected_len, &uncached, &capacity);
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_accounting", st);
  *out = (uint64_t)evictable + protected_len;
  return 0;
}

/* With a host tier, kvseq_begin and kvseq_retract load host hits back and evict device
 * nodes themselves to make room. Given the tree's device tokens before the call, reads the
 * tokens loaded (kvseq_info.host_hit) and counts the evicted ones: the tree lost exactly
 * what was evicted and gained what was loaded (the call inserts nothing else). */
static int after_load(sched *s, uint64_t seq, uint64_t tree_before, uint64_t *loaded, uint64_t *from_storage) {
  kvseq_info info = KVSEQ_INFO_INIT;
  kvpool_status st = kvseq_get_info(s->pool, seq, &info);
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_get_info", st);
  *loaded = info.host_hit;
  *from_storage = info.storage_hit;
  uint64_t tree_after = 0;
  if (tree_tokens(s, &tree_after)) return 1;
  if (tree_before + info.host_hit < tree_after) {
    return fail(s, "host load-back: the tree grew by %llu tokens, more than the %llu loaded",
                (unsigned long long)(tree_after - tree_before), (unsigned long long)info.host_hit);
  }
  const uint64_t evicted = tree_before + info.host_hit - tree_after;
  s->res->evicted_tokens += evicted;
  s->res->load_evicted_tokens += evicted;
  return 0;
}

/* With a storage tier, a request's stored continuation is read into the host tier before
 * it begins (SGLang prefetches while the request waits; the replay waits for the whole
 * prefetch, as the wait_complete policy does), then kvseq_begin loads it back. The replay
 * is a model of hits, not of timing: it lets backups finish before each prefetch. */
static int prefetch_request(sched *s, uint32_t tokens) {
  /* Every earlier backup written first: the store holds what the requests before this one
   * put there, whatever the disk's or servers' speed, so a run's hits do not depend on it.
   * With several instances on one store, every instance's backups are written first. */
  kvpool_status st;
  for (size_t k = 0; k < s->group_n; ++k) {
    if (!s->group[k].storage) continue;
    st = kvstore_flush(s->group[k].pool);
    if (st != KVPOOL_OK) return api_fail(s, "kvstore_flush", st);
  }
  uint64_t id = 0;
  st = kvstore_prefetch(s->pool, s->tokens, tokens, NULL, &id, NULL);
  if (st != KVPOOL_OK) return api_fail(s, "kvstore_prefetch", st);
  if (id == 0) return 0;
  kvstore_prefetch_info info = KVSTORE_PREFETCH_INFO_INIT;
  do {
    st = kvstore_prefetch_poll(s->pool, id, &info);
    if (st != KVPOOL_OK) return api_fail(s, "kvstore_prefetch_poll", st);
    if (!info.done) sched_yield();
  } while (!info.done);
  st = kvstore_prefetch_end(s->pool, id, NULL);
  return st == KVPOOL_OK ? 0 : api_fail(s, "kvstore_prefetch_end", st);
}

/* kvseq_begin of r (its prompt plus the tokens it already decoded). */
static int begin_request(sched *s, live *r, int first) {
  const trace_request *tr = &s->t->reqs[r->idx];
  trace_expand(s->t, r->idx, r->decoded, s->tokens);
  size_t cached = 0;
  uint64_t tree_before = 0, loaded = 0, from_storage = 0;
  if (s->storage && prefetch_request(s, r->tokens)) return 1;
  if (s->host && tree_tokens(s, &tree_before)) return 1;
  kvpool_status st = kvseq_begin(s->pool, s->tokens, r->tokens, NULL, &r->seq, &cached);
  ++s->res->kvseq_calls;
  ++s->res->ops;
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_begin", st);
  if (s->host && after_load(s, r->seq, tree_before, &loaded, &from_storage)) return 1;
  r->computed = (uint32_t)cached;
  if (!first) return 0;
  if (s->p->matched != NULL) s->p->matched[r->idx] = cached;
  if (s->p->host_matched != NULL) s->p->host_matched[r->idx] = loaded;
  s->res->matched_tokens += cached;
  s->res->host_hit_tokens += loaded - from_storage;
  s->res->storage_hit_tokens += from_storage;
  s->res->device_hit_tokens += cached - loaded;
  /* kvseq_begin matches at most len - 1 tokens. When that cap is what stopped it, look
   * whether the tree holds the whole prompt, for the block metric only. */
  uint64_t tree_has = cached;
  if (tr->input_len % s->page == 0 && cached + s->page == tr->input_len) {
    size_t m = 0, host_m = 0;
    uint64_t node = 0, host_node = 0;
    if (s->host) {  /* the last page may be on the host only: it counts as held */
      st = kvhost_match(s->pool, s->tokens, tr->input_len, NULL, s->slots, tr->input_len, &m, &host_m, &node, &host_node);
      if (st != KVPOOL_OK) return api_fail(s, "kvhost_match", st);
      tree_has = m + host_m;
    } else {
      st = radix_match(s->pool, s->tokens, tr->input_len, NULL, s->slots, tr->input_len, &m, &node);
      if (st == KVPOOL_OK) tree_has = m;
      else if (st != KVPOOL_ERR_UNSUPPORTED) return api_fail(s, "radix_match", st);
    }
  }
  s->res->hit_blocks += count_hit_blocks(s->t, tr, tree_has, s->page, s->seen);
  for (uint32_t j = 0; j < tr->num_blocks; ++j) s->seen[s->t->block_ids[tr->block_off + j]] = 1;
  return 0;
}

/* Evicts before an allocating call of `need` slots, so that kvseq never evicts and every
 * evicted token is counted, under the pool's rule (prefix_cache.evict_rule, the rule kvseq
 * applies internally): the shortfall, if enough is evictable; or, SGLang's scheduler, the
 * whole `estimate` (need plus a page per request) whenever fewer are free. */
static int ensure_room(sched *s, uint64_t need, uint64_t estimate) {
  size_t available, evictable, protected_len, uncached, capacity;
  kvpool_status st = kvseq_accounting(s->pool, &available, &evictable, &protected_len, &uncached, &capacity);
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_accounting", st);
  const uint64_t wanted = s->p->sglang_evict_rule && estimate > need ? estimate : need;
  if (wanted <= available || (need > available && need - available > evictable) || evictable == 0) return 0;
  size_t evicted = 0;
  st = radix_evict(s->pool, (size_t)(s->p->sglang_evict_rule ? wanted : need - available), &evicted);
  if (st != KVPOOL_OK) return api_fail(s, "radix_evict", st);
  s->res->evicted_tokens += evicted;
  return 0;
}

/* SGLang's estimate of one request's step of `tokens` tokens: a page more when pages are larger than a token. */
static uint64_t sglang_estimate(const sched *s, uint64_t tokens) { return s->page == 1 ? tokens : tokens + s->page; }

static int sample_usage(sched *s) {
  size_t available, evictable, protected_len, uncached, capacity;
  kvpool_status st = kvseq_accounting(s->pool, &available, &evictable, &protected_len, &uncached, &capacity);
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_accounting", st);
  if (capacity - available > s->res->peak_used_tokens) s->res->peak_used_tokens = capacity - available;
  return 0;
}

/* One prefill chunk of r. *st receives KVPOOL_OK or KVPOOL_ERR_OUT_OF_MEMORY. */
static int extend_request(sched *s, live *r, kvpool_status *st) {
  uint32_t chunk = r->tokens - r->computed;
  if (s->p->chunk != 0 && chunk > s->p->chunk) chunk = s->p->chunk;
  const uint64_t pages = pages_for((uint64_t)r->computed + chunk, s->page) - pages_for(r->computed, s->page);
  if (ensure_room(s, pages * s->page, sglang_estimate(s, chunk))) return 1;
  const int64_t len = chunk;
  *st = kvseq_extend(s->pool, &r->seq, 1, &len, 1, s->slots, chunk);
  ++s->res->kvseq_calls;
  ++s->res->ops;
  if (*st == KVPOOL_OK) {
    r->computed += chunk;
    s->res->prefill_tokens += chunk;
  } else if (*st != KVPOOL_ERR_OUT_OF_MEMORY) {
    return api_fail(s, "kvseq_extend", *st);
  }
  return 0;
}

/* Releases the prefix locks of waiting requests (abort; they begin again later).
 * Used only when a request cannot run alone: their locks may be what blocks it. */
static int unpin_waiting(sched *s, size_t *unpinned) {
  *unpinned = 0;
  for (size_t i = 0; i < s->waiting.n; ++i) {
    live *w = &s->waiting.v[i];
    if (w->seq == 0) continue;
    kvpool_status st = kvseq_abort(s->pool, w->seq);
    ++s->res->kvseq_calls;
    ++s->res->ops;
    if (st != KVPOOL_OK) return api_fail(s, "kvseq_abort", st);
    w->seq = 0;
    w->computed = 0;
    ++*unpinned;
  }
  return 0;
}

/* Running request i cannot run even alone: abort it and count it. */
static int skip_running(sched *s, size_t i) {
  kvpool_status st = kvseq_abort(s->pool, s->running.v[i].seq);
  ++s->res->kvseq_calls;
  ++s->res->ops;
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_abort", st);
  list_remove(&s->running, i);
  ++s->res->oom_skipped;
  ++s->done;
  return 0;
}

static int retract_running(sched *s, size_t i) {
  live r = s->running.v[i];
  size_t cached = 0;
  uint64_t tree_before = 0, loaded = 0;
  if (s->host && tree_tokens(s, &tree_before)) return 1;
  kvpool_status st = kvseq_retract(s->pool, r.seq, &cached);
  ++s->res->kvseq_calls;
  ++s->res->ops;
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_retract", st);
  uint64_t from_storage = 0;
  if (s->host && after_load(s, r.seq, tree_before, &loaded, &from_storage)) return 1;
  r.computed = (uint32_t)cached;
  list_remove(&s->running, i);
  ++s->res->retractions;
  return wait_push(s, r);
}

/* The running request with the most tokens (the latest arrival on ties). */
static size_t largest_running(const sched *s) {
  size_t best = 0;
  for (size_t i = 1; i < s->running.n; ++i) {
    const live *a = &s->running.v[i], *b = &s->running.v[best];
    if (a->tokens > b->tokens || (a->tokens == b->tokens && a->idx > b->idx)) best = i;
  }
  return best;
}

/* The only running request (index i) cannot get memory: if waiting requests hold
 * prefix locks, release them (the caller retries); otherwise it can never run: skip it. */
static int alone_out_of_memory(sched *s, size_t i) {
  size_t unpinned = 0;
  if (unpin_waiting(s, &unpinned)) return 1;
  return unpinned > 0 ? 0 : skip_running(s, i);
}

/* Tokens r still needs until it finishes (whole pages beyond what it has computed). */
static uint64_t tokens_to_finish(const sched *s, const live *r) {
  const uint64_t final_len = (uint64_t)s->t->reqs[r->idx].input_len + output_len(s, r);
  return (pages_for(final_len, s->page) - pages_for(r->computed, s->page)) * s->page;
}

/* Admission control, as SGLang's PrefillAdder with new_token_ratio 1: r may start
 * only if free + evictable memory covers what every running request still needs
 * to finish, plus what r needs. Without it, requests admitted into a full pool
 * keep retracting one another. */
static int fits(sched *s, const live *r, int *ok) {
  size_t available, evictable, protected_len, uncached, capacity;
  kvpool_status st = kvseq_accounting(s->pool, &available, &evictable, &protected_len, &uncached, &capacity);
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_accounting", st);
  uint64_t need = tokens_to_finish(s, r);
  for (size_t i = 0; i < s->running.n; ++i) need += tokens_to_finish(s, &s->running.v[i]);
  *ok = need <= (uint64_t)available + evictable;
  return 0;
}

/* Step 1. */
static int admit(sched *s) {
  while (s->running.n < s->p->concurrency && (s->waiting.n > 0 || s->next < s->t->num_reqs)) {
    live r;
    int first = 0;
    if (s->waiting.n > 0) {
      r = s->waiting.v[0];
      list_remove(&s->waiting, 0);
    } else {
      memset(&r, 0, sizeof r);
      r.idx = s->next++;
      r.tokens = s->t->reqs[r.idx].input_len;
      first = 1;
    }
    /* Begin first: the cached prefix (now locked) is what r does not need to compute. */
    if (r.seq == 0 && begin_request(s, &r, first)) return 1;
    int ok = 1;
    /* Alone, it always starts; if even that fails, it is skipped (alone_out_of_memory). */
    if (s->running.n > 0 && !s->p->greedy && fits(s, &r, &ok)) return 1;
    if (!ok) return wait_push(s, r);  /* the oldest waits at the head, keeping its prefix */
    if (list_push(&s->running, r)) return fail(s, "out of memory");
  }
  return 0;
}

/* Step 2. Sets *stalled when a prefill had to wait for memory. */
static int prefill(sched *s, int *moved, int *stalled) {
  *stalled = 0;
  for (size_t i = 0; i < s->running.n;) {
    live *r = &s->running.v[i];
    if (r->computed == r->tokens) {
      ++i;
      continue;
    }
    kvpool_status st;
    if (extend_request(s, r, &st)) return 1;
    if (st == KVPOOL_OK) {
      *moved = 1;
      ++i;
    } else if (s->running.n == 1) {
      if (alone_out_of_memory(s, i)) return 1;
      *moved = 1;
    } else {
      *stalled = 1;
      return 0;
    }
  }
  return 0;
}

/* Step 3. */
static int decode(sched *s, int *moved) {
  for (;;) {
    size_t n = 0;
    uint64_t new_pages = 0;
    for (size_t i = 0; i < s->running.n; ++i) {
      const live *r = &s->running.v[i];
      if (r->computed != r->tokens || r->decoded >= output_len(s, r)) continue;
      s->batch_seqs[n] = r->seq;
      s->batch_tokens[n] = trace_output_token(s->t, r->idx, r->decoded);
      s->batch_pos[n] = i;
      new_pages += (r->tokens % s->page == 0) ? 1 : 0;  /* the new token starts a page */
      ++n;
    }
    if (n == 0) return 0;
    if (ensure_room(s, new_pages * s->page, (uint64_t)n * s->page)) return 1;  /* SGLang: a page per request */
    kvpool_status st = kvseq_decode(s->pool, s->batch_seqs, n, s->batch_tokens, n, s->batch_slots, n);
    ++s->res->kvseq_calls;
    if (st == KVPOOL_OK) {
      for (size_t k = 0; k < n; ++k) {
        live *r = &s->running.v[s->batch_pos[k]];
        ++r->tokens;
        ++r->computed;
        ++r->decoded;
      }
      s->res->ops += n;
      s->res->decode_tokens += n;
      *moved = 1;
      return 0;
    }
    if (st != KVPOOL_ERR_OUT_OF_MEMORY) return api_fail(s, "kvseq_decode", st);
    if (s->running.n == 1) {
      if (alone_out_of_memory(s, 0)) return 1;
      *moved = 1;
    } else if (retract_running(s, largest_running(s))) {
      return 1;
    }
  }
}

/* Step 4. */
static int finish(sched *s, int *moved) {
  for (size_t i = 0; i < s->running.n;) {
    const live *r = &s->running.v[i];
    if (r->computed != r->tokens || r->decoded < output_len(s, r)) {
      ++i;
      continue;
    }
    kvpool_status st = kvseq_finish(s->pool, r->seq, r->computed);
    ++s->res->kvseq_calls;
    ++s->res->ops;
    if (st != KVPOOL_OK) return api_fail(s, "kvseq_finish", st);
    list_remove(&s->running, i);
    ++s->done;
    *moved = 1;
  }
  return 0;
}

static int check_pool(sched *s) {
  char report[2048];
  kvpool_status st = kvpool_check(s->pool, report, sizeof report);
  ++s->res->checks;
  if (st != KVPOOL_OK) return fail(s, "kvpool_check after %llu steps: %s: %s", (unsigned long long)s->res->steps,
                                   kvpool_status_string(st), report);
  return 0;
}

/* One scheduler step (steps 1-4 above). */
static int sched_step(sched *s) {
  int moved = 0;
  ++s->res->steps;
  /* Memory was short last step: let running requests drain before admitting more. */
  if ((!s->stalled || s->running.n == 0) && admit(s)) return 1;
  if (prefill(s, &moved, &s->stalled)) return 1;
  if (sample_usage(s) || decode(s, &moved) || sample_usage(s) || finish(s, &moved)) return 1;
  if (!moved && s->running.n > 0) {
    /* Every running request waits for memory the others hold: make room. */
    if (s->running.n > 1) {
      if (retract_running(s, largest_running(s))) return 1;
    } else if (alone_out_of_memory(s, 0)) {
      return 1;
    }
  }
  if (s->p->check_every != 0 && s->res->steps % s->p->check_every == 0 && check_pool(s)) return 1;
  return 0;
}

/* After the last finish nothing may be held: the tree owns what is left, unlocked. */
static int check_end(sched *s) {
  if (s->host) {
    /* Backups start at the call after the insert that asks for them: start the last
     * finish's and wait for every copy, so that the counters are complete. */
    size_t completed = 0;
    kvpool_status st = kvhost_poll(s->pool, 1, &completed);
    if (st != KVPOOL_OK) return api_fail(s, "kvhost_poll", st);
  }
  if (s->storage) {  /* every backup written: the counters are complete */
    kvpool_status st = kvstore_flush(s->pool);
    if (st != KVPOOL_OK) return api_fail(s, "kvstore_flush", st);
  }
  if (check_pool(s)) return 1;
  size_t available, evictable, protected_len, uncached, capacity;
  kvpool_status st = kvseq_accounting(s->pool, &available, &evictable, &protected_len, &uncached, &capacity);
  if (st != KVPOOL_OK) return api_fail(s, "kvseq_accounting", st);
  if (protected_len != 0 || uncached != 0 || available + evictable != capacity) {
    return fail(s, "leak after the replay: available %zu + evictable %zu != capacity %zu (protected %zu, uncached %zu)",
                available, evictable, capacity, protected_len, uncached);
  }
  s->res->final_cached_tokens = evictable;
  s->res->capacity_tokens = capacity;
  if (!s->host) return 0;
  kvhost_stats h = KVHOST_STATS_INIT;
  st = kvhost_get_stats(s->pool, &h);
  if (st != KVPOOL_OK) return api_fail(s, "kvhost_get_stats", st);
  replay_result *r = s->res;
  r->host_capacity_tokens = h.capacity_tokens;
  r->host_used_tokens = h.used_tokens;
  r->host_only_tokens = h.host_only_tokens;
  r->host_backups = h.backups;
  r->host_backup_tokens = h.backup_tokens;
  r->host_backups_skipped = h.backups_skipped;
  r->host_loads = h.loads;
  r->host_load_tokens = h.load_tokens;
  r->host_loads_refused = h.loads_refused;
  r->host_evicted_tokens = h.host_evicted_tokens;
  r->bytes_to_host = h.bytes_to_host;
  r->bytes_to_device = h.bytes_to_device;
  if (s->storage) {
    kvstore_stats g = KVSTORE_STATS_INIT;
    st = kvstore_get_stats(s->pool, &g);
    if (st != KVPOOL_OK) return api_fail(s, "kvstore_get_stats", st);
    r->storage_backup_pages = g.backup_pages;
    r->storage_bytes_written = g.backup_bytes;
    r->storage_prefetches = g.prefetches;
    r->storage_prefetch_tokens = g.prefetch_loaded_tokens;
    r->storage_bytes_read = g.prefetch_bytes;
    r->storage_pages_rejected = g.pages_corrupt + g.pages_truncated + g.pages_foreign;
    r->storage_failures = g.backup_pages_failed + g.read_failures;
    r->storage_put_errors = g.store_put_errors;
    r->storage_get_errors = g.store_get_errors;
    r->storage_timeouts = g.store_timeouts;
    r->storage_server_errors = g.store_server_errors;
    r->storage_servers_ejected = g.store_servers_ejected;
  }
  if (h.copies_in_flight != 0 || h.backup_errors != 0) {
    return fail(s, "host tier after the replay: %llu copies in flight, %llu failed backups",
                (unsigned long long)h.copies_in_flight, (unsigned long long)h.backup_errors);
  }
  return 0;
}

static void fill_ratios(replay_result *r, double seconds) {
  r->wall_seconds = seconds;
  r->block_hit_ratio = r->blocks ? (double)r->hit_blocks / (double)r->blocks : 0.0;
  r->token_hit_ratio = r->input_tokens ? (double)r->matched_tokens / (double)r->input_tokens : 0.0;
  r->ops_per_second = seconds > 0 ? (double)r->ops / seconds : 0.0;
}

/* Creates s's pool and scratch; clear_store: clear the storage tier (once per store). */
static int sched_init(sched *s, const replay_params *p, replay_result *out, int clear_store, char *err, size_t err_cap) {
  memset(out, 0, sizeof *out);
  const trace *t = p->trace;
  memset(s, 0, sizeof *s);
  s->p = p;
  s->t = t;
  s->res = out;
  s->err = err;
  s->err_cap = err_cap;
  out->requests = t->num_reqs;
  out->blocks = t->total_blocks;
  out->input_tokens = t->input_tokens;
  out->output_tokens = t->output_tokens;

  kvpool_status st = kvpool_create(p->config_json, strlen(p->config_json), &s->pool);
  if (st != KVPOOL_OK) {
    s->pool = NULL;
    return api_fail(s, "kvpool_create", st);
  }
  kvpool_plan_info plan = KVPOOL_PLAN_INFO_INIT;
  st = kvpool_get_plan(s->pool, &plan);
  int rc = st != KVPOOL_OK ? api_fail(s, "kvpool_get_plan", st) : 0;
  s->page = plan.page_size;
  out->page_size = plan.page_size;
  out->capacity_tokens = plan.max_total_tokens;
  if (rc == 0) {
    kvhost_stats h = KVHOST_STATS_INIT;
    st = kvhost_get_stats(s->pool, &h);
    if (st == KVPOOL_OK) s->host = 1;
    else if (st != KVPOOL_ERR_UNSUPPORTED) rc = api_fail(s, "kvhost_get_stats", st);
    out->host_tier = s->host;
    out->host_capacity_tokens = h.capacity_tokens;
  }
  if (rc == 0 && s->host) {  /* a storage tier starts cold: every run measures the same thing */
    kvstore_stats g = KVSTORE_STATS_INIT;
    st = kvstore_get_stats(s->pool, &g);
    if (st == KVPOOL_OK) s->storage = 1;
    else if (st != KVPOOL_ERR_UNSUPPORTED) rc = api_fail(s, "kvstore_get_stats", st);
    if (s->storage && clear_store && (st = kvstore_clear(s->pool)) != KVPOOL_OK) rc = api_fail(s, "kvstore_clear", st);
    out->storage = s->storage;
  }

  const size_t ctx = (size_t)t->max_context + 1, conc = p->concurrency;
  s->seen = calloc((size_t)t->max_block_id + 1, 1);
  s->tokens = malloc(ctx * sizeof *s->tokens);
  s->slots = malloc(ctx * sizeof *s->slots);
  s->batch_seqs = malloc(conc * sizeof *s->batch_seqs);
  s->batch_tokens = malloc(conc * sizeof *s->batch_tokens);
  s->batch_slots = malloc(conc * sizeof *s->batch_slots);
  s->batch_pos = malloc(conc * sizeof *s->batch_pos);
  if (rc == 0 && (!s->seen || !s->tokens || !s->slots || !s->batch_seqs || !s->batch_tokens || !s->batch_slots ||
                  !s->batch_pos)) {
    rc = fail(s, "out of memory");
  }
  return rc;
}

/* The end checks (when rc is 0), then the pool's destruction; returns the final rc. */
static int sched_end(sched *s, int rc) {
  if (rc == 0 && s->pool != NULL) rc = check_end(s);
  if (s->pool != NULL) kvpool_destroy(s->pool);
  s->pool = NULL;
  free(s->seen);
  free(s->tokens);
  free(s->slots);
  free(s->batch_seqs);
  free(s->batch_tokens);
  free(s->batch_slots);
  free(s->batch_pos);
  free(s->running.v);
  free(s->waiting.v);
  memset(s, 0, sizeof *s);
  return rc;
}

static int sched_busy(const sched *s) { return s->done < s->t->num_reqs; }

int replay_run_group(const replay_params *params, size_t n, replay_result *outs, char *err, size_t err_cap) {
  if (n == 0) {
    snprintf(err, err_cap, "no instances");
    return 1;
  }
  sched *s = calloc(n, sizeof *s);
  if (s == NULL) {
    snprintf(err, err_cap, "out of memory");
    return 1;
  }
  /* Each instance writes its messages into its own buffer; the first failure is reported. */
  char (*errs)[1024] = calloc(n, sizeof *errs);
  if (errs == NULL) {
    free(s);
    snprintf(err, err_cap, "out of memory");
    return 1;
  }
  const double start = now_seconds();
  int rc = 0;
  size_t failed = 0, inited = 0;
  for (size_t k = 0; k < n && rc == 0; ++k) {
    rc = sched_init(&s[k], &params[k], &outs[k], k == 0, errs[k], sizeof errs[k]);
    s[k].group = s;
    s[k].group_n = n;
    inited = k + 1;
    if (rc != 0) failed = k;
  }
  size_t total = 0;
  for (size_t k = 0; k < n; ++k) total += params[k].trace->num_reqs;
  /* Interleaved in trace order: one step of each instance in turn. */
  for (int busy = 1; rc == 0 && busy;) {
    busy = 0;
    for (size_t k = 0; k < n && rc == 0; ++k) {
      if (!sched_busy(&s[k])) continue;
      busy = 1;
      if ((rc = sched_step(&s[k])) != 0) {
        failed = k;
        break;
      }
      if (params[0].progress != NULL) {
        size_t done = 0;
        for (size_t j = 0; j < n; ++j) done += s[j].done;
        params[0].progress(params[0].progress_ctx, done, total);
      }
    }
  }
  for (size_t k = 0; k < inited; ++k) {
    const int end = sched_end(&s[k], rc);
    if (rc == 0 && end != 0) {
      rc = end;
      failed = k;
    }
  }
  const double seconds = now_seconds() - start;
  for (size_t k = 0; k < n; ++k) fill_ratios(&outs[k], seconds);
  if (rc != 0) {
    if (n == 1) snprintf(err, err_cap, "%s", errs[failed]);
    else snprintf(err, err_cap, "instance %zu: %s", failed, errs[failed]);
  }
  free(errs);
  free(s);
  return rc;
}

int replay_run(const replay_params *p, replay_result *out, char *err, size_t err_cap) {
  return replay_run_group(p, 1, out, err, err_cap);
}
