package kvpool_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// Layers 0-2 are mamba layers (conv 4x3, ssm 2x4x4, f32), layer 3 is full attention.
const hybridConfig = `{"model":{"num_layers":4,"attention":"hybrid_linear","kv_heads":2,"head_dim":8,` +
	`"full_attention_layers":[3],"mamba":{"conv_shape":[4,3],"ssm_shape":[2,4,4],"conv_dtype":"f32","ssm_dtype":"f32"}},` +
	`"pool":{"kv_dtype":"f32","max_total_tokens":64,"max_running_requests":10,"mamba_cache_size":20,` +
	`"max_context_len":32},"prefix_cache":{"kind":"none"}}`

const (
	convFloats = 4 * 3
	ssmFloats  = 2 * 4 * 4
)

func mambaAvailable(t *testing.T, p *kvpool.Pool) int {
	t.Helper()
	n, err := p.MambaAvailable()
	must(t, err)
	return n
}

func ramp(n int, base float32) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = base + float32(i)*0.5
	}
	return f
}

func readState(t *testing.T, p *kvpool.Pool, layer int, slot int32) (conv, ssm []float32) {
	t.Helper()
	conv, ssm = make([]float32, convFloats), make([]float32, ssmFloats)
	must(t, p.MambaRead(layer, slot, kvpool.Float32Bytes(conv), kvpool.Float32Bytes(ssm)))
	return conv, ssm
}

func sameFloats(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if !bytes.Equal(kvpool.Float32Bytes(got), kvpool.Float32Bytes(want)) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestMambaStates(t *testing.T) {
	p := open(t, hybridConfig)
	if n := mambaAvailable(t, p); n != 20 {
		t.Fatalf("MambaAvailable = %d, want 20", n)
	}
	slots, err := p.MambaAlloc(2)
	must(t, err)
	wantInts(t, "MambaAlloc(2)", slots, []int32{1, 2})
	if n := mambaAvailable(t, p); n != 18 {
		t.Fatalf("MambaAvailable = %d, want 18", n)
	}

	// Allocation zeroes the state; a write is read back exactly.
	conv, ssm := readState(t, p, 1, slots[0])
	sameFloats(t, "fresh conv", conv, make([]float32, convFloats))
	sameFloats(t, "fresh ssm", ssm, make([]float32, ssmFloats))
	wantConv, wantSSM := ramp(convFloats, 1), ramp(ssmFloats, -3)
	must(t, p.MambaWrite(1, slots[0], kvpool.Float32Bytes(wantConv), kvpool.Float32Bytes(wantSSM)))
	conv, ssm = readState(t, p, 1, slots[0])
	sameFloats(t, "conv", conv, wantConv)
	sameFloats(t, "ssm", ssm, wantSSM)
	// Other layers of the slot are untouched.
	conv, _ = readState(t, p, 0, slots[0])
	sameFloats(t, "layer 0 conv", conv, make([]float32, convFloats))

	must(t, p.MambaCopy(slots[0], slots[1]))
	conv, ssm = readState(t, p, 1, slots[1])
	sameFloats(t, "copied conv", conv, wantConv)
	sameFloats(t, "copied ssm", ssm, wantSSM)

	fork, err := p.MambaFork(slots[0])
	must(t, err)
	if fork != 3 {
		t.Errorf("MambaFork = %d, want 3", fork)
	}
	conv, ssm = readState(t, p, 1, fork)
	sameFloats(t, "forked conv", conv, wantConv)
	sameFloats(t, "forked ssm", ssm, wantSSM)

	// Wrong sizes and non-mamba layers are rejected.
	wantCode(t, p.MambaWrite(1, slots[0], make([]byte, 4), kvpool.Float32Bytes(wantSSM)), kvpool.ErrInvalidArgument)
	wantCode(t, p.MambaRead(3, slots[0], make([]byte, 4*convFloats), make([]byte, 4*ssmFloats)), kvpool.ErrInvalidArgument)

	must(t, p.MambaFree([]int32{fork}))
	wantCode(t, p.MambaFree([]int32{fork}), kvpool.ErrInvalidArgument)
	if n := mambaAvailable(t, p); n != 18 {
		t.Errorf("MambaAvailable = %d, want 18", n)
	}
	_, err = p.MambaAlloc(19)
	wantCode(t, err, kvpool.ErrOutOfMemory)

	// Hybrid rows: a fresh state for request 0, request 1 keeps slots[1].
	rows, states, err := p.ReqAllocHybrid([]int32{-1, slots[1]})
	must(t, err)
	if len(rows) != 2 || rows[0] == rows[1] || rows[0] < 1 {
		t.Fatalf("ReqAllocHybrid rows = %v", rows)
	}
	if states[1] != slots[1] || states[0] == slots[0] || states[0] == slots[1] || states[0] < 1 {
		t.Fatalf("ReqAllocHybrid states = %v (kept %d)", states, slots[1])
	}
	conv, _ = readState(t, p, 1, states[0])
	sameFloats(t, "fresh hybrid state", conv, make([]float32, convFloats))
	slot, pingPong, err := p.ReqMambaSlots(rows[0])
	must(t, err)
	if slot != states[0] || pingPong != [2]int32{-1, -1} {
		t.Errorf("ReqMambaSlots = %d, %v; want %d, [-1 -1]", slot, pingPong, states[0])
	}
	// A state held by a row is freed with its row only.
	wantCode(t, p.MambaFree(states[1:]), kvpool.ErrInvalidArgument)
	wantCode(t, p.ReqFree(rows[:1]), kvpool.ErrInvalidArgument)
	report, err := p.Check()
	must(t, err)
	if !strings.HasPrefix(report, "ok: 0 slots held, 64 free, 2 rows held, 3 mamba slots held") {
		t.Errorf("Check() = %q", report)
	}

	must(t, p.ReqFreeHybrid(rows, true, -1))
	if n := mambaAvailable(t, p); n != 19 {
		t.Errorf("MambaAvailable = %d after ReqFreeHybrid, want 19 (slots[0] still held)", n)
	}
	if n := reqAvailable(t, p); n != 10 {
		t.Errorf("ReqAvailable = %d, want 10", n)
	}
	must(t, p.MambaFree(slots[:1]))
	stats, err := p.Stats()
	must(t, err)
	if stats.MambaCapacity != 20 || stats.MambaAvailable != 20 || stats.MambaBytes == 0 {
		t.Errorf("Stats mamba fields = %d, %d, %d", stats.MambaCapacity, stats.MambaAvailable, stats.MambaBytes)
	}

	// Mamba functions on a pool without mamba states.
	paged := open(t, pagedConfig)
	_, err = paged.MambaAvailable()
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = paged.MambaAlloc(1)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, _, err = paged.ReqAllocHybrid([]int32{-1})
	wantCode(t, err, kvpool.ErrUnsupported)
}
