#!/usr/bin/env python3
"""Prints a compact table of medians from Google Benchmark JSON reports.

    summarize.py REPORT.json... [kvpool-replay.jsonl]

Per benchmark: the median real time (manual time for rows measured with
UseManualTime), min..max over the repetitions, items/s or bytes/s, and
  * set_kv rows: the ratio of their bytes/s to the memcpy row of the same byte
    count in the same reports (BM_Memcpy/bytes:N);
  * allocator rows with the SGLang anchor's workload: SGLang's host-call median
    on an H100 machine (GPU allocator: Python + torch + Triton launch, no sync),
    from /work/shared/anchors/SGLANG_H100.md, run2. CONTEXT ONLY: a different
    machine and a different design (GPU tensors); not a comparison of equals.
  * BM_RadixAnchor rows (SGLang's RadixCache workload): the same anchor's
    RadixCache medians (Python tree, values on cuda; the note gives CPU values).
With one repetition (no aggregates) the single measurement is shown.
A .jsonl argument holds kvpool-replay --json lines (run_benchmarks.sh adds a
"row" key); they get their own table: median requests/s and prompt tokens/s.
"""
import json
import sys

# SGLang H100 host-call medians (us), SGLANG_H100.md run2 (bold figures).
SGLANG_H100_HOST_US = {
    "BM_PagedExtend/anchor/page:16/bs:1": (65.1, "alloc_extend"),
    "BM_PagedExtend/anchor/page:16/bs:32": (80.6, "alloc_extend"),
    "BM_PagedExtend/anchor/page:16/bs:256": (80.9, "alloc_extend"),
    "BM_PagedExtend/anchor/page:64/bs:1": (74.2, "alloc_extend"),
    "BM_PagedExtend/anchor/page:64/bs:32": (78.3, "alloc_extend"),
    "BM_PagedExtend/anchor/page:64/bs:256": (78.3, "alloc_extend"),
    "BM_PagedFree/anchor/page:16/bs:1": (63.8, "free"),
    "BM_PagedFree/anchor/page:16/bs:32": (191.0, "free"),
    "BM_PagedFree/anchor/page:16/bs:256": (185.0, "free"),
    "BM_PagedFree/anchor/page:64/bs:1": (89.3, "free"),
    "BM_PagedFree/anchor/page:64/bs:32": (184.0, "free"),
    "BM_PagedFree/anchor/page:64/bs:256": (179.0, "free"),
    "BM_PagedDecode/page:16/bs:1": (74.8, "alloc_decode"),
    "BM_PagedDecode/page:16/bs:64": (124.0, "alloc_decode"),
    "BM_PagedDecode/page:16/bs:256": (128.0, "alloc_decode"),
    "BM_PagedDecode/page:16/bs:1024": (62.6, "alloc_decode"),
    "BM_PagedDecode/page:64/bs:1": (45.3, "alloc_decode"),
    "BM_PagedDecode/page:64/bs:64": (90.1, "alloc_decode"),
    "BM_PagedDecode/page:64/bs:256": (58.0, "alloc_decode"),
    "BM_PagedDecode/page:64/bs:1024": (64.6, "alloc_decode"),
    # alloc(n) + free(idx) host calls, summed (6.12+11.2, 6.04+11.1, 6.01+11.2).
    "BM_TokenAllocFree/n:1": (17.3, "alloc(n)+free(idx)"),
    "BM_TokenAllocFree/n:128": (17.1, "alloc(n)+free(idx)"),
    "BM_TokenAllocFree/n:8192": (17.2, "alloc(n)+free(idx)"),
    # RadixCache (section 3) with its values on cuda (the real configuration); the
    # label gives the same row with CPU values (pure tree + CPU tensor cost).
    "BM_RadixAnchor/match_full/page:1": (32.0, "match_prefix; cpu values 22.1 us"),
    "BM_RadixAnchor/match_full/page:16": (34.9, "match_prefix; cpu values 25.6 us"),
    "BM_RadixAnchor/match_prompt/page:1": (24.1, "match_prefix; cpu values 12.5 us"),
    "BM_RadixAnchor/match_prompt/page:16": (27.3, "match_prefix; cpu values 15.4 us"),
    "BM_RadixAnchor/insert_leaf/page:1": (35.3, "insert; cpu values 22.3 us"),
    "BM_RadixAnchor/insert_leaf/page:16": (43.4, "insert; cpu values 30.5 us"),
    "BM_RadixAnchor/insert_cached/page:1": (25.7, "insert; cpu values 21.1 us"),
    "BM_RadixAnchor/insert_cached/page:16": (28.3, "insert; cpu values 24.7 us"),
    "BM_RadixAnchor/evict_10000/page:1": (420.0, "evict; cpu values 17 ms"),
    "BM_RadixAnchor/evict_10000/page:16": (1200.0, "evict; cpu values 1.09 ms"),
}

TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def base_name(name):
    for suffix in ("/manual_time", "/real_time"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def rate(value, unit):
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g} {prefix}{unit}/s"
    return f"{value:.3g} {unit}/s"


def fmt_us(us):
    if us >= 1000:
        return f"{us / 1000:.3g} ms"
    if us < 1:
        return f"{us * 1000:.3g} ns"
    return f"{us:.3g} us"


def load(paths):
    rows = {}  # run_name -> {"median": b, "min": b, "max": b, "single": b, "error": msg}
    order = []
    context = None
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        context = context or doc.get("context", {})
        for b in doc.get("benchmarks", []):
            run = b.get("run_name", b["name"])
            if run not in rows:
                rows[run] = {}
                order.append(run)
            if b.get("error_occurred"):
                rows[run]["error"] = b.get("error_message", "error")
                continue
            if b.get("run_type") == "aggregate":
                rows[run][b.get("aggregate_name")] = b
            else:
                rows[run].setdefault("single", b)
    return rows, order, context


def median(values):
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def print_replay(path):
    """kvpool-replay --json lines, grouped by their "row" key."""
    runs = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                doc = json.loads(line)
                runs.setdefault(doc.get("row", "?"), []).append(doc)
    if not runs:
        return
    print()
    print(f"kvpool-replay ({path}): wall_seconds spans pool creation to destruction; median [min..max] of the runs")
    header = ("row", "runs", "requests", "wall", "requests/s", "prompt tokens/s", "token hit", "notes")
    lines = []
    for row, docs in runs.items():
        walls = [d["wall_seconds"] for d in docs]
        req_s = [d["requests"] / d["wall_seconds"] for d in docs if d["wall_seconds"] > 0]
        tok_s = [d["input_tokens"] / d["wall_seconds"] for d in docs if d["wall_seconds"] > 0]
        d0 = docs[0]
        lines.append((row, str(len(docs)), str(d0["requests"]),
                      f"{median(walls):.3g} s [{min(walls):.3g}..{max(walls):.3g}]",
                      rate(median(req_s), "req") if req_s else "-",
                      rate(median(tok_s), "tok") if tok_s else "-",
                      f"{d0['token_hit_ratio']:.4f}",
                      f"page {d0['page_size']}, capacity {d0['capacity_tokens']}, {d0['policy']}, concurrency "
                      f"{d0['concurrency']}, {d0['decode_tokens']} decode tokens, check {d0.get('check', '?')}"))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    print(fmt.format(*header))
    print(fmt.format(*("-" * w for w in widths[:-1]), "-" * len(header[-1])))
    for l in lines:
        print(fmt.format(*l))


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    replays = [p for p in argv[1:] if p.endswith(".jsonl")]
    rows, order, context = load([p for p in argv[1:] if not p.endswith(".jsonl")])
    if context:
        print(f"# host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs @ "
              f"{context.get('mhz_per_cpu', '?')} MHz, load avg {context.get('load_avg', '?')}, "
              f"libbenchmark build {context.get('library_build_type', '?')}")

    def stat(run, key):
        r = rows[run]
        return r.get(key) or (r.get("single") if key == "median" else None)

    # memcpy reference: bytes/s by byte count
    memcpy = {}
    for run in order:
        m = stat(run, "median")
        if m and base_name(run).startswith("BM_Memcpy/"):
            memcpy[int(m.get("bytes_per_call", 0))] = m.get("bytes_per_second", 0.0)

    header = ("benchmark", "median", "min..max", "throughput", "SGLang H100 host call*", "notes")
    lines = []
    for run in order:
        r = rows[run]
        name = base_name(run)
        if "error" in r:
            lines.append((name, "-", "-", "-", "-", "ERROR: " + r["error"]))
            continue
        m = stat(run, "median")
        if m is None:
            continue
        scale = TO_US[m.get("time_unit", "ns")]
        med = fmt_us(m["real_time"] * scale)
        lo, hi = stat(run, "min"), stat(run, "max")
        spread = f"{fmt_us(lo['real_time'] * scale)}..{fmt_us(hi['real_time'] * scale)}" if lo and hi else "-"
        if "bytes_per_second" in m:
            thr = rate(m["bytes_per_second"], "B")
        elif "items_per_second" in m:
            thr = rate(m["items_per_second"], "item")
        else:
            thr = "-"
        notes = []
        for key in ("tokens_per_call", "slots_per_call", "pages_per_call", "new_pages_per_call", "nodes_per_call",
                    "hit_ratio"):
            if key in m:
                notes.append(f"{key}={m[key]:.4g}")
        for key, unit in (("prompt_tokens_per_second", "prompt tok"), ("decode_steps_per_second", "decode step")):
            if key in m:
                notes.append(rate(m[key], unit))
        if name.startswith("BM_SetKV/"):
            ref = memcpy.get(int(m.get("bytes_per_call", -1)))
            if ref:
                notes.append(f"{m['bytes_per_second'] / ref:.2f}x memcpy ({rate(ref, 'B')})")
        anchor = SGLANG_H100_HOST_US.get(name)
        sgl = f"{anchor[0]:g} us ({anchor[1]})" if anchor else ""
        lines.append((name, med, spread, thr, sgl, "; ".join(notes)))

    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    print(fmt.format(*header))
    print(fmt.format(*("-" * w for w in widths[:-1]), "-" * len(header[-1])))
    for l in lines:
        print(fmt.format(*l))
    print("* SGLang's GPU allocator on an H100 host (SGLANG_H100.md, run2 median): Python + torch + Triton launch,")
    print("  no sync (free: incl. its torch.unique sync). CONTEXT ONLY: other machine, other design; not comparable.")
    print("  BM_RadixAnchor rows: SGLang's Python RadixCache on that host (values on cuda; cpu values in the note).")
    for path in replays:
        print_replay(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
