#!/usr/bin/env python3
"""Prints a compact table of medians from Google Benchmark JSON reports.

    summarize.py REPORT.json...

Per benchmark: the median real time (manual time for rows measured with
UseManualTime), min..max over the repetitions, items/s or bytes/s, and
  * set_kv rows: the ratio of their bytes/s to the memcpy row of the same byte
    count in the same reports (BM_Memcpy/bytes:N);
  * allocator rows with the SGLang anchor's workload: SGLang's host-call median
    on an H100 machine (GPU allocator: Python + torch + Triton launch, no sync),
    from /work/shared/anchors/SGLANG_H100.md, run2. CONTEXT ONLY: a different
    machine and a different design (GPU tensors); not a comparison of equals.
With one repetition (no aggregates) the single measurement is shown.
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


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rows, order, context = load(argv[1:])
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
        for key in ("tokens_per_call", "slots_per_call", "pages_per_call", "new_pages_per_call"):
            if key in m:
                notes.append(f"{key}={m[key]:.4g}")
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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
