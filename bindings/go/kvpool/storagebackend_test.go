package kvpool_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// customConfig: storageConfig's pool with the custom backend instead of a directory.
const customConfig = `{"model":{"name":"tiny","num_layers":2,"kv_heads":2,"head_dim":8},` +
	`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":128},` +
	`"prefix_cache":{"kind":"radix"},"host_cache":{"ratio":4,"headroom_bytes":0},` +
	`"storage":{"backend":"custom","prefetch_threshold_tokens":8}}`

// mapBackend: a map under a mutex, with switches that make each method
// panic (or Clear fail) or damage what it reads.
type mapBackend struct {
	mu       sync.Mutex
	values   map[string][]byte
	failures []string

	puts, gets, exists, clears                         atomic.Int32
	panicPut, panicGet, panicExists, failClear, damage atomic.Bool
}

func newMapBackend() *mapBackend { return &mapBackend{values: map[string][]byte{}} }

func (b *mapBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.values)
}

func (b *mapBackend) failed(entry string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.failures {
		if f == entry {
			return true
		}
	}
	return false
}

func (b *mapBackend) Put(keys []string, values [][]byte, results []kvpool.StorageResult) {
	b.puts.Add(1)
	if b.panicPut.Load() {
		panic("server down")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, k := range keys {
		if _, ok := b.values[k]; !ok {
			b.values[k] = values[i] // write-once: a key names the same bytes
		}
		results[i] = kvpool.StorageOK
	}
}

func (b *mapBackend) Get(keys []string, values [][]byte, results []kvpool.StorageResult) {
	b.gets.Add(1)
	if b.panicGet.Load() {
		panic("server down")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, k := range keys {
		v, ok := b.values[k]
		if !ok {
			results[i] = kvpool.StorageMiss
			continue
		}
		values[i] = v
		if b.damage.Load() {
			values[i] = append([]byte(nil), v...)
			values[i][len(v)/2] ^= 0x5a // one payload byte: the checksum must catch it
		}
		results[i] = kvpool.StorageOK
	}
}

func (b *mapBackend) ExistsPrefix(keys []string) int {
	b.exists.Add(1)
	if b.panicExists.Load() {
		panic("server down")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	found := 0
	for found < len(keys) {
		if _, ok := b.values[keys[found]]; !ok {
			break
		}
		found++
	}
	return found
}

func (b *mapBackend) Clear() error {
	b.clears.Add(1)
	if b.failClear.Load() {
		return errors.New("server down")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.values = map[string][]byte{}
	return nil
}

func (b *mapBackend) StorageFailed(operation string, value interface{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = append(b.failures, fmt.Sprintf("%s: %v", operation, value))
}

// noClearBackend: a backend without Clear.
type noClearBackend struct{}

func (noClearBackend) Put(keys []string, values [][]byte, results []kvpool.StorageResult) {
	for i := range results {
		results[i] = kvpool.StorageOK
	}
}

func (noClearBackend) Get(keys []string, values [][]byte, results []kvpool.StorageResult) {
	for i := range results {
		results[i] = kvpool.StorageMiss
	}
}

func (noClearBackend) ExistsPrefix(keys []string) int { return 0 }

func openWithStorage(t *testing.T, backend kvpool.StorageBackend) *kvpool.Pool {
	t.Helper()
	p, err := kvpool.OpenWithStorage(customConfig, backend)
	must(t, err)
	return p
}

// storePrompt computes prompt on p (KV rows from kvPattern), finishes it and flushes the backups.
func storePrompt(t *testing.T, p *kvpool.Pool, prompt []int32) {
	t.Helper()
	seq, cached, err := p.Begin(prompt, "")
	must(t, err)
	slots, err := p.SeqExtend([]uint64{seq}, []int64{int64(len(prompt) - cached)})
	must(t, err)
	for layer := 0; layer < 2; layer++ {
		must(t, p.SetKV(layer, slots, kvPattern(len(prompt), layer, 0), kvPattern(len(prompt), layer, 1),
			kvpool.DTypeF32, 1, 1))
	}
	must(t, p.Finish(seq, len(prompt)))
	must(t, p.StorageFlush())
}

func TestStorageBackendSecondPoolLoadsWhatTheFirstStored(t *testing.T) {
	backend := newMapBackend()
	prompt := tokenRange(11, 41) // 10 whole pages and one token
	a := openWithStorage(t, backend)
	defer a.Close()
	b := openWithStorage(t, backend)
	defer b.Close()

	storePrompt(t, a, prompt)
	if s := storageStats(t, a); s.BackupPages != 10 || s.BackupPagesFailed != 0 || s.StorePuts != 10 || s.StorePutErrors != 0 {
		t.Fatalf("StorageStats of the storing pool = %+v, want 10 pages stored", s)
	}
	if n := backend.count(); n != 10 {
		t.Fatalf("the Go map holds %d values, want 10", n)
	}

	// Pool b has never seen the prompt: the Go map holds all 10 pages.
	info, inserted := prefetchAll(t, b, prompt)
	if inserted != 40 || info.Revoked || info.HitTokens != 40 || info.LoadedTokens != 40 {
		t.Fatalf("prefetch: last poll %+v, %d inserted; want 40 found, loaded and inserted", info, inserted)
	}
	if s := storageStats(t, b); s.StoreGets != 10 || s.StoreGetHits != 10 || s.StoreGetErrors != 0 || s.PagesCorrupt != 0 {
		t.Fatalf("StorageStats after the prefetch = %+v, want 10 gets, all hits", s)
	}
	if backend.exists.Load() < 1 {
		t.Fatal("ExistsPrefix was never called")
	}

	// Begin loads the 40 tokens that came from the Go store, with the KV pool a wrote.
	seq, cached, err := b.Begin(prompt, "")
	must(t, err)
	if cached != 40 {
		t.Fatalf("Begin after the prefetch found %d tokens, want 40", cached)
	}
	if si := seqInfo(t, b, seq); si.StorageHit != 40 {
		t.Fatalf("SeqInfo = %+v, want StorageHit 40", si)
	}
	held, err := b.SeqSlots(seq)
	must(t, err)
	for layer := 0; layer < 2; layer++ {
		k := make([]byte, 40*2*8*4)
		v := make([]byte, len(k))
		must(t, b.GetKV(layer, held, k, v, kvpool.DTypeF32))
		if !bytes.Equal(k, kvPattern(41, layer, 0)[:len(k)]) || !bytes.Equal(v, kvPattern(41, layer, 1)[:len(v)]) {
			t.Fatalf("layer %d: the KV loaded from the Go store differs from what pool a wrote", layer)
		}
	}
	must(t, b.Abort(seq))
	if _, err := b.Check(); err != nil {
		t.Fatal(err)
	}

	// StorageClear calls Clear.
	must(t, a.StorageClear())
	if backend.clears.Load() != 1 || backend.count() != 0 {
		t.Fatalf("after StorageClear: %d clears, %d values; want 1 and 0", backend.clears.Load(), backend.count())
	}
	if len(backend.failures) != 0 {
		t.Fatalf("failures: %v", backend.failures)
	}
}

func TestStorageBackendPanicsAreErrors(t *testing.T) {
	prompt := tokenRange(11, 41)
	backend := newMapBackend()
	backend.panicPut.Store(true)
	a := openWithStorage(t, backend)
	storePrompt(t, a, prompt) // the batch fails: the rest of the backup job is skipped
	if s := storageStats(t, a); s.StorePuts != 0 || s.StorePutErrors == 0 || s.BackupPagesFailed == 0 || s.BackupPages != 0 {
		t.Fatalf("StorageStats with a panicking Put = %+v, want put errors and failed pages", s)
	}
	if backend.count() != 0 || !backend.failed("Put: server down") {
		t.Fatalf("after a panicking Put: %d values, failures %v", backend.count(), backend.failures)
	}
	a.Close()

	backend = newMapBackend()
	a = openWithStorage(t, backend)
	storePrompt(t, a, prompt)
	a.Close()
	if backend.count() != 10 {
		t.Fatalf("the Go map holds %d values, want 10", backend.count())
	}

	// A Get that panics: the prefetch ends at its first page, nothing is loaded.
	backend.panicGet.Store(true)
	b := openWithStorage(t, backend)
	info, inserted := prefetchAll(t, b, prompt)
	s := storageStats(t, b)
	if info.HitTokens != 40 || info.LoadedTokens != 0 || inserted != 0 || s.StoreGetErrors == 0 ||
		s.ReadFailures == 0 || s.StoreGetHits != 0 || !backend.failed("Get: server down") {
		t.Fatalf("panicking Get: last poll %+v, %d inserted, stats %+v, failures %v", info, inserted, s, backend.failures)
	}
	b.Close()

	// Damaged bytes from Get are rejected by kvpool's checksum, not loaded.
	backend.panicGet.Store(false)
	backend.damage.Store(true)
	b = openWithStorage(t, backend)
	info, _ = prefetchAll(t, b, prompt)
	if s := storageStats(t, b); info.LoadedTokens != 0 || s.PagesCorrupt == 0 {
		t.Fatalf("damaged values: last poll %+v, stats %+v; want nothing loaded, corrupt pages", info, s)
	}
	b.Close()

	// ExistsPrefix that panics finds nothing: the prefetch is revoked.
	backend.damage.Store(false)
	backend.panicExists.Store(true)
	b = openWithStorage(t, backend)
	info, _ = prefetchAll(t, b, prompt)
	if s := storageStats(t, b); !info.Revoked || s.PrefetchesRevoked != 1 || !backend.failed("ExistsPrefix: server down") {
		t.Fatalf("panicking ExistsPrefix: last poll %+v, stats %+v, failures %v", info, s, backend.failures)
	}

	// Clear that fails: StorageClear gives ErrIO and the values stay.
	backend.failClear.Store(true)
	err := b.StorageClear()
	if e := wantCode(t, err, kvpool.ErrIO); !strings.Contains(e.Msg, "clear") {
		t.Fatalf("StorageClear error %q does not name clear", e.Msg)
	}
	if backend.count() != 10 {
		t.Fatalf("a failed Clear removed values: %d left", backend.count())
	}
	b.Close()
}

func TestStorageBackendBadInput(t *testing.T) {
	backend := newMapBackend()
	_, err := kvpool.OpenWithStorage(customConfig, nil)
	if e := wantCode(t, err, kvpool.ErrInvalidArgument); !strings.Contains(e.Msg, "backend") {
		t.Fatalf("nil backend: %q does not name the backend", e.Msg)
	}
	// The configuration must name the custom backend, and only OpenWithStorage may.
	file := strings.Replace(customConfig, `"backend":"custom"`, `"backend":"file","path":"/nonexistent"`, 1)
	_, err = kvpool.OpenWithStorage(file, backend)
	wantCode(t, err, kvpool.ErrConfig)
	_, err = kvpool.OpenWithStorage(hostConfig, backend)
	wantCode(t, err, kvpool.ErrConfig)
	_, err = kvpool.Open(customConfig)
	if e := wantCode(t, err, kvpool.ErrConfig); !strings.Contains(e.Msg, "kvpool_create_with_storage") {
		t.Fatalf("Open of a custom configuration: %q", e.Msg)
	}
	_, err = kvpool.OpenWithStorage("{", backend)
	wantCode(t, err, kvpool.ErrConfig)
	// A failed creation calls nothing.
	if n := backend.puts.Load() + backend.gets.Load() + backend.exists.Load() + backend.clears.Load(); n != 0 {
		t.Fatalf("failed creations called the backend %d times", n)
	}

	// Without Clear, StorageClear is unsupported.
	p := openWithStorage(t, noClearBackend{})
	defer p.Close()
	wantCode(t, p.StorageClear(), kvpool.ErrUnsupported)
	must(t, p.StorageFlush())
}

func TestStorageResultMatchesHeader(t *testing.T) {
	if kvpool.StorageOK != 0 || kvpool.StorageMiss != 1 || kvpool.StorageError != 2 ||
		kvpool.StorageMiss.String() != "Miss" {
		t.Fatal("StorageResult constants differ from kvstore_result")
	}
}
