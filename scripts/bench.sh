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
# list of stages: convert (with its peers and limits), plan, verify, gpuload,
# python, s3, images, packing, filter, decode; verify and gpuload read the shard set
# the convert stage wrote).
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
build imagebench bench ./cmd/imagebench
build packbench bench ./cmd/packbench
build filterbench bench ./cmd/filterbench
build decbench bench ./cmd/decbench
# gpuload's Go benchmarks (the jagged host-delivery ratio) as a test binary.
rm -f "$BIN/gpuload.test"
if ! $GO test -c -o "$BIN/gpuload.test" ./gpuload 2>"$CACHE/build-gpuload.test.log"; then
	echo "bench: the gpuload test binary did not build; its rows will say not measured:" >&2
	sed 's/^/  /' "$CACHE/build-gpuload.test.log" | head -20 >&2
fi
for must in gendata benchrun; do
	[ -x "$BIN/$must" ] || { echo "bench: $must is required" >&2; exit 1; }
done

if [ "${BENCH_ONLY:-}" != python ]; then
	echo "bench: generating inputs (cached)" >&2
	"$BIN/gendata" -dir "$CACHE/data"
fi

want_stage() { [ -z "${BENCH_ONLY:-}" ] || [[ ",${BENCH_ONLY}," == *,$1,* ]]; }

# Packing (prep plan --pack): efficiency, plan and convert cost against
# DuckDB in the same run; bench/notes/packing.md, which benchrun includes.
if want_stage packing; then
	if [ -x "$BIN/packbench" ] && [ -x "$BIN/prep" ]; then
		"$BIN/packbench" -prep "$BIN/prep" -work "$CACHE/pack" -o bench/notes/packing.md -runs "${BENCH_PACK_RUNS:-3}"
	else
		echo "bench: packbench or prep did not build; the packing section is not measured" >&2
	fi
fi

# The Python reader (gpuload/python): the mapped Loader, ShardDataset and
# DataLoader workers against a NumPy memmap loop over the same shard, at 30 KB
# and 950 KB batches. It rewrites its part of bench/notes/gpuload-host.md,
# which the render below includes.
if want_stage python; then
	if /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null && [ -x "$BIN/prep" ] &&
		$GO build -buildmode=c-shared -o gpuload/python/gpuload/libgpuload.so ./gpuload/capi; then
		rm -f gpuload/python/gpuload/libgpuload.h
		echo "bench: the Python reader" >&2
		PREP="$BIN/prep" PYTHONPATH=gpuload/python /usr/bin/python3 gpuload/python/bench/bench_dataset.py \
			--rounds "${BENCH_RUNS:-5}" --batch 256,8192 --work "$CACHE/python" --update bench/notes/gpuload-host.md >/dev/null ||
			echo "bench: the Python benchmark failed; bench/notes/gpuload-host.md keeps its last figures" >&2
	else
		echo "bench: /usr/bin/python3 with numpy and torch, prep or libgpuload.so missing: the Python section keeps its last figures" >&2
	fi
fi

# Plan with a row filter against DuckDB's count(*) ... WHERE of the same
# predicate, in the same run (bench/filter-results.md, which benchrun
# includes, so it runs before the render; needs node and .cache/duckdb, like
# the value tests).
if [ -z "${BENCH_ONLY:-}" ] || [[ ",${BENCH_ONLY}," == *,filter,* ]]; then
	if [ -x "$BIN/filterbench" ] && [ -x "$BIN/prep" ] && [ -d .cache/duckdb ]; then
		"$BIN/filterbench" -prep "$BIN/prep" -dir "$CACHE/filter" -o bench/filter-results.md -runs "${BENCH_FILTER_RUNS:-3}" ||
			echo "bench: filterbench failed; bench/filter-results.md keeps its last figures" >&2
	else
		echo "bench: filterbench, prep or DuckDB (.cache/duckdb) missing; the filter section is not measured" >&2
	fi
fi

# Parquet decoding against DuckDB's scan of the same DuckDB-written file,
# in the same run (bench/decode-results.md, which benchrun includes; needs
# node and .cache/duckdb).
if [ -z "${BENCH_ONLY:-}" ] || [[ ",${BENCH_ONLY}," == *,decode,* ]]; then
	if [ -x "$BIN/decbench" ] && [ -x "$BIN/prep" ] && [ -d .cache/duckdb ]; then
		"$BIN/decbench" -prep "$BIN/prep" -dir "$CACHE/decode" -o bench/decode-results.md -runs "${BENCH_DECODE_RUNS:-7}" ||
			echo "bench: decbench failed; bench/decode-results.md keeps its last figures" >&2
	else
		echo "bench: decbench, prep or DuckDB (.cache/duckdb) missing; the decode section is not measured" >&2
	fi
fi

# The stages benchrun measures itself; the note and results-file stages
# above (and images, below) only re-render the report from the last full run.
others=$(echo ",${BENCH_ONLY:-}," | sed -e 's/,python,/,/g' -e 's/,packing,/,/g' -e 's/,images,/,/g' -e 's/,filter,/,/g' -e 's/,decode,/,/g' -e 's/^,*//' -e 's/,*$//')
if [ -n "${BENCH_ONLY:-}" ] && [ -z "$others" ]; then
	if [ -f "$CACHE/results.json" ]; then
		"$BIN/benchrun" -root . -o BENCHMARKS.md -render
	else
		echo "bench: no $CACHE/results.json (no full run yet): the notes are written, BENCHMARKS.md is not re-rendered" >&2
	fi
elif [ "$others" != s3 ]; then
	"$BIN/benchrun" -root . -o BENCHMARKS.md -runs "${BENCH_RUNS:-5}" -only "$others"
fi

# Images: prep convert's image policy against Pillow on the same JPEGs
# (its own section, also written to bench/image-results.md, which benchrun
# includes).
if [ -z "${BENCH_ONLY:-}" ] || [[ ",${BENCH_ONLY}," == *,images,* ]]; then
	if [ -x "$BIN/imagebench" ] && [ -x "$BIN/prep" ]; then
		"$BIN/imagebench" -root . -prep "$BIN/prep" -dir "$CACHE/images" -o BENCHMARKS.md -runs "${BENCH_IMAGE_RUNS:-3}"
	else
		echo "bench: imagebench or prep did not build; the images section is not measured" >&2
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
