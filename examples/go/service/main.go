// Command service is a small HTTP service that owns one kvpool pool and
// serves the request lifecycle of an inference engine to many clients:
//
//	POST /begin?extra_key=K   body: the prompt as a JSON array of token ids
//	                          -> {"seq":7,"cached":32}
//	POST /extend?seq=7&chunk=16   the next prompt chunk -> {"slots":[...]}
//	POST /decode?seq=7&token=42   one decode step       -> {"slot":1234}
//	POST /finish?seq=7&committed=N  end; the first N tokens go to the prefix cache -> {}
//	GET  /metrics             Prometheus text: the pool's families (MetricsText) and the service's own
//	GET  /healthz             "ok"
//
// Every handler runs on its own goroutine (net/http) and calls the pool
// directly: the pool is opened with "pool": {"thread_safe": true}, so the
// library serializes the calls itself (the service sets the key in any
// configuration it is given). Errors are JSON {"error":..., "code":N}: an
// out-of-memory pool is 503 (retry later: nothing changed), a bad request 400.
//
//	go run . -addr 127.0.0.1:8080 [-config pool.json]
//
// It needs libkvpool through pkg-config (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig)
// and the Go module github.com/kvpool/kvpool/bindings/go/kvpool (go.mod).
// SIGINT or SIGTERM stops it: in-flight requests finish, then the pool closes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

// defaultConfig is a CPU pool of a tiny model with a radix prefix cache:
// enough to run the service anywhere.
const defaultConfig = `{"model":{"num_layers":2,"kv_heads":2,"head_dim":16},` +
	`"pool":{"device":"cpu","kv_dtype":"f16","page_size":16,"max_total_tokens":16384,` +
	`"max_running_requests":64,"max_context_len":2048,"thread_safe":true},` +
	`"prefix_cache":{"kind":"radix","eviction":"lru"}}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	configPath := flag.String("config", "", "pool configuration (JSON file); a tiny CPU pool if empty")
	flag.Parse()

	config := defaultConfig
	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err != nil {
			log.Fatal(err)
		}
		config = string(data)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("kvpool service on http://%s", listener.Addr())
	if err := run(ctx, listener, config); err != nil {
		log.Fatal(err)
	}
}

// run serves on listener until ctx is done, then shuts down gracefully and
// closes the pool.
func run(ctx context.Context, listener net.Listener, config string) error {
	config, err := threadSafe(config)
	if err != nil {
		listener.Close()
		return err
	}
	p, err := kvpool.Open(config)
	if err != nil {
		listener.Close()
		return err
	}
	svc := &service{pool: p}
	server := &http.Server{Handler: svc.routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()

	select {
	case err = <-served: // the listener failed
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = server.Shutdown(shutdown)
		cancel()
	}
	if closeErr := svc.close(); err == nil {
		err = closeErr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// service owns the pool. The pool serializes concurrent calls itself
// (thread_safe); mu only guards its lifetime: calls hold it shared, close
// holds it alone, so no call runs on a closed pool.
type service struct {
	mu   sync.RWMutex
	pool *kvpool.Pool

	counters counters
}

// counters are the service's own metrics, per operation.
type counters struct {
	requests [numOps]atomic.Uint64 // calls that reached the pool
	failures [numOps]atomic.Uint64 // of those, failed ones
	oom      atomic.Uint64         // failures that were kvpool.ErrOutOfMemory
}

type op int

const (
	opBegin op = iota
	opExtend
	opDecode
	opFinish
	numOps
)

var opNames = [numOps]string{"begin", "extend", "decode", "finish"}

func (s *service) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/begin", post(s.begin))
	mux.HandleFunc("/extend", post(s.extend))
	mux.HandleFunc("/decode", post(s.decode))
	mux.HandleFunc("/finish", post(s.finish))
	mux.HandleFunc("/metrics", s.metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

// call runs f on the pool, concurrently with other calls, and counts it.
func (s *service) call(o op, f func(p *kvpool.Pool) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.pool == nil {
		return errClosed
	}
	s.counters.requests[o].Add(1)
	err := f(s.pool)
	if err != nil {
		s.counters.failures[o].Add(1)
		if errors.Is(err, kvpool.ErrOutOfMemory) {
			s.counters.oom.Add(1)
		}
	}
	return err
}

// threadSafe sets "pool": {"thread_safe": true} in a JSON configuration.
func threadSafe(config string) (string, error) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(config), &doc); err != nil {
		return "", fmt.Errorf("the pool configuration is not a JSON object: %w", err)
	}
	pool, _ := doc["pool"].(map[string]any)
	if pool == nil {
		pool = map[string]any{}
		doc["pool"] = pool
	}
	pool["thread_safe"] = true
	out, err := json.Marshal(doc)
	return string(out), err
}

var errClosed = errors.New("the service is shutting down")

func (s *service) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool == nil {
		return nil
	}
	err := s.pool.Close()
	s.pool = nil
	return err
}

func (s *service) begin(w http.ResponseWriter, r *http.Request) (any, error) {
	var tokens []int32
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&tokens); err != nil {
		return nil, badRequest("the body must be a JSON array of token ids: %v", err)
	}
	var seq uint64
	var cached int
	err := s.call(opBegin, func(p *kvpool.Pool) (err error) {
		seq, cached, err = p.Begin(tokens, r.URL.Query().Get("extra_key"))
		return err
	})
	return map[string]any{"seq": seq, "cached": cached}, err
}

func (s *service) extend(w http.ResponseWriter, r *http.Request) (any, error) {
	seq, err := queryUint(r, "seq")
	if err != nil {
		return nil, err
	}
	chunk, err := queryUint(r, "chunk")
	if err != nil {
		return nil, err
	}
	var slots []int64
	err = s.call(opExtend, func(p *kvpool.Pool) (err error) {
		slots, err = p.SeqExtend([]uint64{seq}, []int64{int64(chunk)})
		return err
	})
	return map[string]any{"slots": slots}, err
}

func (s *service) decode(w http.ResponseWriter, r *http.Request) (any, error) {
	seq, err := queryUint(r, "seq")
	if err != nil {
		return nil, err
	}
	token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 32)
	if err != nil {
		return nil, badRequest("query parameter token: want a 32-bit token id, got %q", r.URL.Query().Get("token"))
	}
	var slots []int64
	err = s.call(opDecode, func(p *kvpool.Pool) (err error) {
		slots, err = p.SeqDecode([]uint64{seq}, []int32{int32(token)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"slot": slots[0]}, nil
}

func (s *service) finish(w http.ResponseWriter, r *http.Request) (any, error) {
	seq, err := queryUint(r, "seq")
	if err != nil {
		return nil, err
	}
	committed, err := queryUint(r, "committed")
	if err != nil {
		return nil, err
	}
	err = s.call(opFinish, func(p *kvpool.Pool) error { return p.Finish(seq, int(committed)) })
	return map[string]any{}, err
}

// metrics serves the Prometheus text exposition format (version 0.0.4): the
// pool's own families (MetricsText: capacity, use, prefix hits by tier,
// evictions, ...; docs/services.md#metrics) followed by the service's.
func (s *service) metrics(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	if s.pool == nil {
		s.mu.RUnlock()
		http.Error(w, errClosed.Error(), http.StatusServiceUnavailable)
		return
	}
	text, err := s.pool.MetricsText()
	s.mu.RUnlock()
	c := &s.counters
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}

	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	io.WriteString(w, text)
	perOp := func(name, help string, values *[numOps]atomic.Uint64) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", name, help, name)
		for o := op(0); o < numOps; o++ {
			fmt.Fprintf(w, "%s{op=%q} %d\n", name, opNames[o], values[o].Load())
		}
	}
	perOp("kvpool_service_requests_total", "Calls into the pool, per operation.", &c.requests)
	perOp("kvpool_service_failures_total", "Failed calls into the pool, per operation.", &c.failures)
	fmt.Fprintf(w, "# HELP kvpool_service_out_of_memory_total Calls answered 503 because the pool was full.\n"+
		"# TYPE kvpool_service_out_of_memory_total counter\nkvpool_service_out_of_memory_total %d\n", c.oom.Load())
}

// post adapts a JSON handler: POST only, the result or the error as JSON.
func post(h func(w http.ResponseWriter, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "POST only"})
			return
		}
		result, err := h(w, r)
		if err != nil {
			status, body := errorResponse(err)
			writeJSON(w, status, body)
			return
		}
		writeJSON(w, http.StatusOK, result)
	}
}

// errorResponse maps an error to an HTTP status: a full pool is 503 (the
// call changed nothing, the client may retry), invalid input 400.
func errorResponse(err error) (int, map[string]any) {
	body := map[string]any{"error": err.Error()}
	var kerr *kvpool.Error
	var bad *requestError
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest, body
	case errors.Is(err, errClosed):
		return http.StatusServiceUnavailable, body
	case errors.As(err, &kerr):
		body["code"] = int(kerr.Code)
		switch kerr.Code {
		case kvpool.ErrOutOfMemory:
			return http.StatusServiceUnavailable, body
		case kvpool.ErrInvalidArgument:
			return http.StatusBadRequest, body
		}
	}
	return http.StatusInternalServerError, body
}

type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{fmt.Sprintf(format, args...)}
}

func queryUint(r *http.Request, name string) (uint64, error) {
	v, err := strconv.ParseUint(r.URL.Query().Get(name), 10, 63)
	if err != nil {
		return 0, badRequest("query parameter %s: want a non-negative integer, got %q", name, r.URL.Query().Get(name))
	}
	return v, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("writing a response: %v", err)
	}
}
