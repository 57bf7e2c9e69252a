// Package kvpool is the Go binding of libkvpool, the KV-cache memory manager
// for LLM inference engines.
//
// Use the idiomatic API of this package: Open/OpenFile, (*Pool).Close,
// (*Pool).Backend, (*Pool).Plan, PlanConfig, Version, VersionString,
// CudaDeviceCount, and errors of type *Error. The Kvpool_* functions and
// KVPOOL_* values are the raw SWIG wrappers it is built on.
//
// Linking: cgo finds the C library through pkg-config (package "kvpool";
// set PKG_CONFIG_PATH to <prefix>/lib/pkgconfig). At run time the loader
// must find libkvpool.so.0 (system path, LD_LIBRARY_PATH or an rpath).
//
// Threading: like the C handle, a Pool is used by one goroutine at a time.
// Error messages never mix between goroutines: each failing C call returns
// its own message (captured inside that call, not read afterwards from
// thread-local storage).
package kvpool
