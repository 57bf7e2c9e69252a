package kvpool_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

var (
	sampleLine = regexp.MustCompile(`^(kvpool_[a-zA-Z0-9_]*)(\{[a-z_]+="[^"\\]*"(,[a-z_]+="[^"\\]*")*\})? ([0-9]+)$`)
	typeLine   = regexp.MustCompile(`^# TYPE (kvpool_[a-zA-Z0-9_]*) (counter|gauge)$`)
	helpLine   = regexp.MustCompile(`^# HELP (kvpool_[a-zA-Z0-9_]*) .+$`)
)

// parseMetrics checks the exposition format (HELP and TYPE before every
// family's samples, each family once, counters ending in _total, numeric
// values) and returns the samples by series.
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	if !strings.HasSuffix(text, "\n") {
		t.Fatalf("the text does not end with a newline:\n%s", text)
	}
	samples := map[string]float64{}
	seen := map[string]bool{}
	family, helped := "", ""
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if m := helpLine.FindStringSubmatch(line); m != nil {
			helped = m[1]
			continue
		}
		if m := typeLine.FindStringSubmatch(line); m != nil {
			if m[1] != helped || seen[m[1]] {
				t.Fatalf("line %d: TYPE of %s without its HELP, or a second time", i+1, m[1])
			}
			if (m[2] == "counter") != strings.HasSuffix(m[1], "_total") {
				t.Fatalf("line %d: %s %s: counters and only counters end in _total", i+1, m[2], m[1])
			}
			family = m[1]
			seen[family] = true
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != family {
			t.Fatalf("line %d is not a sample of the family %q: %q", i+1, family, line)
		}
		v, err := strconv.ParseFloat(m[4], 64)
		if err != nil {
			t.Fatalf("line %d: value %q", i+1, m[4])
		}
		series := m[1] + m[2]
		if _, dup := samples[series]; dup {
			t.Fatalf("line %d: series %s twice", i+1, series)
		}
		samples[series] = v
	}
	return samples
}

func wantSample(t *testing.T, m map[string]float64, series string, want uint64) {
	t.Helper()
	got, ok := m[series]
	if !ok {
		t.Fatalf("no sample %s", series)
	}
	if got != float64(want) {
		t.Fatalf("%s = %v, want %d", series, got, want)
	}
}

func metricsOf(t *testing.T, p *kvpool.Pool) map[string]float64 {
	t.Helper()
	text, err := p.MetricsText()
	must(t, err)
	return parseMetrics(t, text)
}

// A request on pool a stores its pages; pool b prefetches them and loads them
// back: every figure equals what Stats, HostStats and StorageStats report.
func TestMetricsTextMatchesTheStats(t *testing.T) {
	dir, err := os.MkdirTemp("", "kvpool-go-metrics-")
	must(t, err)
	defer os.RemoveAll(dir)
	a, err := kvpool.Open(storageConfig(dir))
	must(t, err)
	defer a.Close()
	prompt := tokenRange(11, 40)
	seq, _, err := a.Begin(prompt, "")
	must(t, err)
	_, err = a.SeqExtend([]uint64{seq}, []int64{int64(len(prompt))})
	must(t, err)
	must(t, a.Finish(seq, len(prompt)))
	must(t, a.StorageFlush())

	b, err := kvpool.Open(storageConfig(dir))
	must(t, err)
	defer b.Close()
	prefetchAll(t, b, prompt)
	seq, cached, err := b.Begin(prompt, "")
	must(t, err)
	info, err := b.SeqInfo(seq)
	must(t, err)
	if cached == 0 || info.StorageHit == 0 {
		t.Fatalf("Begin after the prefetch: cached %d, info %+v; want a storage hit", cached, info)
	}
	must(t, b.Abort(seq))

	for _, p := range []*kvpool.Pool{a, b} {
		m := metricsOf(t, p)
		s, err := p.Stats()
		must(t, err)
		h := hostStats(t, p)
		st := storageStats(t, p)
		wantSample(t, m, `kvpool_capacity_tokens{tier="device"}`, s.TokenCapacity)
		wantSample(t, m, `kvpool_used_tokens{tier="device"}`, s.TokenHeld)
		wantSample(t, m, `kvpool_capacity_tokens{tier="host"}`, h.CapacityTokens)
		wantSample(t, m, `kvpool_used_tokens{tier="host"}`, h.UsedTokens)
		wantSample(t, m, `kvpool_transfers_total{direction="device_to_host"}`, h.Backups)
		wantSample(t, m, `kvpool_transfers_total{direction="host_to_device"}`, h.Loads)
		wantSample(t, m, `kvpool_transfer_bytes_total{direction="device_to_host"}`, h.BytesToHost)
		wantSample(t, m, `kvpool_transfer_bytes_total{direction="host_to_device"}`, h.BytesToDevice)
		wantSample(t, m, `kvpool_transfers_total{direction="host_to_storage"}`, st.Backups)
		wantSample(t, m, `kvpool_transfer_bytes_total{direction="host_to_storage"}`, st.BackupBytes)
		wantSample(t, m, `kvpool_transfer_tokens_total{direction="storage_to_host"}`, st.PrefetchLoadedTokens)
		wantSample(t, m, `kvpool_transfer_bytes_total{direction="storage_to_host"}`, st.PrefetchBytes)
		wantSample(t, m, `kvpool_prefix_hit_tokens_total{tier="storage"}`, st.StorageHitTokens)
		wantSample(t, m, `kvpool_storage_operation_errors_total{operation="put"}`, st.StorePutErrors)
		wantSample(t, m, `kvpool_storage_errors_total{kind="io"}`, st.StoreIOErrors)
	}
	mb := metricsOf(t, b)
	wantSample(t, mb, `kvpool_prefix_hit_tokens_total{tier="storage"}`, uint64(info.StorageHit))
	wantSample(t, mb, "kvpool_prefix_lookups_total", 1)
	wantSample(t, mb, "kvpool_prefix_lookup_tokens_total", uint64(len(prompt)))
}

func TestMetricsTextOfAPlainPool(t *testing.T) {
	p, err := kvpool.Open(`{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},` +
		`"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}`)
	must(t, err)
	prompt := tokenRange(3, 16)
	seq, _, err := p.Begin(prompt, "")
	must(t, err)
	_, err = p.SeqExtend([]uint64{seq}, []int64{16})
	must(t, err)
	must(t, p.Finish(seq, 16))
	m := metricsOf(t, p)
	if _, ok := m[`kvpool_capacity_tokens{tier="host"}`]; ok {
		t.Fatalf("a pool without a host tier has host samples")
	}
	wantSample(t, m, `kvpool_evictable_tokens{tier="device"}`, 16)
	evicted, err := p.Evict(4)
	must(t, err)
	if evicted < 4 {
		t.Fatalf("Evict(4) = %d", evicted)
	}
	m = metricsOf(t, p)
	wantSample(t, m, `kvpool_evicted_tokens_total{tier="device"}`, uint64(evicted))
	wantSample(t, m, `kvpool_evictable_tokens{tier="device"}`, uint64(16-evicted))
	must(t, p.Close())
	_, err = p.MetricsText()
	wantCode(t, err, kvpool.ErrInvalidArgument)
}
