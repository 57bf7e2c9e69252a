package kvpool_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// A valid MHA configuration; its plan numbers are checked in TestPlanConfig.
const validConfig = `{"model":{"num_layers":32,"attention":"mha","kv_heads":8,"head_dim":128},` +
	`"pool":{"kv_dtype":"bf16","page_size":16,"max_total_tokens":100000,` +
	`"max_running_requests":8,"max_context_len":4096}}`

// configWith replaces one "key":value pair of validConfig.
func configWith(t *testing.T, from, to string) string {
	t.Helper()
	if !strings.Contains(validConfig, from) {
		t.Fatalf("test bug: %q not in the config", from)
	}
	return strings.Replace(validConfig, from, to, 1)
}

// wantCode checks that err is an *Error with the given code.
func wantCode(t *testing.T, err error, code kvpool.Code) *kvpool.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %d", code)
	}
	var kerr *kvpool.Error
	if !errors.As(err, &kerr) {
		t.Fatalf("error %v (%T) is not a *kvpool.Error", err, err)
	}
	if kerr.Code != code || !errors.Is(err, code) {
		t.Fatalf("error %v has code %d, want %d", err, kerr.Code, code)
	}
	return kerr
}

func TestVersion(t *testing.T) {
	if got := kvpool.Version(); got != 100 {
		t.Errorf("Version() = %d, want 100", got)
	}
	if got := kvpool.VersionString(); got != "0.1.0" {
		t.Errorf("VersionString() = %q, want 0.1.0", got)
	}
	// The loaded library matches the headers the wrapper was generated from.
	if kvpool.VersionString() != kvpool.KVPOOL_VERSION_STRING || int(kvpool.Version()) != kvpool.KVPOOL_VERSION_NUMBER {
		t.Errorf("library %s/%d, headers %s/%d", kvpool.VersionString(), kvpool.Version(),
			kvpool.KVPOOL_VERSION_STRING, kvpool.KVPOOL_VERSION_NUMBER)
	}
}

func TestCodesMatchHeader(t *testing.T) {
	pairs := []struct {
		code   kvpool.Code
		header kvpool.Enum_SS_kvpool_status
	}{
		{kvpool.OK, kvpool.KVPOOL_OK},
		{kvpool.ErrInvalidArgument, kvpool.KVPOOL_ERR_INVALID_ARGUMENT},
		{kvpool.ErrConfig, kvpool.KVPOOL_ERR_CONFIG},
		{kvpool.ErrOutOfMemory, kvpool.KVPOOL_ERR_OUT_OF_MEMORY},
		{kvpool.ErrCUDA, kvpool.KVPOOL_ERR_CUDA},
		{kvpool.ErrUnsupported, kvpool.KVPOOL_ERR_UNSUPPORTED},
		{kvpool.ErrInternal, kvpool.KVPOOL_ERR_INTERNAL},
		{kvpool.ErrBufferTooSmall, kvpool.KVPOOL_ERR_BUFFER_TOO_SMALL},
		{kvpool.ErrIO, kvpool.KVPOOL_ERR_IO},
		{kvpool.ErrHostMemory, kvpool.KVPOOL_ERR_HOST_MEMORY},
		{kvpool.ErrCheckFailed, kvpool.KVPOOL_ERR_CHECK_FAILED},
		{kvpool.ErrDeviceFault, kvpool.KVPOOL_ERR_DEVICE_FAULT},
	}
	known := map[int]bool{}
	for _, p := range pairs {
		if int(p.code) != int(p.header) {
			t.Errorf("Go code %d (%s) != header value %d", p.code, p.code, p.header)
		}
		known[int(p.code)] = true
	}
	// Every code the library knows has a Go constant.
	for i := 0; i < 256; i++ {
		if name := kvpool.Kvpool_status_string(i); name != "unknown status" && !known[i] {
			t.Errorf("status %d (%s) has no Go constant in errors.go", i, name)
		}
	}
}

func TestStatusString(t *testing.T) {
	if got := kvpool.ErrConfig.String(); got != "configuration error" {
		t.Errorf("ErrConfig.String() = %q", got)
	}
	if got := kvpool.Code(12345).String(); got != "unknown status" {
		t.Errorf("Code(12345).String() = %q", got)
	}
	if got := kvpool.ErrIO.Error(); got != "kvpool: "+kvpool.ErrIO.String() {
		t.Errorf("ErrIO.Error() = %q", got)
	}
}

func TestOpenCloseTwice(t *testing.T) {
	p, err := kvpool.Open(validConfig)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	backend, err := p.Backend()
	if err != nil || backend != "cpu" {
		t.Errorf("Backend() = %q, %v; want cpu", backend, err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("first Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// Pools dropped without Close are destroyed by their finalizers, on the
// finalizer goroutine, without disturbing pools still in use.
func TestFinalizerSafetyNet(t *testing.T) {
	kept, err := kvpool.Open(validConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	for i := 0; i < 20; i++ {
		if _, err := kvpool.Open(validConfig); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC() // the second cycle runs the finalizers queued by the first
	if backend, err := kept.Backend(); err != nil || backend != "cpu" {
		t.Errorf("Backend() after GC = %q, %v", backend, err)
	}
	if info, err := kept.Plan(); err != nil || info.NumPages != 6250 {
		t.Errorf("Plan() after GC = %+v, %v", info, err)
	}
}

func TestClosedPool(t *testing.T) {
	p, err := kvpool.Open(validConfig)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	p.Close()
	_, err = p.Backend()
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = p.Plan()
	wantCode(t, err, kvpool.ErrInvalidArgument)
}

func TestConfigError(t *testing.T) {
	p, err := kvpool.Open(configWith(t, `"page_size":16`, `"page_size":12`))
	if p != nil {
		t.Errorf("Open returned a pool with an error")
	}
	kerr := wantCode(t, err, kvpool.ErrConfig)
	if !strings.Contains(kerr.Msg, "$.pool.page_size") {
		t.Errorf("message %q does not name $.pool.page_size", kerr.Msg)
	}
	if !errors.Is(err, &kvpool.Error{Code: kvpool.ErrConfig}) || errors.Is(err, kvpool.ErrIO) {
		t.Errorf("errors.Is does not compare codes: %v", err)
	}
	if !strings.Contains(err.Error(), "$.pool.page_size") {
		t.Errorf("Error() = %q lacks the message", err.Error())
	}
	// PlanConfig validates the same way.
	_, err = kvpool.PlanConfig(configWith(t, `"page_size":16`, `"page_size":12`))
	wantCode(t, err, kvpool.ErrConfig)
}

func TestMalformedJSON(t *testing.T) {
	for _, text := range []string{`{"model": `, `{x`, ``, `[]`} {
		_, err := kvpool.Open(text)
		wantCode(t, err, kvpool.ErrConfig)
	}
}

func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pool.json")
	if err := os.WriteFile(path, []byte(validConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := kvpool.OpenFile(path)
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", path, err)
	}
	defer p.Close()
	if backend, err := p.Backend(); err != nil || backend != "cpu" {
		t.Errorf("Backend() = %q, %v", backend, err)
	}

	missing := filepath.Join(dir, "does-not-exist.json")
	_, err = kvpool.OpenFile(missing)
	kerr := wantCode(t, err, kvpool.ErrIO)
	if !strings.Contains(kerr.Msg, missing) {
		t.Errorf("message %q does not name %s", kerr.Msg, missing)
	}
}

func TestPlanConfig(t *testing.T) {
	cases := []struct {
		name             string
		config           string
		maxTokens, pages uint64
	}{
		// 100000 is a multiple of the page size: nothing to round.
		{"exact", validConfig, 100000, 6250},
		// 99999 is rounded down to whole pages of 16.
		{"rounded", configWith(t, `"max_total_tokens":100000`, `"max_total_tokens":99999`), 99984, 6249},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info, err := kvpool.PlanConfig(c.config)
			if err != nil {
				t.Fatalf("PlanConfig: %v", err)
			}
			check := func(field string, got, want uint64) {
				if got != want {
					t.Errorf("%s = %d, want %d", field, got, want)
				}
			}
			check("PageSize", uint64(info.PageSize), 16)
			check("KVBytesPerToken", info.KVBytesPerToken, 131072) // 32 layers * 2 (K,V) * 8 heads * 128 * 2 bytes
			check("MaxTotalTokens", info.MaxTotalTokens, c.maxTokens)
			check("NumPages", info.NumPages, c.pages)
			check("ReqRows", uint64(info.ReqRows), 9) // 8 + reserved row 0
			check("KVMemoryBytes", info.KVMemoryBytes, (c.maxTokens+16)*131072)
			check("NumLayers", uint64(info.NumLayers), 32)
			check("KVHeadsPerRank", uint64(info.KVHeadsPerRank), 8)
			check("TotalMemoryBytes", info.TotalMemoryBytes,
				info.KVMemoryBytes+info.ReqTableBytes+info.MambaMemoryBytes)
		})
	}
}

func TestPoolPlanEqualsStaticPlan(t *testing.T) {
	want, err := kvpool.PlanConfig(validConfig)
	if err != nil {
		t.Fatal(err)
	}
	p, err := kvpool.Open(validConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got, err := p.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got.NumPages == 0 {
		t.Errorf("pool plan %+v != static plan %+v", got, want)
	}
}

// Each failing call must get its own message even while goroutines hop
// between OS threads (the message is captured inside the failing C call).
func TestErrorMessagesStayWithTheirCall(t *testing.T) {
	sizes := []int{3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 20, 21}
	var wg sync.WaitGroup
	errs := make(chan string, len(sizes))
	for _, size := range sizes {
		wg.Add(1)
		go func(size int) {
			defer wg.Done()
			cfg := strings.Replace(validConfig, `"page_size":16`, fmt.Sprintf(`"page_size":%d`, size), 1)
			want := fmt.Sprintf("got %d,", size)
			for i := 0; i < 300; i++ {
				_, err := kvpool.PlanConfig(cfg)
				var kerr *kvpool.Error
				if !errors.As(err, &kerr) || !strings.Contains(kerr.Msg, want) {
					errs <- fmt.Sprintf("page_size %d: got %v", size, err)
					return
				}
			}
		}(size)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestCudaDeviceCount(t *testing.T) {
	n := kvpool.CudaDeviceCount()
	switch {
	case os.Getenv("KVPOOL_REQUIRE_GPU") == "1":
		if n < 1 {
			t.Errorf("KVPOOL_REQUIRE_GPU=1 but CudaDeviceCount() = %d", n)
		}
	case !nvidiaDriverPresent():
		if n != 0 {
			t.Errorf("no NVIDIA driver here but CudaDeviceCount() = %d", n)
		}
	default:
		if n < 0 {
			t.Errorf("CudaDeviceCount() = %d", n)
		}
	}
}

// nvidiaDriverPresent: without the driver's device node no GPU is usable.
func nvidiaDriverPresent() bool {
	_, err := os.Stat("/dev/nvidiactl")
	return err == nil
}
