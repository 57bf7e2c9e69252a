package kvpool_test

import (
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

func reqAvailable(t *testing.T, p *kvpool.Pool) int {
	t.Helper()
	n, err := p.ReqAvailable()
	must(t, err)
	return n
}

func TestRequestRows(t *testing.T) {
	p := open(t, pagedConfig)
	if n := reqAvailable(t, p); n != 8 {
		t.Fatalf("ReqAvailable = %d, want 8", n)
	}
	rows, err := p.ReqAlloc(2)
	must(t, err)
	wantInts(t, "ReqAlloc(2)", rows, []int32{1, 2}) // row 0 is reserved
	if n := reqAvailable(t, p); n != 6 {
		t.Fatalf("ReqAvailable = %d, want 6", n)
	}

	must(t, p.ReqWrite(rows[0], 1, []int64{4, 5, 6}))
	got, err := p.ReqRead(rows[0], 1, 3)
	must(t, err)
	wantInts(t, "ReqRead", got, []int64{4, 5, 6})

	// Batch write: row 1 = prefix [4 5] + new [6]; row 2 = new [8 9].
	must(t, p.ReqWriteBatch(rows, []int64{2, 0}, []int64{3, 2}, []int64{4, 5}, []int64{6, 8, 9}))
	got, err = p.ReqRead(rows[0], 0, 3)
	must(t, err)
	wantInts(t, "row 1", got, []int64{4, 5, 6})
	got, err = p.ReqRead(rows[1], 0, 2)
	must(t, err)
	wantInts(t, "row 2", got, []int64{8, 9})
	// Lengths that disagree are rejected and write nothing.
	err = p.ReqWriteBatch(rows, []int64{2, 0}, []int64{3, 2}, []int64{4, 5}, []int64{7})
	wantCode(t, err, kvpool.ErrInvalidArgument)
	got, err = p.ReqRead(rows[1], 0, 2)
	must(t, err)
	wantInts(t, "row 2 after a rejected batch", got, []int64{8, 9})

	last, err := p.LastLoc(rows, []int64{3, 2})
	must(t, err)
	wantInts(t, "LastLoc", last, []int64{6, 9})
	last, err = p.LastLoc(rows, []int64{0, 1})
	must(t, err)
	wantInts(t, "LastLoc of an empty prefix", last, []int64{-1, 8})

	// Zero copy: reads land in a window of a larger slice.
	buf := []int64{-1, -1, -1, -1}
	must(t, p.ReqReadInto(rows[0], 1, buf[1:3]))
	wantInts(t, "buffer after ReqReadInto", buf, []int64{-1, 5, 6, -1})
	last = []int64{0, 0, 0}
	must(t, p.LastLocInto(rows[1:], []int64{2}, last[2:]))
	wantInts(t, "buffer after LastLocInto", last, []int64{0, 0, 9})

	_, err = p.ReqRead(rows[0], 62, 3) // past max_context_len
	wantCode(t, err, kvpool.ErrInvalidArgument)
	_, err = p.ReqAlloc(7)
	wantCode(t, err, kvpool.ErrOutOfMemory)
	if n := reqAvailable(t, p); n != 6 {
		t.Errorf("ReqAvailable = %d after a failed alloc, want 6", n)
	}

	must(t, p.ReqFree(rows[:1]))
	wantCode(t, p.ReqFree(rows[:1]), kvpool.ErrInvalidArgument) // double free
	wantCode(t, p.ReqFree([]int32{0}), kvpool.ErrInvalidArgument)
	// Rows are reused FIFO: freed rows go to the back.
	more, err := p.ReqAlloc(6)
	must(t, err)
	wantInts(t, "ReqAlloc(6)", more, []int32{3, 4, 5, 6, 7, 8})
	into := []int32{0, 0, 0}
	must(t, p.ReqAllocInto(into[1:2]))
	wantInts(t, "buffer after ReqAllocInto", into, []int32{0, 1, 0})

	must(t, p.ReqClear())
	if n := reqAvailable(t, p); n != 8 {
		t.Errorf("ReqAvailable = %d after ReqClear, want 8", n)
	}
}

// The engine loop the C API is built for: rows, extend from the last
// locations, write the batch, then decode.
func TestPrefillThenDecode(t *testing.T) {
	p := open(t, pagedConfig)
	rows, err := p.ReqAlloc(2)
	must(t, err)
	prefix := []int64{0, 0}
	seqLens := []int64{5, 3}
	last, err := p.LastLoc(rows, prefix)
	must(t, err)
	slots, err := p.Extend(prefix, seqLens, last)
	must(t, err)
	wantInts(t, "Extend", slots, []int64{4, 5, 6, 7, 8, 12, 13, 14})
	must(t, p.ReqWriteBatch(rows, prefix, seqLens, nil, slots))
	last, err = p.LastLoc(rows, seqLens)
	must(t, err)
	wantInts(t, "LastLoc", last, []int64{8, 14})
	next, err := p.Decode([]int64{6, 4}, last)
	must(t, err)
	wantInts(t, "Decode", next, []int64{9, 15})
	must(t, p.ReqWrite(rows[0], 5, next[:1]))
	must(t, p.ReqWrite(rows[1], 3, next[1:]))
	report, err := p.Check()
	must(t, err)
	if !strings.HasPrefix(report, "ok: 3 pages held, 13 free, 2 rows held") {
		t.Errorf("Check() = %q", report)
	}
}
