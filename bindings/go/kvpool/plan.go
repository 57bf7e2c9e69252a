package kvpool

// PlanInfo is the sizing of one configuration (one rank's shard), as
// kvpool_plan_info in include/kvpool/plan.h describes it field by field.
type PlanInfo struct {
	PageSize           uint32 // tokens per page
	KVBytesPerToken    uint64 // KV bytes one token costs across the layers that grow with context
	FullBytesPerToken  uint64 // bytes one token costs in the full-attention pool
	SWABytesPerToken   uint64 // bytes one token costs in the sliding-window pool (swa only)
	MaxTotalTokens     uint64 // usable token slots of the (full) pool, a multiple of PageSize
	SWATokens          uint64 // usable token slots of the sliding-window pool (swa only)
	NumPages           uint64 // MaxTotalTokens / PageSize
	MaxRunningRequests uint32 // requests that may run at once
	MaxContextLen      uint32 // columns of the request table
	ReqRows            uint32 // rows of the request table, including reserved rows
	NumLayers          uint32 // layers held by this pipeline stage
	KVHeadsPerRank     uint32 // KV heads stored per tensor-parallel rank (0 for mla/nsa)
	MambaLayers        uint32 // layers with a recurrent state (hybrid_linear only)
	MambaStateBytes    uint64 // bytes of one mamba state slot
	MambaSlots         uint64 // mamba state slots
	KVMemoryBytes      uint64 // bytes of all KV buffers, including the padding page
	ReqTableBytes      uint64 // bytes of the request-to-token table
	MambaMemoryBytes   uint64 // bytes of the mamba state pool
	TotalMemoryBytes   uint64 // KVMemoryBytes + ReqTableBytes + MambaMemoryBytes
}

// PlanConfig validates a JSON configuration and computes its sizing without
// allocating anything. A bad configuration gives an *Error with ErrConfig
// whose message names the JSON path.
func PlanConfig(json string) (PlanInfo, error) {
	return withPlanInfo(func(info Kvpool_plan_info) error {
		return Kvpool_plan(json, info)
	})
}

// withPlanInfo runs fill on a C kvpool_plan_info (struct_size set by its
// constructor in kvpool.i) and copies the result into a Go value.
func withPlanInfo(fill func(Kvpool_plan_info) error) (PlanInfo, error) {
	info := NewKvpool_plan_info()
	if info.Swigcptr() == 0 {
		return PlanInfo{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvpool_plan_info"}
	}
	defer DeleteKvpool_plan_info(info)
	if err := fill(info); err != nil {
		return PlanInfo{}, err
	}
	return PlanInfo{
		PageSize:           uint32(info.GetPage_size()),
		KVBytesPerToken:    info.GetKv_bytes_per_token(),
		FullBytesPerToken:  info.GetFull_bytes_per_token(),
		SWABytesPerToken:   info.GetSwa_bytes_per_token(),
		MaxTotalTokens:     info.GetMax_total_tokens(),
		SWATokens:          info.GetSwa_tokens(),
		NumPages:           info.GetNum_pages(),
		MaxRunningRequests: uint32(info.GetMax_running_requests()),
		MaxContextLen:      uint32(info.GetMax_context_len()),
		ReqRows:            uint32(info.GetReq_rows()),
		NumLayers:          uint32(info.GetNum_layers()),
		KVHeadsPerRank:     uint32(info.GetKv_heads_per_rank()),
		MambaLayers:        uint32(info.GetMamba_layers()),
		MambaStateBytes:    info.GetMamba_state_bytes(),
		MambaSlots:         info.GetMamba_slots(),
		KVMemoryBytes:      info.GetKv_memory_bytes(),
		ReqTableBytes:      info.GetReq_table_bytes(),
		MambaMemoryBytes:   info.GetMamba_memory_bytes(),
		TotalMemoryBytes:   info.GetTotal_memory_bytes(),
	}, nil
}
