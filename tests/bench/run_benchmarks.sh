#!/usr/bin/env bash
# Builds the benchmarks (Release) and runs them with repetitions; writes one
# JSON report per binary and a summary table of medians.
#
#   tests/bench/run_benchmarks.sh BUILD_DIR OUT_DIR [extra cmake configure args...]
#
# Environment:
#   KVBENCH_REPETITIONS  repetitions per benchmark (default 5); medians are reported
#   KVBENCH_MIN_TIME     --benchmark_min_time per repetition, seconds (default 0.2)
#   KVBENCH_WARMUP       --benchmark_min_warmup_time, seconds (default 0.1)
#   KVBENCH_FILTER       --benchmark_filter regex (default: all)
#   KVBENCH_BINARIES     which binaries (default: "bench_alloc bench_set_kv bench_radix")
#   KVBENCH_REPLAY       1 (default): also time examples/replay (kvpool-replay) on the trace,
#                        REPETITIONS runs per row, when that target exists; 0: skip it
#   KVBENCH_TRACE        the trace (default: examples/data/synthetic_trace.jsonl)
# Example: tests/bench/run_benchmarks.sh /tmp/benchbuild /tmp/benchout -DKVPOOL_WITH_CUDA=OFF
set -euo pipefail

if (($# < 2)); then
  sed -n '2,17p' "$0" >&2
  exit 2
fi
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$1
out=$2
shift 2
reps=${KVBENCH_REPETITIONS:-5}
min_time=${KVBENCH_MIN_TIME:-0.2}
warmup=${KVBENCH_WARMUP:-0.1}
filter=${KVBENCH_FILTER:-.}
binaries=${KVBENCH_BINARIES:-bench_alloc bench_set_kv bench_radix}

cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKVPOOL_BUILD_BENCHMARKS=ON "$@"
# shellcheck disable=SC2086  # a list of target names
cmake --build "$build" -j "$(nproc)" --target $binaries

mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "host: $(uname -srm), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "settings: repetitions=$reps min_time=$min_time warmup=$warmup filter=$filter"
} | tee "$out/machine.txt"

jsons=()
for b in $binaries; do
  exe=$build/tests/bench/$b
  json=$out/$b.json
  echo "=== $b"
  "$exe" --benchmark_repetitions="$reps" --benchmark_min_time="$min_time" \
    --benchmark_min_warmup_time="$warmup" --benchmark_filter="$filter" \
    --benchmark_display_aggregates_only=true \
    --benchmark_out="$json" --benchmark_out_format=json
  jsons+=("$json")
done

# Full trace replay by the example program (its --json line per run; wall_seconds spans pool
# creation to destruction). Rows: the first 1000 requests (what bench_radix's BM_Replay/decode
# replays) and the whole trace, both at page 16, 4M tokens (LRU), concurrency 1.
trace=${KVBENCH_TRACE:-$repo/examples/data/synthetic_trace.jsonl}
if [[ ${KVBENCH_REPLAY:-1} == 1 ]]; then
  if cmake --build "$build" -j "$(nproc)" --target kvpool-replay >"$out/kvpool-replay.build.log" 2>&1 && [[ -f $trace ]]; then
    replay=$(find "$build" -name kvpool-replay -type f -perm -u+x | head -n 1)
    replay_json=$out/kvpool-replay.jsonl
    : >"$replay_json"
    echo "=== kvpool-replay ($replay, $reps runs per row)"
    for row in "first1000:--max-requests 1000" "all:"; do
      name=${row%%:*}
      for ((i = 0; i < reps; i++)); do
        # shellcheck disable=SC2086  # the row's extra options
        "$replay" --trace "$trace" --page-size 16 --capacity-tokens 4194304 --concurrency 1 ${row#*:} \
          --json --no-progress | sed "s/^{/{\"row\": \"$name\", /" >>"$replay_json"
      done
    done
    jsons+=("$replay_json")
  else
    echo "=== kvpool-replay: skipped (target kvpool-replay does not build here, see" \
      "$out/kvpool-replay.build.log, or no trace at $trace)"
  fi
fi

echo
python3 "$repo/tests/bench/summarize.py" "${jsons[@]}" | tee "$out/summary.txt"
