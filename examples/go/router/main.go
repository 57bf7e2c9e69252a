// Command router is a KV-aware router index built on kvpool's KV events.
//
// Three simulated workers each run requests (kvseq: Begin, SeqExtend,
// SeqDecode, Finish) on their own kvpool pool, a CPU pool of a tiny model
// used purely as a radix index of what the worker has cached, with
// prefix_cache.events on. The router sees the workers only through their KV
// events: it drains TakeEvents and keeps, per worker, the set of block hashes
// present (BlockStored adds, BlockRemoved removes, AllBlocksCleared empties).
// For an incoming prompt it hashes the prompt's whole pages with PageHash,
// chained exactly as kvpool chains them, and picks the worker holding the
// longest cached prefix: the number of leading pages whose hash it has.
//
// The program checks itself: every routing decision must be the expected
// worker, and the router's page count must equal what the worker's own tree
// reports (Match). It exits 1 on any mismatch.
package main

import (
	"fmt"
	"os"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

const pageSize = 16

// A tiny CPU pool: 1 layer x 1 head x 1 f16 value per token, so 4096 tokens cost a few KiB.
const workerConfig = `{"model":{"num_layers":1,"kv_heads":1,"head_dim":1},` +
	`"pool":{"device":"cpu","kv_dtype":"f16","page_size":16,"max_total_tokens":4096,` +
	`"max_running_requests":16,"max_context_len":1024},` +
	`"prefix_cache":{"kind":"radix","eviction":"lru","events":true}}`

// worker simulates one inference worker: its pool plays the KV cache.
type worker struct {
	name string
	pool *kvpool.Pool
}

// serve runs one request: chunked prefill of what is not cached, a few decode
// steps, finish.
func (w *worker) serve(prompt []int32, decode int) error {
	seq, cached, err := w.pool.Begin(prompt, "")
	if err != nil {
		return err
	}
	for done := cached; done < len(prompt); done += 32 {
		chunk := len(prompt) - done
		if chunk > 32 {
			chunk = 32
		}
		if _, err := w.pool.SeqExtend([]uint64{seq}, []int64{int64(chunk)}); err != nil {
			return err
		}
	}
	for i := 0; i < decode; i++ {
		if _, err := w.pool.SeqDecode([]uint64{seq}, []int32{int32(90000 + i)}); err != nil {
			return err
		}
	}
	return w.pool.Finish(seq, len(prompt)+decode)
}

// router is the index: per worker, the block hashes it holds.
type router struct {
	workers []*worker
	present []map[int64]bool
	stored  int
	removed int
}

// poll drains every worker's KV events into the index.
func (r *router) poll() error {
	for i, w := range r.workers {
		events, err := w.pool.TakeEvents()
		if err != nil {
			return err
		}
		for _, e := range events {
			switch e.Type {
			case kvpool.EventBlockStored:
				r.present[i][e.BlockHash] = true
				r.stored++
			case kvpool.EventBlockRemoved:
				delete(r.present[i], e.BlockHash)
				r.removed++
			case kvpool.EventAllBlocksCleared:
				r.present[i] = map[int64]bool{}
			}
		}
	}
	return nil
}

// pageIDs hashes the whole pages of a prompt, each chained to the previous one.
func pageIDs(prompt []int32) ([]int64, error) {
	var ids []int64
	var parent []byte
	for start := 0; start+pageSize <= len(prompt); start += pageSize {
		digest, id, err := kvpool.PageHash(prompt[start:start+pageSize], parent)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		parent = digest[:]
	}
	return ids, nil
}

// route returns the worker with the longest cached prefix (-1 if none has any)
// and every worker's count of leading cached pages.
func (r *router) route(prompt []int32) (best int, pages []int, err error) {
	ids, err := pageIDs(prompt)
	if err != nil {
		return -1, nil, err
	}
	best = -1
	pages = make([]int, len(r.workers))
	for w := range r.workers {
		for _, id := range ids {
			if !r.present[w][id] {
				break
			}
			pages[w]++
		}
		if pages[w] > 0 && (best < 0 || pages[w] > pages[best]) {
			best = w
		}
	}
	return best, pages, nil
}

// text makes n deterministic pseudo-random tokens from a seed.
func text(seed uint32, n int) []int32 {
	t := make([]int32, n)
	x := seed*2654435761 + 1
	for i := range t {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		t[i] = int32(x % 32000)
	}
	return t
}

func concat(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func run() (failures int, err error) {
	r := &router{}
	for i := 0; i < 3; i++ {
		p, err := kvpool.Open(workerConfig)
		if err != nil {
			return 0, err
		}
		defer p.Close()
		r.workers = append(r.workers, &worker{name: fmt.Sprintf("worker-%d", i), pool: p})
		r.present = append(r.present, map[int64]bool{})
	}

	// System prompts: worker 0 serves assistant A (64 tokens = 4 pages), worker 1
	// assistant B (48 tokens), worker 2 a variant of A sharing its first 2 pages.
	sysA := text(1, 64)
	sysB := text(2, 48)
	variant := concat(sysA[:32], text(3, 48))
	traffic := []struct {
		worker int
		prompt []int32
	}{
		{0, concat(sysA, text(10, 37))},
		{0, concat(sysA, text(11, 20))},
		{1, concat(sysB, text(12, 50))},
		{1, concat(sysB, text(13, 5))},
		{2, concat(variant, text(14, 30))},
	}
	for _, t := range traffic {
		if err := r.workers[t.worker].serve(t.prompt, 8); err != nil {
			return 0, err
		}
		if err := r.poll(); err != nil {
			return 0, err
		}
	}

	check := func(label string, prompt []int32, want int) error {
		best, pages, err := r.route(prompt)
		if err != nil {
			return err
		}
		ok := best == want
		// The event-fed index must agree with each worker's own tree.
		for w, wk := range r.workers {
			slots, _, err := wk.pool.Match(prompt, "")
			if err != nil {
				return err
			}
			if len(slots)/pageSize != pages[w] {
				fmt.Printf("  MISMATCH: %s holds %d pages of it, the router counted %d\n", wk.name, len(slots)/pageSize, pages[w])
				ok = false
			}
		}
		chosen := "none (no cached prefix)"
		if best >= 0 {
			chosen = r.workers[best].name
		}
		status := "ok"
		if !ok {
			status = "WRONG"
			failures++
		}
		fmt.Printf("%-34s %3d tokens: cached pages per worker %v -> %s [%s]\n", label, len(prompt), pages, chosen, status)
		return nil
	}

	fmt.Printf("router index: %d BlockStored events from %d workers\n", r.stored, len(r.workers))
	steps := []struct {
		label  string
		prompt []int32
		want   int
	}{
		{"assistant A, new question", concat(sysA, text(20, 40)), 0},
		{"assistant B, new question", concat(sysB, text(21, 40)), 1},
		{"variant of A, new question", concat(variant, text(22, 40)), 2},
		{"first half of A only", concat(sysA[:32], text(23, 40)), 0},
		{"unknown system prompt", text(24, 100), -1},
	}
	for _, s := range steps {
		if err := check(s.label, s.prompt, s.want); err != nil {
			return failures, err
		}
	}

	// Memory pressure on worker 0: it evicts its whole cache; the router learns it
	// from BlockRemoved events, and assistant A now goes to worker 2 (2 shared pages).
	evicted, err := r.workers[0].pool.Evict(4096)
	if err != nil {
		return failures, err
	}
	if err := r.poll(); err != nil {
		return failures, err
	}
	fmt.Printf("worker-0 evicted %d tokens: %d BlockRemoved events\n", evicted, r.removed)
	if r.removed == 0 || len(r.present[0]) != 0 {
		fmt.Printf("  WRONG: worker-0's blocks are still indexed (%d)\n", len(r.present[0]))
		failures++
	}
	if err := check("assistant A after worker-0 evicted", concat(sysA, text(25, 40)), 2); err != nil {
		return failures, err
	}
	return failures, nil
}

func main() {
	failures, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
	if failures > 0 {
		fmt.Printf("%d wrong routing decisions\n", failures)
		os.Exit(1)
	}
	fmt.Println("all routing decisions correct")
}
