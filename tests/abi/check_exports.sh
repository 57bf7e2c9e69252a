#!/usr/bin/env bash
# abi.exports: the dynamic interface of libkvpool is exactly the public C API.
#
#   check_exports.sh LIBRARY EXPECTED_SONAME INTERNAL_CANARY INCLUDE_DIR [BASELINE]
#
# Fails when
#  - a defined dynamic symbol lacks a public prefix (the version script leaks),
#  - an export lacks the KVPOOL_0 version node,
#  - a KVPOOL_API function declared in include/kvpool/*.h is not exported
#    (users would get link errors) or an export is declared in no header,
#  - a KVPOOL_API declaration line does not name its function before '('
#    (this script would silently skip it),
#  - BASELINE (tests/abi/exports.txt) lists a function the library does not
#    export (an ABI break), or the library exports one it does not list (a new
#    function: append it to the baseline),
#  - the SONAME is not EXPECTED_SONAME,
#  - the library needs libcudart/libcuda (static cudart and a lazily loaded
#    driver keep it loadable on machines without CUDA),
#  - INTERNAL_CANARY is no longer in the static symbol table (c.dlopen relies on it).
set -euo pipefail

lib=$1 want_soname=$2 canary=$3 include_dir=$4 baseline=${5:-}
prefixes='kvpool_|kvalloc_|kvreq_|kvseq_|radix_|kvhost_|kvstore_'
version_node=KVPOOL_0
errors=0
fail() { echo "abi.exports: FAIL: $*" >&2; errors=$((errors + 1)); }

[[ -f $lib ]] || { echo "abi.exports: no such library: $lib" >&2; exit 1; }

# "ADDR TYPE NAME@@NODE" per defined dynamic symbol; the node itself is type A.
dyn=$(nm -D --defined-only "$lib")
exports=$(awk -v node="$version_node" '$3 != node { print $3 }' <<<"$dyn" | sort)
[[ -n $exports ]] || fail "no exported symbols at all"

while read -r sym; do
  [[ -n $sym ]] || continue
  name=${sym%%@*}
  if ! [[ $name =~ ^($prefixes) ]]; then
    fail "exported symbol without a public prefix: $sym"
  elif [[ $sym != "$name@@$version_node" ]]; then
    fail "export not in version node $version_node: $sym"
  fi
done <<<"$exports"
exported_names=$(cut -d@ -f1 <<<"$exports" | sort -u)

# Declarations start with KVPOOL_API; the function name is the identifier
# right before the first '('. Headers keep one declaration start per line.
declared=$(cat "$include_dir"/kvpool/*.h | grep -E '^[[:space:]]*KVPOOL_API[[:space:]]' |
  sed -E 's/\(.*//; s/.*[^A-Za-z0-9_]([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*$/\1/' | sort -u)
[[ -n $declared ]] || fail "found no KVPOOL_API declarations in $include_dir/kvpool"
while read -r line; do
  [[ -n $line ]] && fail "KVPOOL_API declaration without '(' on its first line (name not found): $line"
done < <(cat "$include_dir"/kvpool/*.h | grep -E '^[[:space:]]*KVPOOL_API[[:space:]]' | grep -v '(' || true)
while read -r name; do
  [[ -n $name ]] && fail "declared in a header but not exported: $name"
done < <(comm -23 <(echo "$declared") <(echo "$exported_names"))
while read -r name; do
  [[ -n $name ]] && fail "exported but declared in no public header: $name"
done < <(comm -13 <(echo "$declared") <(echo "$exported_names"))

if [[ -n $baseline ]]; then
  [[ -f $baseline ]] || { echo "abi.exports: no such baseline: $baseline" >&2; exit 1; }
  expected=$(grep -Ev '^[[:space:]]*(#|$)' "$baseline" | sort -u)
  while read -r name; do
    [[ -n $name ]] && fail "in $baseline but not exported (an ABI break): $name"
  done < <(comm -23 <(echo "$expected") <(echo "$exported_names"))
  while read -r name; do
    [[ -n $name ]] && fail "exported but not in $baseline (a new function? append it there): $name"
  done < <(comm -13 <(echo "$expected") <(echo "$exported_names"))
fi

dynamic=$(readelf -d "$lib")
soname=$(sed -nE 's/.*\(SONAME\).*\[(.*)\].*/\1/p' <<<"$dynamic")
[[ $soname == "$want_soname" ]] || fail "SONAME is '$soname', expected '$want_soname'"
while read -r needed; do
  [[ -n $needed ]] && fail "NEEDED $needed: the CUDA runtime must be linked statically"
done < <(sed -nE 's/.*\(NEEDED\).*\[(libcuda[^]]*)\].*/\1/p' <<<"$dynamic")

# The canary is only checkable while the static symbol table is there (not stripped).
if readelf -S "$lib" | grep -q '\.symtab'; then
  if ! nm "$lib" | awk -v s="$canary" '$3 == s && $2 ~ /^[tT]$/ { found = 1 } END { exit !found }'; then
    fail "internal canary $canary is not in $lib; update tests/abi/internal_canary.cmake"
  fi
else
  echo "abi.exports: $lib is stripped; canary check skipped"
fi

count=$(wc -l <<<"$exported_names")
if ((errors > 0)); then
  echo "abi.exports: $errors problem(s) in $lib" >&2
  exit 1
fi
echo "abi.exports: $count exports, all public, all $version_node; SONAME $soname; no CUDA runtime NEEDED"
