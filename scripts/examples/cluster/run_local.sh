#!/usr/bin/env bash
# The cluster example on one machine: N parts packed by a plain shell loop of N processes (what a
# Slurm array does across machines), merged, verified, then trained with torchrun on 2 CPU
# processes (gloo) when torchrun and the gpucache Python package are there.
#   bash run_local.sh WORK_DIR [N]
# $GPUCACHE: the gpucache CLI (default build/src/cli/gpucache when built here, else the one pip
# installed with the package, found by gpucache.cli_path()); $PYTHON: the interpreter with the
# gpucache package (default python3). Exit 0 on success; prints "torchrun: skipped (...)"
# when the training step cannot run here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=${1:?usage: run_local.sh WORK_DIR [N]}
n=${2:-3}
python=${PYTHON:-python3}
gpucache=${GPUCACHE:-$root/build/src/cli/gpucache}
if [ -z "${GPUCACHE:-}" ] && [ ! -x "$gpucache" ]; then
  gpucache=$("$python" -c "import gpucache; print(gpucache.cli_path())")
fi
mkdir -p "$work/raw"
"$python" - "$work/raw" <<'PY'
import sys, numpy
rng = numpy.random.default_rng(0)
for f in range(5):
    numpy.save(f"{sys.argv[1]}/emb-{f:02d}.npy", rng.standard_normal((700, 32)).astype(numpy.float32))
PY
rm -rf "$work/parts" "$work/dataset" "$work/single"
pids=()
for ((k = 0; k < n; k++)); do
  SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$n GPUCACHE=$gpucache \
    GPUCACHE_PACK_OPTIONS="--shard-rows 256 --threads 1" \
    bash "$here/pack_parts.sbatch" "$work/raw" "$work/parts" >/dev/null &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
GPUCACHE=$gpucache bash "$here/merge_parts.sbatch" "$work/parts" "$work/dataset" >/dev/null
"$gpucache" verify "$work/dataset"
if ! command -v torchrun >/dev/null; then
  echo "torchrun: skipped (torchrun is not installed)"
  exit 0
fi
if ! "$python" -c "import gpucache, torch.distributed" 2>/dev/null; then
  echo "torchrun: skipped (the gpucache Python package or torch.distributed is missing)"
  exit 0
fi
# torch 1.13's launcher on Python 3.11 cannot parse its own defaults for --redirects and --tee
# ("0" becomes None); naming single streams works on every version: stdout is shown (and logged),
# stderr goes to the log directory, printed if a rank fails.
status=0
"$python" -m torch.distributed.run --nproc_per_node 2 --master_port "${PORT:-29517}" \
  --redirects 2 --tee 1 --log_dir "$work/torchrun-logs" \
  "$here/train_ddp.py" "$work/dataset" --device cpu --steps 10 || status=$?
if [ "$status" -ne 0 ]; then
  find "$work/torchrun-logs" -name stderr.log -exec cat {} + >&2 || true
  exit "$status"
fi
