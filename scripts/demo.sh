#!/usr/bin/env bash
# The main job on the bundled sample data: install dependencies, build, then pack the sample
# embeddings to f16 shards, verify every byte, and show what the dataset holds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}
out=${GPUCACHE_DEMO_OUT:-$root/out/demo}

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
gpucache="$build_dir/src/cli/gpucache"

echo "== gpucache pack"
"$gpucache" pack "$root"/examples/data/embeddings-part-*.npy -o "$out" --dtype f16 --force
echo "== gpucache verify"
"$gpucache" verify "$out"
echo "== gpucache inspect"
"$gpucache" inspect "$out"
