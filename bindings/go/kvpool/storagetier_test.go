package kvpool_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// storageConfig: a pool of 64 device tokens (page_size 4) with a host tier
// of 4x that and a file storage tier in dir. Pools of the same model name
// share what they store.
func storageConfig(dir string) string {
	return `{"model":{"name":"tiny","num_layers":2,"kv_heads":2,"head_dim":8},` +
		`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":128},` +
		`"prefix_cache":{"kind":"radix"},"host_cache":{"ratio":4,"headroom_bytes":0},` +
		`"storage":{"backend":"file","path":` + strconv.Quote(dir) + `,"prefetch_threshold_tokens":8}}`
}

func storageStats(t *testing.T, p *kvpool.Pool) kvpool.StorageStats {
	t.Helper()
	s, err := p.StorageStats()
	must(t, err)
	return s
}

// prefetchAll prefetches prompt, polls until the prefetch is done and ends
// it; returns the last poll and the tokens inserted.
func prefetchAll(t *testing.T, p *kvpool.Pool, prompt []int32) (kvpool.StoragePrefetchInfo, int) {
	t.Helper()
	id, skipped, err := p.StoragePrefetch(prompt, "")
	must(t, err)
	if id == 0 || skipped != kvpool.StorageSkipNone {
		t.Fatalf("StoragePrefetch = (%d, %v), want an id and StorageSkipNone", id, skipped)
	}
	var info kvpool.StoragePrefetchInfo
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err = p.StoragePrefetchPoll(id)
		must(t, err)
		if info.Done || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !info.Done {
		t.Fatalf("StoragePrefetchPoll after 10 s = %+v, want done", info)
	}
	inserted, err := p.StoragePrefetchEnd(id)
	must(t, err)
	// An ended prefetch is unknown.
	_, err = p.StoragePrefetchPoll(id)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = p.StoragePrefetchEnd(id)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	return info, inserted
}

func TestStorageTierSecondPoolLoadsWhatTheFirstStored(t *testing.T) {
	dir, err := os.MkdirTemp("", "kvpool-go-storage-")
	must(t, err)
	defer os.RemoveAll(dir)
	prompt := tokenRange(11, 41) // 10 whole pages and one token

	// Pool a computes the whole prompt (with KV rows) and finishes: its pages
	// are cached, copied to the host and backed up to storage.
	a, err := kvpool.Open(storageConfig(dir))
	must(t, err)
	defer a.Close()
	seq, cached, err := a.Begin(prompt, "")
	must(t, err)
	if cached != 0 {
		t.Fatalf("Begin on a fresh pool found %d tokens", cached)
	}
	slots, err := a.SeqExtend([]uint64{seq}, []int64{int64(len(prompt))})
	must(t, err)
	for layer := 0; layer < 2; layer++ {
		must(t, a.SetKV(layer, slots, kvPattern(len(prompt), layer, 0), kvPattern(len(prompt), layer, 1),
			kvpool.DTypeF32, 1, 1))
	}
	must(t, a.Finish(seq, len(prompt)))
	must(t, a.StorageFlush())
	sa := storageStats(t, a)
	if sa.Backups != 1 || sa.BackupTokens != 40 || sa.BackupPages != 10 || sa.StorePuts != 10 ||
		sa.BackupPagesFailed != 0 || sa.BackupsQueued != 0 {
		t.Fatalf("StorageStats of the storing pool = %+v, want 1 backup of 10 pages (40 tokens)", sa)
	}

	// Pool b has never seen the prompt: storage holds all 10 pages.
	b, err := kvpool.Open(storageConfig(dir))
	must(t, err)
	defer b.Close()
	info, inserted := prefetchAll(t, b, prompt)
	if inserted != 40 || info.Revoked || !info.Ready || !info.Searched || info.AskedTokens != 40 ||
		info.HitTokens != 40 || info.LoadedTokens != 40 {
		t.Fatalf("prefetch: last poll %+v, %d tokens inserted; want 40 tokens asked, found, loaded and inserted",
			info, inserted)
	}
	sb := storageStats(t, b)
	if sb.Prefetches != 1 || sb.PrefetchTokens != 40 || sb.PrefetchHitTokens != 40 ||
		sb.PrefetchLoadedTokens != 40 || sb.PrefetchInsertedTokens != 40 || sb.PrefetchesRunning != 0 {
		t.Fatalf("StorageStats after the prefetch = %+v", sb)
	}
	if h := hostStats(t, b); h.HostOnlyTokens != 40 {
		t.Fatalf("HostStats after the prefetch = %+v, want 40 host-only tokens", h)
	}

	// Begin matches all but the last token: 40, loaded from the host tier
	// where the prefetch put them, with the KV pool a wrote.
	seq, cached, err = b.Begin(prompt, "")
	must(t, err)
	if cached != 40 {
		t.Fatalf("Begin after the prefetch found %d tokens, want 40", cached)
	}
	si := seqInfo(t, b, seq)
	if si.PrefixHit != 40 || si.HostHit != 40 || si.StorageHit != 40 {
		t.Fatalf("SeqInfo = %+v, want PrefixHit, HostHit and StorageHit 40", si)
	}
	held, err := b.SeqSlots(seq)
	must(t, err)
	if len(held) != 40 {
		t.Fatalf("SeqSlots = %v, want 40 slots", held)
	}
	for layer := 0; layer < 2; layer++ {
		k := make([]byte, 40*2*8*4)
		v := make([]byte, len(k))
		must(t, b.GetKV(layer, held, k, v, kvpool.DTypeF32))
		if !bytes.Equal(k, kvPattern(41, layer, 0)[:len(k)]) || !bytes.Equal(v, kvPattern(41, layer, 1)[:len(v)]) {
			t.Fatalf("layer %d: the KV loaded from storage differs from what pool a wrote", layer)
		}
	}
	must(t, b.Abort(seq))
	if s := storageStats(t, b); s.StorageHitTokens != 40 {
		t.Fatalf("StorageStats after Begin = %+v, want 40 storage-hit tokens", s)
	}

	// A prompt whose part past the cached prefix is under the threshold
	// starts nothing (and the call succeeds).
	id, skipped, err := b.StoragePrefetch(tokenRange(900, 5), "")
	must(t, err)
	if id != 0 || skipped != kvpool.StorageSkipBelowThreshold || skipped.String() != "BelowThreshold" {
		t.Fatalf("StoragePrefetch of 5 tokens = (%d, %v), want (0, BelowThreshold)", id, skipped)
	}
	_, _, err = b.StoragePrefetch(prompt, "a\x00b")
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = b.StoragePrefetchPoll(12345)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = b.StoragePrefetchEnd(12345)
	wantCode(t, err, kvpool.ErrInvalidArgument)

	// Clear empties the store: a third pool finds nothing (the prefetch is revoked).
	must(t, a.StorageClear())
	c, err := kvpool.Open(storageConfig(dir))
	must(t, err)
	defer c.Close()
	info, inserted = prefetchAll(t, c, prompt)
	if !info.Revoked || info.HitTokens != 0 || inserted != 0 {
		t.Fatalf("prefetch after StorageClear: last poll %+v, %d tokens inserted; want revoked, nothing", info, inserted)
	}
	if s := storageStats(t, c); s.PrefetchesRevoked != 1 {
		t.Fatalf("StorageStats after a revoked prefetch = %+v", s)
	}
}

func TestStorageTierUnsupportedWithoutStorage(t *testing.T) {
	p := open(t, hostConfig)
	_, err := p.StorageStats()
	e := wantCode(t, err, kvpool.ErrUnsupported)
	if !strings.Contains(e.Msg, "storage") {
		t.Fatalf("message %q does not mention the storage tier", e.Msg)
	}
	_, _, err = p.StoragePrefetch(tokenRange(1, 16), "")
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.StoragePrefetchPoll(1)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.StoragePrefetchEnd(1)
	wantCode(t, err, kvpool.ErrUnsupported)
	wantCode(t, p.StorageFlush(), kvpool.ErrUnsupported)
	wantCode(t, p.StorageClear(), kvpool.ErrUnsupported)
	// Without a storage tier, StorageHit stays 0.
	seq, _, err := p.Begin(tokenRange(1, 9), "")
	must(t, err)
	if info := seqInfo(t, p, seq); info.StorageHit != 0 {
		t.Fatalf("SeqInfo without a storage tier = %+v", info)
	}
	must(t, p.Abort(seq))
	// A closed pool: invalid argument, as every call.
	must(t, p.Close())
	_, err = p.StorageStats()
	wantCode(t, err, kvpool.ErrInvalidArgument)
}

func TestStorageSkipMatchesHeader(t *testing.T) {
	for _, c := range []struct {
		got  kvpool.StorageSkip
		want kvpool.Enum_SS_kvstore_skip
	}{
		{kvpool.StorageSkipNone, kvpool.KVSTORE_SKIP_NONE},
		{kvpool.StorageSkipBelowThreshold, kvpool.KVSTORE_SKIP_BELOW_THRESHOLD},
		{kvpool.StorageSkipNotBackedUp, kvpool.KVSTORE_SKIP_NOT_BACKED_UP},
		{kvpool.StorageSkipCapacity, kvpool.KVSTORE_SKIP_CAPACITY},
		{kvpool.StorageSkipHostFull, kvpool.KVSTORE_SKIP_HOST_FULL},
	} {
		if int(c.got) != int(c.want) {
			t.Errorf("%s = %d, header %d", c.got, c.got, c.want)
		}
	}
}
