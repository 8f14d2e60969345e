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
# Only what is missing. torch from the package built on the libtorch that
# is installed: with Debian's CUDA build (libtorch-cuda-dev, contrib) that is
# python3-torch-cuda; python3-torch would make apt replace the CUDA build
# with the CPU one under the prepared gotch.
torchpkg=python3-torch
if command -v dpkg-query >/dev/null 2>&1 &&
	dpkg-query -W -f='${Status}\n' libtorch-cuda-dev python3-torch-cuda 2>/dev/null | grep -q '^install ok installed'; then
	torchpkg=python3-torch-cuda
fi
pkgs=""
if [ -x "$PY" ]; then
	"$PY" -c 'import grpc' 2>/dev/null || pkgs="$pkgs python3-grpcio"
	"$PY" -c 'import google.protobuf' 2>/dev/null || pkgs="$pkgs python3-protobuf"
	"$PY" -c 'import torch' 2>/dev/null || pkgs="$pkgs $torchpkg"
	pkgs=${pkgs# }
else
	pkgs="python3 python3-grpcio python3-protobuf $torchpkg"
fi
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
