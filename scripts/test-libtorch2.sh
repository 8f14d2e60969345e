#!/usr/bin/env bash
# test-libtorch2.sh: the earlier name of `scripts/test-libtorch.sh trixie`
# (Debian 13, libtorch 2.6), kept for the commands already written down.
# Usage (as root): scripts/test-libtorch2.sh [CHROOT_DIR]
exec "$(dirname "$0")/test-libtorch.sh" trixie ${1:+--root "$1"}
