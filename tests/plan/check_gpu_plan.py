#!/usr/bin/env python3
"""kvpool-plan --gpu against the spec's formulas, computed here independently.

Usage: check_gpu_plan.py KVPOOL_PLAN CONFIG_DIR TMP_DIR

For several model configs x GPUs x tensor-parallel sizes (and the override flags),
the tool's JSON is compared with SGLang's arithmetic as SGLANG_SEMANTICS.md
restates it: the server-args reserve (§6, --mem-fraction-static), the vision factor,
the model runner's budget and cell size (§1.13), the SWA split (§4.2), the mamba
share (§4.1) and the max_running_requests default. Then bad input: every case
must exit non-zero with a precise message and print nothing to stdout.
"""
import json
import math
import os
import subprocess
import sys

EXE, CONFIGS, TMP = sys.argv[1], sys.argv[2], sys.argv[3]
MIB = 1024.0 ** 2
GIB = 1024.0 ** 3
FAILURES = []

# nvidia-smi MiB (what the server args read) and CUDA GiB (what the model runner reads), as
# docs/services.md documents them.
GPUS = {"H100": (81559, 79.2), "H200": (143771, 139.8), "A100-80G": (81920, 80.0),
        "L40S": (46068, 46068 / 1024), "RTX-4090": (24564, 24564 / 1024)}
# Parameters (billions), checkpoint bits, vision tower (layers, hidden) as documented.
MODELS = {"meta-llama/Llama-3.1-8B-Instruct": (8.03, 16, None),
          "deepseek-ai/DeepSeek-V3": (671, 8, None),
          "deepseek-ai/DeepSeek-V3.2-Exp": (671, 8, None),
          "google/gemma-3-27b-it": (27.4, 16, (27, 1152)),
          "openai/gpt-oss-120b": (116.8, 4.25, None),
          "meta-llama/Llama-4-Scout-17B-16E": (109, 16, (34, 1408)),
          "Qwen/Qwen3-Next-80B-A3B-Instruct": (80, 16, None)}
ELEM = {"bf16": 2, "f16": 2, "f32": 4, "fp8_e4m3": 1, "fp8_e5m2": 1}


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("FAIL:", what)


def close(got, want, what, rel=1e-9, abs_=0.0):
    check(math.isclose(got, want, rel_tol=rel, abs_tol=abs_), f"{what}: got {got}, expected {want}")


def run(args):
    return subprocess.run([EXE] + args, capture_output=True, text=True)


# ---- SGLang's server args (spec §6) ----
def chunked_prefill(gpu_mib):
    if gpu_mib < 35 * 1024:
        return 2048
    if gpu_mib < 60 * 1024:
        return 4096
    return 8192 if gpu_mib < 160 * 1024 else 16384


def cuda_graph_max_bs(gpu_mib, tp):
    if gpu_mib < 20 * 1024:
        return 8
    if gpu_mib < 35 * 1024:
        return 24 if tp < 4 else 80
    if gpu_mib < 60 * 1024:
        return 32 if tp < 4 else 160
    return (256 if tp < 4 else 512) if gpu_mib < 160 * 1024 else 512


def vlm_factor(vision):
    if vision is None:
        return 1.0
    layers, hidden = vision
    ratio = layers * hidden ** 2 / (24 * 1024 ** 2)
    return 0.95 * min(1.05, max(0.8, 1 - 0.1 * (ratio - 1)))


def mem_fraction(gpu_mib, tp, cp, bs, vision):
    reserved = 512 + 1.5 * max(cp, 2048) + 2 * bs + tp * 1 / 8 * 1024
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    before = round((gpu_mib - reserved) / gpu_mib, 3)
    return reserved, before, before * vlm_factor(vision)


# ---- the model runner (spec §1.13, §4.1, §4.2) ----
def layer_kinds(model):
    n = model["num_layers"]
    if model["attention"] == "swa":
        pattern = model["swa_layer_pattern"]
        return [pattern[i % len(pattern)] == "F" for i in range(n)]
    if model["attention"] == "hybrid_linear":
        full = set(model["full_attention_layers"])
        return [i in full for i in range(n)]
    return [True] * n


def sglang_cell(cfg, tp):
    """SGLang's bytes per token and layer, and the layers that count."""
    model, elem = cfg["model"], ELEM[cfg["pool"]["kv_dtype"]]
    kind = model["attention"]
    if kind in ("mla", "nsa"):
        row = (model["kv_lora_rank"] + model["qk_rope_head_dim"]) * elem
        if kind == "nsa":
            row += 128 + 4
        return row, model["num_layers"]
    heads = max(1, model["kv_heads"] // tp)
    row = 2 * heads * model["head_dim"] * elem
    full = layer_kinds(model)
    return row, sum(full) if kind == "hybrid_linear" else len(full)


def default_requests(tokens, context):
    return min(max(int(tokens / context * 512), 2048), 4096)


def expected_pool(cfg, tp, budget):
    """SGLang's max_total_tokens, swa tokens, mamba slots and max_running_requests for a KV budget."""
    model, pool = cfg["model"], cfg["pool"]
    page, context = pool.get("page_size", 1), pool["max_context_len"]
    row, layers = sglang_cell(cfg, tp)
    cell = row * layers
    swa_tokens = slots = 0
    if model["attention"] == "hybrid_linear":
        # The config's shapes are one rank's at its own tp_size; the first dimension (conv channels,
        # SSM heads) is sharded over the ranks.
        m, config_tp = model["mamba"], cfg.get("parallel", {}).get("tp_size", 1)
        conv = math.prod(m["conv_shape"]) * config_tp // tp
        ssm = math.prod(m["ssm_shape"]) * config_tp // tp
        state = (len(layer_kinds(model)) - layers) * (conv * ELEM[m["conv_dtype"]] + ssm * ELEM[m["ssm_dtype"]])
        ratio = pool.get("mamba_full_memory_ratio", 0.9)
        share = budget * ratio / (1 + ratio)
        slots = math.floor(share / state)
        budget -= share
    tokens = math.floor(budget / cell)
    if model["attention"] == "swa":
        full_layers = sum(layer_kinds(model))
        sliding = layers - full_layers
        ratio = pool.get("swa_full_tokens_ratio", 0.8)
        full = math.floor(tokens * layers / (ratio * sliding + full_layers))
        swa_tokens = math.floor(full * ratio)
        tokens = full
    tokens -= tokens % page
    requests = default_requests(tokens, context)
    if model["attention"] == "hybrid_linear":
        radix = cfg.get("prefix_cache", {}).get("kind", "radix") == "radix"
        requests = min(requests, slots // (5 if radix else 1))
    return cell, tokens, swa_tokens, slots, requests


def check_case(config, args, gpu=None, memory_gib=None, tp=None, weights_gib=None, params=None, cp=None, bs=None,
               fraction=None, vision="table"):
    label = f"{config} {' '.join(args)}"
    result = run(["--json"] + args + [os.path.join(CONFIGS, config)])
    check(result.returncode == 0, f"{label}: exit {result.returncode}: {result.stderr.strip()}")
    if result.returncode != 0:
        return
    [got] = json.loads(result.stdout)
    with open(os.path.join(CONFIGS, config)) as f:
        cfg = json.load(f)
    name = cfg["model"]["name"]
    tp = tp or cfg.get("parallel", {}).get("tp_size", 1)
    gpu_mib, cuda_gib = GPUS[gpu] if gpu else (memory_gib * 1024, memory_gib)
    close(got["gpu_memory_mib"], gpu_mib, label + " gpu_memory_mib")
    close(got["cuda_total_bytes"], cuda_gib * GIB, label + " cuda_total_bytes", abs_=1)
    check(got["tp_size"] == tp, f"{label}: tp_size {got['tp_size']}, expected {tp}")
    table = MODELS.get(name)
    if weights_gib is not None:
        weights = weights_gib * GIB
    elif params is not None:
        weights = params[0] * 1e9 * params[1] / 8
    else:
        weights = table[0] * 1e9 * table[1] / 8
    close(got["weights_bytes"], weights, label + " weights_bytes", abs_=1)
    if vision == "table":
        vision = table[2] if table else None

    s = got["sglang"]
    cp_want = cp or chunked_prefill(gpu_mib)
    bs_want = bs or cuda_graph_max_bs(gpu_mib, tp)
    check(s["chunked_prefill_size"] == cp_want, f"{label}: chunked_prefill_size {s['chunked_prefill_size']}")
    check(s["cuda_graph_max_bs"] == bs_want, f"{label}: cuda_graph_max_bs {s['cuda_graph_max_bs']}")
    if fraction is None:
        reserved, before, fraction = mem_fraction(gpu_mib, tp, cp_want, bs_want, vision)
        close(s["reserved_mib"]["total"], reserved, label + " reserved_mib")
        parts = s["reserved_mib"]
        close(parts["constant"] + parts["activations"] + parts["cuda_graphs"] + parts["parallel"] +
              parts["floor_top_up"], reserved, label + " reserved parts add up")
        close(s["mem_fraction_static_before_vlm"], before, label + " fraction before vlm")
    close(s["mem_fraction_static"], fraction, label + " mem_fraction_static")
    budget = math.floor(fraction * cuda_gib * GIB - weights / tp)
    close(s["kv_budget_bytes"], budget, label + " kv_budget_bytes", abs_=1)
    budget = s["kv_budget_bytes"]  # the byte the tool rounded to, for the integer steps below
    cell, tokens, swa_tokens, slots, requests = expected_pool(cfg, tp, budget)
    for key, want in (("kv_bytes_per_token", cell), ("max_total_tokens", tokens), ("swa_tokens", swa_tokens),
                      ("mamba_slots", slots), ("max_running_requests", requests)):
        check(s[key] == want, f"{label}: sglang.{key} {s[key]}, expected {want}")

    # kvpool_plan() of the same budget, with the config's own settings.
    k, pool = got["kvpool"], cfg["pool"]
    packed = 0
    if cfg["model"]["attention"] == "nsa" and pool["kv_dtype"] == "fp8_e4m3":
        packed = (cfg["model"]["kv_lora_rank"] // 128 * 4 + cfg["model"]["qk_rope_head_dim"]) * cfg["model"]["num_layers"]
    check(k["kv_bytes_per_token"] == cell + packed, f"{label}: kvpool.kv_bytes_per_token {k['kv_bytes_per_token']}")
    if packed == 0 and cfg["model"]["attention"] not in ("swa", "hybrid_linear"):
        want = min(tokens, pool.get("max_total_tokens", tokens))
        want -= want % pool.get("page_size", 1)
        check(k["max_total_tokens"] == want, f"{label}: kvpool.max_total_tokens {k['max_total_tokens']}, want {want}")
    if packed:
        check(k["max_total_tokens"] < tokens, f"{label}: kvpool's packed fp8 rows should hold fewer tokens")
    if "max_running_requests" in pool:
        check(k["max_running_requests"] == pool["max_running_requests"], f"{label}: kvpool.max_running_requests")
    check(k["total_memory_bytes"] >= k["kv_memory_bytes"] > 0, f"{label}: kvpool memory")
    print(f"ok   {label}: fraction {s['mem_fraction_static']:.4f}, sglang {s['max_total_tokens']} tokens / "
          f"{s['max_running_requests']} requests, kvpool {k['max_total_tokens']} / {k['max_running_requests']}")


def expect_error(args, code, message):
    result = run(args)
    label = " ".join(args)
    check(result.returncode == code, f"{label}: exit {result.returncode}, expected {code}")
    check(message in result.stderr, f"{label}: stderr {result.stderr.strip()!r} lacks {message!r}")
    if code == 2:
        check(result.stdout == "", f"{label}: printed {result.stdout!r}")
    print(f"ok   {label}: {result.stderr.strip()}")


# ---- model configs x GPUs x tp ----
check_case("llama-3.1-8b.json", ["--gpu", "H100"], gpu="H100")
check_case("llama-3.1-8b.json", ["--gpu", "h200", "--tp", "2"], gpu="H200", tp=2)
check_case("llama-3.1-8b.json", ["--gpu", "RTX-4090"], gpu="RTX-4090")
check_case("llama-3.1-8b.json", ["--gpu", "rtx4090", "--tp", "4"], gpu="RTX-4090", tp=4)
check_case("llama-3.1-8b.json", ["--gpu", "L40S", "--tp", "2"], gpu="L40S", tp=2)
check_case("llama-3.1-8b.json", ["--gpu", "L40S", "--tp", "8"], gpu="L40S", tp=8)
check_case("deepseek-v3.json", ["--gpu", "H200", "--tp", "8"], gpu="H200", tp=8)
check_case("deepseek-v3.2-nsa.json", ["--gpu", "H200", "--tp", "8"], gpu="H200", tp=8)
check_case("gemma-3-27b.json", ["--gpu", "H100"], gpu="H100")
check_case("gemma-3-27b.json", ["--gpu", "A100-80G", "--tp", "2"], gpu="A100-80G", tp=2)
check_case("gpt-oss-120b.json", ["--gpu", "H100"], gpu="H100")
check_case("gpt-oss-120b.json", ["--gpu", "H200", "--tp", "2"], gpu="H200", tp=2)
check_case("llama-4-scout.json", ["--gpu", "H100"], gpu="H100")
check_case("llama-4-scout.json", ["--gpu", "H200", "--tp", "4"], gpu="H200", tp=4)
check_case("qwen3-next-80b.json", ["--gpu", "H200", "--tp", "2"], gpu="H200", tp=2)
check_case("qwen3-next-80b.json", ["--gpu", "H100", "--tp", "4"], gpu="H100", tp=4)
check_case("qwen3-next-80b.json", ["--gpu", "L40S", "--tp", "8"], gpu="L40S", tp=8)
# By hand, and each override.
check_case("tiny-cpu.json", ["--gpu-memory", "24", "--weights-gib", "1"], memory_gib=24, weights_gib=1)
check_case("llama-3.1-8b.json", ["--gpu-memory", "100", "--params", "8", "--weight-bits", "8"], memory_gib=100,
           params=(8, 8))
check_case("llama-3.1-8b.json", ["--gpu", "H100", "--chunked-prefill-size", "16384", "--cuda-graph-max-bs", "64"],
           gpu="H100", cp=16384, bs=64)
check_case("llama-3.1-8b.json", ["--gpu", "H100", "--mem-fraction-static", "0.7"], gpu="H100", fraction=0.7)
check_case("gemma-3-27b.json", ["--gpu", "H100", "--no-vision"], gpu="H100", vision=None)
check_case("gemma-3-27b.json", ["--gpu", "H100", "--tp", "2", "--vision", "48,2048"], gpu="H100", tp=2,
           vision=(48, 2048))

# Several configs: one object each, in order; text mode too.
paths = [os.path.join(CONFIGS, c) for c in ("llama-3.1-8b.json", "gemma-3-27b.json")]
result = run(["--json", "--gpu", "H100"] + paths)
objects = json.loads(result.stdout) if result.returncode == 0 else []
check([o["config"] for o in objects] == paths, f"two configs: {result.returncode} {result.stderr}")
result = run(["--gpu", "H100"] + paths)
check(result.returncode == 0 and result.stdout.count("mem_fraction_static") == 2, "text mode: " + result.stderr)

# ---- bad input ----
llama = os.path.join(CONFIGS, "llama-3.1-8b.json")
expect_error(["--gpu", "B200", llama], 2, 'unknown GPU "B200"')
expect_error(["--gpu", "", llama], 2, "unknown GPU")
for bad in ("0", "-8", "abc", "nan", "inf", "80GB"):
    expect_error(["--gpu-memory", bad, llama], 2, f'--gpu-memory: bad value "{bad}"')
for bad in ("0", "-1", "1.5", "5000", "two"):
    expect_error(["--gpu", "H100", "--tp", bad, llama], 2, f'--tp: bad value "{bad}"')
expect_error(["--gpu", "H100", "--mem-fraction-static", "1", llama], 2, "--mem-fraction-static: bad value")
expect_error(["--gpu", "H100", "--vision", "0,1024", llama], 2, "--vision: bad value")
expect_error(["--gpu", "H100", "--vision", "24,1024,1", llama], 2, "--vision: bad value")
expect_error(["--tp", "2", llama], 2, "GPU options need --gpu NAME or --gpu-memory GIB")
expect_error(["--gpu", "H100", "--gpu-memory", "80", llama], 2, "give one of them")
expect_error(["--gpu", "H100", "--weights-gib", "1", "--params", "8", llama], 2, "give one of them")
expect_error(["--gpu", "H100", "--weight-bits", "8", llama], 2, "--weight-bits needs --params")
expect_error(["--gpu", "H100", "--bogus", "1", llama], 2, "--bogus: unknown option")
expect_error([llama, "--gpu"], 2, "--gpu: unknown option or missing value")
expect_error(["--gpu", "H100", os.path.join(CONFIGS, "deepseek-v3.json")], 1, "the model does not fit")
expect_error(["--gpu", "H100", os.path.join(CONFIGS, "tiny-cpu.json")], 1, "not in the built-in weights table")
expect_error(["--gpu", "H100", "--tp", "3", llama], 1, "tp_size")
expect_error(["--gpu-memory", "2", "--weights-gib", "1", llama], 1, "reserve")
qwen = os.path.join(CONFIGS, "qwen3-next-80b.json")
expect_error(["--gpu", "H200", qwen], 1, "the model does not fit")
# The config's own 48 running requests need 240 mamba slots; an RTX 4090 at tp 8 leaves fewer.
expect_error(["--gpu", "RTX-4090", "--tp", "8", qwen], 1, "$.pool.max_running_requests: got 48, expected at most")
expect_error(["--gpu", "H200", "--tp", "3", qwen], 1, "does not split over 3 ranks")
os.makedirs(TMP, exist_ok=True)
broken = os.path.join(TMP, "broken.json")
with open(broken, "w") as f:
    f.write('{"model": {"name": ')
expect_error(["--gpu", "H100", broken], 1, "malformed JSON")
with open(llama) as f:
    cfg = json.load(f)
cfg["parallel"] = {"tp_size": 2.5}
odd_tp = os.path.join(TMP, "odd_tp.json")
with open(odd_tp, "w") as f:
    json.dump(cfg, f)
expect_error(["--gpu", "H100", odd_tp], 1, "$.parallel.tp_size: expected a whole number 1..4096")
expect_error(["--gpu", "H100", os.path.join(TMP, "missing.json")], 1, "cannot read")
# A failing config among good ones: exit 1, the others still printed as valid JSON.
result = run(["--json", "--gpu", "H100", llama, os.path.join(CONFIGS, "deepseek-v3.json"), llama])
check(result.returncode == 1 and len(json.loads(result.stdout)) == 2, "mixed configs: " + result.stdout[:200])

if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("all checks passed")
