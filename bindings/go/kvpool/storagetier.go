package kvpool

import "strconv"

// The storage tier (L3) below the host tier (storage.h): with a storage
// section (and a host_cache one) in its configuration, a pool backs up the
// host tier's pages to a store that outlives the process and can be shared
// by many pools (a directory, memcached or redis). A request's prompt is
// prefetched from storage into the host tier with StoragePrefetch; the
// engine polls it with StoragePrefetchPoll and ends it with
// StoragePrefetchEnd, which puts what landed into the tree as host-only
// nodes; Begin then loads them back like any host hit (SeqInfo.StorageHit
// counts them). See docs/storage.md.
//
// Pools without a storage tier give ErrUnsupported for every Storage* call.
// Only StorageFlush and StorageClear wait for storage I/O.

// StorageStats are the counters of the storage tier and its backend
// (kvstore_stats); monotonic unless noted.
type StorageStats struct {
	Backups                uint64 // backup jobs handed to the storage thread
	BackupTokens           uint64 // tokens of those jobs
	BackupPages            uint64 // pages the backend stored (or already held)
	BackupPagesFailed      uint64 // pages not stored: a batch failed
	BackupBytes            uint64 // bytes written to the backend (headers included)
	BackupsQueued          uint64 // now: backup jobs queued or running
	Prefetches             uint64 // prefetches started
	PrefetchesSkipped      uint64 // StoragePrefetch calls that started nothing
	PrefetchesRevoked      uint64 // prefetches that found fewer stored tokens than the threshold
	PrefetchesRunning      uint64 // now: prefetches started and not ended
	PrefetchTokens         uint64 // tokens asked for by started prefetches
	PrefetchHitTokens      uint64 // tokens found in storage (consecutive from each prefetch's start)
	PrefetchLoadedTokens   uint64 // tokens read, checked and written to the host tier
	PrefetchBytes          uint64 // bytes read from the backend
	PrefetchInsertedTokens uint64 // tokens that became host-only nodes at StoragePrefetchEnd
	PrefetchDroppedTokens  uint64 // tokens read but not kept
	StorageHitTokens       uint64 // tokens loaded back to the device that a prefetch had brought
	PagesCorrupt           uint64 // read pages rejected: damaged (checksum, magic, length)
	PagesTruncated         uint64 // read pages rejected: shorter than a page
	PagesForeign           uint64 // read pages rejected: another model, format version or key
	ReadFailures           uint64 // pages the backend failed to read
	StorePuts              uint64 // backend: values stored
	StorePutBytes          uint64 // backend: bytes of the values stored
	StorePutExisting       uint64 // backend: puts skipped because the key already held the page
	StorePutErrors         uint64 // backend: puts that failed
	StoreGets              uint64 // backend: values asked for
	StoreGetHits           uint64 // backend: values read whole
	StoreGetMisses         uint64 // backend: values not there
	StoreGetErrors         uint64 // backend: reads that failed
	StoreTimeouts          uint64 // backend: operations that waited a whole timeout for a server
	StoreServerErrors      uint64 // backend: connection or protocol errors
	StoreIOErrors          uint64 // backend: file system errors (full disk, I/O errors)
	StorePartialValues     uint64 // backend: split values with a part missing or damaged (memcached)
	StoreEvicted           uint64 // backend: values removed to stay within its size bound
	StoreServersEjected    uint64 // backend: times a server was taken out of rotation (memcached)
}

// StorageSkip says why StoragePrefetch started nothing (kvstore_skip).
type StorageSkip int32

// Reasons.
const (
	StorageSkipNone           StorageSkip = 0 // a prefetch started
	StorageSkipBelowThreshold StorageSkip = 1 // the part past the cached prefix is shorter than the threshold
	StorageSkipNotBackedUp    StorageSkip = 2 // the cached prefix has no host copy yet
	StorageSkipCapacity       StorageSkip = 3 // running prefetches hold as many host tokens as they may
	StorageSkipHostFull       StorageSkip = 4 // the host tier has no room
)

func (s StorageSkip) String() string {
	switch s {
	case StorageSkipNone:
		return "None"
	case StorageSkipBelowThreshold:
		return "BelowThreshold"
	case StorageSkipNotBackedUp:
		return "NotBackedUp"
	case StorageSkipCapacity:
		return "Capacity"
	case StorageSkipHostFull:
		return "HostFull"
	}
	return "StorageSkip(" + strconv.Itoa(int(s)) + ")"
}

// StoragePrefetchInfo is where a prefetch stands (kvstore_prefetch_info).
type StoragePrefetchInfo struct {
	Done         bool   // nothing more will land (all read, stopped at a missing or bad page, or revoked)
	Revoked      bool   // storage held fewer tokens than the threshold: nothing was read
	Ready        bool   // the prefetch policy lets the request go on now
	Searched     bool   // HitTokens is known
	AskedTokens  uint64 // tokens asked for (past the cached prefix, whole pages)
	HitTokens    uint64 // tokens found in storage, consecutive from the start
	LoadedTokens uint64 // tokens already in the host tier, checked
}

// StorageStats reports the counters of the storage tier and its backend.
func (p *Pool) StorageStats() (StorageStats, error) {
	s := NewKvstore_stats() // struct_size set by its constructor in kvpool.i
	if s.Swigcptr() == 0 {
		return StorageStats{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvstore_stats"}
	}
	defer DeleteKvstore_stats(s)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvstore_get_stats(h, s) }); err != nil {
		return StorageStats{}, err
	}
	return StorageStats{
		Backups:                s.GetBackups(),
		BackupTokens:           s.GetBackup_tokens(),
		BackupPages:            s.GetBackup_pages(),
		BackupPagesFailed:      s.GetBackup_pages_failed(),
		BackupBytes:            s.GetBackup_bytes(),
		BackupsQueued:          s.GetBackups_queued(),
		Prefetches:             s.GetPrefetches(),
		PrefetchesSkipped:      s.GetPrefetches_skipped(),
		PrefetchesRevoked:      s.GetPrefetches_revoked(),
		PrefetchesRunning:      s.GetPrefetches_running(),
		PrefetchTokens:         s.GetPrefetch_tokens(),
		PrefetchHitTokens:      s.GetPrefetch_hit_tokens(),
		PrefetchLoadedTokens:   s.GetPrefetch_loaded_tokens(),
		PrefetchBytes:          s.GetPrefetch_bytes(),
		PrefetchInsertedTokens: s.GetPrefetch_inserted_tokens(),
		PrefetchDroppedTokens:  s.GetPrefetch_dropped_tokens(),
		StorageHitTokens:       s.GetStorage_hit_tokens(),
		PagesCorrupt:           s.GetPages_corrupt(),
		PagesTruncated:         s.GetPages_truncated(),
		PagesForeign:           s.GetPages_foreign(),
		ReadFailures:           s.GetRead_failures(),
		StorePuts:              s.GetStore_puts(),
		StorePutBytes:          s.GetStore_put_bytes(),
		StorePutExisting:       s.GetStore_put_existing(),
		StorePutErrors:         s.GetStore_put_errors(),
		StoreGets:              s.GetStore_gets(),
		StoreGetHits:           s.GetStore_get_hits(),
		StoreGetMisses:         s.GetStore_get_misses(),
		StoreGetErrors:         s.GetStore_get_errors(),
		StoreTimeouts:          s.GetStore_timeouts(),
		StoreServerErrors:      s.GetStore_server_errors(),
		StoreIOErrors:          s.GetStore_io_errors(),
		StorePartialValues:     s.GetStore_partial_values(),
		StoreEvicted:           s.GetStore_evicted(),
		StoreServersEjected:    s.GetStore_servers_ejected(),
	}, nil
}

// StoragePrefetch starts reading the stored continuation of a prompt (in
// the prefix-cache namespace extraKey, "" = default) into the host tier and
// returns at once. It matches the prompt as Begin would (without locking);
// when the part past the cached prefix reaches the threshold
// (prefetch_threshold_tokens), host pages are allocated for it and the reads
// run on the storage thread. id is 0 when nothing started, and skipped says
// why (the call still succeeds).
func (p *Pool) StoragePrefetch(tokens []int32, extraKey string) (id uint64, skipped StorageSkip, err error) {
	if err := extraKeyOK("kvstore_prefetch", extraKey); err != nil {
		return 0, 0, err
	}
	var s int32
	err = p.call(func(h SwigcptrKvpool) error { return Kvstore_prefetch(h, tokens, extraKey, &id, &s) })
	if err != nil {
		return 0, 0, err
	}
	return id, StorageSkip(s), nil
}

// StoragePrefetchPoll reports where a prefetch stands, without waiting. An
// unknown or ended id gives ErrInvalidArgument.
func (p *Pool) StoragePrefetchPoll(id uint64) (StoragePrefetchInfo, error) {
	info := NewKvstore_prefetch_info() // struct_size set by its constructor in kvpool.i
	if info.Swigcptr() == 0 {
		return StoragePrefetchInfo{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvstore_prefetch_info"}
	}
	defer DeleteKvstore_prefetch_info(info)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvstore_prefetch_poll(h, id, info) }); err != nil {
		return StoragePrefetchInfo{}, err
	}
	return StoragePrefetchInfo{
		Done:         info.GetDone() != 0,
		Revoked:      info.GetRevoked() != 0,
		Ready:        info.GetReady() != 0,
		Searched:     info.GetSearched() != 0,
		AskedTokens:  info.GetAsked_tokens(),
		HitTokens:    info.GetHit_tokens(),
		LoadedTokens: info.GetLoaded_tokens(),
	}, nil
}

// StoragePrefetchEnd ends a prefetch whatever its state (ask
// StoragePrefetchPoll for Ready first, as the policy wants): what landed
// becomes host-only nodes of the tree, which Begin finds as a host hit. It
// returns the tokens added to the tree. An unknown or ended id gives
// ErrInvalidArgument.
func (p *Pool) StoragePrefetchEnd(id uint64) (inserted int, err error) {
	var n uint64
	err = p.call(func(h SwigcptrKvpool) error { return Kvstore_prefetch_end(h, id, &n) })
	return int(n), err
}

// StorageFlush waits until every queued backup has been written (blocks on
// storage I/O): for a service that stops, and tests.
func (p *Pool) StorageFlush() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvstore_flush(h) })
}

// StorageClear removes every page the backend holds (blocks on storage I/O);
// other pools sharing the store lose their pages too, the pool's own trees
// are unchanged. ErrIO when the backend failed.
func (p *Pool) StorageClear() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvstore_clear(h) })
}
