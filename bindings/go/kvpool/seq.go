package kvpool

import "errors"

// Requests (seq.h): prefix reuse and the KV slots of running requests, with
// slot ownership kept by the library, so a request can neither leak nor
// double-free a slot. A request goes Begin -> SeqExtend (one or more prefill
// chunks) -> SeqDecode (one token per step) -> Finish, or Abort / Retract at
// any point. ErrOutOfMemory from SeqExtend or SeqDecode is recoverable:
// nothing changed (not even an eviction). Request ids are uint64, never 0.
//
// (The allocator's Extend and Decode keep their names; the request-level
// calls are SeqExtend and SeqDecode.)

// SeqInfo is the state of a request (kvseq_info).
type SeqInfo struct {
	Row        int32 // request-table row; -1 before the first SeqExtend and after Retract
	Tokens     int   // tokens known: the prompt plus decoded tokens
	Computed   int   // tokens whose KV slots are allocated (cached prefix + computed)
	Cached     int   // leading tokens whose slots the prefix tree owns (page-aligned)
	PrefixHit  int   // prefix tokens found in the tree at Begin (or at the last Retract)
	HostHit    int   // of PrefixHit, tokens loaded back from the host tier (host_cache); 0 without one
	StorageHit int   // of HostHit, tokens a storage prefetch brought into the host tier; 0 without one
}

// Accounting is SGLang's scheduler accounting: Available + Evictable +
// Protected + Uncached == Capacity whenever only the request API allocates.
type Accounting struct {
	Available int // the allocator's free tokens
	Evictable int // the tree's unlocked tokens (0 without a tree)
	Protected int // the tree's locked tokens
	Uncached  int // tokens held by requests and not owned by the tree (whole pages)
	Capacity  int // the token capacity
}

// Begin starts a request for a prompt (at least one token) in the prefix
// cache namespace extraKey ("" = default): it matches the longest cached
// prefix (at most len(tokens)-1 tokens) and locks it. cached is the number of
// prompt tokens found in the cache.
func (p *Pool) Begin(tokens []int32, extraKey string) (seq uint64, cached int, err error) {
	if err := extraKeyOK("kvseq_begin", extraKey); err != nil {
		return 0, 0, err
	}
	var hit uint
	err = p.call(func(h SwigcptrKvpool) error { return Kvseq_begin(h, tokens, extraKey, &seq, &hit) })
	return seq, int(hit), err
}

// SeqExtend computes the next prompt chunk of each request of a batch:
// request seqs[i] gets chunkLens[i] (>= 1) more prompt tokens. It returns
// the new tokens' slots, request-major. All-or-nothing for the batch.
func (p *Pool) SeqExtend(seqs []uint64, chunkLens []int64) ([]int64, error) {
	total := int64(0)
	for _, c := range chunkLens {
		if c > 0 {
			total += c
		}
		if total > maxSlots {
			return nil, &Error{Code: ErrOutOfMemory, Msg: "kvseq_extend: the batch needs more than " +
				"any pool holds"}
		}
	}
	slots := make([]int64, total)
	if err := p.SeqExtendInto(seqs, chunkLens, slots); err != nil {
		return nil, err
	}
	return slots, nil
}

// SeqExtendInto is SeqExtend writing into slots, whose length must be the
// sum of chunkLens.
func (p *Pool) SeqExtendInto(seqs []uint64, chunkLens, slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvseq_extend(h, seqs, chunkLens, slots) })
}

// SeqDecode appends tokens[i] to request seqs[i] (whose prompt is fully
// computed) and returns one slot per request: a decode step.
func (p *Pool) SeqDecode(seqs []uint64, tokens []int32) ([]int64, error) {
	slots := make([]int64, len(seqs))
	if err := p.SeqDecodeInto(seqs, tokens, slots); err != nil {
		return nil, err
	}
	return slots, nil
}

// SeqDecodeInto is SeqDecode writing into slots (one per request).
func (p *Pool) SeqDecodeInto(seqs []uint64, tokens []int32, slots []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvseq_decode(h, seqs, tokens, slots) })
}

// Finish ends a request: its first committed tokens (at most the computed
// length) go to the prefix cache, everything else is released, and the id
// is forgotten (a second Finish gives ErrInvalidArgument).
func (p *Pool) Finish(seq uint64, committed int) error {
	if err := outputLen("kvseq_finish", committed); err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvseq_finish(h, seq, int64(committed)) })
}

// Abort ends a request without caching anything.
func (p *Pool) Abort(seq uint64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvseq_abort(h, seq) })
}

// Retract releases a request under memory pressure but keeps it (its
// tokens): its prefix is matched again, and a later SeqExtend recomputes only
// what is not cached. It returns the tokens found in the cache now.
func (p *Pool) Retract(seq uint64) (cached int, err error) {
	var n uint
	err = p.call(func(h SwigcptrKvpool) error { return Kvseq_retract(h, seq, &n) })
	return int(n), err
}

// SeqInfo reports the row and lengths of a request.
func (p *Pool) SeqInfo(seq uint64) (SeqInfo, error) {
	info := NewKvseq_info() // struct_size set by its constructor in kvpool.i
	if info.Swigcptr() == 0 {
		return SeqInfo{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvseq_info"}
	}
	defer DeleteKvseq_info(info)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvseq_get_info(h, seq, info) }); err != nil {
		return SeqInfo{}, err
	}
	return SeqInfo{
		Row:        int32(info.GetRow()),
		Tokens:     int(info.GetTokens()),
		Computed:   int(info.GetComputed()),
		Cached:     int(info.GetCached()),
		PrefixHit:  int(info.GetPrefix_hit()),
		HostHit:    int(info.GetHost_hit()),
		StorageHit: int(info.GetStorage_hit()),
	}, nil
}

// SeqSlots returns the slots of a request's computed tokens, in token order.
func (p *Pool) SeqSlots(seq uint64) ([]int64, error) {
	slots := make([]int64, 64)
	for {
		var n uint
		err := p.call(func(h SwigcptrKvpool) error { return Kvseq_get_slots(h, seq, slots, &n) })
		if err == nil {
			return slots[:n:n], nil
		}
		if !errors.Is(err, ErrBufferTooSmall) || int(n) <= len(slots) {
			return nil, err
		}
		slots = make([]int64, n)
	}
}

// Accounting reports SGLang's scheduler accounting.
func (p *Pool) Accounting() (Accounting, error) {
	var available, evictable, protected, uncached, capacity uint
	err := p.call(func(h SwigcptrKvpool) error {
		return Kvseq_accounting(h, &available, &evictable, &protected, &uncached, &capacity)
	})
	if err != nil {
		return Accounting{}, err
	}
	return Accounting{Available: int(available), Evictable: int(evictable), Protected: int(protected),
		Uncached: int(uncached), Capacity: int(capacity)}, nil
}

// SeqMambaSlot is the mamba state slot a request owns on a hybrid_linear
// pool: Begin filled it with the cached prefix's state (copy-on-write) or
// zeroes; the engine keeps the request's recurrent state there.
func (p *Pool) SeqMambaSlot(seq uint64) (int32, error) {
	var slot int32
	err := p.call(func(h SwigcptrKvpool) error { return Kvseq_mamba_slot(h, seq, &slot) })
	return slot, err
}
