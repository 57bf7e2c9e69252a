package kvpool

import "strconv"

// Stream-ordered operations on device memory (device.h), the GPU fast path.
//
// Every uintptr argument below is an ADDRESS, not Go memory: the address of
// device memory of the pool's device (host memory for a CPU pool, e.g. a
// HostBuffer's Addr), holding the int64 slots / lengths, int32 rows or the
// bytes the C documentation describes. stream is a cudaStream_t as a uintptr
// (0 = the legacy default stream; ignored on CPU pools). On a CUDA pool the
// calls enqueue their work on stream and return at once: inputs must stay
// valid until the stream reaches the call, outputs are ready when it has
// (Synchronize waits). Problems only the device can see fault the pool: the
// next call (or Synchronize) gives ErrDeviceFault, and ClearAllocator clears
// it. On a CPU pool the calls run at once with the results of their host
// counterparts (Extend, Decode, Alloc, ReqWriteBatch, LastLoc, SetKV, GetKV,
// MoveKV, MambaAlloc, MambaFork, MambaCopy, SeqExtend, SeqDecode) and report
// bad input directly (ErrInvalidArgument).
//
// The allocator calls need `"pool": {"free_list": "device"}` on a CUDA pool.
// The *Host length slices (ExtendAsync, DecodeAsync, ExtendPages,
// DecodeWatermark, DecodeGraphAdvance) are ordinary Go slices: the host
// copies of the device lengths, used for the capacity check (their length is
// the batch). The slot ids of MambaAllocAsync and MambaForkAsync are
// host values too (returned as with MambaAlloc and MambaFork): only their
// stream is an address. The request ids, chunk lengths and tokens of
// SeqExtendAsync and SeqDecodeAsync are Go slices as in SeqExtend and
// SeqDecode: only their slots and stream are addresses.
//
// Lengths are element counts (bytes for kBytes, vBytes, nopeBytes,
// ropeBytes); a negative one gives ErrInvalidArgument.

// counts converts lengths for C, rejecting negative ones.
func counts(function string, names []string, ns ...int) ([]int64, error) {
	out := make([]int64, len(ns))
	for i, n := range ns {
		if n < 0 {
			return nil, &Error{Code: ErrInvalidArgument, Msg: function + ": " + names[i] + " is " + strconv.Itoa(n) +
				", a length cannot be negative"}
		}
		out[i] = int64(n)
	}
	return out, nil
}

// sameBatch checks that the host length slices of one batch agree.
func sameBatch(function string, prefixLensHost, seqLensHost []int64) error {
	if len(prefixLensHost) != len(seqLensHost) {
		return &Error{Code: ErrInvalidArgument, Msg: function + ": prefixLensHost has " +
			strconv.Itoa(len(prefixLensHost)) + " lengths, seqLensHost " + strconv.Itoa(len(seqLensHost))}
	}
	return nil
}

// OpenWithAllocator creates a pool whose buffers come from a kvpool_allocator
// (pool.h): allocator is the address of such a struct, made in C, whose
// callbacks are C functions (custom allocators cannot be written in Go), or 0
// for the default allocator, which makes this Open.
func OpenWithAllocator(json string, allocator uintptr) (*Pool, error) {
	var h uintptr
	if err := Kvpool_create_with_allocator(json, allocator, &h); err != nil {
		return nil, err
	}
	return newPool(h), nil
}

// Synchronize waits until everything enqueued on stream has finished, then
// reports a device-side fault of the pool (ErrDeviceFault) or a CUDA error.
// On a CPU pool it returns nil at once.
func (p *Pool) Synchronize(stream uintptr) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_synchronize(h, stream) })
}

// ExtendPages is the number of free-list pages an extend batch takes (tokens
// for page size 1): the capacity ExtendAsync's newPages needs. Host
// arithmetic only.
func (p *Pool) ExtendPages(prefixLensHost, seqLensHost []int64) (int, error) {
	if err := sameBatch("kvalloc_extend_pages", prefixLensHost, seqLensHost); err != nil {
		return 0, err
	}
	var pages uint
	err := p.call(func(h SwigcptrKvpool) error {
		return Kvalloc_extend_pages(h, prefixLensHost, seqLensHost, &pages)
	})
	return int(pages), err
}

// ExtendAsync allocates the new slots of a prefill batch on the device, with
// Extend's result: request i grows from prefixLens[i] to seqLens[i] tokens;
// lastLocs[i] is the slot of its last prefix token (-1 for none). slots
// receives slotsLen = sum(seqLens - prefixLens) slots, request-major.
// newPages (0 for none) receives the ids of the pages taken, in order
// (capacity newPagesLen, at least ExtendPages). prefixLensHost and
// seqLensHost are host copies of the device lengths.
func (p *Pool) ExtendAsync(prefixLensHost, seqLensHost []int64, prefixLens, seqLens, lastLocs, slots uintptr,
	slotsLen int, newPages uintptr, newPagesLen int, stream uintptr) error {
	const fn = "kvalloc_extend_async"
	if err := sameBatch(fn, prefixLensHost, seqLensHost); err != nil {
		return err
	}
	n, err := counts(fn, []string{"slotsLen", "newPagesLen"}, slotsLen, newPagesLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvalloc_extend_async(h, prefixLensHost, seqLensHost, prefixLens, seqLens, lastLocs, slots, n[0],
			newPages, n[1], stream)
	})
}

// DecodeAsync allocates one decode slot per request on the device, with
// Decode's result. seqLens (lengths including the new token), lastLocs and
// slots hold len(seqLensHost) values; newPages (0 for none) receives the ids
// of the pages taken (capacity newPagesLen).
func (p *Pool) DecodeAsync(seqLensHost []int64, seqLens, lastLocs, slots, newPages uintptr, newPagesLen int,
	stream uintptr) error {
	n, err := counts("kvalloc_decode_async", []string{"newPagesLen"}, newPagesLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvalloc_decode_async(h, seqLensHost, seqLens, lastLocs, slots, newPages, n[0], stream)
	})
}

// AllocAsync allocates n slots on the device into slots, with Alloc's result
// (paged: n a multiple of page_size).
func (p *Pool) AllocAsync(slots uintptr, n int, stream uintptr) error {
	c, err := counts("kvalloc_alloc_async", []string{"n"}, n)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_alloc_async(h, slots, c[0], stream) })
}

// FreePagesAsync gives n pages (page ids: slot / page_size, e.g. the
// newPages of an ExtendAsync) back on the device, in the allocator's order.
func (p *Pool) FreePagesAsync(pages uintptr, n int, stream uintptr) error {
	c, err := counts("kvalloc_free_pages_async", []string{"n"}, n)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvalloc_free_pages_async(h, pages, c[0], stream) })
}

// ReqWriteBatchAsync writes a batch's new slots into the request table on the
// device, like ReqWriteBatch: rows (int32), prefixLens and seqLens hold batch
// values; prefixSlots (0 for none) and extendSlots hold prefixSlotsLen and
// extendSlotsLen slots, request-major.
func (p *Pool) ReqWriteBatchAsync(rows, prefixLens, seqLens uintptr, batch int, prefixSlots uintptr,
	prefixSlotsLen int, extendSlots uintptr, extendSlotsLen int, stream uintptr) error {
	n, err := counts("kvreq_write_batch_async", []string{"batch", "prefixSlotsLen", "extendSlotsLen"},
		batch, prefixSlotsLen, extendSlotsLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvreq_write_batch_async(h, rows, prefixLens, seqLens, n[0], prefixSlots, n[1], extendSlots, n[2], stream)
	})
}

// LastLocAsync writes into lastLocs the slot of each request's last prefix
// token read from the request table (-1 for an empty prefix), like LastLoc:
// rows (int32), prefixLens and lastLocs hold batch values.
func (p *Pool) LastLocAsync(rows, prefixLens uintptr, batch int, lastLocs uintptr, stream uintptr) error {
	n, err := counts("kvreq_last_loc_async", []string{"batch"}, batch)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvreq_last_loc_async(h, rows, prefixLens, n[0], lastLocs, stream)
	})
}

// SetKVAsync writes K and V rows of one layer at n slots, like SetKV: k and v
// hold kBytes and vBytes bytes of src data (mla/double_sparse: whole rows in
// k, v 0).
func (p *Pool) SetKVAsync(layer int, slots uintptr, n int, k uintptr, kBytes int, v uintptr, vBytes int, src DType,
	kScale, vScale float32, stream uintptr) error {
	c, err := counts("kvpool_set_kv_async", []string{"n", "kBytes", "vBytes"}, n, kBytes, vBytes)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvpool_set_kv_async(h, layer, slots, c[0], k, c[1], v, c[2], int(src), kScale, vScale, stream)
	})
}

// SetMLAKVAsync writes the nope and rope parts of n rows (mla/nsa pools),
// like SetMLAKV.
func (p *Pool) SetMLAKVAsync(layer int, slots uintptr, n int, nope uintptr, nopeBytes int, rope uintptr,
	ropeBytes int, src DType, stream uintptr) error {
	c, err := counts("kvpool_set_mla_kv_async", []string{"n", "nopeBytes", "ropeBytes"}, n, nopeBytes, ropeBytes)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvpool_set_mla_kv_async(h, layer, slots, c[0], nope, c[1], rope, c[2], int(src), stream)
	})
}

// GetKVAsync gathers K and V rows of one layer at n slots into k and v
// (kBytes and vBytes bytes of dst data), like GetKV (mla: v 0).
func (p *Pool) GetKVAsync(layer int, slots uintptr, n int, k uintptr, kBytes int, v uintptr, vBytes int, dst DType,
	stream uintptr) error {
	c, err := counts("kvpool_get_kv_async", []string{"n", "kBytes", "vBytes"}, n, kBytes, vBytes)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvpool_get_kv_async(h, layer, slots, c[0], k, c[1], v, c[2], int(dst), stream)
	})
}

// MoveKVAsync copies every layer's rows from the src slots to the dst slots,
// like MoveKV (all sources are read before any write).
func (p *Pool) MoveKVAsync(dst uintptr, dstLen int, src uintptr, srcLen int, stream uintptr) error {
	c, err := counts("kvpool_move_kv_async", []string{"dstLen", "srcLen"}, dstLen, srcLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_move_kv_async(h, dst, c[0], src, c[1], stream) })
}

// MambaAllocAsync allocates n mamba state slots with MambaAlloc's ids (host
// values, returned); zeroing their states is enqueued on stream.
// hybrid_linear pools only (ErrUnsupported otherwise); on shortage nothing
// changes (ErrOutOfMemory).
func (p *Pool) MambaAllocAsync(n int, stream uintptr) ([]int32, error) {
	if err := outputLen("kvpool_mamba_alloc_async", n); err != nil {
		return nil, err
	}
	slots := make([]int32, n)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_alloc_async(h, slots, stream) }); err != nil {
		return nil, err
	}
	return slots, nil
}

// MambaForkAsync allocates one state slot (a host id, returned) whose states
// become a copy of src's, copied on stream, like MambaFork.
func (p *Pool) MambaForkAsync(src int32, stream uintptr) (int32, error) {
	var dst int32
	err := p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_fork_async(h, int(src), &dst, stream) })
	return dst, err
}

// MambaCopyAsync copies every layer's conv and temporal state of the state
// slots at src to those at dst (int32, srcLen and dstLen = srcLen values),
// like MambaCopy for each pair. The destinations must be distinct and must
// not be sources of the same call.
func (p *Pool) MambaCopyAsync(src uintptr, srcLen int, dst uintptr, dstLen int, stream uintptr) error {
	c, err := counts("kvpool_mamba_copy_async", []string{"srcLen", "dstLen"}, srcLen, dstLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_copy_async(h, src, c[0], dst, c[1], stream) })
}

// DecodeGraphAsync is a decode step that a CUDA graph can capture once and
// replay: seqLens (lengths including the new token), lastLocs and slots hold
// batch int64 values. The lengths, lastLocs and the free-list position are
// read, and the page count and capacity checked, when the step runs; a
// replay past the watermark faults the pool (ErrDeviceFault). Same slots as DecodeAsync
// for the same lengths. The host counters do not move: after the steps ran,
// and before any other allocator call, call DecodeGraphAdvance. On a CPU pool
// it is Decode at once (ErrOutOfMemory when the step does not fit).
func (p *Pool) DecodeGraphAsync(batch int, seqLens, lastLocs, slots, stream uintptr) error {
	n, err := counts("kvalloc_decode_graph_async", []string{"batch"}, batch)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvalloc_decode_graph_async(h, n[0], seqLens, lastLocs, slots, stream)
	})
}

// DecodeWatermark is the number of consecutive DecodeGraphAsync steps that
// fit in the free list (a graph's watermark): step k gives every request one
// more token (lengths seqLensHost[i] + k, seqLensHost the lengths at the
// first step, including its new token, each >= 1). Host arithmetic, no
// synchronization; an empty batch is ErrInvalidArgument.
func (p *Pool) DecodeWatermark(seqLensHost []int64) (int, error) {
	var steps uint
	err := p.call(func(h SwigcptrKvpool) error {
		return Kvalloc_decode_watermark(h, seqLensHost, &steps)
	})
	return int(steps), err
}

// DecodeGraphAdvance records that steps DecodeGraphAsync steps ran (from the
// lengths seqLensHost at the first of them): the host counters advance as the
// device cursor did. On a CPU pool, which allocated at each step, it only
// checks its arguments.
func (p *Pool) DecodeGraphAdvance(seqLensHost []int64, steps int) error {
	n, err := counts("kvalloc_decode_graph_advance", []string{"steps"}, steps)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvalloc_decode_graph_advance(h, seqLensHost, n[0])
	})
}

// SeqExtendAsync is SeqExtend with the request-table writes enqueued on
// stream and the new slots written to the address slots: request seqs[i]
// gets chunkLens[i] (>= 1) more prompt tokens, and slots receives slotsLen =
// sum(chunkLens) slots, request-major. seqs and chunkLens are host slices;
// the new slots are decided on the host exactly as SeqExtend decides them.
// All-or-nothing for the batch (ErrOutOfMemory changes nothing).
func (p *Pool) SeqExtendAsync(seqs []uint64, chunkLens []int64, slots uintptr, slotsLen int, stream uintptr) error {
	n, err := counts("kvseq_extend_async", []string{"slotsLen"}, slotsLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvseq_extend_async(h, seqs, chunkLens, slots, n[0], stream)
	})
}

// SeqDecodeAsync is SeqDecode with the request-table writes enqueued on
// stream: tokens[i] is appended to request seqs[i] (whose prompt is fully
// computed), and the address slots receives one slot per request (slotsLen
// = len(seqs)). seqs and tokens are host slices.
func (p *Pool) SeqDecodeAsync(seqs []uint64, tokens []int32, slots uintptr, slotsLen int, stream uintptr) error {
	n, err := counts("kvseq_decode_async", []string{"slotsLen"}, slotsLen)
	if err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error {
		return Kvseq_decode_async(h, seqs, tokens, slots, n[0], stream)
	})
}
