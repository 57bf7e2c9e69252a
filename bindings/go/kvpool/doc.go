// Package kvpool is the Go binding of libkvpool, the KV-cache memory manager
// for LLM inference engines.
//
// Use the idiomatic API of this package: Open/OpenFile, PlanConfig, Version,
// VersionString, CudaDeviceCount, errors of type *Error, and the methods of
// *Pool:
//
//   - lifecycle: Close, Backend, Plan
//   - allocator: AllocKind, Available, SWAAvailable, Alloc, Free, Extend,
//     Decode, FreeSWA, TranslateSWA, FreeGroupBegin/FreeGroupEnd,
//     Backup/Restore, MergeAndSort, ClearAllocator, FreeList
//   - request rows: ReqAvailable, ReqAlloc, ReqFree, ReqWrite, ReqRead,
//     ReqClear, ReqWriteBatch, LastLoc
//   - mamba states: MambaAvailable, MambaAlloc, MambaFree, MambaCopy,
//     MambaFork, MambaWrite, MambaRead, ReqAllocHybrid, ReqFreeHybrid,
//     ReqMambaSlots
//   - self-check: Check, Stats
//   - KV buffers: Buffer, SetKV, SetMLAKV, SetLabel, SetIndexer, GetKV,
//     MoveKV, HostCopyBytes, CopyToHost, LoadFromHost
//
// The Kvpool_*, Kvalloc_*, Kvreq_* functions and KVPOOL_* values are the raw
// SWIG wrappers it is built on.
//
// Zero copy: slices ([]int32, []int64, []byte, []float32) are handed to C as
// they are, for the duration of one call; C reads and writes their backing
// arrays in place and keeps no pointer afterwards. Methods returning a slice
// allocate it once and C fills it; the *Into variants (AllocInto,
// ExtendInto, DecodeInto, ReqAllocInto, ReqReadInto, LastLocInto,
// CopyToHostInto) write into a slice the caller provides.
//
// Installing: go get github.com/kvpool/kvpool/bindings/go/kvpool@vX.Y.Z,
// where X.Y.Z is the version of the installed C library (release tags are
// bindings/go/kvpool/vX.Y.Z). Linking: cgo finds the C library through
// pkg-config (package "kvpool"; set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig).
// At run time the loader must find libkvpool.so.0 (system path,
// LD_LIBRARY_PATH or an rpath).
//
// Threading: like the C handle, a Pool is used by one goroutine at a time.
// Error messages never mix between goroutines: each failing C call returns
// its own message (captured inside that call, not read afterwards from
// thread-local storage).
package kvpool
