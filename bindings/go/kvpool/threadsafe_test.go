package kvpool_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// safeConfig: page_size 4, 1024 tokens, a radix cache, and "thread_safe": every method
// may be called from any goroutine (docs/services.md#threading).
const safeConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
	`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":1024,"max_running_requests":64,"max_context_len":256,` +
	`"thread_safe":true},"prefix_cache":{"kind":"radix"}}`

// One thread-safe Pool shared by 8 goroutines mixing kvseq requests with shared prefixes,
// direct radix inserts, matches and evictions and allocator churn, while 2 more read
// Stats, Accounting, RadixSizes and Check; afterwards the accounting identity and the
// self-check hold. Run it with -race too (go.kvpool.race).
func TestThreadSafePoolFromManyGoroutines(t *testing.T) {
	p := open(t, safeConfig)
	const workers, steps = 8, 150
	var wg sync.WaitGroup
	var done atomic.Bool
	var working atomic.Int32
	working.Store(workers)
	errs := make(chan error, workers+2)
	fail := func(err error) { errs <- err }
	var finished, inserted atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			defer func() {
				if working.Add(-1) == 0 {
					done.Store(true)
				}
			}()
			for i := 0; i < steps; i++ {
				family := int32((w + i) % 4)
				prompt := append(tokenRange(10000*(family+1), 16), tokenRange(int32(1000000+100000*w+100*i), 2+i%9)...)
				switch i % 4 {
				case 0, 1: // a whole request: begin, extend, decode, finish
					seq, cached, err := p.Begin(prompt, "")
					if errors.Is(err, kvpool.ErrOutOfMemory) {
						continue
					} else if err != nil {
						fail(fmt.Errorf("Begin: %w", err))
						return
					}
					if _, err := p.SeqExtend([]uint64{seq}, []int64{int64(len(prompt) - cached)}); err != nil {
						if errors.Is(err, kvpool.ErrOutOfMemory) {
							if err := p.Abort(seq); err != nil {
								fail(fmt.Errorf("Abort: %w", err))
								return
							}
							continue
						}
						fail(fmt.Errorf("SeqExtend: %w", err))
						return
					}
					if _, err := p.SeqDecode([]uint64{seq}, []int32{7}); err != nil && !errors.Is(err, kvpool.ErrOutOfMemory) {
						fail(fmt.Errorf("SeqDecode: %w", err))
						return
					}
					info, err := p.SeqInfo(seq)
					if err != nil {
						fail(fmt.Errorf("SeqInfo: %w", err))
						return
					}
					if err := p.Finish(seq, info.Computed); err != nil {
						fail(fmt.Errorf("Finish: %w", err))
						return
					}
					finished.Add(1)
				case 2: // a direct insert of fresh pages; what the tree had goes back
					key := prompt[:len(prompt)/4*4]
					slots, err := p.Alloc(len(key))
					if errors.Is(err, kvpool.ErrOutOfMemory) {
						continue
					} else if err != nil {
						fail(fmt.Errorf("Alloc: %w", err))
						return
					}
					prefix, _, err := p.Insert(key, slots, "", 0)
					if err != nil {
						fail(fmt.Errorf("Insert: %w", err))
						return
					}
					if err := p.Free(slots[:prefix]); err != nil {
						fail(fmt.Errorf("Free: %w", err))
						return
					}
					inserted.Add(1)
				case 3: // match, and evict a little
					if _, _, err := p.Match(prompt, ""); err != nil {
						fail(fmt.Errorf("Match: %w", err))
						return
					}
					if _, err := p.Evict(8); err != nil {
						fail(fmt.Errorf("Evict: %w", err))
						return
					}
				}
			}
		}(w)
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; !done.Load(); round++ {
				s, err := p.Stats()
				if err != nil {
					fail(fmt.Errorf("Stats: %w", err))
					return
				}
				if s.TokenHeld+s.TokenAvailable+s.TokenPending != s.TokenCapacity || s.TokenHeld > s.TokenCapacity {
					fail(fmt.Errorf("stats %+v: held + available + pending != capacity", s))
					return
				}
				a, err := p.Accounting()
				if err != nil {
					fail(fmt.Errorf("Accounting: %w", err))
					return
				}
				if a.Available+a.Evictable+a.Protected+a.Uncached > a.Capacity {
					fail(fmt.Errorf("accounting %+v exceeds the capacity", a))
					return
				}
				sizes, err := p.RadixSizes()
				if err != nil || sizes.Evictable+sizes.Protected != sizes.Total {
					fail(fmt.Errorf("RadixSizes = %+v, %v", sizes, err))
					return
				}
				if round%8 == 0 {
					if report, err := p.Check(); err != nil {
						fail(fmt.Errorf("Check: %v\n%s", err, report))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if finished.Load() == 0 || inserted.Load() == 0 {
		t.Fatalf("%d requests finished and %d inserts: the workload did not run", finished.Load(), inserted.Load())
	}
	a := wantAccountingOf(t, p)
	if _, err := p.Evict(a.Capacity); err != nil {
		t.Fatal(err)
	}
	s, err := p.Stats()
	must(t, err)
	if s.TokenHeld != 0 || s.ReqAvailable != s.ReqCapacity {
		t.Fatalf("after evicting everything: %+v, want nothing held", s)
	}
}

// wantAccountingOf checks the accounting identity (any capacity) and the self-check.
func wantAccountingOf(t *testing.T, p *kvpool.Pool) kvpool.Accounting {
	t.Helper()
	a, err := p.Accounting()
	must(t, err)
	if a.Available+a.Evictable+a.Protected+a.Uncached != a.Capacity {
		t.Fatalf("accounting %+v: available+evictable+protected+uncached != capacity", a)
	}
	if report, err := p.Check(); err != nil {
		t.Fatalf("Check: %v\n%s", err, report)
	}
	return a
}

// The key takes only a boolean, and the message says where and what.
func TestThreadSafeKeyMustBeABoolean(t *testing.T) {
	bad := strings.Replace(safeConfig, `"thread_safe":true`, `"thread_safe":"yes"`, 1)
	_, err := kvpool.Open(bad)
	kerr := wantCode(t, err, kvpool.ErrConfig)
	if !strings.Contains(kerr.Msg, `$.pool.thread_safe: got "yes", expected true or false`) {
		t.Fatalf("message %q", kerr.Msg)
	}
}
