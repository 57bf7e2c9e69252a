package kvpool

// Request rows (req.h): the request-to-token table. Row ids are int32,
// slot ids int64.

// ReqAvailable is the number of request rows that can be allocated now.
func (p *Pool) ReqAvailable() (int, error) {
	var rows uint
	err := p.call(func(h SwigcptrKvpool) error { return Kvreq_available(h, &rows) })
	return int(rows), err
}

// ReqAlloc allocates n request rows (never row 0). ErrOutOfMemory leaves the
// table unchanged.
func (p *Pool) ReqAlloc(n int) ([]int32, error) {
	if err := outputLen("kvreq_alloc", n); err != nil {
		return nil, err
	}
	rows := make([]int32, n)
	if err := p.ReqAllocInto(rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// ReqAllocInto allocates len(rows) rows into rows.
func (p *Pool) ReqAllocInto(rows []int32) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_alloc(h, rows) })
}

// ReqFree returns rows to the back of the free list.
func (p *Pool) ReqFree(rows []int32) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_free(h, rows) })
}

// ReqWrite writes slot ids into columns start.. of an allocated row.
func (p *Pool) ReqWrite(row int32, start int, slots []int64) error {
	if err := outputLen("kvreq_write", start); err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_write(h, int(row), int64(start), slots) })
}

// ReqRead reads n columns from start of an allocated row.
func (p *Pool) ReqRead(row int32, start, n int) ([]int64, error) {
	if err := outputLen("kvreq_read", n); err != nil {
		return nil, err
	}
	slots := make([]int64, n)
	if err := p.ReqReadInto(row, start, slots); err != nil {
		return nil, err
	}
	return slots, nil
}

// ReqReadInto reads len(slots) columns from start of an allocated row.
func (p *Pool) ReqReadInto(row int32, start int, slots []int64) error {
	if err := outputLen("kvreq_read", start); err != nil {
		return err
	}
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_read(h, int(row), int64(start), slots) })
}

// ReqClear frees every row (the table contents are kept, as SGLang does).
func (p *Pool) ReqClear() error {
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_clear(h) })
}

// ReqWriteBatch writes a batch's prefix and new slots into its rows (SGLang's
// write_cache_indices): row[0:prefixLens[i]] gets request i's share of
// prefixSlots, row[prefixLens[i]:seqLens[i]] its share of extendSlots (what
// Extend returned). On error no row is written.
func (p *Pool) ReqWriteBatch(rows []int32, prefixLens, seqLens, prefixSlots, extendSlots []int64) error {
	return p.call(func(h SwigcptrKvpool) error {
		return Kvreq_write_batch(h, rows, prefixLens, seqLens, prefixSlots, extendSlots)
	})
}

// LastLoc is the slot of each request's last prefix token, or -1 for an
// empty prefix: the lastLocs input of Extend.
func (p *Pool) LastLoc(rows []int32, prefixLens []int64) ([]int64, error) {
	lastLocs := make([]int64, len(rows))
	if err := p.LastLocInto(rows, prefixLens, lastLocs); err != nil {
		return nil, err
	}
	return lastLocs, nil
}

// LastLocInto is LastLoc writing into lastLocs (one per row).
func (p *Pool) LastLocInto(rows []int32, prefixLens, lastLocs []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvreq_last_loc(h, rows, prefixLens, lastLocs) })
}
