package kvpool_test

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// Small CPU pools for the allocator, request-row, check and buffer tests.
const (
	// page_size 4, 64 tokens = pages 1..16 (slots 4..67), 2 layers of 2 x 8 f32.
	pagedConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
		`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}`
	// page_size 1: the token allocator.
	tokenConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
		`"pool":{"kv_dtype":"f32","page_size":1,"max_total_tokens":16,"max_running_requests":8,"max_context_len":64}}`
	// 16 full + 16 window slots.
	swaConfig = `{"model":{"num_layers":4,"attention":"swa","kv_heads":2,"head_dim":8,"sliding_window":4,` +
		`"swa_layer_pattern":"SF"},"pool":{"kv_dtype":"f32","max_total_tokens":16,"swa_full_tokens_ratio":1.0,` +
		`"max_running_requests":8,"max_context_len":64}}`
	// Deferred, sorted frees (need_sort).
	prefillConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
		`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64,` +
		`"disaggregation_mode":"prefill"}}`
)

// open opens a pool that the test closes.
func open(t *testing.T, config string) *kvpool.Pool {
	t.Helper()
	p, err := kvpool.Open(config)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// must fails the test on an error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantInts[T int32 | int64](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func freeList(t *testing.T, p *kvpool.Pool, list kvpool.AllocList) []int64 {
	t.Helper()
	ids, err := p.FreeList(list)
	must(t, err)
	return ids
}

func available(t *testing.T, p *kvpool.Pool) int {
	t.Helper()
	n, err := p.Available()
	must(t, err)
	return n
}

func seq(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestEnumsMatchHeader(t *testing.T) {
	pairs := []struct {
		name      string
		got, want int
	}{
		{"AllocToken", int(kvpool.AllocToken), int(kvpool.KVALLOC_TOKEN)},
		{"AllocPaged", int(kvpool.AllocPaged), int(kvpool.KVALLOC_PAGED)},
		{"AllocSWA", int(kvpool.AllocSWA), int(kvpool.KVALLOC_SWA)},
		{"ListFree", int(kvpool.ListFree), int(kvpool.KVALLOC_LIST_FREE)},
		{"ListRelease", int(kvpool.ListRelease), int(kvpool.KVALLOC_LIST_RELEASE)},
		{"ListSWAFree", int(kvpool.ListSWAFree), int(kvpool.KVALLOC_LIST_SWA_FREE)},
		{"ListSWARelease", int(kvpool.ListSWARelease), int(kvpool.KVALLOC_LIST_SWA_RELEASE)},
		{"DTypeF32", int(kvpool.DTypeF32), int(kvpool.KVPOOL_DTYPE_F32)},
		{"DTypeF16", int(kvpool.DTypeF16), int(kvpool.KVPOOL_DTYPE_F16)},
		{"DTypeBF16", int(kvpool.DTypeBF16), int(kvpool.KVPOOL_DTYPE_BF16)},
		{"DTypeFP8E4M3", int(kvpool.DTypeFP8E4M3), int(kvpool.KVPOOL_DTYPE_FP8_E4M3)},
		{"DTypeFP8E5M2", int(kvpool.DTypeFP8E5M2), int(kvpool.KVPOOL_DTYPE_FP8_E5M2)},
		{"DTypeFP4E2M1", int(kvpool.DTypeFP4E2M1), int(kvpool.KVPOOL_DTYPE_FP4_E2M1)},
		{"DTypeU8", int(kvpool.DTypeU8), int(kvpool.KVPOOL_DTYPE_U8)},
		{"DTypeI32", int(kvpool.DTypeI32), int(kvpool.KVPOOL_DTYPE_I32)},
		{"DTypeI64", int(kvpool.DTypeI64), int(kvpool.KVPOOL_DTYPE_I64)},
		{"BufferK", int(kvpool.BufferK), int(kvpool.KVPOOL_BUFFER_K)},
		{"BufferV", int(kvpool.BufferV), int(kvpool.KVPOOL_BUFFER_V)},
		{"BufferKScale", int(kvpool.BufferKScale), int(kvpool.KVPOOL_BUFFER_K_SCALE)},
		{"BufferVScale", int(kvpool.BufferVScale), int(kvpool.KVPOOL_BUFFER_V_SCALE)},
		{"BufferIndexer", int(kvpool.BufferIndexer), int(kvpool.KVPOOL_BUFFER_INDEXER)},
		{"BufferLabel", int(kvpool.BufferLabel), int(kvpool.KVPOOL_BUFFER_LABEL)},
		{"BufferReqTable", int(kvpool.BufferReqTable), int(kvpool.KVPOOL_BUFFER_REQ_TABLE)},
		{"BufferMambaConv", int(kvpool.BufferMambaConv), int(kvpool.KVPOOL_BUFFER_MAMBA_CONV)},
		{"BufferMambaSSM", int(kvpool.BufferMambaSSM), int(kvpool.KVPOOL_BUFFER_MAMBA_SSM)},
		{"BufferSWAMapping", int(kvpool.BufferSWAMapping), int(kvpool.KVPOOL_BUFFER_SWA_MAPPING)},
		{"BufferMambaIntermediateSSM", int(kvpool.BufferMambaIntermediateSSM), int(kvpool.KVPOOL_BUFFER_MAMBA_INTERMEDIATE_SSM)},
		{"BufferMambaIntermediateConv", int(kvpool.BufferMambaIntermediateConv), int(kvpool.KVPOOL_BUFFER_MAMBA_INTERMEDIATE_CONV)},
		{"DeviceCPU", int(kvpool.DeviceCPU), kvpool.KVPOOL_DEVICE_CPU},
		{"DeviceCUDA", int(kvpool.DeviceCUDA), kvpool.KVPOOL_DEVICE_CUDA},
		{"DeviceCUDAHost", int(kvpool.DeviceCUDAHost), kvpool.KVPOOL_DEVICE_CUDA_HOST},
	}
	for _, p := range pairs {
		if p.got != p.want {
			t.Errorf("%s = %d, header says %d", p.name, p.got, p.want)
		}
	}
	if kvpool.DTypeBF16.String() != "bf16" || kvpool.AllocSWA.String() != "swa" {
		t.Errorf("names: %v %v", kvpool.DTypeBF16, kvpool.AllocSWA)
	}
}

// The worked example of SGLANG_SEMANTICS.md §2.4 (page_size 4).
func TestWorkedExample(t *testing.T) {
	p := open(t, pagedConfig)
	kind, err := p.AllocKind()
	must(t, err)
	if kind != kvpool.AllocPaged {
		t.Fatalf("AllocKind = %v, want paged", kind)
	}
	if n := available(t, p); n != 64 {
		t.Fatalf("Available = %d, want 64", n)
	}
	all, err := p.Alloc(64)
	must(t, err)
	wantInts(t, "Alloc(64)", all, seq(4, 67)) // pages 1..16 in order
	if n := available(t, p); n != 0 {
		t.Fatalf("Available = %d after allocating everything", n)
	}

	// Free one slot of each page, one call each: freed pages go, sorted, to the front.
	for _, page := range []int64{11, 3, 7, 2, 9, 5} {
		must(t, p.Free([]int64{page*4 + 1}))
	}
	wantInts(t, "free list", freeList(t, p, kvpool.ListFree), []int64{5, 9, 2, 7, 3, 11})
	if n := available(t, p); n != 24 {
		t.Fatalf("Available = %d, want 24", n)
	}

	got, err := p.Extend([]int64{6, 0, 8}, []int64{13, 5, 10}, []int64{45, -1, 55})
	must(t, err)
	wantInts(t, "Extend", got, []int64{46, 47, 20, 21, 22, 23, 36, 8, 9, 10, 11, 28, 12, 13})
	wantInts(t, "free list after extend", freeList(t, p, kvpool.ListFree), []int64{11})

	got, err = p.Decode([]int64{7, 9, 12}, []int64{25, 39, 62})
	must(t, err)
	wantInts(t, "Decode", got, []int64{26, 44, 63})
	wantInts(t, "free list after decode", freeList(t, p, kvpool.ListFree), nil)

	// A request needing a page now fails and changes nothing.
	_, err = p.Decode([]int64{5}, []int64{7})
	kerr := wantCode(t, err, kvpool.ErrOutOfMemory)
	if kerr.Msg == "" {
		t.Errorf("out-of-memory error without a message")
	}
	if n := available(t, p); n != 0 {
		t.Errorf("Available = %d after a failed decode", n)
	}
	report, err := p.Check()
	must(t, err)
	if !strings.HasPrefix(report, "ok: 16 pages held, 0 free") {
		t.Errorf("Check() = %q", report)
	}
}

func TestDoubleFreeIsRejected(t *testing.T) {
	p := open(t, pagedConfig)
	slots, err := p.Alloc(4)
	must(t, err)
	must(t, p.Free(slots))
	err = p.Free(slots)
	kerr := wantCode(t, err, kvpool.ErrInvalidArgument)
	if !strings.Contains(kerr.Msg, "kvalloc_free") {
		t.Errorf("message %q does not name kvalloc_free", kerr.Msg)
	}
	if n := available(t, p); n != 64 {
		t.Errorf("Available = %d, want 64", n)
	}
	// Reserved slot 0 and out-of-range slots are rejected the same way.
	wantCode(t, p.Free([]int64{0}), kvpool.ErrInvalidArgument)
	wantCode(t, p.Free([]int64{1000}), kvpool.ErrInvalidArgument)
}

func TestOutOfMemoryChangesNothing(t *testing.T) {
	p := open(t, pagedConfig)
	held, err := p.Alloc(8)
	must(t, err)
	before := freeList(t, p, kvpool.ListFree)
	_, err = p.Alloc(60)
	wantCode(t, err, kvpool.ErrOutOfMemory)
	_, err = p.Extend([]int64{0}, []int64{30000}, []int64{-1})
	wantCode(t, err, kvpool.ErrOutOfMemory)
	if n := available(t, p); n != 56 {
		t.Errorf("Available = %d after failed allocations, want 56", n)
	}
	wantInts(t, "free list", freeList(t, p, kvpool.ListFree), before)
	// Sizes no pool can hold fail before any allocation.
	_, err = p.Alloc(1 << 40)
	wantCode(t, err, kvpool.ErrOutOfMemory)
	_, err = p.Alloc(-1)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	must(t, p.Free(held))
}

func TestBackupRestore(t *testing.T) {
	p := open(t, pagedConfig)
	first, err := p.Alloc(8)
	must(t, err)
	before := freeList(t, p, kvpool.ListFree)
	token, err := p.Backup()
	must(t, err)
	_, err = p.Alloc(12)
	must(t, err)
	must(t, p.Free(first))
	if n := available(t, p); n != 52 {
		t.Fatalf("Available = %d, want 52", n)
	}
	must(t, p.Restore(token))
	if n := available(t, p); n != 56 {
		t.Errorf("Available = %d after Restore, want 56", n)
	}
	wantInts(t, "free list after Restore", freeList(t, p, kvpool.ListFree), before)
	wantCode(t, p.Restore(token+1), kvpool.ErrInvalidArgument)
	// What was allocated before the backup is still held.
	must(t, p.Free(first))
}

func TestFreeGroup(t *testing.T) {
	p := open(t, pagedConfig)
	slots, err := p.Alloc(8)
	must(t, err)
	must(t, p.FreeGroupBegin())
	wantCode(t, p.FreeGroupBegin(), kvpool.ErrInvalidArgument) // one group at a time
	must(t, p.Free(slots[:1]))
	must(t, p.Free(slots[4:5]))
	if n := available(t, p); n != 56 {
		t.Errorf("Available = %d inside the group, want 56", n)
	}
	stats, err := p.Stats()
	must(t, err)
	if stats.TokenPending != 8 {
		t.Errorf("TokenPending = %d, want 8", stats.TokenPending)
	}
	must(t, p.FreeGroupEnd())
	if n := available(t, p); n != 64 {
		t.Errorf("Available = %d after the group, want 64", n)
	}
	wantCode(t, p.FreeGroupEnd(), kvpool.ErrInvalidArgument)
}

func TestDeferredFreesMergeAndSort(t *testing.T) {
	p := open(t, prefillConfig)
	slots, err := p.Alloc(12) // pages 1, 2, 3
	must(t, err)
	must(t, p.Free(slots[8:])) // page 3
	must(t, p.Free(slots[:4])) // page 1
	released := freeList(t, p, kvpool.ListRelease)
	sort.Slice(released, func(i, j int) bool { return released[i] < released[j] })
	wantInts(t, "release list (sorted)", released, []int64{1, 3})
	wantInts(t, "free list", freeList(t, p, kvpool.ListFree), seq(4, 16))
	if n := available(t, p); n != 60 {
		t.Errorf("Available = %d, want 60 (deferred pages count)", n)
	}
	must(t, p.MergeAndSort())
	wantInts(t, "release list after merge", freeList(t, p, kvpool.ListRelease), nil)
	wantInts(t, "free list after merge", freeList(t, p, kvpool.ListFree), append([]int64{1, 3}, seq(4, 16)...))
}

func TestClearAllocatorAndTokenPool(t *testing.T) {
	p := open(t, tokenConfig)
	kind, err := p.AllocKind()
	must(t, err)
	if kind != kvpool.AllocToken {
		t.Fatalf("AllocKind = %v, want token", kind)
	}
	slots, err := p.Alloc(3)
	must(t, err)
	wantInts(t, "Alloc(3)", slots, []int64{1, 2, 3})
	// Token allocator: freed slots go to the back (FIFO).
	must(t, p.Free(slots[:1]))
	wantInts(t, "free list", freeList(t, p, kvpool.ListFree), append(seq(4, 16), 1))
	// page_size 1: extend is a plain allocation of the sum of the extends.
	got, err := p.Extend([]int64{0, 2}, []int64{2, 3}, []int64{-1, 3})
	must(t, err)
	wantInts(t, "Extend", got, []int64{4, 5, 6})
	must(t, p.ClearAllocator())
	if n := available(t, p); n != 16 {
		t.Errorf("Available = %d after ClearAllocator, want 16", n)
	}
	wantInts(t, "free list after clear", freeList(t, p, kvpool.ListFree), seq(1, 16))
}

// The free list grows past the first guess of FreeList (64 ids).
func TestFreeListLongerThanFirstBuffer(t *testing.T) {
	p := open(t, strings.Replace(tokenConfig, `"max_total_tokens":16`, `"max_total_tokens":200`, 1))
	wantInts(t, "free list", freeList(t, p, kvpool.ListFree), seq(1, 200))
}

func TestSWA(t *testing.T) {
	p := open(t, swaConfig)
	kind, err := p.AllocKind()
	must(t, err)
	if kind != kvpool.AllocSWA {
		t.Fatalf("AllocKind = %v, want swa", kind)
	}
	swaAvail := func(wantFull, wantSWA int) {
		t.Helper()
		full, swa, err := p.SWAAvailable()
		must(t, err)
		if full != wantFull || swa != wantSWA {
			t.Fatalf("SWAAvailable = %d, %d; want %d, %d", full, swa, wantFull, wantSWA)
		}
	}
	swaAvail(16, 16)
	slots, err := p.Alloc(3)
	must(t, err)
	wantInts(t, "Alloc(3)", slots, []int64{1, 2, 3})
	swaAvail(13, 13)
	window, err := p.TranslateSWA(slots)
	must(t, err)
	seen := map[int64]bool{}
	for _, w := range window {
		if w < 1 || w > 16 || seen[w] {
			t.Fatalf("TranslateSWA(%v) = %v: not distinct window slots", slots, window)
		}
		seen[w] = true
	}
	must(t, p.FreeSWA(slots[:1]))
	swaAvail(13, 14)
	window, err = p.TranslateSWA(slots[:1])
	must(t, err)
	wantInts(t, "window of a slid-out token", window, []int64{0})
	if n := len(freeList(t, p, kvpool.ListSWAFree)); n != 14 {
		t.Errorf("swa free list has %d slots, want 14", n)
	}
	wantInts(t, "swa release list", freeList(t, p, kvpool.ListSWARelease), nil)
	must(t, p.Free(slots))
	swaAvail(16, 16)

	_, err = p.Available()
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.Extend([]int64{0}, []int64{1}, []int64{-1})
	wantCode(t, err, kvpool.ErrUnsupported)

	// ...and the swa functions on a paged pool.
	paged := open(t, pagedConfig)
	_, _, err = paged.SWAAvailable()
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = paged.TranslateSWA([]int64{4})
	wantCode(t, err, kvpool.ErrUnsupported)
	wantCode(t, paged.FreeSWA([]int64{4}), kvpool.ErrUnsupported)
	_, err = paged.FreeList(kvpool.ListSWAFree)
	wantCode(t, err, kvpool.ErrUnsupported)
}

// Slices go to C as they are: C writes straight into a window of a larger slice.
func TestZeroCopyIntoSubSlices(t *testing.T) {
	p := open(t, pagedConfig)
	buf := []int64{-7, -7, -7, -7, -7, -7, -7, -7, -7, -7}
	must(t, p.AllocInto(buf[3:7]))
	wantInts(t, "buffer after AllocInto(buf[3:7])", buf, []int64{-7, -7, -7, 4, 5, 6, 7, -7, -7, -7})

	n, err := kvpool.ExtendLen([]int64{4, 0}, []int64{6, 1})
	must(t, err)
	if n != 3 {
		t.Fatalf("ExtendLen = %d, want 3", n)
	}
	out := []int64{-1, -1, -1, -1, -1}
	must(t, p.ExtendInto([]int64{4, 0}, []int64{6, 1}, []int64{7, -1}, out[1:4]))
	wantInts(t, "buffer after ExtendInto", out, []int64{-1, 8, 9, 12, -1})

	dec := []int64{0, 0, 0}
	must(t, p.DecodeInto([]int64{7}, []int64{9}, dec[2:]))
	wantInts(t, "buffer after DecodeInto", dec, []int64{0, 0, 10})
}

func TestClosedPoolAllocator(t *testing.T) {
	p, err := kvpool.Open(pagedConfig)
	must(t, err)
	p.Close()
	_, err = p.Alloc(4)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	wantCode(t, p.Free([]int64{4}), kvpool.ErrInvalidArgument)
	_, err = p.Stats()
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = p.Check()
	wantCode(t, err, kvpool.ErrInvalidArgument)
}
