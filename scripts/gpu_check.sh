#!/usr/bin/env bash
# The GPU correctness run (a machine with an NVIDIA GPU, nvcc and compute-sanitizer):
# builds the CUDA backend with the device failure-injection hook, runs the `gpu` label
# with KVPOOL_REQUIRE_GPU=1 (a missing device fails instead of skipping), then the GPU
# test program under compute-sanitizer's memcheck (with leak check), racecheck,
# initcheck and synccheck. Any error of any tool fails the script.
#
#   scripts/gpu_check.sh [build-dir] [log-dir] [tools...]
#
# Defaults: build-gpu, gpu-logs, "memcheck racecheck initcheck synccheck".
# Environment: CUDA_ARCH (default 90), KVPOOL_CMAKE_ARGS (extra configure arguments).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build-gpu}
logs=${2:-gpu-logs}
shift $(($# >= 2 ? 2 : $#))
tools=("$@")
((${#tools[@]} > 0)) || tools=(memcheck racecheck initcheck synccheck)
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
export KVPOOL_REQUIRE_GPU=1

if [[ ! -f $build/CMakeCache.txt ]]; then
  # shellcheck disable=SC2086  # KVPOOL_CMAKE_ARGS is a list of arguments
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    -DKVPOOL_WITH_CUDA=ON -DKVPOOL_FAULT_INJECTION=ON -DKVPOOL_BUILD_BENCHMARKS=OFF ${KVPOOL_CMAKE_ARGS:-} \
    > "$logs/configure.log" 2>&1 || { tail -n 40 "$logs/configure.log"; exit 1; }
fi
cmake --build "$build" -j "$(nproc)" > "$logs/build.log" 2>&1 || { grep -E 'error' "$logs/build.log" | head -n 40; exit 1; }

status=0
echo "=== ctest -L gpu"
ctest --test-dir "$build" -L gpu --output-on-failure > "$logs/ctest_gpu.log" 2>&1 || status=1
tail -n 4 "$logs/ctest_gpu.log"
grep -E 'injected failures' "$logs/ctest_gpu.log" || true

tests=$build/tests/gpu/kvpool_gpu_tests
for tool in "${tools[@]}"; do
  flags=(--tool "$tool" --error-exitcode 7)
  case "$tool" in
    memcheck) flags+=(--leak-check full) ;;
    racecheck) flags+=(--racecheck-report all) ;;
  esac
  echo "=== compute-sanitizer $tool"
  start=$SECONDS
  if compute-sanitizer "${flags[@]}" "$tests" > "$logs/sanitizer_$tool.log" 2>&1; then
    echo "    clean ($((SECONDS - start)) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitizer_$tool.log" | tail -n 1 || true)"
  else
    status=1
    echo "    FAILED ($((SECONDS - start)) s):"
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|FAILED|Invalid|Uninitialized|hazard|Barrier|COMPUTE-SANITIZER' "$logs/sanitizer_$tool.log" | head -n 20 || true
  fi
done
exit $status
