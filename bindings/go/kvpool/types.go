package kvpool

import "strconv"

// AllocKind is the allocator a pool uses (kvalloc_kind in alloc.h).
type AllocKind int32

// Allocator kinds.
const (
	AllocToken AllocKind = 0 // page_size 1: FIFO slot reuse
	AllocPaged AllocKind = 1 // page_size > 1: page-granular, recently freed first
	AllocSWA   AllocKind = 2 // full + sliding-window pools
)

func (k AllocKind) String() string {
	switch k {
	case AllocToken:
		return "token"
	case AllocPaged:
		return "paged"
	case AllocSWA:
		return "swa"
	}
	return "AllocKind(" + strconv.Itoa(int(k)) + ")"
}

// AllocList names one of the allocator's internal lists (kvalloc_list).
type AllocList int32

// Lists FreeList reports.
const (
	ListFree       AllocList = 0 // the free list, front first (pages; slots for page_size 1)
	ListRelease    AllocList = 1 // deferred frees waiting for MergeAndSort (need_sort)
	ListSWAFree    AllocList = 2 // the sliding-window pool's free list (swa only)
	ListSWARelease AllocList = 3 // the sliding-window pool's deferred frees (swa only)
)

// DType is the element type of a buffer or of data passed in and out
// (kvpool_dtype in buffers.h).
type DType int32

// Element types.
const (
	DTypeF32     DType = 0 // IEEE float32
	DTypeF16     DType = 1 // IEEE float16
	DTypeBF16    DType = 2 // bfloat16
	DTypeFP8E4M3 DType = 3 // float8 e4m3fn
	DTypeFP8E5M2 DType = 4 // float8 e5m2
	DTypeFP4E2M1 DType = 5 // float4 e2m1, two per byte
	DTypeU8      DType = 6 // raw bytes
	DTypeI32     DType = 7 // int32
	DTypeI64     DType = 8 // int64
)

var dtypeNames = [...]string{"f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "u8", "i32", "i64"}

// String is the name the configuration uses ("f32", "bf16", "fp8_e4m3", ...).
func (d DType) String() string {
	if d >= 0 && int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "DType(" + strconv.Itoa(int(d)) + ")"
}

// BufferKind names a buffer that (*Pool).Buffer describes (kvpool_buffer_kind).
type BufferKind int32

// Buffer kinds.
const (
	BufferK                     BufferKind = 0  // keys of a layer (mla/nsa: the whole row)
	BufferV                     BufferKind = 1  // values of a layer (mla/nsa: view of the first kv_lora_rank columns)
	BufferKScale                BufferKind = 2  // fp4: block scales of K
	BufferVScale                BufferKind = 3  // fp4: block scales of V
	BufferIndexer               BufferKind = 4  // nsa: per-page indexer bytes
	BufferLabel                 BufferKind = 5  // double_sparse: labels
	BufferReqTable              BufferKind = 6  // the request-to-token table (layer ignored)
	BufferMambaConv             BufferKind = 7  // hybrid_linear: conv state of a mamba layer
	BufferMambaSSM              BufferKind = 8  // hybrid_linear: temporal state of a mamba layer
	BufferSWAMapping            BufferKind = 9  // swa: full-to-window slot mapping (layer ignored)
	BufferMambaIntermediateSSM  BufferKind = 10 // hybrid_linear speculative: per-draft-token temporal states
	BufferMambaIntermediateConv BufferKind = 11 // hybrid_linear speculative: per-draft-token conv windows
)

// Device types (DLPack's numbers): Buffer.DeviceType is DeviceCPU or
// DeviceCUDA; DeviceCUDAHost (pinned host memory) is what the callbacks of a
// C kvpool_allocator get for a CUDA pool's host tier.
const (
	DeviceCPU      int32 = 1
	DeviceCUDA     int32 = 2
	DeviceCUDAHost int32 = 3
)
