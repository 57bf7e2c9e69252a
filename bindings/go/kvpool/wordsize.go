package kvpool

import "unsafe"

// The committed SWIG output (kvpool.go, kvpool_wrap.c; bindings/go/generate.sh)
// is generated for 64-bit targets: Go's int and C's int64_t/size_t are 64
// bits there. On a target with 32-bit pointers these array lengths are
// negative and the package does not compile, instead of passing truncated
// sizes to C.
var (
	_ [unsafe.Sizeof(uintptr(0)) - 8]struct{}
	_ [8 - unsafe.Sizeof(uintptr(0))]struct{}
)
