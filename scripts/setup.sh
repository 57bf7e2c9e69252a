#!/usr/bin/env bash
# Installs the Debian packages the kvpool build needs. Idempotent: when every
# package is already installed it does not touch apt at all, so reruns are fast.
#
#   scripts/setup.sh            everything: library, tests, bindings, docs, benchmarks
#   scripts/setup.sh --minimal  only what the library, its C/C++ tests and examples need
#
# nvcc is not a Debian package; the CUDA backend is built when nvcc is found.
set -euo pipefail

minimal=(cmake g++ pkg-config libcjson-dev libxxhash-dev libgtest-dev)
full=("${minimal[@]}"
  libbenchmark-dev                                   # tests/bench
  libmemcached-dev memcached libmemcached-tools      # storage tier: memcached backend, its test servers
  libhiredis-dev redis-server                        # storage tier: redis backend, its test servers
  swig golang-go git                                 # Go binding (git: bindings.install's `go get` of a tag)
  default-jdk-headless junit4                        # Java binding and its JUnit tests (FindJNI finds /usr/lib/jvm/default-java)
  maven libmaven-compiler-plugin-java                # bindings/java/pom.xml, offline from /usr/share/maven-repo
  libmaven-resources-plugin-java libmaven-jar-plugin-java libbuild-helper-maven-plugin-java
  junit5                                             # its junit-bom: Debian's plexus-compiler pom imports it
  mono-mcs mono-devel nunit-console libnunit-cil-dev # C# binding and its tests
  mono-xbuild                                        # bindings/csharp/KvPool.csproj
  doxygen graphviz                                   # API reference
  clang libclang-rt-14-dev                           # sanitizer and libFuzzer builds (scripts/sanitize.sh)
  python3)

case "${1:-}" in
  "") wanted=("${full[@]}") ;;
  --minimal) wanted=("${minimal[@]}") ;;
  *) echo "usage: $0 [--minimal]" >&2; exit 2 ;;
esac

missing=()
for pkg in "${wanted[@]}"; do
  # db:Status-Status is "installed" only for a fully installed package
  # (not for one removed with its config files left behind).
  if [[ $(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null) != installed ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup.sh: all ${#wanted[@]} packages already installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null; then
  sudo=(sudo)
else
  echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi

echo "setup.sh: installing ${missing[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
