# optlab: the README's two commands are `make demo` and `make test`.
# Each prepares everything it needs: libtorch (Debian's libtorch-dev when
# none is found), gotch prepared for it, the host and the plugins.

GO      ?= go
PLUGIN_DIRS := $(wildcard plugins/*/cmd/*)
BIN     := bin
EXPERIMENT ?= experiments/quickstart.toml

.PHONY: all gotch build plugins demo test vet bench proto clean

all: build

# Prepare gotch for the libtorch on this machine (a no-op when up to date).
gotch:
	@cd tools/gotchprep && $(GO) run . -out $(CURDIR)/build/gotch

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

test: build vet
	$(GO) test -count=1 ./...
	@for m in $(MODULES); do (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

# Regenerate the protocol's Go code from sdk/proto (needs protoc,
# protoc-gen-go and protoc-gen-go-grpc on PATH).
proto:
	cd sdk && $(GO) generate ./internal/pluginpb

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./bench/...

clean:
	rm -rf $(BIN) build
