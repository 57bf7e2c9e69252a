#!/usr/bin/env bash
# Quick demo: install the library's packages, build the library and the
# kvpool-plan and kvpool-replay examples (no tests, bindings or docs), print the
# sizing of every example configuration, then replay the bundled Mooncake trace
# through the request API and print the report (docs/replay.md).
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
cmake --build "$build_dir" --target kvpool-plan kvpool-replay -j "$(nproc)"

echo
for config in "$repo"/examples/configs/*.json; do
  "$build_dir/examples/kvpool-plan" "$config"
  echo
done

# The whole trace (3,993 requests) with a 2M-token cache of 16-token pages under
# LRU, 32 requests at once: a few seconds. The unbounded ceiling is 64.0% of blocks.
"$build_dir/examples/kvpool-replay" --trace "$repo/examples/data/synthetic_trace.jsonl" \
  --capacity-tokens 2M --page-size 16 --policy lru --concurrency 32
