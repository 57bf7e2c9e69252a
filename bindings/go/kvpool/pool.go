package kvpool

import (
	"runtime"
	"strings"
	"sync/atomic"
)

// Pool owns one kvpool handle and everything it describes. Close it when
// done; a finalizer closes forgotten pools, but only as a safety net (it runs
// late, or never).
//
// Like the C handle, a Pool is used by one goroutine at a time. Close is
// idempotent; any other method on a closed Pool returns ErrInvalidArgument.
type Pool struct {
	h atomic.Uintptr // the kvpool*; 0 once closed
}

// Open creates a pool from a JSON configuration (docs/config.md). A bad
// configuration gives an *Error with ErrConfig whose message names the JSON
// path, the value and what was expected.
func Open(json string) (*Pool, error) {
	var h uintptr
	if err := Kvpool_create(json, &h); err != nil {
		return nil, err
	}
	return newPool(h), nil
}

// OpenFile creates a pool from a JSON configuration file. A file that cannot
// be read gives ErrIO with the path in the message.
func OpenFile(path string) (*Pool, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return nil, &Error{Code: ErrInvalidArgument, Msg: "path contains a NUL byte"}
	}
	var h uintptr
	if err := Kvpool_create_from_file(path, &h); err != nil {
		return nil, err
	}
	return newPool(h), nil
}

func newPool(h uintptr) *Pool {
	p := &Pool{}
	p.h.Store(h)
	runtime.SetFinalizer(p, (*Pool).Close)
	return p
}

// Close destroys the pool. Calling it again does nothing and returns nil.
func (p *Pool) Close() error {
	if h := p.h.Swap(0); h != 0 {
		runtime.SetFinalizer(p, nil)
		Kvpool_destroy(SwigcptrKvpool(h))
	}
	return nil
}

// handle is the live C handle, or ErrInvalidArgument once the pool is closed.
func (p *Pool) handle() (SwigcptrKvpool, error) {
	h := p.h.Load()
	if h == 0 {
		return 0, &Error{Code: ErrInvalidArgument, Msg: "use of a closed Pool"}
	}
	return SwigcptrKvpool(h), nil
}

// call runs f with the live handle. The Pool stays reachable until f has
// returned, so its finalizer cannot destroy the handle during the C call.
func (p *Pool) call(f func(h SwigcptrKvpool) error) error {
	h, err := p.handle()
	if err != nil {
		return err
	}
	err = f(h)
	runtime.KeepAlive(p)
	return err
}

// Backend is the name of the backend the pool runs on: "cpu" or "cuda".
func (p *Pool) Backend() (string, error) {
	h, err := p.handle()
	if err != nil {
		return "", err
	}
	name := Kvpool_backend(h)
	runtime.KeepAlive(p) // no finalizer may destroy h during the call
	if name == "" {
		return "", &Error{Code: ErrInvalidArgument, Msg: "kvpool_backend: not a live kvpool handle"}
	}
	return name, nil
}

// Plan is the plan (sizing) the pool was created with.
func (p *Pool) Plan() (PlanInfo, error) {
	h, err := p.handle()
	if err != nil {
		return PlanInfo{}, err
	}
	defer runtime.KeepAlive(p)
	return withPlanInfo(func(info Kvpool_plan_info) error {
		return Kvpool_get_plan(h, info)
	})
}
