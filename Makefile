# optlab: the README's two commands are `make demo` and `make test`.
# Each prepares everything it needs: libtorch (Debian's libtorch-dev when
# none is found), gotch prepared for it, the host and the plugins.

GO      ?= go
PLUGIN_DIRS := $(wildcard plugins/*/cmd/*)
BIN     := bin
EXPERIMENT ?= experiments/quickstart.toml

.PHONY: all gotch build plugins demo test vet bench clean

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

vet: gotch
	$(GO) vet ./...
	cd tools/gotchprep && $(GO) vet ./...

test: build vet
	$(GO) test -count=1 ./...
	cd tools/gotchprep && $(GO) test -count=1 ./...

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 20x ./bench/...

clean:
	rm -rf $(BIN) build
