package kvpool_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// The device.h calls on CPU pools: their "device memory" is host memory
// (HostBuffer), they run at once, and their results must equal those of the
// host-array calls on a second, identical pool.

// hostInt64s is a HostBuffer holding values, freed by the test's cleanup.
func hostInt64s(t *testing.T, values ...int64) *kvpool.HostBuffer {
	t.Helper()
	b, err := kvpool.NewHostInt64s(values...)
	must(t, err)
	t.Cleanup(b.Free)
	return b
}

func hostInt32s(t *testing.T, values ...int32) *kvpool.HostBuffer {
	t.Helper()
	b, err := kvpool.NewHostInt32s(values...)
	must(t, err)
	t.Cleanup(b.Free)
	return b
}

func hostBuffer(t *testing.T, bytes int) *kvpool.HostBuffer {
	t.Helper()
	b, err := kvpool.NewHostBuffer(bytes)
	must(t, err)
	t.Cleanup(b.Free)
	return b
}

func TestDeviceAllocatorMatchesHostCalls(t *testing.T) {
	host := open(t, pagedConfig)
	dev := open(t, pagedConfig)
	must(t, dev.Synchronize(0))

	prefix := []int64{0, 0}
	seq := []int64{5, 3}
	want, err := host.Extend(prefix, seq, []int64{-1, -1})
	must(t, err)
	wantInts(t, "Extend", want, []int64{4, 5, 6, 7, 8, 12, 13, 14}) // pages 1, 2 and 3

	pages, err := dev.ExtendPages(prefix, seq)
	must(t, err)
	if pages != 3 {
		t.Fatalf("ExtendPages = %d, want 3", pages)
	}
	prefixDev, seqDev, lastDev := hostInt64s(t, prefix...), hostInt64s(t, seq...), hostInt64s(t, -1, -1)
	slots := hostInt64s(t, make([]int64, len(want))...)
	newPages := hostInt64s(t, make([]int64, pages)...)
	must(t, dev.ExtendAsync(prefix, seq, prefixDev.Addr(), seqDev.Addr(), lastDev.Addr(), slots.Addr(), len(want),
		newPages.Addr(), pages, 0))
	must(t, dev.Synchronize(0))
	wantInts(t, "ExtendAsync slots", slots.Int64s(), want)
	wantInts(t, "ExtendAsync new pages", newPages.Int64s(), []int64{1, 2, 3})

	// Decode: request 0 continues page 2, request 1 page 3.
	wantDecode, err := host.Decode([]int64{6, 4}, []int64{8, 14})
	must(t, err)
	decSeq, decLast, decSlots := hostInt64s(t, 6, 4), hostInt64s(t, 8, 14), hostInt64s(t, 0, 0)
	must(t, dev.DecodeAsync([]int64{6, 4}, decSeq.Addr(), decLast.Addr(), decSlots.Addr(), 0, 0, 0))
	wantInts(t, "DecodeAsync", decSlots.Int64s(), wantDecode)
	wantInts(t, "DecodeAsync", decSlots.Int64s(), []int64{9, 15})

	// Alloc: the next whole page.
	wantAlloc, err := host.Alloc(4)
	must(t, err)
	allocSlots := hostInt64s(t, 0, 0, 0, 0)
	must(t, dev.AllocAsync(allocSlots.Addr(), 4, 0))
	wantInts(t, "AllocAsync", allocSlots.Int64s(), wantAlloc)
	wantInts(t, "AllocAsync", allocSlots.Int64s(), []int64{16, 17, 18, 19})

	hostAvail, err := host.Available()
	must(t, err)
	devAvail, err := dev.Available()
	must(t, err)
	if hostAvail != devAvail || devAvail != 64-16 {
		t.Fatalf("Available: host %d, device %d, want %d", hostAvail, devAvail, 64-16)
	}

	// Give the extend's pages back: they go, sorted, to the front of the free list.
	must(t, dev.FreePagesAsync(newPages.Addr(), pages, 0))
	must(t, dev.Synchronize(0))
	avail, err := dev.Available()
	must(t, err)
	if avail != 64-4 {
		t.Fatalf("Available after FreePagesAsync = %d, want %d", avail, 64-4)
	}
	free, err := dev.FreeList(kvpool.ListFree)
	must(t, err)
	wantInts(t, "free list front", free[:4], []int64{1, 2, 3, 5})
}

func TestDeviceRequestTable(t *testing.T) {
	p := open(t, pagedConfig)
	rows, err := p.ReqAlloc(2)
	must(t, err)
	slots, err := p.Extend([]int64{0, 0}, []int64{5, 3}, []int64{-1, -1})
	must(t, err)

	rowsDev := hostInt32s(t, rows...)
	prefixDev, seqDev := hostInt64s(t, 0, 0), hostInt64s(t, 5, 3)
	extendDev := hostInt64s(t, slots...)
	must(t, p.ReqWriteBatchAsync(rowsDev.Addr(), prefixDev.Addr(), seqDev.Addr(), 2, 0, 0, extendDev.Addr(),
		len(slots), 0))
	got0, err := p.ReqRead(rows[0], 0, 5)
	must(t, err)
	wantInts(t, "row 0", got0, slots[:5])
	got1, err := p.ReqRead(rows[1], 0, 3)
	must(t, err)
	wantInts(t, "row 1", got1, slots[5:])

	// The last prefix token of prefixes 5 and 2; an empty prefix gives -1.
	want, err := p.LastLoc(rows, []int64{5, 2})
	must(t, err)
	lens, lastLocs := hostInt64s(t, 5, 2), hostInt64s(t, 0, 0)
	must(t, p.LastLocAsync(rowsDev.Addr(), lens.Addr(), 2, lastLocs.Addr(), 0))
	wantInts(t, "LastLocAsync", lastLocs.Int64s(), want)
	wantInts(t, "LastLocAsync", lastLocs.Int64s(), []int64{8, 13})
	empty := hostInt64s(t, 0, 0)
	must(t, p.LastLocAsync(rowsDev.Addr(), empty.Addr(), 2, lastLocs.Addr(), 0))
	wantInts(t, "LastLocAsync, empty prefixes", lastLocs.Int64s(), []int64{-1, -1})

	// A length that does not match the batch is rejected and writes nothing.
	wantCode(t, p.ReqWriteBatchAsync(rowsDev.Addr(), prefixDev.Addr(), seqDev.Addr(), 2, 0, 0, extendDev.Addr(),
		len(slots)-1, 0), kvpool.ErrInvalidArgument)
}

func TestDeviceKV(t *testing.T) {
	p := open(t, pagedConfig)
	slots, err := p.Alloc(8)
	must(t, err)
	const n = 3
	k := kvpool.Float32Bytes(ramp(n*rowFloats, 1))
	v := kvpool.Float32Bytes(ramp(n*rowFloats, -50))
	slotsDev := hostInt64s(t, slots[:n]...)
	kDev, vDev := hostBuffer(t, len(k)), hostBuffer(t, len(v))
	copy(kDev.Bytes(), k)
	copy(vDev.Bytes(), v)
	must(t, p.SetKVAsync(1, slotsDev.Addr(), n, kDev.Addr(), len(k), vDev.Addr(), len(v), kvpool.DTypeF32, 1, 1, 0))
	must(t, p.Synchronize(0))

	// The host call reads back exactly the bytes written.
	gotK, gotV := make([]byte, len(k)), make([]byte, len(v))
	must(t, p.GetKV(1, slots[:n], gotK, gotV, kvpool.DTypeF32))
	if !bytes.Equal(gotK, k) || !bytes.Equal(gotV, v) {
		t.Fatal("GetKV after SetKVAsync: not the bytes written")
	}
	// Layer 0 was not written.
	must(t, p.GetKV(0, slots[:n], gotK, gotV, kvpool.DTypeF32))
	if !bytes.Equal(gotK, make([]byte, len(k))) {
		t.Fatal("SetKVAsync wrote another layer")
	}

	// The device gather gives the same bytes.
	outK, outV := hostBuffer(t, len(k)), hostBuffer(t, len(v))
	must(t, p.GetKVAsync(1, slotsDev.Addr(), n, outK.Addr(), len(k), outV.Addr(), len(v), kvpool.DTypeF32, 0))
	if !bytes.Equal(outK.Bytes(), k) || !bytes.Equal(outV.Bytes(), v) {
		t.Fatal("GetKVAsync: not the bytes written")
	}

	// Move the three rows to three other slots.
	dst := slots[4 : 4+n]
	dstDev := hostInt64s(t, dst...)
	must(t, p.MoveKVAsync(dstDev.Addr(), n, slotsDev.Addr(), n, 0))
	must(t, p.GetKV(1, dst, gotK, gotV, kvpool.DTypeF32))
	if !bytes.Equal(gotK, k) || !bytes.Equal(gotV, v) {
		t.Fatal("GetKV after MoveKVAsync: the rows did not move")
	}

	// Wrong byte counts are rejected.
	wantCode(t, p.SetKVAsync(1, slotsDev.Addr(), n, kDev.Addr(), len(k)-4, vDev.Addr(), len(v), kvpool.DTypeF32, 1, 1,
		0), kvpool.ErrInvalidArgument)
	wantCode(t, p.MoveKVAsync(dstDev.Addr(), n, slotsDev.Addr(), n-1, 0), kvpool.ErrInvalidArgument)
}

func TestDeviceMLAKV(t *testing.T) {
	p := open(t, mlaConfig)
	slots, err := p.Alloc(4)
	must(t, err)
	const n, rank, rope = 2, 16, 8
	nope := ramp(n*rank, 1)
	ropeV := ramp(n*rope, 100)
	slotsDev := hostInt64s(t, slots[:n]...)
	nopeDev, ropeDev := hostBuffer(t, 4*len(nope)), hostBuffer(t, 4*len(ropeV))
	copy(nopeDev.Bytes(), kvpool.Float32Bytes(nope))
	copy(ropeDev.Bytes(), kvpool.Float32Bytes(ropeV))
	must(t, p.SetMLAKVAsync(0, slotsDev.Addr(), n, nopeDev.Addr(), nopeDev.Len(), ropeDev.Addr(), ropeDev.Len(),
		kvpool.DTypeF32, 0))

	// Each stored row is nope then rope.
	var want []float32
	for i := 0; i < n; i++ {
		want = append(want, nope[i*rank:(i+1)*rank]...)
		want = append(want, ropeV[i*rope:(i+1)*rope]...)
	}
	got := make([]float32, n*(rank+rope))
	must(t, p.GetKV(0, slots[:n], kvpool.Float32Bytes(got), nil, kvpool.DTypeF32))
	if !bytes.Equal(kvpool.Float32Bytes(got), kvpool.Float32Bytes(want)) {
		t.Fatalf("GetKV after SetMLAKVAsync = %v, want %v", got, want)
	}
}

func TestDeviceErrors(t *testing.T) {
	p := open(t, pagedConfig)
	slots := hostInt64s(t, 0, 0, 0, 0)

	// A NULL address with a length, a wrong slot count, host lengths that disagree.
	wantCode(t, p.AllocAsync(0, 4, 0), kvpool.ErrInvalidArgument)
	wantCode(t, p.AllocAsync(slots.Addr(), -1, 0), kvpool.ErrInvalidArgument)
	lens := hostInt64s(t, 0)
	seq := hostInt64s(t, 4)
	last := hostInt64s(t, -1)
	wantCode(t, p.ExtendAsync([]int64{0}, []int64{4}, lens.Addr(), seq.Addr(), last.Addr(), slots.Addr(), 3, 0, 0, 0),
		kvpool.ErrInvalidArgument)
	wantCode(t, p.ExtendAsync([]int64{0}, []int64{4, 4}, lens.Addr(), seq.Addr(), last.Addr(), slots.Addr(), 4, 0, 0,
		0), kvpool.ErrInvalidArgument)
	_, err := p.ExtendPages([]int64{0, 0}, []int64{4})
	wantCode(t, err, kvpool.ErrInvalidArgument)
	// The same through the raw wrapper: the shorter host array is passed as NULL.
	var raw uintptr
	must(t, kvpool.Kvpool_create(pagedConfig, &raw))
	defer kvpool.Kvpool_destroy(kvpool.SwigcptrKvpool(raw))
	var pages uint
	must(t, kvpool.Kvalloc_extend_pages(kvpool.SwigcptrKvpool(raw), []int64{0, 0}, []int64{4, 1}, &pages))
	if pages != 2 {
		t.Fatalf("Kvalloc_extend_pages = %d, want 2", pages)
	}
	kerr := wantCode(t, kvpool.Kvalloc_extend_pages(kvpool.SwigcptrKvpool(raw), []int64{0, 0}, []int64{4}, &pages),
		kvpool.ErrInvalidArgument)
	if !strings.Contains(kerr.Msg, "seq_lens_host") {
		t.Errorf("message %q does not name seq_lens_host", kerr.Msg)
	}
	h := kvpool.SwigcptrKvpool(0)
	wantCode(t, kvpool.Kvalloc_extend_pages(h, []int64{0}, []int64{4}, &pages), kvpool.ErrInvalidArgument)
	// Host lengths that differ from the "device" ones.
	otherSeq := hostInt64s(t, 8)
	kerr = wantCode(t, p.ExtendAsync([]int64{0}, []int64{4}, lens.Addr(), otherSeq.Addr(), last.Addr(), slots.Addr(),
		4, 0, 0, 0), kvpool.ErrInvalidArgument)
	if kerr.Msg == "" {
		t.Error("no message")
	}
	// Nothing was allocated by the failed calls.
	avail, err := p.Available()
	must(t, err)
	if avail != 64 {
		t.Fatalf("Available = %d after failed calls, want 64", avail)
	}
	// Freeing a page that is not allocated.
	free := hostInt64s(t, 2)
	wantCode(t, p.FreePagesAsync(free.Addr(), 1, 0), kvpool.ErrInvalidArgument)

	// A NULL pool (raw call) and a closed Pool.
	wantCode(t, kvpool.Kvpool_synchronize(h, 0), kvpool.ErrInvalidArgument)
	closed, err := kvpool.Open(pagedConfig)
	must(t, err)
	closed.Close()
	wantCode(t, closed.Synchronize(0), kvpool.ErrInvalidArgument)
	wantCode(t, closed.AllocAsync(slots.Addr(), 4, 0), kvpool.ErrInvalidArgument)

	// swa has no stream-ordered allocation.
	swa := open(t, swaConfig)
	wantCode(t, swa.AllocAsync(slots.Addr(), 4, 0), kvpool.ErrUnsupported)
}

func TestDeviceMamba(t *testing.T) {
	host := open(t, hybridConfig)
	dev := open(t, hybridConfig)
	// Dirty a state slot of both pools and free it, so that a slot handed out
	// again must be zeroed by the allocation.
	for _, p := range []*kvpool.Pool{host, dev} {
		dirty, err := p.MambaAlloc(1)
		must(t, err)
		must(t, p.MambaWrite(1, dirty[0], kvpool.Float32Bytes(ramp(convFloats, 9)), kvpool.Float32Bytes(ramp(ssmFloats, 9))))
		must(t, p.MambaFree(dirty))
	}

	// Every slot: the same ids as MambaAlloc on the twin pool, all states zero.
	want, err := host.MambaAlloc(20)
	must(t, err)
	slots, err := dev.MambaAllocAsync(20, 0)
	must(t, err)
	must(t, dev.Synchronize(0))
	wantInts(t, "MambaAllocAsync", slots, want)
	for _, slot := range slots {
		for layer := 0; layer < 3; layer++ {
			conv, ssm := readState(t, dev, layer, slot)
			sameFloats(t, "MambaAllocAsync conv", conv, make([]float32, convFloats))
			sameFloats(t, "MambaAllocAsync ssm", ssm, make([]float32, ssmFloats))
		}
	}
	if n := mambaAvailable(t, dev); n != 0 {
		t.Fatalf("MambaAvailable = %d, want 0", n)
	}
	_, err = dev.MambaAllocAsync(1, 0)
	wantCode(t, err, kvpool.ErrOutOfMemory)
	must(t, dev.MambaFree(slots[10:]))

	// Fork: a new slot holding a copy of a written state.
	wantConv, wantSSM := ramp(convFloats, 1), ramp(ssmFloats, -3)
	must(t, dev.MambaWrite(1, slots[0], kvpool.Float32Bytes(wantConv), kvpool.Float32Bytes(wantSSM)))
	fork, err := dev.MambaForkAsync(slots[0], 0)
	must(t, err)
	must(t, dev.Synchronize(0))
	if fork < 1 || fork == slots[0] {
		t.Fatalf("MambaForkAsync = %d", fork)
	}
	conv, ssm := readState(t, dev, 1, fork)
	sameFloats(t, "forked conv", conv, wantConv)
	sameFloats(t, "forked ssm", ssm, wantSSM)
	if n := mambaAvailable(t, dev); n != 9 {
		t.Fatalf("MambaAvailable after MambaForkAsync = %d, want 9", n)
	}

	// Batched copy, slot ids at host addresses: slots[2] <- slots[1], fork <- slots[1].
	otherConv, otherSSM := ramp(convFloats, 40), ramp(ssmFloats, -40)
	must(t, dev.MambaWrite(1, slots[1], kvpool.Float32Bytes(otherConv), kvpool.Float32Bytes(otherSSM)))
	src, dst := hostInt32s(t, slots[1], slots[1]), hostInt32s(t, slots[2], fork)
	must(t, dev.MambaCopyAsync(src.Addr(), 2, dst.Addr(), 2, 0))
	must(t, dev.Synchronize(0))
	for _, slot := range []int32{slots[2], fork} {
		conv, ssm = readState(t, dev, 1, slot)
		sameFloats(t, "copied conv", conv, otherConv)
		sameFloats(t, "copied ssm", ssm, otherSSM)
	}
	conv, _ = readState(t, dev, 1, slots[0])
	sameFloats(t, "source of the fork", conv, wantConv)

	// Lengths that differ, a negative length, a free slot (nothing copied), a free fork source.
	wantCode(t, dev.MambaCopyAsync(src.Addr(), 2, dst.Addr(), 1, 0), kvpool.ErrInvalidArgument)
	wantCode(t, dev.MambaCopyAsync(src.Addr(), -1, dst.Addr(), 2, 0), kvpool.ErrInvalidArgument)
	freeDst := hostInt32s(t, slots[3], slots[15])
	wantCode(t, dev.MambaCopyAsync(src.Addr(), 2, freeDst.Addr(), 2, 0), kvpool.ErrInvalidArgument)
	conv, _ = readState(t, dev, 1, slots[3])
	sameFloats(t, "slot of a rejected copy", conv, make([]float32, convFloats))
	_, err = dev.MambaForkAsync(slots[15], 0)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = dev.MambaAllocAsync(-1, 0)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	if n := mambaAvailable(t, dev); n != 9 {
		t.Fatalf("MambaAvailable after failed calls = %d, want 9", n)
	}
	_, err = dev.Check()
	must(t, err)

	// No mamba states: unsupported.
	plain := open(t, pagedConfig)
	_, err = plain.MambaAllocAsync(1, 0)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = plain.MambaForkAsync(1, 0)
	wantCode(t, err, kvpool.ErrUnsupported)
	wantCode(t, plain.MambaCopyAsync(src.Addr(), 1, dst.Addr(), 1, 0), kvpool.ErrUnsupported)
}

func TestOpenWithAllocator(t *testing.T) {
	// 0: the default allocator, i.e. Open.
	p, err := kvpool.OpenWithAllocator(pagedConfig, 0)
	must(t, err)
	defer p.Close()
	if backend, err := p.Backend(); err != nil || backend != "cpu" {
		t.Fatalf("Backend() = %q, %v", backend, err)
	}
	slots, err := p.Alloc(8)
	must(t, err)
	wantInts(t, "Alloc", slots, []int64{4, 5, 6, 7, 8, 9, 10, 11})
	k := kvpool.Float32Bytes(ramp(rowFloats, 3))
	must(t, p.SetKV(0, slots[:1], k, k, kvpool.DTypeF32, 1, 1))
	got, gotV := make([]byte, len(k)), make([]byte, len(k))
	must(t, p.GetKV(0, slots[:1], got, gotV, kvpool.DTypeF32))
	if !bytes.Equal(got, k) || !bytes.Equal(gotV, k) {
		t.Fatal("GetKV: not the bytes written")
	}

	// A kvpool_allocator whose struct_size is 0 (zeroed memory) is rejected.
	zeroed := hostBuffer(t, 64)
	_, err = kvpool.OpenWithAllocator(pagedConfig, zeroed.Addr())
	wantCode(t, err, kvpool.ErrInvalidArgument)
	// A bad configuration is still a configuration error.
	_, err = kvpool.OpenWithAllocator("{", 0)
	wantCode(t, err, kvpool.ErrConfig)
}

func TestHostBuffer(t *testing.T) {
	b, err := kvpool.NewHostInt64s(1, -2, 3)
	must(t, err)
	if b.Addr() == 0 || b.Len() != 24 {
		t.Fatalf("Addr %#x, Len %d", b.Addr(), b.Len())
	}
	wantInts(t, "Int64s", b.Int64s(), []int64{1, -2, 3})
	b.Free()
	b.Free()
	if b.Addr() != 0 || b.Int64s() != nil {
		t.Fatal("a freed buffer still has memory")
	}
	_, err = kvpool.NewHostBuffer(-1)
	wantCode(t, err, kvpool.ErrInvalidArgument)
}

func TestDeviceSeqMatchesHostCalls(t *testing.T) {
	host := open(t, cacheConfig)
	dev := open(t, cacheConfig)

	// Two requests with a shared 8-token prefix, begun on both pools.
	promptA := tokenRange(100, 10)
	promptB := append(tokenRange(100, 8), tokenRange(500, 3)...)
	begin := func(p *kvpool.Pool, prompt []int32) uint64 {
		t.Helper()
		seq, _, err := p.Begin(prompt, "")
		must(t, err)
		return seq
	}
	a, b := begin(host, promptA), begin(host, promptB)
	if da, db := begin(dev, promptA), begin(dev, promptB); da != a || db != b {
		t.Fatalf("request ids differ: host %d, %d, device %d, %d", a, b, da, db)
	}
	sameState := func(what string, seqs ...uint64) {
		t.Helper()
		for _, s := range seqs {
			if hi, di := seqInfo(t, host, s), seqInfo(t, dev, s); hi != di {
				t.Fatalf("%s: SeqInfo(%d) host %+v, device %+v", what, s, hi, di)
			}
			hs, err := host.SeqSlots(s)
			must(t, err)
			ds, err := dev.SeqSlots(s)
			must(t, err)
			wantInts(t, what+": SeqSlots", ds, hs)
		}
		if ha, da := wantAccounting(t, host), wantAccounting(t, dev); ha != da {
			t.Fatalf("%s: accounting host %+v, device %+v", what, ha, da)
		}
	}

	// Two prefill chunks of the batch: [6, 5] then [4, 6].
	for _, chunks := range [][]int64{{6, 5}, {4, 6}} {
		want, err := host.SeqExtend([]uint64{a, b}, chunks)
		must(t, err)
		slots := hostInt64s(t, make([]int64, len(want))...)
		must(t, dev.SeqExtendAsync([]uint64{a, b}, chunks, slots.Addr(), len(want), 0))
		must(t, dev.Synchronize(0))
		wantInts(t, "SeqExtendAsync", slots.Int64s(), want)
		sameState("SeqExtendAsync", a, b)
	}

	// A third request reuses A's cached prefix (two whole pages).
	promptC := append(tokenRange(100, 8), 7, 8)
	c, cached, err := host.Begin(promptC, "")
	must(t, err)
	dc, dcached, err := dev.Begin(promptC, "")
	must(t, err)
	if dc != c || dcached != cached || cached != 8 {
		t.Fatalf("Begin C: host (%d, %d), device (%d, %d), want 8 cached", c, cached, dc, dcached)
	}
	want, err := host.SeqExtend([]uint64{c}, []int64{2})
	must(t, err)
	slots := hostInt64s(t, 0, 0)
	must(t, dev.SeqExtendAsync([]uint64{c}, []int64{2}, slots.Addr(), 2, 0))
	wantInts(t, "SeqExtendAsync (cached prefix)", slots.Int64s(), want)
	sameState("SeqExtendAsync (cached prefix)", a, b, c)

	// A decode step of all three.
	seqs, tokens := []uint64{a, b, c}, []int32{901, 902, 903}
	wantDecode, err := host.SeqDecode(seqs, tokens)
	must(t, err)
	decSlots := hostInt64s(t, 0, 0, 0)
	must(t, dev.SeqDecodeAsync(seqs, tokens, decSlots.Addr(), 3, 0))
	must(t, dev.Synchronize(0))
	wantInts(t, "SeqDecodeAsync", decSlots.Int64s(), wantDecode)
	sameState("SeqDecodeAsync", a, b, c)

	// A slot count other than the batch's is rejected and changes nothing.
	before := seqInfo(t, dev, a)
	wantCode(t, dev.SeqDecodeAsync(seqs, tokens, decSlots.Addr(), 2, 0), kvpool.ErrInvalidArgument)
	wantCode(t, dev.SeqDecodeAsync(seqs, tokens, decSlots.Addr(), -1, 0), kvpool.ErrInvalidArgument)
	d, _, err := dev.Begin(tokenRange(300, 6), "")
	must(t, err)
	big := hostInt64s(t, make([]int64, 6)...)
	wantCode(t, dev.SeqExtendAsync([]uint64{d}, []int64{6}, big.Addr(), 5, 0), kvpool.ErrInvalidArgument)
	wantCode(t, dev.SeqExtendAsync([]uint64{d}, []int64{6, 1}, big.Addr(), 6, 0), kvpool.ErrInvalidArgument)
	if after := seqInfo(t, dev, a); after != before {
		t.Fatalf("SeqInfo after failed calls = %+v, want %+v", after, before)
	}
	if info := seqInfo(t, dev, d); info.Computed != 0 {
		t.Fatalf("SeqInfo of the failed extend = %+v, want nothing computed", info)
	}
	wantAccounting(t, dev)
	must(t, dev.SeqExtendAsync([]uint64{d}, []int64{6}, big.Addr(), 6, 0))
	for _, s := range seqs {
		must(t, host.Finish(s, 11))
		must(t, dev.Finish(s, 11))
	}
	must(t, dev.Abort(d))
	wantAccounting(t, host)
	wantAccounting(t, dev)
}

func TestDeviceDecodeGraphMatchesDecode(t *testing.T) {
	host := open(t, pagedConfig)
	dev := open(t, pagedConfig)

	// Three requests get their first 5, 3 and 2 tokens: pages 1-2, 3 and 4,
	// 12 of the 16 pages stay free.
	prefix, first, none := []int64{0, 0, 0}, []int64{5, 3, 2}, []int64{-1, -1, -1}
	want, err := host.Extend(prefix, first, none)
	must(t, err)
	wantInts(t, "Extend", want, []int64{4, 5, 6, 7, 8, 12, 13, 14, 16, 17})
	got, err := dev.Extend(prefix, first, none)
	must(t, err)
	wantInts(t, "Extend (twin)", got, want)

	// Bad input is refused and takes nothing.
	zero, out := hostInt64s(t, 0), hostInt64s(t, -7)
	lastOne := hostInt64s(t, 8)
	wantCode(t, dev.DecodeGraphAsync(1, zero.Addr(), lastOne.Addr(), out.Addr(), 0), kvpool.ErrInvalidArgument)
	wantCode(t, dev.DecodeGraphAsync(1, 0, lastOne.Addr(), out.Addr(), 0), kvpool.ErrInvalidArgument)
	wantCode(t, dev.DecodeGraphAsync(-1, zero.Addr(), lastOne.Addr(), out.Addr(), 0), kvpool.ErrInvalidArgument)
	wantInts(t, "slots of the refused steps", out.Int64s(), []int64{-7})
	_, err = dev.DecodeWatermark(nil)
	wantCode(t, err, kvpool.ErrInvalidArgument) // an empty batch
	_, err = dev.DecodeWatermark([]int64{})
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = dev.DecodeWatermark([]int64{6, 0, 3})
	wantCode(t, err, kvpool.ErrInvalidArgument) // a length of 0
	wantCode(t, dev.DecodeGraphAdvance([]int64{0}, 1), kvpool.ErrInvalidArgument)
	wantCode(t, dev.DecodeGraphAdvance([]int64{6, 4, 3}, -1), kvpool.ErrInvalidArgument)
	if avail := available(t, dev); avail != 64-16 {
		t.Fatalf("Available after refused calls = %d, want %d", avail, 64-16)
	}

	// The steps start at lengths 6, 4 and 3; a request takes a page at
	// lengths 5, 9, 13, ...: 17 steps take the 12 free pages, an 18th would
	// take a 13th.
	seq := []int64{6, 4, 3}
	steps, err := dev.DecodeWatermark(seq)
	must(t, err)
	if steps != 17 {
		t.Fatalf("DecodeWatermark(%v) = %d, want 17", seq, steps)
	}
	hostSteps, err := host.DecodeWatermark(seq)
	must(t, err)
	if hostSteps != steps {
		t.Fatalf("DecodeWatermark on the twin = %d, want %d", hostSteps, steps)
	}

	// The graph's buffers: the engine's kernel would make each step's slots
	// the next step's lastLocs and add one to every length.
	seqDev, lastDev, slotsDev := hostInt64s(t, seq...), hostInt64s(t, 8, 14, 17), hostInt64s(t, 0, 0, 0)
	hostLast := []int64{8, 14, 17}
	for k := 0; k < steps; k++ {
		lens := append([]int64(nil), seqDev.Int64s()...)
		wantStep, err := host.Decode(lens, hostLast)
		must(t, err)
		must(t, dev.DecodeGraphAsync(len(seq), seqDev.Addr(), lastDev.Addr(), slotsDev.Addr(), 0))
		wantInts(t, "DecodeGraphAsync step "+strconv.Itoa(k), slotsDev.Int64s(), wantStep)
		copy(lastDev.Int64s(), slotsDev.Int64s())
		for i := range seqDev.Int64s() {
			seqDev.Int64s()[i]++
		}
		hostLast = wantStep
	}
	must(t, dev.Synchronize(0))
	must(t, dev.DecodeGraphAdvance(seq, steps))
	if ha, da := available(t, host), available(t, dev); ha != 0 || da != 0 {
		t.Fatalf("Available after %d steps: host %d, device %d, want 0", steps, ha, da)
	}

	// The step after the watermark does not fit, on either pool.
	wantInts(t, "lengths after the steps", seqDev.Int64s(), []int64{23, 21, 20})
	wantCode(t, dev.DecodeGraphAsync(len(seq), seqDev.Addr(), lastDev.Addr(), slotsDev.Addr(), 0),
		kvpool.ErrOutOfMemory)
	_, err = host.Decode(append([]int64(nil), seqDev.Int64s()...), hostLast)
	wantCode(t, err, kvpool.ErrOutOfMemory)
	left, err := dev.DecodeWatermark(seqDev.Int64s())
	must(t, err)
	if left != 0 {
		t.Fatalf("DecodeWatermark when full = %d, want 0", left)
	}
	_, err = dev.Check()
	must(t, err)

	// swa has no pages to count.
	swa := open(t, swaConfig)
	_, err = swa.DecodeWatermark([]int64{1})
	wantCode(t, err, kvpool.ErrUnsupported)
}
