#!/usr/bin/env bash
# A long fuzz run: every libFuzzer target of a build at once, each with several
# worker processes sharing one corpus, for a fixed time; then a table of the
# executions per target (summed over its workers) and the findings.
#
#   scripts/fuzz_long.sh <build-dir> <seconds> <workers> <out-dir> [corpus-dir|""] [libFuzzer flags...]
#
# <workers> is a count for every target, optionally followed by per-target counts
# ("4,swa=5,mla=3,config=0"; the key is the name after kvpool_ / kvpool_api_; 0 skips
# the target), so slower targets can get more processes.
#
# <out-dir>/<target>/corpus starts from the repository's seeds plus, when given,
# <corpus-dir>/<target>/ (the corpus a previous long run left), so a run can be
# continued on another machine. Workers write <out-dir>/<target>/fuzz-<n>.log;
# findings land in <out-dir>/<target>/artifacts/. The table goes to stdout and
# <out-dir>/summary.md. Exit status 1 when any target found something.
#
# The flags are the ones docs/reliability.md records: -entropic=0 (plain scheduling
# ran about 1.4x faster on these targets), -max_len=512, a 10 s timeout per input.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=common.sh
source "$repo/scripts/common.sh"
usage="usage: $0 <build-dir> <seconds> <workers> <out-dir> [corpus-dir] [libFuzzer flags...]"
build=$(cd "${1:?$usage}" && pwd)
seconds=${2:?$usage}
workers=${3:?$usage}
out=${4:?$usage}
previous=${5:-}
shift $(($# >= 5 ? 5 : 4))
extra=("$@")  # e.g. -max_len=128; later flags win over the defaults below
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The number of workers for a target, from the <workers> argument.
workers_for() {
  local key=${1#kvpool_} n=${workers%%,*} pair
  key=${key#api_}
  key=${key%_fuzzer}
  key=${key#fuzzer_}
  IFS=, read -ra pairs <<< "${workers#*,}"
  [[ $workers == *,* ]] || pairs=()
  for pair in "${pairs[@]}"; do
    [[ ${pair%%=*} == "$key" ]] && n=${pair#*=}
  done
  echo "$n"
}

mapfile -t targets < <(fuzz_targets "$build")
((${#targets[@]} > 0 && ${#targets[0]} > 0)) || exit 1

active=()
for target in "${targets[@]}"; do
  name=$(basename "$target")
  n=$(workers_for "$name")
  ((n > 0)) || continue
  active+=("$target")
  dir=$out/$name
  mkdir -p "$dir/corpus" "$dir/artifacts"
  for seed in $(fuzz_seeds "$repo" "$name"); do
    if [[ -d $seed ]]; then cp -r "$seed"/. "$dir/corpus"/; else cp "$seed" "$dir/corpus"/; fi
  done
  if [[ -n $previous && -d $previous/$name ]]; then cp -r "$previous/$name"/. "$dir/corpus"/; fi
  # -jobs/-workers: W independent processes on one shared corpus folder, each for the whole time.
  (cd "$dir" && exec "$target" -entropic=0 -max_len=512 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
     -max_total_time="$seconds" -jobs="$n" -workers="$n" -artifact_prefix="$dir/artifacts/" \
     "${extra[@]}" corpus > "$dir/driver.log" 2>&1) &
done
wait || true

status=0
{
  echo "| target | workers | seconds | executions | corpus files | findings |"
  echo "|---|---|---|---|---|---|"
  for target in "${active[@]}"; do
    name=$(basename "$target")
    dir=$out/$name
    execs=$(cat "$dir"/fuzz-*.log 2>/dev/null | awk -F: '/^stat::number_of_executed_units/ {s += $NF} END {print s + 0}')
    findings=$(find "$dir/artifacts" -type f | wc -l)
    ((findings == 0)) || status=1
    echo "| \`$name\` | $(workers_for "$name") | $seconds | $execs | $(find "$dir/corpus" -type f | wc -l) | $findings |"
  done
} | tee "$out/summary.md"
exit $status
