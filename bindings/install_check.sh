#!/usr/bin/env bash
# bindings.install: install the build into a staging prefix and use each
# enabled binding from there, the way a downstream project would (the
# commands are the ones docs/bindings.md gives). Nothing from the build tree
# is on any search path: each binding must find libkvpool.so.0 on its own
# (Java/C#: the RUNPATH $ORIGIN/../.. of their native library; Go: the
# installed kvpool.pc plus an rpath the consumer adds; the Go module itself
# comes through `go get` of a release tag, from a local stand-in repository).
#
#   install_check.sh BUILD_DIR WORK_DIR CMAKE [java=JAVA javac=JAVAC] [mono=MONO mcs=MCS]
#                    [go=GO gocache=DIR pkgconfig=PKG_CONFIG git=GIT version=X.Y.Z]
set -euo pipefail

build=$1 work=$2 cmake=$3
shift 3
declare -A tool=()
for kv in "$@"; do tool[${kv%%=*}]=${kv#*=}; done

check_name=install_check
# fail, expect_smoke, write_csharp_smoke, smoke_config, smoke_want
# shellcheck source=smoke_check.sh
source "$(dirname "${BASH_SOURCE[0]}")/smoke_check.sh"
config=$smoke_config

rm -rf "$work"
mkdir -p "$work"
stage=$work/stage
"$cmake" --install "$build" --prefix "$stage" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
core=$(find "$stage" -name libkvpool.so.0 | head -n1)
[[ -n $core ]] || fail "no libkvpool.so.0 under $stage"
libdir=$(dirname "$core")
unset LD_LIBRARY_PATH

# The native library of a binding resolves libkvpool.so.0 inside the stage.
check_native() {
  local lib=$1
  [[ -f $lib ]] || fail "$lib is not installed"
  readelf -d "$lib" | grep -q 'R.*PATH.*\$ORIGIN/\.\./\.\.' || fail "$lib has no RUNPATH \$ORIGIN/../.."
  [[ $(ldd "$lib" | awk '$1 ~ /^libkvpool\.so/ { print $3 }') -ef $core ]] || fail "$lib does not load $core"
}

if [[ -n ${tool[java]:-} ]]; then
  dir=$libdir/kvpool/java
  check_native "$dir/libkvpool_jni.so"
  [[ -f $dir/kvpool.jar ]] || fail "no kvpool.jar in $dir"
  mkdir -p "$work/java"
  cat >"$work/java/Smoke.java" <<'EOF'
import ai.kvpool.Pool;

public class Smoke {
  public static void main(String[] args) {
    try (Pool pool = new Pool(args[0])) {
      long[] slots = pool.alloc(8);
      pool.free(new long[] {slots[0]});
      System.out.println(pool.check());
    }
  }
}
EOF
  "${tool[javac]}" -Xlint:all -Werror -cp "$dir/kvpool.jar" -d "$work/java" "$work/java/Smoke.java"
  out=$("${tool[java]}" -Xcheck:jni -cp "$dir/kvpool.jar:$work/java" -Djava.library.path="$dir" Smoke "$config")
  expect_smoke java "$out"
  echo "java: $out"
fi

if [[ -n ${tool[mono]:-} ]]; then
  dir=$libdir/kvpool/csharp
  check_native "$dir/libkvpool_csharp.so"
  [[ -f $dir/KvPool.dll ]] || fail "no KvPool.dll in $dir"
  mkdir -p "$work/csharp"
  write_csharp_smoke "$work/csharp/Smoke.cs"
  "${tool[mcs]}" -nologo -warnaserror+ -r:"$dir/KvPool.dll" -out:"$work/csharp/Smoke.exe" "$work/csharp/Smoke.cs"
  out=$(MONO_PATH=$dir "${tool[mono]}" "$work/csharp/Smoke.exe" "$config")
  expect_smoke mono "$out"
  echo "csharp: $out"
fi

if [[ -n ${tool[go]:-} ]]; then
  # The module the way `go get` obtains it, without a replace directive:
  # from its repository at the release tag bindings/go/kvpool/v<version>
  # (docs/services.md#packages). The repository is a local stand-in holding
  # this checkout's module folder; git's url.insteadOf sends Go's fetch of
  # https://github.com/kvpool/kvpool there, so nothing leaves the machine.
  version=${tool[version]}
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/go/kvpool
  origin=$work/origin
  mkdir -p "$origin/bindings/go"
  cp -R "$src" "$origin/bindings/go/kvpool"
  export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=$work/gitconfig
  printf '[url "file://%s"]\n\tinsteadOf = https://github.com/kvpool/kvpool\n' "$origin" >"$GIT_CONFIG_GLOBAL"
  git=${tool[git]}
  "$git" -C "$origin" -c init.defaultBranch=main init -q
  "$git" -C "$origin" add -A
  "$git" -C "$origin" -c user.name=install_check -c user.email=install_check@localhost commit -q -m "kvpool $version"
  "$git" -C "$origin" tag "bindings/go/kvpool/v$version"

  pc=$(find "$stage" -name kvpool.pc -path '*/pkgconfig/*' | head -n1)
  [[ -n $pc ]] || fail "no pkgconfig/kvpool.pc under $stage"
  mkdir -p "$work/go"
  printf 'module smoke\n\ngo 1.19\n' >"$work/go/go.mod"
  cat >"$work/go/main.go" <<'EOF'
package main

import (
	"fmt"
	"log"
	"os"

	"github.com/kvpool/kvpool/bindings/go/kvpool"
)

func main() {
	pool, err := kvpool.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	slots, err := pool.Alloc(8)
	if err != nil {
		log.Fatal(err)
	}
	if err := pool.Free(slots[:1]); err != nil {
		log.Fatal(err)
	}
	report, err := pool.Check()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report)
	fmt.Println("version", kvpool.VersionString())
}
EOF
  # GOPROXY=direct: from the repository, not a proxy; GOPRIVATE: no checksum
  # database either (this stand-in is not public). A writable module cache
  # (-modcacherw) lets the work folder be deleted. GODEBUG=goindex=0: the go
  # command indexes module-cache folders in GOCACHE (shared with the build)
  # by path and version, trusting a release never to change; this stand-in
  # v<version> changes with the working tree, at the same path.
  goenv=(CGO_ENABLED=1 GO111MODULE=on GOENV=off GOFLAGS=-modcacherw GOPROXY=direct GODEBUG=goindex=0
         GOPRIVATE=github.com/kvpool GOCACHE="${tool[gocache]}" GOPATH="$work/gopath"
         PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_LIBDIR="$(dirname "$pc")" PKG_CONFIG_DISABLE_UNINSTALLED=1
         PKG_CONFIG="${tool[pkgconfig]:-pkg-config}" CGO_LDFLAGS="-Wl,-rpath,$libdir")
  (cd "$work/go" &&
    env "${goenv[@]}" "${tool[go]}" get "github.com/kvpool/kvpool/bindings/go/kvpool@v$version" &&
    env "${goenv[@]}" "${tool[go]}" build -o smoke .) || fail "go get / go build"
  grep -Eq "^require github.com/kvpool/kvpool/bindings/go/kvpool v$version( // indirect)?\$" "$work/go/go.mod" ||
    fail "go.mod does not require the tagged version: $(cat "$work/go/go.mod")"
  grep -q "^github.com/kvpool/kvpool/bindings/go/kvpool v$version h1:" "$work/go/go.sum" ||
    fail "go.sum has no hash of the module"
  [[ $(ldd "$work/go/smoke" | awk '$1 ~ /^libkvpool\.so/ { print $3 }') -ef $core ]] || fail "the Go program does not load $core"
  out=$("$work/go/smoke" "$config")
  expect_smoke go "$out"
  [[ $out == *"version $version" ]] || fail "the tag v$version and the library's version differ: $out"
  echo "go: ${out//$'\n'/; }"
fi
echo "install_check: OK"
