#!/usr/bin/env bash
# compare.sh: optlab's SGD training step against PyTorch's, side by side.
#
# For each model it starts bench/cmd/optlabstep -serve (optlab: engine +
# in-process sgd plugin) and bench/torch_step.py --serve (PyTorch 1.13.1,
# the same architecture from bench/torch_models.py, torch.optim.SGD) once,
# lets both build the model and warm up, then times ONE step at a time in
# each, alternately, rotating who goes first every round, so that both see
# the same machine load. It prints every participant's median and minimum
# step time (wall) and median CPU time per step (user + system, all threads),
# and the ratios optlab/PyTorch: of the wall medians, of the wall minima (the
# least disturbed steps, when the machine is shared), the median and range of
# the per-round wall ratios, and of the CPU-time medians. Ratio < 1 means
# optlab is faster.
#
# Usage: bench/compare.sh [options] [MODEL[:ROUNDS] ...]   (default: cnn:30 resnet18:6)
#   -b BATCH     batch size (128)
#   -t THREADS   torch intra-op threads on both sides (0 = number of cores)
#   -w WARMUP    untimed steps in each process first (2)
#   -d DEVICE    cpu, cuda or cuda:N on both sides (cpu)
#   -l LAYOUTS   comma-separated torch_step.py layouts to run against, from
#                modules, flat-narrow, flat-split (modules)
#   -E 'K=V …'   environment for the optlab process only, e.g. the glibc
#                malloc settings of docs/BENCHMARKS.md:
#                -E 'MALLOC_ARENA_MAX=1 GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736'
#   -P 'K=V …'   environment for the PyTorch processes only
# Environment: PYTHON (default /usr/bin/python3, which has Debian's torch), GO,
# OPTLABSTEP (a built bench/cmd/optlabstep to use instead of building one with
# GO: the device kit's bin/optlabstep, where there is no Go toolchain),
# OMP_WAIT_POLICY (default PASSIVE here: libtorch's OpenMP threads then sleep
# at barriers instead of spinning, which on a machine shared with other work
# otherwise wastes most of the CPU when a partner thread is descheduled; both
# sides get the same setting; export OMP_WAIT_POLICY=ACTIVE for libgomp's own
# default on a dedicated machine).
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

batch=128 threads=0 warmup=2 layouts=modules optenv= pyenv= device=cpu
while getopts "b:t:w:l:E:P:d:h" opt; do
	case $opt in
	d) device=$OPTARG ;;
	E) optenv=$OPTARG ;;
	P) pyenv=$OPTARG ;;
	b) batch=$OPTARG ;;
	t) threads=$OPTARG ;;
	w) warmup=$OPTARG ;;
	l) layouts=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(cnn:30 resnet18:6)

cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-/usr/bin/python3}
GO=${GO:-go}
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT

optlabstep=${OPTLABSTEP:-}
if [ -z "$optlabstep" ]; then
	"$GO" build -o "$tmp/optlabstep" ./bench/cmd/optlabstep
	optlabstep=$tmp/optlabstep
fi
IFS=, read -r -a tlayouts <<<"$layouts"

echo "# compare.sh $(date -u +%Y-%m-%dT%H:%M:%SZ) batch=$batch device=$device threads=$threads warmup=$warmup cores=$(nproc) OMP_WAIT_POLICY=$OMP_WAIT_POLICY load=$(cut -d' ' -f1-3 /proc/loadavg)"
[ -z "$optenv" ] || echo "# optlab environment: $optenv"
[ -z "$pyenv" ] || echo "# PyTorch environment: $pyenv"
echo "# $(lscpu | sed -n 's/^Model name: *//p' | head -1); $("$GO" version 2>/dev/null || echo "prebuilt $optlabstep"); torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"

for spec in "${specs[@]}"; do
	model=${spec%%:*}
	rounds=${spec#*:}
	[ "$rounds" != "$spec" ] || rounds=10
	names=(optlab)
	cmds=("env $optenv $optlabstep -serve -model $model -batch $batch -threads $threads -warmup $warmup -device $device")
	for l in "${tlayouts[@]}"; do
		names+=("torch-$l")
		cmds+=("env $pyenv $PYTHON bench/torch_step.py --serve --model $model --batch $batch --threads $threads --warmup $warmup --layout $l --device $device")
	done
	k=${#names[@]}
	ins=() outs=()
	for ((i = 0; i < k; i++)); do
		mkfifo "$tmp/in$i" "$tmp/out$i"
		# shellcheck disable=SC2086 # the command line is split on purpose
		${cmds[$i]} <"$tmp/in$i" >"$tmp/out$i" &
		pids+=($!)
		exec {fi}>"$tmp/in$i" {fo}<"$tmp/out$i"
		ins+=("$fi") outs+=("$fo")
	done
	for ((i = 0; i < k; i++)); do
		read -r line <&"${outs[$i]}" || { echo "${names[$i]} ($model) failed to start" >&2; exit 1; }
		[ "$line" = ready ] || { echo "${names[$i]} ($model): unexpected \"$line\"" >&2; exit 1; }
	done
	: >"$tmp/times"
	for ((r = 0; r < rounds; r++)); do
		for ((j = 0; j < k; j++)); do
			i=$(((r + j) % k))
			echo "step 1" >&"${ins[$i]}"
			read -r tag ms ctag cpu <&"${outs[$i]}" || { echo "${names[$i]} ($model) died" >&2; exit 1; }
			[ "$tag" = ms ] && [ "$ctag" = cpu ] || { echo "${names[$i]} ($model): unexpected \"$tag $ms $ctag $cpu\"" >&2; exit 1; }
			echo "$r $i $ms $cpu" >>"$tmp/times"
		done
	done
	for ((i = 0; i < k; i++)); do
		echo quit >&"${ins[$i]}"
		fd=${ins[$i]}; exec {fd}>&-
		fd=${outs[$i]}; exec {fd}<&-
	done
	wait "${pids[@]}" 2>/dev/null || true
	pids=()
	rm -f "$tmp"/in* "$tmp"/out*
	# Summary: medians per participant, then optlab/torch ratios.
	awk -v model="$model" -v rounds="$rounds" -v batch="$batch" -v names="${names[*]}" '
	function median(a, n,    i, j, t) {
		for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ t[$1, $2] = $3; c[$1, $2] = $4 }
	END {
		k = split(names, nm, " ")
		for (i = 0; i < k; i++) {
			mn[i] = 1e300
			for (r = 0; r < rounds; r++) { col[r + 1] = t[r, i]; cc[r + 1] = c[r, i]; if (t[r, i] < mn[i]) mn[i] = t[r, i] }
			med[i] = median(col, rounds); cmed[i] = median(cc, rounds)
			printf "%-9s %-18s wall median %9.1f min %9.1f ms/step; CPU time median %9.1f ms/step; %d rounds (not for publication)\n", model, nm[i + 1], med[i], mn[i], cmed[i], rounds
		}
		for (i = 1; i < k; i++) {
			lo = 1e300; hi = 0
			for (r = 0; r < rounds; r++) { q = t[r, 0] / t[r, i]; rr[r + 1] = q; if (q < lo) lo = q; if (q > hi) hi = q }
			printf "RATIO %s bs%d optlab/%s: wall %.3f (medians), %.3f (minima), per-round median %.3f range %.3f..%.3f; CPU time %.3f (medians)\n", model, batch, nm[i + 1], med[0] / med[i], mn[0] / mn[i], median(rr, rounds), lo, hi, cmed[0] / cmed[i]
		}
	}' "$tmp/times"
done
