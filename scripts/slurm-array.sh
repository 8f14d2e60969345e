#!/bin/bash
#SBATCH --job-name=optlab
#SBATCH --array=0-7            # 8 shards: task i runs shard i+1 of 8
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=8
#SBATCH --time=24:00:00
#SBATCH --output=logs/%x-%A_%a.out
# Arguments are passed on to host run (e.g. --device cpu, --results DIR).
# SHARDS is the number of shards; without it the array must be 0-N (all
# N+1 shards). Set it when submitting only some of them again (--array=3,5).
set -euo pipefail
EXPERIMENT=${EXPERIMENT:-experiments/table1-cifar10.toml}
[ -n "${SLURM_ARRAY_TASK_ID:-}" ] || { echo "slurm-array.sh: not an array task: submit with sbatch --array=0-N" >&2; exit 2; }
N=${SHARDS:-$((SLURM_ARRAY_TASK_MAX + 1))}
[ -n "${SHARDS:-}" ] || [ "$SLURM_ARRAY_TASK_COUNT" = "$N" ] ||
	{ echo "slurm-array.sh: the array is not 0-$((N - 1)): set SHARDS to the number of shards (SHARDS=8 sbatch --array=2,5 ...)" >&2; exit 2; }
I=$((SLURM_ARRAY_TASK_ID + 1))
cd "$SLURM_SUBMIT_DIR"
[ -x bin/host ] || { echo "slurm-array.sh: no bin/host in $PWD: submit from the optlab checkout where make build was run" >&2; exit 2; }
exec bin/host run --device cuda --shard "$I/$N" -q "$@" "$EXPERIMENT"
