#!/usr/bin/env bash
# test-libtorch2.sh: build optlab, run `make demo` and `make test` on Debian
# 13 ("trixie") and its libtorch 2.6, in a chroot on this machine.
#
# Usage (as root): scripts/test-libtorch2.sh [CHROOT_DIR]   (default /var/tmp/optlab-trixie)
#
# It makes the chroot with `debootstrap --variant=minbase trixie` (kept for
# the next run), installs libtorch-dev, g++, make and git inside, copies in
# this machine's Go toolchain (/usr/local/go) and module cache and the
# repository's committed tree (git archive HEAD), then runs, inside, `make
# demo` and `make test` exactly as a user would, timing each step. /proc,
# /dev and /sys are bind-mounted for the duration and unmounted on exit.
set -euo pipefail
root=${1:-/var/tmp/optlab-trixie}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "test-libtorch2.sh: run as root (debootstrap, chroot, mount)" >&2; exit 2; }
step() { echo "== $(date -u +%H:%M:%S) $*"; }
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 )) s"; }

command -v debootstrap >/dev/null || { step "installing debootstrap"; DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
if [ ! -x "$root/usr/bin/apt-get" ]; then
	step "debootstrap trixie into $root"
	debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
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
step "apt-get install libtorch-dev g++ make git inside ($(elapsed))"
chroot "$root" apt-get update -q
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q libtorch-dev g++ make git ca-certificates
echo "libtorch inside: $(chroot "$root" dpkg-query -W -f='${Version}' libtorch-dev)"

step "copying Go, the module cache and the repository ($(elapsed))"
rm -rf "$root/usr/local/go" "$root/optlab"
cp -a "$(go env GOROOT)" "$root/usr/local/go"
mkdir -p "$root/root/go/pkg"
rm -rf "$root/root/go/pkg/mod"
cp -a "$(go env GOMODCACHE)" "$root/root/go/pkg/mod"
mkdir -p "$root/optlab"
git -C "$repo" archive HEAD | tar -x -C "$root/optlab"

run() { chroot "$root" env -i HOME=/root PATH=/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local TERM=dumb bash -c "cd /optlab && $*"; }
step "make demo inside ($(elapsed))"
s=$(date +%s); run make demo; demo=$(( $(date +%s) - s ))
step "make test inside ($(elapsed))"
s=$(date +%s); run make test; test=$(( $(date +%s) - s ))
step "done: make demo ${demo} s (with the gotch build), make test ${test} s, whole script $(elapsed)"
