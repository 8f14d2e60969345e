#!/usr/bin/env bash
# blas.sh: the same optlab training steps under each BLAS that Debian ships
# for libtorch's libblas.so.3, side by side in one run.
#
# Each variant is selected for one process with LD_LIBRARY_PATH pointing at
# its Debian folder (/usr/lib/<multiarch>/<variant>/libblas.so.3), whatever
# the system's update-alternatives choice. For every round, every model runs
# bench/cmd/optlabstep once per variant, in an order rotated each round so
# that all variants see the same machine load; the table gives, per model and
# variant, the median over rounds of each process's median step time, and
# its ratio to the reference BLAS (< 1: faster).
#
# Usage: bench/blas.sh [-r ROUNDS] [MODEL@SHAPE:STEPS ...]
#        (default: mlp@1x28x28:40 cnn@1x28x28:20 cnn@3x32x32:15 resnet18@3x32x32:3)
# Variants missing on this machine are skipped; install them with
#   apt-get install libopenblas0-openmp libopenblas0-pthread libblis4-openmp
# Environment: OMP_WAIT_POLICY (default PASSIVE, see compare.sh), GO.
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
rounds=3
while getopts "r:h" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(mlp@1x28x28:40 cnn@1x28x28:20 cnn@3x32x32:15 resnet18@3x32x32:3)

cd "$(dirname "$0")/.."
GO=${GO:-go}
lib=/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
cores=$(nproc)
# name|folder|environment
all=(
	"reference|blas|"
	"openblas-openmp|openblas-openmp|"
	"openblas-pthread, 1 thread|openblas-pthread|OPENBLAS_NUM_THREADS=1"
	"openblas-pthread, $cores threads|openblas-pthread|OPENBLAS_NUM_THREADS=$cores"
	"blis-openmp|blis-openmp|"
)
variants=()
for v in "${all[@]}"; do
	IFS='|' read -r _ dir _ <<<"$v"
	if [ -e "$lib/$dir/libblas.so.3" ]; then variants+=("$v"); else echo "skipping $v: $lib/$dir/libblas.so.3 not installed" >&2; fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO build -o "$tmp/optlabstep" ./bench/cmd/optlabstep

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $cores cores; libtorch: $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo '?'); OMP_WAIT_POLICY=$OMP_WAIT_POLICY; $rounds rounds"
n=${#variants[@]}
for r in $(seq 1 "$rounds"); do
	for spec in "${specs[@]}"; do
		model=${spec%%@*} rest=${spec#*@} shape=${rest%%:*} steps=${rest##*:}
		for i in $(seq 0 $((n - 1))); do
			v=${variants[$(((i + r) % n))]}
			IFS='|' read -r name dir env <<<"$v"
			line=$(env LD_LIBRARY_PATH="$lib/$dir" $env "$tmp/optlabstep" -model "$model" -in "$shape" -steps "$steps" -warmup 2)
			ms=$(sed -n 's/.*median_ms=\([0-9.]*\).*/\1/p' <<<"$line")
			echo "$model@$shape|$name|$ms" >>"$tmp/times"
			echo "round $r: $model@$shape $name: $ms ms" >&2
		done
	done
done
echo
echo "| model (batch 128, SGD step) | BLAS | median ms/step | ratio to reference |"
echo "|---|---|---:|---:|"
for spec in "${specs[@]}"; do
	m=${spec%:*}
	ref=$(awk -F'|' -v m="$m" '$1==m && $2=="reference" {print $3}' "$tmp/times" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
	for v in "${variants[@]}"; do
		IFS='|' read -r name _ _ <<<"$v"
		med=$(awk -F'|' -v m="$m" -v n="$name" '$1==m && $2==n {print $3}' "$tmp/times" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
		awk -v m="$m" -v n="$name" -v x="$med" -v r="$ref" 'BEGIN {printf "| %s | %s | %.1f | %.2f |\n", m, n, x, x / r}'
	done
done
