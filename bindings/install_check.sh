#!/usr/bin/env bash
# bindings.install: install the build into a staging prefix and use each
# enabled binding from there, the way a downstream project would (the
# commands are the ones docs/bindings.md gives). Nothing from the build tree
# is on any search path: each binding must find libkvpool.so.0 on its own
# (Java/C#: the RUNPATH $ORIGIN/../.. of their native library; Go: the
# installed kvpool.pc plus an rpath the consumer adds).
#
#   install_check.sh BUILD_DIR WORK_DIR CMAKE [java=JAVA javac=JAVAC] [mono=MONO mcs=MCS]
#                    [go=GO gocache=DIR pkgconfig=PKG_CONFIG]
set -euo pipefail

build=$1 work=$2 cmake=$3
shift 3
declare -A tool=()
for kv in "$@"; do tool[${kv%%=*}]=${kv#*=}; done

fail() { echo "install_check: FAIL: $*" >&2; exit 1; }

config='{"model":{"num_layers":2,"kv_heads":2,"head_dim":8},"pool":{"kv_dtype":"f32","page_size":4,"max_total_tokens":64,"max_running_requests":8,"max_context_len":64}}'
want='ok: 1 pages held, 15 free, 0 rows held'

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
  [[ $out == "$want"* ]] || fail "java printed: $out"
  echo "java: $out"
fi

if [[ -n ${tool[mono]:-} ]]; then
  dir=$libdir/kvpool/csharp
  check_native "$dir/libkvpool_csharp.so"
  [[ -f $dir/KvPool.dll ]] || fail "no KvPool.dll in $dir"
  mkdir -p "$work/csharp"
  cat >"$work/csharp/Smoke.cs" <<'EOF'
using KvPool;

public static class Smoke {
  public static void Main(string[] args) {
    using (Pool pool = new Pool(args[0])) {
      long[] slots = pool.Alloc(8);
      pool.Free(new long[] { slots[0] });
      System.Console.WriteLine(pool.Check());
    }
  }
}
EOF
  "${tool[mcs]}" -nologo -warnaserror+ -r:"$dir/KvPool.dll" -out:"$work/csharp/Smoke.exe" "$work/csharp/Smoke.cs"
  out=$(MONO_PATH=$dir "${tool[mono]}" "$work/csharp/Smoke.exe" "$config")
  [[ $out == "$want"* ]] || fail "mono printed: $out"
  echo "csharp: $out"
fi

if [[ -n ${tool[go]:-} ]]; then
  module=$(find "$stage" -path '*/kvpool/go/go.mod' | head -n1)
  [[ -n $module ]] || fail "no kvpool/go/go.mod under $stage"
  pc=$(find "$stage" -name kvpool.pc -path '*/pkgconfig/*' | head -n1)
  mkdir -p "$work/go"
  cat >"$work/go/go.mod" <<EOF
module smoke

go 1.19

require github.com/kvpool/kvpool/bindings/go/kvpool v0.0.0

replace github.com/kvpool/kvpool/bindings/go/kvpool => $(dirname "$module")
EOF
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
}
EOF
  (cd "$work/go" &&
    env CGO_ENABLED=1 GO111MODULE=on GOFLAGS=-mod=mod GOPROXY=off GOENV=off \
      GOCACHE="${tool[gocache]}" GOPATH="$work/gopath" \
      PKG_CONFIG_PATH="$(dirname "$pc")" PKG_CONFIG_LIBDIR="$(dirname "$pc")" PKG_CONFIG_DISABLE_UNINSTALLED=1 \
      PKG_CONFIG="${tool[pkgconfig]:-pkg-config}" CGO_LDFLAGS="-Wl,-rpath,$libdir" \
      "${tool[go]}" build -o smoke .)
  [[ $(ldd "$work/go/smoke" | awk '$1 ~ /^libkvpool\.so/ { print $3 }') -ef $core ]] || fail "the Go program does not load $core"
  out=$("$work/go/smoke" "$config")
  [[ $out == "$want"* ]] || fail "go printed: $out"
  echo "go: $out"
fi
echo "install_check: OK"
