# Shell helpers shared by scripts/test.sh, sanitize.sh, fuzz.sh and fuzz_long.sh (sourced, not run).

# fresh_dir <dir>: an empty build directory, but never deletes something that is not
# a CMake build directory.
fresh_dir() {
  local dir=$1
  if [[ -e $dir ]]; then
    if [[ -f $dir/CMakeCache.txt || -z $(ls -A "$dir") ]]; then
      rm -rf "$dir"
    else
      echo "${0##*/}: $dir exists and is not a CMake build directory; not deleting it" >&2
      exit 1
    fi
  fi
}

# fuzz_seeds <repo> <target-name>: the seed folders or files of a libFuzzer target.
fuzz_seeds() {
  local corpus=$1/tests/fuzz/corpus
  case "$2" in
    kvpool_config_fuzzer) echo "$corpus"/*.json "$1"/examples/configs/*.json ;;
    kvpool_api_fuzzer_*) echo "$corpus/api_${2#kvpool_api_fuzzer_}" ;;
    *) echo "${0##*/}: no seed corpus known for $2" >&2; return 1 ;;
  esac
}

# fuzz_targets <build-dir>: the libFuzzer binaries of a build, one per line (none: fails).
fuzz_targets() {
  local found
  found=$(find "$1/tests/fuzz" -maxdepth 1 -type f -perm -u+x -name 'kvpool_*_fuzzer*' | sort)
  if [[ -z $found ]]; then
    echo "${0##*/}: no libFuzzer targets in $1/tests/fuzz (configure with -DKVPOOL_BUILD_FUZZERS=ON and clang)" >&2
    return 1
  fi
  echo "$found"
}
