package kvpool_test

import (
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// cacheConfig: page_size 4, 128 tokens, a radix cache with LRU eviction and KV events.
const cacheConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
	`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":128,"max_running_requests":8,"max_context_len":256},` +
	`"prefix_cache":{"kind":"radix","eviction":"lru","events":true}}`

// chunkConfig: the same pool with the chunk cache (no radix tree).
var chunkConfig = strings.Replace(cacheConfig, `{"kind":"radix","eviction":"lru","events":true}`, `{"kind":"chunk"}`, 1)

func tokenRange(from int32, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = from + int32(i)
	}
	return t
}

// wantAccounting checks SGLang's identity and the pool's self-check.
func wantAccounting(t *testing.T, p *kvpool.Pool) kvpool.Accounting {
	t.Helper()
	a, err := p.Accounting()
	must(t, err)
	if a.Capacity != 128 || a.Available+a.Evictable+a.Protected+a.Uncached != a.Capacity {
		t.Fatalf("accounting %+v: available+evictable+protected+uncached != capacity 128", a)
	}
	if _, err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	return a
}

func seqInfo(t *testing.T, p *kvpool.Pool, seq uint64) kvpool.SeqInfo {
	t.Helper()
	info, err := p.SeqInfo(seq)
	must(t, err)
	return info
}

func TestSeqPrefillDecodeFinishReuse(t *testing.T) {
	p := open(t, cacheConfig)
	prompt := tokenRange(100, 10)
	a, cached, err := p.Begin(prompt, "")
	must(t, err)
	if a == 0 || cached != 0 {
		t.Fatalf("Begin = (%d, %d), want a non-zero id and 0 cached", a, cached)
	}
	slots, err := p.SeqExtend([]uint64{a}, []int64{10})
	must(t, err)
	if len(slots) != 10 {
		t.Fatalf("SeqExtend returned %d slots, want 10", len(slots))
	}
	info := seqInfo(t, p, a)
	if info.Cached != 8 || info.Tokens != 10 || info.Computed != 10 || info.Row < 1 || info.PrefixHit != 0 {
		t.Fatalf("SeqInfo = %+v, want cached 8 (two whole pages), 10 tokens, 10 computed, a row", info)
	}
	got, err := p.SeqSlots(a)
	must(t, err)
	wantInts(t, "SeqSlots", got, slots)
	acc := wantAccounting(t, p)
	if acc.Protected != 8 || acc.Available != 128-12 {
		t.Fatalf("accounting %+v: want 8 protected tokens and 116 available", acc)
	}

	d, err := p.SeqDecode([]uint64{a}, []int32{555})
	must(t, err)
	if len(d) != 1 || d[0] != slots[9]+1 {
		t.Fatalf("SeqDecode = %v, want [%d] (same page)", d, slots[9]+1)
	}
	if info = seqInfo(t, p, a); info.Tokens != 11 || info.Computed != 11 {
		t.Fatalf("SeqInfo after decode = %+v, want 11 tokens", info)
	}
	must(t, p.Finish(a, 11))
	sizes, err := p.RadixSizes()
	must(t, err)
	if sizes != (kvpool.RadixSizes{Evictable: 8, Protected: 0, Total: 8}) {
		t.Fatalf("RadixSizes = %+v, want 8 evictable of 8", sizes)
	}
	wantCode(t, p.Finish(a, 11), kvpool.ErrInvalidArgument) // already finished
	_, err = p.SeqInfo(a)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	wantAccounting(t, p)

	// The same prompt again: its two pages come from the cache.
	b, cached, err := p.Begin(prompt, "")
	must(t, err)
	if cached != 8 || b == a {
		t.Fatalf("second Begin = (%d, %d), want a new id and 8 cached", b, cached)
	}
	got, err = p.SeqSlots(b)
	must(t, err)
	wantInts(t, "SeqSlots of the cached prefix", got, slots[:8])
	if info = seqInfo(t, p, b); info.PrefixHit != 8 || info.Row != -1 {
		t.Fatalf("SeqInfo = %+v, want prefix hit 8 and no row before the first extend", info)
	}
	more, err := p.SeqExtend([]uint64{b}, []int64{2})
	must(t, err)
	if len(more) != 2 || seqInfo(t, p, b).Computed != 10 {
		t.Fatalf("SeqExtend of the rest = %v", more)
	}

	// Retract keeps the request; a later extend recomputes only what is not cached.
	cached, err = p.Retract(b)
	must(t, err)
	if info = seqInfo(t, p, b); cached != 8 || info.Row != -1 || info.Computed != 8 {
		t.Fatalf("Retract = %d, SeqInfo %+v: want 8 cached, no row", cached, info)
	}
	wantAccounting(t, p)
	_, err = p.SeqExtend([]uint64{b}, []int64{2})
	must(t, err)
	must(t, p.Abort(b))
	wantCode(t, p.Abort(b), kvpool.ErrInvalidArgument)

	// Another namespace shares nothing; extraKey is part of the key.
	c, cached, err := p.Begin(prompt, "lora-7")
	must(t, err)
	if cached != 0 {
		t.Fatalf("Begin in another namespace: %d cached, want 0", cached)
	}
	must(t, p.Abort(c))
	_, _, err = p.Begin(prompt, "a\x00b")
	wantCode(t, err, kvpool.ErrInvalidArgument)
	wantAccounting(t, p)
}

func TestSeqBatchesAndOutOfMemory(t *testing.T) {
	p := open(t, cacheConfig)
	a, _, err := p.Begin(tokenRange(0, 6), "")
	must(t, err)
	b, _, err := p.Begin(tokenRange(50, 3), "")
	must(t, err)
	// Chunked prefill of a batch: request-major slots.
	slots, err := p.SeqExtend([]uint64{a, b}, []int64{4, 3})
	must(t, err)
	if len(slots) != 7 {
		t.Fatalf("SeqExtend returned %d slots, want 7", len(slots))
	}
	_, err = p.SeqExtend([]uint64{a}, []int64{2})
	must(t, err)
	d, err := p.SeqDecode([]uint64{a, b}, []int32{7, 8})
	must(t, err)
	if len(d) != 2 {
		t.Fatalf("SeqDecode = %v", d)
	}
	// Lengths that disagree are rejected.
	_, err = p.SeqDecode([]uint64{a, b}, []int32{7})
	wantCode(t, err, kvpool.ErrInvalidArgument)
	wantAccounting(t, p)

	// 100 + 100 tokens do not fit 128: the second prefill fails and changes nothing.
	c, _, err := p.Begin(tokenRange(1000, 100), "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{c}, []int64{100})
	must(t, err)
	d2, _, err := p.Begin(tokenRange(5000, 100), "")
	must(t, err)
	before := wantAccounting(t, p)
	_, err = p.SeqExtend([]uint64{d2}, []int64{100})
	wantCode(t, err, kvpool.ErrOutOfMemory)
	if after := wantAccounting(t, p); after != before {
		t.Fatalf("accounting changed by a failed extend: %+v -> %+v", before, after)
	}
	for _, s := range []uint64{a, b, c, d2} {
		must(t, p.Abort(s))
	}
	if acc := wantAccounting(t, p); acc.Uncached != 0 || acc.Protected != 0 {
		t.Fatalf("accounting after aborting everything: %+v", acc)
	}
}

func TestSeqWithoutRadixCache(t *testing.T) {
	p := open(t, chunkConfig)
	// Requests work without a tree, sharing nothing.
	prompt := tokenRange(1, 10)
	a, _, err := p.Begin(prompt, "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{a}, []int64{10})
	must(t, err)
	must(t, p.Finish(a, 10))
	b, cached, err := p.Begin(prompt, "")
	must(t, err)
	if cached != 0 {
		t.Fatalf("Begin without a radix cache: %d cached, want 0", cached)
	}
	must(t, p.Abort(b))
	acc := wantAccounting(t, p)
	if acc.Available != 128 || acc.Evictable != 0 {
		t.Fatalf("accounting %+v: want everything available", acc)
	}
}
