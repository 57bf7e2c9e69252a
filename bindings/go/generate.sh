#!/bin/sh
# Regenerates the SWIG output of the Go binding, kvpool.go and kvpool_wrap.c,
# committed in bindings/go/kvpool/ so that `go get` (which never runs SWIG)
# finds a complete package. Run it after every change to bindings/kvpool.i,
# a bindings/go/*.i file it includes or a header of include/kvpool/, and
# commit the two files with that change:
#
#   bindings/go/generate.sh            rewrite bindings/go/kvpool/kvpool{.go,_wrap.c}
#   bindings/go/generate.sh --check    generate into a temporary folder and compare
#                                      (the ctest test go.generated); exit 1 when the
#                                      committed files are stale, 77 (skipped) when this
#                                      SWIG is not the version that generated them
#
# SWIG is $SWIG or `swig` on PATH. The committed files come from SWIG 4.1
# (Debian 12) for 64-bit targets with a 64-bit C `long` (Linux, macOS): Go's
# int is 64 bits (-intgosize 64) and int64_t is `long` (SWIGWORDSIZE64, as
# bindings/CMakeLists.txt passes on LP64); wordsize.go stops other targets.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
pkg=$repo/bindings/go/kvpool
swig=${SWIG:-swig}

# Paths relative to the repository root: the generated files name their
# source ("bindings/kvpool.i"), so the output is the same in every checkout.
generate() {
  (cd "$repo" && "$swig" -go -cgo -intgosize 64 -DSWIGWORDSIZE64 -Iinclude \
    -outdir "$1" -o "$1/kvpool_wrap.c" bindings/kvpool.i)
}

swig_version=$("$swig" -version | sed -n 's/^SWIG Version //p')
committed_version=$(sed -n 's/^ \* Version //p' "$pkg/kvpool_wrap.c" 2>/dev/null | head -n1)

case "${1:-}" in
  "")
    if [ -n "$committed_version" ] && [ "$swig_version" != "$committed_version" ]; then
      echo "generate.sh: note: SWIG $swig_version replaces output of SWIG $committed_version" >&2
    fi
    generate "$pkg"
    echo "generate.sh: wrote $pkg/kvpool.go and $pkg/kvpool_wrap.c (SWIG $swig_version)"
    ;;
  --check)
    if [ "$swig_version" != "$committed_version" ]; then
      echo "generate.sh: SKIP: the committed wrapper is SWIG $committed_version output, this is SWIG $swig_version"
      exit 77
    fi
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    generate "$tmp"
    stale=0
    for f in kvpool.go kvpool_wrap.c; do
      if ! cmp -s "$tmp/$f" "$pkg/$f"; then
        echo "generate.sh: bindings/go/kvpool/$f differs from what SWIG generates now:"
        diff -u "$pkg/$f" "$tmp/$f" | head -n 40 || true
        stale=1
      fi
    done
    if [ "$stale" -ne 0 ]; then
      echo "generate.sh: FAIL: run bindings/go/generate.sh and commit bindings/go/kvpool/kvpool.go and kvpool_wrap.c"
      exit 1
    fi
    echo "generate.sh: OK: the committed Go wrapper is up to date (SWIG $swig_version)"
    ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
