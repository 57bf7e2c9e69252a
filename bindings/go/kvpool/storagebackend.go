package kvpool

// kvpool_create_with_storage: a storage tier written in Go. The C side is
// the shim in ../storage_backend.i (built into kvpool_wrap.c); its table's
// callbacks call the functions exported here with a runtime/cgo.Handle of
// the StorageBackend. This file's preamble may hold declarations only (cgo's
// rule for files with //export).

/*
#include <stddef.h>
#include <stdint.h>
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// StorageResult is the outcome of one key in a StorageBackend call
// (storage.h's kvstore_result).
type StorageResult int32

const (
	// StorageOK: Put stored the value (or the key already held it); Get read it whole.
	StorageOK StorageResult = 0
	// StorageMiss: Get found no value under the key (never stored, or evicted). Not a valid Put result.
	StorageMiss StorageResult = 1
	// StorageError: the backend failed for this key (I/O error, server down, timeout).
	StorageError StorageResult = 2
)

// String returns the result's name ("OK", "Miss", "Error").
func (r StorageResult) String() string {
	switch r {
	case StorageOK:
		return "OK"
	case StorageMiss:
		return "Miss"
	case StorageError:
		return "Error"
	}
	return fmt.Sprintf("StorageResult(%d)", int32(r))
}

// StorageBackend is an engine's own store as the storage tier of a pool
// (OpenWithStorage): a cache cluster client, an object store, a test double.
// kvpool stores opaque byte values under short keys (1 to 120 characters of
// [0-9a-z-]; a key always names the same bytes, so Put may skip a key that
// exists and report StorageOK) and checks every value it reads
// (docs/storage-custom.md has the contract).
//
// Batches hold at most 128 keys; every result starts as StorageError. The
// methods run on the pool's storage threads (a backup and a prefetch thread,
// possibly at the same time); pools sharing a backend call it from all their
// threads: every method must be safe for concurrent use. A panic never
// reaches kvpool: it makes every key of that call an error (ExistsPrefix: 0
// keys) and is passed to StorageFailureReporter.StorageFailed when the backend
// implements it. A method never calls a Pool method and never blocks forever
// (StorageFlush and Close wait for running calls). A pool keeps its backend
// reachable until it is closed.
type StorageBackend interface {
	// Put stores values[i] under keys[i] for every i and sets results[i] to
	// StorageOK or StorageError. The value slices are copies the backend may keep.
	Put(keys []string, values [][]byte, results []StorageResult)
	// Get reads every key: values[i] = the bytes stored under keys[i], exactly
	// as they were put, with results[i] = StorageOK; or results[i] =
	// StorageMiss or StorageError. The slices are copied; the backend may keep them.
	Get(keys []string, values [][]byte, results []StorageResult)
	// ExistsPrefix returns how many of keys exist, counted from the start up
	// to the first that does not (a key that cannot be asked about is missing).
	ExistsPrefix(keys []string) int
}

// StorageClearer is implemented by a StorageBackend that can remove every
// value it holds for kvpool (Pool.StorageClear; an error makes it fail with
// ErrIO). Without it, StorageClear fails with ErrUnsupported.
type StorageClearer interface {
	Clear() error
}

// StorageFailureReporter is implemented by a StorageBackend that wants to
// see the panics of its own methods (operation "Put", "Get", "ExistsPrefix"
// or "Clear"), e.g. to log them. It runs on the thread of the failed call;
// a panic in it is ignored.
type StorageFailureReporter interface {
	StorageFailed(operation string, panicValue interface{})
}

// OpenWithStorage creates a pool whose storage tier is backend: the
// configuration's storage section says "backend": "custom", and the pool's
// storage threads call backend's methods. Pools given the same backend share
// its values. A nil backend gives ErrInvalidArgument; a configuration
// without a storage section, or naming another backend, ErrConfig.
func OpenWithStorage(json string, backend StorageBackend) (*Pool, error) {
	var h uintptr
	if backend == nil {
		if err := Kvpool_create_with_storage(json, 0, 0, &h); err != nil {
			return nil, err
		}
		return newPool(h), nil // not reached: the library refuses a NULL table
	}
	_, canClear := backend.(StorageClearer)
	hasClear := 0
	if canClear {
		hasClear = 1
	}
	handle := cgo.NewHandle(backend)
	if err := Kvpool_create_with_storage(json, uintptr(handle), hasClear, &h); err != nil {
		handle.Delete() // a failed creation calls nothing, not even destroy
		return nil, err
	}
	return newPool(h), nil
}

// --- The table's callbacks (C threads of the pool) ------------------------

// storageReport passes a recovered panic to the backend's reporter, if any.
func storageReport(backend StorageBackend, operation string, value interface{}) {
	r, ok := backend.(StorageFailureReporter)
	if !ok {
		return
	}
	defer func() { _ = recover() }() // a panicking reporter must not fail the storage thread
	r.StorageFailed(operation, value)
}

func storageKeys(keys **C.char, n int) []string {
	ptrs := unsafe.Slice(keys, n)
	k := make([]string, n)
	for i, p := range ptrs {
		k[i] = C.GoString(p)
	}
	return k
}

func newStorageResults(n int) []StorageResult {
	r := make([]StorageResult, n)
	for i := range r {
		r[i] = StorageError // a result left unwritten is an error
	}
	return r
}

//export kvpoolGoStoragePut
func kvpoolGoStoragePut(user C.uintptr_t, keys **C.char, values **C.uint8_t, sizes *C.size_t, count C.size_t,
	results *C.int32_t) {
	backend := cgo.Handle(user).Value().(StorageBackend)
	defer func() {
		// The results stay as C prefilled them (KVSTORE_ERROR): none was written yet.
		if p := recover(); p != nil {
			storageReport(backend, "Put", p)
		}
	}()
	n := int(count)
	ptrs := unsafe.Slice(values, n)
	lens := unsafe.Slice(sizes, n)
	v := make([][]byte, n)
	for i := range v {
		v[i] = C.GoBytes(unsafe.Pointer(ptrs[i]), C.int(lens[i]))
	}
	r := newStorageResults(n)
	backend.Put(storageKeys(keys, n), v, r)
	out := unsafe.Slice(results, n)
	for i := range out {
		out[i] = C.int32_t(r[i])
	}
}

//export kvpoolGoStorageGet
func kvpoolGoStorageGet(user C.uintptr_t, keys **C.char, dst **C.uint8_t, capacity *C.size_t, count C.size_t,
	sizes *C.size_t, results *C.int32_t) {
	backend := cgo.Handle(user).Value().(StorageBackend)
	defer func() {
		// Keys already answered keep their result; the rest stay KVSTORE_ERROR.
		if p := recover(); p != nil {
			storageReport(backend, "Get", p)
		}
	}()
	n := int(count)
	v := make([][]byte, n)
	r := newStorageResults(n)
	backend.Get(storageKeys(keys, n), v, r)
	ptrs := unsafe.Slice(dst, n)
	room := unsafe.Slice(capacity, n)
	lens := unsafe.Slice(sizes, n)
	out := unsafe.Slice(results, n)
	for i := range out {
		result := r[i]
		if result == StorageOK {
			if v[i] == nil {
				result = StorageError // OK without bytes is no value
			} else {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(ptrs[i])), int(room[i])), v[i])
				// The full length: kvpool rejects a value longer than the room it gave.
				lens[i] = C.size_t(len(v[i]))
			}
		}
		out[i] = C.int32_t(result)
	}
}

//export kvpoolGoStorageExists
func kvpoolGoStorageExists(user C.uintptr_t, keys **C.char, count C.size_t) (found C.size_t) {
	backend := cgo.Handle(user).Value().(StorageBackend)
	defer func() {
		if p := recover(); p != nil {
			storageReport(backend, "ExistsPrefix", p)
			found = 0 // a key that cannot be asked about is missing
		}
	}()
	got := backend.ExistsPrefix(storageKeys(keys, int(count)))
	if got < 0 {
		got = 0
	}
	return C.size_t(got)
}

//export kvpoolGoStorageClear
func kvpoolGoStorageClear(user C.uintptr_t) (result C.int32_t) {
	backend := cgo.Handle(user).Value().(StorageBackend)
	defer func() {
		if p := recover(); p != nil {
			storageReport(backend, "Clear", p)
			result = C.int32_t(StorageError)
		}
	}()
	if err := backend.(StorageClearer).Clear(); err != nil {
		return C.int32_t(StorageError)
	}
	return C.int32_t(StorageOK)
}

// The table's destroy (kvpool_destroy, after the storage threads stopped):
// the pool no longer calls the backend.
//
//export kvpoolGoStorageRelease
func kvpoolGoStorageRelease(user C.uintptr_t) {
	cgo.Handle(user).Delete()
}
