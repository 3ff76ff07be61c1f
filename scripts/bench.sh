#!/usr/bin/env bash
# make bench: build prep and the benchmark harnesses, generate the inputs
# (deterministic, cached under .cache/bench, never committed), measure every
# stage against its peers and the machine's limits in the same run, and write
# BENCHMARKS.md. Budget: under 15 minutes on 2 cores.
#
# The peers (arrow-go, parquet-go GenericReader) live in the separate module
# bench/ so they never enter the prep binary's module graph. A harness that
# does not build at this commit is reported as "not measured" in
# BENCHMARKS.md; the script goes on with the rest.
#
# Environment: GO (default go), BENCH_RUNS (default 5), BENCH_ONLY (comma
# list of stages: convert (with its peers and limits), plan, verify, gpuload;
# verify and gpuload read the shard set the convert stage wrote).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
CACHE=.cache/bench
BIN=$CACHE/bin
mkdir -p "$BIN"

build() { # build NAME DIR PKG
	local name=$1 dir=$2 pkg=$3
	rm -f "$BIN/$name"
	if ! (cd "$dir" && $GO build -o "$OLDPWD/$BIN/$name" "$pkg") 2>"$CACHE/build-$name.log"; then
		echo "bench: $name did not build; its rows will say not measured:" >&2
		sed 's/^/  /' "$CACHE/build-$name.log" | head -20 >&2
	fi
}

echo "bench: building" >&2
build prep . ./cmd/prep
build peers bench ./cmd/peers
build planbench bench ./cmd/planbench
build loadbench bench ./cmd/loadbench
build profbench bench ./cmd/profbench
build gendata bench ./cmd/gendata
build benchrun bench ./cmd/benchrun
for must in gendata benchrun; do
	[ -x "$BIN/$must" ] || { echo "bench: $must is required" >&2; exit 1; }
done

echo "bench: generating inputs (cached)" >&2
"$BIN/gendata" -dir "$CACHE/data"

"$BIN/benchrun" -root . -o BENCHMARKS.md -runs "${BENCH_RUNS:-5}" -only "${BENCH_ONLY:-}"
