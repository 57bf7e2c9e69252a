package kvpool

// #include <stdlib.h>
import "C"

import (
	"runtime"
	"strconv"
	"unsafe"
)

// HostBuffer is zero-filled host memory on the C heap, at an address that
// never moves: what the *Async methods (device.go) take on a CPU pool, whose
// "device memory" is host memory. Go memory cannot be used there, because
// the address travels as a uintptr that the garbage collector does not see.
//
// Read and write it through Bytes, Int64s or Int32s; Free it when done (a
// finalizer frees a forgotten buffer, but only as a safety net). The views
// must not be used after Free. For a CUDA pool, allocate device memory with
// the engine's CUDA library instead and pass its address.
type HostBuffer struct {
	p unsafe.Pointer
	n int
}

// NewHostBuffer allocates bytes zero-filled bytes (calloc; aligned for any
// element type). A negative size gives ErrInvalidArgument, a failed
// allocation ErrHostMemory.
func NewHostBuffer(bytes int) (*HostBuffer, error) {
	if bytes < 0 {
		return nil, &Error{Code: ErrInvalidArgument, Msg: "NewHostBuffer: a size of " + strconv.Itoa(bytes) + " is negative"}
	}
	size := bytes
	if size == 0 {
		size = 1 // a distinct, non-nil address even for an empty buffer
	}
	p := C.calloc(C.size_t(size), 1)
	if p == nil {
		return nil, &Error{Code: ErrHostMemory, Msg: "NewHostBuffer: cannot allocate " + strconv.Itoa(bytes) + " bytes"}
	}
	b := &HostBuffer{p: p, n: bytes}
	runtime.SetFinalizer(b, (*HostBuffer).Free)
	return b, nil
}

// NewHostInt64s allocates a HostBuffer holding the given int64 values.
func NewHostInt64s(values ...int64) (*HostBuffer, error) {
	b, err := NewHostBuffer(8 * len(values))
	if err != nil {
		return nil, err
	}
	copy(b.Int64s(), values)
	return b, nil
}

// NewHostInt32s allocates a HostBuffer holding the given int32 values.
func NewHostInt32s(values ...int32) (*HostBuffer, error) {
	b, err := NewHostBuffer(4 * len(values))
	if err != nil {
		return nil, err
	}
	copy(b.Int32s(), values)
	return b, nil
}

// Addr is the buffer's address (0 once freed).
func (b *HostBuffer) Addr() uintptr {
	return uintptr(b.p)
}

// Len is the buffer's size in bytes (0 once freed).
func (b *HostBuffer) Len() int {
	return b.n
}

// Bytes is the buffer's memory as a byte slice (no copy).
func (b *HostBuffer) Bytes() []byte {
	if b.p == nil || b.n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(b.p), b.n)
}

// Int64s is the buffer's memory as Len()/8 int64 values (no copy).
func (b *HostBuffer) Int64s() []int64 {
	if b.p == nil || b.n < 8 {
		return nil
	}
	return unsafe.Slice((*int64)(b.p), b.n/8)
}

// Int32s is the buffer's memory as Len()/4 int32 values (no copy).
func (b *HostBuffer) Int32s() []int32 {
	if b.p == nil || b.n < 4 {
		return nil
	}
	return unsafe.Slice((*int32)(b.p), b.n/4)
}

// Free releases the memory; calling it again does nothing.
func (b *HostBuffer) Free() {
	if b.p != nil {
		C.free(b.p)
		b.p = nil
		b.n = 0
	}
}
