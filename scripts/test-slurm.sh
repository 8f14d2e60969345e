#!/usr/bin/env bash
# test-slurm.sh: run scripts/slurm-array.sh (docs/CLUSTER.md) on a real,
# single-node Slurm on this machine and check that the merged shards equal
# the same grid run in one process.
#
# Usage (as root): scripts/test-slurm.sh [-n SHARDS] [-k]
#   -n SHARDS   array tasks, 2 to 6 (3): the grid has 6 runs
#   -k          keep the work folder (logs, results) for inspection
#
# It installs Debian's Slurm daemons and commands (slurmctld, slurmd,
# slurm-client: slurm-wlm without its optional plugins) and munge with
# apt-get when missing, and builds the host (make build). In a work folder
# (OPTLAB_SLURM_DIR, default /tmp/optlab-test-slurm) it writes a munge key, a
# slurm.conf for one node, this machine ($(hostname -s), its CPUs and
# memory, and two stand-in GPUs, /dev/null and /dev/zero, so that the array
# script's --gres=gpu:1 can be granted), and starts munged, slurmctld and
# slurmd by hand (no systemd needed), as root, on ports 6817 and 6818
# (OPTLAB_SLURM_PORT sets the first; the second is the next one).
#
# It then writes a small experiment (a CNN on the UCI digits, SGD, SAM and
# OT-MDR × 2 seeds, 3 epochs, one torch thread per run) and submits the
# array script unchanged but for what this machine lacks (sbatch
# --cpus-per-task=1, host run --device cpu, results and logs in the work
# folder), waits for the array, merges the shard files with
# `host table`, runs the same grid in one process, and compares: the
# records of runs.jsonl by run key, every field but the wall-clock ones
# (wall_seconds, seconds_per_epoch, finished), must be equal, metrics
# bitwise; so must the training curves (curves/<run>.csv, but for their
# seconds column) and the two `host table --format csv` outputs, but for
# their wall-clock rows. Before that, it submits the array's second task
# again, alone: without SHARDS it must refuse, with SHARDS=n skip its
# finished runs.
#
# On exit, whatever happened, it cancels the jobs, stops the daemons and
# removes the work folder (unless -k); a work folder left by a killed run is
# cleaned up the same way first, so the script can always be run again.
# Exit status: 0 when equal, 1 on a mismatch or a failed step, 2 on bad use.
# Environment: OMP_WAIT_POLICY (default PASSIVE, see bench/compare.sh), GO.
set -euo pipefail
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

shards=3 keep=
while getopts "n:kh" opt; do
	case $opt in
	n) shards=$OPTARG ;;
	k) keep=1 ;;
	*) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
[[ $shards =~ ^[2-6]$ ]] || { echo "test-slurm.sh: -n $shards: want 2 to 6 shards (the grid has 6 runs)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "test-slurm.sh: run as root (apt-get, munged, slurmd)" >&2; exit 2; }

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${OPTLAB_SLURM_DIR:-/tmp/optlab-test-slurm}
port=${OPTLAB_SLURM_PORT:-6817}
t0=$(date +%s)
elapsed() { echo "$(($(date +%s) - t0)) s"; }
step() { echo "== $(date -u +%H:%M:%S) ($(elapsed)) $*"; }
fail() {
	echo "test-slurm.sh: FAIL: $*" >&2
	exit 1
}

# stop DIR: cancel the jobs of the Slurm whose work folder is DIR and stop
# its daemons (by the process ids recorded in DIR/pids).
stop() {
	local d=$1 pid
	[ -s "$d/pids" ] || return 0
	if [ -f "$d/slurm.conf" ]; then
		SLURM_CONF=$d/slurm.conf timeout 10 scancel --quiet --partition=test 2>/dev/null || true
		for _ in $(seq 30); do
			[ -z "$(SLURM_CONF=$d/slurm.conf timeout 10 squeue -h 2>/dev/null)" ] && break
			sleep 1
		done
	fi
	# slurmd, slurmctld, munged: the reverse of their start.
	tac "$d/pids" | while read -r pid; do
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	rm -f "$d/pids"
}

cleanup() {
	local rc=$?
	stop "$dir"
	if [ -n "$keep" ]; then
		echo "test-slurm.sh: daemons stopped; work folder kept in $dir"
	else
		rm -rf "$dir"
	fi
	exit "$rc"
}

# showlogs prints the end of the daemons' logs, for a failed start.
showlogs() {
	for f in "$dir"/log/*.log; do
		[ -f "$f" ] && { echo "--- $f (end)" >&2; tail -n 20 "$f" >&2; }
	done
}

if [ -e "$dir" ]; then
	step "removing $dir, left by an earlier run"
	stop "$dir"
	rm -rf "$dir"
fi
for p in "$port" $((port + 1)); do
	if ss -Htln "sport = :$p" | grep -q .; then
		echo "test-slurm.sh: port $p is in use (another Slurm?); set OPTLAB_SLURM_PORT to a free pair" >&2
		exit 1
	fi
done
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

need=()
for c in slurmctld slurmd sbatch munged; do command -v "$c" >/dev/null || need=(slurmctld slurmd slurm-client munge); done
if [ ${#need[@]} -gt 0 ]; then
	step "apt-get install ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" ||
		fail "apt-get install ${need[*]} failed (run apt-get update first?)"
fi
version="$(slurmctld -V) (Debian $(dpkg-query -W -f='${Version}' slurmctld 2>/dev/null || echo ?))"
step "$version; building the host (make build)"
(cd "$repo" && make -s build GO="${GO:-go}") || fail "make build failed"
host=$repo/bin/host

step "starting munged, slurmctld and slurmd in $dir"
mkdir -p "$dir"/{munge,state,spool,log,results-slurm,results-single}
chmod 755 "$dir" "$dir/munge" # munged wants its socket's folders searchable by all
: >"$dir/pids"
dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge.key"
munged -F --key-file="$dir/munge.key" --socket="$dir/munge/socket" --pid-file="$dir/munge/munged.pid" \
	--seed-file="$dir/munge/seed" >"$dir/log/munged.log" 2>&1 &
echo $! >>"$dir/pids"
for _ in $(seq 50); do [ -S "$dir/munge/socket" ] && break; sleep 0.1; done
munge -S "$dir/munge/socket" -n | unmunge -S "$dir/munge/socket" >/dev/null || { showlogs; fail "munged does not answer"; }

node=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
cat >"$dir/slurm.conf" <<EOF
# Generated by scripts/test-slurm.sh: one node, this machine.
ClusterName=optlabtest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
# Stand-in GPUs: the gpu plugin drops GPUs without a device file.
printf 'Name=gpu File=/dev/null\nName=gpu File=/dev/zero\n' >"$dir/gres.conf"
export SLURM_CONF=$dir/slurm.conf
slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
echo $! >>"$dir/pids"
slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
echo $! >>"$dir/pids"
state=
for _ in $(seq 60); do
	state=$(sinfo -h -N -n "$node" -o %T 2>/dev/null || true)
	[ "$state" = idle ] && break
	sleep 1
done
[ "$state" = idle ] || { showlogs; fail "node $node is \"$state\" after 60 s, want idle (logs above)"; }
sinfo -N -o "%N %T %c CPUs %G"

# The experiment: quickstart's model and methods, smaller.
exp=$dir/slurm-test.toml
cat >"$exp" <<'EOF'
name = "slurm-test"
description = "scripts/test-slurm.sh: small CNN on UCI digits, SGD vs SAM vs OT-MDR"

[data]
dataset = "uci-digits"
test_fraction = 0.2

[model]
archs = ["cnn"]

[train]
epochs = 3
batch_size = 64
seeds = [1, 2]
threads = 1

[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
weight_decay = 5e-4

[train.schedule]
kind = "cosine"

[eval]
temperature = "test-halves"
every_epochs = 1

[[method]]
name = "SGD"
plugin = "sgd"

[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = 0.05

[[method]]
name = "OT-MDR"
plugin = "otmdr"
[method.params]
rho1 = 0.05
EOF
"$host" check "$exp" >"$dir/log/check.out" 2>&1 || { cat "$dir/log/check.out" >&2; fail "host check $exp"; }
runs=$(sed -n 's/^\([0-9]*\) runs × .*/\1/p' "$dir/log/check.out")

# submit [-x] NAME SBATCH-OPTION…: submits scripts/slurm-array.sh for the
# experiment from the checkout (its logs are $dir/log/NAME-<job>_<task>.out),
# polls until the job has left the queue, and fails unless every task
# completed with status 0 (with -x: unless every task failed). It sets job
# to the job's id. (sbatch --wait
# would do, but it polls at growing intervals: here it returned some 30 s
# after the job had ended.)
submit() {
	local want='COMPLETED (exit 0:0)' name states
	if [ "$1" = -x ]; then
		want='FAILED (exit [1-9][0-9]*:0)'
		shift
	fi
	name=$1
	shift
	job=$(cd "$repo" && EXPERIMENT=$exp sbatch --parsable --job-name="$name" --cpus-per-task=1 \
		--output="$dir/log/%x-%A_%a.out" "$@" scripts/slurm-array.sh --device cpu --results "$dir/results-slurm") ||
		fail "sbatch $* scripts/slurm-array.sh failed (above)"
	for _ in $(seq 1800); do
		[ -z "$(squeue -h -j "$job" 2>/dev/null)" ] && break
		sleep 1
	done
	[ -z "$(squeue -h -j "$job")" ] || fail "job $job still queued or running after 30 min"
	states=$(scontrol -o show job "$job" | sed -n 's/.* ArrayTaskId=\([^ ]*\) .*JobState=\([^ ]*\) .*ExitCode=\([^ ]*\) .*/task \1: \2 (exit \3)/p')
	if [ -z "$states" ] || grep -v -q -x "task [0-9]*: $want" <<<"$states"; then
		for f in "$dir/log/$name-$job"_*.out; do
			[ -f "$f" ] && { echo "--- $f (end)"; tail -n 20 "$f"; }
		done >&2
		echo "$states" >&2
		fail "job $job: want every task $want (task logs above)"
	fi
	for f in "$dir/log/$name-$job"_*.out; do
		echo "--- $(basename "$f")"
		grep -E '^(host|slurm-array.sh):' "$f" || true
	done
}

step "sbatch --array=0-$((shards - 1)) scripts/slurm-array.sh ($runs runs in $shards shards), waiting"
s=$(date +%s)
submit optlab --array="0-$((shards - 1))"
slurm_s=$(($(date +%s) - s))
shardfiles=()
for i in $(seq 1 "$shards"); do
	f=$dir/results-slurm/slurm-test/runs-${i}of${shards}.jsonl
	[ -f "$f" ] || fail "shard $i/$shards wrote no $f"
	shardfiles+=("$f")
done

# A task submitted alone again (as after a failure) must run its own shard,
# and skip the runs that shard finished; without SHARDS, it must refuse.
step "array job $job done in $slurm_s s; submitting task 1 again without SHARDS: it must refuse"
submit -x refused --array=1
grep -q 'set SHARDS' "$dir/log/refused-${job}_1.out" || fail "task 1 without SHARDS: no message saying to set SHARDS"
step "submitting task 1 again with SHARDS=$shards: it must skip its finished runs"
sum=$(cat "${shardfiles[@]}" | md5sum)
SHARDS=$shards submit again --array=1
skipped=$(grep -c 'already finished' "$dir/log/again-${job}_1.out" || true)
[ "$skipped" = "$(wc -l <"${shardfiles[1]}")" ] ||
	{ cat "$dir/log/again-${job}_1.out" >&2; fail "the re-submitted task skipped $skipped runs, want the $(wc -l <"${shardfiles[1]}") of ${shardfiles[1]}"; }
[ "$(cat "${shardfiles[@]}" | md5sum)" = "$sum" ] || fail "the re-submitted task changed the shard files"

step "the same grid in one process (host run)"
s=$(date +%s)
"$host" run -q --device cpu --results "$dir/results-single" "$exp" >"$dir/log/single.out" 2>&1 ||
	{ tail -n 30 "$dir/log/single.out" >&2; fail "host run (one process) failed"; }
single_s=$(($(date +%s) - s))
single=$dir/results-single/slurm-test/runs.jsonl

step "comparing (one process: $single_s s)"
# One line per field of every record, "KEY FIELD = VALUE" (the metrics as
# metrics.acc, …), sorted by run key, without the wall-clock fields. jq
# prints each number so that it reads back as the same float64: equal lines
# mean bitwise-equal metrics.
norm() {
	jq -r -s -S 'sort_by(.key)[] | del(.wall_seconds, .seconds_per_epoch, .finished) | .key as $k
		| paths(scalars) as $p | "\($k) \($p | map(tostring) | join(".")) = \(getpath($p) | tojson)"' "$@" | LC_ALL=C sort
}
norm "${shardfiles[@]}" >"$dir/slurm.norm"
norm "$single" >"$dir/single.norm"
n=$(jq -s length "$single")
[ "$n" = "$runs" ] || fail "one process recorded $n runs, want $runs"
n=$(jq -s 'map(.key) | unique | length' "${shardfiles[@]}")
if [ "$n" != "$runs" ] || [ "$(jq -s length "${shardfiles[@]}")" != "$runs" ]; then
	fail "the shards recorded $(jq -s length "${shardfiles[@]}") records of $n runs, want $runs runs, each once"
fi
bad=$(jq -r 'select(.status != "ok") | .key + ": " + .error' "$single" "${shardfiles[@]}")
[ -z "$bad" ] || fail "failed runs: $bad"
if ! diff "$dir/single.norm" "$dir/slurm.norm" >"$dir/records.diff"; then
	grep '^[<>]' "$dir/records.diff" | head -n 40 >&2
	fail "the shards' records differ from the one-process records ($(grep -c '^<' "$dir/records.diff") fields; above, the first ones: < one process, > Slurm)"
fi
# The training curves (curves/<run>.csv), but for their seconds column.
nosec() {
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "seconds") s = i }
		{ for (i = 1; i <= NF; i++) if (i != s) printf "%s%s", (i > 1 ? "," : ""), $i; print "" }' "$1"
}
for f in "$dir/results-single/slurm-test/curves"/*.csv; do
	g=$dir/results-slurm/slurm-test/curves/$(basename "$f")
	[ -f "$g" ] || fail "the shards wrote no $g"
	diff <(nosec "$f") <(nosec "$g") >&2 || fail "curves differ: $f, $g (diff above: < one process, > Slurm)"
done
# host table's CSV has one row per method, column group and metric; the
# wall-clock metrics (column 4) differ by nature.
table() { "$host" table "$@" --format csv | awk -F, '$4 != "seconds_per_epoch" && $4 != "wall_seconds"'; }
table "${shardfiles[@]}" >"$dir/slurm.csv" || fail "host table of the shard files"
table "$single" >"$dir/single.csv" || fail "host table of $single"
if ! diff -u "$dir/single.csv" "$dir/slurm.csv" >&2; then
	fail "host table of the shard files differs from the one-process table"
fi
"$host" table "${shardfiles[@]}"
echo
echo "ok: $runs runs in $shards shards on $version: records and table equal to one process" \
	"(array $slurm_s s, one process $single_s s, whole script $(elapsed))"
