package kvpool_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

func radixSizes(t *testing.T, p *kvpool.Pool) kvpool.RadixSizes {
	t.Helper()
	s, err := p.RadixSizes()
	must(t, err)
	return s
}

func TestRadixInsertMatchLockEvict(t *testing.T) {
	p := open(t, cacheConfig)
	tokens := tokenRange(1, 8)
	slots, err := p.Alloc(8)
	must(t, err)
	prefix, node, err := p.Insert(tokens, slots, "", 0)
	must(t, err)
	if prefix != 0 || node == 0 {
		t.Fatalf("Insert = (%d, %d), want nothing cached before and a node", prefix, node)
	}
	if s := radixSizes(t, p); s != (kvpool.RadixSizes{Evictable: 8, Total: 8}) {
		t.Fatalf("RadixSizes = %+v, want 8 evictable", s)
	}

	// Whole pages match; the unaligned tail and other tokens do not.
	got, mnode, err := p.Match(append(tokenRange(1, 8), 9, 10), "")
	must(t, err)
	wantInts(t, "Match", got, slots)
	if mnode != node {
		t.Fatalf("Match ended at node %d, want %d", mnode, node)
	}
	got, _, err = p.Match([]int32{1, 2, 3, 4, 99, 98, 97, 96}, "")
	must(t, err)
	wantInts(t, "Match of the first page", got, slots[:4])
	got, _, err = p.Match(tokens, "other namespace")
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("Match in another namespace = %v, want nothing", got)
	}
	got, _, err = p.Match(nil, "")
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("Match(nil) = %v", got)
	}

	// Locked nodes are protected from eviction.
	must(t, p.Lock(node))
	if s := radixSizes(t, p); s.Protected != 8 || s.Evictable != 0 {
		t.Fatalf("RadixSizes while locked = %+v", s)
	}
	evicted, err := p.Evict(8)
	must(t, err)
	if evicted != 0 {
		t.Fatalf("Evict freed %d locked tokens", evicted)
	}
	must(t, p.Unlock(node))
	wantCode(t, p.Unlock(node), kvpool.ErrInvalidArgument) // not locked any more

	// Inserting a longer key: the first 8 tokens are there already, the caller keeps those slots.
	longer, err := p.Alloc(12)
	must(t, err)
	prefix, _, err = p.Insert(tokenRange(1, 12), longer, "", 5)
	must(t, err)
	if prefix != 8 {
		t.Fatalf("Insert of a longer key: prefix %d, want 8", prefix)
	}
	must(t, p.Free(longer[:8])) // duplicates: ours to free
	if s := radixSizes(t, p); s.Total != 12 {
		t.Fatalf("RadixSizes = %+v, want 12 tokens", s)
	}
	// A key that is not page-aligned is rejected and changes nothing.
	odd, err := p.Alloc(8)
	must(t, err)
	_, _, err = p.Insert(tokenRange(50, 6), odd[:6], "", 0)
	wantCode(t, err, kvpool.ErrInvalidArgument)
	must(t, p.Free(odd))

	evicted, err = p.Evict(100)
	must(t, err)
	if evicted != 12 || radixSizes(t, p).Total != 0 {
		t.Fatalf("Evict(100) freed %d, want all 12", evicted)
	}
	if n, _ := p.Available(); n != 128 {
		t.Fatalf("Available after evicting everything = %d, want 128", n)
	}
	wantCode(t, p.Lock(node), kvpool.ErrInvalidArgument) // an evicted node's handle is stale

	// ResetCache gives every cached slot back.
	again, err := p.Alloc(8)
	must(t, err)
	_, _, err = p.Insert(tokens, again, "", 0)
	must(t, err)
	must(t, p.ResetCache())
	if s := radixSizes(t, p); s.Total != 0 {
		t.Fatalf("RadixSizes after ResetCache = %+v", s)
	}
	if n, _ := p.Available(); n != 128 {
		t.Fatalf("Available after ResetCache = %d, want 128", n)
	}
	if _, err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// pageDigest is the documented page hash, computed with crypto/sha256 only.
func pageDigest(parent []byte, tokens []int32) [32]byte {
	h := sha256.New()
	h.Write(parent)
	var b [4]byte
	for _, tok := range tokens {
		binary.LittleEndian.PutUint32(b[:], uint32(tok))
		h.Write(b[:])
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

func eventID(d [32]byte) int64 { return int64(binary.BigEndian.Uint64(d[:8])) }

func TestEventsAndPageHash(t *testing.T) {
	p := open(t, cacheConfig)
	events, err := p.TakeEvents()
	must(t, err)
	if len(events) != 0 {
		t.Fatalf("events of a new pool: %v", events)
	}
	prompt := tokenRange(100, 10)
	a, _, err := p.Begin(prompt, "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{a}, []int64{10})
	must(t, err)
	must(t, p.Finish(a, 10))
	events, err = p.TakeEvents()
	must(t, err)
	if len(events) != 2 {
		t.Fatalf("TakeEvents = %+v, want two BlockStored events", events)
	}
	first, second := events[0], events[1]
	if first.Type != kvpool.EventBlockStored || first.HasParent || second.Type != kvpool.EventBlockStored ||
		!second.HasParent || second.ParentHash != first.BlockHash || first.BlockHash == second.BlockHash {
		t.Fatalf("events = %+v: want two chained BlockStored events", events)
	}
	wantInts(t, "first page", first.Tokens, prompt[:4])
	wantInts(t, "second page", second.Tokens, prompt[4:8])

	// PageHash reproduces the ids, and so does plain SHA-256.
	d1, id1, err := kvpool.PageHash(prompt[:4], nil)
	must(t, err)
	d2, id2, err := kvpool.PageHash(prompt[4:8], d1[:])
	must(t, err)
	if id1 != first.BlockHash || id2 != second.BlockHash {
		t.Fatalf("PageHash ids %d, %d; events carry %d, %d", id1, id2, first.BlockHash, second.BlockHash)
	}
	if want := pageDigest(nil, prompt[:4]); d1 != want || id1 != eventID(want) {
		t.Fatalf("PageHash digest %x, want SHA-256 %x", d1, want)
	}
	if want := pageDigest(d1[:], prompt[4:8]); d2 != want || id2 != eventID(want) {
		t.Fatalf("chained PageHash digest %x, want SHA-256 %x", d2, want)
	}
	_, _, err = kvpool.PageHash(prompt[:4], []byte{1, 2, 3})
	wantCode(t, err, kvpool.ErrInvalidArgument)
	if events, _ = p.TakeEvents(); len(events) != 0 {
		t.Fatalf("events were not drained: %+v", events)
	}

	// More events than TakeEvents first makes room for: it retries with the reported sizes.
	b, _, err := p.Begin(tokenRange(1000, 101), "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{b}, []int64{101})
	must(t, err)
	must(t, p.Finish(b, 101))
	events, err = p.TakeEvents()
	must(t, err)
	if len(events) != 25 {
		t.Fatalf("TakeEvents returned %d events, want 25 pages", len(events))
	}
	for i, e := range events {
		if e.Type != kvpool.EventBlockStored || len(e.Tokens) != 4 || e.Tokens[0] != int32(1000+4*i) {
			t.Fatalf("event %d = %+v", i, e)
		}
		if i > 0 && e.ParentHash != events[i-1].BlockHash {
			t.Fatalf("event %d does not chain to event %d", i, i-1)
		}
	}

	// Eviction and reset.
	_, err = p.Evict(4)
	must(t, err)
	events, err = p.TakeEvents()
	must(t, err)
	if len(events) == 0 || events[0].Type != kvpool.EventBlockRemoved || events[0].Tokens != nil {
		t.Fatalf("events after Evict = %+v, want BlockRemoved", events)
	}
	must(t, p.ResetCache())
	events, err = p.TakeEvents()
	must(t, err)
	if len(events) == 0 || events[len(events)-1].Type != kvpool.EventAllBlocksCleared {
		t.Fatalf("events after ResetCache = %+v, want AllBlocksCleared last", events)
	}
	if kvpool.EventBlockStored.String() != "BlockStored" {
		t.Fatalf("EventType.String = %q", kvpool.EventBlockStored.String())
	}
}

func TestEventTypesMatchHeader(t *testing.T) {
	for _, c := range []struct {
		got  kvpool.EventType
		want kvpool.Enum_SS_radix_event_type
	}{
		{kvpool.EventBlockStored, kvpool.RADIX_EVENT_BLOCK_STORED},
		{kvpool.EventBlockRemoved, kvpool.RADIX_EVENT_BLOCK_REMOVED},
		{kvpool.EventAllBlocksCleared, kvpool.RADIX_EVENT_ALL_BLOCKS_CLEARED},
		{kvpool.EventHostStored, kvpool.RADIX_EVENT_HOST_STORED},
		{kvpool.EventHostRemoved, kvpool.RADIX_EVENT_HOST_REMOVED},
	} {
		if int(c.got) != int(c.want) {
			t.Errorf("%s = %d, header %d", c.got, c.got, c.want)
		}
	}
}

func TestRadixUnsupportedWithoutTree(t *testing.T) {
	p := open(t, chunkConfig)
	_, _, err := p.Match(tokenRange(1, 4), "")
	wantCode(t, err, kvpool.ErrUnsupported)
	slots, err := p.Alloc(4)
	must(t, err)
	_, _, err = p.Insert(tokenRange(1, 4), slots, "", 0)
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.RadixSizes()
	wantCode(t, err, kvpool.ErrUnsupported)
	_, err = p.Evict(4)
	wantCode(t, err, kvpool.ErrUnsupported)
	wantCode(t, p.Lock(1), kvpool.ErrUnsupported)
	wantCode(t, p.Unlock(1), kvpool.ErrUnsupported)
	wantCode(t, p.ResetCache(), kvpool.ErrUnsupported)
	_, err = p.TakeEvents()
	wantCode(t, err, kvpool.ErrUnsupported)
}
