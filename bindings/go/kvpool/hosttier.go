package kvpool

import "errors"

// The host-memory tier (L2) of the radix cache (host.h): with a host_cache
// section in its configuration, a pool keeps a second, larger KV store in
// host memory and its tree nodes are device-only, device+host (backed up)
// or host-only (evicted from the device, kept on the host). Evict keeps
// backed-up nodes as host-only; HostEvict removes host-only leaves;
// HostLoadBack (and Begin, which reports it in SeqInfo.HostHit) brings a
// host-only prefix back to the device. See docs/host-tier.md.
//
// Pools without a host tier give ErrUnsupported for every Host* call. On
// CPU pools copies land inside the call; on CUDA pools they run on their own
// streams and HostPoll releases the nodes of copies that have landed.
// Streams are cudaStream_t values as uintptr (0 = the legacy default
// stream), as in the device.h calls. Node handles are those of the radix
// calls (Match, Insert).

// HostStats are the sizes and counters of the host tier (kvhost_stats).
type HostStats struct {
	CapacityTokens    uint64 // host tokens the tier holds at most (whole pages)
	UsedTokens        uint64 // host tokens held by tree nodes (device+host and host-only)
	HostOnlyTokens    uint64 // of those, tokens only on the host (evicted from the device)
	CopiesInFlight    uint64 // copies started but not yet seen to land
	Backups           uint64 // backups (device to host copies) started
	BackupTokens      uint64 // tokens copied device to host
	BackupsSkipped    uint64 // nodes left without a host copy because the tier had no room
	BackupErrors      uint64 // backups that failed to start (the node stays device-only)
	Loads             uint64 // load-backs (host to device copies) started
	LoadTokens        uint64 // tokens copied host to device
	LoadsRefused      uint64 // host hits not loaded: below the 10-token threshold or no device room
	HostEvictedTokens uint64 // host tokens freed by host eviction
	BytesToHost       uint64 // bytes copied device to host
	BytesToDevice     uint64 // bytes copied host to device
	LoadEvictedTokens uint64 // device tokens that load-backs (HostLoadBack, Begin) evicted to make room
}

// HostMatchResult is what HostMatch found: the device part of the match (as
// Match) and the host-only part after it.
type HostMatchResult struct {
	Slots      []int64 // device slots of the tokens matched on the device
	Node       uint64  // the deepest matched device node (the root if none)
	HostTokens int     // tokens matched after Slots in host-only nodes
	HostNode   uint64  // the deepest matched node with a host copy (the root if none): for HostLoadBack
}

// HostNodeState is where a node's tokens live (kvhost_node_state).
type HostNodeState struct {
	OnDevice bool // the node's KV is on the device
	OnHost   bool // the node has a host copy
	Tokens   int  // the node's token count
}

// HostStats reports the host tier's sizes and counters.
func (p *Pool) HostStats() (HostStats, error) {
	s := NewKvhost_stats() // struct_size set by its constructor in kvpool.i
	if s.Swigcptr() == 0 {
		return HostStats{}, &Error{Code: ErrHostMemory, Msg: "cannot allocate a kvhost_stats"}
	}
	defer DeleteKvhost_stats(s)
	if err := p.call(func(h SwigcptrKvpool) error { return Kvhost_get_stats(h, s) }); err != nil {
		return HostStats{}, err
	}
	return HostStats{
		CapacityTokens:    s.GetCapacity_tokens(),
		UsedTokens:        s.GetUsed_tokens(),
		HostOnlyTokens:    s.GetHost_only_tokens(),
		CopiesInFlight:    s.GetCopies_in_flight(),
		Backups:           s.GetBackups(),
		BackupTokens:      s.GetBackup_tokens(),
		BackupsSkipped:    s.GetBackups_skipped(),
		BackupErrors:      s.GetBackup_errors(),
		Loads:             s.GetLoads(),
		LoadTokens:        s.GetLoad_tokens(),
		LoadsRefused:      s.GetLoads_refused(),
		HostEvictedTokens: s.GetHost_evicted_tokens(),
		BytesToHost:       s.GetBytes_to_host(),
		BytesToDevice:     s.GetBytes_to_device(),
		LoadEvictedTokens: s.GetLoad_evicted_tokens(),
	}, nil
}

// HostPoll starts the backups that inserts since the last call asked for
// (a backup never starts in the insert itself: the engine writes the KV
// after inserting), then releases the nodes of copies that have landed
// (with wait, after blocking until every copy in flight has landed) and
// returns how many copies it released (always 0 on CPU pools, whose copies
// land at once). ErrCUDA if a copy failed.
func (p *Pool) HostPoll(wait bool) (completed int, err error) {
	w := 0
	if wait {
		w = 1
	}
	var n uint
	err = p.call(func(h SwigcptrKvpool) error { return Kvhost_poll(h, w, &n) })
	return int(n), err
}

// HostSetStream sets the compute stream: backups wait for the work already
// on it, and HostWaitLayer with stream 0 makes it wait. CPU pools ignore it.
func (p *Pool) HostSetStream(stream uintptr) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvhost_set_stream(h, stream) })
}

// HostNextLoadSet moves load-backs to the next of the three load sets (once
// per batch, before the batch's Begin / HostLoadBack calls) and returns the
// new current set (0, 1 or 2).
func (p *Pool) HostNextLoadSet() (int32, error) {
	var set int32
	err := p.call(func(h SwigcptrKvpool) error { return Kvhost_next_load_set(h, &set) })
	return set, err
}

// HostLoadSet is the load set that load-backs go to now (0, 1 or 2).
func (p *Pool) HostLoadSet() (int32, error) {
	var set int32
	err := p.call(func(h SwigcptrKvpool) error { return Kvhost_load_set(h, &set) })
	return set, err
}

// HostWaitLayer makes stream (0: the compute stream of HostSetStream) wait
// until layer (a global layer id) of the loads of set has landed; the host
// does not block. On CPU pools there is nothing to wait for. A set outside
// 0..2 or a layer the pool does not hold gives ErrInvalidArgument.
func (p *Pool) HostWaitLayer(set, layer int32, stream uintptr) error {
	return p.call(func(h SwigcptrKvpool) error { return Kvhost_wait_layer(h, int(set), int(layer), stream) })
}

// HostMatch is Match that also reports the host-only part of the match: the
// tokens found after the device part in host-only nodes, and the node to
// pass to HostLoadBack.
func (p *Pool) HostMatch(tokens []int32, extraKey string) (HostMatchResult, error) {
	if err := extraKeyOK("kvhost_match", extraKey); err != nil {
		return HostMatchResult{}, err
	}
	// len(tokens) always suffices (the C API reports BUFFER_TOO_SMALL otherwise).
	slots := make([]int64, len(tokens))
	var matched, hostMatched uint
	var node, hostNode uint64
	err := p.call(func(h SwigcptrKvpool) error {
		return Kvhost_match(h, tokens, extraKey, slots, &matched, &hostMatched, &node, &hostNode)
	})
	if err != nil {
		return HostMatchResult{}, err
	}
	return HostMatchResult{Slots: slots[:matched:matched], Node: node, HostTokens: int(hostMatched),
		HostNode: hostNode}, nil
}

// HostLoadBack brings the host-only nodes that end at hostNode (from
// HostMatch) back to the device: fresh device slots are allocated (evicting
// unlocked device nodes if needed) and owned by the tree at once. It returns
// the loaded tokens' slots (none for fewer than 10 tokens, SGLang's
// threshold, or when the device cannot make room) and the deepest device
// node of the path afterwards. A stale handle gives ErrInvalidArgument.
func (p *Pool) HostLoadBack(hostNode uint64) (slots []int64, node uint64, err error) {
	slots = make([]int64, 64)
	for {
		var n uint
		err = p.call(func(h SwigcptrKvpool) error { return Kvhost_load_back(h, hostNode, slots, &n, &node) })
		if err == nil {
			return slots[:n:n], node, nil
		}
		// BUFFER_TOO_SMALL changed nothing and tells the size.
		if !errors.Is(err, ErrBufferTooSmall) || int(n) <= len(slots) {
			return nil, 0, err
		}
		slots = make([]int64, n)
	}
}

// HostEvict deletes unlocked host-only leaves in policy order until tokens
// host tokens are freed (or none are left) and returns the host tokens freed.
func (p *Pool) HostEvict(tokens int) (evicted int, err error) {
	if err := outputLen("kvhost_evict", tokens); err != nil {
		return 0, err
	}
	var n uint
	err = p.call(func(h SwigcptrKvpool) error { return Kvhost_evict(h, int64(tokens), &n) })
	return int(n), err
}

// HostNodeState reports where a node's tokens live. A stale handle gives
// ErrInvalidArgument.
func (p *Pool) HostNodeState(node uint64) (HostNodeState, error) {
	var onDevice, onHost int32
	var tokens uint
	err := p.call(func(h SwigcptrKvpool) error { return Kvhost_node_state(h, node, &onDevice, &onHost, &tokens) })
	if err != nil {
		return HostNodeState{}, err
	}
	return HostNodeState{OnDevice: onDevice != 0, OnHost: onHost != 0, Tokens: int(tokens)}, nil
}
