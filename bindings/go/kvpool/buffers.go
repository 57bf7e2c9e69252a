package kvpool

import "unsafe"

// Physical KV buffers (buffers.h). Element data passes as bytes in the dtype
// the call names, rows contiguous; the slices go to C without copying.
// Float32Bytes views a []float32 as such bytes.

// Buffer describes one buffer of a pool; it maps 1:1 onto a DLPack DLTensor.
// The memory belongs to the pool: Data is valid until the pool is closed.
type Buffer struct {
	DType      DType   // element type
	Data       uintptr // base address (host or device pointer)
	DeviceType int32   // DeviceCPU or DeviceCUDA
	DeviceID   int32   // device ordinal (0 for the CPU)
	Shape      []int64 // extent of each dimension
	Strides    []int64 // stride of each dimension, in elements
	Bytes      uint64  // bytes from Data to the end of the buffer
}

// Buffer describes one buffer of the pool; layer is a global layer id
// (ignored for BufferReqTable and BufferSWAMapping). A variant without such a
// buffer gives ErrUnsupported.
func (p *Pool) Buffer(kind BufferKind, layer int) (Buffer, error) {
	d := NewKvpool_buffer() // struct_size set by its constructor in kvpool.i
	if d.Swigcptr() == 0 {
		return Buffer{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvpool_buffer"}
	}
	defer DeleteKvpool_buffer(d)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvpool_get_buffer(h, int(kind), layer, d) }); err != nil {
		return Buffer{}, err
	}
	b := Buffer{
		DType:      DType(d.GetDtype()),
		Data:       uintptr(d.Data_address()),
		DeviceType: int32(d.GetDevice_type()),
		DeviceID:   int32(d.GetDevice_id()),
		Bytes:      d.GetBytes(),
	}
	for i := 0; i < d.GetNdim(); i++ {
		b.Shape = append(b.Shape, d.Shape_at(i))
		b.Strides = append(b.Strides, d.Stride_at(i))
	}
	return b, nil
}

// SetKV writes the K and V rows of one layer at slots (SGLang's
// set_kv_buffer): k and v hold len(slots) x heads x head_dim values of src
// (f32, f16, bf16 or the pool's kv_dtype). Values of another dtype are
// divided by their scale and cast (pass 1 for no scaling). For mla, k holds
// whole rows and v is nil. On error nothing is written.
func (p *Pool) SetKV(layer int, slots []int64, k, v []byte, src DType, kScale, vScale float32) error {
	return p.call(func(h SwigcptrKvpool) error {
		return Kvpool_set_kv(h, layer, slots, k, v, int(src), kScale, vScale)
	})
}

// SetMLAKV writes the nope and rope parts of each row (mla/nsa pools).
func (p *Pool) SetMLAKV(layer int, slots []int64, nope, rope []byte, src DType) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_set_mla_kv(h, layer, slots, nope, rope, int(src)) })
}

// SetLabel writes label rows [heads, heavy_channels] in the pool's kv_dtype
// (double_sparse pools).
func (p *Pool) SetLabel(layer int, slots []int64, labels []byte) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_set_label(h, layer, slots, labels) })
}

// SetIndexer writes indexer keys (128 fp8 bytes per token) and one scale per
// token (nsa pools).
func (p *Pool) SetIndexer(layer int, slots []int64, keys []byte, scales []float32) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_set_indexer(h, layer, slots, keys, scales) })
}

// GetKV gathers the K and V rows of one layer at slots into k and v,
// converted to dst (dst equal to the stored dtype copies the bytes as
// stored). For mla, k receives whole rows and v is nil.
func (p *Pool) GetKV(layer int, slots []int64, k, v []byte, dst DType) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_get_kv(h, layer, slots, k, v, int(dst)) })
}

// MoveKV sets, for every layer, row[dst[i]] = old row[src[i]]; all sources
// are read before any write, so overlapping sets are safe. Not swa.
func (p *Pool) MoveKV(dst, src []int64) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_move_kv(h, dst, src) })
}

// HostCopyBytes is the number of bytes CopyToHost needs for numSlots tokens.
func (p *Pool) HostCopyBytes(numSlots int) (int, error) {
	if err := outputLen("kvpool_host_copy_bytes", numSlots); err != nil {
		return 0, err
	}
	var n uint
	err := p.call(func(h SwigcptrKvpool) error { return Kvpool_host_copy_bytes(h, int64(numSlots), &n) })
	return int(n), err
}

// CopyToHost copies the KV of slots, every layer, into a new slice
// (retraction); LoadFromHost puts it back.
func (p *Pool) CopyToHost(slots []int64) ([]byte, error) {
	n, err := p.HostCopyBytes(len(slots))
	if err != nil {
		return nil, err
	}
	host := make([]byte, n)
	if err := p.CopyToHostInto(slots, host); err != nil {
		return nil, err
	}
	return host, nil
}

// CopyToHostInto copies the KV of slots into host, which must hold exactly
// HostCopyBytes(len(slots)) bytes.
func (p *Pool) CopyToHostInto(slots []int64, host []byte) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_copy_to_host(h, slots, host) })
}

// LoadFromHost scatters a CopyToHost copy back, possibly at other slots.
func (p *Pool) LoadFromHost(slots []int64, host []byte) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvpool_load_from_host(h, slots, host) })
}

// Float32Bytes views f as bytes (native byte order) without copying, for data
// of DTypeF32: p.SetKV(layer, slots, Float32Bytes(k), Float32Bytes(v), DTypeF32, 1, 1).
// Writes through the view (GetKV, MambaRead) land in f.
func Float32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}
