package kvpool_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// logRecorder collects what a LogFunc receives.
type logRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (r *logRecorder) log(level kvpool.LogLevel, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, level.String()+": "+message)
}

func (r *logRecorder) count(part string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.messages {
		if strings.Contains(m, part) {
			n++
		}
	}
	return n
}

const tinyConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
	`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}`

func TestLogLevelsMatchHeader(t *testing.T) {
	for _, c := range []struct {
		got  kvpool.LogLevel
		want kvpool.Enum_SS_kvpool_log_level
	}{
		{kvpool.LogError, kvpool.KVPOOL_LOG_ERROR}, {kvpool.LogWarn, kvpool.KVPOOL_LOG_WARN},
		{kvpool.LogInfo, kvpool.KVPOOL_LOG_INFO}, {kvpool.LogDebug, kvpool.KVPOOL_LOG_DEBUG},
	} {
		if int(c.got) != int(c.want) {
			t.Fatalf("%v = %d, header says %d", c.got, c.got, c.want)
		}
	}
}

func TestSetLogCallback(t *testing.T) {
	defer kvpool.SetLogCallback(kvpool.LogError, nil)
	var info logRecorder
	must(t, kvpool.SetLogCallback(kvpool.LogInfo, info.log))
	p, err := kvpool.Open(tinyConfig)
	must(t, err)
	if info.count(`info: pool created: model "" (mha, 2 layers) on cpu, 64 tokens`) != 1 {
		t.Fatalf("no pool-created message: %q", info.messages)
	}
	err = p.Free([]int64{5}) // not allocated: a debug message, filtered out at LogInfo
	wantCode(t, err, kvpool.ErrInvalidArgument)
	if info.count("debug:") != 0 {
		t.Fatalf("debug message at LogInfo: %q", info.messages)
	}

	var debug logRecorder
	must(t, kvpool.SetLogCallback(kvpool.LogDebug, debug.log))
	err = p.Free([]int64{5})
	kerr := wantCode(t, err, kvpool.ErrInvalidArgument)
	if debug.count("debug: failed call (invalid argument): "+kerr.Msg) != 1 {
		t.Fatalf("messages at LogDebug: %q, want the failure %q", debug.messages, kerr.Msg)
	}
	must(t, p.Close())
	if debug.count("info: destroying pool") != 1 || info.count("destroying pool") != 0 {
		t.Fatalf("the destroy went to the replaced callback: %q / %q", info.messages, debug.messages)
	}

	// Cleared: nothing more.
	must(t, kvpool.SetLogCallback(kvpool.LogDebug, nil))
	q, err := kvpool.Open(tinyConfig)
	must(t, err)
	must(t, q.Close())
	if debug.count("pool created") != 0 {
		t.Fatalf("messages after clearing: %q", debug.messages)
	}
	wantCode(t, kvpool.SetLogCallback(kvpool.LogLevel(9), debug.log), kvpool.ErrInvalidArgument)
}

// Re-entry: a callback that sets the callback gets ErrInvalidArgument and stays set.
func TestLogCallbackCannotSetTheCallback(t *testing.T) {
	defer kvpool.SetLogCallback(kvpool.LogError, nil)
	var inner atomic.Value
	var calls atomic.Int32
	must(t, kvpool.SetLogCallback(kvpool.LogDebug, func(kvpool.LogLevel, string) {
		if calls.Add(1) == 1 {
			inner.Store(kvpool.SetLogCallback(kvpool.LogDebug, nil))
		}
	}))
	p, err := kvpool.Open(tinyConfig)
	must(t, err)
	defer p.Close()
	err, _ = inner.Load().(error)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	err = p.Free([]int64{5})
	wantCode(t, err, kvpool.ErrInvalidArgument)
	if calls.Load() < 2 {
		t.Fatalf("the callback was cleared from inside itself")
	}
}

// failingBackend: every put fails, nothing is stored.
type failingBackend struct{}

func (failingBackend) Put(keys []string, values [][]byte, results []kvpool.StorageResult) {}
func (failingBackend) Get(keys []string, values [][]byte, results []kvpool.StorageResult) {
	for i := range results {
		results[i] = kvpool.StorageMiss
	}
}
func (failingBackend) ExistsPrefix(keys []string) int { return 0 }

// The storage thread (a C thread) logs the backend's failures through the Go callback;
// goroutines replace the callback meanwhile.
func TestLogFromStorageThreads(t *testing.T) {
	defer kvpool.SetLogCallback(kvpool.LogError, nil)
	var r logRecorder
	must(t, kvpool.SetLogCallback(kvpool.LogWarn, r.log))
	p, err := kvpool.OpenWithStorage(customConfig, failingBackend{})
	must(t, err)
	defer p.Close()
	prompt := tokenRange(1, 32)
	seq, _, err := p.Begin(prompt, "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{seq}, []int64{32})
	must(t, err)
	must(t, p.Finish(seq, 32))
	_, err = p.HostPoll(false)
	must(t, err)
	must(t, p.StorageFlush())
	if r.count("warn: storage backend, storing pages: since the last report") == 0 {
		t.Fatalf("no warning from the storage thread: %q", r.messages)
	}

	// Replacing the callback while goroutines fail calls: every callback is
	// released by the call that replaced it, and none runs afterwards.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					_ = p.Free([]int64{7})
				}
			}
		}()
	}
	var retired atomic.Bool
	var late atomic.Int32
	for i := 0; i < 50; i++ {
		var mine atomic.Bool
		must(t, kvpool.SetLogCallback(kvpool.LogDebug, func(kvpool.LogLevel, string) {
			if mine.Load() {
				late.Add(1)
			}
		}))
		retired.Store(true)
		time.Sleep(100 * time.Microsecond)
		must(t, kvpool.SetLogCallback(kvpool.LogDebug, nil))
		mine.Store(true)
	}
	close(stop)
	wg.Wait()
	if late.Load() != 0 {
		t.Fatalf("%d messages reached callbacks after they were replaced", late.Load())
	}
}
