package kvpool_test

import (
	"bytes"
	"reflect"
	"testing"
	"unsafe"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

const (
	// 2 layers, 2 heads x 8 dims: a row (one token of K or V in one layer) is 16 floats.
	rowFloats = 2 * 8
	mlaConfig = `{"model":{"num_layers":2,"attention":"mla","kv_lora_rank":16,"qk_rope_head_dim":8},` +
		`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}`
	doubleSparseConfig = `{"model":{"num_layers":2,"attention":"double_sparse","kv_heads":2,"head_dim":8,"heavy_channels":4},` +
		`"pool":{"kv_dtype":"f32","max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}`
	nsaConfig = `{"model":{"num_layers":2,"attention":"nsa","kv_lora_rank":128,"qk_rope_head_dim":64},` +
		`"pool":{"kv_dtype":"bf16","page_size":64,"max_total_tokens":128,"max_running_requests":4,"max_context_len":128}}`
)

// hostBytes is the pool memory a CPU buffer descriptor points at.
func hostBytes(t *testing.T, b kvpool.Buffer) []byte {
	t.Helper()
	if b.DeviceType != kvpool.DeviceCPU || b.Data == 0 {
		t.Fatalf("not a CPU buffer: %+v", b)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(b.Data)), b.Bytes)
}

func buffer(t *testing.T, p *kvpool.Pool, kind kvpool.BufferKind, layer int) kvpool.Buffer {
	t.Helper()
	b, err := p.Buffer(kind, layer)
	must(t, err)
	return b
}

func TestSetGetKV(t *testing.T) {
	p := open(t, pagedConfig)
	slots, err := p.Alloc(4)
	must(t, err)
	k, v := ramp(3*rowFloats, 1), ramp(3*rowFloats, 100)
	must(t, p.SetKV(0, slots[:3], kvpool.Float32Bytes(k), kvpool.Float32Bytes(v), kvpool.DTypeF32, 1, 1))

	gotK, gotV := make([]float32, len(k)), make([]float32, len(v))
	must(t, p.GetKV(0, slots[:3], kvpool.Float32Bytes(gotK), kvpool.Float32Bytes(gotV), kvpool.DTypeF32))
	sameFloats(t, "K", gotK, k)
	sameFloats(t, "V", gotV, v)

	// Converted on the way out: 1.0 is 0x3f80 in bf16.
	bf16 := make([]byte, 2*rowFloats*2)
	must(t, p.GetKV(0, slots[:1], bf16[:rowFloats*2], bf16[rowFloats*2:], kvpool.DTypeBF16))
	if bf16[0] != 0x80 || bf16[1] != 0x3f { // K 1.0
		t.Errorf("first K value as bf16 = %#x %#x, want 0x80 0x3f", bf16[0], bf16[1])
	}
	if bf16[rowFloats*2] != 0xc8 || bf16[rowFloats*2+1] != 0x42 { // V 100.0
		t.Errorf("first V value as bf16 = %#x %#x, want 0xc8 0x42", bf16[rowFloats*2], bf16[rowFloats*2+1])
	}

	// Lengths and layers are checked; nothing is written on error.
	wantCode(t, p.SetKV(0, slots[:3], kvpool.Float32Bytes(k[:5]), kvpool.Float32Bytes(v), kvpool.DTypeF32, 1, 1),
		kvpool.ErrInvalidArgument)
	wantCode(t, p.SetKV(7, slots[:3], kvpool.Float32Bytes(k), kvpool.Float32Bytes(v), kvpool.DTypeF32, 1, 1),
		kvpool.ErrInvalidArgument)

	// The descriptor points at the very memory SetKV wrote.
	kb := buffer(t, p, kvpool.BufferK, 0)
	if kb.DType != kvpool.DTypeF32 || kb.DeviceID != 0 || kb.Bytes != 68*rowFloats*4 ||
		!reflect.DeepEqual(kb.Shape, []int64{68, 2, 8}) || !reflect.DeepEqual(kb.Strides, []int64{16, 8, 1}) {
		t.Errorf("Buffer(K, 0) = %+v", kb)
	}
	row := hostBytes(t, kb)[slots[0]*rowFloats*4 : (slots[0]+1)*rowFloats*4]
	if !bytes.Equal(row, kvpool.Float32Bytes(k[:rowFloats])) {
		t.Errorf("K row of slot %d in the buffer differs from what SetKV wrote", slots[0])
	}
	if vb := buffer(t, p, kvpool.BufferV, 1); vb.Data == kb.Data || vb.Data == 0 {
		t.Errorf("Buffer(V, 1).Data = %#x, Buffer(K, 0).Data = %#x", vb.Data, kb.Data)
	}
	rt := buffer(t, p, kvpool.BufferReqTable, 0)
	if rt.DType != kvpool.DTypeI32 || !reflect.DeepEqual(rt.Shape, []int64{9, 64}) {
		t.Errorf("Buffer(ReqTable) = %+v", rt)
	}
	_, err = p.Buffer(kvpool.BufferLabel, 0)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.Buffer(kvpool.BufferK, 9)
	wantCode(t, err, kvpool.ErrInvalidArgument)

	// MoveKV copies every layer's rows.
	must(t, p.SetKV(1, slots[:1], kvpool.Float32Bytes(v[:rowFloats]), kvpool.Float32Bytes(k[:rowFloats]), kvpool.DTypeF32, 1, 1))
	must(t, p.MoveKV(slots[3:4], slots[:1]))
	oneK, oneV := make([]float32, rowFloats), make([]float32, rowFloats)
	must(t, p.GetKV(1, slots[3:4], kvpool.Float32Bytes(oneK), kvpool.Float32Bytes(oneV), kvpool.DTypeF32))
	sameFloats(t, "moved layer 1 K", oneK, v[:rowFloats])
	sameFloats(t, "moved layer 1 V", oneV, k[:rowFloats])
	must(t, p.GetKV(0, slots[3:4], kvpool.Float32Bytes(oneK), kvpool.Float32Bytes(oneV), kvpool.DTypeF32))
	sameFloats(t, "moved layer 0 K", oneK, k[:rowFloats])
	sameFloats(t, "moved layer 0 V", oneV, v[:rowFloats])
}

func TestHostCopyRoundTrip(t *testing.T) {
	p := open(t, pagedConfig)
	slots, err := p.Alloc(8)
	must(t, err)
	src, dst := slots[:3], slots[4:7]
	k, v := ramp(3*rowFloats, 1), ramp(3*rowFloats, -50)
	for layer := 0; layer < 2; layer++ {
		must(t, p.SetKV(layer, src, kvpool.Float32Bytes(k), kvpool.Float32Bytes(v), kvpool.DTypeF32, 1, 1))
	}
	n, err := p.HostCopyBytes(3)
	must(t, err)
	if n != 2*2*3*rowFloats*4 { // layers x (K, V) x tokens x row bytes
		t.Fatalf("HostCopyBytes(3) = %d", n)
	}
	host, err := p.CopyToHost(src)
	must(t, err)
	if len(host) != n {
		t.Fatalf("CopyToHost gave %d bytes, want %d", len(host), n)
	}
	// Zero copy: into a window of a larger slice.
	big := make([]byte, n+32)
	must(t, p.CopyToHostInto(src, big[16:16+n]))
	if !bytes.Equal(big[16:16+n], host) || !bytes.Equal(big[:16], make([]byte, 16)) {
		t.Errorf("CopyToHostInto wrote outside its window or differs from CopyToHost")
	}
	must(t, p.LoadFromHost(dst, host))
	for layer := 0; layer < 2; layer++ {
		gotK, gotV := make([]float32, len(k)), make([]float32, len(v))
		must(t, p.GetKV(layer, dst, kvpool.Float32Bytes(gotK), kvpool.Float32Bytes(gotV), kvpool.DTypeF32))
		sameFloats(t, "reloaded K", gotK, k)
		sameFloats(t, "reloaded V", gotV, v)
	}
	wantCode(t, p.LoadFromHost(dst, host[:n-1]), kvpool.ErrInvalidArgument)
}

func TestMLA(t *testing.T) {
	p := open(t, mlaConfig)
	slots, err := p.Alloc(4)
	must(t, err)
	nope, rope := ramp(3*16, 1), ramp(3*8, 200)
	must(t, p.SetMLAKV(0, slots[:3], kvpool.Float32Bytes(nope), kvpool.Float32Bytes(rope), kvpool.DTypeF32))
	rows := make([]float32, 3*24)
	must(t, p.GetKV(0, slots[:3], kvpool.Float32Bytes(rows), nil, kvpool.DTypeF32))
	for i := 0; i < 3; i++ {
		sameFloats(t, "nope part", rows[i*24:i*24+16], nope[i*16:(i+1)*16])
		sameFloats(t, "rope part", rows[i*24+16:(i+1)*24], rope[i*8:(i+1)*8])
	}
	// SetKV writes whole rows (v nil).
	whole := ramp(24, -9)
	must(t, p.SetKV(1, slots[3:], kvpool.Float32Bytes(whole), nil, kvpool.DTypeF32, 1, 1))
	got := make([]float32, 24)
	must(t, p.GetKV(1, slots[3:], kvpool.Float32Bytes(got), nil, kvpool.DTypeF32))
	sameFloats(t, "mla row", got, whole)
	if kb := buffer(t, p, kvpool.BufferK, 0); !reflect.DeepEqual(kb.Shape, []int64{68, 1, 24}) {
		t.Errorf("Buffer(K, 0) of mla = %+v", kb)
	}
	// mla on an mha pool.
	mha := open(t, pagedConfig)
	wantCode(t, mha.SetMLAKV(0, []int64{4}, kvpool.Float32Bytes(nope[:16]), kvpool.Float32Bytes(rope[:8]), kvpool.DTypeF32),
		kvpool.ErrUnsupported)
}

func TestLabels(t *testing.T) {
	p := open(t, doubleSparseConfig)
	slots, err := p.Alloc(2)
	must(t, err)
	labels := ramp(2*2*4, 7) // 2 tokens x 2 heads x 4 heavy channels
	must(t, p.SetLabel(0, slots, kvpool.Float32Bytes(labels)))
	lb := buffer(t, p, kvpool.BufferLabel, 0)
	if !reflect.DeepEqual(lb.Shape, []int64{65, 2, 4}) || !reflect.DeepEqual(lb.Strides, []int64{8, 4, 1}) {
		t.Fatalf("Buffer(Label, 0) = %+v", lb)
	}
	mem := hostBytes(t, lb)
	for i, slot := range slots {
		if !bytes.Equal(mem[slot*32:(slot+1)*32], kvpool.Float32Bytes(labels[i*8:(i+1)*8])) {
			t.Errorf("label row of slot %d differs", slot)
		}
	}
	wantCode(t, open(t, pagedConfig).SetLabel(0, []int64{4}, kvpool.Float32Bytes(labels[:8])), kvpool.ErrUnsupported)
}

func TestIndexer(t *testing.T) {
	p := open(t, nsaConfig)
	slots, err := p.Alloc(64)
	must(t, err)
	keys := make([]byte, 2*128)
	for i := range keys {
		keys[i] = byte(i*7 + 3)
	}
	must(t, p.SetIndexer(0, slots[:2], keys, []float32{0.5, 2}))
	ib := buffer(t, p, kvpool.BufferIndexer, 0)
	if !bytes.Contains(hostBytes(t, ib), keys[:128]) || !bytes.Contains(hostBytes(t, ib), keys[128:]) {
		t.Errorf("the indexer keys are not in Buffer(Indexer, 0) = %+v", ib)
	}
	wantCode(t, p.SetIndexer(0, slots[:2], keys, []float32{1}), kvpool.ErrInvalidArgument)
	wantCode(t, open(t, pagedConfig).SetIndexer(0, []int64{4}, keys[:128], []float32{1}), kvpool.ErrUnsupported)
}
