# prep — build, test, demo, benchmarks.
GO      ?= go
BIN     := bin/prep
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build demo test bench fuzz lint clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/prep

# The main job end to end on bundled real data: plan -> convert -> verify -> load.
demo: build
	./scripts/demo.sh

# Everything CI runs.
test: lint
	@/usr/bin/python3 -c 'import numpy' 2>/dev/null || \
		echo "note: /usr/bin/python3 cannot import numpy: TestPython (the Python binding) is skipped; apt-get install python3-numpy"
	$(GO) test -race -count=1 ./...

bench:
	./scripts/bench.sh

# Every native fuzz target in the module (footer, page header, shard format,
# ...), FUZZTIME each (default 10s): make fuzz FUZZTIME=5m
fuzz:
	./scripts/fuzz.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
