# Shell helpers shared by scripts/test.sh and scripts/sanitize.sh (sourced, not run).

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
