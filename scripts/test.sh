#!/usr/bin/env bash
# The project's test command (README, .ci/run): install the build's packages,
# configure a fresh build with every optional part ON, build, run all tests
# except those labelled gpu; then the sanitizer stages (scripts/sanitize.sh):
# the C/C++ suite under ASan+UBSan, every libFuzzer target for a bounded time,
# and ThreadSanitizer. Works from a clean clone; any failure fails it.
#
# Environment:
#   KVPOOL_BUILD_DIR   build directory (default: build-test, relative to the repo)
#   KVPOOL_CMAKE_ARGS  extra configure arguments, appended last so they win
#                      (e.g. "-DKVPOOL_WITH_CUDA=OFF" or "-DKVPOOL_BUILD_GO=OFF")
#   KVPOOL_SANITIZERS  "all" (default), "address", "thread" or "none" (skip the
#                      sanitizer stages, for a quick local run)
#   KVPOOL_FUZZ_SECONDS, KVPOOL_SOAK_STEPS: see scripts/sanitize.sh
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
build_dir=${KVPOOL_BUILD_DIR:-build-test}
jobs=$(nproc)

timings=()
current=""
# Microseconds from bash's own clock (no bc or python on a fresh machine).
now() { echo "${EPOCHREALTIME/[.,]/}"; }
secs() { local us=$(($(now) - $1)); printf '%d.%d' $((us / 1000000)) $((us % 1000000 / 100000)); }
phase_start=0
begin() { current=$1; phase_start=$(now); echo; echo "=== $1"; }
end() { timings+=("$(printf '%-10s %8s s' "$current" "$(secs "$phase_start")")"); current=""; }
report() {
  local rc=$?
  echo
  echo "=== timings"
  if ((${#timings[@]} > 0)); then printf '  %s\n' "${timings[@]}"; fi
  if [[ -n $current ]]; then echo "  FAILED in phase '$current' after $(secs "$phase_start") s (exit $rc)"; fi
  printf '  %-10s %8s s\n' total "$(secs "$script_start")"
}
script_start=$(now)
trap report EXIT

begin setup
"$repo/scripts/setup.sh"
end

# CUDA is auto-detected by CMake from nvcc on PATH; the usual install is not on it.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

begin configure
# shellcheck source=common.sh
source "$repo/scripts/common.sh"
fresh_dir "$build_dir"
# shellcheck disable=SC2086  # KVPOOL_CMAKE_ARGS is a list of arguments
cmake -S "$repo" -B "$build_dir" \
  -DKVPOOL_BUILD_GO=ON -DKVPOOL_BUILD_JAVA=ON -DKVPOOL_BUILD_CSHARP=ON \
  -DKVPOOL_BUILD_DOCS=ON -DKVPOOL_BUILD_BENCHMARKS=ON -DKVPOOL_BUILD_EXAMPLES=ON \
  ${KVPOOL_CMAKE_ARGS:-}
grep -E '^KVPOOL_(WITH_CUDA|BUILD_[A-Z]+):' "$build_dir/CMakeCache.txt" | sed 's/^/  /'
end

begin build
cmake --build "$build_dir" -j "$jobs"
end

begin test
# --no-tests=error: a configuration that registers no tests must not pass.
ctest --test-dir "$build_dir" -LE gpu --output-on-failure --no-tests=error -j "$jobs"
end

sanitizers=${KVPOOL_SANITIZERS:-all}
case "$sanitizers" in
  none) ;;
  all)
    begin asan
    "$repo/scripts/sanitize.sh" address
    end
    begin tsan
    "$repo/scripts/sanitize.sh" thread
    end
    ;;
  address|thread)
    begin "$sanitizers"
    "$repo/scripts/sanitize.sh" "$sanitizers"
    end
    ;;
  *) echo "test.sh: KVPOOL_SANITIZERS must be all, address, thread or none" >&2; exit 2 ;;
esac
