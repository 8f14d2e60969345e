#!/usr/bin/env bash
# test-libtorch.sh: build optlab and run `make demo` and `make test` against
# the libtorch of one Debian release, in a chroot on this machine.
#
# Usage (as root):
#   scripts/test-libtorch.sh bookworm|trixie|sid [--cuda] [options]
#     bookworm   Debian 12, libtorch 1.13 (what CI runs)
#     trixie     Debian 13, libtorch 2.6
#     sid        Debian unstable, the newest libtorch (2.14 on 2026-11-28)
#     --cuda     (trixie) the CUDA build, libtorch-cuda-dev from contrib, with
#                the CUDA runtime, cuBLAS and cuDNN from non-free: it must
#                link and run on this machine without a GPU
#   options:
#     --root DIR        the chroot (default /work/chroots/<suite>[-cuda]; kept
#                       for the next run, with its packages and Go build cache)
#     --steps LIST      comma-separated, in order, from: build, demo, test,
#                       gotest (default demo,test)
#     --packages PKGS   what the gotest step runs (default ./host/...):
#                       `go test -count=1 -p 1 PKGS` (after `make gotch`)
#     --worktree        copy the working tree (tracked and untracked files
#                       git does not ignore) instead of the committed tree
#
# It makes the chroot with `debootstrap --variant=minbase <suite>`, installs
# libtorch-dev (or libtorch-cuda-dev), g++, make and git inside, copies in
# this machine's Go toolchain and module cache and the repository, then runs
# each step inside exactly as a user would (`make demo`, `make test`), with
# a log per step and the time of each. /proc, /dev and /sys are
# bind-mounted for the duration and unmounted on exit. The last line sums up:
#   == summary <suite> libtorch <version>: demo pass 83 s, test pass 317 s
# and the same line is appended to <root>.runs. The exit status is that of
# the first step that failed (the later steps still run).
set -uo pipefail
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
suite="" cuda=0 root="" steps="demo,test" packages="./host/..." worktree=0
while [ $# -gt 0 ]; do
	case $1 in
	bookworm | trixie | sid) suite=$1 ;;
	--cuda) cuda=1 ;;
	--root) root=$2; shift ;;
	--steps) steps=$2; shift ;;
	--packages) packages=$2; shift ;;
	--worktree) worktree=1 ;;
	-h | --help) usage ;;
	*) echo "test-libtorch.sh: unknown argument $1" >&2; usage ;;
	esac
	shift
done
[ -n "$suite" ] || usage
if [ $cuda = 1 ] && [ "$suite" = bookworm ]; then
	echo "test-libtorch.sh: Debian 12 has no CUDA build of libtorch (use trixie --cuda)" >&2
	exit 2
fi
name=$suite
[ $cuda = 1 ] && name=$suite-cuda
root=${root:-/work/chroots/$name}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test-libtorch.sh: run as root (debootstrap, chroot, mount)" >&2; exit 2; }
logs=$root.logs
mkdir -p "$logs"
step() { echo "== $(date -u +%H:%M:%S) $*"; }
t0=$(date +%s)
elapsed() { echo "$(($(date +%s) - t0)) s"; }
set -e

command -v debootstrap >/dev/null || { step "installing debootstrap"; DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
if [ ! -x "$root/usr/bin/apt-get" ]; then
	step "debootstrap $suite into $root"
	debootstrap --variant=minbase "$suite" "$root" http://deb.debian.org/debian
fi
mounts=()
cleanup() { for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done; }
trap cleanup EXIT
for m in proc sys dev dev/pts; do
	mkdir -p "$root/$m"
	mount --bind "/$m" "$root/$m"
	mounts+=("$root/$m")
done
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's CA bundle: `go run` fetches staticcheck (make lint) through
# whatever TLS set-up this machine has.
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/optlab-host-ca.crt" 2>/dev/null || true
# A testing or unstable mirror's Release file expires within a week; a
# machine whose clock runs ahead of the mirror would refuse it.
echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99optlab-no-valid-until"
pkgs="g++ make git ca-certificates"
if [ $cuda = 1 ]; then
	# contrib has the CUDA build of libtorch, non-free the CUDA libraries.
	for f in "$root/etc/apt/sources.list" "$root"/etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		sed -i -E '/^(deb|Components:)/{/contrib/!s/main/main contrib non-free non-free-firmware/}' "$f"
	done
	pkgs="libtorch-cuda-dev $pkgs"
else
	pkgs="libtorch-dev $pkgs"
fi
step "apt-get install $pkgs inside ($(elapsed))"
chroot "$root" apt-get update -q
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $pkgs
# The package installed above (the other can be known to dpkg, with no version).
pkg=libtorch-dev
[ $cuda = 1 ] && pkg=libtorch-cuda-dev
version=$(chroot "$root" dpkg-query -W -f='${Version}' $pkg)
echo "libtorch inside: $version"

step "copying Go, the module cache and the repository ($(elapsed))"
rm -rf "$root/usr/local/go" "$root/optlab"
cp -a "$(go env GOROOT)" "$root/usr/local/go"
mkdir -p "$root/root/go/pkg"
rm -rf "$root/root/go/pkg/mod"
cp -a "$(go env GOMODCACHE)" "$root/root/go/pkg/mod"
mkdir -p "$root/optlab"
if [ $worktree = 1 ]; then
	git -C "$repo" ls-files -z -co --exclude-standard | tar -C "$repo" --null -T - --ignore-failed-read -c -f - | tar -x -C "$root/optlab"
	echo "copied the working tree of $(git -C "$repo" rev-parse --short HEAD) (with uncommitted changes)"
else
	git -C "$repo" archive HEAD | tar -x -C "$root/optlab"
	echo "copied commit $(git -C "$repo" rev-parse --short HEAD)"
fi
set +e

inside() {
	chroot "$root" env -i HOME=/root PATH=/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		GOTOOLCHAIN=local GOFLAGS=-buildvcs=false TERM=dumb SSL_CERT_FILE=/etc/optlab-host-ca.crt \
		${OMP_WAIT_POLICY:+OMP_WAIT_POLICY=$OMP_WAIT_POLICY} bash -c "cd /optlab && $*"
}
summary="$name libtorch $version:"
status=0
for s in ${steps//,/ }; do
	case $s in
	build | demo | test) cmd="make $s" ;;
	gotest) cmd="make gotch && OMP_WAIT_POLICY=\${OMP_WAIT_POLICY:-PASSIVE} go test -count=1 -p 1 -timeout 60m $packages" ;;
	*) echo "test-libtorch.sh: unknown step $s" >&2; exit 2 ;;
	esac
	step "$cmd inside ($(elapsed)); log $logs/$s.log"
	b=$(date +%s)
	inside "$cmd" 2>&1 | tee "$logs/$s.log"
	rc=$?
	d=$(($(date +%s) - b))
	if [ $rc = 0 ]; then r=pass; else r="FAIL (exit $rc)"; [ $status != 0 ] || status=$rc; fi
	step "$s: $r in $d s"
	summary="$summary $s $r $d s,"
done
summary="${summary%,} (whole script $(elapsed), $(date -u +%Y-%m-%d))"
echo "== summary $summary"
echo "$summary" >>"$root.runs"
exit $status
