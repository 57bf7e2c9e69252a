package kvpool

import (
	"errors"
	"math"
	"strconv"
)

// Slot and page allocators (alloc.h). Slot ids are int64; output slices are
// sized here from the inputs and filled by C in place. The *Into variants
// write into a slice the caller provides (any sub-slice of a larger one),
// with no allocation at all.

// maxSlots bounds output sizes: slot ids are int32 in the request table, so
// no pool holds more slots than this.
const maxSlots = math.MaxInt32

// outputLen checks a requested output length.
func outputLen(function string, n int) error {
	if n < 0 {
		return &Error{Code: ErrInvalidArgument, Msg: function + ": a length of " + strconv.Itoa(n) + " is negative"}
	}
	if n > maxSlots {
		return &Error{Code: ErrOutOfMemory, Msg: function + ": " + strconv.Itoa(n) + " is more than any pool holds"}
	}
	return nil
}

// AllocKind is the allocator the pool uses.
func (p *Pool) AllocKind() (AllocKind, error) {
	var kind int32
	err := p.call(func(h SwigcptrKvpool) error { return Kvalloc_get_kind(h, &kind) })
	return AllocKind(kind), err
}

// Available is the number of free tokens: (free + deferred pages) x
// page_size. A swa pool gives ErrUnsupported (use SWAAvailable).
func (p *Pool) Available() (int, error) {
	var tokens uint
	err := p.call(func(h SwigcptrKvpool) error { return Kvalloc_available(h, &tokens) })
	return int(tokens), err
}

// SWAAvailable is the number of free slots of the full and of the
// sliding-window pool of a swa allocator (ErrUnsupported for others).
func (p *Pool) SWAAvailable() (full, swa int, err error) {
	var f, s uint
	err = p.call(func(h SwigcptrKvpool) error { return Kvalloc_swa_available(h, &f, &s) })
	return int(f), int(s), err
}

// Alloc allocates n slots (paged: n must be a multiple of page_size; whole
// pages are taken in free-list order). ErrOutOfMemory leaves the allocator
// unchanged.
func (p *Pool) Alloc(n int) ([]int64, error) {
	if err := outputLen("kvalloc_alloc", n); err != nil {
		return nil, err
	}
	slots := make([]int64, n)
	if err := p.AllocInto(slots); err != nil {
		return nil, err
	}
	return slots, nil
}

// AllocInto allocates len(slots) slots into slots.
func (p *Pool) AllocInto(slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_alloc(h, slots) })
}

// Free frees slots (paged: the whole pages they lie in). A double free, a
// reserved or never-allocated slot gives ErrInvalidArgument and frees nothing.
func (p *Pool) Free(slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_free(h, slots) })
}

// ExtendLen is the number of slots Extend returns: the sum of
// seqLens[i] - prefixLens[i].
func ExtendLen(prefixLens, seqLens []int64) (int, error) {
	total := int64(0)
	for i := 0; i < len(prefixLens) && i < len(seqLens); i++ {
		if d := seqLens[i] - prefixLens[i]; d > 0 {
			total += d
		}
		if total > maxSlots {
			return 0, &Error{Code: ErrOutOfMemory, Msg: "kvalloc_extend: the batch needs more than " +
				strconv.Itoa(maxSlots) + " new slots"}
		}
	}
	return int(total), nil
}

// Extend allocates the new slots of a prefill batch (SGLang's alloc_extend):
// request i has prefixLens[i] tokens, grows to seqLens[i], and lastLocs[i] is
// the slot of its last prefix token (-1 for an empty prefix). The new slots
// come back request-major.
func (p *Pool) Extend(prefixLens, seqLens, lastLocs []int64) ([]int64, error) {
	n, err := ExtendLen(prefixLens, seqLens)
	if err != nil {
		return nil, err
	}
	slots := make([]int64, n)
	if err := p.ExtendInto(prefixLens, seqLens, lastLocs, slots); err != nil {
		return nil, err
	}
	return slots, nil
}

// ExtendInto is Extend writing into slots, whose length must be ExtendLen.
func (p *Pool) ExtendInto(prefixLens, seqLens, lastLocs, slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_extend(h, prefixLens, seqLens, lastLocs, slots) })
}

// Decode allocates one decode slot per request (SGLang's alloc_decode):
// seqLens include the new token, lastLocs are the slots of token seq-2 (-1
// when seq is 1).
func (p *Pool) Decode(seqLens, lastLocs []int64) ([]int64, error) {
	slots := make([]int64, len(seqLens))
	if err := p.DecodeInto(seqLens, lastLocs, slots); err != nil {
		return nil, err
	}
	return slots, nil
}

// DecodeInto is Decode writing into slots (one per request).
func (p *Pool) DecodeInto(seqLens, lastLocs, slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_decode(h, seqLens, lastLocs, slots) })
}

// FreeSWA frees the window slots of tokens that slid out of the window
// (their full slots stay allocated). swa pools only.
func (p *Pool) FreeSWA(slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_free_swa(h, slots) })
}

// TranslateSWA is the window slot of each full slot (0 = none). swa pools only.
func (p *Pool) TranslateSWA(slots []int64) ([]int64, error) {
	out := make([]int64, len(slots))
	if err := p.call(func(h SwigcptrKvpool) error { return Kvalloc_translate_swa(h, slots, out) }); err != nil {
		return nil, err
	}
	return out, nil
}

// FreeGroupBegin starts a free group: frees until FreeGroupEnd are collected
// and become available together.
func (p *Pool) FreeGroupBegin() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_free_group_begin(h) })
}

// FreeGroupEnd ends the free group and frees everything collected in it.
func (p *Pool) FreeGroupEnd() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_free_group_end(h) })
}

// Backup snapshots the allocator; Restore(token) reverts every allocation and
// free made after it. One snapshot is active at a time.
func (p *Pool) Backup() (uint64, error) {
	var token uint64
	err := p.call(func(h SwigcptrKvpool) error { return Kvalloc_backup(h, &token) })
	return token, err
}

// Restore reverts the allocator to the snapshot Backup returned token for.
func (p *Pool) Restore(token uint64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_restore(h, token) })
}

// MergeAndSort merges the deferred frees into the free list and sorts it
// (need_sort mode).
func (p *Pool) MergeAndSort() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_merge_and_sort(h) })
}

// ClearAllocator makes every slot free again (free list, deferred frees,
// open group and snapshot reset).
func (p *Pool) ClearAllocator() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_clear(h) })
}

// FreeList is a copy of one of the allocator's lists, front first (page ids;
// slot ids for page_size 1). For tests and debugging.
func (p *Pool) FreeList(list AllocList) ([]int64, error) {
	ids := make([]int64, 64)
	for {
		var n uint
		err := p.call(func(h SwigcptrKvpool) error { return Kvalloc_free_list(h, int(list), ids, &n) })
		if err == nil {
			return ids[:n], nil
		}
		if !errors.Is(err, ErrBufferTooSmall) || int(n) <= len(ids) {
			return nil, err
		}
		ids = make([]int64, n)
	}
}
