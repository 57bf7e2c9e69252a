package kvpool

import (
	"errors"
	"strconv"
	"strings"
)

// The radix prefix cache (radix.h): a tree of cached prompt prefixes whose
// nodes own the KV slots of their tokens, and its KV events. Pools with
// prefix_cache.kind "radix" (the default) of attention mha, mla, nsa or
// double_sparse have one; the others give ErrUnsupported. See
// docs/prefix_cache.md.
//
// Keys are int32 token ids in a namespace, extraKey (a LoRA id or cache
// salt; "" is the default namespace). With page_size P only whole pages are
// matched and inserted. Node handles are opaque uint64 values; a stale one
// gives ErrInvalidArgument.

// RadixSizes are the tokens held by the tree: unlocked, locked and their sum.
type RadixSizes struct {
	Evictable int // tokens of unlocked nodes (radix_evict can free them)
	Protected int // tokens of locked nodes and their ancestors
	Total     int // Evictable + Protected
}

// EventType is the kind of a KV event (radix_event_type in radix.h).
type EventType int32

// KV event kinds.
const (
	EventBlockStored      EventType = 0 // a page entered the tree
	EventBlockRemoved     EventType = 1 // a page left the tree (evicted)
	EventAllBlocksCleared EventType = 2 // the tree was reset (ResetCache)
	EventHostStored       EventType = 3 // host tier: a page got its host copy (BlockHash only)
	EventHostRemoved      EventType = 4 // host tier: a page's host copy was dropped (BlockHash only)
)

func (e EventType) String() string {
	switch e {
	case EventBlockStored:
		return "BlockStored"
	case EventBlockRemoved:
		return "BlockRemoved"
	case EventAllBlocksCleared:
		return "AllBlocksCleared"
	case EventHostStored:
		return "HostStored"
	case EventHostRemoved:
		return "HostRemoved"
	}
	return "EventType(" + strconv.Itoa(int(e)) + ")"
}

// Event is one KV event (pools with prefix_cache.events true).
type Event struct {
	Type       EventType
	BlockHash  int64   // the page's id: first 8 bytes of its SHA-256 digest, big-endian (PageHash)
	ParentHash int64   // the previous page's id, if HasParent
	HasParent  bool    // BlockStored of a page that has a previous page
	Tokens     []int32 // BlockStored: the page's tokens (page_size of them); nil otherwise
}

// eventFields is the number of int64 values per event that
// kvpool_take_events_flat (kvpool.i) writes.
const eventFields = 6

// extraKeyOK rejects namespaces C would cut at a NUL byte.
func extraKeyOK(function, extraKey string) error {
	if strings.IndexByte(extraKey, 0) >= 0 {
		return &Error{Code: ErrInvalidArgument, Msg: function + ": extraKey contains a NUL byte"}
	}
	return nil
}

// Match finds the longest cached prefix of tokens (whole pages) in the
// namespace extraKey: the cached slots of the matched tokens and the node
// where the match ends (the root if nothing matched). A node matched part-way
// is split; the matched path becomes most recently used.
func (p *Pool) Match(tokens []int32, extraKey string) (slots []int64, node uint64, err error) {
	if err := extraKeyOK("radix_match", extraKey); err != nil {
		return nil, 0, err
	}
	// len(tokens) always suffices (the C API reports BUFFER_TOO_SMALL otherwise).
	slots = make([]int64, len(tokens))
	var matched uint
	err = p.call(func(h SwigcptrKvpool) error {
		return Radix_match(h, tokens, extraKey, slots, &matched, &node)
	})
	if err != nil {
		return nil, 0, err
	}
	return slots[:matched:matched], node, nil
}

// Insert caches a page-aligned key with its slots (one per token). It
// returns prefixLen, the number of leading tokens that were cached already:
// the caller still owns slots[:prefixLen] (duplicates, to free unless they
// are the tree's own slots) and the tree owns the rest. node is the node of
// the last token. priority matters for the "priority" eviction policy
// (higher stays longer). A rejected insert changes nothing.
func (p *Pool) Insert(tokens []int32, slots []int64, extraKey string, priority int32) (prefixLen int, node uint64, err error) {
	if err := extraKeyOK("radix_insert", extraKey); err != nil {
		return 0, 0, err
	}
	var prefix uint
	err = p.call(func(h SwigcptrKvpool) error {
		return Radix_insert(h, tokens, slots, extraKey, int(priority), &prefix, &node)
	})
	return int(prefix), node, err
}

// Lock protects a node and its ancestors from eviction. Locks are counted:
// lock n times, unlock n times.
func (p *Pool) Lock(node uint64) error {
	return p.call(func(h SwigcptrKvpool) error { return Radix_lock(h, node) })
}

// Unlock releases one Lock of a node.
func (p *Pool) Unlock(node uint64) error {
	return p.call(func(h SwigcptrKvpool) error { return Radix_unlock(h, node) })
}

// Evict frees whole unlocked leaves, in eviction-policy order, until at
// least tokens are back in the allocator or nothing is evictable. It returns
// the tokens freed (whole nodes: may exceed tokens).
func (p *Pool) Evict(tokens int) (evicted int, err error) {
	if err := outputLen("radix_evict", tokens); err != nil {
		return 0, err
	}
	var n uint
	err = p.call(func(h SwigcptrKvpool) error { return Radix_evict(h, int64(tokens), &n) })
	return int(n), err
}

// RadixSizes reports the tokens in the tree.
func (p *Pool) RadixSizes() (RadixSizes, error) {
	var evictable, protected, total uint
	err := p.call(func(h SwigcptrKvpool) error { return Radix_sizes(h, &evictable, &protected, &total) })
	if err != nil {
		return RadixSizes{}, err
	}
	return RadixSizes{Evictable: int(evictable), Protected: int(protected), Total: int(total)}, nil
}

// ResetCache empties the tree, returning every slot it owns to the allocator
// (emits AllBlocksCleared). Refused with ErrInvalidArgument while a request
// is active or a node is locked.
func (p *Pool) ResetCache() error {
	return p.call(func(h SwigcptrKvpool) error { return Radix_reset(h) })
}

// TakeEvents drains the queued KV events, oldest first (needs
// prefix_cache.events). Each BlockStored event gets its own Tokens slice.
func (p *Pool) TakeEvents() ([]Event, error) {
	fields := make([]int64, 16*eventFields)
	tokens := make([]int32, 256)
	for {
		var nEvents, nTokens uint
		err := p.call(func(h SwigcptrKvpool) error {
			return Kvpool_take_events_flat(h, fields, &nEvents, tokens, &nTokens)
		})
		if err == nil {
			return decodeEvents(fields, int(nEvents), tokens[:nTokens]), nil
		}
		if !errors.Is(err, ErrBufferTooSmall) {
			return nil, err
		}
		// The queue is unchanged; retry with the sizes C reported.
		if int(nEvents)*eventFields > len(fields) {
			fields = make([]int64, int(nEvents)*eventFields)
		}
		if int(nTokens) > len(tokens) {
			tokens = make([]int32, nTokens)
		}
	}
}

func decodeEvents(fields []int64, n int, tokens []int32) []Event {
	events := make([]Event, n)
	for i := range events {
		f := fields[i*eventFields : (i+1)*eventFields]
		e := Event{Type: EventType(f[0]), HasParent: f[1] != 0, BlockHash: f[2], ParentHash: f[3]}
		if f[5] > 0 {
			e.Tokens = append([]int32(nil), tokens[f[4]:f[4]+f[5]]...)
		}
		events[i] = e
	}
	return events
}

// PageHash is the page hash of KV events: SHA-256 over the parent page's 32
// digest bytes (parent nil for a first page) and each token as a 4-byte
// little-endian unsigned integer. id is the event id (BlockHash): the first
// 8 digest bytes read big-endian as an int64. Routers use it to hash prompts
// exactly as kvpool hashes the pages it stores. Safe from any goroutine.
func PageHash(tokens []int32, parent []byte) (digest [32]byte, id int64, err error) {
	if parent != nil && len(parent) == 0 {
		parent = nil // (NULL, 0): an empty, non-nil slice is no parent either
	}
	err = Radix_page_hash(tokens, parent, digest[:], &id)
	return digest, id, err
}

// MatchMamba is Match on a hybrid_linear pool (the mamba radix cache): the
// longest prefix that ends at a node with a cached mamba state, the node, and
// that state's slot (owned by the tree; -1 if nothing matched). With
// cowSlot >= 0 (a slot from MambaAlloc) the node's state is also copied
// into cowSlot (copy-on-write); -1 copies nothing.
func (p *Pool) MatchMamba(tokens []int32, extraKey string, cowSlot int32) (slots []int64, node uint64, mambaSlot int32, err error) {
	if err := extraKeyOK("radix_match_mamba", extraKey); err != nil {
		return nil, 0, -1, err
	}
	slots = make([]int64, len(tokens))
	var matched uint
	err = p.call(func(h SwigcptrKvpool) error {
		return Radix_match_mamba(h, tokens, extraKey, int(cowSlot), slots, &matched, &node, &mambaSlot)
	})
	if err != nil {
		return nil, 0, -1, err
	}
	return slots[:matched:matched], node, mambaSlot, nil
}

// InsertMamba caches a sequence and the mamba state after its last token on
// a hybrid_linear pool. As Insert, the caller keeps slots[:prefixLen]; the
// tree takes mambaSlot too unless the end node already had a state
// (stateExisted: the caller keeps and frees mambaSlot).
func (p *Pool) InsertMamba(tokens []int32, slots []int64, extraKey string, mambaSlot int32) (prefixLen int, stateExisted bool, node uint64, err error) {
	if err := extraKeyOK("radix_insert_mamba", extraKey); err != nil {
		return 0, false, 0, err
	}
	var prefix uint
	var exist int32
	err = p.call(func(h SwigcptrKvpool) error {
		return Radix_insert_mamba(h, tokens, slots, extraKey, int(mambaSlot), &prefix, &exist, &node)
	})
	return int(prefix), exist != 0, node, err
}

// EvictMamba frees up to states cached mamba states, least recently used
// first: internal nodes become tombstones (their KV stays), leaves are
// evicted entirely. It returns the states freed.
func (p *Pool) EvictMamba(states int) (int, error) {
	if err := outputLen("radix_evict_mamba", states); err != nil {
		return 0, err
	}
	var n uint
	err := p.call(func(h SwigcptrKvpool) error { return Radix_evict_mamba(h, int64(states), &n) })
	return int(n), err
}

// InsertSwa is SGLang's swa insert on a swa pool: slots[:prevPrefixLen] are
// the tree's own slots from a Match; of the rest the tree frees duplicates,
// revives unlocked tombstones and takes the new tail, so the caller owns none
// of slots[prevPrefixLen:] afterwards. Tokens before swaEvictedLen have no
// window slot any more (FreeSwa): they never revive a tombstone.
func (p *Pool) InsertSwa(tokens []int32, slots []int64, extraKey string, prevPrefixLen, swaEvictedLen int) (prefixLen int, node uint64, err error) {
	if err := extraKeyOK("radix_insert_swa", extraKey); err != nil {
		return 0, 0, err
	}
	if err := outputLen("radix_insert_swa", prevPrefixLen); err != nil {
		return 0, 0, err
	}
	if err := outputLen("radix_insert_swa", swaEvictedLen); err != nil {
		return 0, 0, err
	}
	var prefix uint
	err = p.call(func(h SwigcptrKvpool) error {
		return Radix_insert_swa(h, tokens, slots, extraKey, int64(prevPrefixLen), int64(swaEvictedLen), &prefix, &node)
	})
	return int(prefix), node, err
}

// EvictSwa evicts on a swa pool: unlocked leaves until tokens full slots are
// free, then, while fewer than swaTokens window slots were freed, drops the
// window KV of unlocked nodes (tombstones). It returns both counts.
func (p *Pool) EvictSwa(tokens, swaTokens int) (evicted, swaEvicted int, err error) {
	if err := outputLen("radix_evict_swa", tokens); err != nil {
		return 0, 0, err
	}
	if err := outputLen("radix_evict_swa", swaTokens); err != nil {
		return 0, 0, err
	}
	var full, window uint
	err = p.call(func(h SwigcptrKvpool) error {
		return Radix_evict_swa(h, int64(tokens), int64(swaTokens), &full, &window)
	})
	return int(full), int(window), err
}

// StateSizes reports the tree's second resource on hybrid_linear pools
// (mamba states) and swa pools (window tokens): unlocked and locked.
func (p *Pool) StateSizes() (evictable, protected int, err error) {
	var e, pr uint
	err = p.call(func(h SwigcptrKvpool) error { return Radix_state_sizes(h, &e, &pr) })
	return int(e), int(pr), err
}
