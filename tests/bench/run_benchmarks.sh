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
#   KVBENCH_BINARIES     which binaries (default: "bench_alloc bench_set_kv")
# Example: tests/bench/run_benchmarks.sh /tmp/benchbuild /tmp/benchout -DKVPOOL_WITH_CUDA=OFF
set -euo pipefail

if (($# < 2)); then
  sed -n '2,14p' "$0" >&2
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
binaries=${KVBENCH_BINARIES:-bench_alloc bench_set_kv}

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

echo
python3 "$repo/tests/bench/summarize.py" "${jsons[@]}" | tee "$out/summary.txt"
