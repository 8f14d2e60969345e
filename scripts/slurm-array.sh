#!/bin/bash
#SBATCH --job-name=optlab
#SBATCH --array=0-7            # 8 shards; change both this and N below
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --output=logs/%x-%A_%a.out
set -euo pipefail
EXPERIMENT=${EXPERIMENT:-experiments/table1-cifar10.toml}
N=${SLURM_ARRAY_TASK_COUNT:-8}
I=$((SLURM_ARRAY_TASK_ID + 1))
cd "$SLURM_SUBMIT_DIR"
bin/host run --device cuda --shard "$I/$N" -q "$EXPERIMENT"
