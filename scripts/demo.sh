#!/usr/bin/env bash
# The main job on the bundled sample data: install dependencies, build, then pack a dialogue
# dataset saved with torch.save (validating every row, dropping the broken ones, storing f16),
# verify every byte, and show what the dataset holds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${GPUCACHE_BUILD_DIR:-$root/build}
out=${GPUCACHE_DEMO_OUT:-$root/out/demo}

"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
gpucache="$build_dir/src/cli/gpucache"

echo "== gpucache probe examples/data/dialogue.pt"
"$gpucache" probe "$root/examples/data/dialogue.pt"
echo
echo "== gpucache pack (validate on the GPU if there is one, else the CPU; store f16)"
"$gpucache" pack "$root/examples/data/dialogue.pt" -o "$out/dialogue" --dtype f16 --dedup \
  --rejects "$out/dialogue-rejects.jsonl" --force
echo
echo "== gpucache verify"
"$gpucache" verify "$out/dialogue"
echo
echo "== gpucache inspect"
"$gpucache" inspect "$out/dialogue"
echo "== dropped rows (from --rejects)"
cat "$out/dialogue-rejects.jsonl"
