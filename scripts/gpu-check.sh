#!/usr/bin/env bash
# gpu-check.sh: the gpuload checks and measurements that need a real NVIDIA GPU,
# in one run of a few minutes (budget: well under 10).
#
# CI and the development machines have no GPU: everything CUDA is tested there
# against the fake driver (gpuload/internal/cuda/testdata/fakecuda.c) and the
# fake cuFile library by `go test ./...`. Run this script by hand on a machine
# with an NVIDIA GPU, its driver (libcuda.so.1) and Go; no CUDA SDK is needed.
# PyTorch (with CUDA) and pyarrow are needed for the end-to-end study only; what
# is missing is reported and skipped.
#
# It:
#   1. prints the machine: GPU, driver, PCIe link, CPUs, kernel, the file system
#      of the shard directory, whether libcufile.so (GPUDirect Storage) loads;
#   2. builds everything (go build ./..., libgpuload.so, gpubench);
#   3. runs the CUDA backend tests against the real driver (PREP_LIBCUDA set, so
#      the tests do not substitute the fake; tests that inject errors skip);
#   4. warm-cache table: every transfer path (the default, which registers a
#      resident shard; O_DIRECT ring; pread ring; GPUDirect Storage when present)
#      against the pinned cuMemcpyHtoD peak of the same run, with CPU cores
#      busy, Open's time and page faults, and per-batch read/queue/wait times
#      (target: default >= 0.85 x peak, <= 1 core busy);
#   5. cold-cache table: the same paths with the shard dropped from the page
#      cache before each pass, against the disk's sequential read rate measured
#      in the same run (target: default >= 0.85 x the disk's rate);
#   6. where the CPU goes on the default path: pprof of the warm and cold passes
#      (Open's registration and page faults, driver calls, event waits), and a
#      perf profile of the kernel side when perf is installed;
#   7. the backend's CPU per batch apart from the copies (BenchmarkCUDAControlPath);
#   8. the end-to-end study: a recsys MLP trained on the GPU fed by (a) prep's
#      CUDA backend with DLPack, (b) pyarrow -> NumPy -> torch in a DataLoader
#      (best of 0, 4, 8 workers), (c) prep's host backend with pin_memory,
#      beside the model-alone ceiling: steps/s, GPU utilization, CPU cores
#      (target: (a) >= 10x (b), >= 0.9x the ceiling, <= 1 core for the data path).
# A step that fails is reported and the others still run; the exit status is
# 1 if any failed.
#
# Usage: scripts/gpu-check.sh [GiB of shards, default 4] [device ordinal, default 0]
# Env:   GPUCHECK_DIR (work directory, default $TMPDIR/prep-gpu-check; put it on
#        the local NVMe disk the shards would live on), PREP_LIBCUDA (driver
#        library, default libcuda.so.1), PREP_LIBCUFILE (cuFile library),
#        GPUCHECK_E2E_ROWS (rows of the end-to-end input, default 4000000),
#        PYTHON (default python3),
#        GPUCHECK_DRY_RUN=1: no GPU: run every step against the fake driver, with
#        small sizes and the end-to-end study's CPU parts only (--dry-run), to
#        check the script itself.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

gib="${1:-4}"
device="${2:-0}"
work="${GPUCHECK_DIR:-${TMPDIR:-/tmp}/prep-gpu-check}"
dry="${GPUCHECK_DRY_RUN:-}"
rows="${GPUCHECK_E2E_ROWS:-4000000}"
python="${PYTHON:-python3}"
mkdir -p "$work/bin" "$work/prof"
failed=()

# step NAME SECONDS CMD...: runs CMD with a time limit, recording a failure.
step() {
	local name=$1 limit=$2
	shift 2
	echo
	echo "== $name"
	local t0=$SECONDS
	if ! timeout "$limit" "$@"; then
		echo "gpu-check: step failed or ran past ${limit}s: $name" >&2
		failed+=("$name")
	fi
	echo "-- $name: $((SECONDS - t0)) s"
}

if ! command -v go >/dev/null 2>&1; then
	echo "gpu-check: go not found (PATH=$PATH)" >&2
	exit 1
fi
if [ -n "$dry" ]; then
	echo "gpu-check: DRY RUN against the fake CUDA driver: no figure below is a GPU measurement"
	gcc -shared -fPIC -O1 -o "$work/bin/libfakecuda.so" gpuload/internal/cuda/testdata/fakecuda.c -lpthread || exit 1
	export PREP_LIBCUDA="$work/bin/libfakecuda.so"
	gib=0.25
	rows=200000
else
	if ! command -v nvidia-smi >/dev/null 2>&1; then
		echo "gpu-check: nvidia-smi not found: this script needs a machine with an NVIDIA GPU (GPUCHECK_DRY_RUN=1 checks it without one)" >&2
		exit 1
	fi
	export PREP_LIBCUDA="${PREP_LIBCUDA:-libcuda.so.1}"
fi

echo "== machine ($(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown))"
echo "command: scripts/gpu-check.sh $gib $device (GPUCHECK_DIR=$work)"
if [ -z "$dry" ]; then
	nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,memory.total --format=csv
fi
echo "cpus: $(nproc), kernel: $(uname -r), memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
echo "shard directory file system: $(df -T "$work" | awk 'NR==2 {print $2, "on", $1}')"
if ldconfig -p 2>/dev/null | grep -q libcufile; then echo "libcufile: $(ldconfig -p | grep -m1 libcufile)"; else echo "libcufile: not installed (GPUDirect Storage rows will say so)"; fi

build() {
	go build ./... &&
		go build -buildmode=c-shared -o "$work/bin/libgpuload.so" ./gpuload/capi &&
		go build -o "$work/bin/gpubench" ./gpuload/internal/gpubench &&
		go build -o "$work/bin/prep" ./cmd/prep &&
		(cd bench && go build -o "$work/bin/e2edata" ./cmd/e2edata)
}
step "build" 240 bash -c "work='$work'; $(declare -f build); build"

tests() {
	# One run: the filtered -v listing, and (pipefail) go test's own status.
	set -o pipefail
	go test -count=1 -run 'CUDA|GDS|TransferStats' -v ./gpuload/ 2>&1 | { grep -E '^(--- |ok|FAIL|PASS)|SKIP' || true; }
}
if [ -z "$dry" ]; then
	step "CUDA backend tests against the real driver ($PREP_LIBCUDA)" 150 bash -c "$(declare -f tests); tests"
else
	step "CUDA backend tests against the fake driver" 150 bash -c "$(declare -f tests); tests"
fi

step "throughput: warm and cold page cache (${gib} GiB shard in $work/gpubench, device $device)" 200 \
	"$work/bin/gpubench" -dir "$work/gpubench" -gib "$gib" -device "$device" -cpuprofile "$work/prof"

profiles() {
	for p in warm-default cold-default; do
		[ -f "$work/prof/$p.pprof" ] || continue
		echo "--- $p: where the CPU went (pprof, cumulative, top 25)"
		go tool pprof -top -cum -nodecount 25 "$work/bin/gpubench" "$work/prof/$p.pprof" 2>/dev/null | sed -n '1,32p'
		echo "--- $p: driver calls, waits, reads and registration"
		go tool pprof -top -cum -focus 'MemHostRegister|MemcpyHtoDAsync|EventRecord|EventSynchronize|ReadAt|ReadBlock|residentFraction|FileRead|Bind' \
			"$work/bin/gpubench" "$work/prof/$p.pprof" 2>/dev/null | sed -n '6,20p'
	done
	if command -v perf >/dev/null 2>&1; then
		echo "--- kernel and driver side of the warm default path (perf, one pass)"
		perf record -q -g -o "$work/prof/perf.data" -- "$work/bin/gpubench" -dir "$work/gpubench" -device "$device" -passes 1 -cold-passes 0 >/dev/null 2>&1 &&
			perf report -q -i "$work/prof/perf.data" --no-children -g none --sort dso,sym 2>/dev/null | grep -v '^$' | head -30
	else
		echo "--- perf not installed: kernel-side profile skipped"
	fi
}
step "CPU profile of the default path" 90 bash -c "work='$work' device='$device'; $(declare -f profiles); profiles"

step "control path: CPU per batch with 4 KiB blocks" 90 bash -c \
	"set -o pipefail; go test -run '^\$' -bench CUDAControlPath -benchtime 5x -count 3 ./gpuload/ 2>&1 | { grep -E '^Benchmark|^ok|FAIL' || true; }"

e2e() {
	local d="$work/e2e"
	if ! "$python" -c 'import torch' 2>/dev/null; then
		echo "end to end: skipped: $python has no torch"
		return 0
	fi
	"$python" -m unittest discover -s bench/e2e 2>&1 | tail -1
	mkdir -p "$d"
	[ -f "$d/data/STAMP-$rows" ] || {
		rm -rf "$d/data" "$d/shards" && "$work/bin/e2edata" -o "$d/data" -rows "$rows" -files 8 && touch "$d/data/STAMP-$rows"
	} || return 1
	if [ ! -f "$d/shards/manifest.json" ]; then
		"$work/bin/prep" plan --source "$d/data" --seed 1 --epochs 1 --global-batch 4096 --world-size 1 --workers 1 \
			--shuffle global --remainder drop -o "$d/plan.json" -q &&
			"$work/bin/prep" convert --plan "$d/plan.json" --spec bench/e2e/features.yaml -o "$d/shards" -q || return 1
	fi
	# The transfer path the cuda backend picks for this set (what (a) uses).
	"$work/bin/prep" load "$d/shards" --backend cuda --device "$device" --json 2>&1 | grep -E '"(path|reason|gb_per_s|error)"' || true
	local extra=()
	[ -n "$dry" ] && extra=(--dry-run)
	"$python" bench/e2e/train_e2e.py --data "$d/data" --shards "$d/shards" --lib "$work/bin/libgpuload.so" \
		--device "$device" --json "$work/e2e.json" "${extra[@]}"
}
step "end to end: recsys MLP fed by prep (cuda, host) and by pyarrow" 240 bash -c \
	"work='$work' rows='$rows' python='$python' dry='$dry' device='$device'; $(declare -f e2e); e2e"

echo
if [ ${#failed[@]} -gt 0 ]; then
	printf 'gpu-check: FAILED: %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "gpu-check: done (results in $work: e2e.json, prof/; remove $work when finished)"
