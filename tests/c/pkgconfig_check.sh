#!/usr/bin/env bash
# c.pkgconfig: install the build into a staging prefix and use it the two ways
# a downstream project would, pkg-config and find_package(kvpool), then move
# the prefix elsewhere and do it again (both package files must be relocatable).
#
#   pkgconfig_check.sh BUILD_DIR SOURCE_DIR WORK_DIR VERSION CC CMAKE
#
# SOURCE_DIR is tests/c (consumer.c and find_package/ live there).
# KVPOOL_CONSUMER_FLAGS (environment): extra compile+link flags, e.g. the
# -fsanitize= list when the library itself was built with sanitizers;
# KVPOOL_CONSUMER_LINK_FLAGS: extra link-only flags (clang's C++ sanitizer runtime).
set -euo pipefail

build_dir=$1 src_dir=$2 work=$3 version=$4 cc=$5 cmake=$6
read -r -a extra_flags <<<"${KVPOOL_CONSUMER_FLAGS:-}"
read -r -a link_flags <<<"${KVPOOL_CONSUMER_LINK_FLAGS:-}"
config=$src_dir/../../examples/configs/tiny-cpu.json

fail() { echo "pkgconfig_check: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
"$cmake" --install "$build_dir" --prefix "$work/stage" >"$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install"; }

# Where kvpool.pc went depends on GNUInstallDirs (lib, lib64 or lib/<multiarch>).
pc=$(find "$work/stage" -name kvpool.pc -path '*/pkgconfig/*' | head -n1)
[[ -n $pc ]] || fail "no kvpool.pc installed under $work/stage"
pc_rel=${pc#"$work/stage/"}

# Resolve the library that a binary actually loads.
loaded_lib() { ldd "$1" | awk '$1 ~ /^libkvpool\.so/ { print $3 }'; }

# Checks one installed prefix; $1 is its current location.
check_prefix() {
  local prefix=$1 out pcdir libdir incdir lib
  out=$work/out-$(basename "$prefix")
  pcdir=$(dirname "$prefix/$pc_rel")
  mkdir -p "$out"

  # Only the staged .pc must be visible: no system paths, no -uninstalled.pc.
  export PKG_CONFIG_LIBDIR=$pcdir PKG_CONFIG_PATH='' PKG_CONFIG_DISABLE_UNINSTALLED=1
  [[ $(pkg-config --modversion kvpool) == "$version" ]] || fail "pkg-config --modversion is not $version"
  libdir=$(pkg-config --variable=libdir kvpool)
  incdir=$(pkg-config --variable=includedir kvpool)
  # ${pcfiledir} makes these follow the prefix wherever it is.
  [[ $(realpath "$libdir") == "$(realpath "$prefix")"/* ]] || fail "libdir $libdir is outside $prefix"
  [[ -e $libdir/libkvpool.so.0 ]] || fail "no libkvpool.so.0 in $libdir"
  [[ -f $incdir/kvpool/kvpool.h ]] || fail "no kvpool/kvpool.h in $incdir"

  # shellcheck disable=SC2046  # pkg-config output is meant to be split
  "$cc" -std=c99 -Wall -Wextra -Werror "${extra_flags[@]}" -o "$out/consumer_pc" "$src_dir/consumer.c" \
    $(pkg-config --cflags --libs kvpool) "${link_flags[@]}" -Wl,-rpath,"$libdir" || fail "compiling with pkg-config flags"
  lib=$(loaded_lib "$out/consumer_pc")
  [[ $(realpath "$lib") == "$(realpath "$libdir")"/* ]] || fail "consumer_pc loads $lib, not the one in $libdir"
  "$out/consumer_pc" "$config" || fail "consumer built with pkg-config"

  # A fresh CMake project that only knows the prefix.
  "$cmake" -S "$src_dir/find_package" -B "$out/fp" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_PREFIX_PATH="$prefix" -DKVPOOL_EXPECTED_PREFIX="$prefix" \
    -DCMAKE_C_FLAGS="${extra_flags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${extra_flags[*]} ${link_flags[*]}" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
    >"$out/fp-configure.log" 2>&1 || { cat "$out/fp-configure.log"; fail "find_package project configure"; }
  "$cmake" --build "$out/fp" >"$out/fp-build.log" 2>&1 ||
    { cat "$out/fp-build.log"; fail "find_package project build"; }
  lib=$(loaded_lib "$out/fp/consumer_cmake")
  [[ $(realpath "$lib") == "$(realpath "$prefix")"/* ]] || fail "consumer_cmake loads $lib, not the one in $prefix"
  "$out/fp/consumer_cmake" "$config" || fail "consumer built with find_package"
  echo "pkgconfig_check: prefix $prefix OK"
}

check_prefix "$work/stage"
# Relocation: move (not copy) so that nothing can still point at the old path.
mkdir -p "$work/moved"
mv "$work/stage" "$work/moved/prefix"
check_prefix "$work/moved/prefix"
echo "pkgconfig_check: all checks passed"
