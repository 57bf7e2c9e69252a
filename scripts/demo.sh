#!/usr/bin/env bash
# Quick demo: install the library's packages, build the library and the
# kvpool-plan example (no tests, bindings or docs), and print the sizing of
# every example configuration.
#
# Environment: KVPOOL_BUILD_DIR (default: build-demo, relative to the repo).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
build_dir=${KVPOOL_BUILD_DIR:-build-demo}

"$repo/scripts/setup.sh" --minimal

# As in test.sh: let CMake find nvcc where the CUDA toolkit usually lives.
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

cmake -S "$repo" -B "$build_dir" -DBUILD_TESTING=OFF -DKVPOOL_BUILD_EXAMPLES=ON \
  -DKVPOOL_BUILD_GO=OFF -DKVPOOL_BUILD_JAVA=OFF -DKVPOOL_BUILD_CSHARP=OFF \
  -DKVPOOL_BUILD_DOCS=OFF -DKVPOOL_BUILD_BENCHMARKS=OFF
cmake --build "$build_dir" --target kvpool-plan -j "$(nproc)"

echo
for config in "$repo"/examples/configs/*.json; do
  "$build_dir/examples/kvpool-plan" "$config"
  echo
done
