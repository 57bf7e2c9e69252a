package kvpool

// Mamba state slots and hybrid request rows (mamba.h). Every method gives
// ErrUnsupported on pools whose attention is not hybrid_linear. State slot
// ids are int32.

// MambaAvailable is the number of free state slots.
func (p *Pool) MambaAvailable() (int, error) {
	var slots uint
	err := p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_available(h, &slots) })
	return int(slots), err
}

// MambaAlloc allocates n state slots (their states zeroed).
func (p *Pool) MambaAlloc(n int) ([]int32, error) {
	if err := outputLen("kvpool_mamba_alloc", n); err != nil {
		return nil, err
	}
	slots := make([]int32, n)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_alloc(h, slots) }); err != nil {
		return nil, err
	}
	return slots, nil
}

// MambaFree returns state slots to the free list. Slots held by a request
// row are freed with ReqFreeHybrid instead.
func (p *Pool) MambaFree(slots []int32) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_free(h, slots) })
}

// MambaCopy copies every layer's conv and temporal state from src to dst.
func (p *Pool) MambaCopy(src, dst int32) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_copy(h, int(src), int(dst)) })
}

// MambaFork allocates one slot holding a copy of src and returns it.
func (p *Pool) MambaFork(src int32) (int32, error) {
	var dst int32
	err := p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_fork(h, int(src), &dst) })
	return dst, err
}

// MambaWrite writes one layer's state of one slot: conv and ssm hold
// prod(conv_shape) and prod(ssm_shape) values in their configured dtypes
// (Float32Bytes views a []float32 as bytes).
func (p *Pool) MambaWrite(layer int, slot int32, conv, ssm []byte) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_write(h, layer, int(slot), conv, ssm) })
}

// MambaRead reads one layer's state of one slot into conv and ssm.
func (p *Pool) MambaRead(layer int, slot int32, conv, ssm []byte) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_mamba_read(h, layer, int(slot), conv, ssm) })
}

// ReqAllocHybrid allocates one request row per entry of reuse together with
// its state slot (SGLang's HybridReqToTokenPool.alloc): reuse[i] is a state
// slot request i already holds, or -1 for a fresh, zeroed one. On shortage
// nothing changes (ErrOutOfMemory).
func (p *Pool) ReqAllocHybrid(reuse []int32) (rows, slots []int32, err error) {
	rows = make([]int32, len(reuse))
	slots = make([]int32, len(reuse))
	if err := p.call(func(h SwigcptrKvpool) error { return Kvreq_alloc_hybrid(h, reuse, rows, slots) }); err != nil {
		return nil, nil, err
	}
	return rows, slots, nil
}

// ReqFreeHybrid frees hybrid request rows and, with freeState, their state
// slots; keep is the index (0 or 1) of the ping-pong slot to keep, or -1.
func (p *Pool) ReqFreeHybrid(rows []int32, freeState bool, keep int32) error {
	state := 0
	if freeState {
		state = 1
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_free_hybrid(h, rows, state, int(keep)) })
}

// ReqMambaSlots is the state slot of an allocated hybrid row (-1 if none)
// and its two ping-pong slots (-1 without mamba_extra_buffer).
func (p *Pool) ReqMambaSlots(row int32) (slot int32, pingPong [2]int32, err error) {
	err = p.call(func(h SwigcptrKvpool) error { return Kvreq_mamba_slots(h, int(row), &slot, pingPong[:]) })
	return slot, pingPong, err
}
