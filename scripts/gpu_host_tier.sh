#!/usr/bin/env bash
# The host tier's CUDA transfers on a GPU machine: builds the parity test, the GPU
# test suite and gpu_bench for sm_90 (Release), runs the parity test and the suite's
# HostTier tests (pools, copies in flight) with KVPOOL_REQUIRE_GPU=1, then `gpu_bench --host-tier`, then the
# parity test under compute-sanitizer memcheck and racecheck.
#
#   scripts/gpu_host_tier.sh [build-dir] [log-dir]
#
# Environment: CUDA_ARCH (default 90), KVPOOL_CMAKE_ARGS (extra configure arguments,
# e.g. -DCMAKE_PREFIX_PATH=... where cJSON and GTest are not installed system-wide),
# SKIP_BENCH=1, SKIP_SANITIZER=1. Logs: test.log, pool.log, bench.jsonl, bench.err,
# memcheck.log, racecheck.log.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build-host-tier}
logs=${2:-host-tier-logs}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
export KVPOOL_REQUIRE_GPU=1

# shellcheck disable=SC2086  # KVPOOL_CMAKE_ARGS is a list of arguments
cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
  -DKVPOOL_WITH_CUDA=ON -DKVPOOL_BUILD_BENCHMARKS=OFF -DKVPOOL_BUILD_EXAMPLES=OFF ${KVPOOL_CMAKE_ARGS:-} \
  > "$logs/configure.log" 2>&1 || { tail -n 40 "$logs/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target kvpool_gpu_host_tier_tests kvpool_gpu_tests gpu_bench > "$logs/build.log" 2>&1 ||
  { grep -E 'error' "$logs/build.log" | head -n 40; exit 1; }

status=0
tests=$build/tests/gpu/kvpool_gpu_host_tier_tests
echo "=== parity test"
"$tests" > "$logs/test.log" 2>&1 || status=1
grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|Failure|seed|stale bytes' "$logs/test.log" | head -n 30
echo "=== kvpool_gpu_tests --gtest_filter='*HostTier*'"
"$build/tests/gpu/kvpool_gpu_tests" --gtest_filter='*HostTier*' > "$logs/pool.log" 2>&1 || status=1
grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|Failure' "$logs/pool.log" | head -n 30
if [[ ${SKIP_BENCH:-0} != 1 ]]; then
  echo "=== gpu_bench --host-tier"
  "$build/tests/gpu/gpu_bench" --host-tier > "$logs/bench.jsonl" 2> "$logs/bench.err" || status=1
  tail -n 5 "$logs/bench.err"
fi
if [[ ${SKIP_SANITIZER:-0} != 1 ]]; then
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer $tool"
    extra=()
    [[ $tool == memcheck ]] && extra=(--leak-check full)
    if compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 7 "$tests" > "$logs/$tool.log" 2>&1; then
      echo "    clean: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" | tail -n 1)"
    else
      status=1
      grep -E 'SUMMARY|FAILED|Invalid|hazard|COMPUTE-SANITIZER' "$logs/$tool.log" | head -n 20
    fi
  done
fi
exit $status
