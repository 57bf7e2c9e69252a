package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The service on a free loopback port, driven by many concurrent clients,
// then stopped: every response and the final /metrics are checked.
func TestServiceUnderConcurrentClients(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + listener.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- run(ctx, listener, defaultConfig) }()
	defer stop()

	const clients, perClient, decodeSteps, chunk = 16, 8, 4, 16
	// Every prompt starts with the same 64-token "system prompt", so later
	// requests find it in the prefix cache.
	shared := make([]int32, 64)
	for i := range shared {
		shared[i] = int32(1000 + i)
	}

	var mu sync.Mutex
	var totalChunks, totalPrompt, totalCached int
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				prompt := append(append([]int32(nil), shared...), suffix(c, i)...)
				chunks, cached, err := serve(base, prompt, decodeSteps, chunk)
				if err != nil {
					errs <- fmt.Errorf("client %d request %d: %w", c, i, err)
					return
				}
				mu.Lock()
				totalChunks += chunks
				totalPrompt += len(prompt)
				totalCached += cached
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if totalCached < (clients*perClient-clients)*48 {
		t.Errorf("only %d prompt tokens were found in the prefix cache; the shared 64-token prefix alone gives %d",
			totalCached, (clients*perClient-clients)*48)
	}

	// Bad requests are answered, not crashed on, and change nothing.
	expectStatus(t, "GET", base+"/begin", "", http.StatusMethodNotAllowed)
	expectStatus(t, "POST", base+"/begin", "not json", http.StatusBadRequest)
	expectStatus(t, "POST", base+"/decode?seq=999999&token=1", "", http.StatusBadRequest)
	expectStatus(t, "POST", base+"/extend?seq=1&chunk=x", "", http.StatusBadRequest)

	metrics := scrape(t, base)
	n := clients * perClient
	want := map[string]int{
		`kvpool_service_requests_total{op="begin"}`:  n,
		`kvpool_service_requests_total{op="extend"}`: totalChunks,
		`kvpool_service_requests_total{op="decode"}`: n*decodeSteps + 1, // + the bad decode
		`kvpool_service_requests_total{op="finish"}`: n,
		`kvpool_service_failures_total{op="decode"}`: 1,
		`kvpool_service_failures_total{op="begin"}`:  0,
		`kvpool_service_failures_total{op="extend"}`: 0,
		`kvpool_service_failures_total{op="finish"}`: 0,
		"kvpool_service_out_of_memory_total":         0,
		// The pool's own families (MetricsText) agree with what the clients saw.
		"kvpool_prefix_lookups_total":                   n,
		"kvpool_prefix_lookup_tokens_total":             totalPrompt,
		`kvpool_prefix_hit_tokens_total{tier="device"}`: totalCached,
		`kvpool_capacity_tokens{tier="device"}`:         16384,
		"kvpool_alloc_failures_total":                   0,
		// Every request finished: none runs, nothing in the prefix cache is locked.
		"kvpool_running_requests":                0,
		`kvpool_protected_tokens{tier="device"}`: 0,
	}
	for name, v := range want {
		if got, ok := metrics[name]; !ok || got != v {
			t.Errorf("/metrics %s = %d (present: %v), want %d", name, got, ok, v)
		}
	}
	// What is still held is the prefix cache's, and evictable.
	used, evictable := metrics[`kvpool_used_tokens{tier="device"}`], metrics[`kvpool_evictable_tokens{tier="device"}`]
	if used == 0 || used != evictable {
		t.Errorf("/metrics: %d device tokens used, %d evictable; want the same, non-zero", used, evictable)
	}
	t.Logf("%d requests from %d clients; %d of %d prompt tokens found in the prefix cache",
		n, clients, totalCached, totalPrompt)

	stop()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("run returned %v after the stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not stop")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the service still answers after it stopped")
	}
}

// serve runs one request through the service: begin, the prompt in chunks,
// decode steps, finish. It returns the number of extend calls and the cached
// prompt tokens. (Slots are not compared across requests: extend hands the
// computed pages to the prefix cache, which keeps one copy of a page that
// concurrent requests computed twice and frees the other for reuse.)
func serve(base string, prompt []int32, steps, chunk int) (chunks, cached int, err error) {
	body, _ := json.Marshal(prompt)
	var begun struct{ Seq, Cached int }
	if err := call("POST", base+"/begin", string(body), &begun); err != nil {
		return 0, 0, err
	}
	if begun.Seq <= 0 || begun.Cached < 0 || begun.Cached >= len(prompt) {
		return 0, 0, fmt.Errorf("begin returned %+v for a %d-token prompt", begun, len(prompt))
	}
	seq := begun.Seq
	for done := begun.Cached; done < len(prompt); done += chunk {
		n := len(prompt) - done
		if n > chunk {
			n = chunk
		}
		var extended struct{ Slots []int64 }
		if err := call("POST", fmt.Sprintf("%s/extend?seq=%d&chunk=%d", base, seq, n), "", &extended); err != nil {
			return 0, 0, err
		}
		if len(extended.Slots) != n {
			return 0, 0, fmt.Errorf("extend by %d returned %d slots", n, len(extended.Slots))
		}
		if err := distinctSlots(extended.Slots); err != nil {
			return 0, 0, err
		}
		chunks++
	}
	for s := 0; s < steps; s++ {
		var decoded struct{ Slot *int64 }
		if err := call("POST", fmt.Sprintf("%s/decode?seq=%d&token=%d", base, seq, 7+s), "", &decoded); err != nil {
			return 0, 0, err
		}
		if decoded.Slot == nil || *decoded.Slot <= 0 {
			return 0, 0, fmt.Errorf("decode returned slot %v", decoded.Slot)
		}
	}
	if err := call("POST", fmt.Sprintf("%s/finish?seq=%d&committed=%d", base, seq, len(prompt)+steps), "", nil); err != nil {
		return 0, 0, err
	}
	return chunks, begun.Cached, nil
}

// distinctSlots checks the slots of one extend: real slots (slot 0 is the
// padding slot), each once.
func distinctSlots(slots []int64) error {
	seen := make(map[int64]bool, len(slots))
	for _, s := range slots {
		if s <= 0 || seen[s] {
			return fmt.Errorf("extend returned slot %d twice or a non-positive one: %v", s, slots)
		}
		seen[s] = true
	}
	return nil
}

// suffix is the part of a prompt unique to one request: 8 to 47 tokens.
func suffix(client, request int) []int32 {
	n := 8 + (client*7+request*13)%40
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(100000 + client*10000 + request*100 + i)
	}
	return out
}

var client = &http.Client{Timeout: 30 * time.Second}

func call(method, url, body string, out any) error {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, buf.String())
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(buf.Bytes(), out)
}

func expectStatus(t *testing.T, method, url, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer["error"] == nil {
		t.Errorf("%s %s: the answer is not a JSON error (%v)", method, url, err)
	}
	if resp.StatusCode != want {
		t.Errorf("%s %s: %s, want %d", method, url, resp.Status, want)
	}
}

// scrape reads /metrics: every sample line, name{labels} -> value.
func scrape(t *testing.T, base string) map[string]int {
	t.Helper()
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("/metrics Content-Type %q", ct)
	}
	samples := map[string]int{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cut := strings.LastIndexByte(line, ' ')
		v, err := strconv.Atoi(line[cut+1:])
		if cut < 0 || err != nil {
			t.Errorf("/metrics: malformed line %q", line)
			continue
		}
		samples[line[:cut]] = v
	}
	return samples
}

// Any configuration the service is given gets "pool": {"thread_safe": true}.
func TestThreadSafeIsSet(t *testing.T) {
	for _, config := range []string{`{"pool":{"page_size":16}}`, `{"pool":{"thread_safe":false}}`, `{}`} {
		out, err := threadSafe(config)
		if err != nil {
			t.Fatalf("%s: %v", config, err)
		}
		var doc struct {
			Pool map[string]any `json:"pool"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Pool["thread_safe"] != true {
			t.Errorf("%s became %s", config, out)
		}
	}
	if _, err := threadSafe("not json"); err == nil {
		t.Error("a configuration that is not JSON was accepted")
	}
}
