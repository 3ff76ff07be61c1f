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
# Never edit BENCHMARKS.md by hand: a section measured by hand goes into its
# own file (bench/notes/<section>.md, bench/notes/targets.md,
# bench/gpu-results.md, bench/ANALYSIS.md; see bench/notes/README.md), which
# every render includes at its place. After changing one,
# `.cache/bench/bin/benchrun -render` rewrites BENCHMARKS.md from the last
# run's .cache/bench/results.json without measuring.
#
# Environment: GO (default go), BENCH_RUNS (default 5), BENCH_ONLY (comma
# list of stages: convert (with its peers and limits), plan, verify, gpuload, s3,
# filter;
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
build s3bench bench ./cmd/s3bench
build filterbench bench ./cmd/filterbench
# gpuload's Go benchmarks (the jagged host-delivery ratio) as a test binary.
rm -f "$BIN/gpuload.test"
if ! $GO test -c -o "$BIN/gpuload.test" ./gpuload 2>"$CACHE/build-gpuload.test.log"; then
	echo "bench: the gpuload test binary did not build; its rows will say not measured:" >&2
	sed 's/^/  /' "$CACHE/build-gpuload.test.log" | head -20 >&2
fi
for must in gendata benchrun; do
	[ -x "$BIN/$must" ] || { echo "bench: $must is required" >&2; exit 1; }
done

echo "bench: generating inputs (cached)" >&2
"$BIN/gendata" -dir "$CACHE/data"

if [ "${BENCH_ONLY:-}" != s3 ] && [ "${BENCH_ONLY:-}" != filter ]; then
	"$BIN/benchrun" -root . -o BENCHMARKS.md -runs "${BENCH_RUNS:-5}" -only "${BENCH_ONLY:-}"
fi

# Plan with a row filter against DuckDB's count(*) ... WHERE of the same
# predicate, in the same run (bench/filter-results.md; needs node and
# .cache/duckdb, like the value tests).
if [ -z "${BENCH_ONLY:-}" ] || [[ ",${BENCH_ONLY}," == *,filter,* ]]; then
	if [ -x "$BIN/filterbench" ] && [ -x "$BIN/prep" ] && [ -d .cache/duckdb ]; then
		"$BIN/filterbench" -prep "$BIN/prep" -dir "$CACHE/filter" -o bench/filter-results.md -runs "${BENCH_FILTER_RUNS:-3}"
	else
		echo "bench: filterbench, prep or DuckDB (.cache/duckdb) missing; the filter section is not measured" >&2
	fi
fi

# Object-store sources: convert and plan from an in-process S3 server on
# 127.0.0.1 against the same runs from local files (its own section of
# BENCHMARKS.md, also written to bench/s3-results.md, which benchrun
# includes, so a later run of benchrun alone keeps it).
if [ -z "${BENCH_ONLY:-}" ] || [[ ",${BENCH_ONLY}," == *,s3,* ]]; then
	if [ -x "$BIN/s3bench" ] && [ -x "$BIN/prep" ]; then
		"$BIN/s3bench" -prep "$BIN/prep" -data "$CACHE/data" -o BENCHMARKS.md -runs "${BENCH_S3_RUNS:-5}"
	else
		echo "bench: s3bench or prep did not build; the object-store section is not measured" >&2
	fi
fi
