#!/usr/bin/env bash
# devkit-run.sh: optlab's GPU checks in one command, on a machine with no Go
# toolchain and no network, from the device kit (`make devkit`,
# build/devkit/optlab-devkit.tar.xz) and this repository's working tree.
#
# Usage (from anywhere; it works in the repository root):
#   bash scripts/devkit-run.sh
# Environment:
#   OUT            where the result files go (default build/devkit-out)
#   PYTHON         the Python with the machine's PyTorch (default python3);
#                  libtch.so is compiled against the libtorch inside it
#   DEVKIT_TAR     the kit (default build/devkit/optlab-devkit.tar.xz)
#   DEVKIT_WORK    where it is unpacked (default /tmp/optlab-devkit)
#   DEVKIT_BUDGET  seconds the whole script may take (default 540): every
#                  step's timeout is cut to what is left
#   DEVKIT_DEVICE  cuda or cpu (default: cuda when nvidia-smi and torch see a
#                  GPU). Without a GPU every CUDA step says "no-gpu" and runs
#                  what it can on the CPU, small, to check its plumbing.
#   DEVKIT_JOBS    compile jobs for libtch.so (default: the cores)
#   DEVKIT_STEPS   the steps to run, space-separated (default: all); the
#                  others are reported "skipped" (unpack is needed by all)
#   DEVKIT_PRECISIONS  the step-time precisions (default "fp32 tf32 bf16";
#                  tf32 is fp32 with TensorFloat-32 allowed on both sides)
#   DEVKIT_SLOWDOWN  a factor for every step's timeout (default 1; the proof
#                  on a 2-core machine, scripts/devkit-proof.sh, sets 5)
#
# Steps, each under its own timeout, each run even when an earlier one
# failed (status pass, FAIL, TIMEOUT, no-gpu or skipped):
#   unpack      the kit into DEVKIT_WORK; bin/plugins/<name> links to the
#               multi-call plugin binary
#   facts       nvidia-smi, CPU, glibc, torch version, CUDA, cuDNN, C++ ABI
#   libtch      scripts/devkit-libtch.py: lib/libtch.so against this
#               machine's libtorch, in parallel chunks; fails when an op
#               optlab uses had to be stubbed
#   torch       PyTorch's side of the step times (bench/torch_step.py --feed,
#               SGD and SAM, cnn, resnet18, wrn28-10, batch 128, fp32, tf32
#               and bf16, optlab's numerics set explicitly); with a GPU it runs during the libtch compile, both
#               pinned to their own cores (taskset), as the optlab side is
#   version     bin/host version
#   quickstart  experiments/quickstart.toml with train.device = "cuda"
#               (3 epochs, 1 seed); without a GPU: the "cuda" error, then a
#               --smoke run with "auto" (the CPU fallback and its note)
#   tests       the compiled test binaries of the packages with CUDA tests
#   optlab      optlab's side: BenchmarkTrainStep (host/train's loop, the real
#               sgd and sam plugin processes, fresh augmented batches on the
#               device), same models, sizes and precisions
#   plugin      BenchmarkSAMStep (SAM plugin process / in-process) and
#               BenchmarkOTMDRvsSAM (K = 1), cnn and resnet18
#   memory      peak GPU memory per method (nvidia-smi, sampled every
#               100 ms during a short resnet18 run of each method)
#   soak        TestSoakRSS over 2,000 steps in-process and through the
#               plugin, with the GPU's memory sampled alongside
#   profile     where a step's time goes: scripts/devkit-ncu.py's per-step
#               GPU kernels (Nsight Compute) of optlab's in-process step and
#               PyTorch's (cnn sgd, resnet18 sgd and sam, fp32), and Go CPU
#               profiles of bin/optlabstep (base64 in log.txt after
#               "=== pprof NAME base64")
#   report      results.md: the figures against the goals
#
# Result files in $OUT (8): summary.txt (each step's status and seconds, the
# total, then results.md), results.md (the figures and the goals),
# facts.txt, libtch.txt, tests.txt, bench.txt (every benchmark's raw
# output), memory.txt, log.txt (the rest of every step's output).
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
self="$repo/scripts/devkit-run.sh"

if [ "${1:-}" = --step ]; then
	# One step's body, run by the driver below under `timeout`; exit 3 means
	# "no GPU" (the note says what ran instead).
	name=$2
	cd "$repo"
	case $name in
	unpack)
		rm -rf "$DEVKIT_WORK" && mkdir -p "$DEVKIT_WORK" || exit 1
		xz -dc "$DEVKIT_TAR" | tar -C "$DEVKIT_WORK" -xf - || exit 1
		mkdir -p "$KIT/bin/plugins"
		for p in $("$KIT/bin/optlab-plugins" -list); do ln -f "$KIT/bin/optlab-plugins" "$KIT/bin/plugins/$p" || exit 1; done
		head -5 "$KIT/MANIFEST.txt"
		echo "plugins: $(ls "$KIT/bin/plugins" | tr '\n' ' ')"
		;;
	facts)
		{
			echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
			echo "kit: $(sed -n '2,3p;6p' "$KIT/MANIFEST.txt" 2>/dev/null | tr '\n' ';')"
			echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
			echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
			echo "kernel: $(uname -r)"
			echo "glibc: $(ldd --version 2>&1 | head -1)"
			echo "g++: $(g++ --version 2>&1 | head -1)"
			echo "python: $("$PYTHON" --version 2>&1) at $(command -v "$PYTHON")"
			"$PYTHON" - <<'EOF'
import torch
print("torch:", torch.__version__, "at", torch.__file__)
print("torch C++ ABI (torch._C._GLIBCXX_USE_CXX11_ABI):", getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", "?"))
try:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
except Exception as e:  # a cuDNN torch cannot use
    cudnn = "unusable (%s)" % str(e).split(".")[0]
print("torch CUDA:", torch.version.cuda, "cuDNN:", cudnn)
print("torch.cuda.is_available():", torch.cuda.is_available(), "devices:", torch.cuda.device_count())
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    print("  cuda:%d %s, %.1f GiB, %d SMs, capability %d.%d" % (i, p.name, p.total_memory / 2**30, p.multi_processor_count, p.major, p.minor))
EOF
			echo "nvidia-smi:"
			if command -v nvidia-smi >/dev/null; then nvidia-smi 2>&1; nvidia-smi -L 2>&1; else echo "  (not installed)"; fi
		} 2>&1 | tee "$OUTF/facts.txt"
		;;
	libtch)
		$PIN_COMPILE "$PYTHON" "$repo/scripts/devkit-libtch.py" --kit "$KIT" --jobs "$COMPILE_JOBS" 2>&1 | tee "$OUTF/libtch.txt"
		rc=${PIPESTATUS[0]}
		{ echo "ops stubbed for this libtorch ($(wc -l <"$KIT/lib/STUBBED_OPS.txt" 2>/dev/null || echo 0)):"; tr '\n' ' ' <"$KIT/lib/STUBBED_OPS.txt" 2>/dev/null; echo; } >>"$OUTF/libtch.txt"
		if [ "$rc" = 0 ]; then grep -m1 '^libtch.so for' "$OUTF/libtch.txt" | sed 's/.*: //' >"$NOTE"
		else grep '^devkit-libtch:' "$OUTF/libtch.txt" | tail -1 | cut -c1-200 >"$NOTE"; fi
		exit "$rc"
		;;
	torch)
		if [ "$DEV" = cuda ]; then models="--model cnn --model resnet18 --model wrn28-10" steps=40 warm=5
		else models="--model cnn" steps=3 warm=1; fi
		rc=0
		for prec in $PRECISIONS; do
			# tf32: fp32 with TensorFloat-32 allowed (optlab's train.tf32 = true).
			flags="--precision $prec"
			[ "$prec" = tf32 ] && flags="--precision fp32 --tf32"
			for m in sgd sam; do
				echo "## torch $m $prec" >>"$OUTF/bench.txt"
				# shellcheck disable=SC2086 # the model flags are split on purpose
				$PIN_BENCH "$PYTHON" "$KIT/bench/torch_step.py" --device "$DEV" --feed --method $m $flags \
					$models --steps $steps --warmup $warm --threads "$BENCH_THREADS" 2>&1 | tee -a "$OUTF/bench.txt" || rc=1
			done
		done
		[ "$DEV" = cuda ] || { echo "no GPU: PyTorch's side ran on the CPU, cnn, $steps steps" >"$NOTE"; [ $rc = 0 ] && exit 3; }
		exit $rc
		;;
	version)
		"$KIT/bin/host" version 2>&1 | tee -a "$OUTF/facts.txt"
		rc=${PIPESTATUS[0]}
		grep -m1 -E "^(CUDA devices|no usable GPU|CPU build)" "$OUTF/facts.txt" | cut -c1-200 >"$NOTE"
		exit "$rc"
		;;
	quickstart)
		res=$DEVKIT_WORK/results
		rm -rf "$res"
		if [ "$DEV" = cuda ]; then
			"$KIT/bin/host" run --results "$res" --set train.device=cuda --set train.epochs=3 --set 'train.seeds=[1]' experiments/quickstart.toml
			exit $?
		fi
		echo "-- no GPU: train.device = \"cuda\" must fail with one clear message"
		msg=$("$KIT/bin/host" run --results "$res" --set train.device=cuda experiments/quickstart.toml 2>&1)
		rc=$?
		echo "$msg"
		if [ $rc = 0 ]; then echo "train.device = cuda did not fail on a machine without a GPU"; exit 1; fi
		echo "-- no GPU: train.device = \"auto\" falls back to the CPU (--smoke)"
		"$KIT/bin/host" run --smoke --results "$res-auto" --set train.device=auto experiments/quickstart.toml || exit 1
		echo "no GPU: \"cuda\" says: $(echo "$msg" | grep -m1 -i cuda | cut -c1-150); \"auto\" ran on the CPU (--smoke)" >"$NOTE"
		exit 3
		;;
	tests)
		# host/cli's tests take their binaries from OPTLAB_TEST_BIN: host and
		# exactly the plugins they list (sgd, sam, bsam, otmdr, faultplugin).
		tb=$DEVKIT_WORK/clitest-bin
		rm -rf "$tb" && mkdir -p "$tb/plugins"
		ln -s "$KIT/bin/host" "$tb/host"
		for p in sgd sam bsam otmdr; do ln -f "$KIT/bin/optlab-plugins" "$tb/plugins/$p"; done
		ln -f "$KIT/tests/faultplugin" "$tb/plugins/faultplugin"
		export OPTLAB_TEST_BIN=$tb
		rc=0
		for t in tensor:host/tensor cli:host/cli statedict:host/checkpoint/statedict bench:bench; do
			bin=${t%%:*} dir=${t#*:}
			echo "## $bin.test in $dir" | tee -a "$OUTF/tests.txt"
			b=$(date +%s)
			(cd "$repo/$dir" && "$KIT/tests/$bin.test" -test.count=1 -test.timeout=5m $TEST_ARGS) >>"$OUTF/tests.txt" 2>&1
			r=$?
			[ $r = 0 ] || { rc=1; failed="${failed:-}$bin.test (exit $r) "; }
			echo "$bin.test: exit $r, $(($(date +%s) - b)) s" | tee -a "$OUTF/tests.txt"
		done
		grep -E "^(--- FAIL|FAIL|panic)" "$OUTF/tests.txt" | head -5
		echo "${failed:-every binary passed}; $(grep -c -- '--- FAIL' "$OUTF/tests.txt") failed test(s): $(grep -o -- '--- FAIL: [^ ]*' "$OUTF/tests.txt" | cut -d' ' -f3 | head -8 | tr '\n' ' ')" >"$NOTE"
		exit $rc
		;;
	optlab)
		if [ "$DEV" = cuda ]; then archs=cnn,resnet18,wrn28-10 n=40; else archs=cnn n=3; fi
		rc=0
		for prec in $PRECISIONS; do
			echo "## optlab TrainStep $prec" >>"$OUTF/bench.txt"
			p=$prec tf32=0
			[ "$prec" = tf32 ] && p=fp32 tf32=1
			(cd bench && OPTLAB_BENCH_DEVICE=$DEV OPTLAB_BENCH_ARCHS=$archs OPTLAB_BENCH_PRECISION=$p OPTLAB_BENCH_TF32=$tf32 OPTLAB_BENCH_METHODS=sgd,sam \
				OPTLAB_BENCH_PLUGINS=$KIT/bin/plugins $PIN_BENCH "$KIT/tests/bench.test" -test.run '^$' \
				-test.bench '^BenchmarkTrainStep$' -test.benchtime ${n}x) 2>&1 | tee -a "$OUTF/bench.txt"
			[ "${PIPESTATUS[0]}" = 0 ] || rc=1
		done
		[ "$DEV" = cuda ] || { echo "no GPU: optlab's side ran on the CPU, cnn, $n steps" >"$NOTE"; [ $rc = 0 ] && exit 3; }
		exit $rc
		;;
	plugin)
		if [ "$DEV" = cuda ]; then archs='^(cnn|resnet18)$' n=30; else archs='^cnn$' n=2; fi
		rc=0
		echo "## optlab plugin" >>"$OUTF/bench.txt"
		for pat in "^BenchmarkSAMStep\$/$archs" "^BenchmarkOTMDRvsSAM\$/$archs/^K=1\$"; do
			(cd bench && OPTLAB_BENCH_DEVICE=$DEV OPTLAB_BENCH_PLUGINS=$KIT/bin/plugins $PIN_BENCH "$KIT/tests/bench.test" -test.run '^$' \
				-test.bench "$pat" -test.benchtime ${n}x) 2>&1 | tee -a "$OUTF/bench.txt"
			[ "${PIPESTATUS[0]}" = 0 ] || rc=1
		done
		[ "$DEV" = cuda ] || { echo "no GPU: ran on the CPU, cnn, $n steps" >"$NOTE"; [ $rc = 0 ] && exit 3; }
		exit $rc
		;;
	memory)
		if [ "$DEV" = cuda ]; then arch=resnet18 ntrain=2560; else arch=cnn ntrain=256; fi
		dir=$DEVKIT_WORK/memory
		rm -rf "$dir" && mkdir -p "$dir"
		rc=0
		idle=""
		if [ "$DEV" = cuda ]; then idle=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -1); fi
		echo "## peak GPU memory per method: $arch, batch 128, $((ntrain / 128)) steps (one epoch) and the evaluation; nvidia-smi memory.used every 100 ms, idle $idle MiB" | tee -a "$OUTF/memory.txt"
		for m in sgd sam otmdr bsam adamw muon shampoo soap sgvb; do
			# The base optimizer of every benchmark, but for the methods
			# that apply their own update (they take only lr).
			opt='name = "sgd"
lr = 0.05
momentum = 0.9
weight_decay = 5e-4' params="" variational=false
			case $m in
			sam) params='rho = 0.05' ;;
			otmdr) params='rho1 = 0.05' ;;
			adamw | muon | shampoo | soap) opt='lr = 0.001' ;;
			sgvb) variational=true ;;
			esac
			cat >"$dir/$m.toml" <<EOF
name = "devkit-memory-$m"
[data]
dataset = "synthetic"
augment = ["crop", "flip"]
[data.synthetic]
train = $ntrain
test = 128
[model]
archs = ["$arch"]
variational = $variational
[train]
epochs = 1
batch_size = 128
seeds = [1]
device = "$DEV"
[train.optimizer]
$opt
[eval]
temperature = "none"
tensorboard = false
[[method]]
name = "$m"
plugin = "$m"
[method.params]
$params
EOF
			sampler=""
			if [ "$DEV" = cuda ]; then
				nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 100 >"$dir/$m.samples" 2>/dev/null &
				sampler=$!
			fi
			b=$(date +%s.%N)
			"$KIT/bin/host" run -q --results "$dir/results-$m" "$dir/$m.toml" >"$dir/$m.log" 2>&1
			r=$?
			secs=$(awk -v b="$b" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - b }')
			peak=""
			if [ -n "$sampler" ]; then
				sleep 0.3
				kill "$sampler" 2>/dev/null
				wait "$sampler" 2>/dev/null
				peak=$(sort -n "$dir/$m.samples" | tail -1)
			fi
			[ $r = 0 ] || { rc=1; tail -5 "$dir/$m.log"; }
			if [ -n "$peak" ]; then
				echo "method=$m arch=$arch peak_used_mib=$peak idle_mib=$idle peak_minus_idle_mib=$((peak - idle)) exit=$r seconds=$secs" | tee -a "$OUTF/memory.txt"
			else
				echo "method=$m arch=$arch exit=$r seconds=$secs (no GPU memory to read)" | tee -a "$OUTF/memory.txt"
			fi
		done
		[ "$DEV" = cuda ] || { echo "no GPU: every method's run passed on the CPU ($arch, 2 steps)" >"$NOTE"; [ $rc = 0 ] && exit 3; }
		exit $rc
		;;
	soak)
		if [ "$DEV" != cuda ]; then
			echo "no GPU: skipped (2,000 steps on this CPU would not fit the budget)" >"$NOTE"
			exit 3
		fi
		echo "## soak: TestSoakRSS (cnn, batch 128, 2,000 steps in-process, then through the sgd plugin); GPU memory.used every 500 ms" >>"$OUTF/memory.txt"
		nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -i 0 -lms 500 >"$DEVKIT_WORK/soak.samples" 2>/dev/null &
		sampler=$!
		(cd bench && OPTLAB_BENCH_DEVICE=cuda OPTLAB_SOAK=1 OPTLAB_SOAK_PLUGIN=1 OPTLAB_BENCH_PLUGINS=$KIT/bin/plugins \
			$PIN_BENCH "$KIT/tests/bench.test" -test.run '^TestSoakRSS$' -test.v -test.count=1 -test.timeout=10m) 2>&1 | tee -a "$OUTF/memory.txt"
		rc=${PIPESTATUS[0]}
		kill "$sampler" 2>/dev/null
		wait "$sampler" 2>/dev/null
		awk -F', *' 'NF >= 2 { n++; v[n] = $2; if ($2 > mx) mx = $2 }
			END { if (n) printf "soak GPU memory.used (MiB): first %s, at 25%% %s, 50%% %s, 75%% %s, last %s, max %s (%d samples)\n", v[1], v[int(n/4)+1], v[int(n/2)+1], v[int(3*n/4)+1], v[n], mx, n }' \
			"$DEVKIT_WORK/soak.samples" | tee -a "$OUTF/memory.txt"
		exit "$rc"
		;;
	profile)
		# Where a step's time goes, fp32 (TF32 off): the GPU's kernels of
		# optlab's in-process step (bin/optlabstep) and PyTorch's (torch_step.py,
		# fixed batch) under Nsight Compute, each run twice (a few steps and
		# more; the difference is per step, the model's set-up cancels), and a
		# Go CPU profile of optlabstep's steps (base64 in log.txt).
		if [ "$DEV" != cuda ]; then
			echo "no GPU: skipped (ncu needs one)" >"$NOTE"
			exit 3
		fi
		ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
		pdev=${DEVKIT_PROFILE_DEVICE:-cuda} # cpu only to check this step's plumbing
		dir=$DEVKIT_WORK/profile
		rm -rf "$dir" && mkdir -p "$dir"
		echo "## profile (ncu: ${ncu:-none})" >>"$OUTF/bench.txt"
		rc=0
		# The first GPU run (2026-11-28, H200) profiled cnn sgd in this step's
		# first 150 s; the rest was cut: ncu replays every kernel.
		for spec in "cnn sgd 3 8" "resnet18 sgd 1 3" "resnet18 sam 1 2"; do
			set -- $spec
			arch=$1 m=$2
			"$KIT/bin/optlabstep" -device "$pdev" -model "$arch" -opt "$m" -steps 200 -warmup 20 -cpuprofile "$dir/$arch-$m.pprof" 2>&1 | tee -a "$OUTF/bench.txt"
			echo "=== pprof $arch-$m base64"
			base64 -w0 "$dir/$arch-$m.pprof"
			echo
			for n in $3 $4; do
				[ -n "$ncu" ] || break
				timeout 90 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
					"$KIT/bin/optlabstep" -device "$pdev" -model "$arch" -opt "$m" -steps "$n" -warmup 2 \
					>"$dir/optlab-$arch-$m-$n.csv" 2>>"$dir/ncu.err" || rc=1
				timeout 90 "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --target-processes all \
					"$PYTHON" "$KIT/bench/torch_step.py" --device "$pdev" --model "$arch" --method "$m" --steps "$n" --warmup 2 \
					>"$dir/torch-$arch-$m-$n.csv" 2>>"$dir/ncu.err" || rc=1
			done
			[ -n "$ncu" ] && "$PYTHON" "$repo/scripts/devkit-ncu.py" --label "$arch $m" --steps "$3" "$4" \
				--optlab "$dir/optlab-$arch-$m-$3.csv" "$dir/optlab-$arch-$m-$4.csv" \
				--torch "$dir/torch-$arch-$m-$3.csv" "$dir/torch-$arch-$m-$4.csv" 2>&1 | tee -a "$OUTF/bench.txt"
		done
		tail -5 "$dir/ncu.err" 2>/dev/null
		[ -n "$ncu" ] || { echo "ncu not found: only the Go CPU profiles" >"$NOTE"; exit 1; }
		exit $rc
		;;
	report)
		"$PYTHON" "$repo/scripts/devkit-report.py" --bench "$OUTF/bench.txt" --memory "$OUTF/memory.txt" --facts "$OUTF/facts.txt" --device "$DEV" >"$OUTF/results.md"
		rc=$?
		cat "$OUTF/results.md"
		exit $rc
		;;
	*)
		echo "devkit-run.sh: unknown step $name" >&2
		exit 2
		;;
	esac
	exit 0
fi

# The driver.
t0=$(date +%s)
export OUTF=${OUT:-$repo/build/devkit-out}
mkdir -p "$OUTF"
export PYTHON=${PYTHON:-python3}
export DEVKIT_TAR=${DEVKIT_TAR:-$repo/build/devkit/optlab-devkit.tar.xz}
export DEVKIT_WORK=${DEVKIT_WORK:-/tmp/optlab-devkit}
export KIT=$DEVKIT_WORK/optlab-devkit
budget=${DEVKIT_BUDGET:-540}
deadline=$((t0 + budget))
ncpu=$(nproc)
notes=$(mktemp -d)
for f in summary.txt results.md facts.txt libtch.txt tests.txt bench.txt memory.txt log.txt; do : >"$OUTF/$f"; done
summary=$OUTF/summary.txt
log=$OUTF/log.txt

# run_step NAME LIMIT: runs the step under `timeout`, at most LIMIT seconds
# and never past the budget (less 15 s for the report), and records its
# row (also from a step run in the background).
rows=$notes/rows
run_step() {
	local name=$1 limit=$(($2 * ${DEVKIT_SLOWDOWN:-1})) b e rc status left note
	case " ${DEVKIT_STEPS:-$name} " in
	*" $name "*) ;;
	*)
		printf '%-10s %-14s %7.1f s  %s\n' "$name" skipped 0 "not in DEVKIT_STEPS" | tee -a "$rows" >&2
		return
		;;
	esac
	left=$((deadline - $(date +%s) - 15))
	[ "$name" = report ] && left=$((deadline - $(date +%s)))
	[ "$limit" -le "$left" ] || limit=$left
	b=$(date +%s.%N)
	if [ "$limit" -lt 5 ]; then
		status=skipped note="no time left in the budget of $budget s"
		rc=0
	else
		echo "=== $name (timeout $limit s) $(date -u +%H:%M:%S)" >>"$log"
		NOTE=$notes/$name timeout -k 10 "$limit" bash "$self" --step "$name" >>"$log" 2>&1
		rc=$?
		case $rc in
		0) status=pass ;;
		3) status=no-gpu ;;
		124 | 137) status=TIMEOUT ;;
		*) status="FAIL (exit $rc)" ;;
		esac
		note=$(head -1 "$notes/$name" 2>/dev/null)
		[ $rc = 124 ] || [ $rc = 137 ] && note="killed after $limit s${note:+; $note}"
	fi
	e=$(date +%s.%N)
	printf '%-10s %-14s %7.1f s  %s\n' "$name" "$status" "$(awk -v b="$b" -v e="$e" 'BEGIN { print e - b }')" "$note" | tee -a "$rows" >&2
}

export NOTE=/dev/null
run_step unpack 60
run_step facts 60
if [ -z "${DEVKIT_DEVICE:-}" ]; then
	DEVKIT_DEVICE=cpu
	if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' &&
		"$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		DEVKIT_DEVICE=cuda
	fi
fi
export DEV=$DEVKIT_DEVICE
# With a GPU, PyTorch's side of the step times runs while libtch.so
# compiles: the benchmarks on cores 0-3 (both sides, the optlab side later
# too), the compile on the others. Without a GPU (or with few cores, or
# where taskset cannot pin) they run one after the other.
export PRECISIONS=${DEVKIT_PRECISIONS:-fp32 tf32 bf16}
export PIN_BENCH="" PIN_COMPILE="" COMPILE_JOBS=${DEVKIT_JOBS:-$ncpu} BENCH_THREADS=0 TEST_ARGS=""
overlap=0
if [ "$DEV" = cuda ] && [ "$ncpu" -ge 8 ] && taskset -c 0 true 2>/dev/null; then
	overlap=1
	PIN_BENCH="taskset -c 0-3" PIN_COMPILE="taskset -c 4-$((ncpu - 1))"
	COMPILE_JOBS=${DEVKIT_JOBS:-$((ncpu - 4))} BENCH_THREADS=4
fi
[ "$DEV" = cuda ] || TEST_ARGS=${DEVKIT_TEST_ARGS:-}
if [ $overlap = 1 ]; then
	run_step torch 240 &
	torch_pid=$!
	run_step libtch 300
	wait $torch_pid
else
	run_step libtch 300
	run_step torch 240
fi
run_step version 30
run_step quickstart 90
run_step tests 150
run_step optlab 200
run_step plugin 120
run_step memory 150
run_step soak 120
run_step profile 200
run_step report 30

total=$(($(date +%s) - t0))
{
	echo "# optlab device kit run, $(date -u +%Y-%m-%d) on $(hostname): device $DEV, $ncpu cores"
	echo "# $(grep -m1 '^torch:' "$OUTF/facts.txt")"
	echo "# $(grep -m1 -E '^(CUDA devices|no usable GPU|CPU build)' "$OUTF/facts.txt")"
	echo "# libtorch build: $(grep -m1 '^libtch.so for' "$OUTF/libtch.txt" | cut -c1-220)"
	echo
	echo "step       status         seconds  note"
	cat "$rows"
	[ $overlap = 0 ] || echo "(torch ran alongside libtch: the benchmarks pinned to cores 0-3, the compile to the others)"
	echo "total      $total s (budget $budget s)"
	echo
	cat "$OUTF/results.md"
} >"$summary"
cat "$summary"
# What comes back from the device is at most 16 MiB a file.
if [ "$(stat -c %s "$log")" -gt 15000000 ]; then
	tail -c 15000000 "$log" >"$log.tmp" && mv "$log.tmp" "$log"
fi
rm -rf "$notes"
