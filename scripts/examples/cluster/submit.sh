#!/usr/bin/env bash
# Packs RAW_DIR into DATASET with N Slurm array tasks, merges, then trains with torchrun.
#   bash submit.sh /data/raw /scratch/parts /data/emb 16
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
raw=$1 parts=$2 dataset=$3 n=${4:-16}
array=$(sbatch --parsable --array=0-$((n - 1)) "$here/pack_parts.sbatch" "$raw" "$parts")
merge=$(sbatch --parsable --dependency=afterok:"$array" "$here/merge_parts.sbatch" "$parts" "$dataset")
sbatch --dependency=afterok:"$merge" --nodes=2 --gpus-per-node=8 --wrap \
  "srun torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d \
   --rdzv_endpoint \$(hostname):29500 $here/train_ddp.py $dataset"
