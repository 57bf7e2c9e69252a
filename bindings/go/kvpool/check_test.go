package kvpool_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

func TestCheckAndStats(t *testing.T) {
	p := open(t, pagedConfig)
	report, err := p.Check()
	must(t, err)
	if !strings.HasPrefix(report, "ok: 0 pages held, 16 free, 0 rows held") {
		t.Errorf("Check() = %q", report)
	}
	slots, err := p.Alloc(8)
	must(t, err)
	_, err = p.Alloc(100)
	wantCode(t, err, kvpool.ErrOutOfMemory)
	must(t, p.Free(slots[:1]))
	wantCode(t, p.Free(slots[:1]), kvpool.ErrInvalidArgument)
	_, err = p.ReqAlloc(2)
	must(t, err)
	report, err = p.Check()
	must(t, err)
	if !strings.HasPrefix(report, "ok: 1 pages held, 15 free, 2 rows held") {
		t.Errorf("Check() = %q", report)
	}

	plan, err := p.Plan()
	must(t, err)
	s, err := p.Stats()
	must(t, err)
	want := kvpool.Stats{
		AllocKind:      kvpool.AllocPaged,
		TokenCapacity:  64,
		TokenAvailable: 60,
		TokenHeld:      4,
		ReqCapacity:    8,
		ReqAvailable:   6,
		KVBytes:        plan.KVMemoryBytes,
		ReqTableBytes:  plan.ReqTableBytes,
		AllocCalls:     1,
		FreeCalls:      1,
		AllocFailures:  1,
		RejectedCalls:  1,
	}
	if s != want {
		t.Errorf("Stats() = %+v\nwant      %+v", s, want)
	}

	// Every field of the C struct reaches the Go struct.
	getters := 0
	ty := reflect.TypeOf(kvpool.SwigcptrKvpool_stats(0))
	for i := 0; i < ty.NumMethod(); i++ {
		if strings.HasPrefix(ty.Method(i).Name, "Get") {
			getters++
		}
	}
	if n := reflect.TypeOf(kvpool.Stats{}).NumField(); n != getters {
		t.Errorf("kvpool.Stats has %d fields, kvpool_stats %d", n, getters)
	}

	swa := open(t, swaConfig)
	_, err = swa.Alloc(3)
	must(t, err)
	s, err = swa.Stats()
	must(t, err)
	if s.AllocKind != kvpool.AllocSWA || s.SWACapacity != 16 || s.SWAHeld != 3 || s.SWAAvailable != 13 {
		t.Errorf("swa Stats() = %+v", s)
	}
}
