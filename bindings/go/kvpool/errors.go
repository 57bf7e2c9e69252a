package kvpool

import (
	"strconv"
	"strings"
	"unsafe"
)

// Code is a kvpool_status value. The numbers are part of the C ABI and never
// change. A Code is also an error, so the constants below serve as sentinels:
//
//	if errors.Is(err, kvpool.ErrConfig) { ... }
type Code int

// Status codes, as in include/kvpool/status.h (TestCodesMatchHeader fails
// when a code is appended there and not here).
const (
	OK                 Code = 0  // success (never returned as an error)
	ErrInvalidArgument Code = 1  // NULL or foreign handle, closed Pool, wrong length, ...
	ErrConfig          Code = 2  // malformed or inconsistent JSON configuration
	ErrOutOfMemory     Code = 3  // recoverable: not enough free slots, pages, rows or states
	ErrCUDA            Code = 4  // a CUDA runtime call failed
	ErrUnsupported     Code = 5  // not supported by this build, backend or pool variant
	ErrInternal        Code = 6  // a bug in kvpool: please report it
	ErrBufferTooSmall  Code = 7  // a caller-provided output buffer is too small
	ErrIO              Code = 8  // a file could not be opened, read or written
	ErrHostMemory      Code = 9  // host memory could not be allocated
	ErrCheckFailed     Code = 10 // kvpool_check found a leaked or double-owned slot, page, row or state
	ErrDeviceFault     Code = 11 // a stream-ordered call found bad input on the device; cleared by ClearAllocator
)

// String is the library's short description of the code ("configuration error").
func (c Code) String() string {
	return Kvpool_status_string(int(c))
}

// Error makes a Code usable as a sentinel error.
func (c Code) Error() string {
	return "kvpool: " + c.String()
}

// Error is the error every failing kvpool call returns.
type Error struct {
	Code Code   // the kvpool_status
	Msg  string // the library's detail, e.g. the JSON path of a bad value
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "kvpool: " + e.Code.String()
	}
	return "kvpool: " + e.Code.String() + ": " + e.Msg
}

// Is reports whether target is the same status: a Code (kvpool.ErrConfig) or
// an *Error with that Code (its message is not compared).
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return t != nil && e.Code == t.Code
	}
	return false
}

// cString is the layout of a Go string header, as SWIG's cgo glue uses it.
type cString struct {
	p unsafe.Pointer
	n int
}

// statusError converts what the C wrapper returns for a kvpool_status
// (kvpool_go_pack_status in kvpool.i):
//   - an empty string: success, nil;
//   - "<code>:<message>" in malloc'd C memory: copied into an *Error, then freed;
//   - a nil pointer with a non-zero length: no memory was left for the
//     message, and the length is the code.
func statusError(packed string) error {
	h := (*cString)(unsafe.Pointer(&packed))
	if h.n == 0 {
		return nil
	}
	if h.p == nil {
		return &Error{Code: Code(h.n), Msg: "(no memory for the error message)"}
	}
	s := string(unsafe.Slice((*byte)(h.p), h.n))
	Swig_free(uintptr(h.p))
	code, msg, _ := strings.Cut(s, ":")
	n, err := strconv.Atoi(code)
	if err != nil {
		return &Error{Code: ErrInternal, Msg: "unreadable error from the C wrapper: " + s}
	}
	return &Error{Code: Code(n), Msg: msg}
}
