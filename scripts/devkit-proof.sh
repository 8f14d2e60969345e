#!/usr/bin/env bash
# devkit-proof.sh: run the device kit end to end here, as the GPU machine
# would, before any GPU exists (`make devkit-proof`, as root): in a copy of
# the working tree as the device tool sends it (tracked and untracked files
# git does not ignore, plus the carried build/devkit), with no network
# (unshare -n: only the loopback interface), no Go toolchain, module cache or build cache (tmpfs over
# GOROOT, GOPATH and GOCACHE), and an empty environment (env -i, a minimal
# PATH), this machine's /usr/bin/python3 and its torch standing in for the
# device's PyTorch. Without a GPU every CUDA step must say "no-gpu" and go
# on.
#
# Usage: scripts/devkit-proof.sh [--root DIR]
#   --root DIR   run inside a chroot (e.g. /work/chroots/trixie-cuda, made by
#                scripts/test-libtorch.sh) whose /usr/bin/python3 has torch
# Environment: PROOF_OUT (default build/devkit-proof: the result files of
# devkit-run.sh, summary.txt first, and proof.txt, the whole output),
# DEVKIT_BUDGET (default 2400) and DEVKIT_SLOWDOWN (the factor for every
# step's timeout, default 5): this machine has 2 cores, shared, against the
# GPU machine's 16; DEVKIT_TEST_ARGS (flags for the test binaries).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=""
[ "${1:-}" = --root ] && root=$2
[ "$(id -u)" = 0 ] || { echo "devkit-proof.sh: run as root (unshare, mount)" >&2; exit 2; }
[ -f "$repo/build/devkit/optlab-devkit.tar.xz" ] || { echo "devkit-proof.sh: no kit: run \`make devkit\` first" >&2; exit 2; }
out=${PROOF_OUT:-$repo/build/devkit-proof}
base=$root/tmp/devkit-proof
tree=$base/tree
rm -rf "$base" "$out"
mkdir -p "$tree" "$out" "$base/out"
# The working tree as the device tool sends it, and the carried kit.
git -C "$repo" ls-files -z -co --exclude-standard | tar -C "$repo" --null -T - --ignore-failed-read -cf - | tar -C "$tree" -xf -
mkdir -p "$tree/build/devkit"
cp "$repo/build/devkit/optlab-devkit.tar.xz" "$tree/build/devkit/"
echo "tree: $(du -sh "$tree" | cut -f1) with the kit ($(du -h "$repo/build/devkit/optlab-devkit.tar.xz" | cut -f1))"

goroot=$(go env GOROOT 2>/dev/null || echo /usr/local/go)
gopath=$(go env GOPATH 2>/dev/null || echo /root/go)
gocache=$(go env GOCACHE 2>/dev/null || echo /root/.cache/go-build)
# Inside the new namespaces: the Go paths hidden, then devkit-run.sh with an
# empty environment (in the chroot, when one is given).
{
	echo "set -e"
	# The new network namespace has only lo, down: up, for the tests that
	# serve HTTP on 127.0.0.1 (the GPU machine has its lo).
	echo "ip link set lo up"
	for d in "$goroot" "$gopath" "$gocache"; do
		echo "[ -d '$root$d' ] && mount -t tmpfs -o size=1m tmpfs '$root$d'"
	done
	echo "exec ${root:+chroot $root} env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin OUT=/tmp/devkit-proof/out" \
		"PYTHON=/usr/bin/python3 OMP_WAIT_POLICY=PASSIVE DEVKIT_BUDGET=${DEVKIT_BUDGET:-2400} DEVKIT_SLOWDOWN=${DEVKIT_SLOWDOWN:-5}" \
		"${DEVKIT_TEST_ARGS:+DEVKIT_TEST_ARGS='$DEVKIT_TEST_ARGS'} nice -n 10 bash /tmp/devkit-proof/run.sh"
} >"$base/inner.sh"
cat >"$base/run.sh" <<EOF
cd /tmp/devkit-proof/tree
echo "bare environment: go on PATH: \$(command -v go || echo none); $goroot holds \$(ls $goroot | wc -l) entries, $gopath \$(ls $gopath | wc -l), $gocache \$(ls $gocache | wc -l); network interfaces: \$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')(\$(getent hosts deb.debian.org >/dev/null 2>&1 && echo "deb.debian.org resolves" || echo "no name resolves")); environment: \$(env | cut -d= -f1 | sort | tr '\n' ' ')"
exec bash scripts/devkit-run.sh
EOF
b=$(date +%s)
if [ -n "$root" ]; then
	for m in proc sys dev; do mount --bind "/$m" "$root/$m"; done
	trap 'for m in proc sys dev; do umount -l "$root/$m" 2>/dev/null || true; done' EXIT
fi
set +e
unshare -n -m --propagation private bash "$base/inner.sh" 2>&1 | tee "$base/out/proof.txt"
rc=${PIPESTATUS[0]}
cp "$base"/out/* "$out"/
echo "devkit-proof.sh: $(($(date +%s) - b)) s; result files in $out"
exit "$rc"
