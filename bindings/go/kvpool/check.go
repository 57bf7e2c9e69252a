package kvpool

import (
	"bytes"
	"errors"
	"strings"
)

// Check verifies the ownership and accounting invariants of every allocator
// in the pool and returns the library's one-line summary, e.g.
// "ok: 2 pages held, 14 free, 0 rows held". A broken invariant gives an
// *Error with ErrCheckFailed whose message is the report: every leaked or
// double-owned slot, page, row or state slot, one per line.
func (p *Pool) Check() (string, error) {
	report := make([]byte, 4096)
	for {
		err := p.call(func(h SwigcptrKvpool) error { return Kvpool_check(h, report) })
		text := cText(report)
		if err != nil {
			return "", checkError(err, text)
		}
		// A full buffer may have cut the report: try again with more room.
		if len(text) < len(report)-1 || len(report) >= 1<<24 {
			return text, nil
		}
		report = make([]byte, 4*len(report))
	}
}

// checkError makes sure the error of a failed check carries the report.
func checkError(err error, report string) error {
	var kerr *Error
	if errors.As(err, &kerr) && kerr.Code == ErrCheckFailed && report != "" && !strings.Contains(kerr.Msg, report) {
		kerr.Msg += "\n" + report
	}
	return err
}

// cText is the NUL-terminated text at the start of b.
func cText(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Stats is a snapshot of a pool's availability, sizes and counters
// (kvpool_stats in check.h).
type Stats struct {
	AllocKind      AllocKind // the allocator
	TokenCapacity  uint64    // usable token slots of the (full) pool
	TokenAvailable uint64    // free tokens (free + deferred pages x page_size)
	TokenHeld      uint64    // tokens in pages handed out and not freed
	TokenPending   uint64    // tokens freed inside an open free group
	SWACapacity    uint64    // swa: usable window slots
	SWAAvailable   uint64    // swa: free window slots
	SWAHeld        uint64    // swa: window slots handed out
	ReqCapacity    uint64    // request rows that can be handed out (excludes row 0)
	ReqAvailable   uint64    // free request rows
	MambaCapacity  uint64    // mamba state slots (excludes slot 0)
	MambaAvailable uint64    // free mamba state slots
	KVBytes        uint64    // bytes of the KV buffers
	ReqTableBytes  uint64    // bytes of the request table
	MambaBytes     uint64    // bytes of the mamba states
	AllocCalls     uint64    // successful allocation calls (alloc, extend, decode)
	FreeCalls      uint64    // successful free calls
	AllocFailures  uint64    // allocation calls that returned ErrOutOfMemory
	RejectedCalls  uint64    // allocator calls rejected with ErrInvalidArgument
}

// Stats is a snapshot of the pool's availability, sizes and counters.
func (p *Pool) Stats() (Stats, error) {
	s := NewKvpool_stats() // struct_size set by its constructor in kvpool.i
	if s.Swigcptr() == 0 {
		return Stats{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvpool_stats"}
	}
	defer DeleteKvpool_stats(s)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvpool_get_stats(h, s) }); err != nil {
		return Stats{}, err
	}
	return Stats{
		AllocKind:      AllocKind(s.GetAlloc_kind()),
		TokenCapacity:  s.GetToken_capacity(),
		TokenAvailable: s.GetToken_available(),
		TokenHeld:      s.GetToken_held(),
		TokenPending:   s.GetToken_pending(),
		SWACapacity:    s.GetSwa_capacity(),
		SWAAvailable:   s.GetSwa_available(),
		SWAHeld:        s.GetSwa_held(),
		ReqCapacity:    s.GetReq_capacity(),
		ReqAvailable:   s.GetReq_available(),
		MambaCapacity:  s.GetMamba_capacity(),
		MambaAvailable: s.GetMamba_available(),
		KVBytes:        s.GetKv_bytes(),
		ReqTableBytes:  s.GetReq_table_bytes(),
		MambaBytes:     s.GetMamba_bytes(),
		AllocCalls:     s.GetAlloc_calls(),
		FreeCalls:      s.GetFree_calls(),
		AllocFailures:  s.GetAlloc_failures(),
		RejectedCalls:  s.GetRejected_calls(),
	}, nil
}
