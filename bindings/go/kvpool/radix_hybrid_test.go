package kvpool_test

import (
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// A hybrid_linear pool with the mamba radix cache (page_size 1): 64 tokens, 10 states, 2 rows.
const hybridRadixConfig = `{"model":{"num_layers":4,"attention":"hybrid_linear","kv_heads":2,"head_dim":8,` +
	`"full_attention_layers":[3],"mamba":{"conv_shape":[4,3],"ssm_shape":[2,4,4],"conv_dtype":"f32","ssm_dtype":"f32"}},` +
	`"pool":{"kv_dtype":"f32","max_total_tokens":64,"max_running_requests":2,"mamba_cache_size":10,"max_context_len":64},` +
	`"prefix_cache":{"kind":"radix"}}`

// A swa pool with the swa radix cache: window 4, 64 full and 32 window slots.
const swaRadixConfig = `{"model":{"num_layers":4,"attention":"swa","kv_heads":2,"head_dim":8,"sliding_window":4,` +
	`"swa_layer_pattern":"SF"},"pool":{"kv_dtype":"f32","max_total_tokens":48,"swa_full_tokens_ratio":0.5,` +
	`"max_running_requests":4,"max_context_len":64},"prefix_cache":{"kind":"radix"}}`

func TestMambaRadixMatchInsertEvict(t *testing.T) {
	p := open(t, hybridRadixConfig)
	tokens := tokenRange(1, 6)
	slots, err := p.Alloc(6)
	must(t, err)
	state, err := p.MambaAlloc(1)
	must(t, err)
	conv := make([]float32, 12)
	for i := range conv {
		conv[i] = float32(i) + 0.5
	}
	must(t, p.MambaWrite(0, state[0], kvpool.Float32Bytes(conv), make([]byte, 128)))
	prefix, existed, node, err := p.InsertMamba(tokens, slots, "", state[0])
	must(t, err)
	if prefix != 0 || existed || node == 0 {
		t.Fatalf("InsertMamba = (%d, %v, %d), want a new node that took the state", prefix, existed, node)
	}
	if e, pr, err := p.StateSizes(); err != nil || e != 1 || pr != 0 {
		t.Fatalf("StateSizes = %d, %d, %v; want 1 evictable state", e, pr, err)
	}
	mine, err := p.MambaAlloc(1)
	must(t, err)
	got, mnode, mslot, err := p.MatchMamba(append(tokenRange(1, 6), 42), "", mine[0])
	must(t, err)
	wantInts(t, "MatchMamba", got, slots)
	if mnode != node || mslot != state[0] {
		t.Fatalf("MatchMamba ended at node %d with state %d, want %d and %d", mnode, mslot, node, state[0])
	}
	copied := make([]float32, 12)
	must(t, p.MambaRead(0, mine[0], kvpool.Float32Bytes(copied), make([]byte, 128)))
	for i := range copied {
		if copied[i] != conv[i] {
			t.Fatalf("copy-on-write state[%d] = %v, want %v", i, copied[i], conv[i])
		}
	}
	// A prefix without a state at its end is not usable.
	got, _, mslot, err = p.MatchMamba(tokenRange(1, 4), "", -1)
	must(t, err)
	if len(got) != 0 || mslot != -1 {
		t.Fatalf("MatchMamba of a prefix without state = %v, %d", got, mslot)
	}
	_, _, _, err = p.InsertMamba(tokenRange(50, 2), slots[:2], "", mine[0])
	wantCode(t, err, kvpool.ErrInvalidArgument) // the tree's slots
	_, _, err = p.Insert(tokens, slots, "", 0)
	wantCode(t, err, kvpool.ErrUnsupported)
	n, err := p.EvictMamba(1)
	must(t, err)
	if n != 1 {
		t.Fatalf("EvictMamba = %d, want 1", n)
	}
	if s := radixSizes(t, p); s.Total != 0 {
		t.Fatalf("after EvictMamba of the only leaf: %+v", s)
	}
	_, _, err = p.EvictSwa(1, 1)
	wantCode(t, err, kvpool.ErrUnsupported)
}

func TestSeqHybridStateSlot(t *testing.T) {
	p := open(t, hybridRadixConfig)
	seq, cached, err := p.Begin(tokenRange(1, 8), "")
	must(t, err)
	if cached != 0 {
		t.Fatalf("cached = %d", cached)
	}
	slot, err := p.SeqMambaSlot(seq)
	must(t, err)
	if slot < 1 {
		t.Fatalf("SeqMambaSlot = %d", slot)
	}
	_, err = p.SeqExtend([]uint64{seq}, []int64{8})
	must(t, err)
	must(t, p.Finish(seq, 8))
	if e, _, err := p.StateSizes(); err != nil || e != 1 {
		t.Fatalf("StateSizes after Finish = %d, %v; want the request's state cached", e, err)
	}
	seq2, cached, err := p.Begin(append(tokenRange(1, 8), 9), "")
	must(t, err)
	if cached != 8 {
		t.Fatalf("second request cached = %d, want 8", cached)
	}
	slot2, err := p.SeqMambaSlot(seq2)
	must(t, err)
	if slot2 == slot {
		t.Fatalf("the second request shares the tree's state slot %d", slot)
	}
	must(t, p.Abort(seq2))
	_, err = p.SeqMambaSlot(seq2)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	a, err := p.Accounting()
	must(t, err)
	if a.Available+a.Evictable+a.Protected+a.Uncached != a.Capacity {
		t.Fatalf("accounting %+v", a)
	}
	_, err = p.Check()
	must(t, err)
}

func TestSwaRadixInsertEvict(t *testing.T) {
	p := open(t, swaRadixConfig)
	tokens := tokenRange(1, 6)
	slots, err := p.Alloc(6)
	must(t, err)
	prefix, node, err := p.InsertSwa(tokens, slots, "", 0, 0)
	must(t, err)
	if prefix != 0 || node == 0 {
		t.Fatalf("InsertSwa = %d, %d", prefix, node)
	}
	if e, pr, err := p.StateSizes(); err != nil || e != 6 || pr != 0 {
		t.Fatalf("StateSizes = %d, %d, %v; want 6 window tokens", e, pr, err)
	}
	// Our duplicates are freed by the tree.
	dup, err := p.Alloc(6)
	must(t, err)
	prefix, _, err = p.InsertSwa(tokens, dup, "", 0, 0)
	must(t, err)
	if prefix != 6 {
		t.Fatalf("second InsertSwa prefix = %d, want 6", prefix)
	}
	full, window, err := p.SWAAvailable()
	must(t, err)
	if full != 58 || window != 26 {
		t.Fatalf("SWAAvailable = %d, %d; want 58, 26", full, window)
	}
	evicted, swaEvicted, err := p.EvictSwa(6, 0)
	must(t, err)
	if evicted != 6 || swaEvicted != 6 {
		t.Fatalf("EvictSwa = %d, %d", evicted, swaEvicted)
	}
	_, err = p.EvictMamba(1)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, _, err = p.InsertSwa(tokens, slots[:5], "", 0, 0)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = p.Check()
	must(t, err)

	// kvseq on swa: window slots that left the window are freed at the next step.
	seq, _, err := p.Begin(tokenRange(100, 10), "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{seq}, []int64{10})
	must(t, err)
	_, err = p.SeqDecode([]uint64{seq}, []int32{7})
	must(t, err)
	full, window, err = p.SWAAvailable()
	must(t, err)
	if full != 53 || window != 32-5 {
		t.Fatalf("SWAAvailable after decode = %d, %d; want 53, 27", full, window)
	}
	must(t, p.Finish(seq, 11))
	_, err = p.Check()
	must(t, err)
}
