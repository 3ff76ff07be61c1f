#!/usr/bin/env bash
# gpu-check.sh: the gpuload checks that need a real NVIDIA GPU.
#
# NOT RUNNABLE IN CI OR ON THE DEVELOPMENT MACHINES: they have no GPU. Everything
# CUDA is tested there against the fake driver (gpuload/internal/cuda/testdata/
# fakecuda.c) by `go test ./...`. Run this script by hand on a machine with an
# NVIDIA GPU, its driver (libcuda.so.1) and Go; no CUDA SDK is needed.
#
# It:
#   1. builds everything (go build ./..., libgpuload.so);
#   2. runs the CUDA backend tests against the real driver (PREP_LIBCUDA set,
#      so the tests do not substitute the fake; tests that inject errors skip);
#   3. measures end-to-end shard -> device throughput as a fraction of the
#      pinned cuMemcpyHtoD peak measured by the same program in the same run,
#      and the CPU cores busy, printing a short table
#      (target: >= 0.85 x peak with <= 1 CPU core busy);
#   4. measures the backend's CPU per batch apart from the copies
#      (BenchmarkCUDAControlPath: 4 KiB blocks, so the figures are the
#      pipeline's hand-offs, driver calls and event waits).
#
# Usage: scripts/gpu-check.sh [GiB of shards, default 4] [device ordinal, default 0]
# Env:   GPUCHECK_DIR (shard set directory, default $TMPDIR/prep-gpu-check),
#        PREP_LIBCUDA (driver library, default libcuda.so.1).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

gib="${1:-4}"
device="${2:-0}"
dir="${GPUCHECK_DIR:-${TMPDIR:-/tmp}/prep-gpu-check}"
export PREP_LIBCUDA="${PREP_LIBCUDA:-libcuda.so.1}"

if ! command -v nvidia-smi >/dev/null 2>&1; then
	echo "gpu-check: nvidia-smi not found: this script needs a machine with an NVIDIA GPU" >&2
	exit 1
fi
nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader

echo "== build"
go build ./...
go build -buildmode=c-shared -o gpuload/capi/libgpuload.so ./gpuload/capi

echo "== CUDA backend tests against the real driver ($PREP_LIBCUDA)"
# One run: the filtered -v listing, and (pipefail) go test's own status.
go test -count=1 -run 'CUDA' -v ./gpuload/ 2>&1 | { grep -E '^(=== RUN|--- |ok|FAIL|PASS)|SKIP' || true; }

echo "== throughput (shard set in $dir, ${gib} GiB, device $device)"
go run ./gpuload/internal/gpubench -dir "$dir" -gib "$gib" -device "$device"

echo "== control path: CPU per batch with 4 KiB blocks (real driver)"
go test -run '^$' -bench CUDAControlPath -benchtime 5x -count 3 ./gpuload/ 2>&1 | { grep -E '^Benchmark|^ok|FAIL' || true; }
echo "gpu-check: done (remove $dir when finished)"
