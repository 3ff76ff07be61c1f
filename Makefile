# prep — build, test, demo, benchmarks.
GO      ?= go
BIN     := bin/prep
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

PYLIB   := gpuload/python/gpuload/libgpuload.so

.PHONY: all build python demo test test-python test-s3 duckdb bench bench-ab samebytes fuzz lint clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/prep

# The Python package's native library, built into the package of this
# checkout (PYTHONPATH=gpuload/python); pip install ./gpuload/python does the
# same for an installed package.
python:
	$(GO) build -buildmode=c-shared -o $(PYLIB) ./gpuload/capi
	@rm -f $(PYLIB:.so=.h)

# The main job end to end on bundled real data: plan -> convert -> verify -> load.
demo: build
	./scripts/demo.sh

# Everything CI runs.
test: lint
	@/usr/bin/python3 -c 'import numpy' 2>/dev/null || \
		echo "note: /usr/bin/python3 cannot import numpy: TestPython (the Python binding) is skipped; apt-get install python3-numpy"
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory duckdb; else \
		echo "note: npm not found: the DuckDB comparison tests (internal/duckdbtest) are skipped; apt-get install nodejs npm"; fi
	$(GO) test -race -count=1 ./...
	@$(MAKE) --no-print-directory test-python

# The Python package's PyTorch dataset, examples/train.py (DDP on CPU) and
# a pip install into a venv, against sets made by bin/prep, with
# /usr/bin/python3 and Debian's python3-torch, python3-numpy and python3-venv.
test-python: build python
	@if /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then \
		export PREP=$(CURDIR)/$(BIN) PYTHONDONTWRITEBYTECODE=1; \
		/usr/bin/python3 gpuload/python/tests/test_torch.py && \
		/usr/bin/python3 gpuload/python/tests/test_dataset.py && \
		/usr/bin/python3 gpuload/python/tests/test_example.py && \
		/usr/bin/python3 gpuload/python/tests/test_packed_example.py && \
		/usr/bin/python3 gpuload/python/tests/test_install.py; \
	else \
		echo "note: /usr/bin/python3 cannot import torch and numpy: the PyTorch dataset tests are skipped; apt-get install python3-torch python3-numpy"; \
	fi

# DuckDB (@duckdb/node-api, the exact version pinned in
# test/duckdb/package.json, with its prebuilt native bindings) into
# .cache/duckdb, for the tests that check prep's output against DuckDB's
# reading of the same Parquet files (internal/duckdbtest). Needs node and npm
# (Debian: apt-get install nodejs npm); does nothing when that version is
# already installed. Without it those tests skip, except under CI=true.
DUCKDB_DIR := .cache/duckdb
duckdb:
	@if cmp -s test/duckdb/package.json $(DUCKDB_DIR)/package.json && \
		[ -f $(DUCKDB_DIR)/node_modules/@duckdb/node-api/package.json ]; then \
		echo "duckdb: installed in $(DUCKDB_DIR)"; \
	else \
		command -v npm >/dev/null || { echo "make duckdb: npm not found (Debian: apt-get install nodejs npm)" >&2; exit 1; }; \
		mkdir -p $(DUCKDB_DIR) && cp test/duckdb/package.json $(DUCKDB_DIR)/package.json && \
		npm install --prefix $(DUCKDB_DIR) --no-package-lock --no-audit --no-fund --loglevel=error && \
		echo "duckdb: installed in $(DUCKDB_DIR)"; \
	fi

# Opt-in: the object-store tests against a real S3 server (SeaweedFS, built
# once into .cache/weed) on 127.0.0.1. Not part of CI.
test-s3:
	./scripts/test-s3.sh

bench:
	./scripts/bench.sh

# convert of a git revision (REV, default the merge base with main) against
# the working tree: alternated A/B of throughput and peak RSS, and
# byte-identical shards for the bench plans and the field cases.
bench-ab:
	./scripts/bench-ab.sh $(REV)

samebytes:
	./scripts/samebytes.sh $(REV)

# Every native fuzz target in the module (footer, page header, shard format,
# ...), FUZZTIME each (default 10s): make fuzz FUZZTIME=5m
fuzz:
	./scripts/fuzz.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin $(PYLIB) gpuload/python/build gpuload/python/*.egg-info
