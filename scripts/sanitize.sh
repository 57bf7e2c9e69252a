#!/usr/bin/env bash
# The sanitizer and fuzzing stages of CI (called by scripts/test.sh; runs on its own too).
#
#   scripts/sanitize.sh address   clang, AddressSanitizer + UndefinedBehaviorSanitizer over the
#                                 whole non-GPU suite, bindings included (build-asan), then every
#                                 libFuzzer target for KVPOOL_FUZZ_SECONDS each over its seed corpus
#   scripts/sanitize.sh thread    clang, ThreadSanitizer over the `threads` label (build-tsan):
#                                 every test of threaded code carries that label
#   scripts/sanitize.sh all       both (the default)
#
# Every report halts the test that made it (-fno-sanitize-recover=all, halt_on_error=1), so a
# passing run is a clean run. The Go binding's tests link the sanitizer runtimes (go -asan);
# Java and C# preload the shared ASan runtime (CMakeLists.txt: KVPOOL_SANITIZER_PRELOAD_ENV).
# Not here: bindings.install (packaging, in the main stage) and go.kvpool.race (-race and
# -asan do not combine; the main stage runs it).
#
# Environment:
#   KVPOOL_ASAN_BUILD_DIR / KVPOOL_TSAN_BUILD_DIR   build directories (default build-asan, build-tsan)
#   KVPOOL_FUZZ_SECONDS   seconds per libFuzzer target (default 60; 0 skips the fuzzing)
#   KVPOOL_SOAK_STEPS     steps per soak workload (default: the soak test's own, 20,000)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
jobs=$(nproc)
what=${1:-all}
fuzz_seconds=${KVPOOL_FUZZ_SECONDS:-60}

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "sanitize.sh: $tool not found (scripts/setup.sh installs it)" >&2; exit 1; }
done

export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

# shellcheck source=common.sh
source "$repo/scripts/common.sh"

# configure <dir> <sanitizers> [cmake args...]: clang, no CUDA, no docs.
configure() {
  local dir=$1 sanitizers=$2
  shift 2
  fresh_dir "$dir"
  CC=clang CXX=clang++ cmake -S "$repo" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKVPOOL_WITH_CUDA=OFF -DKVPOOL_SANITIZE="$sanitizers" -DKVPOOL_BUILD_DOCS=OFF "$@"
}

address() {
  local dir=${KVPOOL_ASAN_BUILD_DIR:-build-asan}
  echo "=== ASan + UBSan: configure and build ($dir)"
  configure "$dir" address,undefined -DKVPOOL_BUILD_FUZZERS=ON -DKVPOOL_BUILD_BENCHMARKS=ON -DKVPOOL_BUILD_EXAMPLES=ON \
    -DKVPOOL_BUILD_GO=ON -DKVPOOL_BUILD_JAVA=ON -DKVPOOL_BUILD_CSHARP=ON
  cmake --build "$dir" -j "$jobs"
  echo "=== ASan + UBSan: the non-GPU suite, bindings included"
  ctest --test-dir "$dir" -LE gpu --output-on-failure --no-tests=error -j "$jobs"
  if ((fuzz_seconds > 0)); then
    echo "=== libFuzzer: ${fuzz_seconds} s per target"
    "$repo/scripts/fuzz.sh" "$dir" "$fuzz_seconds"
  fi
}

thread() {
  local dir=${KVPOOL_TSAN_BUILD_DIR:-build-tsan}
  echo "=== TSan: configure and build ($dir)"
  configure "$dir" thread -DKVPOOL_BUILD_FUZZERS=OFF -DKVPOOL_BUILD_BENCHMARKS=OFF -DKVPOOL_BUILD_EXAMPLES=OFF \
    -DKVPOOL_BUILD_GO=OFF -DKVPOOL_BUILD_JAVA=OFF -DKVPOOL_BUILD_CSHARP=OFF
  # Only the executables of the threads label (tests/CMakeLists.txt: kvpool_threads_suite).
  cmake --build "$dir" -j "$jobs" --target kvpool_threads_suite
  echo "=== TSan: the threads label"
  ctest --test-dir "$dir" -L threads --output-on-failure --no-tests=error -j "$jobs"
}

case "$what" in
  address) address ;;
  thread) thread ;;
  all) address; thread ;;
  *) echo "usage: $0 [address|thread|all]" >&2; exit 2 ;;
esac
