#!/bin/sh
# python-deps: make sure /usr/bin/python3 can import grpc and protobuf, the
# two packages the Python plugin SDK (sdk/python) needs, and torch, which
# the tests that load optlab's checkpoints in PyTorch use (Debian's
# python3-torch is built on the same libtorch as libtorch-dev). When it
# cannot and this runs as root, install Debian's packages with apt-get (as
# tools/gotchprep does for libtorch); else say how to.
set -eu
PY=/usr/bin/python3
if [ -x "$PY" ] && "$PY" -c 'import grpc, google.protobuf, torch' 2>/dev/null; then
	exit 0
fi
pkgs="python3-grpcio python3-protobuf python3-torch"
[ -x "$PY" ] || pkgs="python3 $pkgs"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	echo "python-deps: $PY cannot import grpc, protobuf and torch: run \`sudo apt-get install $pkgs\`" >&2
	exit 1
fi
echo "python-deps: installing Debian's $pkgs with apt-get …" >&2
export DEBIAN_FRONTEND=noninteractive
# Update the package lists only when the install fails without (a fresh
# machine has none).
apt-get install -y -q $pkgs >&2 || { apt-get update -q >&2 && apt-get install -y -q $pkgs >&2; }
"$PY" -c 'import grpc, google.protobuf, torch'
