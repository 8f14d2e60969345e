# optlab: the README's two commands are `make demo` and `make test`.
# Each prepares everything it needs: libtorch (Debian's libtorch-dev when
# none is found), gotch prepared for it, the host and the plugins.

GO      ?= go
PLUGIN_DIRS := $(wildcard plugins/*/cmd/*)
BIN     := bin
EXPERIMENT ?= experiments/quickstart.toml

.PHONY: all gotch build plugins demo test vet lint bench proto proto-python python-deps test-python devkit devkit-proof clean

all: build

# Prepare gotch for the libtorch on this machine (a no-op when up to date).
gotch:
	@cd tools/gotchprep && $(GO) run . -out $(CURDIR)/build/gotch -uses $(CURDIR)

build: gotch plugins
	$(GO) build -o $(BIN)/host ./host

plugins: gotch
	@mkdir -p $(BIN)/plugins
	@for d in $(PLUGIN_DIRS); do $(GO) build -o $(BIN)/plugins/$$(basename $$d) ./$$d || exit 1; done

demo: build
	$(BIN)/host run $(EXPERIMENT)

# sdk/ (the plugin SDK), examples/ (a third-party plugin) and
# tools/gotchprep are modules of their own.
MODULES := sdk examples tools/gotchprep

vet: gotch
	$(GO) vet ./...
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

# staticcheck, pinned; `go run` fetches it like any module. Findings are
# fixed, or silenced where they are meant with a //lint:ignore that says why
# (and sdk/optimtest/staticcheck.conf).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# errcheck, pinned: every unchecked error outside tests is a finding, but for
# the terminal writes listed (with the reason) in errcheck-excludes.txt.
ERRCHECK := github.com/kisielk/errcheck@v1.9.0

lint: gotch
	$(GO) run $(STATICCHECK) ./...
	$(GO) run $(ERRCHECK) -ignoretests -exclude $(CURDIR)/errcheck-excludes.txt ./...
	@for m in $(MODULES); do (cd $$m && $(GO) run $(STATICCHECK) ./... && $(GO) run $(ERRCHECK) -ignoretests -exclude $(CURDIR)/errcheck-excludes.txt ./...) || exit 1; done

# -timeout 30m: a package's own limit, not Go's default 10 minutes, far
# above what any package takes (the experiments package, the longest, about
# 1.5 minutes alone on an idle 2-core machine, 2 beside the others in `make
# test`) so that the suite still passes on a machine loaded by other builds.
# OMP_WAIT_POLICY=PASSIVE (unless set): go test runs two packages at once
# and the experiments package two host processes, so libgomp's threads
# would spin at every barrier while their partner thread waits for a core
# (docs/BENCHMARKS.md).
test: export OMP_WAIT_POLICY ?= PASSIVE
test: build vet lint test-python devkit
	$(GO) test -count=1 -timeout 30m ./...
	@for m in $(MODULES); do (cd $$m && $(GO) test -count=1 -timeout 30m ./...) || exit 1; done

# The Python plugin SDK (sdk/python) runs on Debian's python3-grpcio and
# python3-protobuf for /usr/bin/python3, and the PyTorch interop tests on
# python3-torch; python-deps installs them with apt
# when they are missing and this runs as root (as gotchprep does libtorch).
PYTHON := /usr/bin/python3

python-deps:
	@scripts/python-deps.sh

test-python: python-deps
	$(PYTHON) -m unittest discover -s sdk/python/tests

# Regenerate the protocol's Go code from sdk/proto (needs protoc,
# protoc-gen-go and protoc-gen-go-grpc on PATH).
proto: proto-python
	cd sdk && $(GO) generate ./internal/pluginpb

# Regenerate the Python SDK's protobuf code (sdk/python/optlab/_pb) from
# sdk/proto and sdk/python/proto (needs protoc; the gRPC service glue is
# written by hand in sdk/python/optlab/_runtime.py).
PY_PB := sdk/python/optlab/_pb
proto-python:
	@tmp=$$(mktemp -d) && \
	protoc -I sdk/proto --python_out=$$tmp optlab/plugin/v1/plugin.proto && \
	protoc -I sdk/python/proto --python_out=$$tmp optlab/python/v1/runtime.proto && \
	cp $$tmp/optlab/plugin/v1/plugin_pb2.py $$tmp/optlab/python/v1/runtime_pb2.py $(PY_PB)/ && \
	rm -rf $$tmp

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./bench/...

# The device kit (docs/BENCHMARKS.md, "GPU"): the binaries, test binaries,
# benchmark scripts and libtch sources that scripts/devkit-run.sh needs on a
# GPU machine with no Go, packed into build/devkit/optlab-devkit.tar.xz; it
# fails above 56 MiB. `make test` makes it too (about a minute once
# `make build` has run).
devkit: gotch
	@GO=$(GO) scripts/devkit-pack.sh

# The kit run end to end as on the GPU machine, here, in a bare environment:
# no network, no Go toolchain or caches, env -i (scripts/devkit-proof.sh).
devkit-proof: devkit
	@scripts/devkit-proof.sh

clean:
	rm -rf $(BIN) build
