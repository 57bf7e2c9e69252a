package kvpool_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// hostConfig: cacheConfig with a host tier of 4x the device tokens (CPU pool:
// plain memory, copies land inside the calls; no free-memory headroom).
var hostConfig = strings.Replace(cacheConfig, `"prefix_cache":`, `"host_cache":{"ratio":4,"headroom_bytes":0},"prefix_cache":`, 1)

// hostBytesPerToken: 2 layers x (K + V) x 2 heads x 8 f32 values.
const hostBytesPerToken = 2 * 2 * 2 * 8 * 4

func hostStats(t *testing.T, p *kvpool.Pool) kvpool.HostStats {
	t.Helper()
	s, err := p.HostStats()
	must(t, err)
	return s
}

func hostNodeState(t *testing.T, p *kvpool.Pool, node uint64) kvpool.HostNodeState {
	t.Helper()
	s, err := p.HostNodeState(node)
	must(t, err)
	return s
}

// kvPattern is a K or V row block for n tokens of one layer, distinct per (layer, which).
func kvPattern(n, layer, which int) []byte {
	b := make([]byte, n*2*8*4)
	for i := range b {
		b[i] = byte(i*7 + layer*31 + which*101 + 1)
	}
	return b
}

// insertHostOnly caches tokens with KV data written into fresh slots, then
// evicts them from the device: the node becomes host-only.
func insertHostOnly(t *testing.T, p *kvpool.Pool, tokens []int32) uint64 {
	t.Helper()
	slots, err := p.Alloc(len(tokens))
	must(t, err)
	for layer := 0; layer < 2; layer++ {
		must(t, p.SetKV(layer, slots, kvPattern(len(tokens), layer, 0), kvPattern(len(tokens), layer, 1),
			kvpool.DTypeF32, 1, 1))
	}
	prefix, node, err := p.Insert(tokens, slots, "", 0)
	must(t, err)
	if prefix != 0 {
		t.Fatalf("Insert: prefix %d, want 0", prefix)
	}
	// write_through (the default) copies a new node; Insert (radix_insert, which an engine calls
	// after its forward pass) starts the copy before it returns, and on a CPU pool it has landed.
	if s := hostNodeState(t, p, node); !s.OnDevice || !s.OnHost || s.Tokens != len(tokens) {
		t.Fatalf("HostNodeState after Insert = %+v, want on device and host with %d tokens", s, len(tokens))
	}
	completed, err := p.HostPoll(false)
	must(t, err)
	if completed != 0 {
		t.Fatalf("HostPoll released %d copies, want 0 (CPU copies are never in flight)", completed)
	}
	if s := hostNodeState(t, p, node); !s.OnDevice || !s.OnHost || s.Tokens != len(tokens) {
		t.Fatalf("HostNodeState after HostPoll = %+v, want on device and host with %d tokens", s, len(tokens))
	}
	evicted, err := p.Evict(len(tokens))
	must(t, err)
	if evicted != len(tokens) {
		t.Fatalf("Evict freed %d device tokens, want %d", evicted, len(tokens))
	}
	if s := hostNodeState(t, p, node); s.OnDevice || !s.OnHost || s.Tokens != len(tokens) {
		t.Fatalf("HostNodeState after Evict = %+v, want host-only with %d tokens", s, len(tokens))
	}
	return node
}

func TestHostTierEvictMatchLoadBack(t *testing.T) {
	p := open(t, hostConfig)
	s := hostStats(t, p)
	if s.CapacityTokens <= 128 || s.UsedTokens != 0 || s.Backups != 0 || s.Loads != 0 {
		t.Fatalf("HostStats of a fresh pool = %+v, want more than 128 tokens of capacity and no traffic", s)
	}

	tokens := tokenRange(500, 16)
	node := insertHostOnly(t, p, tokens)
	s = hostStats(t, p)
	if s.Backups < 1 || s.BackupTokens != 16 || s.BytesToHost != 16*hostBytesPerToken || s.UsedTokens != 16 ||
		s.HostOnlyTokens != 16 {
		t.Fatalf("HostStats after backup and device eviction = %+v", s)
	}
	events, err := p.TakeEvents()
	must(t, err)
	var stored int
	for _, e := range events {
		if e.Type == kvpool.EventHostStored {
			stored++
		}
	}
	if stored != 4 || kvpool.EventHostStored.String() != "HostStored" {
		t.Fatalf("events = %+v: want one HostStored per page (4)", events)
	}

	// The device has nothing; the host has all 16 tokens.
	got, _, err := p.Match(tokens, "")
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("Match of a host-only prefix = %v, want nothing on the device", got)
	}
	m, err := p.HostMatch(append(tokenRange(500, 16), 1, 2), "")
	must(t, err)
	if len(m.Slots) != 0 || m.HostTokens != 16 || m.HostNode != node {
		t.Fatalf("HostMatch = %+v, want 16 host tokens ending at node %d", m, node)
	}

	// Load-back: fresh device slots holding the KV that was written.
	slots, dnode, err := p.HostLoadBack(m.HostNode)
	must(t, err)
	if len(slots) != 16 || dnode == 0 {
		t.Fatalf("HostLoadBack = (%v, %d), want 16 slots and a node", slots, dnode)
	}
	if _, err := p.HostPoll(true); err != nil {
		t.Fatalf("HostPoll: %v", err)
	}
	for layer := 0; layer < 2; layer++ {
		k := make([]byte, 16*2*8*4)
		v := make([]byte, len(k))
		must(t, p.GetKV(layer, slots, k, v, kvpool.DTypeF32))
		if !bytes.Equal(k, kvPattern(16, layer, 0)) || !bytes.Equal(v, kvPattern(16, layer, 1)) {
			t.Fatalf("layer %d: loaded KV differs from what was written", layer)
		}
	}
	if st := hostNodeState(t, p, dnode); !st.OnDevice || !st.OnHost {
		t.Fatalf("HostNodeState after HostLoadBack = %+v, want device+host", st)
	}
	got, _, err = p.Match(tokens, "")
	must(t, err)
	wantInts(t, "Match after HostLoadBack", got, slots)
	s = hostStats(t, p)
	if s.Loads != 1 || s.LoadTokens != 16 || s.BytesToDevice != 16*hostBytesPerToken || s.HostOnlyTokens != 0 ||
		s.CopiesInFlight != 0 {
		t.Fatalf("HostStats after HostLoadBack = %+v", s)
	}
	// A device node: nothing to load.
	again, _, err := p.HostLoadBack(dnode)
	must(t, err)
	if len(again) != 0 {
		t.Fatalf("HostLoadBack of a device node loaded %v", again)
	}

	// Host eviction: only host-only leaves go.
	n, err := p.HostEvict(16)
	must(t, err)
	if n != 0 {
		t.Fatalf("HostEvict freed %d tokens of a node on the device", n)
	}
	evicted, err := p.Evict(16)
	must(t, err)
	if evicted != 16 {
		t.Fatalf("Evict = %d, want 16", evicted)
	}
	n, err = p.HostEvict(16)
	must(t, err)
	if n != 16 {
		t.Fatalf("HostEvict = %d, want 16", n)
	}
	s = hostStats(t, p)
	if s.UsedTokens != 0 || s.HostOnlyTokens != 0 || s.HostEvictedTokens != 16 {
		t.Fatalf("HostStats after HostEvict = %+v", s)
	}
	_, err = p.HostNodeState(dnode)
	wantCode(t, err, kvpool.ErrInvalidArgument) // the node is gone
	_, _, err = p.HostLoadBack(dnode)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	m, err = p.HostMatch(tokens, "")
	must(t, err)
	if len(m.Slots) != 0 || m.HostTokens != 0 {
		t.Fatalf("HostMatch after HostEvict = %+v, want nothing", m)
	}
	events, err = p.TakeEvents()
	must(t, err)
	var removed int
	for _, e := range events {
		if e.Type == kvpool.EventHostRemoved {
			removed++
		}
	}
	if removed != 4 {
		t.Fatalf("events = %+v: want one HostRemoved per page (4)", events)
	}
	if _, err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestHostTierLoadBackCountsDeviceEvictions(t *testing.T) {
	p := open(t, hostConfig)
	key := tokenRange(500, 16)
	insertHostOnly(t, p, key)
	// Fill the device (128 tokens) with eight 16-token keys: the load-back must evict one.
	for k := 0; k < 8; k++ {
		slots, err := p.Alloc(16)
		must(t, err)
		_, _, err = p.Insert(tokenRange(int32(1000*(k+1)), 16), slots, "", 0)
		must(t, err)
	}
	if s := hostStats(t, p); s.LoadEvictedTokens != 0 {
		t.Fatalf("HostStats before any load-back = %+v, want LoadEvictedTokens 0", s)
	}
	m, err := p.HostMatch(key, "")
	must(t, err)
	slots, _, err := p.HostLoadBack(m.HostNode)
	must(t, err)
	if len(slots) != 16 {
		t.Fatalf("HostLoadBack loaded %d tokens, want 16", len(slots))
	}
	if s := hostStats(t, p); s.LoadEvictedTokens != 16 || s.Loads != 1 {
		t.Fatalf("HostStats after a load-back into a full device = %+v, want LoadEvictedTokens 16", s)
	}
}

func TestHostTierBeginReportsHostHit(t *testing.T) {
	p := open(t, hostConfig)
	prompt := tokenRange(700, 17)
	insertHostOnly(t, p, prompt[:16])
	seq, cached, err := p.Begin(prompt, "")
	must(t, err)
	if cached != 16 {
		t.Fatalf("Begin found %d tokens, want the 16 on the host", cached)
	}
	info := seqInfo(t, p, seq)
	if info.PrefixHit != 16 || info.HostHit != 16 || info.Cached != 16 {
		t.Fatalf("SeqInfo = %+v, want PrefixHit 16 and HostHit 16", info)
	}
	if s := hostStats(t, p); s.Loads != 1 || s.LoadTokens != 16 {
		t.Fatalf("HostStats after Begin = %+v, want one load of 16 tokens", s)
	}
	_, err = p.SeqExtend([]uint64{seq}, []int64{1})
	must(t, err)
	must(t, p.Finish(seq, 17))
	wantAccounting(t, p)

	// Without a host tier, HostHit stays 0.
	q := open(t, cacheConfig)
	seq, _, err = q.Begin(prompt, "")
	must(t, err)
	if info := seqInfo(t, q, seq); info.HostHit != 0 {
		t.Fatalf("SeqInfo without a host tier = %+v", info)
	}
	must(t, q.Abort(seq))
}

func TestHostTierLoadSetsStreamPoll(t *testing.T) {
	p := open(t, hostConfig)
	set, err := p.HostLoadSet()
	must(t, err)
	if set != 0 {
		t.Fatalf("HostLoadSet of a fresh pool = %d, want 0", set)
	}
	for _, want := range []int32{1, 2, 0, 1} {
		next, err := p.HostNextLoadSet()
		must(t, err)
		cur, err := p.HostLoadSet()
		must(t, err)
		if next != want || cur != want {
			t.Fatalf("HostNextLoadSet = %d, HostLoadSet = %d, want %d", next, cur, want)
		}
	}
	must(t, p.HostSetStream(0))
	for s := int32(0); s < 3; s++ {
		for layer := int32(0); layer < 2; layer++ {
			must(t, p.HostWaitLayer(s, layer, 0))
		}
	}
	wantCode(t, p.HostWaitLayer(0, 2, 0), kvpool.ErrInvalidArgument)  // 2 layers
	wantCode(t, p.HostWaitLayer(0, -1, 0), kvpool.ErrInvalidArgument) // no such layer
	wantCode(t, p.HostWaitLayer(3, 0, 0), kvpool.ErrInvalidArgument)  // sets 0..2
	wantCode(t, p.HostWaitLayer(-1, 0, 0), kvpool.ErrInvalidArgument)
	for _, wait := range []bool{false, true} {
		n, err := p.HostPoll(wait)
		must(t, err)
		if n != 0 {
			t.Fatalf("HostPoll(%v) of an idle pool released %d copies", wait, n)
		}
	}
	_, err = p.HostEvict(-1)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = p.HostMatch(tokenRange(1, 4), "a\x00b")
	wantCode(t, err, kvpool.ErrInvalidArgument)
}

func TestHostTierUnsupportedWithoutHostCache(t *testing.T) {
	p := open(t, cacheConfig)
	_, err := p.HostStats()
	e := wantCode(t, err, kvpool.ErrUnsupported)
	if !strings.Contains(e.Msg, "host") {
		t.Fatalf("message %q does not mention the host tier", e.Msg)
	}
	_, err = p.HostPoll(false)
	wantCode(t, err, kvpool.ErrUnsupported)
	wantCode(t, p.HostSetStream(0), kvpool.ErrUnsupported)
	_, err = p.HostNextLoadSet()
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.HostLoadSet()
	wantCode(t, err, kvpool.ErrUnsupported)
	wantCode(t, p.HostWaitLayer(0, 0, 0), kvpool.ErrUnsupported)
	_, err = p.HostMatch(tokenRange(1, 4), "")
	wantCode(t, err, kvpool.ErrUnsupported)
	_, _, err = p.HostLoadBack(1)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.HostEvict(4)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.HostNodeState(1)
	wantCode(t, err, kvpool.ErrUnsupported)
	// A closed pool: invalid argument, as every call.
	must(t, p.Close())
	_, err = p.HostStats()
	wantCode(t, err, kvpool.ErrInvalidArgument)
}

// hybridHostConfig: a hybrid_linear pool (full attention at layer 3, page_size 1) whose
// full-attention KV has a host tier; mamba states stay on the device.
const hybridHostConfig = `{"model":{"num_layers":4,"attention":"hybrid_linear","kv_heads":2,"head_dim":8,` +
	`"full_attention_layers":[3],"mamba":{"conv_shape":[4,3],"ssm_shape":[2,4,4],"conv_dtype":"f32","ssm_dtype":"f32"}},` +
	`"pool":{"kv_dtype":"f32","max_total_tokens":64,"max_running_requests":2,"mamba_cache_size":10,"max_context_len":64},` +
	`"prefix_cache":{"kind":"radix"},"host_cache":{"ratio":4,"headroom_bytes":0}}`

// computeThenEvict runs a request over prompt on an empty write_through pool of 64 device
// tokens, writes kvPattern rows into `layers`, finishes it (which copies it to the host) and
// evicts it from the device: the prompt is host-only afterwards.
func computeThenEvict(t *testing.T, p *kvpool.Pool, prompt []int32, layers []int) {
	t.Helper()
	n := len(prompt)
	seq, cached, err := p.Begin(prompt, "")
	must(t, err)
	if cached != 0 {
		t.Fatalf("Begin on an empty cache found %d tokens", cached)
	}
	slots, err := p.SeqExtend([]uint64{seq}, []int64{int64(n)})
	must(t, err)
	for _, layer := range layers {
		must(t, p.SetKV(layer, slots, kvPattern(n, layer, 0), kvPattern(n, layer, 1), kvpool.DTypeF32, 1, 1))
	}
	must(t, p.Finish(seq, n))
	if s := hostStats(t, p); s.UsedTokens != uint64(n) {
		t.Fatalf("HostStats after Finish = %+v, want the %d tokens copied (write_through)", s, n)
	}
	evicted, err := p.Evict(64)
	must(t, err)
	if evicted != n {
		t.Fatalf("Evict freed %d device tokens, want %d", evicted, n)
	}
	if s := hostStats(t, p); s.HostOnlyTokens != uint64(n) {
		t.Fatalf("HostStats after Evict = %+v, want %d host-only tokens", s, n)
	}
}

func TestHostTierHybridBeginLoadsTheFullAttentionKvBack(t *testing.T) {
	p := open(t, hybridHostConfig)
	prompt := tokenRange(300, 24)
	computeThenEvict(t, p, prompt, []int{3})
	k, v := kvPattern(24, 3, 0), kvPattern(24, 3, 1)
	longer := append(append([]int32{}, prompt...), 9)
	seq, cached, err := p.Begin(longer, "")
	must(t, err)
	if info := seqInfo(t, p, seq); cached != 24 || info.HostHit != 24 {
		t.Fatalf("Begin after eviction: cached %d, SeqInfo %+v, want 24 tokens loaded from the host", cached, info)
	}
	held, err := p.SeqSlots(seq)
	must(t, err)
	gotK, gotV := make([]byte, len(k)), make([]byte, len(v))
	must(t, p.GetKV(3, held, gotK, gotV, kvpool.DTypeF32))
	if !bytes.Equal(gotK, k) || !bytes.Equal(gotV, v) {
		t.Fatalf("the loaded-back KV differs from what was written")
	}
	must(t, p.Abort(seq))
	a, err := p.Accounting()
	must(t, err)
	if a.Capacity != 64 || a.Available+a.Evictable+a.Protected+a.Uncached != a.Capacity {
		t.Fatalf("accounting %+v: available+evictable+protected+uncached != capacity 64", a)
	}
	if _, err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// swaHostConfig: a swa pool (layers 0 and 2 slide over a 4-token window, 1 and 3 are full
// attention, page_size 1) with a host tier: a node's host copy holds its full-layer rows and
// the window rows of its last 4 tokens.
const swaHostConfig = `{"model":{"num_layers":4,"attention":"swa","kv_heads":2,"head_dim":8,"sliding_window":4,` +
	`"swa_layer_pattern":"SF"},"pool":{"kv_dtype":"f32","max_total_tokens":64,"max_running_requests":2,"max_context_len":64},` +
	`"prefix_cache":{"kind":"radix"},"host_cache":{"ratio":4,"headroom_bytes":0}}`

func TestHostTierSwaEvictMatchLoadBackHostEvict(t *testing.T) {
	p := open(t, swaHostConfig)
	prompt := tokenRange(300, 24)
	computeThenEvict(t, p, prompt, []int{0, 1, 2, 3})
	longer := append(append([]int32{}, prompt...), 9)
	m, err := p.HostMatch(longer, "")
	must(t, err)
	if len(m.Slots) != 0 || m.HostTokens != 24 {
		t.Fatalf("HostMatch = %+v, want 24 host tokens and nothing on the device", m)
	}
	if s := hostNodeState(t, p, m.HostNode); s.OnDevice || !s.OnHost || s.Tokens != 24 {
		t.Fatalf("HostNodeState = %+v, want host-only with 24 tokens", s)
	}

	loaded, node, err := p.HostLoadBack(m.HostNode)
	must(t, err)
	if len(loaded) != 24 || node != m.HostNode {
		t.Fatalf("HostLoadBack = (%d slots, node %d), want 24 slots and node %d", len(loaded), node, m.HostNode)
	}
	// The full layers come back for every token, the window layers for the last window.
	row := 2 * 8 * 4
	for layer := 0; layer < 4; layer++ {
		from := 0
		if layer%2 == 0 {
			from = 20
		}
		k, v := make([]byte, (24-from)*row), make([]byte, (24-from)*row)
		must(t, p.GetKV(layer, loaded[from:], k, v, kvpool.DTypeF32))
		if !bytes.Equal(k, kvPattern(24, layer, 0)[from*row:]) || !bytes.Equal(v, kvPattern(24, layer, 1)[from*row:]) {
			t.Fatalf("layer %d: the loaded-back KV differs from what was written", layer)
		}
	}
	// The node was split where its window rows begin: its handle names the 4-token lower part.
	if s := hostNodeState(t, p, node); !s.OnDevice || !s.OnHost || s.Tokens != 4 {
		t.Fatalf("HostNodeState after HostLoadBack = %+v, want device+host with 4 tokens", s)
	}
	got, _, err := p.Match(longer, "")
	must(t, err)
	wantInts(t, "Match after HostLoadBack", got, loaded)

	// Out of the device again, then out of the host.
	evicted, err := p.Evict(64)
	must(t, err)
	if evicted != 24 {
		t.Fatalf("Evict freed %d device tokens, want 24", evicted)
	}
	n, err := p.HostEvict(64)
	must(t, err)
	if n != 24 {
		t.Fatalf("HostEvict = %d, want 24", n)
	}
	if s := hostStats(t, p); s.UsedTokens != 0 || s.HostOnlyTokens != 0 || s.Loads != 1 || s.LoadTokens != 24 {
		t.Fatalf("HostStats after HostEvict = %+v", s)
	}
	if _, err := p.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}
