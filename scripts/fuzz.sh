#!/usr/bin/env bash
# Runs every libFuzzer target of a build for a bounded time (the CI fuzz stage of
# scripts/sanitize.sh; also the way to make a long run).
#
#   scripts/fuzz.sh <build-dir> [seconds-per-target] [extra libFuzzer flags...]
#
# A target tests/fuzz/kvpool_<name>_fuzzer[_<family>] starts from a copy of its seed corpus
# (tests/fuzz/corpus/<seed dir>, see seed_dirs below) in <build-dir>/fuzz-work/, so the
# repository's seeds are never rewritten. A finding stops the run: the input is kept under
# <build-dir>/fuzz-artifacts/ and the script fails. Long runs pass e.g. -runs=10000000
# (docs/reliability.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=common.sh
source "$repo/scripts/common.sh"
build=${1:?usage: $0 <build-dir> [seconds] [libFuzzer flags...]}
seconds=${2:-60}
shift $(($# >= 2 ? 2 : 1))
build=$(cd "$build" && pwd)

mapfile -t targets < <(fuzz_targets "$build")
((${#targets[@]} > 0 && ${#targets[0]} > 0)) || exit 1

mkdir -p "$build/fuzz-artifacts"
for target in "${targets[@]}"; do
  name=$(basename "$target")
  work=$build/fuzz-work/$name
  rm -rf "$work"
  mkdir -p "$work"
  for seed in $(fuzz_seeds "$repo" "$name"); do
    if [[ -d $seed ]]; then cp -r "$seed"/. "$work"/; else cp "$seed" "$work"/; fi
  done
  flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
         -artifact_prefix="$build/fuzz-artifacts/$name-")
  dict=$repo/tests/fuzz/${name#kvpool_}.dict
  [[ -f $dict ]] && flags+=(-dict="$dict")
  echo "--- $name: ${seconds} s from $(find "$work" -type f | wc -l) seeds"
  if ! "$target" "${flags[@]}" "$@" "$work" > "$build/fuzz-work/$name.log" 2>&1; then
    tail -n 60 "$build/fuzz-work/$name.log"
    echo "fuzz.sh: $name found a problem; the input is in $build/fuzz-artifacts/" >&2
    exit 1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|Done [0-9]+ runs' "$build/fuzz-work/$name.log" | sed 's/^/    /'
done
